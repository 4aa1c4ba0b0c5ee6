package edge_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
)

// Before the edge serves, its port answers: alive, not ready with the
// reason, and every A2A call refused in its binding's error shape with the
// retryable UNAVAILABLE row (503 + Retry-After). After Serve the edge's
// own handler answers everything.
func TestStartingRefusesUntilServe(t *testing.T) {
	m := bus.NewMetrics()
	m.Gauge("a2a_test_gauge", "A gauge of this test.").Set(1)
	st := edge.NewStarting(m, edge.Config{PublicMetrics: true})
	st.SetReason("connecting to NATS")
	ts := httptest.NewServer(st)
	defer ts.Close()

	do := func(method, path, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	unavailable := schemas.ErrUnavailable

	if resp, body := do("GET", "/healthz", ""); resp.StatusCode != 200 {
		t.Errorf("healthz = %d %s", resp.StatusCode, body)
	}
	if resp, body := do("GET", "/readyz", ""); resp.StatusCode != 503 || !strings.Contains(body, "not ready: connecting to NATS") {
		t.Errorf("readyz = %d %q", resp.StatusCode, body)
	}
	if resp, body := do("GET", "/metrics", ""); resp.StatusCode != 200 || !strings.Contains(body, "a2a_test_gauge 1") {
		t.Errorf("metrics = %d %q", resp.StatusCode, body)
	}

	for _, tc := range []struct{ path, body, id string }{
		{"/", `{"jsonrpc":"2.0","id":"call-7","method":"SendMessage","params":{}}`, `"call-7"`},
		{"/agents/echo", `{"jsonrpc":"2.0","id":42,"method":"message/send","params":{}}`, `42`},
		{"/", `not json`, `null`},
		{"/", `{"jsonrpc":"2.0","id":{"bad":1},"method":"GetTask"}`, `null`},
	} {
		resp, body := do("POST", tc.path, tc.body)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("POST %s %s: %d Retry-After %q", tc.path, tc.body, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		var r struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Data    []struct {
					Reason string `json:"reason"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("POST %s: %v: %s", tc.path, err, body)
		}
		if r.JSONRPC != "2.0" || string(r.ID) != tc.id || r.Error.Code != unavailable.Code ||
			len(r.Error.Data) != 1 || r.Error.Data[0].Reason != unavailable.Reason || !strings.Contains(r.Error.Message, "connecting to NATS") {
			t.Errorf("POST %s %s: %s", tc.path, tc.body, body)
		}
	}

	// The HTTP+JSON binding, cards and the agent list: google.rpc.Status.
	for _, path := range []string{"/message:send", "/agents/echo/tasks/t1", "/.well-known/agent-card.json", "/a2a/agents"} {
		method := "GET"
		if strings.Contains(path, ":send") {
			method = "POST"
		}
		resp, body := do(method, path, "")
		var st struct {
			Error struct {
				Code    int    `json:"code"`
				Status  string `json:"status"`
				Details []struct {
					Reason string `json:"reason"`
				} `json:"details"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" ||
			st.Error.Code != 503 || st.Error.Status != unavailable.GRPCStatus || len(st.Error.Details) != 1 || st.Error.Details[0].Reason != unavailable.Reason {
			t.Errorf("%s %s: %d %s (%v)", method, path, resp.StatusCode, body, err)
		}
	}
	// The older REST routes: their own error object, same status.
	if resp, body := do("POST", "/a2a/tasks/send", `{}`); resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, `"code":-31503`) {
		t.Errorf("legacy send: %d %s", resp.StatusCode, body)
	}

	st.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "edge "+r.URL.Path) }))
	for _, path := range []string{"/readyz", "/healthz", "/"} {
		if resp, body := do("GET", path, ""); resp.StatusCode != 200 || body != "edge "+path {
			t.Errorf("after Serve, GET %s = %d %q", path, resp.StatusCode, body)
		}
	}
}
