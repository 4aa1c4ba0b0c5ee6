package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// TaskIndex is one process's index of the task bucket: who may see each
// task, its state and status time, its stored size and revision. It is
// what makes listing cost the page and retention cost what it deletes,
// instead of a decode of every record (see ARCHITECTURE.md, "Task index").
//
// It is kept from the bucket's own writes: every task write carries its
// TaskIndexEntry in a header (writeTask), and the index follows the bucket
// with a headers-only consumer, so it reads no record and the writers pay
// no second write. A write without the header (an older writer) is indexed
// from its record. Each process that lists or sweeps keeps its own index;
// it holds ~300 bytes per stored task, so its size is bounded by the
// retention bounds (MaxFinishedTasks) plus the unfinished tasks.
//
// Tasks are kept in ordered lists, one per listing scope: a principal's
// tasks of an agent in a tenant, an admin's view of all principals' there,
// and each of those per context. A list is ordered by (status time, id),
// the order ListTasks pages in, so a page is a walk from a cursor. A task
// that changes gets a new entry; its old slots die in place and are
// compacted away later, so an update costs a map write and an insertion
// near the end of each of its lists.
type TaskIndex struct {
	b *Bus
	f *follower
	// watcher, when set (Carry), is handed every message before the
	// index applies it.
	watcher *TaskWatcher

	mu        sync.RWMutex
	tasks     map[string]*indexEntry
	lists     map[listKey]*orderedList
	contexts  map[contextKey][]*indexEntry // the tasks of each context, any order
	finished  orderedList                  // every terminal task, for retention (in write order within a millisecond)
	asking    orderedList                  // tasks waiting for input, for idle expiry
	submitted map[string]*indexEntry       // SUBMITTED tasks, for orphaned work
	approvals map[string]*indexEntry       // tasks whose approval is pending, for approvers and expiry
	open      map[ownerKey]openCount       // unfinished tasks per principal and tenant
	queued    map[queueKey]int             // SUBMITTED or WORKING tasks per caller and agent
	bytes     int64                        // stored size of every task
	shared    map[string]string            // see share
	applied   uint64                       // stream sequence of the last write applied
	gone      []goneTask                   // tasks deleted since the last sweep, whose events (and configs) it drops
	progress  chan struct{}                // closed when applied moves, if waited on
	waiting   int

	ready     chan struct{}
	readyOnce sync.Once
}

// indexEntry is one task's current entry; a change replaces it.
type indexEntry struct {
	schemas.TaskIndexEntry
	id   string
	size int    // stored record size
	rev  uint64 // bucket revision of the write it was read from
}

// listKey names a listing scope. all is an admin's scope: every principal.
type listKey struct {
	tenant, agent, owner string
	all                  bool
}

// ownerKey names a principal in a tenant, and the origin of an anonymous
// one.
type ownerKey struct{ tenant, owner, origin string }

// queueKey names a caller (as ownerKey) at one agent: whose share of the
// agent's backlog Queued counts.
type queueKey struct {
	ownerKey
	agent string
}

// inQueue reports whether a task counts in its agent's backlog: queued
// (SUBMITTED) or running (WORKING), not a fan-out's reply.
func inQueue(e *indexEntry) bool {
	return !e.Reply && (e.State == schemas.TaskStateSubmitted || e.State == schemas.TaskStateWorking)
}

// openCount is how many unfinished tasks a principal has, and their size.
type openCount struct {
	tasks int
	bytes int64
}

// contextKey names the tasks of one context at one agent.
type contextKey struct{ tenant, agent, context string }

// slot is a list position: the key it was inserted under and the entry.
// It is live while the entry is still the task's current one.
type slot struct {
	at int64
	e  *indexEntry
}

// orderedList holds slots ascending by (at, id), with counts of its live
// entries.
type orderedList struct {
	// byWrite orders slots of the same status time by the revision of
	// their write (the order they finished) instead of by id.
	byWrite bool
	slots   []slot
	live    int
	bytes   int64
	byState [len(stateOrder)]int32
}

