package edge_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// call03 sends a 0.3 JSON-RPC call (no A2A-Version header, as 0.3 clients do).
func (h *harness) call03(agent, method string, params any) *rpcReply {
	h.t.Helper()
	p, _ := json.Marshal(params)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "v03", "method": method, "params": json.RawMessage(p)})
	return h.post(h.url, "/agents/"+agent, string(body), nil)
}

func msg03(text string) map[string]any {
	return map[string]any{"kind": "message", "messageId": schemas.NewID(), "role": "user", "parts": []any{map[string]any{"kind": "text", "text": text}}}
}

func error03(t *testing.T, r *rpcReply, kind *schemas.Error) {
	t.Helper()
	if r.Error == nil || r.Error.Code != kind.Code {
		t.Fatalf("want %d, got %+v / %s", kind.Code, r.Error, r.Result)
	}
	if got := r.reason(t); got != kind.Reason {
		t.Fatalf("0.3 error reason %s, want %s", got, kind.Reason)
	}
}

func TestV03JSONRPC(t *testing.T) {
	bl := newBlocker()
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo"), {Name: "slow", Agent: bl}}})
	r := h.call03("echo", "message/send", map[string]any{"message": msg03("hello from 0.3")})
	var task schemas.V03Task
	if err := json.Unmarshal(r.Result, &task); err != nil || r.Error != nil {
		t.Fatalf("message/send: %s %+v", r.Result, r.Error)
	}
	if task.Kind != "task" || task.Status.State != "completed" || len(task.Artifacts) != 1 || task.Artifacts[0].Parts[0].Kind != "text" {
		t.Fatalf("task %s", r.Result)
	}
	if !strings.Contains(string(r.Result), `"role":"user"`) || strings.Contains(string(r.Result), "ROLE_") || strings.Contains(string(r.Result), "TASK_STATE") {
		t.Fatalf("0.3 shapes only: %s", r.Result)
	}
	// The same task through 1.0.
	v1 := mustResult[schemas.Task](t, h.call("echo", "GetTask", map[string]any{"id": task.ID}))
	if v1.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("1.0 view: %s", v1.Status.State)
	}
	r = h.call03("echo", "tasks/get", map[string]any{"id": task.ID, "historyLength": 1})
	var got schemas.V03Task
	if err := json.Unmarshal(r.Result, &got); err != nil || len(got.History) != 1 {
		t.Fatalf("tasks/get: %s", r.Result)
	}
	error03(t, h.call03("echo", "tasks/get", map[string]any{"id": schemas.NewID()}), schemas.ErrTaskNotFound)
	error03(t, h.call03("echo", "tasks/cancel", map[string]any{"id": task.ID}), schemas.ErrTaskNotCancelable)
	error03(t, h.call03("echo", "tasks/pushNotificationConfig/set", map[string]any{"taskId": task.ID}), schemas.ErrPushNotSupported)
	error03(t, h.call03("echo", "agent/getAuthenticatedExtendedCard", nil), schemas.ErrExtendedCardNotConfigured)
	error03(t, h.call03("echo", "tasks/teleport", nil), schemas.ErrMethodNotFound)
	error03(t, h.call03("echo", "message/send", map[string]any{"message": map[string]any{"kind": "message", "messageId": "m", "role": "robot", "parts": []any{}}}), schemas.ErrInvalidParams)
	// A 1.0 version header on a 0.3 method is refused.
	body := `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`
	error03(t, h.post(h.url, "/agents/echo", body, map[string]string{"A2A-Version": "1.0"}), schemas.ErrVersionNotSupported)

	// Non-blocking, then cancel through 0.3.
	r = h.call03("slow", "message/send", map[string]any{"message": msg03("x"), "configuration": map[string]any{"blocking": false}})
	if err := json.Unmarshal(r.Result, &got); err != nil || (got.Status.State != "submitted" && got.Status.State != "working") {
		t.Fatalf("non-blocking: %s", r.Result)
	}
	recv(t, bl.started, "agent start")
	r = h.call03("slow", "tasks/cancel", map[string]any{"id": got.ID})
	if err := json.Unmarshal(r.Result, &got); err != nil || got.Status.State != "canceled" {
		t.Fatalf("tasks/cancel: %s", r.Result)
	}
}

func TestV03Streaming(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	s, r := openStream03(t, h, "echo", "message/stream", map[string]any{"message": msg03("a b c d e")})
	if r != nil {
		t.Fatalf("no stream: %+v", r.Error)
	}
	var kinds03 []string
	var lastFinal bool
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
		k, _ := env.Result["kind"].(string)
		if k == "status-update" {
			st := env.Result["status"].(map[string]any)["state"].(string)
			k += ":" + st
			lastFinal, _ = env.Result["final"].(bool)
		}
		kinds03 = append(kinds03, k)
	}
	if got := strings.Join(kinds03, " "); got != "task status-update:working artifact-update artifact-update status-update:completed" || !lastFinal {
		t.Fatalf("0.3 stream: %s (final %v)", got, lastFinal)
	}
}

// A task crosses versions: created via 0.3, streamed via 1.0, canceled via
// REST, read back via 0.3.
func TestTaskCrossesVersions(t *testing.T) {
	st := newStepper()
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "steps", Agent: st}}})
	r := h.call03("steps", "message/send", map[string]any{"message": msg03("go"), "configuration": map[string]any{"blocking": false}})
	var created schemas.V03Task
	if err := json.Unmarshal(r.Result, &created); err != nil {
		t.Fatal(err)
	}
	recv(t, st.start, "agent start")
	s, rr := openStream(t, h.url, "steps", "SubscribeToTask", map[string]any{"id": created.ID}, "")
	if rr != nil {
		t.Fatal(rr.Error)
	}
	ev, _ := s.next()
	if first := s.result(ev); first.Task == nil || first.Task.ID != created.ID {
		t.Fatalf("first 1.0 event %s", kind(first))
	}
	st.ch(created.ID) <- "one"
	ev, _ = s.next()
	if u := s.result(ev); u.ArtifactUpdate == nil {
		t.Fatalf("second event %s", kind(u))
	}
	canceled := restOK[schemas.Task](t, h.rest("POST", "/agents/steps/tasks/"+created.ID+":cancel", "application/json", `{}`))
	if canceled.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("REST cancel: %s", canceled.Status.State)
	}
	_, rest := s.all()
	if len(rest) == 0 || kind(rest[len(rest)-1]) != "status:TASK_STATE_CANCELED" {
		t.Fatalf("1.0 stream ended with %s", kinds(rest))
	}
	var got schemas.V03Task
	if err := json.Unmarshal(h.call03("steps", "tasks/get", map[string]any{"id": created.ID}).Result, &got); err != nil || got.Status.State != "canceled" {
		t.Fatalf("0.3 view after cancel: %+v", got.Status)
	}
}

func openStream03(t *testing.T, h *harness, agent, method string, params any) (*sseStream, *rpcReply) {
	t.Helper()
	return openStreamVersion(t, h.url, agent, method, params, "")
}
