package workers_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// discoveryRemote adapts the discovery client to workers.RemoteClient, as
// cmd does (workers may not import discovery; its tests may).
type discoveryRemote struct{ c *discovery.Client }

func (d discoveryRemote) SendStreamingMessage(ctx context.Context, req *schemas.SendMessageRequest) (workers.RemoteStream, error) {
	s, err := d.c.SendStreamingMessage(ctx, req)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (d discoveryRemote) SubscribeToTask(ctx context.Context, req *schemas.SubscribeToTaskRequest) (workers.RemoteStream, error) {
	s, err := d.c.SubscribeToTask(ctx, req, "")
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (d discoveryRemote) CancelTask(ctx context.Context, req *schemas.CancelTaskRequest) (*schemas.Task, error) {
	return d.c.CancelTask(ctx, req)
}

func (d discoveryRemote) SendMessage(ctx context.Context, req *schemas.SendMessageRequest) (*schemas.SendMessageResponse, error) {
	return d.c.SendMessage(ctx, req)
}

func (d discoveryRemote) GetTask(ctx context.Context, req *schemas.GetTaskRequest) (*schemas.Task, error) {
	return d.c.GetTask(ctx, req)
}

// external is another a2abus, on its own bus, reached only over HTTP: the
// external A2A agent the remote kind proxies to.
type external struct {
	b   *bus.Bus
	url string
}

func startExternal(t *testing.T, defs ...workers.Definition) *external {
	t.Helper()
	return startExternalWith(t, edge.Config{}, defs...)
}

// startExternalWith is startExternal with an edge configuration.
func startExternalWith(t *testing.T, cfg edge.Config, defs ...workers.Definition) *external {
	t.Helper()
	_, b := bustest.New(t, bustest.Options{})
	for _, d := range defs {
		startRunner(t, b, d, workers.Options{})
	}
	return &external{b: b, url: startEdge(t, b, cfg)}
}

// startEdge runs an edge on b (PublicURL set to its own) until the test
// ends and returns its URL.
func startEdge(t *testing.T, b *bus.Bus, cfg edge.Config) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	cfg.PublicURL = "http://" + ts.Listener.Addr().String()
	e := edge.New(b, cfg)
	ts.Config.Handler = e.Handler()
	ts.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() { ts.Close(); cancel(); <-done })
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := e.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	return ts.URL
}

