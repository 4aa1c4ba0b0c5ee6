package edge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	id   string
	data string
}

// sseStream reads a text/event-stream response as a client would.
type sseStream struct {
	t        testing.TB
	resp     *http.Response
	r        *bufio.Reader
	comments int
	pending  *sseEvent // read ahead by openStreamWith, returned by next
	// cut is the retryable error (UNAVAILABLE) that ended the stream, read
	// by all; a stream the edge had to cut ends with one, never like a
	// finished one.
	cut *rpcReply
}

// openStream POSTs a JSON-RPC streaming call and returns the stream, or the
// JSON-RPC error reply when the call failed before its stream opened: a
// plain JSON-RPC response, or a stream whose first event is that error
// response (frontdoor_test.go checks which framing a client gets).
func openStream(t testing.TB, base, agent, method string, params any, lastEventID string) (*sseStream, *rpcReply) {
	t.Helper()
	return openStreamWith(t, base, agent, method, params, lastEventID, "1.0")
}

// openStreamVersion is openStream with a chosen A2A-Version ("" = none).
func openStreamVersion(t testing.TB, base, agent, method string, params any, version string) (*sseStream, *rpcReply) {
	t.Helper()
	return openStreamWith(t, base, agent, method, params, "", version)
}

func openStreamWith(t testing.TB, base, agent, method string, params any, lastEventID, version string) (*sseStream, *rpcReply) {
	t.Helper()
	p, _ := json.Marshal(params)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "s1", "method": method, "params": json.RawMessage(p)})
	req, _ := http.NewRequest(http.MethodPost, base+"/agents/"+agent, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		var r rpcReply
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatalf("non-stream reply not JSON-RPC: %v", err)
		}
		return nil, &r
	}
	s := &sseStream{t: t, resp: resp, r: newReader(resp)}
	t.Cleanup(func() { resp.Body.Close() })
	if ev, ok := s.next(); ok {
		var r rpcReply
		if err := json.Unmarshal([]byte(ev.data), &r); err == nil && r.Error != nil {
			resp.Body.Close()
			r.status, r.header = resp.StatusCode, resp.Header
			return nil, &r
		}
		s.pending = &ev
	}
	return s, nil
}

// next returns the next event, or ok=false at the end of the stream.
func (s *sseStream) next() (ev sseEvent, ok bool) {
	if s.pending != nil {
		ev, s.pending = *s.pending, nil
		return ev, true
	}
	var data []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return ev, false
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if data != nil {
				ev.data = strings.Join(data, "\n")
				return ev, true
			}
		case strings.HasPrefix(line, ":"):
			s.comments++
		case strings.HasPrefix(line, "id:"):
			ev.id = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(line[5:], " "))
		}
	}
}

// result decodes an event as a JSON-RPC StreamResponse.
func (s *sseStream) result(ev sseEvent) schemas.StreamResponse {
	s.t.Helper()
	var env struct {
		JSONRPC string                 `json:"jsonrpc"`
		ID      string                 `json:"id"`
		Result  schemas.StreamResponse `json:"result"`
		Error   json.RawMessage        `json:"error"`
	}
	if err := json.Unmarshal([]byte(ev.data), &env); err != nil || env.JSONRPC != "2.0" || env.ID != "s1" {
		s.t.Fatalf("bad stream event %q: %v", ev.data, err)
	}
	if env.Error != nil {
		s.t.Fatalf("error event: %s", env.Error)
	}
	return env.Result
}

// all reads events until the stream ends, or until an UNAVAILABLE error
// event cuts it (kept in s.cut; any other error event fails the test).
func (s *sseStream) all() ([]sseEvent, []schemas.StreamResponse) {
	var evs []sseEvent
	var rs []schemas.StreamResponse
	for {
		ev, ok := s.next()
		if !ok {
			return evs, rs
		}
		var r rpcReply
		if json.Unmarshal([]byte(ev.data), &r) == nil && r.Error != nil && r.Error.Code == schemas.ErrUnavailable.Code {
			s.cut = &r
			return evs, rs
		}
		evs = append(evs, ev)
		rs = append(rs, s.result(ev))
	}
}

func kind(r schemas.StreamResponse) string {
	switch {
	case r.Task != nil:
		return "task:" + string(r.Task.Status.State)
	case r.Message != nil:
		return "message"
	case r.StatusUpdate != nil:
		return "status:" + string(r.StatusUpdate.Status.State)
	case r.ArtifactUpdate != nil:
		return fmt.Sprintf("artifact(append=%v,last=%v)", r.ArtifactUpdate.Append, r.ArtifactUpdate.LastChunk)
	}
	return "empty"
}

