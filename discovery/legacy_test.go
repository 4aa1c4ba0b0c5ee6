package discovery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
	"github.com/google/uuid"
)

// The client against agents of the older tasks/send dialect, as the seed
// documents describe them: an OpenFang-style agent (REST routes under
// /a2a, bare task answers) and an AgentOS-style one (JSON-RPC at /a2a/rpc),
// each written here to answer exactly the shapes the documents print
// (testdata/seeds). The client's requests are checked against the
// documented ones, and the answers against the 1.0 model.

// seed reads a fixture of testdata/seeds.
func seed(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "seeds", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// seedMap decodes a fixture that is a JSON object.
func seedMap(t *testing.T, name string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(seed(t, name), &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

// seenRequest is one request a test agent received.
type seenRequest struct {
	method, path, query string
	header              http.Header
	body                map[string]any // the JSON body, nil when none
}

// rpcMethod is the JSON-RPC method of a request ("" when none).
func (r seenRequest) rpcMethod() string {
	m, _ := r.body["method"].(string)
	return m
}

func (r seenRequest) params() map[string]any {
	p, _ := r.body["params"].(map[string]any)
	return p
}

// recorder keeps the requests a test agent received.
type recorder struct {
	mu   sync.Mutex
	seen []seenRequest
}

// record reads r's body and keeps the request; it returns the body.
func (rec *recorder) record(t *testing.T, r *http.Request) map[string]any {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("reading a request: %v", err)
	}
	var body map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("%s %s: the body is not a JSON object: %s", r.Method, r.URL.Path, b)
		}
	}
	rec.mu.Lock()
	rec.seen = append(rec.seen, seenRequest{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: body})
	rec.mu.Unlock()
	return body
}

func (rec *recorder) requests() []seenRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seenRequest(nil), rec.seen...)
}

// since returns the requests after the first n.
func (rec *recorder) since(n int) []seenRequest { return rec.requests()[n:] }

// calls names requests as "METHOD path" or, for JSON-RPC, "rpc-method".
func calls(rs []seenRequest) string {
	var out []string
	for _, r := range rs {
		if m := r.rpcMethod(); m != "" && r.method == http.MethodPost {
			out = append(out, r.method+" "+r.path+" "+m)
			continue
		}
		out = append(out, r.method+" "+r.path)
	}
	return strings.Join(out, ", ")
}

func writeJSONBody(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// --- an OpenFang-style agent ------------------------------------------------

// openFang answers as OpenFang's A2A server is documented to: its card at
// /.well-known/agent.json with url {server}/a2a; POST /a2a/tasks/send
// reading a JSON-RPC request and answering the bare task (status a string,
// history under "messages"), made under an id of its own; GET
// /a2a/tasks/{id}; POST /a2a/tasks/{id}/cancel; 404 for anything else.
// The documented request is answered with the documented answer, verbatim.
// A message "take your time" leaves the task working until it is read
// twice.
type openFang struct {
	*httptest.Server
	recorder
	t     *testing.T
	mu    sync.Mutex
	tasks map[string]map[string]any
	reads map[string]int
	// cancelAnswer, when set, is what a cancel answers instead of the task.
	cancelAnswer string
}

func newOpenFang(t *testing.T) *openFang {
	a := &openFang{t: t, tasks: map[string]map[string]any{}, reads: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/agent.json", func(w http.ResponseWriter, r *http.Request) {
		a.record(t, r)
		card := bytes.Replace(seed(t, "openfang-card.json"), []byte("http://127.0.0.1:50051/a2a"), []byte(a.URL+"/a2a"), 1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(card)
	})
	mux.HandleFunc("POST /a2a/tasks/send", a.send)
	mux.HandleFunc("GET /a2a/tasks/{id}", a.get)
	mux.HandleFunc("POST /a2a/tasks/{id}/cancel", a.cancel)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.record(t, r)
		http.NotFound(w, r)
	})
	a.Server = httptest.NewServer(mux)
	t.Cleanup(a.Close)
	return a
}

func (a *openFang) send(w http.ResponseWriter, r *http.Request) {
	req := a.record(a.t, r)
	params, _ := req["params"].(map[string]any)
	msg, _ := params["message"].(map[string]any)
	parts, _ := msg["parts"].([]any)
	if msg == nil || len(parts) == 0 {
		writeJSONBody(w, http.StatusBadRequest, map[string]any{"error": "Missing message"})
		return
	}
	text, _ := parts[0].(map[string]any)["text"].(string)
	documented := seedMap(a.t, "openfang-send-request.json")["params"].(map[string]any)
	a.mu.Lock()
	defer a.mu.Unlock()
	if text == "Review this code for security issues" && params["sessionId"] == documented["sessionId"] {
		answer := seed(a.t, "openfang-send-response.json")
		task := seedMap(a.t, "openfang-send-response.json")
		a.tasks[task["id"].(string)] = task
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
		return
	}
	task := seedMap(a.t, "openfang-send-response.json")
	task["id"] = uuid.NewString() // OpenFang makes its own ids
	task["sessionId"] = params["sessionId"]
	reply := map[string]any{"role": "agent", "parts": []any{map[string]any{"type": "text", "text": "reviewed: " + text}}}
	if text == "take your time" {
		task["status"], task["messages"] = "working", []any{msg}
	} else {
		task["messages"] = []any{msg, reply}
	}
	a.tasks[task["id"].(string)] = task
	writeJSONBody(w, http.StatusOK, task)
}

func (a *openFang) get(w http.ResponseWriter, r *http.Request) {
	a.record(a.t, r)
	a.mu.Lock()
	defer a.mu.Unlock()
	task, ok := a.tasks[r.PathValue("id")]
	if !ok {
		writeJSONBody(w, http.StatusNotFound, map[string]any{"error": "Task not found"})
		return
	}
	a.reads[r.PathValue("id")]++
	if task["status"] == "working" && a.reads[r.PathValue("id")] >= 2 {
		task["status"] = "completed"
		task["messages"] = append(task["messages"].([]any), map[string]any{"role": "agent", "parts": []any{map[string]any{"type": "text", "text": "took my time"}}})
	}
	writeJSONBody(w, http.StatusOK, task)
}

func (a *openFang) cancel(w http.ResponseWriter, r *http.Request) {
	a.record(a.t, r)
	a.mu.Lock()
	defer a.mu.Unlock()
	task, ok := a.tasks[r.PathValue("id")]
	if !ok {
		writeJSONBody(w, http.StatusNotFound, map[string]any{"error": "Task not found"})
		return
	}
	task["status"] = "cancelled"
	if a.cancelAnswer != "" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, a.cancelAnswer)
		return
	}
	writeJSONBody(w, http.StatusOK, task)
}

