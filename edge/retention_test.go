package edge_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// With a small count bound the edge's sweep evicts finished tasks oldest
// first; a task waiting for input (not finished) stays however old it is.
// An evicted task is TaskNotFound on JSON-RPC and 404 on HTTP+JSON.
func TestRetentionEvictsOldestFinished(t *testing.T) {
	const keep = 5
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{workers.EchoDefinition("echo")},
		edge:   edge.Config{MaxFinishedTasks: keep, SweepEvery: 20 * time.Millisecond},
	})
	// The oldest tasks of all are unfinished: they wait for input.
	var waiting []string
	for range 2 {
		task := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", send(userMessage(workers.AskCommand), false))).Task
		if task.Status.State != schemas.TaskStateInputRequired {
			t.Fatalf("ask task is %s", task.Status.State)
		}
		waiting = append(waiting, task.ID)
	}
	var done []string
	for range 12 {
		task := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", send(userMessage("retain me"), false))).Task
		if task.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("task is %s", task.Status.State)
		}
		done = append(done, task.ID)
	}
	evicted := done[:len(done)-keep]
	// The sweep runs on its own clock: wait until the newest task that
	// must go is gone.
	deadline := time.Now().Add(20 * time.Second)
	for h.call("echo", "GetTask", map[string]any{"id": evicted[len(evicted)-1]}).Error == nil {
		if time.Now().After(deadline) {
			t.Fatal("finished tasks past the bound were never evicted")
		}
		time.Sleep(10 * time.Millisecond) // polling an external condition
	}
	for _, id := range evicted {
		mustError(t, h.call("echo", "GetTask", map[string]any{"id": id}), schemas.ErrTaskNotFound)
		res, err := http.Get(h.url + "/agents/echo/tasks/" + id)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Fatalf("REST GET of evicted task: HTTP %d, want 404", res.StatusCode)
		}
	}
	for _, id := range done[len(done)-keep:] {
		mustResult[schemas.Task](t, h.call("echo", "GetTask", map[string]any{"id": id}))
	}
	for _, id := range waiting {
		task := mustResult[schemas.Task](t, h.call("echo", "GetTask", map[string]any{"id": id}))
		if task.Status.State != schemas.TaskStateInputRequired {
			t.Fatalf("waiting task is %s", task.Status.State)
		}
	}
	t.Logf("accepted %d, completed %d, evicted %d (oldest first), unfinished kept %d, lost 0",
		len(done)+len(waiting), len(done), len(evicted), len(waiting))
}
