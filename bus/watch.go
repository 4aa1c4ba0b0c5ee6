package bus

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// stopWatcher stops a KV watcher and drains what it still delivers. The
// watcher's callback blocks sending into its Updates channel; stopped but
// not drained, it would block forever, and its subscription would buffer
// every later change of the bucket (a leak that grows with traffic). The
// channel closes once the subscription is gone, which ends the drain.
func stopWatcher(w jetstream.KeyWatcher) {
	_ = w.Stop()
	go func() {
		for range w.Updates() {
		}
	}()
}

// TaskWatcher lets many requests of one process wait for task changes
// through a single follower of the task bucket (one consumer per process,
// not one per request), fanned out in memory by task id. The follower
// replaces its consumer within a second or two when a node dies or the
// connection moves, and resumes right after the last change it handed on,
// so no change is lost. A waiter also re-reads the record from KV when it
// registers (so a change that happened before is seen) and every
// RecheckEvery (belt and braces).
type TaskWatcher struct {
	b            *Bus
	f            *follower
	mu           sync.Mutex
	waiters      map[string]map[chan watched]struct{}
	feeds        map[*TaskFeed]struct{} // see Feed (feed.go)
	ready        chan struct{}
	RecheckEvery time.Duration
	// tap, when set (tests), sees every message the follower hands on.
	tap func(followMsg)
	// carried is set when a task index's follower hands the watcher its
	// messages (TaskIndex.Carry): Run then starts no follower of its own.
	carried bool
}

// NewTaskWatcher returns a watcher; call Run to start it.
func (b *Bus) NewTaskWatcher() *TaskWatcher {
	t := &TaskWatcher{
		b:       b,
		f:       b.newFollower("tasks", kvStream(schemas.BucketTasks), jetstream.DeliverNewPolicy, kvPrefix(schemas.BucketTasks)+">"),
		waiters: map[string]map[chan watched]struct{}{}, ready: make(chan struct{}), RecheckEvery: 5 * time.Second,
	}
	b.handover.addWatcher(t)
	return t
}

// hasWaiters reports whether a wait follows the task.
func (t *TaskWatcher) hasWaiters(taskID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.waiters[taskID]) > 0
}

// Ready is closed once the watcher is consuming updates.
func (t *TaskWatcher) Ready() <-chan struct{} { return t.ready }

// Following reports whether the watcher currently has a live consumer: it
// is false from when the consumer is lost (a node died, the connection
// moved) until a replacement consumes. While it is false, waiters hear of
// changes only through their rechecks; readiness should follow it.
func (t *TaskWatcher) Following() bool { return t.f.Following() }

// NotFollowingFor is how long ago the live consumer was lost: 0 while
// following. Readiness allows a moment of it (every reconnect replaces the
// consumer) but not a lost node.
func (t *TaskWatcher) NotFollowingFor() time.Duration { return t.f.NotFollowingFor() }

// Run consumes task updates until ctx ends; it returns nil then. It keeps
// trying while the bus is unreachable. A watcher a task index carries
// (TaskIndex.Carry) is fed by the index's Run; its Run only waits for ctx.
func (t *TaskWatcher) Run(ctx context.Context) error {
	if t.carried {
		<-ctx.Done()
		return nil
	}
	return t.f.run(ctx, t.handle, func() { close(t.ready) })
}

// handle takes one message of the task bucket. A value the follower
// delivered without its data (a carrying index's catch-up, see
// follower.valuesOnceCaughtUp) reaches the task's waits as a change with
// no value: each reads the record again (see until).
func (t *TaskWatcher) handle(m followMsg) {
	if t.tap != nil {
		t.tap(m)
	}
	if m.Op == jetstream.KeyValuePut {
		id := strings.TrimPrefix(m.Subject, kvPrefix(schemas.BucketTasks))
		t.notify(id, watched{val: m.Value, rev: m.Seq})
		t.feedChange(id, m)
	}
}

// watched is one stored value of a task record as the follower handed it
// on, with its revision.
type watched struct {
	val []byte
	rev uint64
}

