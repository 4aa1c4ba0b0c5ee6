package edge_test

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// A conversation whose record outgrows what a work item carries, in one
// process: the edge hands each answer's record to the worker and the
// worker each settled record to the edge's wait (bus/handover.go). Every
// turn — blocking with the whole history, blocking with the last two
// messages, streamed — must see and answer exactly what is stored, and
// the agent must see the whole conversation; under -race, the edge and
// the worker must share nothing they change.
func TestLongConversationIsWholeEveryTurn(t *testing.T) {
	seen := make(chan int, 64) // the history length the agent saw, per turn
	long := strings.Repeat("a long answer ", 120)
	agent := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		seen <- len(req.Task.History)
		return out.InputRequired(ctx, "next? (after "+req.Message.Text()[:12]+")")
	})
	h := newHarness(t, harnessOptions{agents: []workers.Definition{{Name: "talker", Agent: agent}}})

	var id string
	turnText := func(n int) string { return "turn " + strconv.Itoa(n) + "    " + long }
	turn := func(n int) schemas.SendMessageRequest {
		msg := userMessage(turnText(n))
		msg.TaskID = id
		return send(msg, false)
	}
	// check holds the answer to what is stored and to the turn's exchange.
	check := func(n int, task *schemas.Task, history int) {
		t.Helper()
		if task.Status.State != schemas.TaskStateInputRequired {
			t.Fatalf("turn %d: %s", n, task.Status.State)
		}
		if got := <-seen; got != 2*n-1 {
			t.Fatalf("turn %d: the agent saw %d messages, want %d", n, got, 2*n-1)
		}
		stored := mustResult[schemas.Task](t, h.call("talker", "GetTask", schemas.GetTaskRequest{ID: id}))
		if len(stored.History) != 2*n {
			t.Fatalf("turn %d: %d messages stored, want %d", n, len(stored.History), 2*n)
		}
		want := stored.History[len(stored.History)-history:]
		if !reflect.DeepEqual(task.History, want) || !reflect.DeepEqual(task.Status, stored.Status) {
			t.Fatalf("turn %d: the answer is not the task as stored:\n%+v\nwant\n%+v", n, task.History, want)
		}
		last := stored.History[len(stored.History)-1]
		if asked := "next? (after " + turnText(n)[:12] + ")"; last.Role != schemas.RoleAgent || last.Text() != asked {
			t.Fatalf("turn %d: the last message is %q", n, last.Text())
		}
	}
	const turns = 30 // ~1.7 KB a turn: past the work item's 16 KiB by turn 10
	for n := 1; n <= turns; n++ {
		req := turn(n)
		var task schemas.Task
		history := 2 * n
		switch n % 3 {
		case 0: // the last two messages only
			two := int32(2)
			req.Configuration.HistoryLength = &two
			history = 2
			task = *mustResult[schemas.SendMessageResponse](t, h.call("talker", "SendMessage", req)).Task
		case 1: // blocking, the whole history
			task = *mustResult[schemas.SendMessageResponse](t, h.call("talker", "SendMessage", req)).Task
		case 2: // streamed: the stream's last event is the task waiting
			s, errReply := openStream(t, h.url, "talker", "SendStreamingMessage", req, "")
			if errReply != nil {
				t.Fatalf("turn %d: %+v", n, errReply.Error)
			}
			_, rs := s.all()
			end := rs[len(rs)-1].StatusUpdate
			if end == nil || end.Status.State != schemas.TaskStateInputRequired {
				t.Fatalf("turn %d: the stream ended with %+v", n, rs[len(rs)-1])
			}
			task = mustResult[schemas.Task](t, h.call("talker", "GetTask", schemas.GetTaskRequest{ID: end.TaskID}))
		}
		if id == "" {
			id = task.ID
		}
		check(n, &task, history)
	}
}