// stateOrder numbers the task states for per-state counts.
var stateOrder = [...]schemas.TaskState{"", schemas.TaskStateSubmitted, schemas.TaskStateWorking, schemas.TaskStateInputRequired,
	schemas.TaskStateAuthRequired, schemas.TaskStateCompleted, schemas.TaskStateFailed, schemas.TaskStateCanceled, schemas.TaskStateRejected}

func stateIndex(st schemas.TaskState) int {
	if i := slices.Index(stateOrder[:], st); i > 0 {
		return i
	}
	return 0
}

// NewTaskIndex returns an index; call Run to fill and follow it.
func (b *Bus) NewTaskIndex() *TaskIndex {
	x := &TaskIndex{
		b:         b,
		tasks:     map[string]*indexEntry{},
		lists:     map[listKey]*orderedList{},
		contexts:  map[contextKey][]*indexEntry{},
		submitted: map[string]*indexEntry{},
		approvals: map[string]*indexEntry{},
		finished:  orderedList{byWrite: true},
		open:      map[ownerKey]openCount{},
		queued:    map[queueKey]int{},
		shared:    map[string]string{},
		progress:  make(chan struct{}),
		ready:     make(chan struct{}),
	}
	x.f = b.newFollower("task-index", kvStream(schemas.BucketTasks), jetstream.DeliverLastPerSubjectPolicy, kvPrefix(schemas.BucketTasks)+">")
	x.f.headersOnly = true
	return x
}

// Ready is closed once the index holds every task stored when it started.
func (x *TaskIndex) Ready() <-chan struct{} { return x.ready }

// Carry makes the index's follower the task watcher's too, before either
// runs: the process then holds one consumer of the task bucket, not two,
// and each write is delivered to it once (a delivery costs the server and
// the client ~30 µs; a blocking task makes two writes). The follower
// catches up on headers, as the index alone does, and follows with values
// from then on, which the watcher answers waits with; the watcher is
// ready, following and not following as the index's follower is, and its
// Run only waits for its context.
func (x *TaskIndex) Carry(w *TaskWatcher) {
	x.watcher = w
	x.f.valuesOnceCaughtUp = true
	w.f = x.f
	w.carried = true
}

// Run fills the index and follows the bucket until ctx ends.
func (x *TaskIndex) Run(ctx context.Context) error {
	prefix := kvPrefix(schemas.BucketTasks)
	return x.f.run(ctx, func(m followMsg) {
		if x.watcher != nil {
			x.watcher.handle(m)
		}
		x.apply(ctx, strings.TrimPrefix(m.Subject, prefix), m)
	}, func() {
		x.readyOnce.Do(func() {
			close(x.ready)
			if x.watcher != nil {
				close(x.watcher.ready)
			}
		})
	})
}

