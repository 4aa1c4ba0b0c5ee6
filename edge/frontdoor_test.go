package edge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// The front door: what every client meets before (or instead of) a stream:
// errors of streaming calls in the framing the client asked for, paths with
// a trailing slash, a repeated cancel, the Content-Type of JSON-RPC calls,
// and a subscription that outlives an input-required pause.

// frontDoorTimeout bounds every request of these tests, so a stream the
// server never ends fails the test instead of hanging it.
const frontDoorTimeout = 30 * time.Second

// noRedirects is a client that reports redirects instead of following
// them: a route must answer itself.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// do sends one request and reads its whole body, which must end within
// frontDoorTimeout.
func (h *harness) do(method, path, body string, header map[string]string) (*http.Response, []byte) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), frontDoorTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, h.url+path, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: status %d, the body did not end within %s (%v); read so far: %q", method, path, resp.StatusCode, frontDoorTimeout, err, raw)
	}
	return resp, raw
}

// rpcBody is a JSON-RPC request; id is marshaled as given (string or number).
func rpcBody(id any, method string, params any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return string(b)
}

// parseSSE splits a finished text/event-stream body into its events.
func parseSSE(t testing.TB, raw []byte) []sseEvent {
	s := &sseStream{t: t, r: bufio.NewReader(bytes.NewReader(raw))}
	var evs []sseEvent
	for {
		ev, ok := s.next()
		if !ok {
			return evs
		}
		evs = append(evs, ev)
	}
}

// mustSSEError checks a streaming call that failed before its stream
// opened and was asked for as SSE: HTTP 200, text/event-stream, exactly one
// event holding the JSON-RPC error response to request id wantID, then the
// end of the stream.
func mustSSEError(t testing.TB, resp *http.Response, raw []byte, wantID string, kind *schemas.Error) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d, want 200; body %s", resp.StatusCode, raw)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q, want text/event-stream (one error event); body %s", ct, raw)
	}
	evs := parseSSE(t, raw)
	if len(evs) != 1 {
		t.Fatalf("%d events, want exactly one error event; body %q", len(evs), raw)
	}
	var r rpcReply
	if err := json.Unmarshal([]byte(evs[0].data), &r); err != nil {
		t.Fatalf("event data is not JSON: %q", evs[0].data)
	}
	if r.JSONRPC != "2.0" || string(r.ID) != wantID || r.Result != nil {
		t.Fatalf("event is not a JSON-RPC error response to id %s: %s", wantID, evs[0].data)
	}
	mustError(t, &r, kind)
}

// mustPlainRPCError checks a JSON-RPC error answered as application/json.
func mustPlainRPCError(t testing.TB, resp *http.Response, raw []byte, wantID string, kind *schemas.Error) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d, want 200; body %s", resp.StatusCode, raw)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q, want application/json; body %s", ct, raw)
	}
	var r rpcReply
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("body is not a JSON-RPC response: %q", raw)
	}
	if r.JSONRPC != "2.0" || string(r.ID) != wantID {
		t.Fatalf("envelope jsonrpc %q id %s, want id %s", r.JSONRPC, r.ID, wantID)
	}
	mustError(t, &r, kind)
}