func remoteDef(t *testing.T, name, url string) workers.Definition {
	c, err := discovery.NewClient(discovery.Endpoint{URL: url, Binding: schemas.BindingJSONRPC, Version: schemas.ProtocolVersion},
		discovery.Options{Policy: discovery.Policy{AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	return def(name, workers.Remote{URL: url, Client: func(context.Context) (workers.RemoteClient, error) { return discoveryRemote{c}, nil }})
}

// continueTask answers an interrupted task of agent's, as its client does
// through the edge (bus.Continue: the answer stored, its work queued).
func continueTask(t *testing.T, b *bus.Bus, agent, id, text string) {
	t.Helper()
	msg := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, TaskID: id, Parts: []schemas.Part{schemas.TextPart(text)}}
	if _, _, err := b.Continue(context.Background(), bus.Owner{Agent: agent}, bus.Answer{Message: msg}, nil); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits (bounded) until the task's record satisfies cond.
func waitFor(t *testing.T, b *bus.Bus, id, what string, cond func(*schemas.TaskRecord) bool) *schemas.TaskRecord {
	t.Helper()
	tw := b.NewTaskWatcher()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go tw.Run(ctx)
	<-tw.Ready()
	rec, err := tw.Wait(ctx, id, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return rec
}

// readAll returns the task's events up to its settled record's, waiting
// (bounded) for those its writer stored but has not published yet: a
// record is stored before its events are.
func readAll(t *testing.T, b *bus.Bus, id string) []bus.TaskUpdate {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec, rev, err := b.GetTask(ctx, id)
	if err != nil || !rec.Task.Status.State.Settled() {
		t.Fatalf("task %s: %v", id, err)
	}
	r, err := b.ReadEvents(ctx, id, 0, 256)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []bus.TaskUpdate
	for u := range r.Events() {
		out = append(out, u)
		if u.Cursor >= bus.RecordCursor(rec, rev) {
			return out
		}
	}
	t.Fatalf("task %s: the log ended before the record's last event (%v): %+v", id, r.Err(), out)
	return nil
}

// A remote agent relays the external agent's stream event by event, keeps
// the external task's id, continues the same external task after
// input-required, forwards a cancel, and reports the external agent's
// failure, or its absence, as FAILED with the reason.
func TestRemoteAgentProxiesAnExternalA2AAgent(t *testing.T) {
	slow := newHang()
	ext := startExternal(t, workers.EchoDefinition("echo"), def("hang", slow), def("bad", boom))
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, remoteDef(t, "far-echo", ext.url+"/agents/echo"), workers.Options{})
	startRunner(t, b, remoteDef(t, "far-hang", ext.url+"/agents/hang"), workers.Options{})
	startRunner(t, b, remoteDef(t, "far-bad", ext.url+"/agents/bad"), workers.Options{})
	startRunner(t, b, remoteDef(t, "nowhere", "http://127.0.0.1:1/"), workers.Options{})

	t.Run("stream", func(t *testing.T) {
		text := "one two three four five six seven eight nine"
		id := submit(t, b, "far-echo", text)
		rec := waitSettled(t, b, id)
		if rec.Task.Status.State != schemas.TaskStateCompleted || len(rec.Task.Artifacts) != 1 {
			t.Fatalf("local task: %s %+v", rec.Task.Status.State, rec.Task.Artifacts)
		}
		var got []string
		for _, p := range rec.Task.Artifacts[0].Parts {
			got = append(got, *p.Text)
		}
		if strings.Join(got, "") != text {
			t.Fatalf("artifact %q", got)
		}
		extID, _ := rec.Task.Metadata[workers.MetaRemoteTaskID].(string)
		extRec, _, err := ext.b.GetTask(context.Background(), extID)
		if err != nil || extRec.Task.Status.State != schemas.TaskStateCompleted || rec.Task.Metadata[workers.MetaRemoteURL] != ext.url+"/agents/echo" {
			t.Fatalf("external task %q: %v %v", extID, extRec, err)
		}
		// Event by event: the three chunks arrived as three artifact events
		// between WORKING and COMPLETED, as the external agent sent them.
		var kinds []string
		for _, u := range readAll(t, b, id) {
			switch {
			case u.Artifact != nil:
				kinds = append(kinds, "chunk")
			case u.Status != nil:
				kinds = append(kinds, string(u.Status.Status.State))
			}
		}
		if strings.Join(kinds, ",") != "TASK_STATE_WORKING,chunk,chunk,chunk,TASK_STATE_COMPLETED" {
			t.Fatalf("local events: %v", kinds)
		}
	})

	t.Run("input-required", func(t *testing.T) {
		id := submit(t, b, "far-echo", "/ask")
		rec := waitSettled(t, b, id)
		if rec.Task.Status.State != schemas.TaskStateInputRequired {
			t.Fatalf("local: %s", rec.Task.Status.State)
		}
		extID := rec.Task.Metadata[workers.MetaRemoteTaskID]
		continueTask(t, b, "far-echo", id, "the answer")
		rec = waitSettled(t, b, id)
		if rec.Task.Status.State != schemas.TaskStateCompleted || *rec.Task.Artifacts[0].Parts[0].Text != "the answer" || rec.Task.Metadata[workers.MetaRemoteTaskID] != extID {
			t.Fatalf("continued: %s %+v %v", rec.Task.Status.State, rec.Task.Artifacts, rec.Task.Metadata)
		}
		extRec, _, err := ext.b.GetTask(context.Background(), extID.(string))
		if err != nil || extRec.Task.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("the answer went to another external task: %v %v", extRec, err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		id := submit(t, b, "far-hang", "wait")
		extID := recv(t, slow.started, "the external task to start")
		waitFor(t, b, id, "the external id in the local task", func(r *schemas.TaskRecord) bool {
			return r.Task.Metadata[workers.MetaRemoteTaskID] == extID
		})
		cancelTask(t, b, "far-hang", id)
		if rec := waitSettled(t, ext.b, extID); rec.Task.Status.State != schemas.TaskStateCanceled {
			t.Fatalf("external task: %s", rec.Task.Status.State)
		}
		if rec := waitSettled(t, b, id); rec.Task.Status.State != schemas.TaskStateCanceled || rec.Task.Metadata[workers.MetaRemoteTaskID] != extID {
			t.Fatalf("local task: %s %v", rec.Task.Status.State, rec.Task.Metadata)
		}
	})

	t.Run("external-failure", func(t *testing.T) {
		rec := waitSettled(t, b, submit(t, b, "far-bad", "x"))
		if msg := rec.Task.Status.Message.Text(); rec.Task.Status.State != schemas.TaskStateFailed || !strings.Contains(msg, "boom") || !strings.Contains(msg, ext.url) {
			t.Fatalf("local: %s %q", rec.Task.Status.State, msg)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		rec := waitSettled(t, b, submit(t, b, "nowhere", "x"))
		if msg := rec.Task.Status.Message.Text(); rec.Task.Status.State != schemas.TaskStateFailed || !strings.Contains(msg, "127.0.0.1:1") {
			t.Fatalf("local: %s %q", rec.Task.Status.State, msg)
		}
	})
}

// cuttingProxy forwards to upstream, but cuts the first event stream it
// relays right after its first event: a network failure mid-stream.
func cuttingProxy(t *testing.T, upstream string) (*httptest.Server, *atomic.Int64) {
	var streams atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		for k, v := range res.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(res.StatusCode)
		if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			_, _ = io.Copy(w, res.Body)
			return
		}
		n := streams.Add(1)
		rd := bufio.NewReader(res.Body)
		for {
			line, err := rd.ReadBytes('\n')
			_, _ = w.Write(line)
			w.(http.Flusher).Flush()
			if err != nil {
				return
			}
			if n == 1 && len(bytes.TrimSpace(line)) == 0 {
				panic(http.ErrAbortHandler) // cut after the first event
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &streams
}

// twoStep sends one chunk, waits to be released, sends another, completes.
type twoStep struct{ release chan struct{} }

func (a twoStep) Execute(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	art := schemas.Artifact{ArtifactID: "steps", Parts: []schemas.Part{schemas.TextPart("first ")}}
	if err := out.ArtifactChunk(ctx, art, false, false); err != nil {
		return err
	}
	select {
	case <-a.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	art.Parts = []schemas.Part{schemas.TextPart("second")}
	if err := out.ArtifactChunk(ctx, art, true, true); err != nil {
		return err
	}
	return out.Complete(ctx, "two steps")
}

// A stream that breaks while the external task runs on is followed again
// (SubscribeToTask), and the local task ends as the external one does.
func TestRemoteAgentResumesABrokenStream(t *testing.T) {
	steps := twoStep{release: make(chan struct{})}
	ext := startExternal(t, def("steps", steps))
	proxy, streams := cuttingProxy(t, ext.url)
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, remoteDef(t, "far-steps", proxy.URL+"/agents/steps"), workers.Options{})

	id := submit(t, b, "far-steps", "go")
	waitFor(t, b, id, "the external id after the cut", func(r *schemas.TaskRecord) bool {
		return r.Task.Metadata[workers.MetaRemoteTaskID] != nil && streams.Load() >= 2
	})
	close(steps.release)
	rec := waitSettled(t, b, id)
	if rec.Task.Status.State != schemas.TaskStateCompleted || len(rec.Task.Artifacts) != 1 {
		t.Fatalf("local task: %s %+v", rec.Task.Status.State, rec.Task.Artifacts)
	}
	if got := artifactText(rec.Task.Artifacts[0]); got != "first second" {
		t.Fatalf("artifact %q, want the external one whole", got)
	}
}

// miniAgent is a minimal A2A 1.0 agent over JSON-RPC and SSE, written here
// and sharing nothing with a2abus but the wire types: what it does depends
// on the text it is sent.
type miniAgent struct {
	gate       chan struct{}        // "chunks" sends its second chunk once closed
	stop       chan struct{}        // closed at the end of the test
	cancels    chan string          // ids of CancelTask calls
	continued  chan schemas.Message // continuations (messages naming a task)
	subscribes atomic.Int64         // SubscribeToTask calls
	first      chan schemas.Message // the first message of each new task
}

func startMiniAgent(t *testing.T) (*miniAgent, string) {
	m := &miniAgent{gate: make(chan struct{}), stop: make(chan struct{}), cancels: make(chan string, 4),
		continued: make(chan schemas.Message, 4), first: make(chan schemas.Message, 16)}
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(m.stop) }) // runs first: handlers still waiting return
	return m, ts.URL + "/a2a"
}

// rpcCall is a JSON-RPC request as the fake external agents read it.
type rpcCall struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// readRPCCall reads a JSON-RPC request; ok is false (and 400 answered)
// when the body is not one.
func readRPCCall(w http.ResponseWriter, r *http.Request) (req rpcCall, ok bool) {
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "not JSON", http.StatusBadRequest)
		return req, false
	}
	return req, true
}

func (m *miniAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := readRPCCall(w, r)
	if !ok {
		return
	}
	answer := func(key string, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, key: v})
	}
	rpcError := func(code int, msg string) map[string]any { return map[string]any{"code": code, "message": msg} }
	switch req.Method {
	case "CancelTask":
		var p schemas.CancelTaskRequest
		_ = json.Unmarshal(req.Params, &p)
		m.cancels <- p.ID
		answer("result", schemas.Task{ID: p.ID, Status: schemas.TaskStatus{State: schemas.TaskStateCanceled}})
		return
	case "SubscribeToTask":
		m.subscribes.Add(1)
		answer("error", rpcError(-32001, "task not found"))
		return
	case "SendStreamingMessage":
	default:
		answer("error", rpcError(-32601, "method not found"))
		return
	}
	var p schemas.SendMessageRequest
	if err := json.Unmarshal(req.Params, &p); err != nil || p.Message == nil {
		answer("error", rpcError(-32602, "no message"))
		return
	}
	msg := *p.Message
	text := msg.Text()
	if msg.TaskID == "" {
		m.first <- msg
	}
	if text == "error" {
		answer("error", rpcError(-32602, "bad input: no errors today"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	send := func(key string, v any) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, key: v})
		_, _ = w.Write([]byte("data: " + string(b) + "\n\n"))
		w.(http.Flusher).Flush()
	}
	id, cid := "ext-"+text, "ctx-"+text
	if msg.TaskID != "" {
		m.continued <- msg
		id, cid = msg.TaskID, msg.ContextID
	}
	task := func(st schemas.TaskState) {
		send("result", schemas.StreamResponse{Task: &schemas.Task{ID: id, ContextID: cid, Status: schemas.TaskStatus{State: st}}})
	}
	status := func(st schemas.TaskState, text string) {
		u := &schemas.TaskStatusUpdateEvent{TaskID: id, ContextID: cid, Status: schemas.TaskStatus{State: st}}
		if text != "" {
			u.Status.Message = &schemas.Message{MessageID: "s-" + text, Role: schemas.RoleAgent, TaskID: id, ContextID: cid, Parts: []schemas.Part{schemas.TextPart(text)}}
		}
		send("result", schemas.StreamResponse{StatusUpdate: u})
	}
	chunk := func(text string, appendParts, last bool) {
		send("result", schemas.StreamResponse{ArtifactUpdate: &schemas.TaskArtifactUpdateEvent{TaskID: id, ContextID: cid,
			Artifact: schemas.Artifact{ArtifactID: "out", Parts: []schemas.Part{schemas.TextPart(text)}}, Append: appendParts, LastChunk: last}})
	}
	wait := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-r.Context().Done():
		case <-m.stop:
		}
		return false
	}
	switch {
	case msg.TaskID != "":
		chunk("got: "+text, false, true)
		status(schemas.TaskStateCompleted, "")
	case text == "reply":
		send("result", schemas.StreamResponse{Message: &schemas.Message{MessageID: "r-1", Role: schemas.RoleAgent, ContextID: cid, Parts: []schemas.Part{schemas.TextPart("hi there")}}})
	case text == "chunks":
		task(schemas.TaskStateSubmitted)
		status(schemas.TaskStateWorking, "")
		chunk("part one, ", false, false)
		if !wait(m.gate) {
			return
		}
		chunk("part two", true, true)
		status(schemas.TaskStateCompleted, "")
	case text == "ask":
		task(schemas.TaskStateWorking)
		status(schemas.TaskStateInputRequired, "which one?")
	case text == "reject":
		task(schemas.TaskStateSubmitted)
		status(schemas.TaskStateRejected, "not my job")
	case text == "fail":
		task(schemas.TaskStateWorking)
		status(schemas.TaskStateFailed, "disk full")
	case text == "midstream":
		task(schemas.TaskStateWorking)
		send("error", rpcError(-32603, "internal trouble"))
	case text == "hang":
		task(schemas.TaskStateWorking)
		wait(nil)
	}
}

