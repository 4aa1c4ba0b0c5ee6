package edge_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// browserRequest is how a browser page of another origin reaches an edge:
// a form POST (a form media type) or a no-cors fetch (no media type), both
// marked cross-site by the browser.
type browserRequest struct {
	name   string
	header map[string]string
	body   string
}

var crossSite = []browserRequest{
	{"form", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-www-form-urlencoded"}, "a=b"},
	{"no-cors fetch", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`},
	{"fetch with a JSON type from an older browser (Origin only)", map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"}, `{}`},
	{"same-site page on another port", map[string]string{"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site", "Content-Type": "application/json"}, `{}`},
}

// Every state-changing route of the edge's route table refuses a
// cross-origin browser request before anything reads it, and a body that
// is not JSON, whichever door the route is: the table is what the mux
// serves, so a route added later is covered without touching this test.
func TestRouteTableRefusesCrossSiteAndNonJSON(t *testing.T) {
	var mcpHits atomic.Int64
	bl := newBlocker()
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{workers.EchoDefinition("echo"), {Name: "slow", Agent: bl}},
		edge: edge.Config{
			Push: true,
			MCP: func(*edge.InProcess) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { mcpHits.Add(1); w.WriteHeader(http.StatusNoContent) })
			},
			NotificationKeys: func() []byte { return []byte(`{"keys":[]}`) },
		},
	})
	// A task a page would like to cancel or answer.
	r := h.call("slow", "SendMessage", send(userMessage("work"), true))
	task := mustResult[schemas.SendMessageResponse](t, r).Task
	recv(t, bl.started, "the task to start")

	routes := h.edges[0].Routes()
	unsafe := 0
	for _, rt := range routes {
		method, path, ok := strings.Cut(rt.Pattern, " ")
		methods := []string{method}
		if !ok {
			path, methods = rt.Pattern, []string{"POST", "PUT", "PATCH", "DELETE"}
		}
		path = strings.NewReplacer("{$}", "", "{agent}", "slow", "{task}", task.ID, "{config}", "c1", "{file...}", "app.js").Replace(path)
		for _, m := range methods {
			if m == "GET" || m == "HEAD" {
				continue
			}
			unsafe++
			for _, br := range crossSite {
				resp, raw := h.do(m, path, br.body, br.header)
				refusedOn(t, m+" "+path+" ("+br.name+")", resp, raw, schemas.ErrPermissionDenied)
			}
			// Not a browser, but not JSON either: a body without a media
			// type, and a form.
			for _, ct := range []string{"", "application/x-www-form-urlencoded", "text/plain"} {
				header := map[string]string{}
				if ct != "" {
					header["Content-Type"] = ct
				}
				resp, raw := h.do(m, path, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`, header)
				refusedOn(t, m+" "+path+" (Content-Type "+ct+")", resp, raw, schemas.ErrContentTypeNotSupported)
			}
		}
	}
	if unsafe < 20 {
		t.Fatalf("only %d state-changing routes in the table: %v", unsafe, routes)
	}
	t.Logf("%d routes, %d state-changing (route × method): %d cross-site and %d non-JSON requests refused", len(routes), unsafe, unsafe*len(crossSite), unsafe*3)
	if n := mcpHits.Load(); n != 0 {
		t.Fatalf("the MCP handler was reached %d times", n)
	}
	// Nothing reached the task: it still works, uncanceled.
	got := mustResult[schemas.Task](t, h.call("slow", "GetTask", map[string]any{"id": task.ID}))
	if got.Status.State != schemas.TaskStateWorking {
		t.Fatalf("the task is %s after the cross-site requests", got.Status.State)
	}
	// The same routes serve their own origin and clients that are not
	// browsers: a same-origin cancel with no body passes.
	resp, raw := h.do("POST", "/a2a/tasks/"+task.ID+"/cancel?agent=slow", "", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": h.url})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("same-origin cancel: HTTP %d %s", resp.StatusCode, raw)
	}
	recv(t, bl.stopped, "the task to stop")
}

// refusedOn asserts that an answer is the refusal row kind, in the route's
// form: a JSON-RPC error (HTTP 200), or the row's HTTP status — 415 for a
// body's media type, on every route that answers in HTTP statuses.
func refusedOn(t *testing.T, what string, resp *http.Response, raw []byte, kind *schemas.Error) {
	t.Helper()
	var rpc struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if resp.StatusCode == http.StatusOK && json.Unmarshal(raw, &rpc) == nil && rpc.Error != nil {
		if rpc.Error.Code != kind.Code {
			t.Fatalf("%s: JSON-RPC error %d, want %d: %s", what, rpc.Error.Code, kind.Code, raw)
		}
		return
	}
	want := kind.HTTPStatus
	if kind == schemas.ErrContentTypeNotSupported {
		want = http.StatusUnsupportedMediaType
	}
	if resp.StatusCode != want {
		t.Fatalf("%s: HTTP %d, want %d: %s", what, resp.StatusCode, want, raw)
	}
}

// Only the route table writes to the edge's mux (the starting edge, which
// answers every route of the same table "unavailable", has a mux of its
// own).
func TestOnlyTheRouteTableAddsRoutes(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "routes.go" || f == "starting.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{".mux.Handle(", ".mux.HandleFunc("} {
			if strings.Contains(string(src), bad) {
				t.Errorf("%s adds a route with %s; add it with Server.handle so the route rules apply", f, bad)
			}
		}
	}
}