func kinds(rs []schemas.StreamResponse) string {
	var k []string
	for _, r := range rs {
		k = append(k, kind(r))
	}
	return strings.Join(k, " ")
}

// checkCursors verifies ids are strictly increasing numbers.
// cursorOf reads an SSE id the edge wrote, "<revision>.<index>", as a
// number ordered as the events are.
func cursorOf(id string) (uint64, error) {
	revText, indexText, ok := strings.Cut(id, ".")
	rev, err := strconv.ParseUint(revText, 10, 64)
	index, err2 := strconv.ParseUint(indexText, 10, 64)
	if !ok || err != nil || err2 != nil || index >= 1<<12 {
		return 0, fmt.Errorf("SSE id %q is not <revision>.<index>", id)
	}
	return rev<<12 | index, nil
}

func checkCursors(t testing.TB, evs []sseEvent) {
	t.Helper()
	var prev uint64
	for i, ev := range evs {
		n, err := cursorOf(ev.id)
		if err != nil || (i > 0 && n <= prev) {
			t.Fatalf("event %d has id %q after %d", i, ev.id, prev)
		}
		prev = n
	}
}

func TestSendStreamingMessageEcho(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	s, r := openStream(t, h.url, "echo", "SendStreamingMessage", send(userMessage("one two three four five six seven eight nine"), false), "")
	if r != nil {
		t.Fatalf("no stream: %+v", r.Error)
	}
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := s.resp.Header.Get(k); !strings.HasPrefix(got, want) {
			t.Errorf("%s = %q", k, got)
		}
	}
	evs, rs := s.all()
	want := "task:TASK_STATE_SUBMITTED status:TASK_STATE_WORKING artifact(append=false,last=false) artifact(append=true,last=false) artifact(append=true,last=true) status:TASK_STATE_COMPLETED"
	if got := kinds(rs); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	checkCursors(t, evs)
	id := rs[0].Task.ID
	for _, r := range rs[1:] {
		if (r.StatusUpdate != nil && r.StatusUpdate.TaskID != id) || (r.ArtifactUpdate != nil && r.ArtifactUpdate.TaskID != id) {
			t.Fatal("an update names another task")
		}
	}
}

func TestSendStreamingMessageReplyIsOneMessage(t *testing.T) {
	replier := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		return out.Reply(ctx, *workers.AgentMessage("pong"))
	})
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "pong", Agent: replier}}})
	s, _ := openStream(t, h.url, "pong", "SendStreamingMessage", send(userMessage("ping"), false), "")
	_, rs := s.all()
	if kinds(rs) != "message" || rs[0].Message.Text() != "pong" {
		t.Fatalf("events: %s", kinds(rs))
	}
}

func TestStreamClosesOnInputRequired(t *testing.T) {
	asker := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		return out.InputRequired(ctx, "which one?")
	})
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "ask", Agent: asker}}})
	s, _ := openStream(t, h.url, "ask", "SendStreamingMessage", send(userMessage("do it"), false), "")
	_, rs := s.all()
	if got := kinds(rs); got != "task:TASK_STATE_SUBMITTED status:TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("events: %s", got)
	}
}

// Errors before the first event reach the client as errors, not as a
// stream (openStream reads either framing; TestFrontDoorStreamingErrors
// checks the framing).
func TestStreamingErrorsBeforeTheFirstEvent(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	_, r := openStream(t, h.url, "echo", "SubscribeToTask", map[string]any{"id": schemas.NewID()}, "")
	mustError(t, r, schemas.ErrTaskNotFound)
	_, r = openStream(t, h.url, "echo", "SendStreamingMessage", map[string]any{}, "")
	mustError(t, r, schemas.ErrInvalidParams)
	done := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", send(userMessage("x"), false))).Task
	_, r = openStream(t, h.url, "echo", "SubscribeToTask", map[string]any{"id": done.ID}, "")
	mustError(t, r, schemas.ErrUnsupportedOperation)
	_, r = openStream(t, h.url, "echo", "SubscribeToTask", map[string]any{"id": done.ID}, "not-a-cursor")
	mustError(t, r, schemas.ErrInvalidParams)
}

