package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// a2abus end to end with agents of the older tasks/send dialect, shaped as
// the seed documents print them (the fixtures of discovery's tests): the
// client commands against an OpenFang-style agent, and a remote agent of an
// a2abus gateway in front of an AgentOS-style one.

// seedFixture reads a fixture of discovery's seed tests.
func seedFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "discovery", "testdata", "seeds", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// olderAgent records the JSON-RPC methods (or REST routes) it is called
// with, and the params of each.
type olderAgent struct {
	*httptest.Server
	mu     sync.Mutex
	calls  []string
	params []map[string]any
}

func (a *olderAgent) record(call string, params map[string]any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls, a.params = append(a.calls, call), append(a.params, params)
}

func (a *olderAgent) log() ([]string, []map[string]any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...), append([]map[string]any(nil), a.params...)
}

func readRPC(r *http.Request) (method string, id any, params map[string]any) {
	var req struct {
		ID     any            `json:"id"`
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	return req.Method, req.ID, req.Params
}

// openFangAgent serves OpenFang's documented A2A routes: the card at
// /.well-known/agent.json (url {server}/a2a), POST /a2a/tasks/send
// answering the documented bare task, GET /a2a/tasks/{id}, 404 otherwise.
func openFangAgent(t *testing.T) *olderAgent {
	a := &olderAgent{}
	tasks := map[string][]byte{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/agent.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(bytes.Replace(seedFixture(t, "openfang-card.json"), []byte("http://127.0.0.1:50051/a2a"), []byte(a.URL+"/a2a"), 1))
	})
	mux.HandleFunc("POST /a2a/tasks/send", func(w http.ResponseWriter, r *http.Request) {
		method, _, params := readRPC(r)
		a.record("POST /a2a/tasks/send "+method, params)
		answer := seedFixture(t, "openfang-send-response.json")
		a.mu.Lock()
		tasks["550e8400-e29b-41d4-a716-446655440000"] = answer
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	})
	mux.HandleFunc("GET /a2a/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		a.record("GET /a2a/tasks/"+r.PathValue("id"), nil)
		a.mu.Lock()
		task, ok := tasks[r.PathValue("id")]
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":"Task not found"}`)
			return
		}
		w.Write(task)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			method, _, _ := readRPC(r)
			a.record("POST "+r.URL.Path+" "+method, nil)
		}
		http.NotFound(w, r)
	})
	a.Server = httptest.NewServer(mux)
	t.Cleanup(a.Close)
	return a
}

// agentOSAgent serves AgentOS's documented A2A: the card at
// /.well-known/agent.json (url {server}/a2a/rpc) and JSON-RPC tasks/send,
// tasks/get and tasks/cancel there; a task is working when sent and
// completed, with the documented status, when read the second time
// (unless its message is "hold"); -32601 for other methods. The ids of
// canceled tasks are sent on canceled.
func agentOSAgent(t *testing.T) (*olderAgent, <-chan string) {
	a := &olderAgent{}
	canceled := make(chan string, 10)
	tasks := map[string]map[string]any{}
	reads := map[string]int{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/agent.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(bytes.Replace(seedFixture(t, "agentos-card.json"), []byte("https://other-agent.example.com/a2a/rpc"), []byte(a.URL+"/a2a/rpc"), 1))
	})
	mux.HandleFunc("POST /a2a/rpc", func(w http.ResponseWriter, r *http.Request) {
		method, rid, params := readRPC(r)
		a.record(method, params)
		id, _ := params["id"].(string)
		reply := func(k string, v any) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": rid, k: v})
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		task := tasks[id]
		switch {
		case method == "tasks/send" && id != "":
			var fresh map[string]any
			json.Unmarshal(seedFixture(t, "agentos-send-result.json"), &fresh)
			fresh["id"], fresh["sessionId"], fresh["history"], fresh["metadata"] = id, params["sessionId"], []any{params["message"]}, params["metadata"]
			tasks[id] = fresh
			reply("result", fresh)
		case (method == "tasks/get" || method == "tasks/cancel") && task == nil:
			reply("error", map[string]any{"code": -32001, "message": "Task not found"})
		case method == "tasks/get":
			held := task["history"].([]any)[0].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"] == "hold"
			if reads[id]++; reads[id] == 2 && !held {
				var st map[string]any
				json.Unmarshal(seedFixture(t, "agentos-get-status.json"), &st)
				task["status"] = st
			}
			reply("result", task)
		case method == "tasks/cancel":
			task["status"] = map[string]any{"state": "cancelled"}
			reply("result", task)
			canceled <- id
		default:
			reply("error", map[string]any{"code": -32601, "message": "Method not found"})
		}
	})
	a.Server = httptest.NewServer(mux)
	t.Cleanup(a.Close)
	return a, canceled
}