// --- an AgentOS-style agent -------------------------------------------------

// agentOS answers as AgentOS's A2A is documented to: its card at
// /.well-known/agent.json with url {server}/a2a/rpc, and JSON-RPC
// tasks/send, tasks/get and tasks/cancel there, results being the task
// {id, sessionId, status:{state,timestamp,message}, history, artifacts,
// metadata, createdAt}; -32601 for any other method. A task is created
// under the client's id, working; its second read finds it completed with
// the documented status, or, for the message "ask", waiting for input; a
// tasks/send to a task waiting for input completes it.
type agentOS struct {
	*httptest.Server
	recorder
	t  *testing.T
	mu sync.Mutex
	// card is the card served, given the server's URL; default the
	// documented one.
	card  func(base string) []byte
	tasks map[string]map[string]any
	reads map[string]int
}

func newAgentOS(t *testing.T) *agentOS {
	a := &agentOS{t: t, tasks: map[string]map[string]any{}, reads: map[string]int{}}
	a.card = func(base string) []byte {
		return bytes.Replace(seed(t, "agentos-card.json"), []byte("https://other-agent.example.com/a2a/rpc"), []byte(base+"/a2a/rpc"), 1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/agent.json", func(w http.ResponseWriter, r *http.Request) {
		a.record(t, r)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(a.card(a.URL))
	})
	mux.HandleFunc("POST /a2a/rpc", a.rpc)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.record(t, r)
		http.NotFound(w, r)
	})
	a.Server = httptest.NewServer(mux)
	t.Cleanup(a.Close)
	return a
}

