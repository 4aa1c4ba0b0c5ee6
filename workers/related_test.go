package workers_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// submitAs submits a task for agent as owner's, its message referring to
// refs, and returns its id.
func submitAs(t *testing.T, b *bus.Bus, agent, owner, text string, refs ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec, _, err := b.Submit(ctx, bus.Submission{Agent: agent, Owner: owner, Message: &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser,
		Parts: []schemas.Part{schemas.TextPart(text)}, ReferenceTaskIDs: refs}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Task.ID
}

// The tasks a message refers to reach the agent as RelatedTasks, oldest
// first, with those they refer to in turn; the runtime reads them as the
// task's owner would, so another owner's task, another agent's, and ids
// of nothing are left out.
func TestRelatedTasksAreTheOwnersOwnOfTheAgent(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	var mu sync.Mutex
	related := map[string][]string{}
	recorder := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		var ids []string
		for _, rt := range req.RelatedTasks(ctx) {
			ids = append(ids, rt.ID)
		}
		mu.Lock()
		related[req.Task.ID] = ids
		mu.Unlock()
		return nil
	})
	startRunner(t, b, def("rec", recorder), workers.Options{})
	startRunner(t, b, def("other", recorder), workers.Options{})
	done := func(id string) string {
		t.Helper()
		if rec := waitSettled(t, b, id); rec.Task.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("task %s: %s", id, rec.Task.Status.State)
		}
		return id
	}

	t1 := done(submitAs(t, b, "rec", "alice", "one"))
	t2 := done(submitAs(t, b, "rec", "alice", "two", t1))
	bobs := done(submitAs(t, b, "rec", "bob", "bob's"))
	elsewhere := done(submitAs(t, b, "other", "alice", "another agent's"))
	t5 := done(submitAs(t, b, "rec", "alice", "five", bobs, elsewhere, "not-an-id", schemas.NewID(), t2, t2))
	// Reached in another order than made: [t1, t7] with t7 referring to
	// t6 come in the order they were created.
	t6 := done(submitAs(t, b, "rec", "alice", "six"))
	t7 := done(submitAs(t, b, "rec", "alice", "seven", t6))
	t8 := done(submitAs(t, b, "rec", "alice", "eight", t1, t7))

	mu.Lock()
	defer mu.Unlock()
	if got := related[t2]; !slices.Equal(got, []string{t1}) {
		t.Fatalf("task two got related %v, want [%s]", got, t1)
	}
	if got := related[t5]; !slices.Equal(got, []string{t1, t2}) {
		t.Fatalf("task five got related %v, want [%s %s] (oldest first, bob's and the other agent's left out)", got, t1, t2)
	}
	if got := related[t8]; !slices.Equal(got, []string{t1, t6, t7}) {
		t.Fatalf("task eight got related %v, want [%s %s %s] (in the order they were created)", got, t1, t6, t7)
	}
	if got := related[t1]; len(got) != 0 {
		t.Fatalf("task one refers to nothing but got %v", got)
	}
}
