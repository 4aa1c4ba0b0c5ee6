package workers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// submittedRecord is a SUBMITTED task for agent whose first message is
// text, as a submission stores it.
func submittedRecord(agent, text string) *schemas.TaskRecord {
	id := schemas.NewID()
	msg := schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, TaskID: id, ContextID: schemas.NewID(), Parts: []schemas.Part{schemas.TextPart(text)}}
	return &schemas.TaskRecord{Agent: agent, CreatedAt: *schemas.Now(), Task: schemas.Task{ID: id, ContextID: msg.ContextID,
		Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted, Timestamp: schemas.Now()}, History: []schemas.Message{msg}}}
}

// workAt is the work item of rec's submission stored at rev, without the
// record the edge's own queueing carries: its worker reads the task.
func workAt(rec *schemas.TaskRecord, rev uint64) *schemas.WorkItem {
	return &schemas.WorkItem{TaskID: rec.Task.ID, ContextID: rec.Task.ContextID, Agent: rec.Agent, Message: rec.Task.History[0], TaskRevision: rev}
}

// submitUnsnapshotted stores a SUBMITTED task for agent and queues its
// work without the record, as the orphan sweep queues it, so the worker
// must read the task from the store.
func submitUnsnapshotted(t *testing.T, b *bus.Bus, agent, text string) string {
	t.Helper()
	rec := submittedRecord(agent, text)
	bustest.QueueWork(t, b, workAt(rec, bustest.CreateTask(t, b, rec)), bus.PublishOptions{})
	return rec.Task.ID
}

// On a cluster a worker may read a task from a replica that has not yet
// seen the edge's create. It must run the task all the same: every task
// submitted here is read first from a replica that answers "not found"
// about half the time, and every one completes.
func TestWorkerRunsTasksALaggingReplicaHasNotSeen(t *testing.T) {
	s, b := bustest.New(t, bustest.Options{Listen: "127.0.0.1:0"})
	seed := submit(t, b, "nobody", "seed") // no worker: it stays as it is
	bustest.LaggingReplica(t, s, schemas.BucketTasks, seed)
	startRunner(t, b, workers.EchoDefinition("echo"), workers.Options{})
	var ids []string
	for i := range 30 {
		ids = append(ids, submitUnsnapshotted(t, b, "echo", "task "+string(rune('a'+i%26))))
	}
	for _, id := range ids {
		if rec := waitSettled(t, b, id); rec.Task.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("task %s ended %s", id, rec.Task.Status.State)
		}
	}
	if dls := bustest.DeadLetters(t, b, "echo"); len(dls) != 0 {
		t.Fatalf("dead letters: %v", dls)
	}
}

// Work for a task the store does not have (even read from the stream
// leader, past a replica that lags) is tried again, then dead-lettered
// with a reason: never acknowledged away in silence.
func TestWorkForAMissingTaskIsRetriedThenDeadLettered(t *testing.T) {
	s, b := bustest.New(t, bustest.Options{Listen: "127.0.0.1:0"})
	bustest.LaggingReplica(t, s, schemas.BucketTasks, submit(t, b, "nobody", "seed"))
	startRunner(t, b, workers.EchoDefinition("echo"), workers.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := schemas.NewID()
	msg := schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, TaskID: id, Parts: []schemas.Part{schemas.TextPart("where am I")}}
	bustest.QueueWork(t, b, &schemas.WorkItem{TaskID: id, ContextID: schemas.NewID(), Agent: "echo", Message: msg, TaskRevision: 7}, bus.PublishOptions{})
	var dls []bus.DeadLetter
	for len(dls) == 0 {
		dls = bustest.DeadLetters(t, b, "echo")
		select {
		case <-ctx.Done():
			t.Fatal("the work was never dead-lettered")
		case <-time.After(50 * time.Millisecond): // polling the dead-letter stream
		}
	}
	dl := dls[0]
	if dl.TaskID != id || !strings.Contains(dl.Reason, "not found after 3 deliveries") {
		t.Fatalf("dead letter %+v, want task %s not found after 3 deliveries", dl, id)
	}
	if n, err := b.AgentBacklog(ctx, "echo"); err != nil || n != 0 {
		t.Fatalf("backlog after the dead letter: %d %v", n, err)
	}
}

// startAsker runs the agent "ask", which asks for input on every task, and
// returns the texts it ran on.
func startAsker(t *testing.T, b *bus.Bus) chan string {
	t.Helper()
	runs := make(chan string, 8)
	startRunner(t, b, workers.Definition{Name: "ask", Agent: workers.AgentFunc(func(ctx context.Context, req *workers.Request, em *workers.Emitter) error {
		runs <- req.Message.Text()
		return em.InputRequired(ctx, "and then?")
	})}, workers.Options{})
	return runs
}

