package edge_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// routeRequest is one request the route-table walks send: a route's
// pattern filled in, for each method it takes.
type routeRequest struct {
	rt           edge.Route
	method, path string
}

// routeRequests expands the table: path variables filled in (task is a
// task id, and a POST to an HTTP+JSON task is its cancel), and a pattern
// without a method tried as GET, POST and DELETE.
func routeRequests(routes []edge.Route, task string) []routeRequest {
	var out []routeRequest
	for _, rt := range routes {
		method, path, ok := strings.Cut(rt.Pattern, " ")
		methods := []string{method}
		if !ok {
			path, methods = rt.Pattern, []string{"GET", "POST", "DELETE"}
		}
		path = strings.NewReplacer("{$}", "", "{agent}", "echo", "{task}", task, "{config}", "c1", "{file...}", "app.js").Replace(path)
		for _, m := range methods {
			p := path
			if m == "POST" && strings.HasSuffix(rt.Pattern, "/tasks/{task}") {
				p += ":cancel" // the HTTP+JSON method of that route that takes a body
			}
			out = append(out, routeRequest{rt, m, p})
		}
	}
	return out
}

// send sends rr with key as its API key ("" for none) and a JSON body
// (none on GET).
func (rr routeRequest) send(h *harness, key, body string) (*http.Response, []byte) {
	h.t.Helper()
	header := map[string]string{}
	if key != "" {
		header["X-API-Key"] = key
	}
	if rr.method != "GET" {
		header["Content-Type"] = "application/json"
		if body == "" {
			body = "{}"
		}
	}
	return h.do(rr.method, rr.path, body, header)
}

func (rr routeRequest) String() string { return rr.method + " " + rr.path + " (" + rr.rt.Pattern + ")" }

// policyEdge is an edge that authenticates (alice, bob; ops is an admin),
// serves every optional route, and allows each caller and each address
// bucket a burst of 60 requests that refills only after many minutes.
func policyEdge(t *testing.T) *harness {
	t.Helper()
	return authHarnessWith(t, edge.Config{
		Push:   true,
		Limits: edge.LimitsConfig{Default: edge.Limits{Rate: 0.001, Burst: 60}},
		MCP: func(*edge.InProcess) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
		},
		NotificationKeys: func() []byte { return []byte(`{"keys":[]}`) },
	})
}

// Every route of the table declares a policy, a limit, a body bound (0:
// it reads none) and an origin rule, and the front door's rows are the
// front door's rules.
func TestEveryRouteDeclaresItsRules(t *testing.T) {
	h := policyEdge(t)
	routes := h.edges[0].Routes()
	front := 0
	for _, rt := range routes {
		if strings.HasPrefix(rt.Policy.String(), "none") || strings.HasPrefix(rt.Limit.String(), "none declared") || strings.HasPrefix(rt.Origins.String(), "none") {
			t.Errorf("%s: policy %s, limit %s, origins %s", rt.Pattern, rt.Policy, rt.Limit, rt.Origins)
		}
		if rt.FrontDoor {
			front++
			if rt.Policy != edge.PolicyCaller || rt.Limit != edge.LimitCaller {
				t.Errorf("front door %s: policy %s, limit %s", rt.Pattern, rt.Policy, rt.Limit)
			}
		}
		if rt.Body < 0 {
			t.Errorf("%s: body bound %d", rt.Pattern, rt.Body)
		}
	}
	if front < 20 || len(routes) < front+12 {
		t.Fatalf("%d routes, %d front doors: %v", len(routes), front, routes)
	}
}

