package bus

import (
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// A task feed carries the changes of the tasks its owner may see, as a
// read would decide: the owner's own (of every agent, when asked), all of
// the tenant's for an admin of it, none of another principal's or of
// another tenant's, and never a message-only exchange.
func TestTaskFeedSeesWhatItsOwnerMay(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	tw := runTaskWatcher(t, b)

	viewers := map[string]Owner{
		"alice":          {Agent: "echo", Principal: "alice", Tenant: "t1"},
		"alice-any":      {Agent: "echo", Principal: "alice", Tenant: "t1"},
		"bob":            {Agent: "echo", Principal: "bob", Tenant: "t1"},
		"admin-t1":       {Agent: "echo", Principal: "ops", Tenant: "t1", Admin: true},
		"admin-t1-other": {Agent: "other", Principal: "ops", Tenant: "t1", Admin: true},
		"admin-t2":       {Agent: "echo", Principal: "ops", Tenant: "t2", Admin: true},
	}
	feeds := map[string]*TaskFeed{}
	for name, o := range viewers {
		feeds[name] = tw.Feed(o, name == "alice-any", 64)
		defer feeds[name].Close()
	}
	create := func(agent, owner, tenant string, reply bool) string {
		t.Helper()
		rec := &schemas.TaskRecord{Task: schemas.Task{ID: schemas.NewID(), ContextID: "ctx-" + owner, Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted}},
			Agent: agent, Owner: owner, Tenant: tenant}
		if reply {
			rec.Reply = &schemas.Message{MessageID: "r", Role: schemas.RoleAgent, Parts: []schemas.Part{schemas.TextPart("hi")}}
		}
		rev, _, err := b.createTask(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.applyEvents(ctx, rec.Task.ID, rec, rev, []TaskEvent{
			{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}},
		}); err != nil {
			t.Fatal(err)
		}
		return rec.Task.ID
	}
	alice := create("echo", "alice", "t1", false)
	aliceOther := create("other", "alice", "t1", false)
	bob := create("echo", "bob", "t1", false)
	aliceT2 := create("echo", "alice", "t2", false)
	create("echo", "alice", "t1", true) // a message-only exchange: no one's
	// The watcher hands writes on in order: once a feed has the last
	// task, it has been offered everything before.
	last := create("echo", "ops", "t1", false)
	lastT2 := create("echo", "ops", "t2", false)
	lastOther := create("other", "ops", "t1", false)

	want := map[string][]string{
		"alice":          {alice},
		"alice-any":      {alice, aliceOther},
		"bob":            {bob},
		"admin-t1":       {alice, bob, last},
		"admin-t1-other": {aliceOther, lastOther},
		"admin-t2":       {aliceT2, lastT2},
	}
	// The watcher offers each write to every feed before the next one:
	// once admin-t1-other's feed has lastOther, the last write, every
	// feed has been offered everything.
	seen := map[string]map[string]schemas.TaskState{}
	newest := map[string]map[string]uint64{}
	take := func(name string) {
		t.Helper()
		cs, err := feeds[name].Take()
		if err != nil {
			t.Fatal(err)
		}
		if seen[name] == nil {
			seen[name], newest[name] = map[string]schemas.TaskState{}, map[string]uint64{}
		}
		for _, c := range cs {
			if c.Revision >= newest[name][c.ID] {
				seen[name][c.ID], newest[name][c.ID] = c.Entry.State, c.Revision
			}
		}
	}
	// Every feed has each task it may see at its newest write (WORKING):
	// waited for feed by feed, on each feed's own signal.
	deadline := time.After(10 * time.Second)
	for name, ids := range want {
		for {
			take(name)
			done := true
			for _, id := range ids {
				done = done && seen[name][id] == schemas.TaskStateWorking
			}
			if done {
				break
			}
			select {
			case <-feeds[name].Ready():
			case <-deadline:
				t.Fatalf("%s never carried the newest writes of %v: it has %v", name, ids, seen[name])
			}
		}
	}
	// The watcher offers each write to every feed before the next: once
	// the last writes are in, every feed has been offered everything.
	for name := range feeds {
		take(name)
	}
	for name, ids := range want {
		if len(seen[name]) != len(ids) {
			t.Errorf("%s saw %d tasks %v, want %v", name, len(seen[name]), seen[name], ids)
		}
		for _, id := range ids {
			if st, ok := seen[name][id]; !ok || st != schemas.TaskStateWorking {
				t.Errorf("%s: task %s seen %v (state %s), want WORKING, the newest of its writes", name, id, ok, st)
			}
		}
	}
}

// A feed whose reader does not take its changes ends with
// ErrReaderOverflow once more tasks wait than its bound; changes of one
// task replace each other and do not count twice.
func TestTaskFeedOverflows(t *testing.T) {
	tw := &TaskWatcher{}
	o := Owner{Agent: "a", Principal: "p"}
	f := tw.Feed(o, false, 2)
	defer f.Close()
	entry := schemas.TaskIndexEntry{Agent: "a", Owner: "p", State: schemas.TaskStateWorking}
	f.offer(TaskChange{ID: "1", Entry: entry})
	f.offer(TaskChange{ID: "1", Entry: entry})
	f.offer(TaskChange{ID: "2", Entry: entry})
	if cs, err := f.Take(); err != nil || len(cs) != 2 {
		t.Fatalf("two tasks within the bound: %v, %v", cs, err)
	}
	for _, id := range []string{"3", "4", "5"} {
		f.offer(TaskChange{ID: id, Entry: entry})
	}
	if cs, err := f.Take(); err != ErrReaderOverflow || len(cs) != 0 {
		t.Fatalf("past the bound: %v, %v; want ErrReaderOverflow", cs, err)
	}
}
