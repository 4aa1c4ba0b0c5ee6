package edge_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

func legacyParams(id, session, text string) map[string]any {
	p := map[string]any{"id": id, "message": map[string]any{"role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}}
	if session != "" {
		p["sessionId"] = session
	}
	return p
}

func TestLegacyDialectEndToEnd(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	// tasks/send with a client-chosen, non-UUID id and a session.
	r := h.call03("echo", "tasks/send", legacyParams("client-task-1", "session-9", "hello legacy"))
	var task schemas.LegacyTask
	if err := json.Unmarshal(r.Result, &task); err != nil || r.Error != nil {
		t.Fatalf("tasks/send: %s %+v", r.Result, r.Error)
	}
	if task.ID != "client-task-1" || task.SessionID != "session-9" || task.Status.State != "completed" || len(task.Artifacts) != 1 || task.Artifacts[0].Parts[0].Type != "text" {
		t.Fatalf("task %s", r.Result)
	}
	if strings.Contains(string(r.Result), `"kind"`) {
		t.Fatalf("legacy shapes have no kind: %s", r.Result)
	}
	// tasks/get answers in the dialect the task was created in.
	r = h.call03("echo", "tasks/get", map[string]any{"id": "client-task-1"})
	if err := json.Unmarshal(r.Result, &task); err != nil || task.ID != "client-task-1" || task.Status.State != "completed" {
		t.Fatalf("tasks/get: %s", r.Result)
	}
	error03(t, h.call03("echo", "tasks/get", map[string]any{"id": "never-sent"}), schemas.ErrTaskNotFound)
	error03(t, h.call03("echo", "tasks/cancel", map[string]any{"id": "client-task-1"}), schemas.ErrTaskNotCancelable)
	error03(t, h.call03("echo", "tasks/send", map[string]any{"message": map[string]any{"role": "user", "parts": []any{}}}), schemas.ErrInvalidParams)
}

func TestLegacyCancelAndStream(t *testing.T) {
	st := newStepper()
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "steps", Agent: st}}})
	s, r := openStreamVersion(t, h.url, "steps", "tasks/sendSubscribe", legacyParams("stream-1", "", "go"), "")
	if r != nil {
		t.Fatalf("no stream: %+v", r.Error)
	}
	id := recv(t, st.start, "agent start")
	if id != schemas.LegacyTaskID("stream-1") {
		t.Fatalf("server task id %s", id)
	}
	steps := st.ch(id)
	steps <- "a"
	steps <- "b"
	close(steps)
	var events []string
	for {
		ev, ok := s.next()
		if !ok {
			break
		}
		var env struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal([]byte(ev.data), &env); err != nil {
			t.Fatal(err)
		}
		if env.Result["id"] != "stream-1" {
			t.Fatalf("event for %v", env.Result["id"])
		}
		switch {
		case env.Result["status"] != nil:
			st := env.Result["status"].(map[string]any)["state"].(string)
			events = append(events, "status:"+st+":"+map[bool]string{true: "final", false: "open"}[env.Result["final"] == true])
		case env.Result["artifact"] != nil:
			events = append(events, "artifact")
		}
	}
	if got := strings.Join(events, " "); got != "status:submitted:open status:working:open artifact artifact status:completed:final" {
		t.Fatalf("legacy stream: %s", got)
	}
}