// notify hands the new value to every waiter of the task. Each waiter holds
// at most one pending value, always the newest: updates arrive in revision
// order, so an older pending value is replaced, never queued.
func (t *TaskWatcher) notify(taskID string, val watched) {
	t.mu.Lock()
	for ch := range t.waiters[taskID] {
		select {
		case ch <- val:
		default:
			select {
			case <-ch:
			default:
			}
			ch <- val
		}
	}
	t.mu.Unlock()
}

func (t *TaskWatcher) register(taskID string) chan watched {
	ch := make(chan watched, 1)
	t.mu.Lock()
	m := t.waiters[taskID]
	if m == nil {
		m = map[chan watched]struct{}{}
		t.waiters[taskID] = m
	}
	m[ch] = struct{}{}
	t.mu.Unlock()
	return ch
}

func (t *TaskWatcher) unregister(taskID string, ch chan watched) {
	t.mu.Lock()
	if m := t.waiters[taskID]; m != nil {
		delete(m, ch)
		if len(m) == 0 {
			delete(t.waiters, taskID)
		}
	}
	t.mu.Unlock()
}

// Wait returns the task record as soon as done(record) holds. If ctx ends
// first it returns the latest record it read together with ctx.Err().
func (t *TaskWatcher) Wait(ctx context.Context, taskID string, done func(*schemas.TaskRecord) bool) (*schemas.TaskRecord, error) {
	w := t.Watch(taskID, nil)
	defer w.Close()
	return w.Until(ctx, done)
}

// Watch starts following one task before the caller does what will change
// it (queue its work), so no change can slip between the two. current is the
// record the caller holds, if any; with nil, Until reads it from KV first.
// Close the returned TaskWait when done.
func (t *TaskWatcher) Watch(taskID string, current *schemas.TaskRecord) *TaskWait {
	return &TaskWait{t: t, id: taskID, ch: t.register(taskID), last: current}
}

// TaskWait follows one task; see TaskWatcher.Watch.
type TaskWait struct {
	t    *TaskWatcher
	id   string
	ch   chan watched
	last *schemas.TaskRecord
}

// Close stops following the task.
func (w *TaskWait) Close() { w.t.unregister(w.id, w.ch) }

// Until returns the task record as soon as done(record) holds. If ctx ends
// first it returns the latest record seen together with ctx.Err().
func (w *TaskWait) Until(ctx context.Context, done func(*schemas.TaskRecord) bool) (*schemas.TaskRecord, error) {
	rec, _, err := w.until(ctx, nil, done, false)
	return rec, err
}

// UntilState is Until for a condition on the task's state alone. It is the
// cheap way to wait: updates whose state does not satisfy done are not
// decoded at all (a blocking SendMessage sees several updates per task and
// only needs the last).
func (w *TaskWait) UntilState(ctx context.Context, done func(schemas.TaskState) bool) (*schemas.TaskRecord, error) {
	rec, _, err := w.until(ctx, done, func(r *schemas.TaskRecord) bool { return done(r.Task.Status.State) }, false)
	return rec, err
}

// UntilStateRaw is UntilState for a caller that may not need the record
// decoded: when the update that satisfies done came from the watch, it
// returns that stored record (raw) and a nil record, and the caller
// decodes it only if it must (see StoredRecord.Task). Otherwise, and with
// every error, it returns what UntilState returns and a zero raw.
func (w *TaskWait) UntilStateRaw(ctx context.Context, done func(schemas.TaskState) bool) (*schemas.TaskRecord, StoredRecord, error) {
	return w.until(ctx, done, func(r *schemas.TaskRecord) bool { return done(r.Task.Status.State) }, true)
}

// StoredRecord is a task record as stored, not decoded for the caller.
type StoredRecord struct {
	Val []byte
	// wellFormed is set when the bus decoded Val: a task that waits for
	// its caller is held decoded for the caller's next message (see
	// waitingRecords), and the decode proves Val is JSON, which RawTask
	// would otherwise check byte by byte, a cost that grows with the
	// conversation. Only the bus sets it: it waives a check.
	wellFormed bool
}

