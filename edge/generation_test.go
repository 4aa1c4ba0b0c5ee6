package edge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// A2A 1.1 generations (the spec's dev-1.1 §3.2.7), as clients of each
// binding see them.

// callVersion is h.callAt with A2A-Version version.
func (h *harness) callVersion(base, agent, method string, params any, version string) *rpcReply {
	h.t.Helper()
	p, _ := json.Marshal(params)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": json.RawMessage(p)})
	return h.post(base, "/agents/"+agent, string(body), map[string]string{"A2A-Version": version})
}

// restVersion is h.rest at base with A2A-Version version.
func restVersion(t testing.TB, base, method, path, body, version string) *restReply {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("A2A-Version", version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &restReply{status: resp.StatusCode, header: resp.Header, body: b}
}

// storedGeneration is the task's generation in the store.
func (h *harness) storedGeneration(id string) schemas.Generation {
	h.t.Helper()
	rec, _, err := h.b.GetTask(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return rec.Generation
}

// A 1.1 caller's tasks carry the task's generation, on every binding and
// for every way a task comes back; a 1.0 caller's never carry the field.
func TestGenerationsAreForA2A11Callers(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	r10 := h.callVersion(h.url, "echo", "SendMessage", send(userMessage(workers.AskCommand), false), "1.0")
	task := mustResult[schemas.SendMessageResponse](t, r10).Task
	if task.Status.State != schemas.TaskStateInputRequired {
		t.Fatalf("asked: %s", task.Status.State)
	}
	g := h.storedGeneration(task.ID)
	if g < 2 { // created, then at least INPUT_REQUIRED
		t.Fatalf("stored generation %d", g)
	}
	for what, raw := range map[string][]byte{
		"1.0 SendMessage": r10.Result,
		"1.0 GetTask":     h.callVersion(h.url, "echo", "GetTask", map[string]any{"id": task.ID}, "1.0").Result,
		"1.0 ListTasks":   h.callVersion(h.url, "echo", "ListTasks", map[string]any{}, "1.0").Result,
		"1.0 REST GET":    restVersion(t, h.url, "GET", "/agents/echo/tasks/"+task.ID, "", "1.0").body,
		"no version":      h.callVersion(h.url, "echo", "GetTask", map[string]any{"id": task.ID}, "").Result,
	} {
		if strings.Contains(string(raw), "generation") {
			t.Errorf("%s carries a generation: %s", what, raw)
		}
	}
	for what, got := range map[string]schemas.Generation{
		"1.1 GetTask":   mustResult[schemas.Task](t, h.callVersion(h.url, "echo", "GetTask", map[string]any{"id": task.ID}, "1.1")).Generation,
		"1.1 ListTasks": mustResult[schemas.ListTasksResponse](t, h.callVersion(h.url, "echo", "ListTasks", map[string]any{}, "1.1")).Tasks[0].Generation,
		"1.1 REST GET":  restOK[schemas.Task](t, restVersion(t, h.url, "GET", "/agents/echo/tasks/"+task.ID, "", "1.1")).Generation,
	} {
		if got != g {
			t.Errorf("%s: generation %d, want the stored %d", what, got, g)
		}
	}
	// A blocking send of a 1.1 caller is answered with the generation the
	// task finished at.
	answer := userMessage("the answer")
	answer.TaskID = task.ID
	done := mustResult[schemas.SendMessageResponse](t, h.callVersion(h.url, "echo", "SendMessage", schemas.SendMessageRequest{Message: &answer}, "1.1")).Task
	if done.Status.State != schemas.TaskStateCompleted || done.Generation != h.storedGeneration(task.ID) || done.Generation <= g {
		t.Errorf("answered: %s at generation %d (stored %d, asked at %d)", done.Status.State, done.Generation, h.storedGeneration(task.ID), g)
	}
}

// A 1.1 stream's ids are the generations its events carry (1, 2, 3… per
// task), and a stream resumed with the last one it saw, on any edge, gets
// every later event once.
func TestStreamsOfA2A11ResumeByGeneration(t *testing.T) {
	st := newStepper()
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "steps", Agent: st}}})
	url2 := h.startEdge(h.b, edge.Config{})
	h.waitAgent(url2, "steps")

	s, errReply := openStreamWith(t, h.url, "steps", "SendStreamingMessage", send(userMessage("go"), false), "", "1.1")
	if errReply != nil {
		t.Fatalf("open: %+v", errReply.Error)
	}
	id := recv(t, st.start, "agent start")
	want := func(ev sseEvent, gen int, shape string) {
		t.Helper()
		r := s.result(ev)
		var got schemas.Generation
		switch {
		case r.Task != nil:
			got = r.Task.Generation
		case r.StatusUpdate != nil:
			got = r.StatusUpdate.Generation
		case r.ArtifactUpdate != nil:
			got = r.ArtifactUpdate.Generation
		}
		if ev.id != strconv.Itoa(gen) || got != schemas.Generation(gen) || !strings.HasPrefix(kind(r), shape) {
			t.Fatalf("event id %q, generation %d, %s; want id and generation %d, %s", ev.id, got, kind(r), gen, shape)
		}
	}
	next := func(s *sseStream) sseEvent {
		t.Helper()
		ev, ok := s.next()
		if !ok {
			t.Fatal("stream ended early")
		}
		return ev
	}
	want(next(s), 1, "task:TASK_STATE_SUBMITTED")
	want(next(s), 2, "status:TASK_STATE_WORKING")
	st.ch(id) <- "a"
	want(next(s), 3, "artifact")
	s.resp.Body.Close() // the client is cut off after generation 3

	st.ch(id) <- "b"
	r, errReply := openStreamWith(t, url2, "steps", "SubscribeToTask", map[string]any{"id": id}, "3", "1.1")
	if errReply != nil {
		t.Fatalf("resume: %+v", errReply.Error)
	}
	s = r
	want(next(s), 4, "artifact")
	close(st.ch(id))
	want(next(s), 5, "status:TASK_STATE_COMPLETED")
	if ev, ok := s.next(); ok {
		t.Fatalf("an event after the end: %q", ev.data)
	}
	// Resumed past the end, there is nothing to send; a 1.0 client of the
	// same task still resumes by cursor.
	r, errReply = openStreamWith(t, url2, "steps", "SubscribeToTask", map[string]any{"id": id}, "5", "1.1")
	if errReply != nil {
		t.Fatal(errReply.Error)
	}
	if evs, _ := r.all(); len(evs) != 0 {
		t.Errorf("resumed at the last generation: %d events", len(evs))
	}
}

