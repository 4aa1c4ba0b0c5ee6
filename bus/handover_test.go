package bus

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// bigRecord is a SUBMITTED task of agent whose record is too large for
// its work items to carry (workSnapshotMax).
func bigRecord(agent string) *schemas.TaskRecord {
	rec := newRecord(agent)
	rec.Task.History[0].Parts = []schemas.Part{schemas.TextPart(strings.Repeat("long conversation ", workSnapshotMax/16))}
	return rec
}

// aliceWaiting stores rec as alice's task in tenant t1 on a new bus that
// follows its task bucket, and settles it waiting for her answer as a
// blocking send of the bus's process would see it.
func aliceWaiting(t *testing.T, rec *schemas.TaskRecord) *Bus {
	t.Helper()
	b := newTestBus(t, Config{})
	tw := runTaskWatcher(t, b)
	rec.Owner, rec.Tenant = "alice", "t1"
	createTask(t, b, rec)
	settleWaiting(t, b, tw, rec, "and then?")
	return b
}

// A client's answer whose record its work item cannot carry is handed to
// this process's worker of the agent: the work starts from a copy of the
// record exactly as stored at the item's revision, taken once, and never
// from one handed at another revision.
func TestHandedRecordStartsTheWorkOfItsRevision(t *testing.T) {
	rec := bigRecord("echo")
	b := aliceWaiting(t, rec)
	ctx := testCtx(t)
	wc, err := b.WorkConsumer(ctx, "echo") // this process takes echo's work
	if err != nil {
		t.Fatal(err)
	}
	o := Owner{Agent: "echo", Principal: "alice", Tenant: "t1"}
	answered, rev, err := b.Continue(ctx, o, Answer{Message: answerMsg(rec.Task.ID, "go on")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := fetchTask(t, wc, rec.Task.ID)
	defer func() { _ = w.Ack() }()
	if len(w.Item.Record) != 0 || w.Item.TaskRevision != rev {
		t.Fatalf("the item carries %d bytes of record at revision %d; want none, at the answer's %d", len(w.Item.Record), w.Item.TaskRevision, rev)
	}
	got := w.Snapshot()
	stored, storedRev, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil || storedRev != rev {
		t.Fatalf("stored at %d (%v), want %d", storedRev, err, rev)
	}
	if got == nil || got == answered || !reflect.DeepEqual(got, stored) {
		t.Fatalf("the work's snapshot is not a copy of the record as stored:\n%+v\nwant\n%+v", got, stored)
	}
	if again := w.Snapshot(); again != nil {
		t.Fatal("the handed record was taken twice")
	}

	// A record handed at another revision than the item's is not used.
	b.handover.work.put(rec.Task.ID, heldDecoded(stored.Clone(), watched{val: make([]byte, workSnapshotMax+1), rev: rev + 1}))
	if s := w.Snapshot(); s != nil {
		t.Fatalf("a record handed at revision %d started the work of revision %d", rev+1, rev)
	}
}

// A process that does not take the agent's work is handed nothing.
func TestNoRecordHandedWithoutTheAgentsWorker(t *testing.T) {
	rec := bigRecord("elsewhere")
	b := aliceWaiting(t, rec)
	if _, _, err := b.Continue(testCtx(t), Owner{Agent: "elsewhere", Principal: "alice", Tenant: "t1"}, Answer{Message: answerMsg(rec.Task.ID, "go on")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.handover.work.take(rec.Task.ID); ok {
		t.Fatal("a record was handed to a worker this process does not run")
	}
}

// A write that leaves a task waiting for its caller is held for the
// caller's next message, decoded, when a wait of this process follows the
// task — the wait then answers with the stored bytes without decoding
// them — and not held when none does.
func TestSettledRecordHeldForAWaitOfThisProcess(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	tw := runTaskWatcher(t, b)

	unwatched := newRecord("echo")
	createTask(t, b, unwatched)
	if _, _, err := b.applyEvents(ctx, unwatched.Task.ID, nil, 0, []TaskEvent{status(schemas.TaskStateInputRequired, agentMsg("anyone?"))}); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.waiting.take(unwatched.Task.ID); ok {
		t.Fatal("a record no wait follows was held")
	}

	rec := newRecord("echo")
	createTask(t, b, rec)
	held := *rec
	w := tw.Watch(rec.Task.ID, &held) // the wait ends on the watched update
	defer w.Close()
	_, rev, err := b.applyEvents(ctx, rec.Task.ID, nil, 0, []TaskEvent{status(schemas.TaskStateInputRequired, agentMsg("which one?"))})
	if err != nil {
		t.Fatal(err)
	}
	stored, _, _ := b.GetTask(ctx, rec.Task.ID)
	if h := b.waiting.m[rec.Task.ID]; h.rec == nil || h.rev != rev {
		t.Fatalf("the write did not hold the record for the waiting caller at its revision %d: %+v", rev, h)
	}
	if h := b.waiting.copyClaimed(rec.Task.ID, watched{rev: rev}); !reflect.DeepEqual(h, stored) {
		t.Fatalf("the held record is not the record as stored:\n%+v\nwant\n%+v", h, stored)
	}
	_, raw, err := w.UntilStateRaw(ctx, schemas.TaskState.Settled)
	if err != nil || !raw.wellFormed {
		t.Fatalf("the wait did not answer with the held record's bytes: %v, well-formed %v", err, raw.wellFormed)
	}
	if task, ok := raw.Task(); !ok || !strings.Contains(string(task), "which one?") {
		t.Fatalf("the answer: %q %v", task, ok)
	}
}

// A record its writer held before the write is the record as stored only
// once the write stored its very bytes: a wait that sees them stored
// first claims it at their revision, the writer's success confirms it,
// and one never stored (a write that lost its compare-and-swap) answers
// no message: the answer reads the store.
func TestRecordHeldBeforeItsWrite(t *testing.T) {
	c := newWaitingRecords()
	rec := newRecord("echo")
	val := []byte(`{"task":{"id":"x"}}`)
	c.put("a", heldWriting(rec, val))
	if c.claim("a", watched{val: []byte(`{"task":{"id":"y"}}`), rev: 7}) {
		t.Fatal("claimed by other bytes")
	}
	if !c.claim("a", watched{val: bytes.Clone(val), rev: 7}) || c.m["a"].rev != 7 {
		t.Fatalf("not claimed by its own bytes stored at 7: %+v", c.m["a"])
	}
	if c.claim("a", watched{val: bytes.Clone(val), rev: 8}) {
		t.Fatal("claimed again at another revision")
	}
	c.put("b", heldWriting(rec, val))
	c.confirm("b", bytes.Clone(val), 9) // not the writer's bytes
	if c.m["b"].rev != 0 {
		t.Fatal("confirmed by bytes other than the writer's own")
	}
	c.confirm("b", val, 9)
	if h := c.m["b"]; h.rev != 9 || h.val != nil {
		t.Fatalf("the writer's confirmation: %+v", h)
	}

	// Never stored: the answer reads the task instead.
	task := newRecord("echo")
	b := aliceWaiting(t, task)
	ctx := testCtx(t)
	bogus := task.Clone()
	bogus.Task.History = nil // a record that was never stored
	b.waiting.put(task.Task.ID, heldWriting(bogus, []byte("never stored")))
	got, _, err := b.Continue(ctx, Owner{Agent: "echo", Principal: "alice", Tenant: "t1"}, Answer{Message: answerMsg(task.Task.ID, "this")}, nil)
	if err != nil || len(got.Task.History) != 3 {
		t.Fatalf("an answer with an unwritten record held: %v, %d messages (want 3)", err, len(got.Task.History))
	}
}
