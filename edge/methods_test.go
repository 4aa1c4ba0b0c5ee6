package edge_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

func TestSendMessageBlockingCompletes(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	for _, agent := range []string{"", "echo"} { // root = default agent, and the agent's own URL
		r := h.call(agent, "SendMessage", schemas.SendMessageRequest{Message: ptr(userMessage("hello a2abus world"))})
		if r.status != 200 || r.JSONRPC != "2.0" || string(r.ID) != "7" {
			t.Fatalf("envelope: status %d jsonrpc %q id %s", r.status, r.JSONRPC, r.ID)
		}
		res := mustResult[schemas.SendMessageResponse](t, r)
		if res.Task == nil || res.Message != nil {
			t.Fatalf("want a task result, got %s", r.Result)
		}
		task := res.Task
		if task.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("state = %s, want completed", task.Status.State)
		}
		if task.ContextID == "" || !schemas.ValidTaskID(task.ID) {
			t.Fatalf("ids: %q %q", task.ID, task.ContextID)
		}
		if len(task.Artifacts) != 1 || len(task.Artifacts[0].Parts) == 0 {
			t.Fatalf("artifacts: %+v", task.Artifacts)
		}
		// Wire shape: ProtoJSON names and enum strings.
		raw := string(r.Result)
		for _, want := range []string{`"task":{`, `"contextId":`, `"TASK_STATE_COMPLETED"`, `"ROLE_USER"`, `"artifactId":`, `"messageId":`} {
			if !strings.Contains(raw, want) {
				t.Errorf("result lacks %s: %s", want, raw)
			}
		}
	}
}

func TestSendMessageKeepsClientContextID(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	m := userMessage("hi")
	m.ContextID = "my-conversation"
	task := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: &m})).Task
	if task.ContextID != "my-conversation" {
		t.Fatalf("contextId = %q", task.ContextID)
	}
}

func TestSendMessageReturnImmediately(t *testing.T) {
	bl := newBlocker()
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "slow", Agent: bl}}})
	res := mustResult[schemas.SendMessageResponse](t, h.call("slow", "SendMessage", send(userMessage("x"), true)))
	if res.Task == nil {
		t.Fatal("no task")
	}
	if st := res.Task.Status.State; st != schemas.TaskStateSubmitted && st != schemas.TaskStateWorking {
		t.Fatalf("state = %s, want submitted or working", st)
	}
	if got := recv(t, bl.started, "agent start"); got != res.Task.ID {
		t.Fatalf("agent ran %s, want %s", got, res.Task.ID)
	}
	h.waitState(h.url, "slow", res.Task.ID, schemas.TaskStateWorking)
}

func TestSendMessageReplyWithMessage(t *testing.T) {
	replier := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		return out.Reply(ctx, *workers.AgentMessage("pong: " + req.Message.Text()))
	})
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "pong", Agent: replier}}})
	m := userMessage("ping")
	res := mustResult[schemas.SendMessageResponse](t, h.call("pong", "SendMessage", schemas.SendMessageRequest{Message: &m}))
	if res.Message == nil || res.Task != nil {
		t.Fatalf("want a message result, got %+v", res)
	}
	if res.Message.Text() != "pong: ping" || res.Message.Role != schemas.RoleAgent || res.Message.ContextID == "" {
		t.Fatalf("reply = %+v", res.Message)
	}
}

func TestSendMessageAgentFailure(t *testing.T) {
	failing := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		panic("boom")
	})
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "bad", Agent: failing}}})
	task := mustResult[schemas.SendMessageResponse](t, h.call("bad", "SendMessage", schemas.SendMessageRequest{Message: ptr(userMessage("x"))})).Task
	if task.Status.State != schemas.TaskStateFailed || !strings.Contains(task.Status.Message.Text(), "boom") {
		t.Fatalf("status = %+v", task.Status)
	}
	// The worker survived the panic and serves the next task.
	task = mustResult[schemas.SendMessageResponse](t, h.call("bad", "SendMessage", schemas.SendMessageRequest{Message: ptr(userMessage("y"))})).Task
	if task.Status.State != schemas.TaskStateFailed {
		t.Fatalf("second task: %s", task.Status.State)
	}
}

