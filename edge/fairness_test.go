package edge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// gate is an agent that runs one task at a time for as long as the test
// says: it reports each task it starts (by the text it was sent) and
// finishes it when the test lets it.
type gate struct {
	started chan string
	finish  chan struct{}
}

func (g *gate) Execute(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	g.started <- *req.Message.Parts[0].Text
	select {
	case <-g.finish:
	case <-ctx.Done():
		return ctx.Err()
	}
	return out.Complete(ctx, "done")
}

// One caller's queued heavy work does not delay another caller's single
// task by more than the run of the task under way: with one worker slot
// busy with alice's first task and five more of hers queued, bob's task,
// sent last, is the next to run. (Before, work was first come first
// served across callers: bob waited for all of alice's.)
func TestOneCallersBacklogDoesNotDelayAnother(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{{Key: aliceKey, Principal: "alice"}, {Key: bobKey, Principal: "bob"}}})
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{started: make(chan string, 16), finish: make(chan struct{})}
	h := newHarness(t, harnessOptions{edge: edge.Config{Auth: a}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- workers.NewRunner(h.b, workers.Definition{Name: "heavy", Agent: g}, workers.Options{Concurrency: 1, ShutdownGrace: time.Second}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	h.waitAgent(h.url, "heavy")

	send := func(key, text string) {
		t.Helper()
		status, _, b := as(t, key, "POST", h.url+"/agents/heavy/message:send", "application/json",
			`{"message":{"messageId":"`+schemas.NewID()+`","role":"ROLE_USER","parts":[{"text":"`+text+`"}]},"configuration":{"returnImmediately":true}}`)
		if status != http.StatusOK {
			t.Fatalf("send %q: %d %s", text, status, b)
		}
		var task struct{ Task schemas.Task }
		if err := json.Unmarshal(b, &task); err != nil || task.Task.ID == "" {
			t.Fatalf("send %q: no task in %s", text, b)
		}
	}
	send(aliceKey, "alice-1")
	if got := recv(t, g.started, "alice's first task to start"); got != "alice-1" {
		t.Fatalf("first task to run: %s", got)
	}
	for _, text := range []string{"alice-2", "alice-3", "alice-4", "alice-5", "alice-6"} {
		send(aliceKey, text)
	}
	send(bobKey, "bob-1")
	// Every task waits for its turn at the dispatcher before the worker
	// asks again (as the process's metrics count them); then the tasks
	// run one after the other.
	eventuallyTrue(t, "the six queued tasks to wait for their turn", func() bool {
		var b strings.Builder
		_ = h.b.Metrics().WriteText(&b)
		return strings.Contains(b.String(), `a2a_work_waiting{agent="heavy"} 6`+"\n")
	})
	var order []string
	for range 6 {
		g.finish <- struct{}{}
		order = append(order, recv(t, g.started, "the next task to start"))
	}
	g.finish <- struct{}{}
	if order[0] != "bob-1" {
		t.Fatalf("after alice's first task ran %v; want bob's task first", order)
	}
}

// eventuallyTrue polls cond, an outside condition, until it holds (20s at
// most).
func eventuallyTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling an outside condition, not synchronising
	}
}