// stepper is an agent the test drives: each value sent on steps becomes an
// artifact chunk; closing steps completes the task.
type stepper struct {
	mu    sync.Mutex
	steps map[string]chan string
	start chan string
}

func newStepper() *stepper {
	return &stepper{steps: map[string]chan string{}, start: make(chan string, 16)}
}

func (s *stepper) ch(id string) chan string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.steps[id] == nil {
		s.steps[id] = make(chan string)
	}
	return s.steps[id]
}

func (s *stepper) Execute(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	if err := out.Working(ctx, "started"); err != nil {
		return err
	}
	// A progress status is queued; the tests take "started" to mean the
	// task is WORKING in the store.
	if err := out.Flush(ctx); err != nil {
		return err
	}
	s.start <- req.Task.ID
	steps := s.ch(req.Task.ID)
	first := true
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case v, ok := <-steps:
			if !ok {
				return out.Complete(ctx, "all steps done")
			}
			a := schemas.Artifact{ArtifactID: "steps", Parts: []schemas.Part{schemas.TextPart(v)}}
			if err := out.ArtifactChunk(ctx, a, !first, false); err != nil {
				return err
			}
			first = false
		}
	}
}

func TestResumeOnAnotherEdgeWithLastEventID(t *testing.T) {
	st := newStepper()
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "steps", Agent: st}}})
	b2 := bustest.Connect(t, h.srv, bustest.Options{})
	url2 := h.startEdge(b2, edge.Config{})
	h.waitAgent(url2, "steps")

	s, _ := openStream(t, h.url, "steps", "SendStreamingMessage", send(userMessage("go"), false), "")
	id := recv(t, st.start, "agent start")
	steps := st.ch(id)
	var got []string
	read := func(s *sseStream) sseEvent {
		ev, ok := s.next()
		if !ok {
			t.Fatalf("stream ended early after %v", got)
		}
		got = append(got, kind(s.result(ev)))
		return ev
	}
	read(s) // task
	read(s) // working
	steps <- "a"
	read(s)
	steps <- "b"
	last := read(s)
	// Cut the connection mid-stream, then more happens while the client is away.
	s.resp.Body.Close()
	steps <- "c"
	steps <- "d"
	close(steps)
	h.waitState(h.url, "steps", id, schemas.TaskStateCompleted)

	s2, r := openStream(t, url2, "steps", "SubscribeToTask", map[string]any{"id": id}, last.id)
	if r != nil {
		t.Fatalf("resume refused: %+v", r.Error)
	}
	evs, rs := s2.all()
	checkCursors(t, append([]sseEvent{last}, evs...))
	var texts []string
	for _, r := range rs {
		if r.ArtifactUpdate != nil {
			texts = append(texts, *r.ArtifactUpdate.Artifact.Parts[0].Text)
		}
	}
	if strings.Join(texts, "") != "cd" || kind(rs[len(rs)-1]) != "status:TASK_STATE_COMPLETED" {
		t.Fatalf("resumed events %s (artifacts %v)", kinds(rs), texts)
	}
	// A client that holds an id of a release before "<revision>.<index>"
	// (one decimal number, revision<<4 | index) resumes at the same place.
	n, _ := cursorOf(last.id)
	s2old, r := openStream(t, url2, "steps", "SubscribeToTask", map[string]any{"id": id}, strconv.FormatUint(n>>12<<4|n&15, 10))
	if r != nil {
		t.Fatalf("resume with an earlier release's id refused: %+v", r.Error)
	}
	if _, rsOld := s2old.all(); kinds(rsOld) != kinds(rs) {
		t.Fatalf("resumed with an earlier release's id: %s, want %s", kinds(rsOld), kinds(rs))
	}
	// Resuming from the final cursor gives an empty stream that just ends.
	s3, _ := openStream(t, url2, "steps", "SubscribeToTask", map[string]any{"id": id}, evs[len(evs)-1].id)
	if evs, _ := s3.all(); len(evs) != 0 {
		t.Fatalf("resume at the end sent %d events", len(evs))
	}
}