func TestGetTaskHistoryLength(t *testing.T) {
	asker := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		if err := out.Working(ctx, "thinking"); err != nil {
			return err
		}
		return out.Complete(ctx, "done")
	})
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "h", Agent: asker}}})
	task := mustResult[schemas.SendMessageResponse](t, h.call("h", "SendMessage", schemas.SendMessageRequest{Message: ptr(userMessage("q"))})).Task
	if len(task.History) != 3 { // user, "thinking", "done"
		t.Fatalf("history = %d messages", len(task.History))
	}
	if task.History[0].Role != schemas.RoleUser || task.History[2].Text() != "done" {
		t.Fatalf("history not chronological: %+v", task.History)
	}
	cases := []struct {
		name string
		n    any
		want int
	}{
		{"unset", nil, 3}, {"zero", 0, 0}, {"one", 1, 1}, {"two", 2, 2}, {"more than held", 50, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			params := map[string]any{"id": task.ID}
			if c.n != nil {
				params["historyLength"] = c.n
			}
			got := mustResult[schemas.Task](t, h.call("h", "GetTask", params))
			if len(got.History) != c.want {
				t.Fatalf("history = %d, want %d", len(got.History), c.want)
			}
			if c.want > 0 && got.History[len(got.History)-1].Text() != "done" {
				t.Fatal("historyLength must keep the most recent messages")
			}
		})
	}
	mustError(t, h.call("h", "GetTask", map[string]any{"id": task.ID, "historyLength": -1}), schemas.ErrInvalidParams)
	// SendMessage applies configuration.historyLength to the returned task.
	n := int32(1)
	req := schemas.SendMessageRequest{Message: ptr(userMessage("q")), Configuration: &schemas.SendMessageConfiguration{HistoryLength: &n}}
	if got := mustResult[schemas.SendMessageResponse](t, h.call("h", "SendMessage", req)).Task; len(got.History) != 1 {
		t.Fatalf("SendMessage historyLength 1: %d messages", len(got.History))
	}
}

func TestGetTaskErrors(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo"), workers.EchoDefinition("other")}})
	r := mustError(t, h.call("echo", "GetTask", map[string]any{"id": schemas.NewID()}), schemas.ErrTaskNotFound)
	if r.status != 200 {
		t.Fatalf("JSON-RPC errors use HTTP 200, got %d", r.status)
	}
	mustError(t, h.call("echo", "GetTask", map[string]any{"id": "../../etc"}), schemas.ErrTaskNotFound)
	mustError(t, h.call("echo", "GetTask", map[string]any{}), schemas.ErrInvalidParams)
	mustError(t, h.call("echo", "GetTask", map[string]any{"id": 5}), schemas.ErrInvalidParams)
	// A task is only visible on its own agent's endpoint.
	task := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: ptr(userMessage("x"))})).Task
	mustError(t, h.call("other", "GetTask", map[string]any{"id": task.ID}), schemas.ErrTaskNotFound)
}