// apply folds one write of the bucket into the index.
func (x *TaskIndex) apply(ctx context.Context, id string, m followMsg) {
	var e *indexEntry
	if m.Op == jetstream.KeyValuePut {
		var ent schemas.TaskIndexEntry
		h := m.Header.Get(schemas.HeaderTaskIndex)
		if h == "" || readJSON([]byte(h), &ent) != nil {
			ent = x.fromRecord(ctx, m.Seq)
		}
		if ent.State != "" {
			e = &indexEntry{TaskIndexEntry: x.share(ent), id: id, size: m.Size, rev: m.Seq}
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if old := x.tasks[id]; old != nil {
		x.detach(old)
		if e != nil {
			e.id = old.id
		} else if len(x.gone) < maxGone {
			x.gone = append(x.gone, goneTask{old.id, old.Push})
		}
	} else if e != nil {
		// The id is a slice of the message's subject: keep only the id.
		e.id = strings.Clone(id)
	}
	if e != nil {
		x.attach(e)
	}
	x.applied = m.Seq
	if x.waiting > 0 {
		close(x.progress)
		x.progress = make(chan struct{})
	}
}

// share makes the entry's low-variety text (state, agent, owner, tenant,
// source address) share one copy per value across the index: a hundred
// thousand tasks of a few callers hold a few strings, not a copy each.
// Only the follower's goroutine calls it (apply), so the table needs no
// lock; it is a cache, emptied when it passes its bound.
func (x *TaskIndex) share(e schemas.TaskIndexEntry) schemas.TaskIndexEntry {
	if i := stateIndex(e.State); i > 0 {
		e.State = stateOrder[i]
	}
	if len(x.shared) > maxShared {
		clear(x.shared)
	}
	for _, p := range [...]*string{&e.Agent, &e.Owner, &e.Tenant, &e.Origin} {
		if *p == "" {
			continue
		}
		if v, ok := x.shared[*p]; ok {
			*p = v
		} else {
			x.shared[*p] = *p
		}
	}
	return e
}

// maxShared bounds the strings TaskIndex.share keeps.
const maxShared = 1 << 14

// maxGone bounds the deleted tasks an index remembers between sweeps
// (~13 s of deletions at 20 000 a second). The events of tasks past it stay
// until the events stream's age or byte bound removes them.
const maxGone = 1 << 18

// goneTask is a deleted task, and whether it had push configs.
type goneTask struct {
	id   string
	push bool
}

// goneCount is how many deleted tasks takeGone would return.
func (x *TaskIndex) goneCount() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.gone)
}

// keepGone gives back tasks a sweep took and could not finish, within
// maxGone.
func (x *TaskIndex) keepGone(left []goneTask) {
	if len(left) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	room := max(maxGone-len(x.gone), 0)
	x.gone = append(x.gone, left[:min(len(left), room)]...)
}

// takeGone returns the tasks deleted since it was last called.
func (x *TaskIndex) takeGone() []goneTask {
	x.mu.Lock()
	defer x.mu.Unlock()
	gone := x.gone
	x.gone = nil
	return gone
}

// fromRecord reads the index entry of a write that carries none from the
// stored message itself.
func (x *TaskIndex) fromRecord(ctx context.Context, seq uint64) schemas.TaskIndexEntry {
	m, err := x.b.storedMsg(ctx, kvStream(schemas.BucketTasks), storedMsgRequest{Seq: seq})
	if err != nil {
		return schemas.TaskIndexEntry{}
	}
	rec, err := decodeRecord(m.Data)
	if err != nil {
		x.b.log.Warn("task index: skipping an undecodable record", "seq", seq, "err", err)
		return schemas.TaskIndexEntry{}
	}
	return rec.IndexEntry()
}

func (x *TaskIndex) keys(e *indexEntry) [2]listKey {
	return [2]listKey{{tenant: e.Tenant, agent: e.Agent, owner: e.Owner}, {tenant: e.Tenant, agent: e.Agent, all: true}}
}

func (x *TaskIndex) attach(e *indexEntry) {
	x.tasks[e.id] = e
	if !e.Reply {
		for _, k := range x.keys(e) {
			l := x.lists[k]
			if l == nil {
				l = &orderedList{}
				x.lists[k] = l
			}
			l.insert(e)
		}
		ck := contextKey{e.Tenant, e.Agent, e.Context}
		x.contexts[ck] = append(x.contexts[ck], e)
	}
	if e.State.Terminal() {
		x.finished.insert(e)
	}
	// A task waiting for an approver is neither idle for its caller's
	// input nor orphaned work: its approval's expiry settles it.
	if e.Approval != 0 {
		x.approvals[e.id] = e
	} else {
		if e.State.Interrupted() {
			x.asking.insert(e)
		}
		if e.State == schemas.TaskStateSubmitted {
			x.submitted[e.id] = e
		}
	}
	if !e.Reply && !e.State.Terminal() {
		k := ownerKey{e.Tenant, e.Owner, e.Origin}
		c := x.open[k]
		c.tasks++
		c.bytes += int64(e.size)
		x.open[k] = c
	}
	if inQueue(e) {
		x.queued[queueKey{ownerKey{e.Tenant, e.Owner, e.Origin}, e.Agent}]++
	}
	x.bytes += int64(e.size)
}

