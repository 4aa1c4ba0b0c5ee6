package discovery_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/grpcbinding"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// loopback is the client options of every test: the agents under test
// listen on 127.0.0.1, which the default policy refuses.
func loopback() discovery.Options {
	return discovery.Options{Policy: discovery.Policy{AllowLoopback: true}}
}

func text(s string) *schemas.Message {
	return &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(s)}}
}

// event is one stream event with the SSE id it came with.
type event struct {
	ev *schemas.StreamResponse
	id string
}

// readAll reads a stream to its end (io.EOF), with a deadline so that a
// stream that does not end fails the test instead of hanging it.
func readAll(t *testing.T, s *discovery.Stream) []event {
	t.Helper()
	defer s.Close()
	stop := time.AfterFunc(20*time.Second, func() { s.Close() })
	defer stop.Stop()
	var out []event
	for {
		ev, err := s.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("stream, after %d events: %v", len(out), err)
		}
		out = append(out, event{ev, s.LastEventID()})
	}
}

func state(ev *schemas.StreamResponse) schemas.TaskState {
	switch {
	case ev.Task != nil:
		return ev.Task.Status.State
	case ev.StatusUpdate != nil:
		return ev.StatusUpdate.Status.State
	}
	return ""
}

func lastState(evs []event) schemas.TaskState {
	var st schemas.TaskState
	for _, e := range evs {
		if s := state(e.ev); s != "" {
			st = s
		}
	}
	return st
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// --- against a real a2abus edge --------------------------------------------

// startA2Abus serves an a2abus edge with an echo agent and one that works
// until canceled, over real HTTP on loopback (and gRPC: see startEdge).
func startA2Abus(t *testing.T) string {
	t.Helper()
	return startA2AbusWith(t, edge.Config{})
}

// startA2AbusWith is startA2Abus with an edge configuration.
func startA2AbusWith(t *testing.T, ecfg edge.Config) string {
	t.Helper()
	return startEdge(t, ecfg, nil).base
}

// testEdge is where an edge of startEdge serves: its base URL and its
// gRPC binding's address (host:port, as its cards declare it).
type testEdge struct{ base, grpc string }

// at is the endpoint of agent on the edge in ep's binding and version:
// below the base URL, or for gRPC the binding's address with the tenant
// that names the agent, as the agent's card declares them.
func (e testEdge) at(ep discovery.Endpoint, agent string) discovery.Endpoint {
	if ep.Binding == schemas.BindingGRPC {
		ep.URL, ep.Tenant = e.grpc, schemas.AgentTenant("", agent)
		return ep
	}
	ep.URL = e.base + "/agents/" + agent
	return ep
}

// v1Bindings are the wire forms of A2A 1.0 an a2abus edge serves.
var v1Bindings = []discovery.Endpoint{
	{Binding: schemas.BindingJSONRPC, Version: schemas.ProtocolVersion},
	{Binding: schemas.BindingHTTPJSON, Version: schemas.ProtocolVersion},
	{Binding: schemas.BindingGRPC, Version: schemas.ProtocolVersion},
}

// startEdge is startA2AbusWith that serves the edge's gRPC binding too,
// on a loopback port of its own (over TLS with grpcTLS when set), as cmd
// serves it: the agents' cards declare it.
func startEdge(t *testing.T, ecfg edge.Config, grpcTLS *tls.Config) testEdge {
	t.Helper()
	_, b := bustest.New(t, bustest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var stops []chan error
	for _, def := range []workers.Definition{workers.EchoDefinition("echo"), {
		Name: "hang", Card: schemas.AgentCard{Name: "hang", Description: "works until canceled", Version: "1"},
		Agent: workers.AgentFunc(func(ctx context.Context, _ *workers.Request, out *workers.Emitter) error {
			if err := out.Working(ctx, "on it"); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		}),
	}} {
		done := make(chan error, 1)
		r := workers.NewRunner(b, def, workers.Options{ShutdownGrace: time.Second})
		go func() { done <- r.Run(ctx) }()
		stops = append(stops, done)
		<-r.Ready()
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	ecfg.PublicURL = "http://" + ts.Listener.Addr().String()
	ecfg.GRPCAddress = gl.Addr().String()
	e := edge.New(b, ecfg)
	ts.Config.Handler = e.Handler()
	ts.Start()
	gs := grpcbinding.NewServer(e.InProcess("grpc"), grpcbinding.Options{TLS: grpcTLS})
	served := make(chan error, 1)
	go func() { served <- gs.Serve(gl) }()
	edone := make(chan error, 1)
	go func() { edone <- e.Run(ctx) }()
	t.Cleanup(func() {
		gs.Stop(time.Second)
		if err := <-served; err != nil {
			t.Errorf("serving gRPC: %v", err)
		}
		ts.Close()
		cancel()
		<-edone
		for _, s := range stops {
			<-s
		}
	})
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := e.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	return testEdge{base: ts.URL, grpc: gl.Addr().String()}
}

// The client speaks every binding it offers to a real a2abus edge: 1.0
// JSON-RPC, 1.0 HTTP+JSON, 1.0 gRPC and 0.3 JSON-RPC, each method; streams
// come in order and end at the terminal event; a stream resumes after any
// event with Last-Event-ID (over gRPC as metadata); the agent's errors map
// back to the error table.
func TestClientAgainstA2Abus(t *testing.T) {
	srv := startEdge(t, edge.Config{}, nil)
	base := srv.base
	ctx := context.Background()
	// The agent's card lists the interfaces the client then uses.
	cardRes, err := (&discovery.Fetcher{Policy: loopback().Policy}).Fetch(ctx, base+"/agents/echo", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range discovery.Endpoints(&cardRes.Card) {
		if ep.Binding == schemas.BindingGRPC {
			if ep != (discovery.Endpoint{URL: "http://" + srv.grpc, Binding: schemas.BindingGRPC, Version: schemas.ProtocolVersion, Tenant: "agents/echo"}) {
				t.Fatalf("the card's gRPC endpoint: %+v", ep)
			}
		} else if !strings.HasPrefix(ep.URL, base) {
			t.Fatalf("card endpoint %s is not on the edge %s", ep, base)
		}
	}
	for _, ep := range append(slices.Clone(v1Bindings), discovery.Endpoint{Binding: schemas.BindingJSONRPC, Version: schemas.ProtocolVersion03}) {
		t.Run(ep.Binding+"-"+ep.Version, func(t *testing.T) {
			c, err := discovery.NewClient(srv.at(ep, "echo"), loopback())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("blocking send")})
			if err != nil || res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted || *res.Task.Artifacts[0].Parts[0].Text != "blocking send" {
				t.Fatalf("send: %+v %v", res, err)
			}
			done := res.Task

			// Streaming: the snapshot first, the echoed text in order in
			// its chunks, one terminal status last.
			const input = "one two three four five six seven eight nine"
			s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text(input)})
			if err != nil {
				t.Fatal(err)
			}
			evs := readAll(t, s)
			if len(evs) < 4 || evs[0].ev.Task == nil || lastState(evs) != schemas.TaskStateCompleted {
				t.Fatalf("stream: %d events, last %s", len(evs), lastState(evs))
			}
			var echoed strings.Builder
			for i, e := range evs {
				if a := e.ev.ArtifactUpdate; a != nil {
					if a.Append != (echoed.Len() > 0) {
						t.Fatalf("event %d: append %v", i, a.Append)
					}
					echoed.WriteString(*a.Artifact.Parts[0].Text)
				}
				if st := state(e.ev); st.Terminal() && i != len(evs)-1 {
					t.Fatalf("terminal state at event %d of %d", i, len(evs))
				}
			}
			if echoed.String() != input {
				t.Fatalf("streamed %q, want %q", echoed.String(), input)
			}
			// The events to resume after, with their ids: an SSE stream's,
			// increasing cursors "<revision>.<index>"; a gRPC stream's, the
			// task generations its events carry (A2A 1.1), 1, 2, 3…
			ref := evs
			prev := uint64(0)
			for i, e := range ref {
				if ep.Binding == schemas.BindingGRPC {
					if e.id != strconv.Itoa(i+1) {
						t.Fatalf("gRPC event %d: id %q, want the generation %d", i, e.id, i+1)
					}
					continue
				}
				// a2abus's SSE ids are "<revision>.<index>", index < 4096.
				revText, indexText, _ := strings.Cut(e.id, ".")
				rev, err := strconv.ParseUint(revText, 10, 64)
				index, err2 := strconv.ParseUint(indexText, 10, 12)
				cur := rev<<12 | index
				if err != nil || err2 != nil || cur <= prev {
					t.Fatalf("event %d: cursor %q after %d", i, e.id, prev)
				}
				prev = cur
			}
			// Resuming after any event gives exactly the events after it.
			taskID := ref[0].ev.Task.ID
			for _, k := range []int{0, len(ref) / 2, len(ref) - 2} {
				sub, err := c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: taskID}, ref[k].id)
				if err != nil {
					t.Fatalf("resume after %d: %v", k, err)
				}
				got := readAll(t, sub)
				if len(got) != len(ref)-k-1 {
					t.Fatalf("resume after event %d: %d events, want %d", k, len(got), len(ref)-k-1)
				}
				for i, e := range got {
					if want := ref[k+1+i]; e.id != want.id || jsonOf(t, e.ev) != jsonOf(t, want.ev) {
						t.Fatalf("resumed event %d: %s %s, want %s %s", i, e.id, jsonOf(t, e.ev), want.id, jsonOf(t, want.ev))
					}
				}
			}
			// Resuming after the last event: nothing more.
			sub, err := c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: taskID}, ref[len(ref)-1].id)
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, sub); len(got) != 0 {
				t.Fatalf("resume after the end: %d events", len(got))
			}

			got, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: done.ID})
			if err != nil || got.ID != done.ID || got.Status.State != schemas.TaskStateCompleted {
				t.Fatalf("get: %+v %v", got, err)
			}
			list, err := c.ListTasks(ctx, &schemas.ListTasksRequest{ContextID: done.ContextID})
			if ep.Version == schemas.ProtocolVersion03 {
				if !errors.Is(err, schemas.ErrUnsupportedOperation) {
					t.Fatalf("0.3 list: %v", err)
				}
			} else if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != done.ID {
				t.Fatalf("list: %+v %v", list, err)
			}
			missing := schemas.NewID()
			_, err = c.GetTask(ctx, &schemas.GetTaskRequest{ID: missing})
			var pe *schemas.Error
			if !errors.Is(err, schemas.ErrTaskNotFound) || !errors.As(err, &pe) || pe.Metadata["taskId"] != missing {
				t.Fatalf("missing task: %v (%+v)", err, pe)
			}
			if _, err := c.CancelTask(ctx, &schemas.CancelTaskRequest{ID: done.ID}); !errors.Is(err, schemas.ErrTaskNotCancelable) {
				t.Fatalf("cancel of a finished task: %v", err)
			}
			if err := subscribeError(c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: missing}, "")); !errors.Is(err, schemas.ErrTaskNotFound) {
				t.Fatalf("subscribe to a missing task: %v", err)
			}

			// A task that runs until canceled: a non-blocking send answers
			// at once; a subscriber sees the cancel and its stream ends.
			h, err := discovery.NewClient(srv.at(ep, "hang"), loopback())
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			run, err := h.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("hang"), Configuration: &schemas.SendMessageConfiguration{ReturnImmediately: true}})
			if err != nil || run.Task == nil || run.Task.Status.State.Terminal() {
				t.Fatalf("non-blocking send: %+v %v", run, err)
			}
			sub, err = h.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: run.Task.ID}, "")
			if err != nil {
				t.Fatal(err)
			}
			if first, err := sub.Next(); err != nil || first.Task == nil || first.Task.ID != run.Task.ID {
				t.Fatalf("subscription snapshot: %+v %v", first, err)
			}
			canceled, err := h.CancelTask(ctx, &schemas.CancelTaskRequest{ID: run.Task.ID})
			if err != nil || canceled.Status.State != schemas.TaskStateCanceled {
				t.Fatalf("cancel: %+v %v", canceled, err)
			}
			if rest := readAll(t, sub); lastState(rest) != schemas.TaskStateCanceled {
				t.Fatalf("subscription ended in %s", lastState(rest))
			}
		})
	}
}