// A JSON-RPC streaming call that fails before its stream opens, sent with
// Accept: text/event-stream, is answered as a stream of one event: the
// JSON-RPC error response. SSE clients (the official SDKs among them) read
// only data: lines, so a plain JSON body is an empty stream to them and the
// error is lost. Asked for with Accept: application/json, the same call
// still gets a plain JSON-RPC error.
func TestFrontDoorStreamingErrors(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	done := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", send(userMessage("finished"), false))).Task
	msg := func(role string, parts []any) map[string]any {
		return map[string]any{"messageId": schemas.NewID(), "role": role, "parts": parts}
	}
	msg03 := func(role string, parts []any) map[string]any {
		return map[string]any{"kind": "message", "messageId": schemas.NewID(), "role": role, "parts": parts}
	}
	text := []any{map[string]any{"text": "x"}}
	text03 := []any{map[string]any{"kind": "text", "text": "x"}}
	cases := []struct {
		name    string
		version string // A2A-Version header; "" = none, as 0.3 clients send
		id      any
		method  string
		params  any
		want    *schemas.Error
	}{
		{"1.0 SubscribeToTask unknown task", "1.0", "sub-unknown", "SubscribeToTask", map[string]any{"id": schemas.NewID()}, schemas.ErrTaskNotFound},
		{"1.0 SubscribeToTask completed task", "1.0", 42, "SubscribeToTask", map[string]any{"id": done.ID}, schemas.ErrUnsupportedOperation},
		{"1.0 SendStreamingMessage without parts", "1.0", "no-parts", "SendStreamingMessage", map[string]any{"message": msg("ROLE_USER", []any{})}, schemas.ErrInvalidParams},
		{"1.0 SendStreamingMessage agent role", "1.0", "agent-role", "SendStreamingMessage", map[string]any{"message": msg("ROLE_AGENT", text)}, schemas.ErrInvalidParams},
		{"1.0 SendStreamingMessage 0.3 role name", "1.0", 7, "SendStreamingMessage", map[string]any{"message": msg("user", text)}, schemas.ErrInvalidParams},
		{"1.0 SendStreamingMessage without message", "1.0", "no-message", "SendStreamingMessage", map[string]any{}, schemas.ErrInvalidParams},
		{"0.3 tasks/resubscribe unknown task", "", "v03-unknown", "tasks/resubscribe", map[string]any{"id": schemas.NewID()}, schemas.ErrTaskNotFound},
		{"0.3 message/stream without parts", "", "v03-no-parts", "message/stream", map[string]any{"message": msg03("user", []any{})}, schemas.ErrInvalidParams},
		{"0.3 message/stream bad role", "", 303, "message/stream", map[string]any{"message": msg03("robot", text03)}, schemas.ErrInvalidParams},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantID, _ := json.Marshal(c.id)
			body := rpcBody(c.id, c.method, c.params)
			header := func(accept string) map[string]string {
				m := map[string]string{"Content-Type": "application/json", "Accept": accept}
				if c.version != "" {
					m["A2A-Version"] = c.version
				}
				return m
			}
			resp, raw := h.do("POST", "/agents/echo", body, header("application/json"))
			mustPlainRPCError(t, resp, raw, string(wantID), c.want)
			resp, raw = h.do("POST", "/agents/echo", body, header("text/event-stream"))
			mustSSEError(t, resp, raw, string(wantID), c.want)
		})
	}
}

// The HTTP+JSON binding keeps its status codes for a subscription that
// cannot start, also when the client asks for text/event-stream.
func TestFrontDoorRESTSubscribeErrorsKeepStatus(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	done := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", send(userMessage("finished"), false))).Task
	header := map[string]string{"Accept": "text/event-stream", "A2A-Version": "1.0"}
	for _, m := range []string{"POST", "GET"} {
		resp, raw := h.do(m, "/agents/echo/tasks/"+schemas.NewID()+":subscribe", "", header)
		restErr(t, &restReply{status: resp.StatusCode, header: resp.Header, body: raw}, schemas.ErrTaskNotFound)
		resp, raw = h.do(m, "/agents/echo/tasks/"+done.ID+":subscribe", "", header)
		restErr(t, &restReply{status: resp.StatusCode, header: resp.Header, body: raw}, schemas.ErrUnsupportedOperation)
	}
}

// volatile are the members that differ between two equal requests that
// each create a task (ids, times).
var volatile = map[string]bool{"id": true, "contextId": true, "messageId": true, "taskId": true, "artifactId": true, "timestamp": true, "sessionId": true}

// normalized decodes JSON and blanks the volatile members; a body that is
// not JSON is returned as is.
func normalized(raw []byte) any {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if volatile[k] {
					x[k] = "<volatile>"
				} else {
					x[k] = walk(e)
				}
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	return walk(v)
}