func (x *TaskIndex) detach(e *indexEntry) {
	delete(x.tasks, e.id)
	live := func(s slot) bool { return x.tasks[s.e.id] == s.e }
	if !e.Reply {
		for _, k := range x.keys(e) {
			if l := x.lists[k]; l != nil {
				l.drop(e, live)
				if l.live == 0 {
					delete(x.lists, k)
				}
			}
		}
		ck := contextKey{e.Tenant, e.Agent, e.Context}
		c := x.contexts[ck]
		if i := slices.Index(c, e); i >= 0 {
			c[i] = c[len(c)-1]
			c[len(c)-1] = nil
			c = c[:len(c)-1]
		}
		if len(c) == 0 {
			delete(x.contexts, ck)
		} else {
			x.contexts[ck] = c
		}
	}
	if e.State.Terminal() {
		x.finished.drop(e, live)
	}
	if e.State.Interrupted() && e.Approval == 0 {
		x.asking.drop(e, live)
	}
	delete(x.submitted, e.id)
	delete(x.approvals, e.id)
	if !e.Reply && !e.State.Terminal() {
		k := ownerKey{e.Tenant, e.Owner, e.Origin}
		c := x.open[k]
		c.tasks--
		c.bytes -= int64(e.size)
		if c.tasks <= 0 {
			delete(x.open, k)
		} else {
			x.open[k] = c
		}
	}
	if inQueue(e) {
		k := queueKey{ownerKey{e.Tenant, e.Owner, e.Origin}, e.Agent}
		if x.queued[k] <= 1 {
			delete(x.queued, k)
		} else {
			x.queued[k]--
		}
	}
	x.bytes -= int64(e.size)
}

// compareSlots orders slots by (at, id).
func compareSlots(a, b slot) int {
	if a.at != b.at {
		return cmp.Compare(a.at, b.at)
	}
	return strings.Compare(a.e.id, b.e.id)
}

// compareWrites orders slots by (at, revision).
func compareWrites(a, b slot) int {
	if a.at != b.at {
		return cmp.Compare(a.at, b.at)
	}
	return cmp.Compare(a.e.rev, b.e.rev)
}

func (l *orderedList) insert(e *indexEntry) {
	order := compareSlots
	if l.byWrite {
		order = compareWrites
	}
	i, _ := slices.BinarySearchFunc(l.slots, slot{at: e.At, e: e}, order)
	l.slots = append(l.slots, slot{})
	copy(l.slots[i+1:], l.slots[i:])
	l.slots[i] = slot{at: e.At, e: e}
	l.live++
	l.bytes += int64(e.size)
	l.byState[stateIndex(e.State)]++
}

// drop counts e out of the list; its slot dies in place, and the dead
// are compacted away once they outnumber the live.
func (l *orderedList) drop(e *indexEntry, live func(slot) bool) {
	l.live--
	l.bytes -= int64(e.size)
	l.byState[stateIndex(e.State)]--
	if len(l.slots) > 2*l.live+32 {
		kept := l.slots[:0]
		for _, s := range l.slots {
			if live(s) {
				kept = append(kept, s)
			}
		}
		clear(l.slots[len(kept):])
		l.slots = kept
	}
}

// ListCursor is a position in list order (status time descending, then
// id descending): the last task of a page.
type ListCursor struct {
	At int64 // status time, Unix nanoseconds
	ID string
}

// ListQuery is one page of ListTasks.
type ListQuery struct {
	// Owner is who lists: its agent, tenant and principal (or admin) pick
	// the scope; nothing outside it is ever read.
	Owner       Owner
	ContextID   string
	State       schemas.TaskState
	StatusAfter time.Time // status time >= StatusAfter
	After       *ListCursor
	Limit       int
}

// ListPage is a page of tasks, newest status first.
type ListPage struct {
	Tasks []*schemas.TaskRecord
	// Next is the cursor of the next page; nil on the last.
	Next *ListCursor
	// Total counts every task the query matches, on all pages.
	Total int
}