// subscribeError is the error of a subscription that cannot start. It comes
// from SubscribeToTask when the agent answers with a plain error, or from
// the stream's first Next when the agent, asked for text/event-stream,
// sends the error as the stream's one event (a2abus does on JSON-RPC, as
// a2a-go does); a client must handle both.
func subscribeError(sub *discovery.Stream, err error) error {
	if err != nil {
		return err
	}
	defer sub.Close()
	ev, err := sub.Next()
	if err == nil {
		return fmt.Errorf("the subscription started with an event: %+v", ev)
	}
	return err
}

// --- against a minimal independent agent ----------------------------------

// miniAgent is a small A2A agent written for these tests, independently of
// a2abus's edge and conversions: 1.0 JSON-RPC at /rpc, 1.0 HTTP+JSON under
// /rest/{tenant}, 0.3 JSON-RPC at /v03 (its shapes written by hand, its
// SSE in CRLF with comments and multi-line data). Tasks echo their text
// word by word; "hang" works until canceled; "reply" answers a message.
// Streams stay open after their last event, as a careless server might:
// the client must end them itself.
type miniAgent struct {
	*httptest.Server
	mu    sync.Mutex
	tasks map[string]*miniTask
	n     int
	calls []miniCall
}

type miniTask struct {
	task    schemas.Task
	events  []schemas.StreamResponse // event i has SSE id i+1
	changed chan struct{}            // closed (and replaced) when events grow
}

