package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// An agent speaking Aleph's shape (seed 004): a card that declares no
// skills, and its capabilities at GET /capabilities. `a2abus card` prints
// them, and a remote agent of it is listed with them as its skills, so
// GET /a2a/agents?skill= finds it.
func TestAlephCapabilitiesSeenByClientAndGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	aleph := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/agent-card.json":
			fmt.Fprintf(w, `{"name":"aleph","description":"an Aleph agent","version":"1.0.0",
 "supportedInterfaces":[{"url":"http://%s","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],
 "capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[]}`, r.Host)
		case "/capabilities":
			_, _ = w.Write([]byte(`[{"name":"summarize","description":"Summarizes a document"},{"name":"translate","description":"Translates text"}]`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer aleph.Close()

	out := mustCLI(t, "card", aleph.URL)
	if !strings.Contains(out, "  capability summarize: Summarizes a document") || !strings.Contains(out, "  capability translate: Translates text") {
		t.Fatalf("a2abus card of an Aleph agent:\n%s", out)
	}

	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw.json")
	writeFile(t, cfg, fmt.Sprintf(`{"outbound": {"allowLoopback": true},
  "agents": [{"name": "aleph", "kind": "remote", "url": %q}]}`, aleph.URL))
	addr := freeAddr(t)
	gw := startProc(t, "serve", "--listen", addr, "--data-dir", filepath.Join(dir, "gw"), "--nats-listen", "off", "--config", cfg)
	base := "http://" + addr
	waitReady(t, gw, base)
	l := waitAgents(t, base, "?skill=summarize&skill=translate", "the remote agent listed with its capabilities as skills", func(l schemas.AgentList) bool {
		return len(l.Agents) == 1 && l.Agents[0].Agent == "aleph"
	})
	if sk := l.Agents[0].Skills; len(sk) != 2 || sk[0].ID != "summarize" || sk[0].Description != "Summarizes a document" {
		t.Fatalf("skills of the remote agent: %+v", sk)
	}
}