func TestLegacyRESTRoutes(t *testing.T) {
	bl := newBlocker()
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{workers.EchoDefinition("echo"), {Name: "slow", Agent: bl}},
		edge:   edgeConfigDefault("echo"),
	})
	body, _ := json.Marshal(legacyParams("rest-1", "s", "via rest"))
	r := h.rest("POST", "/a2a/tasks/send", "application/json", string(body))
	// OpenFang's routes answer in OpenFang's shape: the status a string.
	task := restOK[schemas.OpenFangTask](t, r)
	if task.ID != "rest-1" || task.Status != "completed" || task.SessionID != "s" {
		t.Fatalf("send: %s", r.body)
	}
	got := restOK[schemas.OpenFangTask](t, h.rest("GET", "/a2a/tasks/rest-1", "", ""))
	if got.ID != "rest-1" || len(got.Artifacts) != 1 || len(got.Messages) == 0 || got.Messages[0].Role != "user" {
		t.Fatalf("get: %+v", got)
	}
	if r := h.rest("GET", "/a2a/tasks/unknown-task", "", ""); r.status != http.StatusNotFound {
		t.Fatalf("unknown task: %d %s", r.status, r.body)
	}
	if r := h.rest("POST", "/a2a/tasks/rest-1/cancel", "", ""); r.status != http.StatusBadRequest {
		t.Fatalf("cancel finished: %d %s", r.status, r.body)
	}
	// A running task on another agent, canceled over REST.
	body, _ = json.Marshal(map[string]any{"id": "rest-2", "message": map[string]any{"role": "user", "parts": []any{map[string]any{"type": "text", "text": "x"}}}})
	done := make(chan *restReply, 1)
	go func() { done <- h.rest("POST", "/a2a/tasks/send?agent=slow", "application/json", string(body)) }()
	recv(t, bl.started, "agent start")
	canceled := restOK[schemas.OpenFangTask](t, h.rest("POST", "/a2a/tasks/rest-2/cancel?agent=slow", "", ""))
	if canceled.Status != "cancelled" {
		t.Fatalf("cancel: %+v", canceled.Status)
	}
	if res := restOK[schemas.OpenFangTask](t, <-done); res.Status != "cancelled" {
		t.Fatalf("the blocked send ended with %s", res.Status)
	}
	if r := h.rest("GET", "/a2a/tasks/rest-1?agent=nobody", "", ""); r.status != http.StatusNotFound {
		t.Fatalf("unknown agent: %d", r.status)
	}
}

func edgeConfigDefault(agent string) edge.Config { return edge.Config{DefaultAgent: agent} }

// tasks/resubscribe is shared by 0.3 and the older dialect: a task created
// through tasks/send is found by its client's id and streamed in the older
// dialect's shapes, through INPUT_REQUIRED until it is done.
func TestLegacyResubscribeByClientID(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	r := h.call03("echo", "tasks/send", legacyParams("resub-1", "s-1", workers.AskCommand))
	var task schemas.LegacyTask
	if err := json.Unmarshal(r.Result, &task); err != nil || task.Status.State != "input-required" {
		t.Fatalf("tasks/send: %s %+v", r.Result, r.Error)
	}
	s, rr := openStreamVersion(t, h.url, "echo", "tasks/resubscribe", map[string]any{"id": "resub-1"}, "")
	if rr != nil {
		t.Fatalf("no stream: %+v", rr.Error)
	}
	first, ok := s.next()
	if !ok {
		t.Fatal("the stream ended before its first event")
	}
	r = h.call03("echo", "tasks/send", legacyParams("resub-1", "s-1", "the answer"))
	if err := json.Unmarshal(r.Result, &task); err != nil || task.Status.State != "completed" {
		t.Fatalf("answer: %s %+v", r.Result, r.Error)
	}
	evs, _ := s.all()
	states := []string{}
	for _, ev := range append([]sseEvent{first}, evs...) {
		var env struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal([]byte(ev.data), &env); err != nil {
			t.Fatal(err)
		}
		if env.Result["id"] != "resub-1" || env.Result["kind"] != nil {
			t.Fatalf("event not in the older dialect's shape for the client's id: %s", ev.data)
		}
		if st, ok := env.Result["status"].(map[string]any); ok {
			states = append(states, st["state"].(string))
		}
	}
	if len(states) < 2 || states[0] != "input-required" || states[len(states)-1] != "completed" {
		t.Fatalf("states %v", states)
	}
}
