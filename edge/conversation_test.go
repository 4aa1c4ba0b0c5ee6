package edge_test

import (
	"context"
	"sync"
	"testing"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// A multi-turn task: the echo agent asks for input, the client answers on
// the same task, and a different worker replica takes the continuation with
// the task's history.
func TestInputRequiredRoundTripOnAnotherReplica(t *testing.T) {
	var mu sync.Mutex
	ranOn := map[string][]int{} // task id -> replica numbers, in order
	histories := map[string][]int{}
	replica := func(n int) workers.Definition {
		def := workers.EchoDefinition("echo")
		inner := def.Agent
		def.Agent = workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
			mu.Lock()
			ranOn[req.Task.ID] = append(ranOn[req.Task.ID], n)
			histories[req.Task.ID] = append(histories[req.Task.ID], len(req.Task.History))
			mu.Unlock()
			return inner.Execute(ctx, req, out)
		})
		return def
	}
	h := newHarness(t, harnessOptions{})
	b1 := bustest.Connect(t, h.srv, bustest.Options{})
	h.startRunner(b1, replica(1))
	h.waitAgent(h.url, "echo")

	task := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", send(userMessage(workers.AskCommand), false))).Task
	if task.Status.State != schemas.TaskStateInputRequired || task.Status.Message.Text() != "What should I echo?" {
		t.Fatalf("first turn: %+v", task.Status)
	}
	// Replica 1 leaves (gracefully), replica 2 arrives: the answer must be
	// taken by replica 2.
	h2 := bustest.Connect(t, h.srv, bustest.Options{})
	_ = b1.Close()
	h.startRunner(h2, replica(2))

	answer := userMessage("the answer")
	answer.TaskID = task.ID // only the task id: the context is inferred
	got := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: &answer})).Task
	if got.Status.State != schemas.TaskStateCompleted || got.ID != task.ID || got.ContextID != task.ContextID {
		t.Fatalf("second turn: %+v", got.Status)
	}
	if artifactTextOf(got) != "the answer" {
		t.Fatalf("echoed %q", artifactTextOf(got))
	}
	// History in order: ask, question, answer, completion note.
	var roles []schemas.Role
	for _, m := range got.History {
		roles = append(roles, m.Role)
	}
	if len(got.History) != 4 || got.History[0].Text() != workers.AskCommand || got.History[2].Text() != "the answer" {
		t.Fatalf("history %v", roles)
	}
	mu.Lock()
	defer mu.Unlock()
	if r := ranOn[task.ID]; len(r) != 2 || r[0] != 1 || r[1] != 2 {
		t.Fatalf("turns ran on replicas %v", r)
	}
	if hl := histories[task.ID]; hl[1] != 3 {
		t.Fatalf("the continuation saw %d history messages, want 3", hl[1])
	}
	// The task is finished: a further message is refused.
	mustError(t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: &answer}), schemas.ErrUnsupportedOperation)
}

// Two answers to the same interrupted task at once: exactly one is taken.
func TestConcurrentAnswersOnlyOneRuns(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, runners: 2})
	task := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", send(userMessage(workers.AskCommand), false))).Task
	results := make(chan *rpcReply, 2)
	for i := range 2 {
		go func() {
			m := userMessage("answer " + string(rune('a'+i)))
			m.TaskID = task.ID
			results <- h.call("echo", "SendMessage", send(m, true))
		}()
	}
	ok, refused := 0, 0
	for range 2 {
		r := <-results
		if r.Error == nil {
			ok++
		} else if r.Error.Code == schemas.ErrUnsupportedOperation.Code {
			refused++
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("accepted %d, refused %d", ok, refused)
	}
	done := h.waitState(h.url, "echo", task.ID, schemas.TaskStateCompleted)
	if len(done.Artifacts) != 1 {
		t.Fatalf("artifacts %+v", done.Artifacts)
	}
}

func artifactTextOf(t *schemas.Task) string {
	var s string
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			if p.Text != nil {
				s += *p.Text
			}
		}
	}
	return s
}

// Paging through a few hundred tasks while more are added, on two edges:
// every task that existed before paging began is seen exactly once.
func TestListTasksPagingUnderConcurrentWrites(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	if err := h.b.RegisterAgent(context.Background(), schemas.AgentRegistration{Agent: "queue", Card: schemas.AgentCard{Name: "queue"}}); err != nil {
		t.Fatal(err)
	}
	b2 := bustest.Connect(t, h.srv, bustest.Options{})
	url2 := h.startEdge(b2, edgeConfigForBench())
	h.waitAgent(h.url, "queue")
	h.waitAgent(url2, "queue")
	const before = 300
	existing := map[string]bool{}
	for range before {
		task := mustResult[schemas.SendMessageResponse](t, h.call("queue", "SendMessage", send(userMessage("x"), true))).Task
		existing[task.ID] = true
	}
	stop := make(chan struct{})
	added := make(chan int)
	go func() {
		n := 0
		defer func() { added <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			mustResult[schemas.SendMessageResponse](t, h.callAt(url2, "queue", "SendMessage", send(userMessage("y"), true)))
			n++
		}
	}()
	seen := map[string]int{}
	tok, pages := "", 0
	for {
		params := map[string]any{"pageSize": 37, "status": "TASK_STATE_SUBMITTED"}
		if tok != "" {
			params["pageToken"] = tok
		}
		base := h.url
		if pages%2 == 1 {
			base = url2 // alternate edges: the cursor is good on any of them
		}
		page := mustResult[schemas.ListTasksResponse](t, h.callAt(base, "queue", "ListTasks", params))
		pages++
		if int(page.TotalSize) < before {
			t.Fatalf("totalSize %d < %d", page.TotalSize, before)
		}
		for _, task := range page.Tasks {
			seen[task.ID]++
		}
		if page.NextPageToken == "" {
			break
		}
		tok = page.NextPageToken
	}
	close(stop)
	<-added
	for id := range existing {
		if seen[id] != 1 {
			t.Fatalf("task %s seen %d times", id, seen[id])
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("task %s seen %d times", id, n)
		}
	}
	if pages < before/37 {
		t.Fatalf("only %d pages", pages)
	}
}