func TestCancelQueuedTaskAndLateWorkerSkipsIt(t *testing.T) {
	// The agent is registered but no worker runs yet: work stays queued.
	h := newHarness(t, harnessOptions{})
	if err := h.b.RegisterAgent(context.Background(), schemas.AgentRegistration{Agent: "later", Card: schemas.AgentCard{Name: "later"}}); err != nil {
		t.Fatal(err)
	}
	h.waitAgent(h.url, "later")
	task := mustResult[schemas.SendMessageResponse](t, h.call("later", "SendMessage", send(userMessage("x"), true))).Task
	if task.Status.State != schemas.TaskStateSubmitted {
		t.Fatalf("state = %s", task.Status.State)
	}
	canceled := mustResult[schemas.Task](t, h.call("later", "CancelTask", map[string]any{"id": task.ID}))
	if canceled.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("cancel returned %s", canceled.Status.State)
	}
	// A repeat cancel is refused: the task is already finished.
	mustError(t, h.call("later", "CancelTask", map[string]any{"id": task.ID}), schemas.ErrTaskNotCancelable)
	// A worker that now takes the queued work acks and skips it: the agent
	// never runs and the task stays canceled.
	ran := make(chan string, 1)
	h.startRunner(h.b, workers.Definition{Name: "later", Agent: workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		ran <- req.Task.ID
		return nil
	})})
	// A second task proves the worker is consuming: it runs after the first.
	second := mustResult[schemas.SendMessageResponse](t, h.call("later", "SendMessage", send(userMessage("y"), true))).Task
	if got := recv(t, ran, "second task"); got != second.ID {
		t.Fatalf("agent ran %s first; the canceled task must be skipped", got)
	}
	if got := mustResult[schemas.Task](t, h.call("later", "GetTask", map[string]any{"id": task.ID})); got.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("canceled task changed to %s", got.Status.State)
	}
}

func TestCancelRunningTaskStopsAgent(t *testing.T) {
	bl := newBlocker()
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "slow", Agent: bl}}})
	task := mustResult[schemas.SendMessageResponse](t, h.call("slow", "SendMessage", send(userMessage("x"), true))).Task
	recv(t, bl.started, "agent start")
	canceled := mustResult[schemas.Task](t, h.call("slow", "CancelTask", map[string]any{"id": task.ID}))
	if canceled.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("state = %s", canceled.Status.State)
	}
	if cause := recv(t, bl.stopped, "agent stop"); cause == nil || !strings.Contains(cause.Error(), "cancel") {
		t.Fatalf("agent context ended with %v, want a cancel cause", cause)
	}
	if got := mustResult[schemas.Task](t, h.call("slow", "GetTask", map[string]any{"id": task.ID})); got.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("after the agent stopped the task is %s", got.Status.State)
	}
}

func TestCancelErrors(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	done := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: ptr(userMessage("x"))})).Task
	r := mustError(t, h.call("echo", "CancelTask", map[string]any{"id": done.ID}), schemas.ErrTaskNotCancelable)
	if !strings.Contains(r.Error.Message, "COMPLETED") {
		t.Fatalf("message should say why: %s", r.Error.Message)
	}
	mustError(t, h.call("echo", "CancelTask", map[string]any{"id": schemas.NewID()}), schemas.ErrTaskNotFound)
	mustError(t, h.call("echo", "CancelTask", map[string]any{}), schemas.ErrInvalidParams)
}

func TestUnbuiltMethodsAnswerTheRightError(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	mustError(t, h.call("echo", "GetExtendedAgentCard", nil), schemas.ErrExtendedCardNotConfigured)
	for _, m := range []string{"CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig"} {
		mustError(t, h.call("echo", m, map[string]any{"taskId": schemas.NewID()}), schemas.ErrPushNotSupported)
	}
	mustError(t, h.call("echo", "NoSuchMethod", nil), schemas.ErrMethodNotFound)
}

func TestMessageToTerminalOrUnknownTask(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	done := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: ptr(userMessage("x"))})).Task
	m := userMessage("more")
	m.TaskID = done.ID
	mustError(t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: &m}), schemas.ErrUnsupportedOperation)
	m.TaskID = schemas.NewID()
	mustError(t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: &m}), schemas.ErrTaskNotFound)
	m.TaskID, m.ContextID = done.ID, "another-context"
	mustError(t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: &m}), schemas.ErrInvalidParams)
}

