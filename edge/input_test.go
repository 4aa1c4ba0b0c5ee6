package edge_test

import (
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// Every kind of bad input gets its code and a message a person can act on,
// and the server keeps serving: after each case a valid call still works.
func TestBadInput(t *testing.T) {
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{workers.EchoDefinition("echo")},
		edge:   edge.Config{MaxBodyBytes: 64 << 10, MaxJSONDepth: 20},
	})
	v1 := map[string]string{"A2A-Version": "1.0"}
	valid := `{"jsonrpc":"2.0","id":"ok","method":"GetTask","params":{"id":"` + schemas.NewID() + `"}}`
	deep := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":` + strings.Repeat(`{"a":`, 30) + `1` + strings.Repeat(`}`, 30) + `}`
	deepIDLast := `{"jsonrpc":"2.0","method":"SendMessage","params":` + strings.Repeat(`[`, 30) + `1` + strings.Repeat(`]`, 30) + `,"id":1}`
	big := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"` + strings.Repeat("x", 70<<10) + `"}]}}}`
	cases := []struct {
		name   string
		body   string
		header map[string]string
		want   *schemas.Error
		id     string // expected id echo
	}{
		{"not json", `{"jsonrpc":`, v1, schemas.ErrParse, "null"},
		{"empty body", ``, v1, schemas.ErrParse, "null"},
		{"not an object", `"hello"`, v1, schemas.ErrInvalidRequest, "null"},
		{"batch", `[` + valid + `]`, v1, schemas.ErrInvalidRequest, "null"},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":3,"method":"GetTask"}`, v1, schemas.ErrInvalidRequest, "3"},
		{"missing jsonrpc", `{"id":3,"method":"GetTask"}`, v1, schemas.ErrInvalidRequest, "3"},
		{"missing method", `{"jsonrpc":"2.0","id":3}`, v1, schemas.ErrInvalidRequest, "3"},
		{"method not a string", `{"jsonrpc":"2.0","id":3,"method":7}`, v1, schemas.ErrInvalidRequest, "3"},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"GetTask"}`, v1, schemas.ErrInvalidRequest, "null"},
		{"unknown method", `{"jsonrpc":"2.0","id":"x","method":"TeleportTask"}`, v1, schemas.ErrMethodNotFound, `"x"`},
		{"wrong version", valid, map[string]string{"A2A-Version": "2.0"}, schemas.ErrVersionNotSupported, `"ok"`},
		{"0.3 version on a 1.0 method", valid, map[string]string{"A2A-Version": "0.3"}, schemas.ErrVersionNotSupported, `"ok"`},
		{"oversized body", big, v1, schemas.ErrInvalidRequest, "1"},
		{"too deep", deep, v1, schemas.ErrInvalidRequest, "1"},
		{"too deep, id last", deepIDLast, v1, schemas.ErrInvalidRequest, "null"},
		{"params not an object", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}`, v1, schemas.ErrInvalidParams, "1"},
		{"missing message", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`, v1, schemas.ErrInvalidParams, "1"},
		{"missing messageId", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","parts":[{"text":"x"}]}}}`, v1, schemas.ErrInvalidParams, "1"},
		{"missing role", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","parts":[{"text":"x"}]}}}`, v1, schemas.ErrInvalidParams, "1"},
		{"bad role", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"user","parts":[{"text":"x"}]}}}`, v1, schemas.ErrInvalidParams, "1"},
		{"agent role", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"x"}]}}}`, v1, schemas.ErrInvalidParams, "1"},
		{"no parts", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}}`, v1, schemas.ErrInvalidParams, "1"},
		{"empty part", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{}]}}}`, v1, schemas.ErrInvalidParams, "1"},
		{"two contents", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x","url":"http://x"}]}}}`, v1, schemas.ErrInvalidParams, "1"},
		{"wrong field type", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":5,"role":"ROLE_USER","parts":[{"text":"x"}]}}}`, v1, schemas.ErrInvalidParams, "1"},
		{"negative historyLength", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"historyLength":-1}}}`, v1, schemas.ErrInvalidParams, "1"},
		{"bad timestamp", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"statusTimestampAfter":"yesterday"}}`, v1, schemas.ErrInvalidParams, "1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.post(h.url, "/agents/echo", c.body, c.header)
			mustError(t, r, c.want)
			if r.status != http.StatusOK {
				t.Fatalf("HTTP status %d, want 200 for a JSON-RPC error", r.status)
			}
			if string(r.ID) != c.id {
				t.Fatalf("id = %s, want %s", r.ID, c.id)
			}
			// Still serving.
			ok := h.post(h.url, "/agents/echo", valid, v1)
			mustError(t, ok, schemas.ErrTaskNotFound)
		})
	}
}