// miniCall is what the agent saw of one request.
type miniCall struct {
	binding, method, a2aVersion, userAgent, lastEventID, tenant string
	returnImmediately                                           bool
	blocking                                                    *bool // 0.3 configuration.blocking
}

// miniErr is an A2A error as the agent writes it on each binding.
type miniErr struct {
	code       int
	reason     string
	httpStatus int
	status     string
	msg        string
	taskID     string
}

func errNotFound(id string) *miniErr {
	return &miniErr{-32001, "TASK_NOT_FOUND", 404, "NOT_FOUND", "no task " + id, id}
}
func errNotCancelable(id string) *miniErr {
	return &miniErr{-32002, "TASK_NOT_CANCELABLE", 400, "FAILED_PRECONDITION", "task " + id + " is done", id}
}
func errUnsupported(id string) *miniErr {
	return &miniErr{-32004, "UNSUPPORTED_OPERATION", 400, "FAILED_PRECONDITION", "task " + id + " is done", id}
}

func (e *miniErr) details() []any {
	return []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": e.reason,
		"domain": "a2a-protocol.org", "metadata": map[string]string{"taskId": e.taskID}}}
}

// readJSON reads the whole request body (which lets the server notice when
// the client goes away) and decodes it.
func readJSON(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func newMiniAgent(t *testing.T) *miniAgent {
	a := &miniAgent{tasks: map[string]*miniTask{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /rpc", a.serveRPC)
	mux.HandleFunc("/rest/{tenant}/", a.serveREST)
	mux.HandleFunc("POST /v03", a.serveV03)
	a.Server = httptest.NewServer(mux)
	t.Cleanup(a.Close)
	return a
}

func (a *miniAgent) record(c miniCall, r *http.Request) {
	c.a2aVersion, c.userAgent, c.lastEventID = r.Header.Get("A2A-Version"), r.UserAgent(), r.Header.Get("Last-Event-ID")
	a.mu.Lock()
	a.calls = append(a.calls, c)
	a.mu.Unlock()
}

func (a *miniAgent) callLog() []miniCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]miniCall(nil), a.calls...)
}

// send creates a task for msg (or answers a message for "reply") and
// returns what a non-blocking send answers and what a blocking one does.
func (a *miniAgent) send(msg *schemas.Message) (first, last *schemas.StreamResponse, id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	txt := msg.Text()
	if txt == "reply" {
		r := &schemas.StreamResponse{Message: &schemas.Message{MessageID: fmt.Sprint("reply-", a.n), Role: schemas.RoleAgent,
			Parts: []schemas.Part{schemas.TextPart("a reply")}}}
		return r, r, ""
	}
	ctxID := msg.ContextID
	if ctxID == "" {
		ctxID = fmt.Sprint("ctx-", a.n)
	}
	id = fmt.Sprint("task-", a.n)
	mt := &miniTask{changed: make(chan struct{})}
	a.tasks[id] = mt
	snap := schemas.Task{ID: id, ContextID: ctxID, Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted}}
	status := func(s schemas.TaskState) schemas.StreamResponse {
		return schemas.StreamResponse{StatusUpdate: &schemas.TaskStatusUpdateEvent{TaskID: id, ContextID: ctxID, Status: schemas.TaskStatus{State: s}}}
	}
	mt.events = append(mt.events, schemas.StreamResponse{Task: &snap}, status(schemas.TaskStateWorking))
	mt.task = snap
	mt.task.Status.State = schemas.TaskStateWorking
	if txt != "hang" {
		words := strings.Fields(txt)
		for i, w := range words {
			mt.events = append(mt.events, schemas.StreamResponse{ArtifactUpdate: &schemas.TaskArtifactUpdateEvent{TaskID: id, ContextID: ctxID,
				Artifact: schemas.Artifact{ArtifactID: "echo", Parts: []schemas.Part{schemas.TextPart(w)}}, Append: i > 0, LastChunk: i == len(words)-1}})
		}
		mt.events = append(mt.events, status(schemas.TaskStateCompleted))
		mt.task.Status.State = schemas.TaskStateCompleted
		mt.task.Artifacts = []schemas.Artifact{{ArtifactID: "echo", Parts: []schemas.Part{schemas.TextPart(strings.Join(words, " "))}}}
	}
	t := mt.task
	return &mt.events[0], &schemas.StreamResponse{Task: &t}, id
}

func (a *miniAgent) get(id string) (*schemas.Task, *miniErr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	mt, ok := a.tasks[id]
	if !ok {
		return nil, errNotFound(id)
	}
	t := mt.task
	return &t, nil
}

func (a *miniAgent) cancel(id string) (*schemas.Task, *miniErr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	mt, ok := a.tasks[id]
	if !ok {
		return nil, errNotFound(id)
	}
	if mt.task.Status.State.Terminal() {
		return nil, errNotCancelable(id)
	}
	mt.task.Status.State = schemas.TaskStateCanceled
	mt.events = append(mt.events, schemas.StreamResponse{StatusUpdate: &schemas.TaskStatusUpdateEvent{TaskID: id, ContextID: mt.task.ContextID,
		Status: schemas.TaskStatus{State: schemas.TaskStateCanceled}}})
	close(mt.changed)
	mt.changed = make(chan struct{})
	t := mt.task
	return &t, nil
}