// SubscribeToTask while the task is producing: the snapshot plus the events
// after it reproduce the final task exactly: no gap, no duplicate. Runs
// many rounds; A2ABUS_STRESS=N runs N.
func TestSubscribeSnapshotBoundary(t *testing.T) {
	rounds := 10
	if n, err := strconv.Atoi(os.Getenv("A2ABUS_STRESS")); err == nil {
		rounds = n
	}
	const chunks = 40
	producer := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		for i := range chunks {
			a := schemas.Artifact{ArtifactID: "n", Parts: []schemas.Part{schemas.TextPart(strconv.Itoa(i) + ",")}}
			if err := out.ArtifactChunk(ctx, a, i > 0, i == chunks-1); err != nil {
				return err
			}
		}
		return nil
	})
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "prod", Agent: producer}}})
	for round := range rounds {
		task := mustResult[schemas.SendMessageResponse](t, h.call("prod", "SendMessage", send(userMessage("go"), true))).Task
		s, r := openStream(t, h.url, "prod", "SubscribeToTask", map[string]any{"id": task.ID}, "")
		if r != nil {
			continue // the task finished before we subscribed: nothing to check this round
		}
		evs, rs := s.all()
		checkCursors(t, evs)
		if rs[0].Task == nil {
			t.Fatalf("round %d: first event is %s", round, kind(rs[0]))
		}
		var text string
		for _, a := range rs[0].Task.Artifacts {
			for _, p := range a.Parts {
				text += *p.Text
			}
		}
		for _, r := range rs[1:] {
			if r.ArtifactUpdate != nil {
				text += *r.ArtifactUpdate.Artifact.Parts[0].Text
			}
		}
		var want string
		for i := range chunks {
			want += strconv.Itoa(i) + ","
		}
		if text != want {
			t.Fatalf("round %d: snapshot+events give %q, want %q", round, text, want)
		}
		if kind(rs[len(rs)-1]) != "status:TASK_STATE_COMPLETED" && rs[0].Task.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("round %d: stream did not end at completion: %s", round, kinds(rs))
		}
	}
}

func TestConcurrentSubscribersSeeTheSameEvents(t *testing.T) {
	st := newStepper()
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "steps", Agent: st}}})
	task := mustResult[schemas.SendMessageResponse](t, h.call("steps", "SendMessage", send(userMessage("go"), true))).Task
	recv(t, st.start, "agent start")
	steps := st.ch(task.ID)
	var streams []*sseStream
	for range 3 {
		s, r := openStream(t, h.url, "steps", "SubscribeToTask", map[string]any{"id": task.ID}, "")
		if r != nil {
			t.Fatal(r.Error)
		}
		streams = append(streams, s)
	}
	for i := range 20 {
		steps <- strconv.Itoa(i)
	}
	close(steps)
	var seqs []string
	for _, s := range streams {
		evs, rs := s.all()
		var b strings.Builder
		for i, ev := range evs[1:] { // after each one's snapshot
			fmt.Fprintf(&b, "%s=%s;", ev.id, kind(rs[i+1]))
		}
		seqs = append(seqs, b.String())
	}
	// All subscribed while the agent waited, so all saw the same snapshot
	// and must see the very same events after it.
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[0] {
			t.Fatalf("subscriber %d saw a different sequence:\n%s\n%s", i, seqs[0], seqs[i])
		}
	}
	if strings.Count(seqs[0], "artifact") != 20 {
		t.Fatalf("sequence: %s", seqs[0])
	}
}

// A subscriber that stops reading does not delay the task or another
// subscriber: each has its own reader and bounded buffer.
func TestStalledSubscriberDoesNotBlockOthers(t *testing.T) {
	const chunks = 100
	big := strings.Repeat("x", 1<<10)
	gate := make(chan struct{})
	producer := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		if err := out.Working(ctx, "waiting for subscribers"); err != nil {
			return err
		}
		<-gate
		for i := range chunks {
			a := schemas.Artifact{ArtifactID: "big", Parts: []schemas.Part{schemas.TextPart(big)}}
			if err := out.ArtifactChunk(ctx, a, i > 0, i == chunks-1); err != nil {
				return err
			}
		}
		return nil
	})
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{{Name: "big", Agent: producer}},
		edge:   edge.Config{StreamBuffer: 8},
	})
	task := mustResult[schemas.SendMessageResponse](t, h.call("big", "SendMessage", send(userMessage("go"), true))).Task
	h.waitState(h.url, "big", task.ID, schemas.TaskStateWorking)
	stalled, _ := openStream(t, h.url, "big", "SubscribeToTask", map[string]any{"id": task.ID}, "")
	if _, ok := stalled.next(); !ok { // read the snapshot, then stop reading
		t.Fatal("no snapshot")
	}
	live, _ := openStream(t, h.url, "big", "SubscribeToTask", map[string]any{"id": task.ID}, "")
	close(gate)
	// The live subscriber gets everything. On a loaded machine even a
	// reading client may fall 8 events behind and be cut; it then resumes
	// from its cursor, as a real client does, and still misses nothing.
	evs, rs := live.all()
	for resumes := 0; len(rs) > 0 && kind(rs[len(rs)-1]) != "status:TASK_STATE_COMPLETED"; resumes++ {
		if resumes == 20 {
			t.Fatalf("live subscriber cut %d times; got %d events", resumes, len(rs))
		}
		next, _ := openStream(t, h.url, "big", "SubscribeToTask", map[string]any{"id": task.ID}, evs[len(evs)-1].id)
		more, mrs := next.all()
		evs, rs = append(evs, more...), append(rs, mrs...)
	}
	if kind(rs[len(rs)-1]) != "status:TASK_STATE_COMPLETED" || len(rs) != chunks+2 {
		t.Fatalf("live subscriber got %d events ending in %s", len(rs), kind(rs[len(rs)-1]))
	}
	h.waitState(h.url, "big", task.ID, schemas.TaskStateCompleted)
	// The stalled stream was cut (or finished) rather than holding anyone up;
	// reading it now ends.
	stalled.all()
}

