package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// runIndex runs a task index of b until the test ends, once it is ready.
func runIndex(t testing.TB, b *Bus) *TaskIndex {
	t.Helper()
	x := b.NewTaskIndex()
	startRun(t, testCtx(t), "task index", x.Run, x.Ready())
	return x
}

// listIDs pages through q (Limit default 3, to cross pages) and returns
// the ids in list order, checking that no page repeats a task.
func listIDs(t testing.TB, x *TaskIndex, q ListQuery) []string {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 3
	}
	var out []string
	seen := map[string]bool{}
	for {
		page, err := x.List(testCtx(t), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Tasks {
			if seen[r.Task.ID] {
				t.Fatalf("task %s on two pages", r.Task.ID)
			}
			seen[r.Task.ID] = true
			out = append(out, r.Task.ID)
		}
		if page.Next == nil {
			return out
		}
		q.After = page.Next
	}
}

func sweepFinished(t testing.TB, x *TaskIndex, keep Retention) (int, error) {
	t.Helper()
	r, err := x.Sweep(testCtx(t), SweepOptions{Keep: keep})
	return r.Deleted, err
}

// mkTask stores a task with the given owner, context, state and status
// time.
func mkTask(t testing.TB, b *Bus, agent, owner, contextID string, state schemas.TaskState, at time.Time) *schemas.TaskRecord {
	t.Helper()
	rec := newRecord(agent)
	rec.Owner, rec.Tenant = owner, "t1"
	rec.Task.ContextID = contextID
	rec.Task.Status = schemas.TaskStatus{State: state, Timestamp: &schemas.Timestamp{Time: at}}
	rec.CreatedAt = schemas.Timestamp{Time: at}
	createTask(t, b, rec)
	return rec
}

func ids(recs ...*schemas.TaskRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Task.ID
	}
	return out
}

