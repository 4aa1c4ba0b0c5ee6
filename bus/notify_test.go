package bus

import (
	"context"
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// notifyBacklog is how many wake-ups StreamNotify holds.
func notifyBacklog(t *testing.T, b *Bus) uint64 {
	t.Helper()
	st, err := b.js.Stream(context.Background(), schemas.StreamNotify)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// A task without configs costs its writes nothing; a task with configs
// has one pending wake-up at most, and a write after the sender took it
// wakes it again.
func TestPushWakeUpsOnePendingPerTaskAndNoneWithoutConfigs(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	working := func(id string) {
		t.Helper()
		if _, _, err := b.Apply(ctx, id, TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}}); err != nil {
			t.Fatal(err)
		}
	}
	plain := mkTask(t, b, "echo", "alice", "c", schemas.TaskStateWorking, time.Now())
	working(plain.Task.ID)
	working(plain.Task.ID)
	if n := notifyBacklog(t, b); n != 0 {
		t.Fatalf("writes of a task without push configs published %d wake-ups", n)
	}

	rec := mkTask(t, b, "echo", "alice", "c", schemas.TaskStateWorking, time.Now())
	id := rec.Task.ID
	alice := Owner{Agent: "echo", Principal: "alice", Tenant: "t1"}
	created, err := b.CreatePushConfig(ctx, alice, schemas.TaskPushNotificationConfig{TaskID: id, URL: "https://hooks.example/a"}, "1.0")
	if err != nil {
		t.Fatal(err)
	}
	cur, rev, err := b.GetTask(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if created.Delivered != RecordCursor(cur, rev) {
		t.Errorf("a config created for a running task starts at %d, want the task's last event %d", created.Delivered, RecordCursor(cur, rev))
	}
	working(id)
	working(id)
	if n := notifyBacklog(t, b); n != 1 {
		t.Fatalf("the config and two writes left %d wake-ups, want the one pending", n)
	}
	pc, err := b.PushConsumer(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wakes, err := pc.Fetch(ctx, 10, 5*time.Second)
	if err != nil || len(wakes) != 1 || wakes[0].TaskID != id || wakes[0].Attempt != 1 {
		t.Fatalf("wake-ups %+v, %v", wakes, err)
	}
	working(id) // while the sender holds the wake-up: covered by it
	if err := wakes[0].Done(ctx); err != nil {
		t.Fatal(err)
	}
	if n := notifyBacklog(t, b); n != 0 {
		t.Fatalf("%d wake-ups after the sender took the pending one", n)
	}
	last, err := b.LastStoredEvent(ctx, id)
	if err != nil || len(last.Updates) != 1 || last.Updates[0].Cursor <= created.Delivered {
		t.Fatalf("the last event %+v (%v) is not after the config's start %d", last, err, created.Delivered)
	}
	working(id)
	if n := notifyBacklog(t, b); n != 1 {
		t.Fatalf("a write after the sender took the wake-up left %d, want 1", n)
	}
}

// A write of a task without push configs costs what it cost before push
// notifications: the record's swap and the events' publish, nothing read
// or published more; a task with configs adds the wake-up's publish.
func TestPushCostsNothingWithoutConfigs(t *testing.T) {
	b := newTestBus(t, Config{NoDispatch: true}) // counts what a write sends
	ctx := testCtx(t)
	sent := func(id string) uint64 {
		t.Helper()
		rec, rev, err := b.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		before := b.stats().OutMsgs
		if _, _, err := b.ApplyEventsSince(ctx, id, rec, rev, nil, []TaskEvent{{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}}}); err != nil {
			t.Fatal(err)
		}
		return b.stats().OutMsgs - before
	}
	plain := mkTask(t, b, "echo", "alice", "c", schemas.TaskStateWorking, time.Now())
	if n := sent(plain.Task.ID); n != 2 {
		t.Fatalf("a write of a task without configs sent %d NATS messages, want 2 (the swap, the events)", n)
	}
	pushed := mkTask(t, b, "echo", "alice", "c", schemas.TaskStateWorking, time.Now())
	if _, err := b.CreatePushConfig(ctx, Owner{Agent: "echo", Principal: "alice", Tenant: "t1"}, schemas.TaskPushNotificationConfig{TaskID: pushed.Task.ID, URL: "https://hooks.example/a"}, "1.0"); err != nil {
		t.Fatal(err)
	}
	if n := sent(pushed.Task.ID); n != 3 {
		t.Fatalf("a write of a task with configs sent %d NATS messages, want 3 (the swap, the events, the wake-up)", n)
	}
}