// withSlash appends "/" to a path, before its query.
func withSlash(p string) string {
	path, query, hasQuery := strings.Cut(p, "?")
	if hasQuery {
		return path + "/?" + query
	}
	return path + "/"
}

// Every route answers the same with a trailing slash: same status, same
// Content-Type and an equivalent body (equal but for fresh ids and times),
// directly (a redirect does not count).
func TestTrailingSlashOnEveryRoute(t *testing.T) {
	bl := newBlocker()
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{workers.EchoDefinition("echo"), {Name: "slow", Agent: bl}},
		edge:   edge.Config{DefaultAgent: "echo"},
	})
	done := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", send(userMessage("done already"), false))).Task
	legacy, _ := json.Marshal(legacyParams("slash-legacy", "", "legacy text"))
	if r := h.rest("POST", "/a2a/tasks/send", "application/json", string(legacy)); r.status != 200 {
		t.Fatalf("legacy send: %d %s", r.status, r.body)
	}
	// Running tasks to cancel: each cancel needs its own, since a second
	// cancel of a task is an error.
	var running []string
	for range 4 {
		running = append(running, mustResult[schemas.SendMessageResponse](t, h.call("slow", "SendMessage", send(userMessage("wait"), true))).Task.ID)
		recv(t, bl.started, "agent start")
	}
	rpcSend := `{"jsonrpc":"2.0","id":"slash","method":"SendMessage","params":{"message":{"messageId":"{new}","role":"ROLE_USER","parts":[{"text":"slash or not"}]}}}`
	restSend := `{"message":{"messageId":"{new}","role":"ROLE_USER","parts":[{"text":"slash or not"}]}}`
	legacySend := `{"id":"{new}","message":{"role":"user","parts":[{"type":"text","text":"slash or not"}]}}`
	cases := []struct {
		name, method, path string
		slashPath          string // the path to append "/" to; default path
		body               string // "{new}" becomes a fresh id in each request
		want               int    // status without the slash
	}{
		{"JSON-RPC endpoint", "POST", "/agents/echo", "", rpcSend, 200},
		{"default card", "GET", "/.well-known/agent-card.json", "", "", 200},
		{"default card, older path", "GET", "/.well-known/agent.json", "", "", 200},
		{"agent card", "GET", "/agents/echo/.well-known/agent-card.json", "", "", 200},
		{"agent list", "GET", "/a2a/agents", "", "", 200},
		{"REST send", "POST", "/agents/echo/message:send", "", restSend, 200},
		{"REST list", "GET", "/agents/echo/tasks", "", "", 200},
		{"REST get", "GET", "/agents/echo/tasks/" + done.ID, "", "", 200},
		{"REST cancel running", "POST", "/agents/slow/tasks/" + running[0] + ":cancel", "/agents/slow/tasks/" + running[1] + ":cancel", "", 200},
		{"REST cancel finished", "POST", "/agents/echo/tasks/" + done.ID + ":cancel", "", "", 400},
		{"root REST send", "POST", "/message:send", "", restSend, 200},
		{"legacy send", "POST", "/a2a/tasks/send", "", legacySend, 200},
		{"legacy get", "GET", "/a2a/tasks/slash-legacy", "", "", 200},
		{"legacy cancel running", "POST", "/a2a/tasks/" + running[2] + "/cancel?agent=slow", "/a2a/tasks/" + running[3] + "/cancel?agent=slow", "", 200},
		{"healthz", "GET", "/healthz", "", "", 200},
		{"readyz", "GET", "/readyz", "", "", 200},
	}
	header := map[string]string{"Content-Type": "application/json", "A2A-Version": "1.0"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := func() string { return strings.ReplaceAll(c.body, "{new}", schemas.NewID()) }
			resp, raw := h.do(c.method, c.path, body(), header)
			if resp.StatusCode != c.want {
				t.Fatalf("%s %s = %d, want %d: %s", c.method, c.path, resp.StatusCode, c.want, raw)
			}
			sp := c.slashPath
			if sp == "" {
				sp = c.path
			}
			sp = withSlash(sp)
			resp2, raw2 := h.do(c.method, sp, body(), header)
			if resp2.StatusCode != resp.StatusCode {
				t.Fatalf("%s %s = %d (Location %q), but without the slash %d: %s", c.method, sp, resp2.StatusCode, resp2.Header.Get("Location"), resp.StatusCode, raw2)
			}
			if a, b := resp.Header.Get("Content-Type"), resp2.Header.Get("Content-Type"); a != b {
				t.Fatalf("%s %s: Content-Type %q, without the slash %q", c.method, sp, b, a)
			}
			if a, b := normalized(raw), normalized(raw2); !reflect.DeepEqual(a, b) {
				t.Fatalf("%s %s answers\n%s\nwithout the slash\n%s", c.method, sp, raw2, raw)
			}
		})
	}
}

