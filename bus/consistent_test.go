package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
)

func submittedRecord(agent string) *schemas.TaskRecord {
	id, ctxID := schemas.NewID(), schemas.NewID()
	now := schemas.Now()
	msg := schemas.Message{MessageID: schemas.NewID(), ContextID: ctxID, TaskID: id, Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("hello")}}
	return &schemas.TaskRecord{
		Task:  schemas.Task{ID: id, ContextID: ctxID, Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted, Timestamp: now}, History: []schemas.Message{msg}},
		Agent: agent, CreatedAt: *now,
	}
}

// A replica that lags answers some of the bucket's reads with "not found"
// for tasks just created (on a cluster, any replica answers a KV get). The
// reads a2abus decides on must never be fooled: GetTask, GetTaskAtLeast,
// and the read behind a compare-and-swap update (a continuation).
func TestReadsThatDecideSeePastALaggingReplica(t *testing.T) {
	s, b := bustest.New(t, bustest.Options{Listen: "127.0.0.1:0"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seed := submittedRecord("echo")
	bustest.CreateTask(t, b, seed)
	bustest.LaggingReplica(t, s, schemas.BucketTasks, seed.Task.ID)

	// A plain KV read, as any client library makes it, to show the lag.
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, schemas.BucketTasks)
	if err != nil {
		t.Fatal(err)
	}

	const n = 40
	plainMisses := 0
	for i := range n {
		rec := submittedRecord("echo")
		rev := bustest.CreateTask(t, b, rec)
		if _, err := kv.Get(ctx, rec.Task.ID); errors.Is(err, jetstream.ErrKeyNotFound) {
			plainMisses++
		}
		if _, got, err := b.GetTask(ctx, rec.Task.ID); err != nil || got != rev {
			t.Fatalf("task %d: GetTask = revision %d, %v; want %d", i, got, err, rev)
		}
		if _, got, err := b.GetTaskAtLeast(ctx, rec.Task.ID, rev); err != nil || got != rev {
			t.Fatalf("task %d: GetTaskAtLeast = revision %d, %v; want %d", i, got, err, rev)
		}
		// Interrupted, then answered: the continuation decides on the
		// task's state, which the lagging replica does not have.
		if _, _, err := b.Apply(ctx, rec.Task.ID, bus.TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateInputRequired}}}); err != nil {
			t.Fatalf("task %d: input-required: %v", i, err)
		}
		answer := schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("answer")}}
		if _, _, err := b.Apply(ctx, rec.Task.ID, bus.TaskEvent{Continue: &answer}); err != nil {
			t.Fatalf("task %d: continuation refused: %v", i, err)
		}
	}
	t.Logf("plain reads that missed a task just created: %d of %d", plainMisses, n)
	if plainMisses == 0 {
		t.Fatal("the lagging replica answered no read; the test proves nothing")
	}

	// A task that does not exist is still reported missing, and one the
	// store has only at an older revision than asked for too.
	if _, _, err := b.GetTask(ctx, schemas.NewID()); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("GetTask of an unknown id: %v", err)
	}
	if _, _, err := b.GetTaskAtLeast(ctx, seed.Task.ID, 1<<40); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("GetTaskAtLeast past the stored revision: %v", err)
	}
}