// GetTask with currentGeneration holds until the task's generation passes
// it, answers at once when it already has, and gives the task as it is
// when the edge's bound passes first; on HTTP+JSON as ?currentGeneration.
func TestGetTaskLongPoll(t *testing.T) {
	st := newStepper()
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "steps", Agent: st}}, edge: edge.Config{BlockingTimeout: 200 * time.Millisecond}})
	patient := h.startEdge(h.b, edge.Config{BlockingTimeout: time.Minute})
	h.waitAgent(patient, "steps")
	task := mustResult[schemas.SendMessageResponse](t, h.call("steps", "SendMessage", send(userMessage("go"), true))).Task
	id := recv(t, st.start, "agent start")
	if id != task.ID {
		t.Fatalf("started %s", id)
	}
	g := h.storedGeneration(id) // WORKING
	poll := func(base string, current schemas.Generation) schemas.Task {
		return mustResult[schemas.Task](t, h.callVersion(base, "steps", "GetTask", map[string]any{"id": id, "currentGeneration": current}, "1.1"))
	}
	if got := poll(h.url, g-1); got.Generation != g {
		t.Errorf("polled behind the task: generation %d, want %d at once", got.Generation, g)
	}
	if got := poll(h.url, g); got.Generation != g || got.Status.State != schemas.TaskStateWorking {
		t.Errorf("polled at the task's generation past the bound: %d %s, want the task as it is (%d)", got.Generation, got.Status.State, g)
	}
	// ProtoJSON writes an int64 as a string.
	if got := mustResult[schemas.Task](t, h.callVersion(h.url, "steps", "GetTask", map[string]any{"id": id, "currentGeneration": strconv.Itoa(int(g) - 1)}, "1.1")); got.Generation != g {
		t.Errorf("currentGeneration as a string: %d", got.Generation)
	}
	got := make(chan schemas.Task, 1)
	go func() { got <- poll(patient, g) }()
	st.ch(id) <- "a"
	if next := recv(t, got, "the long poll's answer"); next.Generation != g+1 || len(next.Artifacts) != 1 {
		t.Errorf("the poll's answer: generation %d with %d artifacts, want %d with the new one", next.Generation, len(next.Artifacts), g+1)
	}
	// HTTP+JSON.
	rest := restOK[schemas.Task](t, restVersion(t, h.url, "GET", "/agents/steps/tasks/"+id+"?currentGeneration="+strconv.Itoa(int(g)+1), "", "1.1"))
	if rest.Generation != g+1 {
		t.Errorf("REST long poll: generation %d, want %d", rest.Generation, g+1)
	}
	restErr(t, restVersion(t, h.url, "GET", "/agents/steps/tasks/"+id+"?currentGeneration=-1", "", "1.1"), schemas.ErrInvalidParams)
	mustError(t, h.callVersion(h.url, "steps", "GetTask", map[string]any{"id": id, "currentGeneration": "soon"}, "1.1"), schemas.ErrInvalidParams)
	// A finished task never changes: it is answered at once.
	close(st.ch(id))
	h.waitState(h.url, "steps", id, schemas.TaskStateCompleted)
	if fin := poll(patient, h.storedGeneration(id)); fin.Status.State != schemas.TaskStateCompleted {
		t.Errorf("a finished task's poll: %s", fin.Status.State)
	}
}