// The client commands against an OpenFang-style agent: its card is read as
// the older dialect's, send goes to its REST route with the documented
// request and prints the documented answer as a 1.0 task, get reads it
// back, and what the dialect cannot do is said plainly.
func TestCLIAgainstOpenFang(t *testing.T) {
	a := openFangAgent(t)
	out := mustCLI(t, "card", a.URL)
	for _, want := range []string{"code-reviewer 0.1.0 — Reviews code", "card from  " + a.URL + "/.well-known/agent.json",
		"interface  JSONRPC 0.1 (tasks/send) " + a.URL + "/a2a", "streaming  yes", "skill      file_read: file read [tool]"} {
		if !strings.Contains(out, want) {
			t.Fatalf("card text lacks %q:\n%s", want, out)
		}
	}

	out = mustCLI(t, "send", a.URL, "Review this code for security issues", "--context", "optional-session-id")
	wantLines(t, out, "task 550e8400-e29b-41d4-a716-446655440000  TASK_STATE_COMPLETED", "  context  optional-session-id",
		"  status   I found 2 potential issues...")
	calls, params := a.log()
	if strings.Join(calls, ", ") != "POST /a2a tasks/send, POST /a2a/tasks/send tasks/send" {
		t.Fatalf("calls: %v", calls)
	}
	msg, _ := json.Marshal(params[1]["message"])
	if string(msg) != `{"parts":[{"text":"Review this code for security issues","type":"text"}],"role":"user"}` || params[1]["sessionId"] != "optional-session-id" || params[1]["id"] == "" {
		t.Fatalf("params: %v", params[1])
	}

	res := cliJSON[schemas.SendMessageResponse](t, "send", a.URL, "Review this code for security issues")
	if res.Task == nil || res.Task.ID != "550e8400-e29b-41d4-a716-446655440000" || len(res.Task.History) != 2 || res.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("send json: %+v", res)
	}
	out = mustCLI(t, "get", a.URL, res.Task.ID, "--history", "2")
	wantLines(t, out, "task 550e8400-e29b-41d4-a716-446655440000  TASK_STATE_COMPLETED", "  context  optional-session-id",
		"  status   I found 2 potential issues...", "  history  USER: Review this code for security issues", "  history  AGENT: I found 2 potential issues...")
	evs, err := cliEvents(t, "send", a.URL, "Review this code for security issues", "--stream")
	if err != nil || kinds(evs) != "task" || evs[0].Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("send --stream: %s %v", kinds(evs), err)
	}

	_, _, err = cli(t, "get", a.URL, "no-such-task")
	wantCLIError(t, err, "TASK_NOT_FOUND")
	_, _, err = cli(t, "tasks", a.URL)
	wantCLIError(t, err, "older tasks/send dialect, which cannot list tasks")
}