func (a *agentOS) rpc(w http.ResponseWriter, r *http.Request) {
	req := a.record(a.t, r)
	params, _ := req["params"].(map[string]any)
	id, _ := params["id"].(string)
	answer := func(result any) {
		writeJSONBody(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": req["id"], "result": result})
	}
	fail := func(code int, msg string) {
		writeJSONBody(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": req["id"], "error": map[string]any{"code": code, "message": msg}})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	task := a.tasks[id]
	switch req["method"] {
	case "tasks/send":
		msg, _ := params["message"].(map[string]any)
		if id == "" || msg == nil {
			fail(-32602, "Invalid params: id and message are required")
			return
		}
		if task != nil { // a follow-up
			task["history"] = append(task["history"].([]any), msg)
			if st := task["status"].(map[string]any); st["state"] == "input-required" {
				task["status"] = seedMap(a.t, "agentos-get-status.json")
			}
			answer(task)
			return
		}
		task = seedMap(a.t, "agentos-send-result.json")
		task["id"], task["history"] = id, []any{msg}
		task["sessionId"] = params["sessionId"]
		task["metadata"] = params["metadata"]
		a.tasks[id] = task
		answer(task)
	case "tasks/get":
		if task == nil {
			fail(-32001, "Task not found: "+id)
			return
		}
		a.reads[id]++
		if st := task["status"].(map[string]any); st["state"] == "working" && a.reads[id] == 2 {
			task["status"] = seedMap(a.t, "agentos-get-status.json")
			first := task["history"].([]any)[0].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"]
			if first == "ask" {
				task["status"] = map[string]any{"state": "input-required", "timestamp": "2026-03-09T10:31:00Z",
					"message": map[string]any{"role": "agent", "parts": []any{map[string]any{"type": "text", "text": "Which quarter?"}}}}
			}
		}
		answer(task)
	case "tasks/cancel":
		if task == nil {
			fail(-32001, "Task not found: "+id)
			return
		}
		task["status"] = map[string]any{"state": "cancelled", "timestamp": "2026-03-09T10:31:30Z"}
		answer(task)
	default:
		fail(-32601, "Method not found")
	}
}

// legacyOptions are the client options of these tests: loopback allowed,
// and polls a millisecond apart.
func legacyOptions() discovery.Options {
	o := loopback()
	o.PollInterval = time.Millisecond
	return o
}

// clientOfCard fetches the card of the agent at base and returns a client
// of its best endpoint.
func clientOfCard(t *testing.T, base string) *discovery.Client {
	t.Helper()
	f, err := loopbackFetcher().Fetch(context.Background(), base, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := discovery.ClientFor(&f.Card, legacyOptions())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sameJSON compares two JSON values as values.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, w := jsonOf(t, got), jsonOf(t, want)
	if g != w {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// checkHeaders checks what every request of the dialect carries: a2abus's
// User-Agent and JSON, and no A2A-Version header (the dialect predates it).
func checkHeaders(t *testing.T, rs []seenRequest) {
	t.Helper()
	for _, r := range rs {
		if !strings.HasPrefix(r.header.Get("User-Agent"), "a2abus/") || r.header.Get("A2A-Version") != "" {
			t.Errorf("%s %s: User-Agent %q, A2A-Version %q", r.method, r.path, r.header.Get("User-Agent"), r.header.Get("A2A-Version"))
		}
		if r.body != nil && r.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: Content-Type %q", r.method, r.path, r.header.Get("Content-Type"))
		}
	}
}

// --- the tests ----------------------------------------------------------------

// The three card shapes choose the dialect: 1.0 (supportedInterfaces), 0.3
// (a protocolVersion, or a field A2A 0.2 brought), and the older dialect
// (neither: OpenFang's and AgentOS's cards, the latter without a version).
func TestLegacyCardsChooseTheDialect(t *testing.T) {
	for _, c := range []struct {
		name string
		card []byte
		want []discovery.Endpoint
	}{
		{"OpenFang", seed(t, "openfang-card.json"),
			[]discovery.Endpoint{{URL: "http://127.0.0.1:50051/a2a", Binding: schemas.BindingJSONRPC, Version: "0.1", Streaming: true}}},
		{"AgentOS", seed(t, "agentos-card.json"),
			[]discovery.Endpoint{{URL: "https://other-agent.example.com/a2a/rpc", Binding: schemas.BindingJSONRPC, Version: "0.1", Streaming: true}}},
		{"no streaming", bytes.Replace(seed(t, "openfang-card.json"), []byte(`"streaming": true`), []byte(`"streaming": false`), 1),
			[]discovery.Endpoint{{URL: "http://127.0.0.1:50051/a2a", Binding: schemas.BindingJSONRPC, Version: "0.1"}}},
		{"0.3 by protocolVersion", []byte(fmt.Sprintf(card03, "https://x.example", "https://x.example", "https://x.example")),
			[]discovery.Endpoint{{URL: "https://x.example/a2a", Binding: schemas.BindingJSONRPC, Version: "0.3"}}},
		{"0.2 by preferredTransport", bytes.Replace(seed(t, "openfang-card.json"), []byte(`"version"`), []byte(`"preferredTransport": "JSONRPC", "version"`), 1),
			[]discovery.Endpoint{{URL: "http://127.0.0.1:50051/a2a", Binding: schemas.BindingJSONRPC, Version: "0.3"}}},
		{"0.2 by securitySchemes", bytes.Replace(seed(t, "openfang-card.json"), []byte(`"version"`), []byte(`"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}, "version"`), 1),
			[]discovery.Endpoint{{URL: "http://127.0.0.1:50051/a2a", Binding: schemas.BindingJSONRPC, Version: "0.3"}}},
		{"explicit 0.1", bytes.Replace(seed(t, "agentos-card.json"), []byte(`"url"`), []byte(`"version": "2", "protocolVersion": "0.1.0", "url"`), 1),
			[]discovery.Endpoint{{URL: "https://other-agent.example.com/a2a/rpc", Binding: schemas.BindingJSONRPC, Version: "0.1", Streaming: true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			card, err := discovery.ParseCard(c.card)
			if err != nil {
				t.Fatal(err)
			}
			if got := discovery.Endpoints(card); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("endpoints %+v, want %+v", got, c.want)
			}
		})
	}
	// A 1.0 card is read as before, whatever else it holds.
	card, err := discovery.ParseCard([]byte(fmt.Sprintf(card10, "1", "https://y.example", "https://y.example")))
	if err != nil || discovery.Endpoints(card)[0].Version != "1.0" {
		t.Fatalf("1.0 card: %v %v", card, err)
	}
	// Only the older dialect's cards may leave out the version.
	noVersion := bytes.Replace([]byte(fmt.Sprintf(card03, "https://x.example", "https://x.example", "https://x.example")), []byte(`"version":"0.9",`), nil, 1)
	if _, err := discovery.ParseCard(noVersion); !errors.Is(err, discovery.ErrInvalidCard) || !strings.Contains(err.Error(), "version") {
		t.Fatalf("a 0.3 card without version: %v", err)
	}
	if ep := discovery.Endpoints(card)[0]; strings.Contains(ep.String(), "tasks/send") {
		t.Fatalf("a 1.0 endpoint named %s", ep)
	}
	if s := (discovery.Endpoint{URL: "http://h/a2a", Binding: "JSONRPC", Version: "0.1"}).String(); s != "JSONRPC 0.1 (tasks/send) http://h/a2a" {
		t.Fatalf("String() = %q", s)
	}
}

// OpenFang: the card is found at the older path; JSON-RPC posted to the
// card's url answers 404, so the REST routes are used, and only that first
// call pays for finding out. The requests are the documented ones; the
// bare answers become 1.0 tasks (the agent's id, sessionId as context, the
// "messages" as history, the agent's last word as the status message);
// 404 is TaskNotFound; a stream is made by polling, since OpenFang's
// routes do not stream.
func TestLegacyOpenFang(t *testing.T) {
	ctx := context.Background()
	a := newOpenFang(t)
	c := clientOfCard(t, a.URL)
	if ep := c.Endpoint(); ep.URL != a.URL+"/a2a" || ep.Version != schemas.ProtocolVersionLegacy || !ep.Streaming {
		t.Fatalf("endpoint %+v", ep)
	}
	n := len(a.requests())

	// Send, as documented.
	msg := text("Review this code for security issues")
	msg.ContextID = "optional-session-id"
	res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	rs := a.since(n)
	if got := calls(rs); got != "POST /a2a tasks/send, POST /a2a/tasks/send tasks/send" {
		t.Fatalf("requests: %s", got)
	}
	checkHeaders(t, rs)
	sent, doc := rs[1].body, seedMap(t, "openfang-send-request.json")
	if _, err := uuid.Parse(fmt.Sprint(sent["params"].(map[string]any)["id"])); err != nil {
		t.Errorf("params.id is not a task id of the client's choosing: %v", sent["params"])
	}
	delete(sent["params"].(map[string]any), "id")
	sameJSON(t, "params", sent["params"], doc["params"])
	if sent["jsonrpc"] != "2.0" || sent["method"] != "tasks/send" || sent["id"] == nil {
		t.Errorf("envelope %v", sent)
	}
	task := res.Task
	if res.Message != nil || task == nil || task.ID != "550e8400-e29b-41d4-a716-446655440000" || task.ContextID != "optional-session-id" ||
		task.Status.State != schemas.TaskStateCompleted || task.Status.Message.Text() != "I found 2 potential issues..." ||
		len(task.History) != 2 || task.History[0].Role != schemas.RoleUser || task.History[0].Text() != "Review this code for security issues" ||
		task.History[1].Role != schemas.RoleAgent || len(task.Artifacts) != 0 {
		t.Fatalf("task %s", jsonOf(t, res))
	}

	// Get (with a history length) and cancel go straight to the routes.
	n = len(a.requests())
	hl := int32(1)
	got, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: task.ID, HistoryLength: &hl})
	if err != nil || got.ID != task.ID || got.Status.State != schemas.TaskStateCompleted || len(got.History) != 2 {
		t.Fatalf("get: %s %v", jsonOf(t, got), err)
	}
	canceled, err := c.CancelTask(ctx, &schemas.CancelTaskRequest{ID: task.ID})
	if err != nil || canceled.ID != task.ID || canceled.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("cancel: %s %v", jsonOf(t, canceled), err)
	}
	rs = a.since(n)
	if got := calls(rs); got != "GET /a2a/tasks/"+task.ID+", POST /a2a/tasks/"+task.ID+"/cancel" || rs[0].query != "historyLength=1" || rs[1].body != nil {
		t.Fatalf("requests: %s (query %q)", got, rs[0].query)
	}
	checkHeaders(t, rs)

	// Unknown tasks.
	if _, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: "nope"}); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	if _, err := c.CancelTask(ctx, &schemas.CancelTaskRequest{ID: "nope"}); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
	if _, err := c.ListTasks(ctx, &schemas.ListTasksRequest{}); !errors.Is(err, schemas.ErrUnsupportedOperation) {
		t.Fatalf("list: %v", err)
	}

	// A new task: the agent's own id comes back, and the session is none.
	res, err = c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("main.go")})
	if err != nil || res.Task.ID == "" || res.Task.ID == task.ID || res.Task.Status.Message.Text() != "reviewed: main.go" || res.Task.ContextID != "" {
		t.Fatalf("second send: %s %v", jsonOf(t, res), err)
	}
	if sent := a.since(len(a.requests()) - 1)[0].params(); sent["id"] == res.Task.ID || sent["sessionId"] != nil {
		t.Fatalf("sent %v", sent)
	}

	// A stream from a client that has not called the agent yet: the card
	// says it streams, but its url takes no JSON-RPC, and its routes do
	// not stream: the task is sent and polled until it completes.
	c = clientOfCard(t, a.URL)
	n = len(a.requests())
	msg = text("take your time")
	msg.ContextID = "s-7"
	s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	evs := readAll(t, s)
	if len(evs) != 2 || evs[0].ev.Task == nil || evs[0].ev.Task.Status.State != schemas.TaskStateWorking || evs[0].ev.Task.ContextID != "s-7" ||
		evs[1].ev.StatusUpdate == nil || evs[1].ev.StatusUpdate.Status.State != schemas.TaskStateCompleted ||
		evs[1].ev.StatusUpdate.Status.Message.Text() != "took my time" || evs[1].ev.StatusUpdate.TaskID != evs[0].ev.Task.ID ||
		evs[1].ev.StatusUpdate.ContextID != "s-7" || s.LastEventID() != "" {
		t.Fatalf("events %s", jsonOf(t, evs[len(evs)-1].ev))
	}
	id := evs[0].ev.Task.ID
	if got := calls(a.since(n)); got != "POST /a2a tasks/sendSubscribe, POST /a2a/tasks/send tasks/send, GET /a2a/tasks/"+id+", GET /a2a/tasks/"+id {
		t.Fatalf("requests: %s", got)
	}
	// Subscribing polls too; a finished task is one event.
	s, err = c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: id}, "")
	if err != nil {
		t.Fatal(err)
	}
	if evs := readAll(t, s); len(evs) != 1 || evs[0].ev.Task == nil || evs[0].ev.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("subscribe: %d events", len(evs))
	}
	if _, err := c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: "nope"}, ""); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("subscribe to unknown: %v", err)
	}

	// A cancel answered with something other than the task: the task is
	// read after it.
	a.cancelAnswer = `{"status":"cancelled"}`
	n = len(a.requests())
	if got, err := c.CancelTask(ctx, &schemas.CancelTaskRequest{ID: id}); err != nil || got.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("cancel: %v %v", got, err)
	}
	if got := calls(a.since(n)); got != "POST /a2a/tasks/"+id+"/cancel, GET /a2a/tasks/"+id {
		t.Fatalf("requests: %s", got)
	}
}