// Task is RawTask of the record, not checked again when the bus decoded it.
func (s StoredRecord) Task() ([]byte, bool) { return rawTask(s.Val, !s.wellFormed) }

// until is the one wait behind Until, UntilState and UntilStateRaw.
// With lazy, a watched update whose state satisfies state is returned
// undecoded.
func (w *TaskWait) until(ctx context.Context, state func(schemas.TaskState) bool, done func(*schemas.TaskRecord) bool, lazy bool) (*schemas.TaskRecord, StoredRecord, error) {
	tick := time.NewTicker(w.t.RecheckEvery)
	defer tick.Stop()
	read := w.last == nil // read KV now if the caller holds nothing
	if !read && done(w.last) {
		return w.last, StoredRecord{}, nil
	}
	// skipped is the newest value not decoded because its state did not
	// satisfy the condition; it is decoded only if the wait ends without a
	// newer one, so the caller still gets the latest record seen.
	var skipped []byte
	latest := func() *schemas.TaskRecord {
		if skipped != nil {
			if rec, err := decodeRecord(skipped); err == nil {
				return rec
			}
		}
		return w.last
	}
	for {
		if read {
			rec, _, err := w.t.b.GetTask(ctx, w.id)
			if err != nil {
				if ctx.Err() != nil && latest() != nil {
					return latest(), StoredRecord{}, ctx.Err()
				}
				return nil, StoredRecord{}, err
			}
			w.last, skipped = rec, nil
			if done(rec) {
				return rec, StoredRecord{}, nil
			}
		}
		select {
		case <-ctx.Done():
			return latest(), StoredRecord{}, ctx.Err()
		case got := <-w.ch:
			val := got.val
			if state != nil {
				st, ok := peekState(val)
				if ok && !state(st) {
					skipped, read = val, false
					continue
				}
				if ok && lazy {
					if st.Interrupted() {
						if w.t.b.waiting.claim(w.id, got) {
							// Its writer in this process held it
							// (holdSettled): the bytes are its encoding.
							return nil, StoredRecord{Val: val, wellFormed: true}, nil
						}
						if rec, err := decodeRecord(val); err == nil {
							w.t.b.waiting.put(w.id, heldDecoded(rec, got))
							return nil, StoredRecord{Val: val, wellFormed: true}, nil
						}
					}
					return nil, StoredRecord{Val: val}, nil
				}
			}
			rec := w.t.b.waiting.copyClaimed(w.id, got)
			if rec == nil {
				var err error
				if rec, err = decodeRecord(val); err != nil {
					read = true
					continue
				}
			}
			w.last, skipped, read = rec, nil, false
			if done(rec) {
				if rec.Task.Status.State.Interrupted() && !w.t.b.waiting.claim(w.id, got) {
					// The caller has this record to answer with: the
					// bytes are held, to be decoded for the next message
					// (unless its writer held it decoded already).
					w.t.b.waiting.put(w.id, heldBytes(got))
				}
				return rec, StoredRecord{}, nil
			}
		case <-tick.C:
			read = true
		}
	}
}

// stateKey is how the task's state starts in a stored record. A record is
// encoded as {"task":{"id":…,"contextId":…,"status":{"state":…: the first
// "state" key in the document is the task's. The pattern cannot occur
// inside a JSON string (a quote in a string is always escaped), so the first
// match is a real key.
var stateKey = []byte(`"state":"`)

// peekState reads the task state of an encoded record without decoding it.
// ok is false when the record does not look as expected; the caller then
// decodes it in full.
func peekState(val []byte) (st schemas.TaskState, ok bool) {
	i := bytes.Index(val, stateKey)
	if i < 0 {
		return "", false
	}
	rest := val[i+len(stateKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return "", false
	}
	st = schemas.TaskState(rest[:j])
	return st, st.Valid()
}