// List returns a page of the tasks q's owner may see. It first waits until
// the index holds every write stored before the call (so a task created
// just before, through any process, is listed), then walks the scope's
// list from the cursor and reads only the page's records.
func (x *TaskIndex) List(ctx context.Context, q ListQuery) (ListPage, error) {
	if err := x.catchUp(ctx); err != nil {
		return ListPage{}, err
	}
	var hits []slot
	var page ListPage
	func() {
		x.mu.RLock()
		defer x.mu.RUnlock()
		after := int64(0)
		switch {
		case q.StatusAfter.IsZero() || q.StatusAfter.Before(time.Unix(0, 0)):
		case q.StatusAfter.After(time.Unix(0, math.MaxInt64)):
			return // past what a status time can be
		default:
			after = q.StatusAfter.UnixNano()
		}
		match := func(s slot) bool {
			return x.tasks[s.e.id] == s.e && (q.State == "" || s.e.State == q.State) &&
				(q.Owner.Admin || s.e.Owner == q.Owner.Principal) && s.at >= after
		}
		var slots []slot
		if q.ContextID != "" {
			// A context's tasks are few next to a scope's: sort them here.
			for _, e := range x.contexts[contextKey{q.Owner.Tenant, q.Owner.Agent, q.ContextID}] {
				slots = append(slots, slot{at: e.At, e: e})
			}
			slices.SortFunc(slots, compareSlots)
			for _, s := range slots {
				if match(s) {
					page.Total++
				}
			}
		} else {
			k := listKey{tenant: q.Owner.Tenant, agent: q.Owner.Agent, owner: q.Owner.Principal}
			if q.Owner.Admin {
				k.owner, k.all = "", true
			}
			l := x.lists[k]
			if l == nil {
				return
			}
			slots = l.slots
			switch {
			case after != 0:
				for j := len(slots) - 1; j >= 0 && slots[j].at >= after; j-- {
					if match(slots[j]) {
						page.Total++
					}
				}
			case q.State != "":
				page.Total = int(l.byState[stateIndex(q.State)])
			default:
				page.Total = l.live
			}
		}
		i := len(slots)
		if c := q.After; c != nil {
			i, _ = slices.BinarySearchFunc(slots, slot{at: c.At, e: &indexEntry{id: c.ID}}, compareSlots)
		}
		for i--; i >= 0 && len(hits) <= q.Limit; i-- {
			s := slots[i]
			if s.at < after {
				break
			}
			if match(s) {
				hits = append(hits, s)
			}
		}
		if len(hits) > q.Limit {
			hits = hits[:q.Limit]
			last := hits[q.Limit-1]
			page.Next = &ListCursor{At: last.at, ID: last.e.id}
		}
	}()
	for _, h := range hits {
		rec, _, err := x.b.GetTaskAtLeast(ctx, h.e.id, h.e.rev)
		if errors.Is(err, schemas.ErrTaskNotFound) {
			continue // removed since
		}
		if err != nil {
			return ListPage{}, err
		}
		if !q.Owner.Owns(rec) || (q.State != "" && rec.Task.Status.State != q.State) {
			continue // changed since, out of the query
		}
		page.Tasks = append(page.Tasks, rec)
	}
	return page, nil
}

// catchUpPoll is how long catchUp waits for the follower before it asks
// the stream whether anything is left to apply.
const catchUpPoll = 20 * time.Millisecond