// AgentOS: every method is JSON-RPC at the card's url; the client's task
// id and session are sent as documented, the results (a status object,
// "history", metadata) become 1.0 tasks, the agent's errors map to the
// table. Its card says it streams but tasks/sendSubscribe is unknown to
// it: the stream is made by polling tasks/get, and the method is not
// asked for again.
func TestLegacyAgentOS(t *testing.T) {
	ctx := context.Background()
	a := newAgentOS(t)
	c := clientOfCard(t, a.URL)
	if ep := c.Endpoint(); ep.URL != a.URL+"/a2a/rpc" || ep.Version != schemas.ProtocolVersionLegacy || !ep.Streaming {
		t.Fatalf("endpoint %+v", ep)
	}
	n := len(a.requests())

	// Send, as documented: the caller names the task and the session.
	msg := text("Analyze this data...")
	msg.TaskID, msg.ContextID = "task-xyz-789", "session-abc-123"
	res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: msg, Metadata: map[string]any{"priority": "high", "department": "sales"}})
	if err != nil {
		t.Fatal(err)
	}
	task := res.Task
	if task == nil || task.ID != "task-xyz-789" || task.ContextID != "session-abc-123" || task.Status.State != schemas.TaskStateWorking ||
		task.Status.Timestamp == nil || !task.Status.Timestamp.Time.Equal(time.Date(2026, 3, 9, 10, 30, 0, 0, time.UTC)) ||
		len(task.History) != 1 || task.History[0].Text() != "Analyze this data..." || task.Metadata["department"] != "sales" {
		t.Fatalf("task %s", jsonOf(t, res))
	}
	// Get twice: working, then completed with the agent's answer.
	task, err = c.GetTask(ctx, &schemas.GetTaskRequest{ID: "task-xyz-789"})
	if err != nil || task.Status.State != schemas.TaskStateWorking {
		t.Fatalf("get: %v %v", task, err)
	}
	task, err = c.GetTask(ctx, &schemas.GetTaskRequest{ID: "task-xyz-789"})
	if err != nil || task.Status.State != schemas.TaskStateCompleted || task.Status.Message.Text() != "Q4 sales rose 12%, led by the west region." ||
		task.Status.Message.Role != schemas.RoleAgent || task.ContextID != "session-abc-123" {
		t.Fatalf("get: %s %v", jsonOf(t, task), err)
	}
	canceled, err := c.CancelTask(ctx, &schemas.CancelTaskRequest{ID: "task-xyz-789"})
	if err != nil || canceled.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("cancel: %v %v", canceled, err)
	}
	rs := a.since(n)
	if got := calls(rs); got != "POST /a2a/rpc tasks/send, POST /a2a/rpc tasks/get, POST /a2a/rpc tasks/get, POST /a2a/rpc tasks/cancel" {
		t.Fatalf("requests: %s", got)
	}
	checkHeaders(t, rs)
	docSend := seedMap(t, "agentos-send-request.json")["params"].(map[string]any)
	docSend["metadata"] = map[string]any{"priority": "high", "department": "sales"}
	sameJSON(t, "tasks/send params", rs[0].params(), docSend)
	sameJSON(t, "tasks/get params", rs[1].params(), seedMap(t, "agentos-get-request.json")["params"])
	sameJSON(t, "tasks/cancel params", rs[3].params(), seedMap(t, "agentos-cancel-request.json")["params"])
	for _, r := range rs {
		if r.body["jsonrpc"] != "2.0" || r.body["id"] == nil {
			t.Errorf("envelope %v", r.body)
		}
	}

	// A new task: the client chooses its id.
	n = len(a.requests())
	res, err = c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("hello")})
	if err != nil {
		t.Fatal(err)
	}
	sent := a.since(n)[0].params()
	if _, err := uuid.Parse(fmt.Sprint(sent["id"])); err != nil || res.Task.ID != sent["id"] || sent["sessionId"] != nil {
		t.Fatalf("sent %v, task %s", sent, res.Task.ID)
	}

	// Errors.
	if _, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: "nope"}); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	if _, err := c.CancelTask(ctx, &schemas.CancelTaskRequest{ID: "nope"}); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}

	// A stream: tasks/sendSubscribe is refused, so the task is sent and
	// polled; it ends when the task completes.
	n = len(a.requests())
	msg = text("Analyze the Q4 sales data")
	msg.ContextID = "session-abc-123"
	s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	evs := readAll(t, s)
	if len(evs) != 2 || evs[0].ev.Task == nil || evs[0].ev.Task.Status.State != schemas.TaskStateWorking ||
		evs[1].ev.StatusUpdate == nil || evs[1].ev.StatusUpdate.Status.State != schemas.TaskStateCompleted ||
		evs[1].ev.StatusUpdate.Status.Message.Text() != "Q4 sales rose 12%, led by the west region." || evs[1].ev.StatusUpdate.ContextID != "session-abc-123" {
		t.Fatalf("events: %s", jsonOf(t, evs[len(evs)-1].ev))
	}
	if got := calls(a.since(n)); got != "POST /a2a/rpc tasks/sendSubscribe, POST /a2a/rpc tasks/send, POST /a2a/rpc tasks/get, POST /a2a/rpc tasks/get" {
		t.Fatalf("requests: %s", got)
	}

	// A conversation: the stream ends at the agent's question; the answer
	// goes to the same task, without asking for a stream again.
	n = len(a.requests())
	s, err = c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("ask")})
	if err != nil {
		t.Fatal(err)
	}
	evs = readAll(t, s)
	last := evs[len(evs)-1].ev.StatusUpdate
	if len(evs) != 2 || last == nil || last.Status.State != schemas.TaskStateInputRequired || last.Status.Message.Text() != "Which quarter?" {
		t.Fatalf("events: %s", jsonOf(t, evs[len(evs)-1].ev))
	}
	answer := text("Q4")
	answer.TaskID = last.TaskID
	s, err = c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: answer})
	if err != nil {
		t.Fatal(err)
	}
	evs = readAll(t, s)
	if len(evs) != 1 || evs[0].ev.Task == nil || evs[0].ev.Task.ID != last.TaskID || evs[0].ev.Task.Status.State != schemas.TaskStateCompleted ||
		len(evs[0].ev.Task.History) != 2 {
		t.Fatalf("answer: %s", jsonOf(t, evs))
	}
	if got := calls(a.since(n)); got != "POST /a2a/rpc tasks/send, POST /a2a/rpc tasks/get, POST /a2a/rpc tasks/get, POST /a2a/rpc tasks/send" {
		t.Fatalf("requests: %s", got)
	}
	if p := a.since(len(a.requests()) - 1)[0].params(); p["id"] != last.TaskID {
		t.Fatalf("the answer went to task %v, not %s", p["id"], last.TaskID)
	}

	// Subscribing: tasks/resubscribe is refused once, then tasks/get alone.
	n = len(a.requests())
	for range 2 {
		s, err = c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: last.TaskID}, "")
		if err != nil {
			t.Fatal(err)
		}
		if evs := readAll(t, s); len(evs) != 1 || evs[0].ev.Task.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("subscribe: %s", jsonOf(t, evs))
		}
	}
	if got := calls(a.since(n)); got != "POST /a2a/rpc tasks/resubscribe, POST /a2a/rpc tasks/get, POST /a2a/rpc tasks/get" {
		t.Fatalf("requests: %s", got)
	}
}

