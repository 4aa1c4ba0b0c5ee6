package edge_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/a2abus/a2abus/edge"
)

// /mcp is not an A2A call, but the edge still guards it: limited by
// address, and refused to a browser page of another origin.
func TestMCPRouteIsLimitedAndSameOrigin(t *testing.T) {
	var hits atomic.Int64
	h := newHarness(t, harnessOptions{edge: edge.Config{
		Limits: edge.LimitsConfig{Default: edge.Limits{Rate: 0.001, Burst: 2}},
		MCP: func(*edge.InProcess) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1); w.WriteHeader(http.StatusNoContent) })
		},
	}})
	post := func(site string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", h.url+"/mcp", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		if site != "" {
			req.Header.Set("Sec-Fetch-Site", site)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post("cross-site"); got != http.StatusForbidden {
		t.Fatalf("a cross-site POST: %d", got)
	}
	// The refused page spent none of the address's burst: the route rules
	// come before the rate, as at the front door.
	for i := range 2 {
		if got := post(""); got != http.StatusNoContent {
			t.Fatalf("call %d of the burst: %d", i+1, got)
		}
	}
	if got := post(""); got != http.StatusTooManyRequests {
		t.Fatalf("past the burst: %d", got)
	}
	if n := hits.Load(); n != 2 {
		t.Fatalf("the MCP handler ran %d times, want 2", n)
	}
}
