package edge_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

var update = flag.Bool("update", false, "rewrite golden files")

// The served cards, as 1.0 and 0.3 readers see them, are pinned by golden
// files (go test ./edge -run Golden -update rewrites them after a deliberate
// change).
func TestCardsGolden(t *testing.T) {
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{workers.EchoDefinition("echo"), workers.EchoDefinition("second")},
		edge:   edge.Config{PublicURL: "https://a2abus.example", DefaultAgent: "echo"},
	})
	for name, path := range map[string]string{
		"default.json":      "/.well-known/agent-card.json",
		"second.json":       "/agents/second/.well-known/agent-card.json",
		"agents-list.json":  "/a2a/agents",
		"legacy-agent.json": "/.well-known/agent.json",
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := http.Get(h.url + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, body, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			golden := filepath.Join("testdata", "cards", name)
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Fatalf("%s differs from %s:\n%s", path, golden, pretty.String())
			}
		})
	}
}

// The union card satisfies both generations' required fields.
func TestUnionCardHasBothShapes(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	resp, err := http.Get(h.url + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var card map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&card); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "description", "version", "capabilities", "defaultInputModes", "defaultOutputModes", "skills", "supportedInterfaces", "url", "protocolVersion", "preferredTransport", "additionalInterfaces"} {
		if _, ok := card[k]; !ok {
			t.Errorf("card lacks %q", k)
		}
	}
	ifs := card["supportedInterfaces"].([]any)
	first := ifs[0].(map[string]any)
	if first["protocolVersion"] != schemas.ProtocolVersion {
		t.Errorf("first interface is %v; 1.0 entries must come first", first)
	}
	if card["protocolVersion"] != "0.3.0" || card["preferredTransport"] != "JSONRPC" {
		t.Errorf("0.3 fields: %v %v", card["protocolVersion"], card["preferredTransport"])
	}
}