// Two clients continue the same interrupted task with the generation they
// both read: on each binding exactly one is taken and the other refused
// with TaskGenerationMismatchError (−32010 on JSON-RPC, 409 ABORTED on
// HTTP+JSON); a new task ignores the field.
func TestIfGenerationMatchOnEachBinding(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	type outcome struct {
		ok       bool
		mismatch bool
		detail   string
	}
	bindings := map[string]func(taskID string, gen schemas.Generation) outcome{
		"JSON-RPC": func(taskID string, gen schemas.Generation) outcome {
			m := userMessage("answer")
			m.TaskID = taskID
			r := h.callVersion(h.url, "echo", "SendMessage", schemas.SendMessageRequest{Message: &m,
				Configuration: &schemas.SendMessageConfiguration{ReturnImmediately: true, IfGenerationMatch: &gen}}, "1.1")
			if r.Error == nil {
				return outcome{ok: true}
			}
			return outcome{mismatch: r.Error.Code == -32010 && strings.Contains(string(r.Error.Data), "TASK_GENERATION_MISMATCH"), detail: string(r.Error.Data)}
		},
		"HTTP+JSON": func(taskID string, gen schemas.Generation) outcome {
			body := `{"message":{"messageId":"` + schemas.NewID() + `","taskId":"` + taskID + `","role":"ROLE_USER","parts":[{"text":"answer"}]},"configuration":{"returnImmediately":true,"ifGenerationMatch":"` + strconv.Itoa(int(gen)) + `"}}`
			r := restVersion(t, h.url, "POST", "/agents/echo/message:send", body, "1.1")
			if r.status == http.StatusOK {
				return outcome{ok: true}
			}
			return outcome{mismatch: r.status == http.StatusConflict && strings.Contains(string(r.body), `"ABORTED"`) && strings.Contains(string(r.body), "TASK_GENERATION_MISMATCH"), detail: string(r.body)}
		},
	}
	for name, answer := range bindings {
		t.Run(name, func(t *testing.T) {
			task := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", send(userMessage(workers.AskCommand), false))).Task
			g := h.storedGeneration(task.ID)
			results := make([]outcome, 2)
			var wg sync.WaitGroup
			for i := range results {
				wg.Go(func() { results[i] = answer(task.ID, g) })
			}
			wg.Wait()
			won, lost := 0, 0
			for _, o := range results {
				switch {
				case o.ok:
					won++
				case o.mismatch:
					lost++
					if !strings.Contains(o.detail, `"expectedGeneration":"`+strconv.Itoa(int(g))+`"`) {
						t.Errorf("the refusal does not say which generation was expected: %s", o.detail)
					}
				default:
					t.Errorf("neither taken nor a mismatch: %s", o.detail)
				}
			}
			if won != 1 || lost != 1 {
				t.Fatalf("%d taken, %d refused; want exactly one each", won, lost)
			}
		})
	}
	// A new task: the precondition has nothing to hold against.
	zero := schemas.Generation(42)
	fresh := mustResult[schemas.SendMessageResponse](t, h.callVersion(h.url, "echo", "SendMessage", schemas.SendMessageRequest{Message: ptr(userMessage("hi")),
		Configuration: &schemas.SendMessageConfiguration{IfGenerationMatch: &zero}}, "1.1")).Task
	if fresh.Status.State != schemas.TaskStateCompleted {
		t.Errorf("a new task with ifGenerationMatch: %s", fresh.Status.State)
	}
}