func TestTwoEdgesOneTask(t *testing.T) {
	bl := newBlocker()
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "slow", Agent: bl}}})
	// A second edge with its own bus connection: it shares nothing with the
	// first but the bus.
	b2 := bustest.Connect(t, h.srv, bustest.Options{})
	url2 := h.startEdge(b2, edge.Config{})
	h.waitAgent(url2, "slow")

	task := mustResult[schemas.SendMessageResponse](t, h.callAt(h.url, "slow", "SendMessage", send(userMessage("x"), true))).Task
	recv(t, bl.started, "agent start")
	got := h.waitState(url2, "slow", task.ID, schemas.TaskStateWorking)
	if got.ID != task.ID || len(got.History) != 2 { // the message and the agent's "working" note
		t.Fatalf("edge 2 sees %+v", got)
	}
	canceled := mustResult[schemas.Task](t, h.callAt(url2, "slow", "CancelTask", map[string]any{"id": task.ID}))
	if canceled.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("cancel on edge 2: %s", canceled.Status.State)
	}
	recv(t, bl.stopped, "agent stop")
	if got := mustResult[schemas.Task](t, h.callAt(h.url, "slow", "GetTask", map[string]any{"id": task.ID})); got.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("edge 1 sees %s", got.Status.State)
	}
}

func TestListTasks(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	ctxA := "ctx-a"
	var ids []string
	for i := range 5 {
		m := userMessage("x")
		if i%2 == 0 {
			m.ContextID = ctxA
		}
		ids = append(ids, mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: &m})).Task.ID)
	}
	all := mustResult[schemas.ListTasksResponse](t, h.call("echo", "ListTasks", map[string]any{}))
	if all.TotalSize != 5 || len(all.Tasks) != 5 || all.NextPageToken != "" || all.PageSize != 50 {
		t.Fatalf("list: total %d, %d tasks, next %q, size %d", all.TotalSize, len(all.Tasks), all.NextPageToken, all.PageSize)
	}
	for i := 1; i < len(all.Tasks); i++ {
		if all.Tasks[i-1].Status.Timestamp.Before(all.Tasks[i].Status.Timestamp.Time) {
			t.Fatal("not sorted newest first")
		}
	}
	if all.Tasks[0].Artifacts != nil {
		t.Fatal("artifacts must be omitted unless includeArtifacts")
	}
	byCtx := mustResult[schemas.ListTasksResponse](t, h.call("echo", "ListTasks", map[string]any{"contextId": ctxA, "includeArtifacts": true}))
	if byCtx.TotalSize != 3 || byCtx.Tasks[0].Artifacts == nil {
		t.Fatalf("contextId filter: %d tasks", byCtx.TotalSize)
	}
	// Paging visits every task once.
	seen := map[string]bool{}
	tok := ""
	for {
		params := map[string]any{"pageSize": 2}
		if tok != "" {
			params["pageToken"] = tok
		}
		page := mustResult[schemas.ListTasksResponse](t, h.call("echo", "ListTasks", params))
		for _, task := range page.Tasks {
			if seen[task.ID] {
				t.Fatalf("task %s on two pages", task.ID)
			}
			seen[task.ID] = true
		}
		if page.NextPageToken == "" {
			break
		}
		tok = page.NextPageToken
	}
	if len(seen) != len(ids) {
		t.Fatalf("paging saw %d of %d tasks", len(seen), len(ids))
	}
	if raw := string(h.call("echo", "ListTasks", map[string]any{"contextId": "none"}).Result); !strings.Contains(raw, `"nextPageToken":""`) || !strings.Contains(raw, `"tasks":[]`) {
		t.Fatalf("empty page shape: %s", raw)
	}
	mustError(t, h.call("echo", "ListTasks", map[string]any{"pageSize": 0}), schemas.ErrInvalidParams)
	mustError(t, h.call("echo", "ListTasks", map[string]any{"pageSize": 101}), schemas.ErrInvalidParams)
	mustError(t, h.call("echo", "ListTasks", map[string]any{"pageToken": "garbage"}), schemas.ErrInvalidParams)
	mustError(t, h.call("echo", "ListTasks", map[string]any{"status": "DONE"}), schemas.ErrInvalidParams)
	mustError(t, h.call("echo", "ListTasks", map[string]any{"historyLength": -2}), schemas.ErrInvalidParams)
	done := mustResult[schemas.ListTasksResponse](t, h.call("echo", "ListTasks", map[string]any{"status": "TASK_STATE_COMPLETED", "statusTimestampAfter": "2000-01-01T00:00:00Z"}))
	if done.TotalSize != 5 {
		t.Fatalf("status filter: %d", done.TotalSize)
	}
	none := mustResult[schemas.ListTasksResponse](t, h.call("echo", "ListTasks", map[string]any{"statusTimestampAfter": "2999-01-01T00:00:00Z"}))
	if none.TotalSize != 0 {
		t.Fatalf("statusTimestampAfter filter: %d", none.TotalSize)
	}
}