// catchUp returns once the index has applied every write the bucket
// stored before the call. The stream's last sequence is the target; as
// the message at it may be gone (a purge marker that expired), a follower
// that does not reach it is checked against the stream: done when no
// message is stored between what was applied and the target.
func (x *TaskIndex) catchUp(ctx context.Context) error {
	select {
	case <-x.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	st, err := x.b.js.Stream(ctx, kvStream(schemas.BucketTasks))
	if err != nil {
		return errUnavailable("bus: list tasks", err)
	}
	target := st.CachedInfo().State.LastSeq
	x.mu.Lock()
	x.waiting++
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		x.waiting--
		x.mu.Unlock()
	}()
	for {
		x.mu.RLock()
		applied, progress := x.applied, x.progress
		x.mu.RUnlock()
		if applied >= target {
			return nil
		}
		select {
		case <-progress:
			continue
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(catchUpPoll):
		}
		next, err := x.b.storedMsg(ctx, kvStream(schemas.BucketTasks), storedMsgRequest{Seq: applied + 1, NextBySubject: kvPrefix(schemas.BucketTasks) + ">"})
		if errors.Is(err, errNoMessage) || (err == nil && next.Seq > target) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Unfinished counts the tasks of a principal in a tenant (and, for the
// anonymous principal, from one origin: see schemas.TaskRecord.Origin)
// that are not finished, over all agents, and their stored size.
func (x *TaskIndex) Unfinished(principal, tenant, origin string) (tasks int, bytes int64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	c := x.open[ownerKey{tenant, principal, origin}]
	return c.tasks, c.bytes
}

// Queued counts the tasks of a caller (principal in tenant, and origin
// for the anonymous principal, as Unfinished) at agent that are queued or
// running (SUBMITTED or WORKING): the caller's part of the agent's
// backlog, from the index, without asking the bus.
func (x *TaskIndex) Queued(principal, tenant, origin, agent string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.queued[queueKey{ownerKey{tenant, principal, origin}, agent}]
}

// StoredBytes is the stored size of every task record: how full the task
// bucket is, but for its headers and markers.
func (x *TaskIndex) StoredBytes() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.bytes
}

// Len is how many tasks the index holds.
func (x *TaskIndex) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.tasks)
}

// Sweep enforces the retention bounds on finished tasks and, with
// OrphanAfter, requeues orphaned work, from the index: it deletes the
// oldest finished first, reading nothing but what it deletes, and checks
// only the tasks that have been SUBMITTED too long. One process of the
// system sweeps at a time, the holder of the sweep lease (BucketLeases);
// the lease is asked for only once this index has caught up, so a process
// whose index cannot follow never holds it, and the others return after
// that one stream-info request. Deletes are conditional on the revision the
// index holds, so a task that changed meanwhile is left alone.
func (x *TaskIndex) Sweep(ctx context.Context, o SweepOptions) (SweepResult, error) {
	var res SweepResult
	keep := o.Keep
	bounded := keep.MaxCount > 0 || keep.MaxBytes > 0
	if !bounded && o.OrphanAfter <= 0 && o.IdleAfter <= 0 && x.goneCount() == 0 && !x.approvalsPending() {
		return res, nil
	}
	// A sweep that fails before it holds the lease keeps the deletions it
	// has seen for the next one; a process that does not hold the lease
	// forgets them, as the holder's index saw them too.
	if err := x.catchUp(ctx); err != nil {
		return res, err
	}
	held, err := x.b.holdLease(ctx, "sweep")
	if err != nil {
		return res, err
	}
	gone := x.takeGone()
	if !held {
		return res, nil
	}
	// The events (and push configs) of the tasks deleted since the last
	// sweep — by it, by their TTL, or withdrawn — go first: the holder's
	// index saw every deletion, whoever made it.
	var left []goneTask
	res.EventsDropped, left = x.b.dropEvents(ctx, gone)
	x.keepGone(left)
	var victims, orphans, idle, expired []*indexEntry
	func() {
		x.mu.RLock()
		defer x.mu.RUnlock()
		count, bytes := x.finished.live, x.finished.bytes
		over := func() bool {
			return (keep.MaxCount > 0 && count > keep.MaxCount) || (keep.MaxBytes > 0 && bytes > keep.MaxBytes)
		}
		for _, s := range x.finished.slots {
			if !bounded || !over() {
				break
			}
			if x.tasks[s.e.id] != s.e {
				continue
			}
			victims = append(victims, s.e)
			count--
			bytes -= int64(s.e.size)
		}
		if o.IdleAfter > 0 {
			cutoff := time.Now().Add(-o.IdleAfter).UnixNano()
			for _, s := range x.asking.slots {
				if s.at >= cutoff {
					break
				}
				if x.tasks[s.e.id] == s.e {
					idle = append(idle, s.e)
				}
			}
		}
		now := time.Now().UnixNano()
		for _, e := range x.approvals {
			if e.Approval <= now {
				expired = append(expired, e)
			}
		}
		if o.OrphanAfter > 0 {
			cutoff := time.Now().Add(-o.OrphanAfter).UnixNano()
			for _, e := range x.submitted {
				if e.At < cutoff {
					orphans = append(orphans, e)
				}
			}
		}
	}()
	// Orphans are requeued before finished tasks are deleted; an error in
	// either part does not stop the other, and is the caller's to report.
	var requeueErr error
	if len(orphans) > 0 {
		cands := make([]orphanCandidate, len(orphans))
		for i, e := range orphans {
			cands[i] = orphanCandidate{id: e.id, agent: e.Agent, rev: e.rev}
		}
		res.Requeued, requeueErr = x.b.requeueOrphans(ctx, cands)
	}
	var idleErr error
	for _, e := range idle {
		ok, err := x.b.expireIdle(ctx, e, o.IdleAfter)
		if err != nil {
			idleErr = err
			break
		}
		if ok {
			res.Expired++
		}
	}
	var expireErr error
	for _, e := range expired {
		done, err := x.b.expireApproval(ctx, e.id)
		if err != nil {
			expireErr = err
			break
		}
		if done != nil {
			res.ApprovalsExpired = append(res.ApprovalsExpired, *done)
		}
	}
	requeueErr = errors.Join(requeueErr, idleErr, expireErr)
	res.Deleted = x.b.purgeTasks(ctx, victims)
	return res, requeueErr
}