// A stream that falls behind its task's events is cut with a retryable
// error event (UNAVAILABLE, "resume it"), not ended like a finished one
// (official clients take a stream's end for the task's); resumed from its
// last event id it gets the rest. The subscriber reads nothing while the
// agent writes more than the connection buffers, so the edge cannot keep
// its reader drained and the reader overflows.
func TestStreamThatFellBehindEndsWithRetryableError(t *testing.T) {
	const chunks = 32 // 8 MiB: more than a loopback connection buffers unread
	big := strings.Repeat("x", 256<<10)
	gate := make(chan struct{})
	producer := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		if err := out.Working(ctx, "waiting for the subscriber"); err != nil {
			return err
		}
		if err := out.Flush(ctx); err != nil {
			return err
		}
		<-gate
		for i := range chunks {
			// Each chunk replaces the last: the record stays small while
			// the stream carries every chunk.
			a := schemas.Artifact{ArtifactID: "big", Parts: []schemas.Part{schemas.TextPart(big)}}
			if err := out.ArtifactChunk(ctx, a, false, i == chunks-1); err != nil {
				return err
			}
			if err := out.Flush(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{{Name: "big", Agent: producer}},
		edge:   edge.Config{StreamBuffer: 4},
	})
	task := mustResult[schemas.SendMessageResponse](t, h.call("big", "SendMessage", send(userMessage("go"), true))).Task
	h.waitState(h.url, "big", task.ID, schemas.TaskStateWorking)
	stalled, _ := openStream(t, h.url, "big", "SubscribeToTask", map[string]any{"id": task.ID}, "")
	if _, ok := stalled.next(); !ok {
		t.Fatal("no snapshot")
	}
	close(gate)
	h.waitState(h.url, "big", task.ID, schemas.TaskStateCompleted)
	evs, _ := stalled.all()
	if stalled.cut == nil {
		t.Fatalf("a stream %d events behind ended without an error event", chunks+2-len(evs))
	}
	if !strings.Contains(stalled.cut.Error.Message, "fell behind") || stalled.cut.reason(t) != schemas.ErrUnavailable.Reason {
		t.Fatalf("cut with %s: %s", stalled.cut.reason(t), stalled.cut.Error.Message)
	}
	last := "" // the snapshot's id when no event came through
	if len(evs) > 0 {
		last = evs[len(evs)-1].id
	}
	if last == "" {
		t.Fatal("no event id to resume from")
	}
	resumed, _ := openStream(t, h.url, "big", "SubscribeToTask", map[string]any{"id": task.ID}, last)
	_, rs := resumed.all()
	if len(rs) == 0 || kind(rs[len(rs)-1]) != "status:TASK_STATE_COMPLETED" || resumed.cut != nil {
		t.Fatalf("the resumed stream got %d events ending %s (cut %+v)", len(rs), kind(rs[len(rs)-1]), resumed.cut)
	}
}