// Walks the route table of an edge that authenticates: each route refuses
// whom its policy excludes, and once a caller's or an address's burst is
// spent every route of that limit refuses it (429, or the binding's
// RATE_LIMITED) while the routes declared without a limit still answer. A
// route added later is walked without touching this test.
func TestRoutePoliciesAndLimitsHoldOnEveryRoute(t *testing.T) {
	h := policyEdge(t)
	reqs := routeRequests(h.edges[0].Routes(), schemas.NewID())
	for _, rr := range reqs {
		switch rr.rt.Policy {
		case edge.PolicyCaller:
			resp, raw := rr.send(h, "", "")
			refusedOn(t, rr.String()+" without credentials", resp, raw, schemas.ErrUnauthenticated)
			resp, raw = rr.send(h, "not-a-key-0123456789abcdef", "")
			refusedOn(t, rr.String()+" with a wrong key", resp, raw, schemas.ErrUnauthenticated)
		case edge.PolicyAdmin, edge.PolicyAdminWrite, edge.PolicyApprover:
			if resp, raw := rr.send(h, "", ""); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s without credentials: HTTP %d %s", rr, resp.StatusCode, raw)
			}
			if resp, raw := rr.send(h, aliceKey, ""); resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s as a principal who is no admin: HTTP %d %s", rr, resp.StatusCode, raw)
			}
		case edge.PolicyWebhookToken:
			for _, header := range []map[string]string{{}, {"Authorization": "Bearer not-the-token"}} {
				header["Content-Type"] = "application/json"
				if resp, raw := h.do(rr.method, rr.path, `{}`, header); resp.StatusCode != http.StatusNotFound {
					t.Errorf("%s with %v: HTTP %d %s", rr, header, resp.StatusCode, raw)
				}
			}
		case edge.PolicyPublic:
			resp, raw := rr.send(h, "", "")
			if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden || resp.StatusCode >= 500 && rr.rt.Pattern != "GET /readyz" {
				t.Errorf("%s without credentials: HTTP %d %s", rr, resp.StatusCode, raw)
			}
		default:
			t.Errorf("%s: policy %s", rr, rr.rt.Policy)
		}
	}

	// Spend alice's burst on one A2A route, and each address bucket's on
	// its first route. A refusal of the caller's limit is what ends the
	// loop; an address bucket is told apart by the route it was spent on.
	exhaust := func(rr routeRequest, key string) {
		t.Helper()
		for range 200 {
			resp, raw := rr.send(h, key, "")
			if rateRefused(resp, raw) {
				return
			}
		}
		t.Fatalf("%s: no refusal after 200 requests", rr)
	}
	spent := map[string]bool{}
	for _, rr := range reqs {
		switch {
		case rr.rt.Limit == edge.LimitCaller && !spent["caller"]:
			spent["caller"] = true
			exhaust(rr, aliceKey)
		case rr.rt.Limit == edge.LimitAddress && !spent[bucketOf(rr)]:
			spent[bucketOf(rr)] = true
			exhaust(rr, "")
		}
	}
	limited := map[edge.Limit]int{}
	for _, rr := range reqs {
		switch rr.rt.Limit {
		case edge.LimitCaller:
			resp, raw := rr.send(h, aliceKey, "")
			refusedOn(t, rr.String()+" over alice's rate", resp, raw, schemas.ErrRateLimited)
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("%s over alice's rate: no Retry-After", rr)
			}
		case edge.LimitAddress:
			resp, raw := rr.send(h, opsKey, "")
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
				t.Errorf("%s over the address's rate: HTTP %d (Retry-After %q) %s", rr, resp.StatusCode, resp.Header.Get("Retry-After"), raw)
			}
		case edge.LimitNone:
			if resp, raw := rr.send(h, opsKey, ""); resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 && rr.rt.Pattern != "GET /readyz" {
				t.Errorf("%s, declared without a limit: HTTP %d %s", rr, resp.StatusCode, raw)
			}
		}
		limited[rr.rt.Limit]++
	}
	// bob's own burst is untouched by alice's: the caller limit is per
	// caller.
	resp, raw := h.do("GET", "/tasks", "", map[string]string{"X-API-Key": bobKey})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("bob after alice spent her rate: HTTP %d %s", resp.StatusCode, raw)
	}
	if limited[edge.LimitCaller] < 20 || limited[edge.LimitAddress] < 8 || limited[edge.LimitNone] < 2 {
		t.Fatalf("routes walked by limit: %v", limited)
	}
}

// rateRefused reports whether an answer is a rate-limit refusal: 429, or
// the JSON-RPC RATE_LIMITED error.
func rateRefused(resp *http.Response, raw []byte) bool {
	if resp.StatusCode == http.StatusTooManyRequests {
		return true
	}
	var rpc struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal(raw, &rpc) == nil && rpc.Error != nil && rpc.Error.Code == schemas.ErrRateLimited.Code
}

// bucketOf is the address bucket a route shares, as its path family: the
// cards (and the capabilities derived from them), the registry admin, the webhook, MCP, JWKS, the agent list.
func bucketOf(rr routeRequest) string {
	p := rr.path
	switch {
	case strings.HasSuffix(p, "/agent-card.json"), strings.HasSuffix(p, "/agent.json"), strings.HasSuffix(p, "/capabilities"):
		return "card"
	case strings.HasPrefix(p, "/a2a/admin/"):
		return "admin"
	}
	return p
}

