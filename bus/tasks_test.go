package bus

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// nextEvent receives the next event of a reader of a test that stores one
// event per write, so that each group the reader delivers holds one; false
// when the reader ended.
func nextEvent(r *EventReader) (TaskUpdate, bool) {
	us, ok := <-r.C()
	if !ok || len(us) == 0 {
		return TaskUpdate{}, false
	}
	if len(us) != 1 {
		panic(fmt.Sprintf("a group of %d events where each write stored one", len(us)))
	}
	return us[0], true
}

// newRecord returns a SUBMITTED task of agent with one user message, as the
// edge creates it.
func newRecord(agent string) *schemas.TaskRecord {
	id, ctxID := schemas.NewID(), schemas.NewID()
	now := schemas.Now()
	msg := schemas.Message{MessageID: schemas.NewID(), ContextID: ctxID, TaskID: id, Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("hello")}}
	return &schemas.TaskRecord{
		Task: schemas.Task{
			ID:        id,
			ContextID: ctxID,
			Status:    schemas.TaskStatus{State: schemas.TaskStateSubmitted, Timestamp: now},
			History:   []schemas.Message{msg},
		},
		Agent:     agent,
		CreatedAt: *now,
	}
}

// workItem returns the work item that runs rec.
func workItem(rec *schemas.TaskRecord) *schemas.WorkItem {
	return &schemas.WorkItem{TaskID: rec.Task.ID, ContextID: rec.Task.ContextID, Agent: rec.Agent, Message: rec.Task.History[len(rec.Task.History)-1]}
}

func agentMsg(text string) *schemas.Message {
	return &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleAgent, Parts: []schemas.Part{schemas.TextPart(text)}}
}

func status(state schemas.TaskState, msg *schemas.Message) TaskEvent {
	return TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: state, Message: msg}}}
}

func artifact(id, text string) TaskEvent {
	return TaskEvent{Artifact: &schemas.TaskArtifactUpdateEvent{Artifact: schemas.Artifact{ArtifactID: id, Parts: []schemas.Part{schemas.TextPart(text)}}}}
}

// createTask stores rec and returns its revision.
func createTask(t testing.TB, b *Bus, rec *schemas.TaskRecord) uint64 {
	t.Helper()
	rev, _, err := b.createTask(testCtx(t), rec)
	if err != nil {
		t.Fatalf("createTask: %v", err)
	}
	return rev
}