func (a *miniAgent) list(contextID string) []schemas.Task {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []schemas.Task
	for i := 1; i <= a.n; i++ {
		if mt, ok := a.tasks[fmt.Sprint("task-", i)]; ok && (contextID == "" || mt.task.ContextID == contextID) {
			out = append(out, mt.task)
		}
	}
	return out
}

// sseOut writes SSE events in one binding's framing.
type sseOut struct {
	w     http.ResponseWriter
	frame func(schemas.StreamResponse) []byte
	v03   bool // CRLF, a comment, multi-line data
}

func (o *sseOut) start() {
	o.w.Header().Set("Content-Type", "text/event-stream")
	o.w.WriteHeader(http.StatusOK)
	if o.v03 {
		_, _ = io.WriteString(o.w, ": a comment, then nothing\r\n\r\n")
	}
	http.NewResponseController(o.w).Flush()
}

func (o *sseOut) send(id int, ev schemas.StreamResponse) {
	b := o.frame(ev)
	nl := "\n"
	if o.v03 {
		nl = "\r\n"
		var v any
		_ = json.Unmarshal(b, &v)
		b, _ = json.MarshalIndent(v, "", " ")
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "id: %d%s", id, nl)
	for _, line := range strings.Split(string(b), "\n") {
		sb.WriteString("data: " + line + nl)
	}
	sb.WriteString(nl)
	_, _ = io.WriteString(o.w, sb.String())
	http.NewResponseController(o.w).Flush()
}

// stream writes the events of a task after cursor (with a snapshot first
// when snapshot is set), following it until it is terminal; then it keeps
// the connection open until the client leaves.
func (a *miniAgent) stream(r *http.Request, o *sseOut, id string, cursor int, snapshot bool) {
	o.start()
	for {
		a.mu.Lock()
		mt := a.tasks[id]
		evs, st, changed := mt.events[cursor:], mt.task.Status.State, mt.changed
		snap := mt.task
		n := len(mt.events)
		a.mu.Unlock()
		if snapshot {
			o.send(n, schemas.StreamResponse{Task: &snap})
			snapshot, evs = false, nil
		}
		for i, ev := range evs {
			o.send(cursor+i+1, ev)
		}
		cursor = n
		if st.Terminal() {
			break
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
	<-r.Context().Done()
}

// --- 1.0 JSON-RPC ---

func (a *miniAgent) serveRPC(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := readJSON(r, &req); err != nil {
		http.Error(w, "bad json", 400)
		return
	}
	var p struct {
		Tenant        string                            `json:"tenant"`
		ID            string                            `json:"id"`
		ContextID     string                            `json:"contextId"`
		Message       *schemas.Message                  `json:"message"`
		Configuration *schemas.SendMessageConfiguration `json:"configuration"`
	}
	_ = json.Unmarshal(req.Params, &p)
	call := miniCall{binding: "rpc", method: req.Method, tenant: p.Tenant}
	if p.Configuration != nil {
		call.returnImmediately = p.Configuration.ReturnImmediately
	}
	a.record(call, r)
	reply := func(result any, e *miniErr) {
		w.Header().Set("Content-Type", "application/json")
		if e != nil {
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID,
				"error": map[string]any{"code": e.code, "message": e.msg, "data": e.details()}})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}
	out := &sseOut{w: w, frame: func(ev schemas.StreamResponse) []byte {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": ev})
		return b
	}}
	switch req.Method {
	case "SendMessage", "SendStreamingMessage":
		switch p.Message.Text() {
		case "overload":
			w.Header().Set("Retry-After", "7")
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "<html>busy</html>")
			return
		case "null":
			reply(nil, nil)
			return
		}
		first, last, id := a.send(p.Message)
		switch {
		case req.Method == "SendStreamingMessage" && id == "":
			out.start()
			out.send(1, *first)
			<-r.Context().Done()
		case req.Method == "SendStreamingMessage":
			a.stream(r, out, id, 0, false)
		case p.Configuration != nil && p.Configuration.ReturnImmediately:
			reply(first, nil)
		default:
			reply(last, nil)
		}
	case "GetTask":
		t, e := a.get(p.ID)
		reply(t, e)
	case "CancelTask":
		t, e := a.cancel(p.ID)
		reply(t, e)
	case "ListTasks":
		tasks := a.list(p.ContextID)
		reply(map[string]any{"tasks": tasks, "nextPageToken": "", "pageSize": len(tasks), "totalSize": len(tasks)}, nil)
	case "SubscribeToTask":
		a.subscribe(w, r, p.ID, out, func(e *miniErr) { reply(nil, e) })
	default:
		reply(nil, &miniErr{code: -32601, msg: "no method " + req.Method})
	}
}

// subscribe answers SubscribeToTask (any binding): without Last-Event-ID
// a snapshot and what follows, refused for a finished task; with it, the
// events after that id.
func (a *miniAgent) subscribe(w http.ResponseWriter, r *http.Request, id string, out *sseOut, fail func(*miniErr)) {
	t, e := a.get(id)
	if e != nil {
		fail(e)
		return
	}
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		if t.Status.State.Terminal() {
			fail(errUnsupported(id))
			return
		}
		a.stream(r, out, id, 0, true)
		return
	}
	n, err := strconv.Atoi(last)
	if err != nil {
		http.Error(w, "bad Last-Event-ID", 400)
		return
	}
	a.stream(r, out, id, n, false)
}

// --- 1.0 HTTP+JSON ---

