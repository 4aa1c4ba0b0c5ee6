package bus

import (
	"sync"

	"github.com/a2abus/a2abus/schemas"
)

// The task feed: every change of the tasks one owner may see, from the
// process's one TaskWatcher (no consumer of its own), summarised by the
// record's index entry (the header every write carries), never its
// messages. A feed holds the newest change of each task not yet taken,
// at most a bound of tasks; a feed whose client does not keep up past it
// ends with ErrReaderOverflow, and its client lists again.

// TaskChange is one write of a task record as a feed hands it on: the
// task's id, the write's revision and the record's index entry (state,
// status time, agent, owner, tenant, context).
type TaskChange struct {
	ID       string
	Revision uint64
	Entry    schemas.TaskIndexEntry
}

// TaskFeed follows the changes of the tasks of one owner; see
// TaskWatcher.Feed.
type TaskFeed struct {
	t        *TaskWatcher
	o        Owner
	anyAgent bool
	max      int

	mu      sync.Mutex
	pending map[string]TaskChange // the newest change of each task not taken
	order   []string              // pending's ids, in the order they came
	err     error
	ready   chan struct{} // holds a token while something is pending or the feed ended
}

// Feed starts following the changes of every task o may see (Owner.Sees:
// its tasks of o's agent, or of every agent with anyAgent), from now on.
// Changes wait for Take, the newest of each task only; once more than max
// tasks wait, the feed ends with ErrReaderOverflow. Close it when done.
func (t *TaskWatcher) Feed(o Owner, anyAgent bool, max int) *TaskFeed {
	if max < 1 {
		max = 1
	}
	f := &TaskFeed{t: t, o: o, anyAgent: anyAgent, max: max, pending: map[string]TaskChange{}, ready: make(chan struct{}, 1)}
	t.mu.Lock()
	if t.feeds == nil {
		t.feeds = map[*TaskFeed]struct{}{}
	}
	t.feeds[f] = struct{}{}
	t.mu.Unlock()
	return f
}

// Ready signals that Take has something: changes, or the feed's end.
func (f *TaskFeed) Ready() <-chan struct{} { return f.ready }

// Take returns the changes waiting, oldest first, and the error the feed
// ended with (ErrReaderOverflow), once it has.
func (f *TaskFeed) Take() ([]TaskChange, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]TaskChange, 0, len(f.order))
	for _, id := range f.order {
		out = append(out, f.pending[id])
	}
	clear(f.pending)
	f.order = f.order[:0]
	return out, f.err
}

// Close stops following.
func (f *TaskFeed) Close() {
	f.t.mu.Lock()
	delete(f.t.feeds, f)
	f.t.mu.Unlock()
}

// offer keeps a change the feed's owner may see.
func (f *TaskFeed) offer(c TaskChange) {
	if !f.o.Sees(&c.Entry, f.anyAgent) {
		return
	}
	f.mu.Lock()
	switch prev, seen := f.pending[c.ID]; {
	case f.err != nil:
	case seen && prev.Revision > c.Revision:
		// Never an older write over a newer one, whatever order they
		// were handed on in.
	case seen:
		f.pending[c.ID] = c
	case len(f.order) >= f.max:
		f.err = ErrReaderOverflow
		clear(f.pending)
		f.order = nil
	default:
		f.pending[c.ID] = c
		f.order = append(f.order, c.ID)
	}
	f.mu.Unlock()
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

// feedChange hands one stored write of task id to every feed, read from
// the index entry its header carries (from the record, for a write of an
// older writer).
func (t *TaskWatcher) feedChange(id string, m followMsg) {
	t.mu.Lock()
	if len(t.feeds) == 0 {
		t.mu.Unlock()
		return // the common case: no dashboard open
	}
	feeds := make([]*TaskFeed, 0, len(t.feeds))
	for f := range t.feeds {
		feeds = append(feeds, f)
	}
	t.mu.Unlock()
	var e schemas.TaskIndexEntry
	if h := m.Header.Get(schemas.HeaderTaskIndex); h == "" || readJSON([]byte(h), &e) != nil {
		rec, err := decodeRecord(m.Value)
		if err != nil {
			return
		}
		e = rec.IndexEntry()
	}
	c := TaskChange{ID: id, Revision: m.Seq, Entry: e}
	for _, f := range feeds {
		f.offer(c)
	}
}