func ptr[T any](v T) *T { return &v }

// A blocking send is answered with the finished task as stored, without the
// edge decoding it; the answer must be the task GetTask gives, over both 1.0
// bindings, also when the agent's output holds JSON-looking text, quotes,
// escapes and non-ASCII. A message reply and a historyLength are answered
// through the decoded path.
func TestBlockingSendAnswersTheStoredTask(t *testing.T) {
	tricky := `}{"reply": "x"} \"quoted\" \\ back\slash ] [ ü 🚀`
	agent := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		art := schemas.Artifact{ArtifactID: "a", Name: "out", Parts: []schemas.Part{schemas.TextPart(req.Message.Text() + tricky)},
			Metadata: map[string]any{"reply": map[string]any{"nested": "}"}}}
		return out.CompleteWith(ctx, art, false, "done: "+tricky)
	})
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "tricky", Agent: agent}}})
	check := func(binding string, result []byte) {
		t.Helper()
		var res schemas.SendMessageResponse
		if err := json.Unmarshal(result, &res); err != nil || res.Task == nil {
			t.Fatalf("%s: answer %s: %v", binding, result, err)
		}
		got := mustResult[schemas.Task](t, h.call("tricky", "GetTask", map[string]any{"id": res.Task.ID}))
		if !reflect.DeepEqual(*res.Task, got) {
			t.Fatalf("%s: blocking answer differs from GetTask:\n%+v\n%+v", binding, *res.Task, got)
		}
		if res.Task.Status.State != schemas.TaskStateCompleted || !strings.HasSuffix(*res.Task.Artifacts[0].Parts[0].Text, tricky) {
			t.Fatalf("%s: task %+v", binding, res.Task)
		}
	}
	r := h.call("tricky", "SendMessage", schemas.SendMessageRequest{Message: ptr(userMessage("in: "))})
	if r.Error != nil || string(r.ID) != "7" || r.JSONRPC != "2.0" {
		t.Fatalf("envelope: %+v", r)
	}
	check("JSON-RPC", r.Result)
	body, _ := json.Marshal(schemas.SendMessageRequest{Message: ptr(userMessage("in: "))})
	rr := h.rest("POST", "/agents/tricky/message:send", "application/json", string(body))
	if rr.status != 200 {
		t.Fatalf("REST: %d %s", rr.status, rr.body)
	}
	check("REST", rr.body)

	// historyLength 0 reshapes the task: no history in the answer.
	zero := int32(0)
	res := mustResult[schemas.SendMessageResponse](t, h.call("tricky", "SendMessage", schemas.SendMessageRequest{
		Message: ptr(userMessage("in: ")), Configuration: &schemas.SendMessageConfiguration{HistoryLength: &zero}}))
	if res.Task == nil || len(res.Task.History) != 0 || res.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("historyLength 0: %+v", res.Task)
	}
}
