package bus

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// runTaskWatcher starts b's task watcher for the test and waits until it
// follows the bucket.
func runTaskWatcher(t *testing.T, b *Bus) *TaskWatcher {
	t.Helper()
	tw := b.NewTaskWatcher()
	ctx, stop := context.WithCancel(testCtx(t))
	t.Cleanup(stop)
	go func() { _ = tw.Run(ctx) }()
	<-tw.Ready()
	return tw
}

// settleWaiting runs a wait on the task until it waits for its caller, as
// a blocking send does, so the process holds the record it settled on.
func settleWaiting(t *testing.T, b *Bus, tw *TaskWatcher, rec *schemas.TaskRecord, question string) {
	t.Helper()
	ctx := testCtx(t)
	held := *rec
	w := tw.Watch(rec.Task.ID, &held)
	defer w.Close()
	if _, _, err := b.applyEvents(ctx, rec.Task.ID, nil, 0, []TaskEvent{status(schemas.TaskStateInputRequired, agentMsg(question))}); err != nil {
		t.Fatal(err)
	}
	_, raw, err := w.UntilStateRaw(ctx, schemas.TaskState.Settled)
	if err != nil || raw.Val == nil {
		t.Fatalf("the wait did not end on the watched update: %q %v", raw.Val, err)
	}
	// The record is held decoded, and its bytes are answered unchecked.
	if h, ok := b.waiting.m[rec.Task.ID]; !ok || h.rec == nil || !raw.wellFormed {
		t.Fatalf("the record the wait settled on is not held decoded (held %v, well-formed %v)", ok, raw.wellFormed)
	}
	if task, ok := raw.Task(); !ok || !bytes.Contains(task, []byte(question)) {
		t.Fatalf("the answer from the held bytes: %q %v", task, ok)
	}
}

func answerMsg(taskID, text string) *schemas.Message {
	return &schemas.Message{MessageID: schemas.NewID(), TaskID: taskID, Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)}}
}