// A listing is one agent's tasks of one owner (or, for an admin, of every
// owner of its tenant), newest status first, ties by id descending,
// filtered by context, state and status time, with totals that count every
// match; an update moves a task, and a direct reply never lists.
func TestIndexListsFiltersAndOrder(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	x := runIndex(t, b)
	alice := Owner{Agent: "alpha", Principal: "alice", Tenant: "t1"}
	if page, err := x.List(ctx, ListQuery{Owner: alice, Limit: 10}); err != nil || len(page.Tasks) != 0 || page.Total != 0 || page.Next != nil {
		t.Fatalf("an empty store: %+v, %v", page, err)
	}
	base := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ctxA, ctxB := schemas.NewID(), schemas.NewID()
	t1 := mkTask(t, b, "alpha", "alice", ctxA, schemas.TaskStateSubmitted, base.Add(1*time.Second))
	t2 := mkTask(t, b, "alpha", "alice", ctxA, schemas.TaskStateCompleted, base.Add(2*time.Second))
	t3 := mkTask(t, b, "alpha", "alice", ctxB, schemas.TaskStateWorking, base.Add(3*time.Second))
	t4 := mkTask(t, b, "alpha", "alice", ctxA, schemas.TaskStateCompleted, base.Add(4*time.Second))
	t5 := mkTask(t, b, "alpha", "alice", ctxB, schemas.TaskStateFailed, base.Add(5*time.Second))
	t6 := mkTask(t, b, "alpha", "alice", ctxB, schemas.TaskStateFailed, base.Add(5*time.Second))
	hi, lo := t5, t6
	if lo.Task.ID > hi.Task.ID {
		hi, lo = lo, hi
	}
	// Others' tasks, and alice's at another agent or in another tenant.
	bob := mkTask(t, b, "alpha", "bob", ctxA, schemas.TaskStateCompleted, base.Add(6*time.Second))
	mkTask(t, b, "beta", "alice", ctxA, schemas.TaskStateCompleted, base.Add(7*time.Second))
	other := newRecord("alpha")
	other.Owner, other.Tenant = "alice", "t2"
	createTask(t, b, other)
	// A task without a status time sorts by its creation time.
	t7 := newRecord("alpha")
	t7.Owner, t7.Tenant, t7.Task.ContextID = "alice", "t1", ctxB
	t7.Task.Status.Timestamp = nil
	t7.CreatedAt = schemas.Timestamp{Time: base.Add(2500 * time.Millisecond)}
	createTask(t, b, t7)
	r := mkTask(t, b, "alpha", "alice", ctxA, schemas.TaskStateSubmitted, base.Add(9*time.Second))
	if _, _, err := b.Apply(ctx, r.Task.ID, TaskEvent{Reply: agentMsg("direct")}); err != nil {
		t.Fatal(err)
	}
	admin := Owner{Agent: "alpha", Principal: "ops", Tenant: "t1", Admin: true}
	for _, tc := range []struct {
		name string
		q    ListQuery
		want []string
	}{
		{"owner", ListQuery{Owner: alice}, ids(hi, lo, t4, t3, t7, t2, t1)},
		{"admin", ListQuery{Owner: admin}, ids(bob, hi, lo, t4, t3, t7, t2, t1)},
		{"context", ListQuery{Owner: alice, ContextID: ctxA}, ids(t4, t2, t1)},
		{"admin context", ListQuery{Owner: admin, ContextID: ctxA}, ids(bob, t4, t2, t1)},
		{"state", ListQuery{Owner: alice, State: schemas.TaskStateCompleted}, ids(t4, t2)},
		{"status after (inclusive)", ListQuery{Owner: alice, StatusAfter: base.Add(3 * time.Second)}, ids(hi, lo, t4, t3)},
		{"combined", ListQuery{Owner: alice, ContextID: ctxA, State: schemas.TaskStateCompleted, StatusAfter: base.Add(3 * time.Second)}, ids(t4)},
		{"far future", ListQuery{Owner: alice, StatusAfter: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)}, nil},
		{"another tenant", ListQuery{Owner: Owner{Agent: "alpha", Principal: "alice", Tenant: "t2"}}, ids(other)},
		{"nobody's", ListQuery{Owner: Owner{Agent: "alpha", Principal: "carol", Tenant: "t1"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := listIDs(t, x, tc.q)
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
			tc.q.Limit = 100
			page, err := x.List(ctx, tc.q)
			if err != nil || page.Total != len(tc.want) {
				t.Errorf("total %d (%v), want %d", page.Total, err, len(tc.want))
			}
		})
	}
	// t1 now WORKING, stamped with the present (before the 2030 base).
	if _, _, err := b.Apply(ctx, t1.Task.ID, status(schemas.TaskStateWorking, nil)); err != nil {
		t.Fatal(err)
	}
	if got := listIDs(t, x, ListQuery{Owner: alice, State: schemas.TaskStateWorking}); strings.Join(got, ",") != strings.Join(ids(t3, t1), ",") {
		t.Errorf("working after an update = %v, want %v", got, ids(t3, t1))
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := x.List(canceled, ListQuery{Owner: alice, Limit: 1}); err == nil {
		t.Error("a listing with a canceled context succeeded")
	}
}

// A cursor is a position, not an offset: tasks stored between two pages
// (newer) neither repeat nor hide an older task.
func TestIndexPagingStableWhileTasksAreAdded(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	x := runIndex(t, b)
	o := Owner{Agent: "echo", Principal: "alice", Tenant: "t1"}
	base := time.Now().Add(-time.Hour)
	var old []string
	for i := range 9 {
		old = append([]string{mkTask(t, b, "echo", "alice", "c", schemas.TaskStateCompleted, base.Add(time.Duration(i)*time.Second)).Task.ID}, old...)
	}
	q := ListQuery{Owner: o, Limit: 4}
	var got []string
	for {
		page, err := x.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Tasks {
			got = append(got, r.Task.ID)
		}
		mkTask(t, b, "echo", "alice", "c", schemas.TaskStateCompleted, time.Now())
		if page.Next == nil {
			break
		}
		q.After = page.Next
	}
	if strings.Join(got, ",") != strings.Join(old, ",") {
		t.Fatalf("pages while adding:\n got %v\nwant %v", got, old)
	}
}

// A page reads the index and the page's records, nothing else: listing 10
// of 600 stored tasks sends a bounded number of bus requests, whatever the
// store holds.
func TestIndexListReadsOnlyThePage(t *testing.T) {
	b := newTestBus(t, Config{NoDispatch: true}) // counts what a listing sends
	ctx := testCtx(t)
	x := runIndex(t, b)
	o := Owner{Agent: "echo", Principal: "alice", Tenant: "t1"}
	for i := range 600 {
		owner := "alice"
		if i%3 != 0 {
			owner = "bob"
		}
		mkTask(t, b, "echo", owner, fmt.Sprint("c", i%7), schemas.TaskStateCompleted, time.Now())
	}
	if _, err := x.List(ctx, ListQuery{Owner: o, Limit: 10}); err != nil { // caught up
		t.Fatal(err)
	}
	before := b.nc.Stats().OutMsgs
	page, err := x.List(ctx, ListQuery{Owner: o, Limit: 10})
	if err != nil || len(page.Tasks) != 10 || page.Total != 200 {
		t.Fatalf("page of %d, total %d, %v", len(page.Tasks), page.Total, err)
	}
	// One stream info for the catch-up, one get per task, and at most a
	// pull request or two of the index's own follower.
	if sent := b.nc.Stats().OutMsgs - before; sent > 10+4 {
		t.Fatalf("a page of 10 sent %d bus requests", sent)
	}
}

// A write without the index header (an older writer) is indexed from its
// record.
func TestIndexReadsRecordsWithoutTheHeader(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := newRecord("echo")
	rec.Owner = "alice"
	val, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.tasks.Create(ctx, rec.Task.ID, val); err != nil {
		t.Fatal(err)
	}
	x := runIndex(t, b)
	if got := listIDs(t, x, ListQuery{Owner: Owner{Agent: "echo", Principal: "alice"}}); len(got) != 1 || got[0] != rec.Task.ID {
		t.Fatalf("listed %v", got)
	}
}

// Retention deletes the oldest finished first and sends one delete per
// task it removes, reading no record; unfinished tasks stay. One process
// sweeps at a time: another's sweep does nothing while the lease is held.
func TestIndexSweepDeletesOldestFinishedOnly(t *testing.T) {
	srv := startServer(t, "")
	b := connect(t, srv, Config{MemoryStorage: true, NoDispatch: true}) // counts what a sweep sends
	ctx := testCtx(t)
	x := runIndex(t, b)
	base := time.Now().Add(-time.Hour)
	var finished, open []string
	for i := range 60 {
		state := schemas.TaskStateCompleted
		if i%4 == 0 {
			state = schemas.TaskStateInputRequired
		}
		rec := mkTask(t, b, "echo", "alice", "c", state, base.Add(time.Duration(i)*time.Second))
		if state.Terminal() {
			finished = append(finished, rec.Task.ID)
		} else {
			open = append(open, rec.Task.ID)
		}
	}
	if _, err := x.List(ctx, ListQuery{Owner: Owner{Agent: "echo"}, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	before := b.nc.Stats().OutMsgs
	r, err := x.Sweep(ctx, SweepOptions{Keep: Retention{MaxCount: 20}})
	if err != nil || r.Deleted != len(finished)-20 {
		t.Fatalf("deleted %d (%v), want %d", r.Deleted, err, len(finished)-20)
	}
	if sent := b.nc.Stats().OutMsgs - before; sent > uint64(r.Deleted)+6 {
		t.Fatalf("deleting %d sent %d bus requests", r.Deleted, sent)
	}
	for i, id := range finished {
		_, _, err := b.GetTask(ctx, id)
		if kept := i >= len(finished)-20; kept != (err == nil) {
			t.Fatalf("finished task %d of %d: kept=%v, err %v", i, len(finished), kept, err)
		}
	}
	for _, id := range open {
		if _, _, err := b.GetTask(ctx, id); err != nil {
			t.Fatalf("an unfinished task was deleted: %v", err)
		}
	}
	// Another process, while this one holds the lease, does nothing.
	other := runIndex(t, connect(t, srv, Config{MemoryStorage: true}))
	for range 5 {
		mkTask(t, b, "echo", "alice", "c", schemas.TaskStateCompleted, time.Now())
	}
	if r, err := other.Sweep(ctx, SweepOptions{Keep: Retention{MaxCount: 20}}); err != nil || r.Deleted != 0 {
		t.Fatalf("a second sweeper deleted %d (%v)", r.Deleted, err)
	}
	if r, err := x.Sweep(ctx, SweepOptions{Keep: Retention{MaxCount: 20}}); err != nil || r.Deleted != 5 {
		t.Fatalf("the lease holder deleted %d (%v), want 5", r.Deleted, err)
	}
	eventually(t, "the index to drop the deleted tasks", func() bool { return x.Len() == 20+len(open) })
}

// The sweep lease does not outlive a clean stop (ReleaseSweep hands it on
// at once), and a process restarted under the same name holds it again
// at its first sweep: after a restart the sweep went on only once the
// lease's TTL (90s) ran out.
func TestSweepLeaseHandedOnAtStopAndRestart(t *testing.T) {
	srv := startServer(t, "")
	ctx := testCtx(t)
	keep := SweepOptions{Keep: Retention{MaxCount: 1}}
	first := connect(t, srv, Config{MemoryStorage: true, Name: "edge-a"})
	x := runIndex(t, first)
	mkTask(t, first, "echo", "alice", "c", schemas.TaskStateCompleted, time.Now().Add(-time.Minute))
	mkTask(t, first, "echo", "alice", "c", schemas.TaskStateCompleted, time.Now())
	if r, err := x.Sweep(ctx, keep); err != nil || r.Deleted != 1 {
		t.Fatalf("the first sweeper deleted %d (%v), want 1", r.Deleted, err)
	}
	// The holder dies without releasing: the same name takes it back.
	_ = first.Close()
	again := connect(t, srv, Config{MemoryStorage: true, Name: "edge-a"})
	y := runIndex(t, again)
	mkTask(t, again, "echo", "alice", "c", schemas.TaskStateCompleted, time.Now())
	if r, err := y.Sweep(ctx, keep); err != nil || r.Deleted != 1 {
		t.Fatalf("the restarted holder deleted %d (%v), want 1", r.Deleted, err)
	}
	// Released on a clean stop: another process sweeps at once.
	if err := y.ReleaseSweep(ctx); err != nil {
		t.Fatal(err)
	}
	other := runIndex(t, connect(t, srv, Config{MemoryStorage: true, Name: "edge-b"}))
	mkTask(t, again, "echo", "alice", "c", schemas.TaskStateCompleted, time.Now())
	eventually(t, "the other index to see the tasks", func() bool { return other.Len() == 2 })
	if r, err := other.Sweep(ctx, keep); err != nil || r.Deleted != 1 {
		t.Fatalf("after the release, another process deleted %d (%v), want 1", r.Deleted, err)
	}
	// A release by a process that does not hold the lease leaves it.
	if err := y.ReleaseSweep(ctx); err != nil {
		t.Fatal(err)
	}
	if held, err := other.b.holdLease(ctx, "sweep"); err != nil || !held {
		t.Fatalf("the holder lost the lease to another's release (%v, %v)", held, err)
	}
}

// A task that has waited for input longer than IdleAfter is canceled with
// the reason, and the change is published; a younger one and a task at
// work stay as they are.
func TestIndexSweepCancelsIdleTasks(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	x := runIndex(t, b)
	old := mkTask(t, b, "echo", "alice", "c", schemas.TaskStateInputRequired, time.Now().Add(-2*time.Hour))
	young := mkTask(t, b, "echo", "alice", "c", schemas.TaskStateAuthRequired, time.Now().Add(-time.Minute))
	busy := mkTask(t, b, "echo", "alice", "c", schemas.TaskStateWorking, time.Now().Add(-2*time.Hour))
	r, err := x.Sweep(ctx, SweepOptions{IdleAfter: time.Hour})
	if err != nil || r.Expired != 1 {
		t.Fatalf("expired %d (%v), want 1", r.Expired, err)
	}
	got, rev, err := b.GetTask(ctx, old.Task.ID)
	if err != nil || got.Task.Status.State != schemas.TaskStateCanceled || !strings.Contains(got.Task.Status.Message.Text(), "waited 1h0m0s for input") {
		t.Fatalf("the idle task: %+v %v", got.Task.Status, err)
	}
	evs, err := b.ReadEvents(ctx, old.Task.ID, 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	select {
	case us := <-evs.C():
		if u := us[0]; u.Status == nil || u.Status.Status.State != schemas.TaskStateCanceled || u.Rev != rev {
			t.Fatalf("published %+v", u)
		}
	case <-ctx.Done():
		t.Fatal("the cancel was not published")
	}
	for _, rec := range []*schemas.TaskRecord{young, busy} {
		if got, _, err := b.GetTask(ctx, rec.Task.ID); err != nil || got.Task.Status.State != rec.Task.Status.State {
			t.Fatalf("task in %s became %+v (%v)", rec.Task.Status.State, got.Task.Status, err)
		}
	}
	if r, err := x.Sweep(ctx, SweepOptions{IdleAfter: time.Hour}); err != nil || r.Expired != 0 {
		t.Fatalf("a second sweep expired %d (%v)", r.Expired, err)
	}
}

// A sweep's purges are pipelined: more than a window of them all land,
// each only if the task is still at the revision the index saw, and a
// task written since is kept.
func TestPurgeTasksPipelinedAndOnlyUnchanged(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	var entries []*indexEntry
	for range 2*purgeWindow + 10 {
		rec := newRecord("echo")
		rev := createTask(t, b, rec)
		entries = append(entries, &indexEntry{id: rec.Task.ID, rev: rev})
	}
	changed := entries[purgeWindow+3]
	if _, _, err := b.update(ctx, changed.id, nil, 0, func(r *schemas.TaskRecord) error {
		r.Task.Metadata = map[string]any{"changed": true}
		return nil
	}, 0); err != nil {
		t.Fatal(err)
	}
	if got := b.purgeTasks(ctx, entries); got != len(entries)-1 {
		t.Fatalf("purged %d of %d, want all but the changed one", got, len(entries))
	}
	for _, e := range entries {
		_, _, err := b.GetTask(ctx, e.id)
		if kept := e == changed; kept != (err == nil) {
			t.Fatalf("task %s: kept=%v, err %v", e.id, kept, err)
		}
	}
}

// A deleted task's events go too: the sweep after a task is deleted — by a
// sweep or by its TTL — rolls its event subject up into a marker that
// expires, so the events stream ends up with no message of the task (and
// the server with no state for its subject), and deletes its push configs;
// readers of the stream skip the marker; a stored task's events stay.
func TestSweepDropsEventsOfDeletedTasks(t *testing.T) {
	ctx := testCtx(t)
	b := newTestBus(t, Config{TaskTTL: time.Second, EventsMaxAge: time.Hour})
	x := runIndex(t, b)
	events, err := b.js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	stored := func(id string) uint64 {
		info, err := events.Info(ctx, jetstream.WithSubjectFilter(schemas.SubjectEvents(id)))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects[schemas.SubjectEvents(id)]
	}
	run := func(rec *schemas.TaskRecord, final schemas.TaskState) {
		for _, ev := range []TaskEvent{status(schemas.TaskStateWorking, nil), artifact("a", "x"), status(final, nil)} {
			if _, _, err := b.Apply(ctx, rec.Task.ID, ev); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Two finished tasks past the bound of one, and one waiting for input
	// (no TTL: it is not finished), which a reader follows.
	var done []*schemas.TaskRecord
	for i := range 3 {
		rec := newRecord("echo")
		createTask(t, b, rec)
		if i == 0 { // one with a push config, which goes with it
			if _, err := b.CreatePushConfig(ctx, Owner{Agent: "echo"}, schemas.TaskPushNotificationConfig{TaskID: rec.Task.ID, URL: "https://hooks.example/a"}, "1.0"); err != nil {
				t.Fatal(err)
			}
		}
		run(rec, schemas.TaskStateCompleted)
		done = append(done, rec)
	}
	open := newRecord("echo")
	createTask(t, b, open)
	run(open, schemas.TaskStateInputRequired)
	r, err := b.ReadEvents(ctx, open.Task.ID, 0, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for n := 0; n < 3; {
		us, ok := <-r.C()
		if !ok {
			t.Fatalf("reader ended: %v", r.Err())
		}
		n += len(us)
	}
	for _, rec := range append(done, open) {
		if n := stored(rec.Task.ID); n != 3 {
			t.Fatalf("task %s has %d stored events, want 3", rec.Task.ID, n)
		}
	}

	// The first sweep deletes two finished tasks; the third expires by
	// its TTL. The next sweep drops the events of all three.
	sw, err := x.Sweep(ctx, SweepOptions{Keep: Retention{MaxCount: 1}})
	if err != nil || sw.Deleted != 2 {
		t.Fatalf("sweep deleted %d (%v), want 2", sw.Deleted, err)
	}
	eventually(t, "the index to see the deletions and the expiry", func() bool { return x.Len() == 1 })
	// A sweep that fails before it starts (its context ended) keeps what
	// it has seen deleted for the next one.
	ended, end := context.WithCancel(ctx)
	end()
	if _, err := x.Sweep(ended, SweepOptions{Keep: Retention{MaxCount: 1}}); err == nil {
		t.Fatal("a sweep with an ended context succeeded")
	}
	sw, err = x.Sweep(ctx, SweepOptions{Keep: Retention{MaxCount: 1}})
	if err != nil || sw.EventsDropped != 3 {
		t.Fatalf("sweep dropped the events of %d tasks (%v), want 3", sw.EventsDropped, err)
	}
	for _, rec := range done {
		eventually(t, "the deleted task's subject to empty", func() bool { return stored(rec.Task.ID) == 0 })
	}
	if _, rev, err := b.readPushConfigs(ctx, done[0].Task.ID); err != nil || rev != 0 {
		t.Fatalf("the deleted task's push configs are still stored (revision %d, %v)", rev, err)
	}
	if n := stored(open.Task.ID); n != 3 {
		t.Fatalf("the stored task has %d events left, want 3", n)
	}
	// The open task's reader saw none of it, and still follows its task.
	if _, _, err := b.Apply(ctx, open.Task.ID, status(schemas.TaskStateCanceled, nil)); err != nil {
		t.Fatal(err)
	}
	if u, ok := nextEvent(r); !ok || u.Status == nil || u.Status.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("reader's next event %+v (%v), want the cancel", u, ok)
	}
	// A reader that starts on a deleted task's subject while its marker
	// is stored reads no event from it.
	if us, err := decodeUpdates(&nats.Msg{Header: nats.Header{schemas.HeaderTaskDeleted: {"true"}}}); err != nil || len(us) != 0 {
		t.Fatalf("the marker read as %v, %v", us, err)
	}
}

// An index that carries the task watcher (as an edge's does) is the
// process's one consumer of the task bucket: it catches up on headers,
// then follows with values, which the watcher's waits answer from; a
// change it delivered without its value reaches a wait as a prompt to
// read the record again, not as nothing.
func TestIndexCarriesTheWatcher(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	before := mkTask(t, b, "echo", "alice", "c1", schemas.TaskStateWorking, time.Now())
	x := b.NewTaskIndex()
	tw := b.NewTaskWatcher()
	tw.RecheckEvery = time.Hour // only what the follower hands on counts
	var tapMu sync.Mutex
	var taps []followMsg
	tw.tap = func(m followMsg) {
		tapMu.Lock()
		taps = append(taps, m)
		tapMu.Unlock()
	}
	x.Carry(tw)
	startRun(t, ctx, "task index", x.Run, x.Ready())
	startRun(t, ctx, "task watcher", tw.Run, tw.Ready())
	if !tw.Following() {
		t.Fatal("the carried watcher is not following once ready")
	}
	// The catch-up was headers only, as the index alone asks.
	tapMu.Lock()
	if len(taps) != 1 || !taps[0].Initial || len(taps[0].Value) != 0 || taps[0].Size == 0 {
		t.Fatalf("catch-up handed the watcher %+v, want the one stored task's headers", taps)
	}
	tapMu.Unlock()
	// One consumer of the bucket serves both, and it delivers values.
	cons, err := b.js.Consumer(ctx, kvStream(schemas.BucketTasks), x.f.consumerName())
	if err != nil {
		t.Fatal(err)
	}
	if cons.CachedInfo().Config.HeadersOnly {
		t.Fatal("the follower still asks for headers only after catching up")
	}

	// A change after the catch-up: the wait answers with the delivered
	// value, and the index lists the new state.
	w := tw.Watch(before.Task.ID, before)
	defer w.Close()
	if _, _, err := b.applyEvents(ctx, before.Task.ID, nil, 0, []TaskEvent{status(schemas.TaskStateCompleted, agentMsg("done"))}); err != nil {
		t.Fatal(err)
	}
	rec, raw, err := w.UntilStateRaw(ctx, schemas.TaskState.Terminal)
	if err != nil || rec != nil || raw.Val == nil {
		t.Fatalf("the wait did not end on the delivered value: %v %q %v", rec, raw.Val, err)
	}
	stored, rev, err := b.GetTask(ctx, before.Task.ID)
	if err != nil || stored.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("stored: %+v %v", stored, err)
	}
	tapMu.Lock()
	last := taps[len(taps)-1]
	tapMu.Unlock()
	if last.Initial || last.Seq != rev || len(last.Value) == 0 {
		t.Fatalf("the change reached the watcher as %+v, want its value at revision %d", last, rev)
	}
	page, err := x.List(ctx, ListQuery{Owner: Owner{Agent: "echo", Principal: "alice", Tenant: "t1"}, Limit: 10})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("the index lists %+v (%v)", page.Tasks, err)
	}

	// A change handed on without its value (as during a catch-up) wakes
	// the wait, which reads the record again. A watcher of its own, fed
	// by hand, so no follower hands the value on first.
	hand := b.NewTaskWatcher()
	hand.RecheckEvery = time.Hour
	other := mkTask(t, b, "echo", "alice", "c2", schemas.TaskStateWorking, time.Now())
	w2 := hand.Watch(other.Task.ID, other)
	defer w2.Close()
	_, rev2, err := b.applyEvents(ctx, other.Task.ID, nil, 0, []TaskEvent{status(schemas.TaskStateCompleted, agentMsg("done"))})
	if err != nil {
		t.Fatal(err)
	}
	hand.handle(followMsg{Subject: kvPrefix(schemas.BucketTasks) + other.Task.ID, Seq: rev2, Op: jetstream.KeyValuePut, Size: 1, Initial: true})
	got, err := w2.UntilState(ctx, schemas.TaskState.Terminal)
	if err != nil || got.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("a change without its value did not end the wait: %+v %v", got, err)
	}
}