func TestKeepAliveAndDisconnectFreesReader(t *testing.T) {
	bl := newBlocker()
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{{Name: "slow", Agent: bl}},
		edge:   edge.Config{KeepAlive: 20 * time.Millisecond},
	})
	task := mustResult[schemas.SendMessageResponse](t, h.call("slow", "SendMessage", send(userMessage("x"), true))).Task
	recv(t, bl.started, "agent start")
	s, _ := openStream(t, h.url, "slow", "SubscribeToTask", map[string]any{"id": task.ID}, "")
	s.next() // snapshot
	// Keep-alive comments arrive while nothing happens.
	for keepAlives := 0; keepAlives < 2; {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(line) == ": keep-alive" {
			keepAlives++
		}
	}
	if n := bustest.EventSubscribers(h.b); n != 1 {
		t.Fatalf("readers while subscribed = %d", n)
	}
	s.resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := bustest.EventSubscribers(h.b)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reader still open after the client left (%d)", n)
		}
		time.Sleep(10 * time.Millisecond) // polling the server's consumer count
	}
	mustResult[schemas.Task](t, h.call("slow", "CancelTask", map[string]any{"id": task.ID}))
}

func newReader(resp *http.Response) *bufio.Reader { return bufio.NewReaderSize(resp.Body, 64<<10) }

// More SSE subscribers than JetStream allows consumers on a stream (1000
// by default) follow one task on one edge: they share the edge's one
// events consumer, and every one of them sees the task end.
func TestManySubscribersShareOneConsumer(t *testing.T) {
	const subscribers = 1100
	bl := newBlocker()
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "slow", Agent: bl}}})
	task := mustResult[schemas.SendMessageResponse](t, h.call("slow", "SendMessage", send(userMessage("x"), true))).Task
	recv(t, bl.started, "agent start")
	streams := make([]*sseStream, subscribers)
	for i := range streams {
		s, r := openStream(t, h.url, "slow", "SubscribeToTask", map[string]any{"id": task.ID}, "")
		if s == nil {
			t.Fatalf("subscriber %d refused: %+v", i, r.Error)
		}
		s.next() // the snapshot
		streams[i] = s
	}
	if n := bustest.EventReaders(t, h.b); n > 1 {
		t.Fatalf("%d consumers for %d subscribers", n, subscribers)
	}
	h.call("slow", "CancelTask", map[string]any{"id": task.ID})
	for i, s := range streams {
		var last string
		for ev, ok := s.next(); ok; ev, ok = s.next() {
			last = ev.data
		}
		if !strings.Contains(last, "TASK_STATE_CANCELED") {
			t.Fatalf("subscriber %d ended with %s", i, last)
		}
	}
}

// gatedTaskMaker answers once its gate opens, and registers as an agent
// that answers with tasks only (workers.TaskMaker).
type gatedTaskMaker struct{ gate <-chan struct{} }

func (g gatedTaskMaker) Execute(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return out.Complete(ctx, "done")
}

func (gatedTaskMaker) MakesTasks() bool { return true }

// A streamed send to an agent that answers with tasks only opens with the
// task at once, while the agent has said nothing: the client sees its
// task accepted, and can resume by its event id, before the work is done.
// Any other agent's stream waits for its first event, which may be a
// message alone (TestSendStreamingMessageReplyIsOneMessage).
func TestStreamOfATaskMakerOpensWithTheTask(t *testing.T) {
	gate := make(chan struct{})
	var opened atomic.Bool
	// Should the task not be announced, the agent still ends (and the
	// test with it, failing) rather than hanging the package.
	safety := time.AfterFunc(30*time.Second, func() { opened.Store(true); close(gate) })
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "maker", Agent: gatedTaskMaker{gate}}}})
	s, failed := openStream(t, h.url, "maker", "SendStreamingMessage", send(userMessage("go"), false), "")
	if failed != nil {
		t.Fatalf("stream refused: %+v", failed.Error)
	}
	first, ok := s.next()
	if !ok {
		t.Fatal("the stream ended before its first event")
	}
	if opened.Load() {
		t.Fatal("the task was announced only once the agent answered")
	}
	if r := s.result(first); r.Task == nil || r.Task.Status.State != schemas.TaskStateSubmitted || first.id == "" {
		t.Fatalf("first event %s (id %q), want the submitted task with an id to resume by", kind(r), first.id)
	}
	if safety.Stop() {
		close(gate)
	}
	_, rs := s.all()
	if len(rs) == 0 || kind(rs[len(rs)-1]) != "status:TASK_STATE_COMPLETED" {
		t.Fatalf("after the task: %s", kinds(rs))
	}
	for _, r := range rs {
		if r.Task != nil {
			t.Errorf("the task was announced twice: %s", kinds(rs))
		}
	}
}