// purgeWindow is how many purges of one sweep are in flight at once.
const purgeWindow = 256

// purgeTasks deletes the tasks of entries, each only if it is still at
// the entry's revision (the KV purge withdrawTask makes too: its marker
// expires, so sweeping leaves nothing behind), and returns how many it
// deleted. The purges run purgeWindow at a time: under sustained load a
// sweep deletes as many tasks as were created since the last one, and one
// round trip after another let the store and the index outgrow their
// bounds while the sweep fell behind.
func (b *Bus) purgeTasks(ctx context.Context, entries []*indexEntry) int {
	return pipelined(ctx, entries, func(e *indexEntry) bool {
		return b.tasks.Purge(ctx, e.id, jetstream.LastRevision(e.rev), jetstream.PurgeTTL(time.Second)) == nil
	})
}

// dropEvents deletes the events of deleted tasks, and the push configs of
// those that had some, purgeWindow tasks at a time, and returns for how
// many tasks it deleted the events. Each task's event subject is
// rolled up into one headers-only marker (schemas.HeaderTaskDeleted) that
// expires a second later, leaving the subject empty: the stream keeps the
// events of tasks that are stored, and the server's per-subject state for
// them only. A roll-up is a publish on the task's subject, which edges and
// workers may make, where a stream purge is an API call the NATS
// permissions deny them. A repeat (a sweep that lost its lease midway) is
// de-duplicated by its message id.
//
// It also returns the tasks it did not finish (a publish or purge that
// failed, a context that ended), for the next sweep to try again.
func (b *Bus) dropEvents(ctx context.Context, tasks []goneTask) (int, []goneTask) {
	done := make([]bool, len(tasks))
	order := make([]int, len(tasks))
	for i := range order {
		order[i] = i
	}
	n := pipelined(ctx, order, func(i int) bool {
		t := tasks[i]
		if t.push {
			kv, err := b.pushConfigs(ctx)
			if err == nil {
				err = kv.Purge(ctx, t.id, jetstream.PurgeTTL(time.Second))
			}
			if err != nil {
				return false
			}
		}
		m := nats.NewMsg(schemas.SubjectEvents(t.id))
		m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
		m.Header.Set(schemas.HeaderTaskDeleted, "true")
		m.Header.Set(nats.MsgIdHdr, t.id+".deleted")
		withTTL(m, time.Second)
		_, err := b.publish(ctx, m)
		done[i] = err == nil
		return done[i]
	})
	var left []goneTask
	for i, t := range tasks {
		if !done[i] {
			left = append(left, t)
		}
	}
	return n, left
}

