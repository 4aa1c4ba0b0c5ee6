package edge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// Shutdown starts by reporting not ready (so load balancers stop routing
// here) while requests still get answers; Run returns when its ctx ends.
func TestDrainReportsNotReadyAndRunStops(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	e := edge.New(b, edge.Config{})
	ts := httptest.NewServer(e.Handler())
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := e.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	status := func(path string) int {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("/readyz"); got != 200 {
		t.Fatalf("readyz before drain = %d", got)
	}
	e.Drain()
	if got := status("/readyz"); got != http.StatusServiceUnavailable {
		t.Fatalf("readyz after drain = %d", got)
	}
	if got := status("/healthz"); got != 200 {
		t.Fatalf("healthz after drain = %d", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// listenEdge serves a new edge on h's bus through Listen, as a process
// does, so that Stop ends its requests as at the end of a shutdown's grace.
func listenEdge(t *testing.T, h *harness) (*edge.Server, *edge.HTTPListener, string) {
	t.Helper()
	e := edge.New(h.b, edge.Config{})
	runEdge(t, e)
	l := listen(t, e.Handler(), edge.HTTPConfig{})
	return e, l, "http://" + l.Addr().String()
}

// lastEvent reads a stream to its end and returns its last event.
func lastEvent(t *testing.T, s *sseStream) sseEvent {
	t.Helper()
	var last sseEvent
	for {
		ev, ok := s.next()
		if !ok {
			return last
		}
		last = ev
	}
}

// checkResumeError checks that ev is the retryable error a stream cut by
// shutdown ends with: a JSON-RPC error response to the request's id
// (rpc), or a google.rpc.Status.
func checkResumeError(t *testing.T, what string, ev sseEvent, rpc bool) {
	t.Helper()
	if rpc {
		var r rpcReply
		if err := json.Unmarshal([]byte(ev.data), &r); err != nil || r.Error == nil || string(r.ID) != `"s1"` {
			t.Fatalf("%s: last event %q is not a JSON-RPC error response to the request", what, ev.data)
		}
		mustError(t, &r, schemas.ErrUnavailable)
		return
	}
	var st schemas.Status
	if err := json.Unmarshal([]byte(ev.data), &st); err != nil || st.Error.Code != http.StatusServiceUnavailable || st.Error.Status != schemas.ErrUnavailable.GRPCStatus {
		t.Fatalf("%s: last event %q is not a google.rpc.Status UNAVAILABLE", what, ev.data)
	}
}

// Drain ends at once the streams of a task that waits for input, which
// would otherwise hold the shutdown for its whole grace: their client
// resumes on another edge by Last-Event-ID, told so by a retryable error as
// the last event, in each binding's framing. A stream of a task in progress
// keeps the grace and delivers its last events; the shutdown (Stop with a
// grace of a minute) then ends with it, having cut nothing.
func TestDrainEndsStreamsWaitingForInputAtOnce(t *testing.T) {
	st := newStepper()
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo"), {Name: "steps", Agent: st}}})
	e, l, base := listenEdge(t, h)
	h.waitAgent(base, "echo")
	h.waitAgent(base, "steps")

	asked := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", send(userMessage(workers.AskCommand), false))).Task
	if asked.Status.State != schemas.TaskStateInputRequired {
		t.Fatalf("/ask left the task %s", asked.Status.State)
	}
	rpcAsk, r := openStream(t, base, "echo", "SubscribeToTask", map[string]any{"id": asked.ID}, "")
	if r != nil {
		t.Fatalf("SubscribeToTask: %+v", r.Error)
	}
	if ev, _ := rpcAsk.next(); kind(rpcAsk.result(ev)) != "task:TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("first event %q", ev.data)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/agents/echo/tasks/"+asked.ID+":subscribe", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("HTTP+JSON subscribe: %v %v", err, resp.Header)
	}
	defer resp.Body.Close()
	restAsk := &sseStream{t: t, resp: resp, r: newReader(resp)}
	if ev, ok := restAsk.next(); !ok || !strings.Contains(ev.data, string(schemas.TaskStateInputRequired)) {
		t.Fatalf("HTTP+JSON subscribe: first event %q", ev.data)
	}

	working, _ := openStream(t, base, "steps", "SendStreamingMessage", send(userMessage("go"), false), "")
	steps := st.ch(recv(t, st.start, "agent start"))
	for _, want := range []string{"task:TASK_STATE_SUBMITTED", "status:TASK_STATE_WORKING"} {
		if ev, _ := working.next(); kind(working.result(ev)) != want {
			t.Fatalf("working stream: %q, want %s", ev.data, want)
		}
	}

	d := e.Drain()
	if want := (edge.Draining{WaitFor: edge.InFlight{Streams: 1}, EndedNow: 2}); d != want {
		t.Fatalf("Drain() = %+v, want %+v", d, want)
	}
	stopped := make(chan struct{})
	go func() { l.Stop(time.Minute); close(stopped) }()

	checkResumeError(t, "JSON-RPC stream of an input-required task", lastEvent(t, rpcAsk), true)
	checkResumeError(t, "HTTP+JSON stream of an input-required task", lastEvent(t, restAsk), false)
	select {
	case <-stopped:
		t.Fatal("Stop returned while a stream of a working task was open")
	default:
	}
	// The working task's stream is still served and ends as it finishes.
	steps <- "a"
	close(steps)
	evs, rs := working.all()
	if got := kinds(rs); got != "artifact(append=false,last=false) status:TASK_STATE_COMPLETED" {
		t.Fatalf("working stream after Drain: %s", got)
	}
	checkCursors(t, evs)
	<-stopped // long before the grace of a minute, or the test times out
	if cut := e.Cut(); cut != (edge.InFlight{}) {
		t.Fatalf("the end of the grace cut %v; everything had ended", cut)
	}
}

// The end of a shutdown's grace ends what still runs, a stream of a task
// in progress with a retryable error as its last event, and Cut says what
// it ended.
func TestGraceEndCutsStreamsWithRetryableError(t *testing.T) {
	st := newStepper()
	bl := newBlocker()
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "steps", Agent: st}, {Name: "block", Agent: bl}}})
	e, l, base := listenEdge(t, h)
	h.waitAgent(base, "steps")
	h.waitAgent(base, "block")

	working, _ := openStream(t, base, "steps", "SendStreamingMessage", send(userMessage("go"), false), "")
	recv(t, st.start, "agent start")
	blocking := make(chan *rpcReply, 1)
	go func() { blocking <- h.callAt(base, "block", "SendMessage", send(userMessage("wait"), false)) }()
	recv(t, bl.started, "blocking call's task started")

	if d, want := e.Drain(), (edge.Draining{WaitFor: edge.InFlight{Streams: 1, Requests: 1}}); d != want {
		t.Fatalf("Drain() = %+v, want %+v", d, want)
	}
	l.Stop(0)
	checkResumeError(t, "stream of a working task", lastEvent(t, working), true)
	mustError(t, recv(t, blocking, "blocking call's answer"), schemas.ErrUnavailable)
	if cut, want := e.Cut(), (edge.InFlight{Streams: 1, Requests: 1}); cut != want {
		t.Fatalf("Cut() = %v, want %v", cut, want)
	}
}