// A caller's answer starts from the record its process held since the
// task settled waiting, but the compare-and-swap decides: what was
// written after that record (an artifact of another writer, a cancel)
// is neither lost nor overridden, and the held record is taken once.
func TestContinueFromAHeldRecordLosesNothingWrittenSince(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	tw := runTaskWatcher(t, b)
	o := Owner{Agent: "echo", Principal: "alice", Tenant: "t1"}

	// Nothing written since: the answer is stored from the held record.
	rec := newRecord("echo")
	rec.Owner, rec.Tenant = "alice", "t1"
	createTask(t, b, rec)
	settleWaiting(t, b, tw, rec, "which one?")
	got, _, err := b.Continue(ctx, o, Answer{Message: answerMsg(rec.Task.ID, "the first")}, nil)
	if err != nil || got.Task.Status.State != schemas.TaskStateSubmitted || len(got.Task.History) != 3 {
		t.Fatalf("answer from the held record: %v %+v", err, got)
	}
	if _, ok := b.waiting.take(rec.Task.ID); ok {
		t.Error("the held record was not taken by the answer")
	}

	// An artifact written after the record was held is kept.
	rec2 := newRecord("echo")
	rec2.Owner, rec2.Tenant = "alice", "t1"
	createTask(t, b, rec2)
	settleWaiting(t, b, tw, rec2, "and then?")
	if _, _, err := b.Apply(ctx, rec2.Task.ID, artifact("late", "written after the wait")); err != nil {
		t.Fatal(err)
	}
	got, _, err = b.Continue(ctx, o, Answer{Message: answerMsg(rec2.Task.ID, "go on")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stored, _, _ := b.GetTask(ctx, rec2.Task.ID)
	if len(stored.Task.Artifacts) != 1 || stored.Task.Artifacts[0].ArtifactID != "late" || stored.Task.Status.State != schemas.TaskStateSubmitted || stored.Generation != got.Generation {
		t.Fatalf("after an answer from a stale held record: artifacts %v, %s, generation %d (answer's %d)", stored.Task.Artifacts, stored.Task.Status.State, stored.Generation, got.Generation)
	}

	// A cancel written after the record was held wins: the answer is refused.
	rec3 := newRecord("echo")
	rec3.Owner, rec3.Tenant = "alice", "t1"
	createTask(t, b, rec3)
	settleWaiting(t, b, tw, rec3, "sure?")
	if _, err := b.Cancel(ctx, o, rec3.Task.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Continue(ctx, o, Answer{Message: answerMsg(rec3.Task.ID, "yes")}, nil); !errors.Is(err, schemas.ErrUnsupportedOperation) {
		t.Fatalf("an answer to a task canceled after its record was held: %v, want the task's refusal", err)
	}
	stored, _, _ = b.GetTask(ctx, rec3.Task.ID)
	if stored.Task.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("the canceled task is %s", stored.Task.Status.State)
	}
}

// A held record answers only its owner: another caller's answer to it is
// not found, as when nothing is held.
func TestHeldRecordAnswersOnlyItsOwner(t *testing.T) {
	rec := newRecord("echo")
	b := aliceWaiting(t, rec)
	ctx := testCtx(t)
	for _, o := range []Owner{{Agent: "echo", Principal: "mallory", Tenant: "t1"}, {Agent: "echo", Principal: "alice", Tenant: "t2"}, {Agent: "other", Principal: "alice", Tenant: "t1"}} {
		if _, _, err := b.Continue(ctx, o, Answer{Message: answerMsg(rec.Task.ID, "mine now")}, nil); !errors.Is(err, schemas.ErrTaskNotFound) {
			t.Errorf("%+v answering alice's task: %v, want not found", o, err)
		}
	}
	stored, _, _ := b.GetTask(ctx, rec.Task.ID)
	if stored.Task.Status.State != schemas.TaskStateInputRequired || len(stored.Task.History) != 2 {
		t.Fatalf("a stranger's answer changed the task: %s, %d messages", stored.Task.Status.State, len(stored.Task.History))
	}
}

// The held records are bounded in count and bytes, the oldest going
// first, and a replaced record counts once.
func TestWaitingRecordsBounded(t *testing.T) {
	c := &waitingRecords{m: map[string]held{}, maxN: 3, maxSize: 1000}
	val := func(n int) []byte { return make([]byte, n) }
	for i := range 5 {
		c.put("t"+strconv.Itoa(i), heldBytes(watched{val: val(10), rev: uint64(i)}))
	}
	if len(c.m) != 3 || c.bytes != 30 {
		t.Fatalf("%d held, %d bytes; want 3, 30", len(c.m), c.bytes)
	}
	if _, ok := c.take("t1"); ok {
		t.Error("the oldest record was not the one evicted")
	}
	if w, ok := c.take("t4"); !ok || w.rev != 4 {
		t.Errorf("the newest record: %v %v", w, ok)
	}
	c.put("t3", heldBytes(watched{val: val(50), rev: 9}))
	if c.bytes != 60 || len(c.m) != 2 {
		t.Fatalf("after replacing t3: %d bytes, %d held; want 60, 2", c.bytes, len(c.m))
	}
	c.put("big", heldBytes(watched{val: val(63)})) // past a sixteenth of the bound: not held
	if _, ok := c.m["big"]; ok {
		t.Error("a record past the per-record bound was held")
	}
	for i := range 20 {
		c.put("b"+strconv.Itoa(i), heldBytes(watched{val: val(60)}))
	}
	if c.bytes > 1000 || len(c.m) > 3 || len(c.order) > 2*3+1 {
		t.Fatalf("%d bytes, %d held, order of %d: past the bounds", c.bytes, len(c.m), len(c.order))
	}
	// A record held decoded counts decodedSize times its stored bytes.
	c.put("d", heldDecoded(&schemas.TaskRecord{}, watched{val: val(20)}))
	if h := c.m["d"]; h.rec == nil || h.size != decodedSize*20 {
		t.Fatalf("a decoded record held as %+v", h)
	}
	if c.put("d2", heldDecoded(&schemas.TaskRecord{}, watched{val: val(15)})); len(c.m) > 3 || c.bytes > 1000 {
		t.Fatalf("%d bytes, %d held: past the bounds", c.bytes, len(c.m))
	}
	if _, ok := c.m["d2"]; !ok {
		t.Fatal("a decoded record within the per-record bound was not held")
	}
	c.put("dbig", heldDecoded(&schemas.TaskRecord{}, watched{val: val(21)})) // 63 counted: past a sixteenth
	if _, ok := c.m["dbig"]; ok {
		t.Error("a decoded record past the per-record bound was held")
	}
}
