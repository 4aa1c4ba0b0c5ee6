package edge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// harness is a real a2abus in one test: an in-process JetStream server, a
// bus connection, agent runners and an edge behind a real HTTP server.
type harness struct {
	t   testing.TB
	srv *bus.Server
	b   *bus.Bus
	url string
	// edges are the edges startEdge started, the first serving url.
	edges []*edge.Server
}

type harnessOptions struct {
	bus     bustest.Options
	edge    edge.Config
	agents  []workers.Definition
	runners int // runners per agent; default 1
}

func newHarness(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	srv, b := bustest.New(t, o.bus)
	h := &harness{t: t, srv: srv, b: b}
	n := o.runners
	if n == 0 {
		n = 1
	}
	for _, def := range o.agents {
		for range n {
			h.startRunner(b, def)
		}
	}
	h.url = h.startEdge(b, o.edge)
	for _, def := range o.agents {
		h.waitAgent(h.url, def.Name)
	}
	return h
}

// startRunner runs def on b until the test ends.
func (h *harness) startRunner(b *bus.Bus, def workers.Definition) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- workers.NewRunner(b, def, workers.Options{ShutdownGrace: time.Second}).Run(ctx)
	}()
	h.t.Cleanup(func() { cancel(); <-done })
}

// startEdge serves an edge on b over real HTTP and returns its URL.
func (h *harness) startEdge(b *bus.Bus, cfg edge.Config) string {
	ts := httptest.NewUnstartedServer(nil)
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + ts.Listener.Addr().String()
	}
	e := edge.New(b, cfg)
	h.edges = append(h.edges, e)
	ts.Config.Handler = e.Handler()
	ts.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	h.t.Cleanup(func() { ts.Close(); cancel(); <-done })
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := e.WaitReady(rctx); err != nil {
		h.t.Fatalf("edge not ready: %v", err)
	}
	return ts.URL
}

// waitAgent polls until the edge at base serves the agent's card.
func (h *harness) waitAgent(base, agent string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/agents/" + agent + "/.well-known/agent-card.json")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(10 * time.Millisecond) // polling an external condition, not synchronising
	}
	h.t.Fatalf("agent %s never appeared at %s", agent, base)
}

// rpcReply is a decoded JSON-RPC response.
type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	status int
	header http.Header
}

// reason returns the ErrorInfo reason in error.data.
func (r *rpcReply) reason(t testing.TB) string {
	t.Helper()
	var details []map[string]any
	if err := json.Unmarshal(r.Error.Data, &details); err != nil || len(details) == 0 {
		t.Fatalf("error.data is not a non-empty array of details: %s", r.Error.Data)
	}
	if details[0]["@type"] != "type.googleapis.com/google.rpc.ErrorInfo" {
		t.Fatalf("error.data[0] is not an ErrorInfo: %v", details[0])
	}
	return details[0]["reason"].(string)
}

// post sends a raw body to path with headers and decodes the reply.
func (h *harness) post(base, path, body string, header map[string]string) *rpcReply {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r rpcReply
	if err := json.Unmarshal(raw, &r); err != nil {
		h.t.Fatalf("POST %s: status %d, undecodable body %q", path, resp.StatusCode, raw)
	}
	r.status, r.header = resp.StatusCode, resp.Header
	return &r
}

// call sends a JSON-RPC call to an agent's endpoint ("" = the root).
func (h *harness) callAt(base, agent, method string, params any) *rpcReply {
	h.t.Helper()
	p, _ := json.Marshal(params)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": json.RawMessage(p)})
	path := "/"
	if agent != "" {
		path = "/agents/" + agent
	}
	return h.post(base, path, string(body), map[string]string{"A2A-Version": "1.0"})
}

func (h *harness) call(agent, method string, params any) *rpcReply {
	h.t.Helper()
	return h.callAt(h.url, agent, method, params)
}

// mustResult decodes a successful result into v.
func mustResult[T any](t testing.TB, r *rpcReply) T {
	t.Helper()
	var v T
	if r.Error != nil {
		t.Fatalf("unexpected error %d %s: %s", r.Error.Code, r.Error.Message, r.Error.Data)
	}
	if err := json.Unmarshal(r.Result, &v); err != nil {
		t.Fatalf("result %s: %v", r.Result, err)
	}
	return v
}

// mustError checks the reply is the error of row kind and returns it.
func mustError(t testing.TB, r *rpcReply, kind *schemas.Error) *rpcReply {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("want error %d (%s), got result %s", kind.Code, kind.Reason, r.Result)
	}
	if r.Error.Code != kind.Code {
		t.Fatalf("error code = %d (%s), want %d", r.Error.Code, r.Error.Message, kind.Code)
	}
	if got := r.reason(t); got != kind.Reason {
		t.Fatalf("reason = %s, want %s", got, kind.Reason)
	}
	if r.Error.Message == "" {
		t.Fatal("error without a message")
	}
	return r
}

func userMessage(text string) schemas.Message {
	return schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)}}
}

func send(msg schemas.Message, returnImmediately bool) schemas.SendMessageRequest {
	return schemas.SendMessageRequest{Message: &msg, Configuration: &schemas.SendMessageConfiguration{ReturnImmediately: returnImmediately}}
}

// waitState polls GetTask through the edge until the task is in state.
func (h *harness) waitState(base, agent, id string, state schemas.TaskState) schemas.Task {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last schemas.Task
	for time.Now().Before(deadline) {
		last = mustResult[schemas.Task](h.t, h.callAt(base, agent, "GetTask", map[string]any{"id": id}))
		if last.Status.State == state {
			return last
		}
		time.Sleep(10 * time.Millisecond) // polling an external condition
	}
	h.t.Fatalf("task %s never reached %s (last %s)", id, state, last.Status.State)
	return last
}

// blocker is an agent that signals when it starts and then blocks until its
// context ends, reporting the cause.
type blocker struct {
	started chan string
	stopped chan error
}

func newBlocker() *blocker {
	return &blocker{started: make(chan string, 16), stopped: make(chan error, 16)}
}

func (bl *blocker) Execute(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	if err := out.Working(ctx, "blocking until canceled"); err != nil {
		return err
	}
	if err := out.Flush(ctx); err != nil { // started: WORKING is stored
		return err
	}
	bl.started <- req.Task.ID
	<-ctx.Done()
	bl.stopped <- context.Cause(ctx)
	return ctx.Err()
}

func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}
