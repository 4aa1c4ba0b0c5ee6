package edge_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// Aleph (004, "Capability Discovery"): GET {endpoint}/capabilities answers
// a JSON array of the agent's capabilities, derived from its card's skills
// as agent_capabilities derives them, for the default agent at the root
// and for each agent under /agents/{name}; an unknown agent is a 404, and
// the array is cached as the card is (ETag, Cache-Control, 304).
func TestCapabilitiesRoutesAnswerTheCardsSkills(t *testing.T) {
	summarize := workers.EchoDefinition("summarize")
	summarize.Card.Skills = []schemas.AgentSkill{{ID: "summarize", Name: "Summarize", Description: "Summarizes text", Tags: []string{"text"}}}
	h := echoHarness(t, summarize)

	want := func(def workers.Definition) []schemas.Capability {
		var out []schemas.Capability
		for _, sk := range def.Card.Skills {
			out = append(out, schemas.Capability{Name: sk.ID, Description: sk.Description, Tags: sk.Tags, Examples: sk.Examples})
		}
		return out
	}
	for _, tc := range []struct {
		path string
		want []schemas.Capability
	}{
		{"/capabilities", want(workers.EchoDefinition("echo"))},
		{"/agents/echo/capabilities", want(workers.EchoDefinition("echo"))},
		{"/agents/summarize/capabilities", want(summarize)},
	} {
		resp, raw := h.do("GET", tc.path, "", nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: HTTP %d, Content-Type %q: %s", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
		}
		if !strings.HasPrefix(string(raw), "[") {
			t.Fatalf("GET %s: %s, want a JSON array", tc.path, raw)
		}
		var got []schemas.Capability
		if err := json.Unmarshal(raw, &got); err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("GET %s = %s (%v), want %+v", tc.path, raw, err, tc.want)
		}
		etag := resp.Header.Get("ETag")
		if etag == "" || !strings.HasPrefix(resp.Header.Get("Cache-Control"), "public, max-age=") {
			t.Fatalf("GET %s: ETag %q, Cache-Control %q", tc.path, etag, resp.Header.Get("Cache-Control"))
		}
		if resp, raw := h.do("GET", tc.path, "", map[string]string{"If-None-Match": etag}); resp.StatusCode != http.StatusNotModified {
			t.Fatalf("GET %s with its ETag: HTTP %d %s", tc.path, resp.StatusCode, raw)
		}
	}

	// The same entries as agent_capabilities answers: one derivation.
	resp, raw := h.do("POST", "/agents/summarize", `{"jsonrpc":"2.0","id":1,"method":"agent_capabilities","params":{}}`, map[string]string{"Content-Type": "application/json"})
	var rpc struct {
		Result struct {
			Capabilities []schemas.Capability `json:"capabilities"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &rpc); err != nil || resp.StatusCode != http.StatusOK || !reflect.DeepEqual(rpc.Result.Capabilities, want(summarize)) {
		t.Fatalf("agent_capabilities: HTTP %d %s (%v)", resp.StatusCode, raw, err)
	}

	resp, raw = h.do("GET", "/agents/nobody/capabilities", "", nil)
	if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || !strings.Contains(string(raw), `no agent "nobody"`) {
		t.Fatalf("GET /agents/nobody/capabilities: HTTP %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
}