// Canceling a task that is already CANCELED is an error like canceling any
// other finished task (TaskNotCancelable), on every binding and dialect.
func TestRecancelIsAnError(t *testing.T) {
	bl := newBlocker()
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{{Name: "slow", Agent: bl}},
		edge:   edge.Config{DefaultAgent: "slow"},
	})
	start := func() string {
		t.Helper()
		id := mustResult[schemas.SendMessageResponse](t, h.call("slow", "SendMessage", send(userMessage("wait"), true))).Task.ID
		recv(t, bl.started, "agent start")
		return id
	}
	t.Run("JSON-RPC 1.0", func(t *testing.T) {
		id := start()
		if got := mustResult[schemas.Task](t, h.call("slow", "CancelTask", map[string]any{"id": id})); got.Status.State != schemas.TaskStateCanceled {
			t.Fatalf("first cancel: %s", got.Status.State)
		}
		r := mustError(t, h.call("slow", "CancelTask", map[string]any{"id": id}), schemas.ErrTaskNotCancelable)
		if r.status != http.StatusOK || !strings.Contains(r.Error.Message, "CANCELED") {
			t.Fatalf("second cancel: HTTP %d, message %q (should say the task is canceled)", r.status, r.Error.Message)
		}
	})
	t.Run("HTTP+JSON", func(t *testing.T) {
		id := start()
		if got := restOK[schemas.Task](t, h.rest("POST", "/agents/slow/tasks/"+id+":cancel", "application/json", `{}`)); got.Status.State != schemas.TaskStateCanceled {
			t.Fatalf("first cancel: %s", got.Status.State)
		}
		// v1.0.1 maps TaskNotCancelable to 400 (1.0.0 said 409).
		restErr(t, h.rest("POST", "/agents/slow/tasks/"+id+":cancel", "application/json", `{}`), schemas.ErrTaskNotCancelable)
	})
	t.Run("JSON-RPC 0.3", func(t *testing.T) {
		id := start()
		var got schemas.V03Task
		if r := h.call03("slow", "tasks/cancel", map[string]any{"id": id}); json.Unmarshal(r.Result, &got) != nil || got.Status.State != "canceled" {
			t.Fatalf("first cancel: %s %+v", r.Result, r.Error)
		}
		error03(t, h.call03("slow", "tasks/cancel", map[string]any{"id": id}), schemas.ErrTaskNotCancelable)
	})
	t.Run("older dialect REST", func(t *testing.T) {
		id := start()
		if got := restOK[schemas.OpenFangTask](t, h.rest("POST", "/a2a/tasks/"+id+"/cancel", "", "")); got.Status != "cancelled" {
			t.Fatalf("first cancel: %+v", got.Status)
		}
		r := h.rest("POST", "/a2a/tasks/"+id+"/cancel", "", "")
		var e struct {
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if r.status != http.StatusBadRequest || json.Unmarshal(r.body, &e) != nil || e.Error.Code != schemas.ErrTaskNotCancelable.Code {
			t.Fatalf("second cancel: %d %s", r.status, r.body)
		}
	})
}