// A second copy of a submission's work (queued again after JetStream's
// de-duplication window, say) must not run the task twice: its first
// delivery finds the task already past the revision it submits.
func TestASecondCopyOfWorkDoesNotRunTheTaskTwice(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	runs := startAsker(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec, rev, err := b.Submit(ctx, bus.Submission{Agent: "ask", Message: &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser,
		Parts: []schemas.Part{schemas.TextPart("first")}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := waitSettled(t, b, rec.Task.ID); got.Task.Status.State != schemas.TaskStateInputRequired {
		t.Fatalf("task is %s, want input-required", got.Task.Status.State)
	}
	// The copy: the same submission under another event id, without the
	// record (TestASecondCopyWithASnapshotDoesNotWriteTwice has one with).
	bustest.QueueWork(t, b, workAt(rec, rev), bus.PublishOptions{ID: "late-copy"})
	waitBacklog(t, b, "ask")
	if got := len(runs); got != 1 {
		t.Fatalf("the agent ran %d times, want once", got)
	}
}

// A writer that died between storing a task's final write and publishing
// its events leaves the task finished with no end in its event log. The
// worker that takes the redelivered work publishes it, so readers of the
// log see the task finish.
func TestRedeliveryPublishesAFinalEventAWriterLeftUnpublished(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := submittedRecord("echo", "x")
	id := rec.Task.ID
	rev := bustest.CreateTask(t, b, rec)
	// The dead writer's last write: stored, never published.
	done, doneRev := bustest.UpdateTask(t, b, id, func(r *schemas.TaskRecord) error {
		r.LastEventID = "final-" + id
		return r.ApplyStatus(&schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateCompleted, Timestamp: schemas.Now()}})
	})
	reader, err := b.ReadEvents(ctx, id, 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	startRunner(t, b, workers.EchoDefinition("echo"), workers.Options{})
	bustest.QueueWork(t, b, workAt(rec, rev), bus.PublishOptions{})
	select {
	case us := <-reader.C():
		if u := us[len(us)-1]; u.Status == nil || u.Status.Status.State != schemas.TaskStateCompleted || u.Cursor != bus.RecordCursor(done, doneRev) {
			t.Fatalf("events %+v, want COMPLETED at the record's cursor", us)
		}
	case <-ctx.Done():
		t.Fatal("the final event was never published")
	}
}

// submitWithSnapshot stores a SUBMITTED task for agent and queues its work
// as the edge does (bus.Submit), the item carrying the record.
func submitWithSnapshot(t *testing.T, b *bus.Bus, agent, text string) (*schemas.TaskRecord, *schemas.WorkItem) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var item *schemas.WorkItem
	rec, _, err := b.Submit(ctx, bus.Submission{Agent: agent, Message: &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser,
		Parts: []schemas.Part{schemas.TextPart(text)}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stored, rev, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(stored)
	item = &schemas.WorkItem{TaskID: rec.Task.ID, ContextID: rec.Task.ContextID, Agent: agent, Message: stored.Task.History[0], TaskRevision: rev, Record: raw}
	return stored, item
}

// waitBacklog waits until agent's work stream holds nothing unacknowledged.
func waitBacklog(t *testing.T, b *bus.Bus, agent string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		n, err := b.AgentBacklog(ctx, agent)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the work was never taken")
		case <-time.After(20 * time.Millisecond): // polling the consumer
		}
	}
}

// Work that carries its task's record runs without reading the store. A
// cancel withdraws a queued task's work, but work a worker already held
// (here: a copy queued after the cancel, as a worker that took the work a
// moment before would hold it) carries a snapshot that still shows the
// task SUBMITTED: the agent's first write finds the task changed and is
// refused, the agent is ended, the work is dropped, and the task stays
// CANCELED with nothing of the agent's stored.
func TestWorkFromASnapshotOfACanceledTaskIsDropped(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec, item := submitWithSnapshot(t, b, "echo", "hello")
	if bytes.Contains(item.Record, []byte("CANCELED")) {
		t.Fatal("the snapshot is of the canceled task")
	}
	if _, err := b.Cancel(ctx, bus.Owner{Agent: "echo"}, rec.Task.ID, nil); err != nil {
		t.Fatal(err)
	}
	before, beforeRev, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if item.Record == nil {
		t.Fatal("no snapshot")
	}
	bustest.QueueWork(t, b, item, bus.PublishOptions{ID: "held-copy"})
	// The runner starts only now, so no cancel notice reached it.
	ran := make(chan struct{}, 4)
	startRunner(t, b, workers.Definition{Name: "echo", Agent: workers.AgentFunc(func(ctx context.Context, req *workers.Request, em *workers.Emitter) error {
		ran <- struct{}{}
		err := em.Complete(ctx, "done")
		if !errors.Is(err, workers.ErrTaskEnded) {
			t.Errorf("the first write on a canceled task: %v, want ErrTaskEnded", err)
		}
		return err
	})}, workers.Options{})
	select {
	case <-ran: // run from the snapshot, which shows the task SUBMITTED
	case <-ctx.Done():
		t.Fatal("the agent never ran")
	}
	waitBacklog(t, b, "echo")
	after, afterRev, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Task.Status.State != schemas.TaskStateCanceled || afterRev != beforeRev || after.LastEventID != before.LastEventID {
		t.Fatalf("task %s at revision %d (was %d): the agent's write landed on a canceled task", after.Task.Status.State, afterRev, beforeRev)
	}
}

// A second copy of a submission's work that carries the record (queued
// again after the de-duplication window) runs the agent, but its first
// write finds the task taken by the first copy and is refused: the task
// keeps the first copy's result, once.
func TestASecondCopyWithASnapshotDoesNotWriteTwice(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startAsker(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec, item := submitWithSnapshot(t, b, "ask", "first")
	first := waitSettled(t, b, rec.Task.ID)
	if first.Task.Status.State != schemas.TaskStateInputRequired {
		t.Fatalf("task is %s, want input-required", first.Task.Status.State)
	}
	_, firstRev, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	bustest.QueueWork(t, b, item, bus.PublishOptions{ID: "late-copy"})
	waitBacklog(t, b, "ask")
	after, afterRev, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if afterRev != firstRev || len(after.Task.History) != len(first.Task.History) {
		t.Fatalf("the copy wrote: revision %d → %d, history %d → %d", firstRev, afterRev, len(first.Task.History), len(after.Task.History))
	}
}
