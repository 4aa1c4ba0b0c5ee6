package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// An untrusted caller — here by its principal — is refused with the
// authorization error on every binding, before anything of a task is
// read, while another caller of the same edge is served.
func TestUntrustedCallerIsRefusedOnEveryBinding(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{
		{Key: aliceKey, Principal: "alice"}, {Key: bobKey, Principal: "bob"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, edge: edge.Config{Auth: a, DefaultAgent: "echo",
		Trust: edge.TrustPolicy{Rules: []edge.TrustRule{{Level: edge.TrustUntrusted, Principals: []string{"bob"}}}}}})
	alice, bob := op{key: aliceKey}, op{key: bobKey}
	for _, w := range []wire{jsonRPCWire(h.url, "1.0"), jsonRPCWire(h.url, "0.3"), restWire(h.url), grpcWire(t, h.edges[0])} {
		t.Run(w.name, func(t *testing.T) {
			id, r := w.send(t, alice, workers.AskCommand, "")
			if r != "" || id == "" {
				t.Fatalf("alice's send: %q %q", id, r)
			}
			if _, r := w.send(t, bob, "hi", ""); r != "UNAUTHORIZED" {
				t.Errorf("bob's send: refused with %q, want UNAUTHORIZED", r)
			}
			if r := w.get(t, bob, id); r != "UNAUTHORIZED" {
				t.Errorf("bob's get: refused with %q, want UNAUTHORIZED", r)
			}
			if r := w.subscribe(t, bob, id, ""); r != "UNAUTHORIZED" {
				t.Errorf("bob's subscription: refused with %q, want UNAUTHORIZED", r)
			}
			if r := w.get(t, alice, id); r != "" {
				t.Errorf("alice's get: refused with %q", r)
			}
		})
	}
	// The side doors admitted as A2A calls are (the caller's budgets)
	// refuse the level too.
	if code, _, body := as(t, bobKey, "GET", h.url+"/a2a/budget", "", ""); code != http.StatusForbidden {
		t.Errorf("bob's budgets: HTTP %d %s, want 403", code, body)
	}
	if code, _, body := as(t, aliceKey, "GET", h.url+"/a2a/budget", "", ""); code != http.StatusOK {
		t.Errorf("alice's budgets: HTTP %d %s", code, body)
	}
}