// pipelined calls do for each item, purgeWindow calls at a time, until ctx
// ends, and returns how many returned true.
func pipelined[T any](ctx context.Context, items []T, do func(T) bool) int {
	var done atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, purgeWindow)
	for _, it := range items {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return int(done.Load())
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if do(it) {
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return int(done.Load())
}

// leaseTTL is how long a lease outlives its holder's last renewal. A
// holder renews it each time it does the work (the edge sweeps every few
// seconds), so a lease changes hands only when its holder stops: at once
// when it stops cleanly (ReleaseSweep), and when it restarts under the
// same Config.Name (the same source holds it), else after leaseTTL.
const leaseTTL = 90 * time.Second

// holdLease takes the lease name for this process, or renews it if this
// process holds it; false if another process does.
func (b *Bus) holdLease(ctx context.Context, name string) (bool, error) {
	if _, err := b.leases.Create(ctx, name, []byte(b.source)); err == nil {
		return true, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return false, errUnavailable("bus: take lease "+name, err)
	}
	e, err := b.leases.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil // just freed: the next attempt takes it
	}
	if err != nil {
		return false, errUnavailable("bus: read lease "+name, err)
	}
	if string(e.Value()) != b.source {
		return false, nil
	}
	if _, err := b.leases.Update(ctx, name, []byte(b.source), e.Revision()); err != nil {
		return false, nil // lost it meanwhile
	}
	return true, nil
}

// ReleaseSweep gives up the sweep lease if this process holds it, so
// another process (or this one, restarted) takes it at its next sweep
// instead of after leaseTTL. An edge calls it when it stops.
func (x *TaskIndex) ReleaseSweep(ctx context.Context) error {
	return x.b.releaseLease(ctx, "sweep")
}

// releaseLease deletes the lease name if this process holds it, on the
// revision it read, so a lease another process took meanwhile stays.
func (b *Bus) releaseLease(ctx context.Context, name string) error {
	e, err := b.leases.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return errUnavailable("bus: read lease "+name, err)
	}
	if string(e.Value()) != b.source {
		return nil
	}
	if err := b.leases.Delete(ctx, name, jetstream.LastRevision(e.Revision())); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return errUnavailable("bus: release lease "+name, err)
	}
	return nil
}

// errNotIdle ends an expiry of a task that moved meanwhile.
var errNotIdle = errors.New("the task is no longer idle")

// expireIdle cancels a task that has waited for input since e's status
// time, if it still has: its status becomes CANCELED with the reason, and
// the change is published as any other, so a subscriber sees it. A task
// the client answered meanwhile is left alone.
func (b *Bus) expireIdle(ctx context.Context, e *indexEntry, idle time.Duration) (bool, error) {
	reason := fmt.Sprintf("canceled: waited %s for input without an answer", idle)
	ev := TaskEvent{ID: schemas.NewID(), Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateCanceled,
		Message: &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleAgent, Parts: []schemas.Part{schemas.TextPart(reason)}}}}}
	rec, _, err := b.applyEventsIf(ctx, e.id, nil, 0, nil, func(r *schemas.TaskRecord) error {
		if !r.Task.Status.State.Interrupted() || r.IndexEntry().At != e.At {
			return errNotIdle
		}
		return nil
	}, []TaskEvent{ev})
	switch {
	case errors.Is(err, errNotIdle) || errors.Is(err, schemas.ErrTaskNotFound) || errors.Is(err, schemas.ErrTaskTerminal):
		return false, nil
	case err != nil:
		return false, err
	}
	b.m.expired.Inc(rec.Agent, string(e.State))
	b.log.Info("canceled a task idle for input", "task_id", e.id, "agent", rec.Agent, "idle", idle)
	return true, nil
}