// Against an independent A2A agent: chunks reach the local task one by one
// as they are sent, a direct message becomes the local reply, an answer to
// input-required goes to the same external task and context, a cancel is
// forwarded, and the agent's REJECTED, FAILED and protocol errors (before
// or during the stream) end the local task with the reason.
func TestRemoteAgentAgainstAnIndependentA2AAgent(t *testing.T) {
	mini, url := startMiniAgent(t)
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, remoteDef(t, "mini", url), workers.Options{})

	t.Run("chunks-as-they-arrive", func(t *testing.T) {
		id := submit(t, b, "mini", "chunks")
		if m := recv(t, mini.first, "the message"); m.Role != schemas.RoleUser || m.TaskID != "" || m.Text() != "chunks" {
			t.Fatalf("the external agent got %+v", m)
		}
		// The first chunk is in the local task while the external agent
		// still holds back the second.
		waitFor(t, b, id, "the first chunk", func(r *schemas.TaskRecord) bool {
			return r.Task.Status.State == schemas.TaskStateWorking && len(r.Task.Artifacts) == 1 && len(r.Task.Artifacts[0].Parts) == 1
		})
		close(mini.gate)
		rec := waitSettled(t, b, id)
		if rec.Task.Status.State != schemas.TaskStateCompleted || len(rec.Task.Artifacts) != 1 {
			t.Fatalf("local: %s %+v", rec.Task.Status.State, rec.Task.Artifacts)
		}
		got := artifactText(rec.Task.Artifacts[0])
		if got != "part one, part two" || rec.Task.Metadata[workers.MetaRemoteTaskID] != "ext-chunks" || rec.Task.Metadata[workers.MetaRemoteContextID] != "ctx-chunks" {
			t.Fatalf("local: artifact %q, metadata %v", got, rec.Task.Metadata)
		}
	})

	t.Run("reply", func(t *testing.T) {
		rec := waitSettled(t, b, submit(t, b, "mini", "reply"))
		<-mini.first
		if rec.Reply == nil || rec.Reply.Text() != "hi there" || rec.Reply.Role != schemas.RoleAgent {
			t.Fatalf("local: %s, reply %+v", rec.Task.Status.State, rec.Reply)
		}
	})

	t.Run("input-required", func(t *testing.T) {
		id := submit(t, b, "mini", "ask")
		<-mini.first
		rec := waitSettled(t, b, id)
		if rec.Task.Status.State != schemas.TaskStateInputRequired || rec.Task.Status.Message.Text() != "which one?" {
			t.Fatalf("local: %s %q", rec.Task.Status.State, rec.Task.Status.Message.Text())
		}
		continueTask(t, b, "mini", id, "the red one")
		m := recv(t, mini.continued, "the answer at the external agent")
		if m.TaskID != "ext-ask" || m.ContextID != "ctx-ask" || m.Role != schemas.RoleUser {
			t.Fatalf("the answer went to task %q context %q as %s", m.TaskID, m.ContextID, m.Role)
		}
		rec = waitSettled(t, b, id)
		if rec.Task.Status.State != schemas.TaskStateCompleted || len(rec.Task.Artifacts) != 1 || *rec.Task.Artifacts[0].Parts[0].Text != "got: the red one" {
			t.Fatalf("local: %s %+v", rec.Task.Status.State, rec.Task.Artifacts)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		id := submit(t, b, "mini", "hang")
		<-mini.first
		waitFor(t, b, id, "the external id", func(r *schemas.TaskRecord) bool {
			return r.Task.Metadata[workers.MetaRemoteTaskID] == "ext-hang"
		})
		cancelTask(t, b, "mini", id)
		if got := recv(t, mini.cancels, "the forwarded cancel"); got != "ext-hang" {
			t.Fatalf("canceled %q", got)
		}
		if rec := waitSettled(t, b, id); rec.Task.Status.State != schemas.TaskStateCanceled {
			t.Fatalf("local: %s", rec.Task.Status.State)
		}
	})

	for _, tc := range []struct {
		text string
		want schemas.TaskState
		why  string
	}{
		{"reject", schemas.TaskStateRejected, "not my job"},
		{"fail", schemas.TaskStateFailed, "disk full"},
		{"error", schemas.TaskStateFailed, "bad input: no errors today"},
		{"midstream", schemas.TaskStateFailed, "internal trouble"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			rec := waitSettled(t, b, submit(t, b, "mini", tc.text))
			<-mini.first
			if msg := rec.Task.Status.Message.Text(); rec.Task.Status.State != tc.want || !strings.Contains(msg, tc.why) || !strings.Contains(msg, url) {
				t.Fatalf("local: %s %q", rec.Task.Status.State, msg)
			}
		})
	}
	// An error event is the agent's answer, not a broken stream: nothing
	// was followed again.
	if n := mini.subscribes.Load(); n != 0 {
		t.Fatalf("%d re-subscriptions", n)
	}
}

// A remote agent whose client cannot be had (the card did not resolve)
// fails its tasks saying where the agent was.
func TestRemoteAgentWithoutAClientFails(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	const url = "http://agents.example/a2a"
	startRunner(t, b, def("gone", workers.Remote{URL: url, Client: func(context.Context) (workers.RemoteClient, error) {
		return nil, errors.New("no card")
	}}), workers.Options{})
	rec := waitSettled(t, b, submit(t, b, "gone", "x"))
	if msg := rec.Task.Status.Message.Text(); rec.Task.Status.State != schemas.TaskStateFailed || !strings.Contains(msg, url) || !strings.Contains(msg, "no card") {
		t.Fatalf("local: %s %q", rec.Task.Status.State, msg)
	}
}