// The JSON-RPC endpoint takes application/json (with parameters) and
// application/a2a+json, and refuses a body of any other media type, or of
// none (what a browser's no-cors fetch sends), with ContentTypeNotSupported.
func TestContentTypeOnJSONRPC(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	body := func() string {
		return rpcBody("ct", "SendMessage", map[string]any{"message": map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": "typed"}}}})
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "application/a2a+json"} {
		resp, raw := h.do("POST", "/agents/echo", body(), map[string]string{"A2A-Version": "1.0", "Content-Type": ct})
		var r rpcReply
		if err := json.Unmarshal(raw, &r); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("Content-Type %q: HTTP %d, body %s", ct, resp.StatusCode, raw)
		}
		if res := mustResult[schemas.SendMessageResponse](t, &r); res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("Content-Type %q: %s", ct, raw)
		}
	}
	for _, ct := range []string{"text/plain", ""} {
		header := map[string]string{"A2A-Version": "1.0"}
		if ct != "" {
			header["Content-Type"] = ct
		}
		resp, raw := h.do("POST", "/agents/echo", body(), header)
		var r rpcReply
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("Content-Type %q: HTTP %d, body not JSON-RPC: %s", ct, resp.StatusCode, raw)
		}
		mustError(t, &r, schemas.ErrContentTypeNotSupported)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("Content-Type %q: HTTP %d, want 200 for a JSON-RPC error", ct, resp.StatusCode)
		}
	}
}

// openSSE sends a request that must open an SSE stream. The stream is cut
// after frontDoorTimeout; ended reports whether the server ended it first.
func openSSE(t *testing.T, method, url, body string, header map[string]string) (s *sseStream, ended func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), frontDoorTimeout)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: no stream: HTTP %d %s: %s", method, url, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	return &sseStream{t: t, resp: resp, r: newReader(resp)}, func() bool { return ctx.Err() == nil }
}