func (a *miniAgent) serveREST(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	path := strings.TrimPrefix(r.URL.Path, "/rest/"+tenant)
	call := miniCall{binding: "rest", method: r.Method + " " + path, tenant: tenant}
	status := func(code int, st, msg string, details []any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		e := map[string]any{"code": code, "status": st, "message": msg}
		if details != nil {
			e["details"] = details
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"error": e})
	}
	reply := func(v any, e *miniErr) {
		if e != nil {
			status(e.httpStatus, e.status, e.msg, e.details())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	out := &sseOut{w: w, frame: func(ev schemas.StreamResponse) []byte {
		b, _ := json.Marshal(ev)
		return b
	}}
	switch {
	case r.Method == "POST" && (path == "/message:send" || path == "/message:stream"):
		var req schemas.SendMessageRequest
		if err := readJSON(r, &req); err != nil || req.Message == nil {
			status(400, "INVALID_ARGUMENT", "bad request", nil)
			return
		}
		if req.Configuration != nil {
			call.returnImmediately = req.Configuration.ReturnImmediately
		}
		a.record(call, r)
		switch req.Message.Text() {
		case "overload":
			w.Header().Set("Retry-After", "3")
			status(503, "UNAVAILABLE", "overloaded", nil)
			return
		case "internal":
			status(500, "INTERNAL", "kaput", nil)
			return
		case "precondition":
			status(400, "FAILED_PRECONDITION", "not now", nil)
			return
		}
		first, last, id := a.send(req.Message)
		switch {
		case path == "/message:stream" && id == "":
			out.start()
			out.send(1, *first)
			<-r.Context().Done()
		case path == "/message:stream":
			a.stream(r, out, id, 0, false)
		case call.returnImmediately:
			reply(first, nil)
		default:
			reply(last, nil)
		}
	case r.Method == "GET" && path == "/tasks":
		a.record(call, r)
		tasks := a.list(r.URL.Query().Get("contextId"))
		reply(map[string]any{"tasks": tasks, "nextPageToken": "", "pageSize": len(tasks), "totalSize": len(tasks)}, nil)
	case strings.HasPrefix(path, "/tasks/"):
		a.record(call, r)
		id, action, _ := strings.Cut(strings.TrimPrefix(path, "/tasks/"), ":")
		switch {
		case r.Method == "GET" && action == "":
			t, e := a.get(id)
			reply(t, e)
		case r.Method == "POST" && action == "cancel":
			t, e := a.cancel(id)
			reply(t, e)
		case action == "subscribe":
			a.subscribe(w, r, id, out, func(e *miniErr) { reply(nil, e) })
		default:
			status(404, "NOT_FOUND", "no route", nil)
		}
	default:
		a.record(call, r)
		status(404, "NOT_FOUND", "no route", nil)
	}
}

// --- 0.3 JSON-RPC, shapes by hand ---

var states03 = map[schemas.TaskState]string{
	schemas.TaskStateSubmitted: "submitted", schemas.TaskStateWorking: "working", schemas.TaskStateCompleted: "completed",
	schemas.TaskStateCanceled: "canceled",
}

func parts03(ps []schemas.Part) []any {
	var out []any
	for _, p := range ps {
		out = append(out, map[string]any{"kind": "text", "text": *p.Text})
	}
	return out
}

func task03(t *schemas.Task) map[string]any {
	m := map[string]any{"kind": "task", "id": t.ID, "contextId": t.ContextID, "status": map[string]any{"state": states03[t.Status.State]}}
	var arts []any
	for _, a := range t.Artifacts {
		arts = append(arts, map[string]any{"artifactId": a.ArtifactID, "parts": parts03(a.Parts)})
	}
	if arts != nil {
		m["artifacts"] = arts
	}
	return m
}

func event03(ev schemas.StreamResponse) map[string]any {
	switch {
	case ev.Task != nil:
		return task03(ev.Task)
	case ev.Message != nil:
		return map[string]any{"kind": "message", "messageId": ev.Message.MessageID, "role": "agent", "parts": parts03(ev.Message.Parts)}
	case ev.StatusUpdate != nil:
		u := ev.StatusUpdate
		return map[string]any{"kind": "status-update", "taskId": u.TaskID, "contextId": u.ContextID,
			"status": map[string]any{"state": states03[u.Status.State]}, "final": u.Status.State.Terminal()}
	case ev.ArtifactUpdate != nil:
		u := ev.ArtifactUpdate
		return map[string]any{"kind": "artifact-update", "taskId": u.TaskID, "contextId": u.ContextID, "append": u.Append, "lastChunk": u.LastChunk,
			"artifact": map[string]any{"artifactId": u.Artifact.ArtifactID, "parts": parts03(u.Artifact.Parts)}}
	}
	return nil
}

func (a *miniAgent) serveV03(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ID      string `json:"id"`
			Message *struct {
				Kind      string `json:"kind"`
				MessageID string `json:"messageId"`
				ContextID string `json:"contextId"`
				Role      string `json:"role"`
				Parts     []struct {
					Kind string `json:"kind"`
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"message"`
			Configuration *struct {
				Blocking *bool `json:"blocking"`
			} `json:"configuration"`
		} `json:"params"`
	}
	if err := readJSON(r, &req); err != nil {
		http.Error(w, "bad json", 400)
		return
	}
	call := miniCall{binding: "v03", method: req.Method}
	if c := req.Params.Configuration; c != nil {
		call.blocking = c.Blocking
	}
	a.record(call, r)
	reply := func(result any, e *miniErr) {
		w.Header().Set("Content-Type", "application/json")
		if e != nil {
			// 0.3 agents often send the code alone.
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": e.code, "message": e.msg}})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}
	out := &sseOut{w: w, v03: true, frame: func(ev schemas.StreamResponse) []byte {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": event03(ev)})
		return b
	}}
	switch req.Method {
	case "message/send", "message/stream":
		m := req.Params.Message
		if m == nil || m.Kind != "message" || m.Role != "user" || len(m.Parts) == 0 || m.Parts[0].Kind != "text" {
			reply(nil, &miniErr{code: -32602, msg: "bad message"})
			return
		}
		if m.Parts[0].Text == "overload" {
			w.Header().Set("Retry-After", time.Now().Add(10*time.Second).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		first, last, id := a.send(&schemas.Message{MessageID: m.MessageID, ContextID: m.ContextID, Role: schemas.RoleUser,
			Parts: []schemas.Part{schemas.TextPart(m.Parts[0].Text)}})
		switch {
		case req.Method == "message/stream" && id == "":
			out.start()
			out.send(1, *first)
			<-r.Context().Done()
		case req.Method == "message/stream":
			a.stream(r, out, id, 0, false)
		case call.blocking != nil && !*call.blocking:
			reply(event03(*first), nil)
		default:
			reply(event03(*last), nil)
		}
	case "tasks/get":
		t, e := a.get(req.Params.ID)
		if e != nil {
			reply(nil, e)
			return
		}
		reply(task03(t), nil)
	case "tasks/cancel":
		t, e := a.cancel(req.Params.ID)
		if e != nil {
			reply(nil, e)
			return
		}
		reply(task03(t), nil)
	case "tasks/resubscribe":
		a.subscribe(w, r, req.Params.ID, out, func(e *miniErr) { reply(nil, e) })
	default:
		reply(nil, &miniErr{code: -32601, msg: "no method " + req.Method})
	}
}

// The client against the independent agent, on each binding: blocking and
// non-blocking sends (the flag reaches the agent in the binding's
// spelling), a message answer, streams in order that end at the terminal
// event although the agent keeps the connection open, a direct message
// ending a stream, resuming with Last-Event-ID, get, list, cancel seen by a
// subscriber, the agent's errors mapped to the table, and the headers and
// tenant of every request.
func TestClientAgainstIndependentAgent(t *testing.T) {
	a := newMiniAgent(t)
	ctx := context.Background()
	for _, ep := range []discovery.Endpoint{
		{URL: a.URL + "/rpc", Binding: schemas.BindingJSONRPC, Version: "1.0", Tenant: "acme"},
		{URL: a.URL + "/rest", Binding: schemas.BindingHTTPJSON, Version: "1.0", Tenant: "acme"},
		{URL: a.URL + "/v03", Binding: schemas.BindingJSONRPC, Version: "0.3"},
	} {
		t.Run(ep.Binding+"-"+ep.Version, func(t *testing.T) {
			v03 := ep.Version == "0.3"
			calls := len(a.callLog())
			c, err := discovery.NewClient(ep, loopback())
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("hello brave new world")})
			if err != nil || res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted ||
				*res.Task.Artifacts[0].Parts[0].Text != "hello brave new world" {
				t.Fatalf("blocking send: %+v %v", res, err)
			}
			done := res.Task
			if res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("reply")}); err != nil || res.Message == nil || res.Task != nil || res.Message.Text() != "a reply" {
				t.Fatalf("message answer: %+v %v", res, err)
			}
			run, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("hang"), Configuration: &schemas.SendMessageConfiguration{ReturnImmediately: true}})
			if err != nil || run.Task == nil || run.Task.Status.State != schemas.TaskStateSubmitted {
				t.Fatalf("non-blocking send: %+v %v", run, err)
			}
			log := a.callLog()[calls:]
			if v03 {
				if log[0].blocking == nil || !*log[0].blocking || log[2].blocking == nil || *log[2].blocking {
					t.Fatalf("0.3 blocking flags: %v %v", log[0].blocking, log[2].blocking)
				}
			} else if log[0].returnImmediately || !log[2].returnImmediately {
				t.Fatalf("returnImmediately: %v %v", log[0].returnImmediately, log[2].returnImmediately)
			}

			// A stream in order, ended by the client at the terminal event.
			s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("a b c")})
			if err != nil {
				t.Fatal(err)
			}
			evs := readAll(t, s)
			var shape []string
			for i, e := range evs {
				if e.id != strconv.Itoa(i+1) {
					t.Fatalf("event %d has id %q", i, e.id)
				}
				switch {
				case e.ev.Task != nil:
					shape = append(shape, "task:"+string(e.ev.Task.Status.State))
				case e.ev.StatusUpdate != nil:
					shape = append(shape, "status:"+string(e.ev.StatusUpdate.Status.State))
				case e.ev.ArtifactUpdate != nil:
					u := e.ev.ArtifactUpdate
					shape = append(shape, fmt.Sprintf("artifact:%s:%v:%v", *u.Artifact.Parts[0].Text, u.Append, u.LastChunk))
				}
			}
			want := []string{"task:TASK_STATE_SUBMITTED", "status:TASK_STATE_WORKING", "artifact:a:false:false",
				"artifact:b:true:false", "artifact:c:true:true", "status:TASK_STATE_COMPLETED"}
			if strings.Join(shape, " ") != strings.Join(want, " ") {
				t.Fatalf("stream:\n got  %v\n want %v", shape, want)
			}
			streamed := evs[0].ev.Task.ID
			// A message ends a stream too.
			s, err = c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("reply")})
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, s); len(got) != 1 || got[0].ev.Message == nil {
				t.Fatalf("message stream: %+v", got)
			}
			// Resume after event 2: the rest, in order.
			sub, err := c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: streamed}, "2")
			if err != nil {
				t.Fatal(err)
			}
			rest := readAll(t, sub)
			if len(rest) != 4 || rest[0].id != "3" || jsonOf(t, rest[0].ev) != jsonOf(t, evs[2].ev) || lastState(rest) != schemas.TaskStateCompleted {
				t.Fatalf("resumed: %+v", rest)
			}
			if l := a.callLog(); l[len(l)-1].lastEventID != "2" {
				t.Fatalf("Last-Event-ID sent: %q", l[len(l)-1].lastEventID)
			}
			if _, err := c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: streamed}, ""); !errors.Is(err, schemas.ErrUnsupportedOperation) {
				t.Fatalf("subscribe to a finished task: %v", err)
			}

			got, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: done.ID})
			if err != nil || got.ID != done.ID || got.Status.State != schemas.TaskStateCompleted || got.Artifacts[0].ArtifactID != "echo" {
				t.Fatalf("get: %+v %v", got, err)
			}
			before := len(a.callLog())
			list, err := c.ListTasks(ctx, &schemas.ListTasksRequest{ContextID: done.ContextID})
			if v03 {
				if !errors.Is(err, schemas.ErrUnsupportedOperation) || len(a.callLog()) != before {
					t.Fatalf("0.3 list: %v (requests %d→%d)", err, before, len(a.callLog()))
				}
			} else if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != done.ID {
				t.Fatalf("list: %+v %v", list, err)
			}

			// Errors, by reason (1.0) or by code alone (0.3).
			_, err = c.GetTask(ctx, &schemas.GetTaskRequest{ID: "task-none"})
			var pe *schemas.Error
			if !errors.Is(err, schemas.ErrTaskNotFound) || !errors.As(err, &pe) || (!v03 && pe.Metadata["taskId"] != "task-none") {
				t.Fatalf("missing task: %v", err)
			}
			if _, err := c.CancelTask(ctx, &schemas.CancelTaskRequest{ID: done.ID}); !errors.Is(err, schemas.ErrTaskNotCancelable) || discovery.IsRetryable(err) {
				t.Fatalf("cancel of a finished task: %v", err)
			}
			if _, err := c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: "task-none"}, ""); !errors.Is(err, schemas.ErrTaskNotFound) {
				t.Fatalf("subscribe to a missing task: %v", err)
			}

			// Cancel a running task while subscribed to it.
			sub, err = c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: run.Task.ID}, "")
			if err != nil {
				t.Fatal(err)
			}
			if first, err := sub.Next(); err != nil || first.Task == nil || first.Task.Status.State != schemas.TaskStateWorking {
				t.Fatalf("subscription snapshot: %+v %v", first, err)
			}
			canceled, err := c.CancelTask(ctx, &schemas.CancelTaskRequest{ID: run.Task.ID})
			if err != nil || canceled.Status.State != schemas.TaskStateCanceled {
				t.Fatalf("cancel: %+v %v", canceled, err)
			}
			if after := readAll(t, sub); len(after) != 1 || lastState(after) != schemas.TaskStateCanceled {
				t.Fatalf("subscription after cancel: %+v", after)
			}

			// Overload: retryable, with the agent's Retry-After.
			_, err = c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("overload")})
			if !discovery.IsRetryable(err) {
				t.Fatalf("overload not retryable: %v", err)
			}
			var te *discovery.TransportError
			switch {
			case ep.Binding == schemas.BindingHTTPJSON:
				if !errors.Is(err, schemas.ErrUnavailable) || !errors.As(err, &pe) || pe.RetryAfter != 3 {
					t.Fatalf("HTTP+JSON overload: %v", err)
				}
			case v03:
				if !errors.As(err, &te) || te.Status != 503 || te.RetryAfter < time.Second || te.RetryAfter > 11*time.Second {
					t.Fatalf("0.3 overload (Retry-After as a date): %v", err)
				}
			default:
				if !errors.As(err, &te) || te.Status != 503 || te.RetryAfter != 7*time.Second {
					t.Fatalf("JSON-RPC overload: %v", err)
				}
			}

			for _, call := range a.callLog()[calls:] {
				if call.userAgent != discovery.UserAgent {
					t.Fatalf("%s: User-Agent %q", call.method, call.userAgent)
				}
				if v03 && call.a2aVersion != "" || !v03 && call.a2aVersion != "1.0" {
					t.Fatalf("%s: A2A-Version %q", call.method, call.a2aVersion)
				}
				if !v03 && call.tenant != "acme" {
					t.Fatalf("%s: tenant %q", call.method, call.tenant)
				}
			}
		})
	}
}

// Errors of the HTTP+JSON binding without an ErrorInfo reason map by their
// status name to the general row; a JSON-RPC result that is null is not an
// answer.
func TestClientErrorMapping(t *testing.T) {
	a := newMiniAgent(t)
	ctx := context.Background()
	rest, _ := discovery.NewClient(discovery.Endpoint{URL: a.URL + "/rest", Binding: schemas.BindingHTTPJSON, Version: "1.0", Tenant: "t"}, loopback())
	for msg, want := range map[string]*schemas.Error{"internal": schemas.ErrInternal, "precondition": schemas.ErrUnsupportedOperation} {
		if _, err := rest.SendMessage(ctx, &schemas.SendMessageRequest{Message: text(msg)}); !errors.Is(err, want) || discovery.IsRetryable(err) {
			t.Errorf("%s: %v, want %s", msg, err, want.Reason)
		}
	}
	rpc, _ := discovery.NewClient(discovery.Endpoint{URL: a.URL + "/rpc", Binding: schemas.BindingJSONRPC, Version: "1.0"}, loopback())
	if _, err := rpc.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("null")}); !errors.Is(err, schemas.ErrInvalidAgentResponse) {
		t.Errorf("null result: %v", err)
	}
}

// sseServer serves handle (after reading the request body) and returns a
// JSON-RPC 1.0 client of it with small bounds: 1 KiB per answer or event,
// 300ms to answer.
func sseServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) *discovery.Client {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server notices the client leaving
		handle(w, r)
	}))
	t.Cleanup(srv.Close)
	opts := loopback()
	opts.MaxResponseBytes = 1024
	opts.Timeout = 300 * time.Millisecond
	c, err := discovery.NewClient(discovery.Endpoint{URL: srv.URL, Binding: schemas.BindingJSONRPC, Version: "1.0"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func startSSE(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, body)
	http.NewResponseController(w).Flush()
}

// After a stream's last event the agent may take a moment to end its
// answer. The client reads that end after handing on the event, even once
// the caller's context has ended (a worker's run ends with the last
// event), so the connection goes back to the pool and the next call to
// the agent does not dial again: streams one after another need at most
// two connections (net/http returns one to its pool a moment after the
// end was read), not one each. An agent that never ends the stream has it
// closed.
func TestStreamConnectionReusedAfterTheLastEvent(t *testing.T) {
	const working = `data: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}` + "\n\n"
	const completed = `data: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}}}` + "\n\n"
	finished := make(chan struct{}, 8)
	var dialed atomic.Int32
	end := make(chan struct{})       // the test lets a lingering answer end
	linger := make(chan struct{}, 1) // the next answer never ends by itself
	gone := make(chan struct{}, 1)   // that answer's client went away
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		startSSE(w, working)
		startSSE(w, ": still here\n\n"+completed)
		select {
		case <-linger:
			<-r.Context().Done()
			gone <- struct{}{}
		case <-end:
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	defer discovery.OnStreamReleased(func(url string) {
		if url == srv.URL {
			finished <- struct{}{}
		}
	})()
	c, err := discovery.NewClient(discovery.Endpoint{URL: srv.URL, Binding: schemas.BindingJSONRPC, Version: "1.0"}, loopback())
	if err != nil {
		t.Fatal(err)
	}
	readAll := func() {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("x")})
		if err != nil {
			t.Fatal(err)
		}
		var states []schemas.TaskState
		for {
			ev, err := s.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			states = append(states, ev.StatusUpdate.Status.State)
		}
		if len(states) != 2 || states[1] != schemas.TaskStateCompleted {
			t.Fatalf("events: %v", states)
		}
		// The caller is done with the stream before its answer ends.
		cancel()
		s.Close()
	}
	// The agent ends each answer a moment after its last event (when the
	// test says so): the event is handed on before that end, and the
	// connection is kept.
	restore := discovery.SetStreamTailWait(time.Minute)
	const streams = 6
	for range streams {
		readAll()
		end <- struct{}{}
		<-finished
	}
	restore()
	if n := dialed.Load(); n > 2 {
		t.Fatalf("%d connections for %d streams: the connection was not kept", n, streams)
	}
	// An agent that never ends its answer has the connection closed.
	linger <- struct{}{}
	readAll()
	<-gone
	<-finished
}

// SSE as agents write it: comments, CRLF, data split over lines, ids on
// events without data, an error event, events over the size bound, a
// connection that breaks, an agent that never answers, and Close from
// another goroutine.
func TestStreamFraming(t *testing.T) {
	ctx := context.Background()
	send := func(c *discovery.Client) (*discovery.Stream, error) {
		return c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("x")})
	}
	t.Run("framing", func(t *testing.T) {
		c := sseServer(t, func(w http.ResponseWriter, r *http.Request) {
			startSSE(w, ": hi\r\n\r\nid: 7\r\n\r\n"+
				"data: {\"jsonrpc\":\"2.0\",\"id\":1,\r\ndata: \"result\":{\"statusUpdate\":{\"taskId\":\"t\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\r\nid: 8\r\n\r\n"+
				"id: 9\n\n"+
				"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32001,\"message\":\"gone\"}}\n\n")
		})
		s, err := send(c)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ev, err := s.Next()
		if err != nil || ev.StatusUpdate == nil || ev.StatusUpdate.Status.State != schemas.TaskStateWorking || s.LastEventID() != "8" {
			t.Fatalf("multi-line event: %+v %v (id %q)", ev, err, s.LastEventID())
		}
		if _, err := s.Next(); !errors.Is(err, schemas.ErrTaskNotFound) || s.LastEventID() != "9" {
			t.Fatalf("error event: %v (id %q)", err, s.LastEventID())
		}
		if _, err := s.Next(); !errors.Is(err, schemas.ErrTaskNotFound) {
			t.Fatalf("after the error: %v", err)
		}
	})
	t.Run("oversized event", func(t *testing.T) {
		c := sseServer(t, func(w http.ResponseWriter, r *http.Request) {
			startSSE(w, "data: "+strings.Repeat("x", 700)+"\ndata: "+strings.Repeat("x", 700)+"\n\n")
		})
		s, err := send(c)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Next(); !errors.Is(err, schemas.ErrInvalidAgentResponse) {
			t.Fatalf("oversized event: %v", err)
		}
	})
	t.Run("broken connection", func(t *testing.T) {
		c := sseServer(t, func(w http.ResponseWriter, r *http.Request) {
			startSSE(w, `data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\ndata: {\"jso")
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		})
		s, err := send(c)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if ev, err := s.Next(); err != nil || ev.Task == nil {
			t.Fatalf("first event: %+v %v", ev, err)
		}
		_, err = s.Next()
		var te *discovery.TransportError
		if !errors.As(err, &te) || !discovery.IsRetryable(err) {
			t.Fatalf("broken stream: %v", err)
		}
	})
	t.Run("no answer", func(t *testing.T) {
		c := sseServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		_, err := send(c)
		var te *discovery.TransportError
		if !errors.As(err, &te) || !discovery.IsRetryable(err) || !strings.Contains(err.Error(), "no answer") {
			t.Fatalf("agent that never answers: %v", err)
		}
		// Unary calls are bounded the same way.
		if _, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: "t"}); !discovery.IsRetryable(err) {
			t.Fatalf("unary call to an agent that never answers: %v", err)
		}
	})
	t.Run("caller cancels", func(t *testing.T) {
		c := sseServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := c.SendStreamingMessage(cctx, &schemas.SendMessageRequest{Message: text("x")}); !errors.Is(err, context.Canceled) || discovery.IsRetryable(err) {
			t.Fatalf("canceled call: %v", err)
		}
	})
	t.Run("close from another goroutine", func(t *testing.T) {
		c := sseServer(t, func(w http.ResponseWriter, r *http.Request) {
			startSSE(w, `data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n")
			<-r.Context().Done()
		})
		s, err := send(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			_, err := s.Next()
			got <- err
		}()
		_ = s.Close()
		if err := <-got; !errors.Is(err, discovery.ErrStreamClosed) {
			t.Fatalf("Next after Close: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

// A subscription follows a task through INPUT_REQUIRED to its end on every
// binding of an a2abus edge (which keeps a subscription open there), while
// a send's stream ends where the agent asks for input.
func TestSubscriptionFollowsATaskThroughInputRequired(t *testing.T) {
	srv := startEdge(t, edge.Config{}, nil)
	ctx := context.Background()
	for _, ep := range v1Bindings {
		t.Run(ep.Binding, func(t *testing.T) {
			c, err := discovery.NewClient(srv.at(ep, "echo"), loopback())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("/ask")})
			if err != nil {
				t.Fatal(err)
			}
			evs := readAll(t, s)
			if lastState(evs) != schemas.TaskStateInputRequired {
				t.Fatalf("the send's stream ended at %s", lastState(evs))
			}
			id := evs[0].ev.Task.ID
			sub, err := c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: id}, "")
			if err != nil {
				t.Fatal(err)
			}
			first, err := sub.Next()
			if err != nil || first.Task == nil || first.Task.Status.State != schemas.TaskStateInputRequired {
				t.Fatalf("subscription's first event %+v %v", first, err)
			}
			answer := text("the answer")
			answer.TaskID = id
			if _, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: answer}); err != nil {
				t.Fatal(err)
			}
			if rest := readAll(t, sub); lastState(rest) != schemas.TaskStateCompleted {
				t.Fatalf("the subscription ended at %s", lastState(rest))
			}
		})
	}
}

// TestErrorsRedactURLs: a key in an agent URL's query (as configured, or
// as a card names it) reaches no error message.
func TestErrorsRedactURLs(t *testing.T) {
	const secret = "s3cr3t-key"
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/html":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html>down</html>"))
		case "/denied":
			w.WriteHeader(http.StatusUnauthorized)
		default:
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"neither":true}}`))
		}
	}))
	defer agent.Close()
	ctx := context.Background()
	for _, path := range []string{"/html", "/denied", "/odd"} {
		c, err := discovery.NewClient(discovery.Endpoint{URL: agent.URL + path + "?key=" + secret, Binding: schemas.BindingJSONRPC, Version: schemas.ProtocolVersion}, loopback())
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("hi")})
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: err = %v, want an error without the key", path, err)
		}
	}
	_, err := loopbackFetcher().Fetch(ctx, agent.URL+"/html/card.json?key="+secret, "")
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("card: err = %v, want an error without the key", err)
	}
}