// subscribeEvents subscribes (core NATS) to a task's event subject and makes
// sure the server has the interest before it returns.
func subscribeEvents(t testing.TB, b *Bus, taskID string) *nats.Subscription {
	t.Helper()
	sub, err := b.nc.SubscribeSync(schemas.SubjectEvents(taskID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := b.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return sub
}

func TestCreateThenGetTask(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := newRecord("echo")
	rev := createTask(t, b, rec)
	if rev == 0 {
		t.Fatal("createTask returned revision 0")
	}
	got, gotRev, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if gotRev != rev {
		t.Errorf("GetTask revision %d, createTask returned %d", gotRev, rev)
	}
	if got.Task.ID != rec.Task.ID || got.Task.ContextID != rec.Task.ContextID || got.Agent != "echo" ||
		got.Task.Status.State != schemas.TaskStateSubmitted || !got.CreatedAt.Equal(rec.CreatedAt.Time) {
		t.Errorf("GetTask = %+v, want %+v", got, rec)
	}
	if len(got.Task.History) != 1 || got.Task.History[0].Text() != "hello" {
		t.Errorf("history = %+v", got.Task.History)
	}
}

func TestCreateTaskTwiceFails(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := newRecord("echo")
	rev := createTask(t, b, rec)

	dup := newRecord("other")
	dup.Task.ID = rec.Task.ID
	_, _, err := b.createTask(ctx, dup)
	if err == nil {
		t.Fatal("second createTask with the same id succeeded")
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		t.Errorf("second createTask: %v, want it to wrap jetstream.ErrKeyExists", err)
	}
	got, gotRev, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil || gotRev != rev || got.Agent != "echo" {
		t.Fatalf("the first record was changed: %+v rev %d (%v)", got, gotRev, err)
	}
}

func TestCreateTaskRejectsInvalidID(t *testing.T) {
	b := newTestBus(t, Config{})
	for _, id := range []string{"", "not-a-uuid", "a2a.work.>", strings.Repeat("x", 36)} {
		rec := newRecord("echo")
		rec.Task.ID = id
		if _, _, err := b.createTask(testCtx(t), rec); err == nil {
			t.Errorf("createTask(id %q) succeeded", id)
		}
	}
}

func TestGetTaskNotFound(t *testing.T) {
	b := newTestBus(t, Config{})
	for _, id := range []string{schemas.NewID(), "not-a-uuid", "", "*", "a.b.>"} {
		rec, _, err := b.GetTask(testCtx(t), id)
		if !errors.Is(err, schemas.ErrTaskNotFound) {
			t.Errorf("GetTask(%q) = %v, %v; want ErrTaskNotFound", id, rec, err)
		}
		if rec != nil {
			t.Errorf("GetTask(%q) returned a record with its error", id)
		}
	}
}

func TestUpdateTaskAbandonsOnChangeError(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := newRecord("echo")
	rev := createTask(t, b, rec)
	boom := errors.New("boom")
	got, gotRev, err := b.update(ctx, rec.Task.ID, nil, 0, func(r *schemas.TaskRecord) error {
		r.Agent = "changed"
		return boom
	}, 0)
	if !errors.Is(err, boom) || gotRev != rev || got == nil {
		t.Fatalf("update = %v rev %d, %v; want the read record at rev %d and boom", got, gotRev, err, rev)
	}
	if cur, curRev, _ := b.GetTask(ctx, rec.Task.ID); cur.Agent != "echo" || curRev != rev {
		t.Fatalf("abandoned update was stored: %+v rev %d", cur, curRev)
	}
	if _, _, err := b.update(ctx, schemas.NewID(), nil, 0, func(*schemas.TaskRecord) error { return nil }, 0); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("update of an unknown task: %v", err)
	}
}

// Concurrent writers never lose each other's changes: every CAS loser
// re-reads and re-applies.
func TestApplyConcurrentArtifactsLoseNothing(t *testing.T) {
	const writers = 20
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := newRecord("echo")
	rev0 := createTask(t, b, rec)

	start := make(chan struct{})
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, _, err := b.Apply(ctx, rec.Task.ID, artifact(fmt.Sprintf("art-%02d", i), "chunk"))
			if err != nil {
				errs <- fmt.Errorf("writer %d: %w", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	got, rev, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range got.Task.Artifacts {
		ids = append(ids, a.ArtifactID)
	}
	sort.Strings(ids)
	if len(ids) != writers {
		t.Fatalf("%d artifacts after %d concurrent appends: %v", len(ids), writers, ids)
	}
	for i, id := range ids {
		if want := fmt.Sprintf("art-%02d", i); id != want {
			t.Fatalf("artifacts %v: missing %s", ids, want)
		}
	}
	if rev != rev0+writers {
		t.Errorf("revision %d after %d updates from %d", rev, writers, rev0)
	}
	if n := streamMsgs(t, b, schemas.StreamEvents); n != writers {
		t.Errorf("%d events published for %d updates", n, writers)
	}
}

func TestApplyOnTerminalTaskPublishesNothing(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := newRecord("echo")
	createTask(t, b, rec)
	_, rev, err := b.Apply(ctx, rec.Task.ID, status(schemas.TaskStateCompleted, agentMsg("done")))
	if err != nil {
		t.Fatal(err)
	}
	sub := subscribeEvents(t, b, rec.Task.ID)
	before := streamMsgs(t, b, schemas.StreamEvents)

	for name, ev := range map[string]TaskEvent{
		"status":   status(schemas.TaskStateWorking, nil),
		"failed":   status(schemas.TaskStateFailed, nil),
		"artifact": artifact("late", "x"),
		"reply":    {Reply: agentMsg("late")},
	} {
		got, gotRev, err := b.Apply(ctx, rec.Task.ID, ev)
		if !errors.Is(err, schemas.ErrTaskTerminal) {
			t.Errorf("%s on a completed task: %v, want ErrTaskTerminal", name, err)
		}
		if gotRev != rev || got == nil || got.Task.Status.State != schemas.TaskStateCompleted {
			t.Errorf("%s on a completed task returned %+v rev %d, want the completed record at rev %d", name, got, gotRev, rev)
		}
	}
	if _, curRev, _ := b.GetTask(ctx, rec.Task.ID); curRev != rev {
		t.Errorf("revision moved from %d to %d", rev, curRev)
	}
	if after := streamMsgs(t, b, schemas.StreamEvents); after != before {
		t.Errorf("events stream grew from %d to %d", before, after)
	}
	// Nothing reached the subject either: a flush round trip after the last
	// Apply guarantees anything published earlier has been delivered.
	if err := b.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := sub.Pending(); n != 0 {
		t.Errorf("%d events delivered after applying to a terminal task", n)
	}
}

func TestApplyRefusesBadTransition(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := newRecord("echo")
	createTask(t, b, rec)
	if _, _, err := b.Apply(ctx, rec.Task.ID, status(schemas.TaskStateWorking, nil)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Apply(ctx, rec.Task.ID, status(schemas.TaskStateSubmitted, nil)); !errors.Is(err, schemas.ErrBadTransition) {
		t.Fatalf("WORKING -> SUBMITTED: %v, want ErrBadTransition", err)
	}
	if _, _, err := b.Apply(ctx, rec.Task.ID, TaskEvent{}); err == nil {
		t.Fatal("empty TaskEvent accepted")
	}
	if _, _, err := b.Apply(ctx, schemas.NewID(), status(schemas.TaskStateWorking, nil)); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("Apply to an unknown task: %v", err)
	}
}

// Every Apply publishes one CloudEvent on a2a.events.<taskId> whose sequence
// extension is the KV revision the change was stored at.
func TestApplyPublishesEventWithSequence(t *testing.T) {
	b := newTestBus(t, Config{Role: "worker", Name: "w1"})
	ctx := testCtx(t)
	rec := newRecord("echo")
	createTask(t, b, rec)
	sub := subscribeEvents(t, b, rec.Task.ID)

	steps := []struct {
		ev  TaskEvent
		typ string
	}{
		{status(schemas.TaskStateWorking, agentMsg("on it")), schemas.TypeTaskStatus},
		{artifact("a1", "part one"), schemas.TypeTaskArtifact},
		{TaskEvent{Artifact: &schemas.TaskArtifactUpdateEvent{Append: true, LastChunk: true, Artifact: schemas.Artifact{ArtifactID: "a1", Parts: []schemas.Part{schemas.TextPart("part two")}}}}, schemas.TypeTaskArtifact},
		{status(schemas.TaskStateCompleted, nil), schemas.TypeTaskStatus},
	}
	var revs []uint64
	var ids []string
	for i, s := range steps {
		got, rev, err := b.Apply(ctx, rec.Task.ID, s.ev)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		revs = append(revs, rev)
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("step %d: no event: %v", i, err)
		}
		ev, err := decodeMsg(m)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		ids = append(ids, ev.ID())
		if ev.Type() != s.typ || ev.Subject() != rec.Task.ID || ev.Source() != "urn:a2abus:worker:w1" || ev.DataContentType() != "application/json" {
			t.Errorf("step %d: event %s", i, ev)
		}
		if seq := ev.Extensions()[schemas.ExtSequence]; seq != schemas.SequenceString(rev) {
			t.Errorf("step %d: sequence %v, want %s", i, seq, schemas.SequenceString(rev))
		}
		if m.Header.Get(nats.MsgIdHdr) != ev.ID() {
			t.Errorf("step %d: Nats-Msg-Id %q, ce id %q", i, m.Header.Get(nats.MsgIdHdr), ev.ID())
		}
		switch s.typ {
		case schemas.TypeTaskStatus:
			var d schemas.TaskStatusUpdateEvent
			if err := decodeData(&ev, &d); err != nil {
				t.Fatal(err)
			}
			if d.TaskID != rec.Task.ID || d.ContextID != rec.Task.ContextID || d.Status.State != got.Task.Status.State || d.Status.Timestamp == nil {
				t.Errorf("step %d: status data %+v", i, d)
			}
		case schemas.TypeTaskArtifact:
			var d schemas.TaskArtifactUpdateEvent
			if err := decodeData(&ev, &d); err != nil {
				t.Fatal(err)
			}
			if d.TaskID != rec.Task.ID || d.ContextID != rec.Task.ContextID || d.Artifact.ArtifactID != "a1" {
				t.Errorf("step %d: artifact data %+v", i, d)
			}
		}
	}
	final, _, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a := final.Task.Artifacts; len(a) != 1 || len(a[0].Parts) != 2 || *a[0].Parts[1].Text != "part two" {
		t.Errorf("appended artifact = %+v", a)
	}
	if h := final.Task.History; len(h) != 2 || h[1].Text() != "on it" {
		t.Errorf("status message not in history: %+v", h)
	}

	// The stream holds the same events in revision order; an ordered
	// consumer (what a resubscribing client uses) reads them back.
	oc, err := b.js.OrderedConsumer(ctx, schemas.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{schemas.SubjectEvents(rec.Task.ID)}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := oc.Fetch(len(steps), jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for m := range batch.Messages() {
		ev, err := decodeMsg(&nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
		if err != nil {
			t.Fatal(err)
		}
		seq, err := strconv.ParseUint(fmt.Sprint(ev.Extensions()[schemas.ExtSequence]), 10, 64)
		if err != nil || i >= len(revs) || seq != revs[i] || ev.ID() != ids[i] {
			t.Errorf("stored event %d: id %s sequence %d (%v), want id %s revision %d", i, ev.ID(), seq, err, ids[min(i, len(ids)-1)], revs[min(i, len(revs)-1)])
		}
		i++
	}
	if batch.Error() != nil || i != len(steps) {
		t.Fatalf("read %d stored events (%v), want %d", i, batch.Error(), len(steps))
	}
}

func TestApplyReply(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := newRecord("echo")
	createTask(t, b, rec)
	sub := subscribeEvents(t, b, rec.Task.ID)
	got, rev, err := b.Apply(ctx, rec.Task.ID, TaskEvent{Reply: agentMsg("hi back")})
	if err != nil {
		t.Fatal(err)
	}
	if got.Reply == nil || got.Reply.ContextID != rec.Task.ContextID || got.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("record after reply: %+v", got)
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := decodeMsg(m)
	if err != nil {
		t.Fatal(err)
	}
	var reply schemas.Message
	if ev.Type() != schemas.TypeTaskMessage || decodeData(&ev, &reply) != nil || reply.Text() != "hi back" {
		t.Fatalf("reply event %s", ev)
	}
	if ev.Extensions()[schemas.ExtSequence] != schemas.SequenceString(rev) {
		t.Fatalf("reply sequence %v, revision %d", ev.Extensions()[schemas.ExtSequence], rev)
	}
	// A direct reply is not a visible task.
	if got := listIDs(t, runIndex(t, b), ListQuery{Owner: Owner{Agent: rec.Agent}}); len(got) != 0 {
		t.Fatalf("listed after a direct reply: %v", got)
	}
}

// applyFrom with a stale cached record falls back to reading: the write of
// another process is not overwritten.
func TestApplyFromStaleCache(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := newRecord("echo")
	createTask(t, b, rec)
	cached, rev, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Apply(ctx, rec.Task.ID, artifact("other", "from elsewhere")); err != nil {
		t.Fatal(err)
	}
	got, newRev, err := b.applyFrom(ctx, rec.Task.ID, cached, rev, artifact("mine", "from here"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Task.Artifacts) != 2 || newRev != rev+2 {
		t.Fatalf("applyFrom with a stale cache: %d artifacts at rev %d, want 2 at %d", len(got.Task.Artifacts), newRev, rev+2)
	}
	// With a current cache it writes without a read and chains revisions.
	got, rev3, err := b.applyFrom(ctx, rec.Task.ID, got, newRev, status(schemas.TaskStateCompleted, nil))
	if err != nil || rev3 != newRev+1 || got.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("applyFrom with a current cache: rev %d, %v", rev3, err)
	}
}

func TestHistoryCapTrimsHistory(t *testing.T) {
	b := newTestBus(t, Config{HistoryCap: 3})
	ctx := testCtx(t)
	rec := newRecord("echo")
	for i := range 4 {
		rec.Task.History = append(rec.Task.History, schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(fmt.Sprint("m", i))}})
	}
	createTask(t, b, rec)
	got, _, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if h := got.Task.History; len(h) != 3 || h[0].Text() != "m1" || h[2].Text() != "m3" {
		t.Fatalf("history after create = %v, want the last 3 (m1..m3)", texts(h))
	}
	for i := range 2 {
		if _, _, err := b.Apply(ctx, rec.Task.ID, status(schemas.TaskStateWorking, agentMsg(fmt.Sprint("s", i)))); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err = b.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if h := texts(got.Task.History); strings.Join(h, ",") != "m3,s0,s1" {
		t.Fatalf("history after updates = %v, want [m3 s0 s1]", h)
	}
}

func texts(ms []schemas.Message) []string {
	out := make([]string, len(ms))
	for i := range ms {
		out[i] = ms[i].Text()
	}
	return out
}

func TestTaskMaxValueSizeRejectsOversizedRecords(t *testing.T) {
	const limit = 4096
	b := newTestBus(t, Config{TaskMaxValueSize: limit})
	ctx := testCtx(t)
	big := strings.Repeat("x", limit)

	rec := newRecord("echo")
	rec.Task.History[0].Parts = []schemas.Part{schemas.TextPart(big)}
	_, _, err := b.createTask(ctx, rec)
	if !errors.Is(err, schemas.ErrInvalidParams) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("createTask of an oversized record: %v, want ErrInvalidParams naming the limit", err)
	}
	if _, _, err := b.GetTask(ctx, rec.Task.ID); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("oversized record was stored: %v", err)
	}

	small := newRecord("echo")
	rev := createTask(t, b, small)
	before := streamMsgs(t, b, schemas.StreamEvents)
	// An agent's write that would grow the record past the limit is not
	// stored: the task fails instead, saying so (one write, one event).
	got, newRev, err := b.Apply(ctx, small.Task.ID, artifact("huge", big))
	if err != nil || got.Task.Status.State != schemas.TaskStateFailed || !strings.Contains(got.Task.Status.Message.Text(), "limit") || len(got.Task.Artifacts) != 0 {
		t.Fatalf("Apply growing the record past the limit: %+v %v, want the task FAILED naming the limit", got, err)
	}
	if newRev != rev+1 {
		t.Fatalf("the failure took revisions %d -> %d", rev, newRev)
	}
	if after := streamMsgs(t, b, schemas.StreamEvents); after != before+1 {
		t.Fatalf("%d events published for the failure, want 1", after-before)
	}
}

func TestTaskWatcher(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	tw := b.NewTaskWatcher()
	// Rechecks would mask a watcher that never notifies; push them out of
	// the test's reach.
	tw.RecheckEvery = time.Hour
	startRun(t, ctx, "watcher", tw.Run, tw.Ready())
	settled := func(r *schemas.TaskRecord) bool { return r.Task.Status.State.Settled() }

	t.Run("updates by another goroutine", func(t *testing.T) {
		rec := newRecord("echo")
		createTask(t, b, rec)
		// Watch registers before the writer starts, so the result depends
		// on notifications, not on the initial read.
		w := tw.Watch(rec.Task.ID, nil)
		defer w.Close()
		writeErr := make(chan error, 1)
		go func() {
			for _, ev := range []TaskEvent{status(schemas.TaskStateWorking, nil), artifact("a", "x"), status(schemas.TaskStateInputRequired, agentMsg("more?"))} {
				if _, _, err := b.Apply(ctx, rec.Task.ID, ev); err != nil {
					writeErr <- err
					return
				}
			}
			writeErr <- nil
		}()
		got, err := w.Until(ctx, settled)
		if err != nil {
			t.Fatal(err)
		}
		if got.Task.Status.State != schemas.TaskStateInputRequired || len(got.Task.Artifacts) != 1 {
			t.Fatalf("Until returned %+v", got.Task)
		}
		if err := <-writeErr; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("wait while another goroutine completes", func(t *testing.T) {
		rec := newRecord("echo")
		createTask(t, b, rec)
		go func() {
			_, _, _ = b.Apply(ctx, rec.Task.ID, status(schemas.TaskStateWorking, nil))
			_, _, _ = b.Apply(ctx, rec.Task.ID, status(schemas.TaskStateCompleted, nil))
		}()
		got, err := tw.Wait(ctx, rec.Task.ID, func(r *schemas.TaskRecord) bool { return r.Task.Status.State.Terminal() })
		if err != nil || got.Task.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("Wait = %v, %v", got, err)
		}
	})

	t.Run("already settled", func(t *testing.T) {
		rec := newRecord("echo")
		createTask(t, b, rec)
		if _, _, err := b.Apply(ctx, rec.Task.ID, status(schemas.TaskStateFailed, nil)); err != nil {
			t.Fatal(err)
		}
		// No update will come: only the initial read can answer this.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got, err := tw.Wait(wctx, rec.Task.ID, settled)
		if err != nil || got.Task.Status.State != schemas.TaskStateFailed {
			t.Fatalf("Wait on a settled task = %v, %v", got, err)
		}
		// Watch with a settled record in hand answers without reading.
		w := tw.Watch(rec.Task.ID, got)
		defer w.Close()
		if again, err := w.Until(wctx, settled); err != nil || again != got {
			t.Fatalf("Until with a settled current record = %v, %v", again, err)
		}
	})

	t.Run("context ends first", func(t *testing.T) {
		rec := newRecord("echo")
		createTask(t, b, rec)
		if _, _, err := b.Apply(ctx, rec.Task.ID, status(schemas.TaskStateWorking, nil)); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		got, err := tw.Wait(wctx, rec.Task.ID, settled)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait past its deadline: err %v", err)
		}
		if got == nil || got.Task.ID != rec.Task.ID || got.Task.Status.State != schemas.TaskStateWorking {
			t.Fatalf("Wait past its deadline returned %+v, want the last record read", got)
		}
		// The same from a record in hand (no initial read to race the
		// deadline), and the record seen last is the one returned.
		w := tw.Watch(rec.Task.ID, got)
		defer w.Close()
		if _, _, err := b.Apply(ctx, rec.Task.ID, artifact("a", "x")); err != nil {
			t.Fatal(err)
		}
		wctx2, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel2()
		last, err := w.Until(wctx2, settled)
		if !errors.Is(err, context.DeadlineExceeded) || last == nil {
			t.Fatalf("Until past its deadline = %v, %v", last, err)
		}
		if len(last.Task.Artifacts) > 1 {
			t.Fatalf("Until returned %+v", last.Task)
		}
	})

	t.Run("unknown task", func(t *testing.T) {
		if _, err := tw.Wait(ctx, schemas.NewID(), settled); !errors.Is(err, schemas.ErrTaskNotFound) {
			t.Fatalf("Wait on an unknown task: %v", err)
		}
	})

	t.Run("waiters are removed", func(t *testing.T) {
		tw.mu.Lock()
		n := len(tw.waiters)
		tw.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d tasks still have waiters after every wait ended", n)
		}
	})
}

// A reader whose consumer does not keep up ends with ErrReaderOverflow
// instead of holding events back from anyone else.
func TestEventReaderOverflow(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := &schemas.TaskRecord{Task: schemas.Task{ID: schemas.NewID(), ContextID: "c", Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}, Agent: "a"}
	rev, _, err := b.createTask(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.ReadEvents(ctx, rec.Task.ID, SnapshotCursor(rev), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range 10 {
		a := schemas.Artifact{ArtifactID: fmt.Sprint(i), Parts: []schemas.Part{schemas.TextPart("x")}}
		if _, _, err := b.Apply(ctx, rec.Task.ID, TaskEvent{Artifact: &schemas.TaskArtifactUpdateEvent{Artifact: a}}); err != nil {
			t.Fatal(err)
		}
	}
	// Read nothing until the reader has ended: a loop reading while the
	// events still arrive can keep up with them, and then waits forever.
	eventually(t, "the reader to overflow", func() bool { return r.Err() != nil })
	n := 0
	for range r.Events() {
		n++
	}
	if n != 2 || !errors.Is(r.Err(), ErrReaderOverflow) {
		t.Fatalf("read %d events, err %v", n, r.Err())
	}
}

// A reader that resumes far behind (more events stored after its cursor
// than its buffer holds) gets all of them, read as it is drained: the
// replay waits for the consumer instead of overflowing it.
func TestEventReaderReplaysMoreThanItsBuffer(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := &schemas.TaskRecord{Task: schemas.Task{ID: schemas.NewID(), ContextID: "c", Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}, Agent: "a"}
	if _, _, err := b.createTask(ctx, rec); err != nil {
		t.Fatal(err)
	}
	const stored = 40
	for i := range stored {
		a := schemas.Artifact{ArtifactID: fmt.Sprint(i), Parts: []schemas.Part{schemas.TextPart("x")}}
		if _, _, err := b.Apply(ctx, rec.Task.ID, TaskEvent{Artifact: &schemas.TaskArtifactUpdateEvent{Artifact: a}}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := b.ReadEvents(ctx, rec.Task.ID, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var last uint64
	for i := range stored {
		u, ok := nextEvent(r)
		if !ok {
			t.Fatalf("the reader ended after %d of %d stored events: %v", i, stored, r.Err())
		}
		if u.Artifact == nil || u.Artifact.Artifact.ArtifactID != fmt.Sprint(i) || u.Cursor <= last {
			t.Fatalf("event %d: %+v after cursor %d", i, u, last)
		}
		last = u.Cursor
	}
	// Closing a reader whose replay is done, or under way, is clean.
	r2, err := b.ReadEvents(ctx, rec.Task.ID, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	<-r2.C()
	r2.Close()
	for range r2.Events() {
	}
}

// Replays beyond Config.MaxReplays wait for a place, and a replay holds
// its place (and its consumer) only while its reader takes what it reads:
// with one place and twenty readers from the start of a task, drained
// last-opened first (so the first replays wait for the test), each still
// gets every stored event, and the stream has a few consumers at most
// (the hub's, the replay's, and ones being deleted). (Before, a replay
// held its place until its reader had taken every event: one slow client
// stalled every other resume.)
func TestReplaysBoundedPerProcess(t *testing.T) {
	b := newTestBus(t, Config{MaxReplays: 1, replayStall: 20 * time.Millisecond})
	ctx := testCtx(t)
	rec := &schemas.TaskRecord{Task: schemas.Task{ID: schemas.NewID(), ContextID: "c", Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}, Agent: "a"}
	rev, _, err := b.createTask(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, rev, err = b.applyFrom(ctx, rec.Task.ID, rec, rev, artifact(fmt.Sprintf("a%d", i), "x")); err != nil {
			t.Fatal(err)
		}
	}
	readers := make([]*EventReader, 20)
	for i := range readers {
		if readers[i], err = b.ReadEvents(ctx, rec.Task.ID, 0, 1); err != nil {
			t.Fatal(err)
		}
		defer readers[i].Close()
	}
	most := 0
	for i := len(readers) - 1; i >= 0; i-- {
		r := readers[i]
		for j := range 5 {
			var u TaskUpdate
			var ok bool
			select {
			case us, open := <-r.C():
				ok = open && len(us) == 1
				if ok {
					u = us[0]
				}
			case <-ctx.Done():
				t.Fatalf("reader %d waits for event %d: a replay holds the only place", i, j)
			}
			if want := fmt.Sprintf("a%d", j); !ok || u.Artifact == nil || u.Artifact.Artifact.ArtifactID != want {
				t.Fatalf("reader %d event %d: %+v (%v), want %s", i, j, u, ok, want)
			}
			if n, err := b.eventReaders(ctx); err == nil {
				most = max(most, n)
			}
		}
	}
	if most > 6 {
		t.Fatalf("%d consumers of the events stream at once with one replay place", most)
	}
}

// Readers cost no consumer each: two thousand readers of forty tasks are
// served by the process's one hub consumer, each gets its task's events
// and only those, and a reader from the start of a task that has events
// replays them (through a consumer that lives for the replay) before the
// live ones, missing none and repeating none.
func TestEventReadersShareOneConsumer(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	var ids []string
	for range 40 {
		rec := &schemas.TaskRecord{Task: schemas.Task{ID: schemas.NewID(), ContextID: "c", Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}, Agent: "a"}
		rev, _, err := b.createTask(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.applyFrom(ctx, rec.Task.ID, rec, rev, artifact("before", "x")); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.Task.ID)
	}
	readers := make([]*EventReader, 0, 2000)
	for i := range 2000 {
		after := uint64(0) // the first of each task's readers replays
		if i >= len(ids) {
			after = EventCursor(1<<40, 0)
		}
		r, err := b.ReadEvents(ctx, ids[i%len(ids)], after, 4)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		readers = append(readers, r)
	}
	if n, err := b.eventReaders(ctx); err != nil || n > 1 {
		t.Fatalf("%d consumers for 2000 readers (%v)", n, err)
	}
	if n := b.eventSubscribers(); n != 2000 {
		t.Fatalf("%d readers registered", n)
	}
	for i, r := range readers[:len(ids)] {
		if u, _ := nextEvent(r); u.Artifact == nil || u.Artifact.Artifact.ArtifactID != "before" {
			t.Fatalf("reader %d replayed %+v", i, u)
		}
	}
	for _, id := range ids {
		if _, _, err := b.Apply(ctx, id, artifact("live-"+id, "y")); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range readers {
		want := "live-" + ids[i%len(ids)]
		if i >= len(ids) {
			// A cursor past everything: nothing is delivered.
			select {
			case us := <-r.C():
				t.Fatalf("reader %d past the end got %+v", i, us)
			default:
			}
			continue
		}
		select {
		case us := <-r.C():
			if u := us[0]; len(us) != 1 || u.Artifact == nil || u.Artifact.Artifact.ArtifactID != want {
				t.Fatalf("reader %d got %+v, want %s", i, us, want)
			}
		case <-ctx.Done():
			t.Fatalf("reader %d got nothing", i)
		}
	}
	for _, r := range readers {
		r.Close()
	}
	if n := b.eventSubscribers(); n != 0 {
		t.Fatalf("%d readers left after closing all", n)
	}
}

// Several events stored by one write share the revision and are told apart
// by their index: readers get them once each, in order, and a cursor in
// the middle of a write resumes with the rest of it.
func TestApplyEventsOneWriteManyEvents(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := &schemas.TaskRecord{Task: schemas.Task{ID: schemas.NewID(), ContextID: "c", Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted}}, Agent: "a"}
	rev0, _, err := b.createTask(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	art := schemas.Artifact{ArtifactID: "x", Parts: []schemas.Part{schemas.TextPart("answer")}}
	evs := []TaskEvent{
		{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}},
		{Artifact: &schemas.TaskArtifactUpdateEvent{Artifact: art, LastChunk: true}},
		{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateCompleted}}},
	}
	got, rev, err := b.applyEvents(ctx, rec.Task.ID, rec, rev0, evs)
	if err != nil || got.Task.Status.State != schemas.TaskStateCompleted || len(got.Task.Artifacts) != 1 || got.LastEventIndex != 2 {
		t.Fatalf("one write of three events: %+v %v", got, err)
	}
	// The write's events went out as one batch message, named by the last
	// event's id.
	if n := streamMsgs(t, b, schemas.StreamEvents); n != 1 {
		t.Fatalf("one write of three events published %d messages, want 1 batch", n)
	}
	st, err := b.js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetLastMsgForSubject(ctx, schemas.SubjectEvents(rec.Task.ID))
	if err != nil {
		t.Fatal(err)
	}
	if ct, id := raw.Header.Get("Content-Type"), raw.Header.Get(nats.MsgIdHdr); ct != contentBatch || id != evs[2].ID {
		t.Fatalf("batch message: Content-Type %q Nats-Msg-Id %q, want %q and %q", ct, id, contentBatch, evs[2].ID)
	}
	// Retried after an unclear failure with the same ids: nothing applied
	// twice, and the re-published batch is de-duplicated.
	if again, rev2, err := b.applyEvents(ctx, rec.Task.ID, nil, 0, evs); err != nil || rev2 != rev || len(again.Task.Artifacts) != 1 {
		t.Fatalf("retry: rev %d (was %d), %v", rev2, rev, err)
	}
	if n := streamMsgs(t, b, schemas.StreamEvents); n != 1 {
		t.Fatalf("the retried write left %d messages, want 1", n)
	}
	read := func(after uint64) []TaskUpdate {
		r, err := b.ReadEvents(ctx, rec.Task.ID, after, 16)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var out []TaskUpdate
		for u := range r.Events() {
			out = append(out, u)
			if u.Cursor == RecordCursor(got, rev) {
				break
			}
		}
		return out
	}
	all := read(SnapshotCursor(rev0))
	if len(all) != 3 || all[0].Status == nil || all[1].Artifact == nil || all[2].Status == nil {
		t.Fatalf("events: %+v", all)
	}
	for i, u := range all {
		if u.Rev != rev || u.Cursor != EventCursor(rev, i) {
			t.Fatalf("event %d: rev %d cursor %d, want rev %d cursor %d", i, u.Rev, u.Cursor, rev, EventCursor(rev, i))
		}
	}
	// Resume after the first event of the write: the other two follow.
	if rest := read(all[0].Cursor); len(rest) != 2 || rest[0].Artifact == nil || rest[1].Status.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("resumed mid-write: %+v", rest)
	}
	if _, _, err := b.applyEvents(ctx, rec.Task.ID, nil, 0, nil); err == nil {
		t.Fatal("an empty write was accepted")
	}
}

// A write whose events together pass the largest message the server takes
// (an artifact replaced many times, so the record stays small) publishes
// them as several consecutive batches: every event once, in order, and a
// retry of the write publishes nothing again.
func TestApplyEventsSplitsBatchesPastTheLargestMessage(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := &schemas.TaskRecord{Task: schemas.Task{ID: schemas.NewID(), ContextID: "c", Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}, Agent: "a"}
	rev0, _, err := b.createTask(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	evs := make([]TaskEvent, n)
	for i := range evs {
		text := fmt.Sprintf("%04d", i) + strings.Repeat("x", 8<<10)
		evs[i] = TaskEvent{Artifact: &schemas.TaskArtifactUpdateEvent{Artifact: schemas.Artifact{ArtifactID: "a", Parts: []schemas.Part{schemas.TextPart(text)}}}}
	}
	got, rev, err := b.applyEvents(ctx, rec.Task.ID, rec, rev0, evs)
	if err != nil || len(got.Task.Artifacts) != 1 {
		t.Fatalf("write: %v", err)
	}
	msgs := streamMsgs(t, b, schemas.StreamEvents)
	if msgs < 3 || msgs > 8 {
		t.Fatalf("%d events of 8 KiB went out as %d messages; want a few batches each under 1 MiB", n, msgs)
	}
	if _, _, err := b.applyEvents(ctx, rec.Task.ID, nil, 0, evs); err != nil {
		t.Fatal(err)
	}
	if again := streamMsgs(t, b, schemas.StreamEvents); again != msgs {
		t.Fatalf("the retried write left %d messages, want %d", again, msgs)
	}
	r, err := b.ReadEvents(ctx, rec.Task.ID, SnapshotCursor(rev0), n)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	i := 0
	for u := range r.Events() {
		if u.Cursor != EventCursor(rev, i) || !strings.HasPrefix(*u.Artifact.Artifact.Parts[0].Text, fmt.Sprintf("%04d", i)) {
			t.Fatalf("event %d: cursor %d, want %d", i, u.Cursor, EventCursor(rev, i))
		}
		if i++; i == n {
			return
		}
	}
	t.Fatalf("%d events read of %d: %v", i, n, r.Err())
}

// A task left SUBMITTED with no work queued (its edge died between the two
// steps) gets its work queued by a sweep, once, under the submission's own
// event id; a task whose work is queued, a task younger than the bound,
// and a task that is running are left alone.
func TestRequeueOrphansQueuesOnlyLostWork(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	create := func() (*schemas.TaskRecord, uint64) {
		rec := newRecord("echo")
		rec.Task.Status.Timestamp = &schemas.Timestamp{Time: time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)}
		rev, _, err := b.createTask(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		return rec, rev
	}
	orphan, orphanRev := create()
	queued, queuedRev := create()
	item := workItem(queued)
	item.TaskRevision = queuedRev
	if err := b.queueWork(ctx, item, PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	running, _ := create()
	if _, _, err := b.Apply(ctx, running.Task.ID, status(schemas.TaskStateWorking, nil)); err != nil {
		t.Fatal(err)
	}

	x := runIndex(t, b)
	requeue := func(after time.Duration) (int, error) {
		r, err := x.Sweep(ctx, SweepOptions{OrphanAfter: after})
		return r.Requeued, err
	}
	if n, err := requeue(time.Hour); err != nil || n != 0 {
		t.Fatalf("requeued (1h) %d, %v; want 0: nothing is that old", n, err)
	}
	if n, err := requeue(30 * time.Second); err != nil || n != 1 {
		t.Fatalf("requeued %d, %v; want 1", n, err)
	}
	if n, err := requeue(30 * time.Second); err != nil || n != 0 {
		t.Fatalf("requeued again %d, %v; want 0: the work is queued now", n, err)
	}
	wc, err := b.WorkConsumer(ctx, "echo")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*Work{}
	for len(got) < 2 {
		ws, err := wc.Fetch(ctx, 4, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) == 0 {
			break
		}
		for _, w := range ws {
			got[w.Item.TaskID] = w
			_ = w.Ack()
		}
	}
	w := got[orphan.Task.ID]
	if len(got) != 2 || w == nil || got[queued.Task.ID] == nil {
		t.Fatalf("work taken for %d tasks: %v; want the orphan's and the queued task's", len(got), got)
	}
	if w.Item.TaskRevision != orphanRev || w.EventID != schemas.WorkEventID(orphan.Task.ID, orphanRev) || w.Item.Message.MessageID != orphan.Task.History[0].MessageID {
		t.Fatalf("requeued work %+v (event %s), want revision %d and the task's message", w.Item, w.EventID, orphanRev)
	}
}

// A result too large for the record fails the task with the reason instead
// of being refused, even with a record near the limit, and the failure is
// what subscribers see; the task is finished, so the agent's later writes
// are absorbed.
func TestOversizedResultFailsTheTask(t *testing.T) {
	b := newTestBus(t, Config{TaskMaxValueSize: 64 << 10})
	ctx := testCtx(t)
	rec := newRecord("echo")
	rec.Task.History[0].Parts = []schemas.Part{schemas.TextPart(strings.Repeat("q", 60<<10))}
	createTask(t, b, rec)
	if _, _, err := b.Apply(ctx, rec.Task.ID, status(schemas.TaskStateWorking, nil)); err != nil {
		t.Fatal(err)
	}
	got, rev, err := b.applyEvents(ctx, rec.Task.ID, nil, 0, []TaskEvent{artifact("a", strings.Repeat("x", 70<<10)), status(schemas.TaskStateCompleted, nil)})
	if err != nil {
		t.Fatalf("an oversized result: %v", err)
	}
	if got.Task.Status.State != schemas.TaskStateFailed || !strings.Contains(got.Task.Status.Message.Text(), "more than the limit of 65536") || len(got.Task.Artifacts) != 0 {
		t.Fatalf("the task after an oversized result: %+v", got.Task.Status)
	}
	evs, err := b.ReadEvents(ctx, rec.Task.ID, 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	for {
		u, _ := nextEvent(evs)
		if u.Artifact != nil {
			t.Fatal("the oversized artifact was published")
		}
		if u.Rev == rev {
			if u.Status == nil || u.Status.Status.State != schemas.TaskStateFailed {
				t.Fatalf("published %+v", u)
			}
			break
		}
	}
	if _, _, err := b.Apply(ctx, rec.Task.ID, status(schemas.TaskStateCompleted, nil)); !errors.Is(err, schemas.ErrTaskTerminal) {
		t.Fatalf("a write after the failure: %v", err)
	}
}

// A stream of a task being created opens its reader from Submit's Follow
// without asking the events stream for the task's stored events (nothing
// of it can be stored yet), and still gets every event the worker then
// writes. A reader of an existing task does ask.
func TestReadNewTaskEventsAsksNothingAndMissesNothing(t *testing.T) {
	srv := startServer(t, "")
	b := connect(t, srv, Config{MemoryStorage: true})
	ctx := testCtx(t)
	if err := b.ensureAgent(ctx, "echo"); err != nil {
		t.Fatal(err)
	}
	// Every read of a stored event of the stream, seen from another
	// connection: b's requests reach it in the order b sent them.
	spy, err := connect(t, srv, Config{MemoryStorage: true}).nc.SubscribeSync(jsAPIPrefix + "STREAM.MSG.GET." + schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Unsubscribe()
	var r *EventReader
	rec, _, err := b.Submit(ctx, Submission{Agent: "echo", Message: agentMsg("hi")}, func(rec *schemas.TaskRecord, rev uint64) {
		var err error
		if r, err = b.ReadNewTaskEvents(ctx, rec.Task.ID, SnapshotCursor(rev), 16); err != nil {
			t.Error(err)
		}
	})
	if err != nil || r == nil {
		t.Fatal(err)
	}
	defer r.Close()
	existing := newRecord("echo")
	createTask(t, b, existing)
	other, err := b.ReadEvents(ctx, existing.Task.ID, 0, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if m, err := spy.NextMsg(10 * time.Second); err != nil || !strings.Contains(string(m.Data), existing.Task.ID) {
		t.Fatalf("the first read of stored events: %v (%v); want the existing task's reader's", m, err)
	}
	for _, ev := range []TaskEvent{status(schemas.TaskStateWorking, nil), artifact("a", "x"), status(schemas.TaskStateCompleted, nil)} {
		if _, _, err := b.Apply(ctx, rec.Task.ID, ev); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []string{"working", "artifact", "completed"} {
		u, ok := nextEvent(r)
		got := map[bool]string{true: "artifact"}[u.Artifact != nil]
		if u.Status != nil {
			got = map[schemas.TaskState]string{schemas.TaskStateWorking: "working", schemas.TaskStateCompleted: "completed"}[u.Status.Status.State]
		}
		if !ok || got != want {
			t.Fatalf("event %d: %+v (%v), want %s", i, u, ok, want)
		}
	}
}