// A card that looks like 0.3 (protocolVersion 0.3.0) in front of an agent
// that speaks only tasks/send: message/send answers -32601, tasks/send is
// tried, and the client keeps speaking it. And the other way: an endpoint
// taken for the older dialect whose agent speaks 0.3.
func TestLegacyFallbackBetweenDialects(t *testing.T) {
	ctx := context.Background()
	a := newAgentOS(t)
	a.card = func(base string) []byte {
		return []byte(fmt.Sprintf(`{"name":"os","description":"an agent with a 0.3 card","version":"1.0","protocolVersion":"0.3.0",
		  "url":%q,"preferredTransport":"JSONRPC","capabilities":{"streaming":true},
		  "defaultInputModes":["text"],"defaultOutputModes":["text"],"skills":[]}`, base+"/a2a/rpc"))
	}
	c := clientOfCard(t, a.URL)
	if v := c.Endpoint().Version; v != "0.3" {
		t.Fatalf("version %s", v)
	}
	n := len(a.requests())
	res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("one")})
	if err != nil || res.Task == nil || res.Task.Status.State != schemas.TaskStateWorking {
		t.Fatalf("send: %v %v", res, err)
	}
	if _, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("two")}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: res.Task.ID}); err != nil || got.ID != res.Task.ID {
		t.Fatalf("get: %v %v", got, err)
	}
	rs := a.since(n)
	if got := calls(rs); got != "POST /a2a/rpc message/send, POST /a2a/rpc tasks/send, POST /a2a/rpc tasks/send, POST /a2a/rpc tasks/get" {
		t.Fatalf("requests: %s", got)
	}
	checkHeaders(t, rs)
	// A stream, from a client that has not called yet: message/stream is
	// refused too; the 0.3 card's streaming is no promise for tasks/send,
	// so the task is polled.
	c = clientOfCard(t, a.URL)
	n = len(a.requests())
	s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("three")})
	if err != nil {
		t.Fatal(err)
	}
	if evs := readAll(t, s); lastState(evs) != schemas.TaskStateCompleted {
		t.Fatalf("stream ended %s", lastState(evs))
	}
	if got := calls(a.since(n)); got != "POST /a2a/rpc message/stream, POST /a2a/rpc tasks/send, POST /a2a/rpc tasks/get, POST /a2a/rpc tasks/get" {
		t.Fatalf("requests: %s", got)
	}

	// The other way: a 0.3 agent behind an endpoint of the older dialect.
	m := newMiniAgent(t)
	c, err = discovery.NewClient(discovery.Endpoint{URL: m.URL + "/v03", Binding: schemas.BindingJSONRPC, Version: "0.1"}, legacyOptions())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("hello there")})
		if err != nil || res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("send: %v %v", res, err)
		}
	}
	var methods []string
	for _, call := range m.callLog() {
		methods = append(methods, call.method)
	}
	if got := strings.Join(methods, ", "); got != "tasks/send, message/send, message/send" {
		t.Fatalf("methods: %s", got)
	}
	// A stream, from a client that has not called yet: tasks/send is
	// refused, and message/stream's events are read as 0.3's.
	c, err = discovery.NewClient(discovery.Endpoint{URL: m.URL + "/v03", Binding: schemas.BindingJSONRPC, Version: "0.1"}, legacyOptions())
	if err != nil {
		t.Fatal(err)
	}
	n = len(m.callLog())
	s, err = c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("hello there")})
	if err != nil {
		t.Fatal(err)
	}
	if evs := readAll(t, s); len(evs) == 0 || evs[0].ev.Task == nil || lastState(evs) != schemas.TaskStateCompleted {
		t.Fatalf("stream: %d events, ended %s", len(evs), lastState(evs))
	}
	methods = nil
	for _, call := range m.callLog()[n:] {
		methods = append(methods, call.method)
	}
	if got := strings.Join(methods, ", "); got != "tasks/send, message/stream" {
		t.Fatalf("methods: %s", got)
	}
	// Neither dialect: the first answer.
	nobody := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     any    `json:"id"`
			Method string `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		writeJSONBody(w, 200, map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "no " + req.Method}})
	}))
	defer nobody.Close()
	c, err = discovery.NewClient(discovery.Endpoint{URL: nobody.URL, Binding: schemas.BindingJSONRPC, Version: "0.1"}, legacyOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("x")}); !errors.Is(err, schemas.ErrMethodNotFound) || !strings.Contains(err.Error(), "no tasks/send") {
		t.Fatalf("send: %v", err)
	}
}

// tasks/sendSubscribe against an agent that streams: the older dialect's
// events (JSON-RPC responses holding status updates with final, and
// artifact updates with index, append and lastChunk) become 1.0 events in
// order, and the stream ends at the final one although the agent keeps
// the connection open. tasks/resubscribe follows a task the same way; an
// error on the stream is the agent's error.
func TestLegacyStreamSSE(t *testing.T) {
	ctx := context.Background()
	var rec recorder
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, strings.Replace(string(seed(t, "agentos-card.json")), "https://other-agent.example.com/a2a/rpc", "http://"+r.Host+"/rpc", 1))
			return
		}
		req := rec.record(t, r)
		p := req["params"].(map[string]any)
		rid, _ := json.Marshal(req["id"])
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(result string) {
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", rid, result)
			http.NewResponseController(w).Flush()
		}
		id := p["id"]
		switch req["method"] {
		case "tasks/sendSubscribe":
			if r.Header.Get("Accept") != "text/event-stream" {
				t.Errorf("Accept %q", r.Header.Get("Accept"))
			}
			event(fmt.Sprintf(`{"id":%q,"status":{"state":"working","timestamp":"2026-03-09T10:30:00Z"},"final":false}`, id))
			event(fmt.Sprintf(`{"id":%q,"artifact":{"name":"report","parts":[{"type":"text","text":"chunk 1"}],"index":0,"append":false}}`, id))
			event(fmt.Sprintf(`{"id":%q,"artifact":{"parts":[{"type":"text","text":" chunk 2"}],"index":0,"append":true,"lastChunk":true}}`, id))
			event(fmt.Sprintf(`{"id":%q,"status":{"state":"completed","message":{"role":"agent","parts":[{"type":"text","text":"done"}]}},"final":true}`, id))
		case "tasks/resubscribe":
			if id == "gone" {
				fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32001,\"message\":\"Task not found\"}}\n\n", rid)
				return
			}
			event(fmt.Sprintf(`{"id":%q,"status":{"state":"input-required","message":{"role":"agent","parts":[{"type":"text","text":"more?"}]}},"final":true}`, id))
		}
		<-r.Context().Done() // the agent keeps the stream open
	}))
	defer srv.Close()
	c := clientOfCard(t, srv.URL)

	msg := text("write the report")
	msg.ContextID = "session-1"
	s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	evs := readAll(t, s)
	sent := rec.requests()[0]
	id := sent.params()["id"].(string)
	want := []schemas.StreamResponse{
		{StatusUpdate: &schemas.TaskStatusUpdateEvent{TaskID: id, ContextID: "session-1",
			Status: schemas.TaskStatus{State: schemas.TaskStateWorking, Timestamp: &schemas.Timestamp{Time: time.Date(2026, 3, 9, 10, 30, 0, 0, time.UTC)}}}},
		{ArtifactUpdate: &schemas.TaskArtifactUpdateEvent{TaskID: id, ContextID: "session-1",
			Artifact: schemas.Artifact{ArtifactID: "artifact-0", Name: "report", Parts: []schemas.Part{schemas.TextPart("chunk 1")}}}},
		{ArtifactUpdate: &schemas.TaskArtifactUpdateEvent{TaskID: id, ContextID: "session-1",
			Artifact: schemas.Artifact{ArtifactID: "artifact-0", Parts: []schemas.Part{schemas.TextPart(" chunk 2")}}, Append: true, LastChunk: true}},
		{StatusUpdate: &schemas.TaskStatusUpdateEvent{TaskID: id, ContextID: "session-1",
			Status: schemas.TaskStatus{State: schemas.TaskStateCompleted, Message: &schemas.Message{Role: schemas.RoleAgent, Parts: []schemas.Part{schemas.TextPart("done")}}}}},
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events: %s", len(evs), jsonOf(t, evs))
	}
	for i := range want {
		if u := evs[i].ev.StatusUpdate; u != nil && u.Status.Message != nil {
			u.Status.Message.MessageID = "" // new in each reading
		}
		sameJSON(t, fmt.Sprint("event ", i), evs[i].ev, want[i])
	}
	if sent.rpcMethod() != "tasks/sendSubscribe" || sent.params()["sessionId"] != "session-1" ||
		jsonOf(t, sent.params()["message"]) != `{"parts":[{"text":"write the report","type":"text"}],"role":"user"}` {
		t.Fatalf("request %v", sent.body)
	}
	checkHeaders(t, rec.requests())

	s, err = c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: id}, "")
	if err != nil {
		t.Fatal(err)
	}
	if evs := readAll(t, s); len(evs) != 1 || state(evs[0].ev) != schemas.TaskStateInputRequired || evs[0].ev.StatusUpdate.TaskID != id {
		t.Fatalf("resubscribe: %s", jsonOf(t, evs))
	}
	if got := rec.requests()[1]; got.rpcMethod() != "tasks/resubscribe" || got.params()["id"] != id {
		t.Fatalf("request %v", got.body)
	}
	s, err = c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: "gone"}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("error event: %v", err)
	}
}

// tasks/resubscribe is a subscription: it follows the task through an
// interrupted state to its end, as SubscribeToTask does on every other
// dialect, whether the agent answers in 0.3's events (whose final mark an
// a2abus edge sets at INPUT_REQUIRED while it keeps the subscription
// open) or in the older dialect's without a final mark; the agent's own
// final mark in the older dialect still ends it. tasks/sendSubscribe ends
// where the task asks for input.
func TestLegacyResubscribeFollowsThroughInputRequired(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		events []string // results, %[1]q the task id
		want   []schemas.TaskState
	}{
		{name: "0.3 events", events: []string{
			`{"kind":"status-update","taskId":%[1]q,"contextId":"c-1","status":{"state":"input-required"},"final":true}`,
			`{"kind":"status-update","taskId":%[1]q,"contextId":"c-1","status":{"state":"working"},"final":false}`,
			`{"kind":"artifact-update","taskId":%[1]q,"contextId":"c-1","artifact":{"artifactId":"a-1","parts":[{"kind":"text","text":"r"}]}}`,
			`{"kind":"status-update","taskId":%[1]q,"contextId":"c-1","status":{"state":"completed"},"final":true}`,
		}, want: []schemas.TaskState{schemas.TaskStateInputRequired, schemas.TaskStateWorking, "", schemas.TaskStateCompleted}},
		{name: "older events", events: []string{
			`{"id":%[1]q,"status":{"state":"input-required"}}`,
			`{"id":%[1]q,"status":{"state":"working"}}`,
			`{"id":%[1]q,"status":{"state":"completed"},"final":true}`,
		}, want: []schemas.TaskState{schemas.TaskStateInputRequired, schemas.TaskStateWorking, schemas.TaskStateCompleted}},
		{name: "older events, marked final", events: []string{
			`{"id":%[1]q,"status":{"state":"input-required"},"final":true}`,
			`{"id":%[1]q,"status":{"state":"working"}}`,
		}, want: []schemas.TaskState{schemas.TaskStateInputRequired}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
					Params struct {
						ID string `json:"id"`
					} `json:"params"`
				}
				if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
					t.Errorf("request: %v", err)
				}
				w.Header().Set("Content-Type", "text/event-stream")
				events := c.events
				if req.Method == "tasks/sendSubscribe" {
					events = c.events[:2]
				}
				for _, ev := range events {
					fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", req.ID, fmt.Sprintf(ev, req.Params.ID))
					http.NewResponseController(w).Flush()
				}
				<-r.Context().Done() // the agent keeps the stream open
			}))
			defer srv.Close()
			cl, err := discovery.NewClient(discovery.Endpoint{URL: srv.URL, Binding: schemas.BindingJSONRPC, Version: "0.1", Streaming: true}, legacyOptions())
			if err != nil {
				t.Fatal(err)
			}
			s, err := cl.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: "t-1"}, "")
			if err != nil {
				t.Fatal(err)
			}
			var got []schemas.TaskState
			for _, ev := range readAll(t, s) {
				got = append(got, state(ev.ev))
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("the subscription gave states %v, want %v", got, c.want)
			}

			s, err = cl.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("go")})
			if err != nil {
				t.Fatal(err)
			}
			if evs := readAll(t, s); len(evs) != 1 || state(evs[0].ev) != schemas.TaskStateInputRequired {
				t.Fatalf("the send's stream gave %s, want one event, INPUT_REQUIRED", jsonOf(t, evs))
			}
		})
	}
}

// An agent asked for a stream may say it does not know the method as the
// stream's one event (as a2a-go's servers and a2abus's edge do for a
// client that accepts text/event-stream): the stream goes on by sending
// the task and polling it, and the method is not asked for again.
func TestLegacyStreamRefusedInTheStream(t *testing.T) {
	ctx := context.Background()
	var rec recorder
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := rec.record(t, r)
		p := req["params"].(map[string]any)
		if m := req["method"]; m == "tasks/sendSubscribe" || m == "tasks/resubscribe" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%v,\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}\n\n", req["id"])
			return
		}
		writeJSONBody(w, 200, map[string]any{"jsonrpc": "2.0", "id": req["id"], "result": map[string]any{"id": p["id"], "status": "completed",
			"messages": []any{map[string]any{"role": "agent", "parts": []any{map[string]any{"type": "text", "text": "done"}}}}}})
	}))
	defer srv.Close()
	c, err := discovery.NewClient(discovery.Endpoint{URL: srv.URL, Binding: schemas.BindingJSONRPC, Version: "0.1", Streaming: true}, legacyOptions())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		msg := text("go")
		msg.ContextID = "s-1"
		s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		evs := readAll(t, s)
		if len(evs) != 1 || evs[0].ev.Task == nil || evs[0].ev.Task.Status.Message.Text() != "done" || evs[0].ev.Task.ContextID != "s-1" {
			t.Fatalf("events: %s", jsonOf(t, evs))
		}
	}
	s, err := c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: "t-1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if evs := readAll(t, s); len(evs) != 1 || evs[0].ev.Task.ID != "t-1" {
		t.Fatalf("subscribe: %s", jsonOf(t, evs))
	}
	var methods []string
	for _, r := range rec.requests() {
		methods = append(methods, r.rpcMethod())
	}
	if got := strings.Join(methods, ", "); got != "tasks/sendSubscribe, tasks/send, tasks/send, tasks/resubscribe, tasks/get" {
		t.Fatalf("methods: %s", got)
	}
}

// The guards of the other dialects hold here too: the SSRF policy refuses
// a loopback agent before any request, an answer over the size bound is
// refused, and an agent that does not answer in time is a transport
// error.
func TestLegacyGuards(t *testing.T) {
	ctx := context.Background()
	a := newAgentOS(t)
	ep := discovery.Endpoint{URL: a.URL + "/a2a/rpc", Binding: schemas.BindingJSONRPC, Version: "0.1", Streaming: true}
	c, err := discovery.NewClient(ep, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("x")}); !errors.Is(err, discovery.ErrForbiddenAddress) {
		t.Fatalf("send to loopback with the default policy: %v", err)
	}
	if _, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("x")}); !errors.Is(err, discovery.ErrForbiddenAddress) {
		t.Fatalf("stream to loopback with the default policy: %v", err)
	}
	if n := len(a.requests()); n != 0 {
		t.Fatalf("%d requests reached the agent", n)
	}

	o := legacyOptions()
	o.MaxResponseBytes = 200
	c, err = discovery.NewClient(ep, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("x")}); !errors.Is(err, schemas.ErrInvalidAgentResponse) || !strings.Contains(err.Error(), "larger than 200 bytes") {
		t.Fatalf("a large answer: %v", err)
	}

	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang)
	o = legacyOptions()
	o.Timeout = 100 * time.Millisecond
	c, err = discovery.NewClient(discovery.Endpoint{URL: slow.URL, Binding: schemas.BindingJSONRPC, Version: "0.1"}, o)
	if err != nil {
		t.Fatal(err)
	}
	var te *discovery.TransportError
	if _, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: "t"}); !errors.As(err, &te) || te.Status != 0 || !discovery.IsRetryable(err) {
		t.Fatalf("a silent agent: %v", err)
	}
	if _, err := discovery.NewClient(discovery.Endpoint{URL: slow.URL, Binding: schemas.BindingHTTPJSON, Version: "0.1"}, o); err == nil {
		t.Fatal("the older dialect over HTTP+JSON was accepted")
	}
}

// A polled stream stops when its context ends or it is closed, and an
// agent that fails while polled fails the stream after a bounded number
// of retries.
func TestLegacyPolledStreamEnds(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	status := "working"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     any `json:"id"`
			Params struct {
				ID string `json:"id"`
			} `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		st := status
		mu.Unlock()
		if st == "down" {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		writeJSONBody(w, 200, map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{"id": req.Params.ID, "status": st}})
	}))
	defer srv.Close()
	c, err := discovery.NewClient(discovery.Endpoint{URL: srv.URL, Binding: schemas.BindingJSONRPC, Version: "0.1"}, legacyOptions())
	if err != nil {
		t.Fatal(err)
	}

	// Closed while polling a task that never changes.
	s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("x")})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := s.Next(); err != nil || ev.Task == nil {
		t.Fatalf("first event: %v %v", ev, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Next()
		done <- err
	}()
	s.Close()
	if err := <-done; !errors.Is(err, discovery.ErrStreamClosed) {
		t.Fatalf("after Close: %v", err)
	}

	// The context ends.
	cctx, cancel := context.WithCancel(ctx)
	s, err = c.SubscribeToTask(cctx, &schemas.SubscribeToTaskRequest{ID: "t"}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = s.Next()
	cancel()
	if _, err := s.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}

	// The agent goes down: the stream fails after the retries, with the
	// agent's answer.
	s, err = c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: "t"}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, _ = s.Next()
	mu.Lock()
	status = "down"
	mu.Unlock()
	var te *discovery.TransportError
	if _, err := s.Next(); !errors.As(err, &te) || te.Status != http.StatusServiceUnavailable {
		t.Fatalf("agent down: %v", err)
	}
}

