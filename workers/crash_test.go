package workers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// A worker that dies mid-task (its connection gone, no ack) leaves work that
// another replica takes after AckWait and finishes.
func TestCrashedWorkersTaskIsFinishedByAnother(t *testing.T) {
	o := bustest.Options{Config: bus.Config{AckWait: time.Second}}
	srv := bustest.NewServer(t, o)
	crashing := bustest.Connect(t, srv, o)
	healthy := bustest.Connect(t, srv, o)

	firstStarted := make(chan struct{})
	agent := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		if req.Attempt == 1 {
			close(firstStarted)
			<-ctx.Done() // hangs until the test ends: this replica "crashed"
			return ctx.Err()
		}
		return out.Complete(ctx, fmt.Sprintf("finished on attempt %d", req.Attempt))
	})
	def := workers.Definition{Name: "flaky", Agent: agent}
	startRunner(t, crashing, def, workers.Options{ShutdownGrace: 100 * time.Millisecond})

	id := submit(t, healthy, "flaky", "work")
	select {
	case <-firstStarted:
	case <-time.After(20 * time.Second):
		t.Fatal("first attempt never started")
	}
	bustest.Abort(crashing)
	startRunner(t, healthy, def, workers.Options{})

	rec := waitSettled(t, healthy, id)
	if rec.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("state = %s", rec.Task.Status.State)
	}
	if got := rec.Task.Status.Message.Text(); got != "finished on attempt 2" {
		t.Fatalf("status message %q", got)
	}
	// The redelivered run went on numbering the task's events where the
	// crashed one left it: one generation per event, none twice. The
	// record is stored before its events are published: the log is read
	// once it holds the record's last event.
	readAll(t, healthy, id)
	gens := bustest.Generations(t, healthy, id)
	if len(gens) == 0 || gens[len(gens)-1] != rec.Generation {
		t.Fatalf("the log's generations %v end short of the task's %d", gens, rec.Generation)
	}
	for i, g := range gens {
		if g != schemas.Generation(i+2) {
			t.Fatalf("the log's generations %v, want 2…%d", gens, rec.Generation)
		}
	}
}

// A worker shut down mid-task hands its work back at once (no AckWait), and
// another replica finishes it.
func TestShutdownHandsWorkBack(t *testing.T) {
	o := bustest.Options{Config: bus.Config{AckWait: time.Hour}}
	srv := bustest.NewServer(t, o)
	b := bustest.Connect(t, srv, o)
	started := make(chan struct{}, 1)
	agent := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		if req.Attempt == 1 {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	def := workers.Definition{Name: "handoff", Agent: agent}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- workers.NewRunner(b, def, workers.Options{ShutdownGrace: 50 * time.Millisecond}).Run(ctx)
	}()
	id := submit(t, b, "handoff", "x")
	<-started
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// With AckWait at an hour, only a hand-back lets the second replica
	// finish the task within the test's deadline.
	startRunner(t, b, def, workers.Options{})
	if rec := waitSettled(t, b, id); rec.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("state = %s", rec.Task.Status.State)
	}
}

// A work item delivered again for a task that already finished is acked and
// skipped: the agent does not run and the task does not change.
func TestRedeliveredWorkForFinishedTaskChangesNothing(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	runs := make(chan string, 4)
	def := workers.Definition{Name: "once", Agent: workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		runs <- req.Message.MessageID
		return out.Complete(ctx, "done")
	})}
	startRunner(t, b, def, workers.Options{})
	id := submit(t, b, "once", "x")
	before := waitSettled(t, b, id)
	<-runs
	_, rev0, err := b.GetTask(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	// The same work item again (as a redelivery would bring it), then a
	// marker task to know the worker has consumed past it.
	msg := before.Task.History[0]
	bustest.QueueWork(t, b, &schemas.WorkItem{TaskID: id, ContextID: before.Task.ContextID, Agent: "once", Message: msg}, bus.PublishOptions{})
	marker := submit(t, b, "once", "marker")
	waitSettled(t, b, marker)
	if got := <-runs; got == msg.MessageID {
		t.Fatal("the agent ran again for a finished task")
	}
	_, rev1, err := b.GetTask(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if rev1 != rev0 {
		t.Fatalf("finished task was written again (revision %d -> %d)", rev0, rev1)
	}
}