// from is an HTTP client whose connections come from the loopback
// address ip.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// sendAs sends text to agent over JSON-RPC 1.0 with client and header;
// it returns the task, or the error's code.
func sendAs(t *testing.T, client *http.Client, base, agent, text string, header map[string]string) (schemas.Task, int) {
	t.Helper()
	msg := schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{"message": msg}})
	req, _ := http.NewRequest(http.MethodPost, base+"/agents/"+agent, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		Result struct {
			Task schemas.Task `json:"task"`
		} `json:"result"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("SendMessage: %s", raw)
	}
	if r.Error != nil {
		return schemas.Task{}, r.Error.Code
	}
	return r.Result.Task, 0
}

// trustOf is an agent that answers with the trust level of its task, as
// agents see it.
func trustOf(name string) workers.Definition {
	return workers.Definition{Name: name, Card: schemas.AgentCard{Name: name, Description: "says its caller's trust level", Version: "1"},
		Agent: workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
			return out.Artifact(ctx, schemas.Artifact{ArtifactID: "trust", Parts: []schemas.Part{schemas.TextPart(req.Trust)}})
		})}
}

// The level of a call comes from its source network, first rule first
// (clients bound to 127.0.0.2 and 127.0.0.3), else the defaults
// (loopback: local); a level's agent list keeps it to those agents; the
// level is recorded on the task and seen by its agent.
func TestTrustLevelFromTheSourceAddress(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo"), trustOf("whoami")}, edge: edge.Config{DefaultAgent: "echo",
		Trust: edge.TrustPolicy{
			Rules: []edge.TrustRule{
				{Level: edge.TrustUntrusted, Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")}},
				{Level: "partner", Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}},
			},
			Levels: map[string]edge.TrustLevel{"partner": {Agents: []string{"echo", "whoami"}}, edge.TrustLocal: {}},
		}}})
	partner, stranger, local := from("127.0.0.2"), from("127.0.0.3"), from("127.0.0.1")
	for _, c := range []struct {
		name   string
		client *http.Client
		agent  string
		code   int
		level  string
	}{
		{"the partner, to echo", partner, "echo", 0, ""},
		{"the partner, to whoami", partner, "whoami", 0, "partner"},
		{"a stranger", stranger, "echo", -31403, ""},
		{"a stranger, to whoami", stranger, "whoami", -31403, ""},
		{"a local caller", local, "whoami", 0, edge.TrustLocal},
	} {
		task, code := sendAs(t, c.client, h.url, c.agent, "hi", nil)
		if code != c.code {
			t.Errorf("%s: code %d, want %d", c.name, code, c.code)
			continue
		}
		if c.level == "" {
			continue
		}
		if len(task.Artifacts) != 1 || *task.Artifacts[0].Parts[0].Text != c.level {
			t.Errorf("%s: the agent saw trust level %+v, want %q", c.name, task.Artifacts, c.level)
		}
		rec, _, err := h.b.GetTask(context.Background(), task.ID)
		if err != nil || rec.Trust != c.level {
			t.Errorf("%s: the task records level %q (%v), want %q", c.name, rec.Trust, err, c.level)
		}
	}

	// A level's agent list: the partner may call echo and whoami only.
	h2 := h.startEdge(h.b, edge.Config{DefaultAgent: "echo", Trust: edge.TrustPolicy{
		Rules:  []edge.TrustRule{{Level: "partner", Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}},
		Levels: map[string]edge.TrustLevel{"partner": {Agents: []string{"echo"}}},
	}})
	h.waitAgent(h2, "whoami")
	if _, code := sendAs(t, partner, h2, "whoami", "hi", nil); code != -31403 {
		t.Errorf("the partner calling an agent its level does not list: code %d, want -31403", code)
	}
	if _, code := sendAs(t, partner, h2, "echo", "hi", nil); code != 0 {
		t.Errorf("the partner calling echo: code %d", code)
	}
}

// X-Forwarded-For and Forwarded name the source only when the peer is a
// trusted proxy; from any other peer they are ignored.
func TestForwardedSourceOnlyFromATrustedProxy(t *testing.T) {
	rules := []edge.TrustRule{{Level: edge.TrustUntrusted, Sources: []netip.Prefix{netip.MustParsePrefix("198.51.100.7/32")}}}
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, edge: edge.Config{DefaultAgent: "echo",
		Trust: edge.TrustPolicy{Rules: rules}}})
	proxied := h.startEdge(h.b, edge.Config{DefaultAgent: "echo", Trust: edge.TrustPolicy{Rules: rules,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")}}})
	h.waitAgent(proxied, "echo")
	c := from("127.0.0.1")
	for _, tc := range []struct {
		name   string
		base   string
		header map[string]string
		code   int
	}{
		{"a forged X-Forwarded-For from a peer that is no proxy", h.url, map[string]string{"X-Forwarded-For": "198.51.100.7"}, 0},
		{"a forged Forwarded from a peer that is no proxy", h.url, map[string]string{"Forwarded": `for="198.51.100.7:4711"`}, 0},
		{"X-Forwarded-For from a trusted proxy", proxied, map[string]string{"X-Forwarded-For": "198.51.100.7"}, -31403},
		{"the nearest hop that is not a proxy", proxied, map[string]string{"X-Forwarded-For": "203.0.113.9, 198.51.100.7, 10.1.2.3"}, -31403},
		{"a client the chain names before another client", proxied, map[string]string{"X-Forwarded-For": "198.51.100.7, 203.0.113.9"}, 0},
		{"Forwarded from a trusted proxy", proxied, map[string]string{"Forwarded": `for="198.51.100.7:4711";proto=https`}, -31403},
		{"a trusted proxy naming no one", proxied, nil, 0},
	} {
		if _, code := sendAs(t, c, tc.base, "echo", "hi", tc.header); code != tc.code {
			t.Errorf("%s: code %d, want %d", tc.name, code, tc.code)
		}
	}
}