func TestVersionHeader(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"x"}]}}}`
	for _, hdr := range []map[string]string{nil, {"A2A-Version": "1.0"}, {"A2A-Version": "1.0.1"}} {
		r := h.post(h.url, "/agents/echo", body, hdr)
		if res := mustResult[schemas.SendMessageResponse](t, r); res.Task == nil {
			t.Fatalf("header %v: no task", hdr)
		}
	}
	// The version may also come as a query parameter.
	r := h.post(h.url, "/agents/echo?A2A-Version=9.9", body, nil)
	mustError(t, r, schemas.ErrVersionNotSupported)
}

func TestUnknownFieldsAreIgnored(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","extra":true,"params":{"future":1,"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"x","novel":{}}],"shiny":"new"}}}`
	if res := mustResult[schemas.SendMessageResponse](t, h.post(h.url, "/", body, nil)); res.Task == nil {
		t.Fatal("no task")
	}
}

func TestRoutesAndHealth(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200} {
		resp, err := http.Get(h.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s = %d", path, resp.StatusCode)
		}
	}
	// JSON-RPC is POST only.
	resp, err := http.Get(h.url + "/agents/echo")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET on the JSON-RPC endpoint = %d", resp.StatusCode)
	}
	// An agent that does not exist.
	r := h.post(h.url, "/agents/nobody", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`, nil)
	if r.status != http.StatusNotFound || r.Error == nil {
		t.Fatalf("unknown agent: status %d", r.status)
	}
}

func TestAgentCards(t *testing.T) {
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{workers.EchoDefinition("echo"), workers.EchoDefinition("second")},
		edge:   edge.Config{DefaultAgent: "echo"},
	})
	get := func(path string, hdr map[string]string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, h.url+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, body := get("/agents/second/.well-known/agent-card.json", nil)
	if resp.StatusCode != 200 || resp.Header.Get("ETag") == "" || !strings.Contains(resp.Header.Get("Cache-Control"), "max-age=") {
		t.Fatalf("card: %d, headers %v", resp.StatusCode, resp.Header)
	}
	var card schemas.AgentCard
	if err := json.Unmarshal(body, &card); err != nil {
		t.Fatal(err)
	}
	if card.Name != "second" || len(card.SupportedInterfaces) < 2 || len(card.Skills) == 0 || card.Version == "" ||
		len(card.DefaultInputModes) == 0 || len(card.DefaultOutputModes) == 0 {
		t.Fatalf("card = %+v", card)
	}
	in := card.SupportedInterfaces[0]
	if in.URL != h.url+"/agents/second" || in.ProtocolBinding != "JSONRPC" || in.ProtocolVersion != "1.0" {
		t.Fatalf("interface = %+v", in)
	}
	// The interface URL in the card works.
	r := h.callAt(h.url, "second", "GetTask", map[string]any{"id": schemas.NewID()})
	mustError(t, r, schemas.ErrTaskNotFound)
	// Conditional GET.
	resp2, _ := get("/agents/second/.well-known/agent-card.json", map[string]string{"If-None-Match": resp.Header.Get("ETag")})
	if resp2.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match = %d", resp2.StatusCode)
	}
	// The default card is the default agent's card.
	_, def := get("/.well-known/agent-card.json", nil)
	_, echo := get("/agents/echo/.well-known/agent-card.json", nil)
	if string(def) != string(echo) {
		t.Fatalf("default card differs from the default agent's card:\n%s\n%s", def, echo)
	}
	// The list holds every card.
	_, list := get("/a2a/agents", nil)
	var agents schemas.AgentList
	if err := json.Unmarshal(list, &agents); err != nil || len(agents.Agents) != 2 || agents.Agents[0].Name != "echo" || agents.Agents[1].Agent != "second" || agents.Agents[1].Kind != "local" {
		t.Fatalf("agent list: %s", list)
	}
	if resp, _ := get("/agents/nobody/.well-known/agent-card.json", nil); resp.StatusCode != 404 {
		t.Fatalf("unknown agent card = %d", resp.StatusCode)
	}
}

// A body of the smallest JSON values ("0,", 4 MiB of them) cost ~40× its
// size in maps and interfaces once decoded, before the part and metadata
// limits could see it. The edge's guard refuses it at the value limit as
// it is read, naming the field, and the whole request costs the process
// (edge, client, bus) a few times the body, not forty.
func TestDenseBodyCostsItsSize(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":{"k":[` + strings.Repeat("0,", 2<<20-100) + `0]}}}}`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := h.post(h.url, "/agents/echo", body, nil)
	runtime.ReadMemStats(&after)
	e := mustError(t, r, schemas.ErrInvalidParams).Error
	if !strings.HasPrefix(e.Message, "message.metadata.k holds more than 65536 JSON values") {
		t.Fatalf("message %q", e.Message)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4*uint64(len(body)) {
		t.Fatalf("a %d-byte body of small values cost %d bytes (%.1f×)", len(body), alloc, float64(alloc)/float64(len(body)))
	}
}
