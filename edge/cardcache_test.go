package edge_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// A card is served with Cache-Control, an ETag and a Last-Modified that
// every edge serving it agrees on (when its registered card last changed,
// not when the edge started), and conditional GETs are answered as RFC
// 9110 orders them: If-None-Match decides when sent (weak comparison),
// else If-Modified-Since.
func TestCardConditionalGETs(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, edge: edge.Config{DefaultAgent: "echo"}})
	second := h.startEdge(h.b, edge.Config{DefaultAgent: "echo", PublicURL: h.url})
	h.waitAgent(second, "echo")
	get := func(base string, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/agents/echo/.well-known/agent-card.json", nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	first := get(h.url, nil)
	etag, modified := first.Header.Get("ETag"), first.Header.Get("Last-Modified")
	if first.StatusCode != 200 || etag == "" || modified == "" || !strings.HasPrefix(first.Header.Get("Cache-Control"), "public, max-age=") {
		t.Fatalf("card: %d, headers %v", first.StatusCode, first.Header)
	}
	reg := registration(t, h, "echo")
	if reg.CardSince == nil || modified != reg.CardSince.UTC().Format(http.TimeFormat) {
		t.Fatalf("Last-Modified %q, want when the registered card changed (%v)", modified, reg.CardSince)
	}
	if other := get(second, nil); other.Header.Get("ETag") != etag || other.Header.Get("Last-Modified") != modified {
		t.Fatalf("another edge serves the card with ETag %q, Last-Modified %q; the first %q, %q",
			other.Header.Get("ETag"), other.Header.Get("Last-Modified"), etag, modified)
	}
	now := time.Now().UTC().Add(time.Second).Format(http.TimeFormat)
	long := time.Now().UTC().Add(-time.Hour).Format(http.TimeFormat)
	for _, c := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"its ETag", map[string]string{"If-None-Match": etag}, http.StatusNotModified},
		{"its ETag, weak, among others", map[string]string{"If-None-Match": `"x", W/` + etag}, http.StatusNotModified},
		{"any", map[string]string{"If-None-Match": "*"}, http.StatusNotModified},
		{"another ETag", map[string]string{"If-None-Match": `"x"`}, http.StatusOK},
		{"another ETag beats a date", map[string]string{"If-None-Match": `"x"`, "If-Modified-Since": now}, http.StatusOK},
		{"unchanged since", map[string]string{"If-Modified-Since": now}, http.StatusNotModified},
		{"changed since", map[string]string{"If-Modified-Since": long}, http.StatusOK},
		{"not a date", map[string]string{"If-Modified-Since": "yesterday"}, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, base := range []string{h.url, second} {
				resp := get(base, c.hdr)
				if resp.StatusCode != c.want {
					t.Fatalf("%d, want %d", resp.StatusCode, c.want)
				}
				if resp.Header.Get("ETag") != etag || resp.Header.Get("Last-Modified") != modified || resp.Header.Get("Cache-Control") == "" {
					t.Fatalf("headers %v", resp.Header)
				}
			}
		})
	}
}

// registration reads agent's registration as edges read it: through a
// directory of the registry.
func registration(t *testing.T, h *harness, agent string) schemas.AgentRegistration {
	t.Helper()
	d := h.b.NewAgentDirectory()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-d.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the directory never caught up with the registry")
	}
	reg, ok := d.Get(agent)
	if !ok {
		t.Fatalf("agent %s is not registered", agent)
	}
	return reg
}