// The client in the older dialect against a2abus's own edge, which serves
// it (tasks/send and tasks/sendSubscribe at an agent's JSON-RPC endpoint,
// OpenFang's REST routes under /a2a): both sides of a2abus agree.
func TestLegacyAgainstA2Abus(t *testing.T) {
	ctx := context.Background()
	base := startA2Abus(t)
	c, err := discovery.NewClient(discovery.Endpoint{URL: base + "/agents/echo", Binding: schemas.BindingJSONRPC, Version: "0.1", Streaming: true}, legacyOptions())
	if err != nil {
		t.Fatal(err)
	}
	msg := text("hello legacy")
	msg.ContextID = "session-1"
	res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	task := res.Task
	if task.Status.State != schemas.TaskStateCompleted || task.ContextID != "session-1" || len(task.Artifacts) != 1 || *task.Artifacts[0].Parts[0].Text != "hello legacy" {
		t.Fatalf("send: %s", jsonOf(t, res))
	}
	if got, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: task.ID}); err != nil || got.ID != task.ID || got.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("get: %v %v", got, err)
	}
	if _, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: "nope"}); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("get unknown: %v", err)
	}

	s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("one two three four five six")})
	if err != nil {
		t.Fatal(err)
	}
	evs := readAll(t, s)
	var chunks []string
	for _, e := range evs {
		if u := e.ev.ArtifactUpdate; u != nil {
			for _, p := range u.Artifact.Parts {
				chunks = append(chunks, *p.Text)
			}
		}
	}
	if lastState(evs) != schemas.TaskStateCompleted || strings.Join(chunks, "") != "one two three four five six" {
		t.Fatalf("stream ended %s, chunks %q", lastState(evs), chunks)
	}
	// tasks/resubscribe replays the finished task's events from the start.
	streamed := evs[0].ev.StatusUpdate.TaskID
	s, err = c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: streamed}, "0")
	if err != nil {
		t.Fatal(err)
	}
	// (a2abus answers it in 0.3's events, which carry more: artifact ids,
	// the context.)
	again := readAll(t, s)
	if len(again) != len(evs)-1 {
		t.Fatalf("resubscribe: %d events", len(again))
	}
	for i, e := range again {
		if g, w := eventSummary(e.ev), eventSummary(evs[i+1].ev); g != w {
			t.Errorf("replayed event %d: %s, want %s", i, g, w)
		}
	}

	// A task that works until canceled: followed, then canceled.
	hang, err := discovery.NewClient(discovery.Endpoint{URL: base + "/agents/hang", Binding: schemas.BindingJSONRPC, Version: "0.1", Streaming: true}, legacyOptions())
	if err != nil {
		t.Fatal(err)
	}
	s, err = hang.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("wait")})
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for id == "" {
		ev, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if state(ev) == schemas.TaskStateWorking && ev.StatusUpdate != nil {
			id = ev.StatusUpdate.TaskID
		}
	}
	if got, err := hang.CancelTask(ctx, &schemas.CancelTaskRequest{ID: id}); err != nil || got.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("cancel: %v %v", got, err)
	}
	if evs := readAll(t, s); lastState(evs) != schemas.TaskStateCanceled {
		t.Fatalf("the stream ended %s", lastState(evs))
	}

	// OpenFang's routes, under /a2a.
	rest, err := discovery.NewClient(discovery.Endpoint{URL: base + "/a2a", Binding: schemas.BindingJSONRPC, Version: "0.1"}, legacyOptions())
	if err != nil {
		t.Fatal(err)
	}
	res, err = rest.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("by the routes")})
	if err != nil || res.Task.Status.State != schemas.TaskStateCompleted || len(res.Task.Artifacts) != 1 {
		t.Fatalf("send by the routes: %s %v", jsonOf(t, res), err)
	}
	if got, err := rest.GetTask(ctx, &schemas.GetTaskRequest{ID: res.Task.ID}); err != nil || got.ID != res.Task.ID {
		t.Fatalf("get by the routes: %v %v", got, err)
	}
	if _, err := rest.GetTask(ctx, &schemas.GetTaskRequest{ID: "nope"}); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("get unknown by the routes: %v", err)
	}
}

// eventSummary is what an event says in both dialects: its task, its state
// and status text, or its artifact chunk.
func eventSummary(ev *schemas.StreamResponse) string {
	switch {
	case ev.StatusUpdate != nil:
		return fmt.Sprintf("%s %s %q", ev.StatusUpdate.TaskID, ev.StatusUpdate.Status.State, ev.StatusUpdate.Status.Message.Text())
	case ev.ArtifactUpdate != nil:
		u := ev.ArtifactUpdate
		return fmt.Sprintf("%s artifact %s %q append=%v last=%v", u.TaskID, u.Artifact.Name, *u.Artifact.Parts[0].Text, u.Append, u.LastChunk)
	}
	return jsonString(ev)
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