// a2abus as a gateway to an AgentOS-style agent, with a real serve process:
// the agent is configured as a remote agent and comes online from its card;
// a task sent to it through a2abus's edge (by `a2abus send`) is forwarded
// with tasks/send, followed by polling tasks/get (the agent refuses
// tasks/sendSubscribe although its card says it streams), and its answer
// comes back; a fan-out over it and a local agent completes; a cancel
// through the edge reaches it as tasks/cancel.
func TestRemoteAgentOfOlderDialectThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	a, canceled := agentOSAgent(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := filepath.Join(dir, "gw.json")
	writeFile(t, cfg, fmt.Sprintf(`{
  "outbound": {"allowLoopback": true},
  "agents": [
    {"name": "echo"},
    {"name": "research", "kind": "remote", "url": %q, "checkEvery": "200ms"},
    {"name": "fan", "kind": "fanout", "targets": ["echo", "research"], "childTimeout": "20s"}
  ]}`, a.URL))
	gw := startProc(t, "serve", "--listen", addr, "--data-dir", filepath.Join(dir, "gw"), "--nats-listen", "off", "--config", cfg)
	base := "http://" + addr
	waitReady(t, gw, base)
	l := waitAgents(t, base, "?kind=remote", "research online", func(l schemas.AgentList) bool { return health(l, "research") == schemas.HealthOnline })
	if e := l.Agents[0]; e.Agent != "research" || e.Name != "research" || len(e.Skills) != 1 || e.Skills[0].ID != "code-review" {
		t.Fatalf("the registry does not carry AgentOS's card: %+v", e)
	}

	res := cliJSON[schemas.SendMessageResponse](t, "send", base+"/agents/research", "Analyze this data...")
	extID, _ := res.Task.Metadata[workers.MetaRemoteTaskID].(string)
	if res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted || res.Task.Status.Message.Text() != "Q4 sales rose 12%, led by the west region." || extID == "" {
		t.Fatalf("through the gateway: %+v", res.Task)
	}
	calls, params := a.log()
	if got := strings.Join(calls, ", "); got != "tasks/sendSubscribe, tasks/send, tasks/get, tasks/get" {
		t.Fatalf("the agent was called with %s", got)
	}
	msg, _ := json.Marshal(params[1]["message"])
	if params[1]["id"] != extID || string(msg) != `{"parts":[{"text":"Analyze this data...","type":"text"}],"role":"user"}` {
		t.Fatalf("tasks/send params: %v (external task %s)", params[1], extID)
	}

	var send struct {
		Task schemas.Task `json:"task"`
	}
	m := schemas.Message{MessageID: "fan-1", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("both of you")}}
	if err := json.Unmarshal(rpc(t, base+"/agents/fan", "SendMessage", map[string]any{"message": m}), &send); err != nil {
		t.Fatal(err)
	}
	if send.Task.Status.State != schemas.TaskStateCompleted || !strings.Contains(send.Task.Status.Message.Text(), "2 of 2") {
		t.Fatalf("fan-out: %s %q", send.Task.Status.State, send.Task.Status.Message.Text())
	}
	calls, _ = a.log()
	if got := strings.Join(calls[4:], ", "); got != "tasks/send, tasks/get, tasks/get" {
		t.Fatalf("the fan-out's child called the agent with %s (the refusal to stream is remembered)", got)
	}

	// A cancel: once the remote agent has started the external task (its
	// id is in the local task's metadata), canceling the local task
	// cancels the external one.
	ctx := context.Background()
	c, err := discovery.NewClient(discovery.Endpoint{URL: base + "/agents/research", Binding: schemas.BindingJSONRPC, Version: schemas.ProtocolVersion},
		discovery.Options{Policy: discovery.Policy{AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: &schemas.Message{MessageID: "hold-1", Role: schemas.RoleUser,
		Parts: []schemas.Part{schemas.TextPart("hold")}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var localID string
	for extID = ""; extID == ""; {
		ev, err := s.Next()
		if err != nil {
			t.Fatalf("the stream ended before the external task started: %v", err)
		}
		if ev.Task != nil {
			localID = ev.Task.ID
		}
		if u := ev.StatusUpdate; u != nil {
			extID, _ = u.Metadata[workers.MetaRemoteTaskID].(string)
		}
	}
	if _, err := c.CancelTask(ctx, &schemas.CancelTaskRequest{ID: localID}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-canceled:
		if id != extID {
			t.Fatalf("the agent canceled %s, not %s", id, extID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cancel never reached the agent")
	}
	gw.stop(t)
}