// A subscription opened while a task waits for input (INPUT_REQUIRED)
// stays open: the client answers on the same task and reads, from the same
// subscription, the work that answer starts, through COMPLETED, after which
// the server ends the stream.
func TestSubscriptionFollowsInputRequiredToCompletion(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	const answerText = "one two three four five six"
	ask := func(t *testing.T) schemas.Task {
		task := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", send(userMessage(workers.AskCommand), false))).Task
		if task.Status.State != schemas.TaskStateInputRequired {
			t.Fatalf("first turn: %s", task.Status.State)
		}
		return *task
	}
	answer := func(task schemas.Task) schemas.Message {
		m := userMessage(answerText)
		m.TaskID, m.ContextID = task.ID, task.ContextID
		return m
	}
	// follow reads the subscription after its snapshot and checks it ends
	// with the completion, carrying the echoed answer.
	follow := func(t *testing.T, s *sseStream, ended func() bool, decode func(sseEvent) schemas.StreamResponse, snapshot sseEvent, task schemas.Task) {
		t.Helper()
		evs := []sseEvent{snapshot}
		var rs []schemas.StreamResponse
		for {
			ev, ok := s.next()
			if !ok {
				break
			}
			evs = append(evs, ev)
			rs = append(rs, decode(ev))
		}
		if !ended() {
			t.Fatalf("the stream was still open %s after the answer; events after the snapshot: %s", frontDoorTimeout, kinds(rs))
		}
		if len(rs) == 0 {
			t.Fatal("the subscription ended right after its INPUT_REQUIRED snapshot; it must follow the task through the answer to COMPLETED")
		}
		if last := kind(rs[len(rs)-1]); last != "status:TASK_STATE_COMPLETED" {
			t.Fatalf("events after the snapshot: %s; want the last to be status:TASK_STATE_COMPLETED", kinds(rs))
		}
		checkCursors(t, evs)
		var echoed string
		for _, r := range rs {
			switch {
			case r.StatusUpdate != nil && r.StatusUpdate.TaskID != task.ID,
				r.ArtifactUpdate != nil && r.ArtifactUpdate.TaskID != task.ID,
				r.Task != nil && r.Task.ID != task.ID:
				t.Fatalf("an event names another task: %s", kind(r))
			case r.Message != nil:
				t.Fatalf("a message event on a task subscription: %s", kinds(rs))
			case r.ArtifactUpdate != nil:
				for _, p := range r.ArtifactUpdate.Artifact.Parts {
					if p.Text != nil {
						echoed += *p.Text
					}
				}
			}
		}
		if echoed != answerText {
			t.Fatalf("artifact updates carry %q, want the echoed answer %q (events %s)", echoed, answerText, kinds(rs))
		}
	}

	t.Run("JSON-RPC 1.0", func(t *testing.T) {
		task := ask(t)
		s, ended := openSSE(t, "POST", h.url+"/agents/echo", rpcBody("s1", "SubscribeToTask", map[string]any{"id": task.ID}),
			map[string]string{"Content-Type": "application/json", "Accept": "text/event-stream", "A2A-Version": "1.0"})
		first, ok := s.next()
		if !ok {
			t.Fatal("no snapshot")
		}
		if snap := s.result(first); snap.Task == nil || snap.Task.ID != task.ID || snap.Task.Status.State != schemas.TaskStateInputRequired {
			t.Fatalf("first event %s, want the INPUT_REQUIRED task", kind(snap))
		}
		// The answer, blocking: it returns once the task completed; the
		// subscription must still deliver what happened.
		m := answer(task)
		got := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: &m})).Task
		if got.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("answer: %s", got.Status.State)
		}
		follow(t, s, ended, s.result, first, task)
	})

	t.Run("HTTP+JSON", func(t *testing.T) {
		task := ask(t)
		s, ended := openSSE(t, "POST", h.url+"/agents/echo/tasks/"+task.ID+":subscribe", "",
			map[string]string{"Accept": "text/event-stream", "A2A-Version": "1.0"})
		bare := func(ev sseEvent) schemas.StreamResponse {
			var r schemas.StreamResponse // no JSON-RPC envelope
			if err := json.Unmarshal([]byte(ev.data), &r); err != nil || kind(r) == "empty" {
				t.Fatalf("bad event %q", ev.data)
			}
			return r
		}
		first, ok := s.next()
		if !ok {
			t.Fatal("no snapshot")
		}
		if snap := bare(first); snap.Task == nil || snap.Task.ID != task.ID || snap.Task.Status.State != schemas.TaskStateInputRequired {
			t.Fatalf("first event %s, want the INPUT_REQUIRED task", kind(snap))
		}
		// The answer, non-blocking, over the same binding.
		m := answer(task)
		b, _ := json.Marshal(schemas.SendMessageRequest{Message: &m, Configuration: &schemas.SendMessageConfiguration{ReturnImmediately: true}})
		if res := restOK[schemas.SendMessageResponse](t, h.rest("POST", "/agents/echo/message:send", "application/json", string(b))); res.Task == nil || res.Task.ID != task.ID {
			t.Fatalf("answer: %+v", res)
		}
		follow(t, s, ended, bare, first, task)
	})
}

// An edge that listens on loopback only refuses a request naming another
// host: a browser page whose DNS name was rebound to 127.0.0.1 sends its
// own name as Host. Loopback names and the public URL's host are served.
func TestLoopbackEdgeRefusesRebindingHosts(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")},
		edge: edge.Config{LoopbackOnly: true, PublicURL: "http://a2a.internal.example:8080"}})
	body := `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"` + schemas.NewID() + `"}}`
	for host, want := range map[string]int{
		"attacker.example":          http.StatusForbidden,
		"attacker.example:8080":     http.StatusForbidden,
		"localhost":                 http.StatusOK,
		"127.0.0.1:9":               http.StatusOK,
		"[::1]:9":                   http.StatusOK,
		"a2a.internal.example:8080": http.StatusOK,
	} {
		req, _ := http.NewRequest(http.MethodPost, h.url+"/agents/echo", strings.NewReader(body))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: status %d, want %d", host, resp.StatusCode, want)
		}
	}
}