// Every route that reads a body refuses one past its declared bound, in
// its door's form, before its handler acts on it (the webhook's is walked
// in its own test: its token is checked against a task first).
func TestEveryRouteBoundsItsBody(t *testing.T) {
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{workers.EchoDefinition("echo")},
		edge: edge.Config{
			DefaultAgent: "echo", Push: true, OpenAdmin: true, LoopbackOnly: true, MaxBodyBytes: 2048,
			MCP: func(*edge.InProcess) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					var tooBig *http.MaxBytesError
					if _, err := io.ReadAll(r.Body); errors.As(err, &tooBig) {
						w.WriteHeader(http.StatusRequestEntityTooLarge)
						return
					}
					w.WriteHeader(http.StatusNoContent)
				})
			},
		},
	})
	walked := 0
	for _, rr := range routeRequests(h.edges[0].Routes(), schemas.NewID()) {
		if (rr.method != "POST" && rr.method != "PUT") || rr.rt.Body == 0 || rr.rt.Policy == edge.PolicyWebhookToken {
			continue
		}
		walked++
		body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"pad":"` + strings.Repeat("x", int(rr.rt.Body)) + `"}}`
		resp, raw := rr.send(h, "", body)
		if !strings.Contains(rr.rt.Pattern, " ") && strings.Contains(string(raw), "METHOD_NOT_FOUND") {
			continue // a pattern without a method that does not take this one
		}
		if rr.rt.FrontDoor {
			refusedOn(t, rr.String()+" past its bound", resp, raw, schemas.ErrInvalidRequest)
			continue
		}
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s with %d bytes, bound %d: HTTP %d %s", rr, len(body), rr.rt.Body, resp.StatusCode, raw)
		}
	}
	if walked < 15 {
		t.Fatalf("only %d routes with a body walked", walked)
	}
}

// A starting edge serves the same route table: every route of a serving
// edge's table answers, before the edge is ready, alive (/healthz) or a
// retryable 503, never a 404 or the route's work.
func TestStartingServesTheRouteTable(t *testing.T) {
	h := policyEdge(t)
	st := edge.NewStarting(nil, edge.Config{})
	ts := httptest.NewServer(st)
	defer ts.Close()
	for _, rr := range routeRequests(h.edges[0].Routes(), schemas.NewID()) {
		req, _ := http.NewRequest(rr.method, ts.URL+rr.path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := http.StatusServiceUnavailable
		if rr.rt.Pattern == "GET /healthz" {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			t.Errorf("%s while starting: HTTP %d, want %d: %s", rr, resp.StatusCode, want, raw)
		}
		if want == http.StatusServiceUnavailable && rr.rt.Pattern != "GET /readyz" && resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s while starting: no Retry-After", rr)
		}
	}
}

// A route declared OriginsSame (MCP) refuses every request of a browser
// page of another origin, reads included, and serves the rest; the other
// routes serve such reads (a page may fetch a card).
func TestSameOriginRoutesRefuseCrossSiteReads(t *testing.T) {
	h := policyEdge(t)
	same := 0
	for _, rr := range routeRequests(h.edges[0].Routes(), schemas.NewID()) {
		if rr.method != "GET" || rr.rt.Policy != edge.PolicyPublic || rr.rt.Pattern == "GET /readyz" {
			continue
		}
		for _, header := range []map[string]string{
			{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
			{"Origin": "http://evil.example"},
		} {
			resp, raw := h.do("GET", rr.path, "", header)
			if refused := resp.StatusCode == http.StatusForbidden; refused != (rr.rt.Origins == edge.OriginsSame) {
				t.Errorf("%s read from another origin (%v), origin rule %s: HTTP %d %s", rr, header, rr.rt.Origins, resp.StatusCode, raw)
			}
		}
		if rr.rt.Origins == edge.OriginsSame {
			same++
			resp, raw := h.do("GET", rr.path, "", map[string]string{"Sec-Fetch-Site": "same-origin"})
			if resp.StatusCode != http.StatusNoContent {
				t.Errorf("%s from its own origin: HTTP %d %s", rr, resp.StatusCode, raw)
			}
		}
	}
	if same == 0 {
		t.Fatal("no route declares OriginsSame")
	}
}
