package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// The task store: TaskRecord values in the A2A_TASKS bucket, keyed by task
// id. Records are created once (KV create fails if the key exists) and then
// only changed by compare-and-swap on the revision, so two writers (an edge
// canceling, a worker completing) can never overwrite each other: the loser
// re-reads, re-applies its change to the new state, and terminal states
// absorb whatever comes late.

// casAttempts bounds the retries of one compare-and-swap update.
const casAttempts = 16

// createTask stores a new task record and returns its revision and the
// record as stored. It fails with an error matching ErrTaskExists if a
// record with the same id exists. A create whose outcome is unclear (a
// node died before acknowledging it) is made again until the outcome is
// known, for up to submitRetryFor within ctx: a record found stored with
// exactly these bytes is this create's, and its revision is returned.
func (b *Bus) createTask(ctx context.Context, rec *schemas.TaskRecord) (uint64, []byte, error) {
	if !schemas.ValidTaskID(rec.Task.ID) {
		return 0, nil, fmt.Errorf("bus: create task: invalid task id %q", rec.Task.ID)
	}
	rec.TrimHistory(b.cfg.HistoryCap)
	if rec.Generation == 0 {
		rec.Generation = 1 // a task is created at generation 1 (A2A 1.1)
	}
	val, err := encodeRecord(rec)
	if err != nil {
		return 0, nil, fmt.Errorf("bus: encode task: %w", err)
	}
	if len(val) > b.clientRecordMax() {
		return 0, nil, b.messageTooLarge(len(val))
	}
	id := rec.Task.ID
	var rev uint64
	err = retryWithin(ctx, submitRetryFor, func(actx context.Context) (bool, error) {
		r, err := b.writeTask(actx, rec, val, 0)
		switch {
		case err == nil:
			rev = r
			return true, nil
		case errors.Is(err, jetstream.ErrKeyExists):
			// Someone else's, or stored by an earlier attempt whose answer
			// was lost: only ours has exactly these bytes.
			stored, r, gerr := b.leaderGetKey(actx, schemas.BucketTasks, id)
			if gerr != nil {
				return false, gerr
			}
			if !bytes.Equal(stored, val) {
				return true, fmt.Errorf("bus: create task %s: %w: %w", id, ErrTaskExists, err)
			}
			rev = r
			return true, nil
		case refused(err):
			return true, err
		}
		return false, err // no answer: perhaps stored, perhaps not
	})
	switch {
	case err == nil:
		return rev, val, nil
	case errors.Is(err, ErrTaskExists):
		return 0, nil, err
	}
	return 0, nil, errUnavailable("bus: create task", err)
}

// ErrTaskExists is createTask's error for an id already taken (Submit's,
// for a caller-chosen id).
var ErrTaskExists = errors.New("task exists")

// GetTask returns the record of a task and its revision. It returns an
// error matching schemas.ErrTaskNotFound if there is no such task (never
// created, or evicted). The record may be a moment old on a cluster (any
// replica answers), but a task is never reported missing because a replica
// lags: not found is confirmed by the stream leader (see consistent.go).
func (b *Bus) GetTask(ctx context.Context, id string) (*schemas.TaskRecord, uint64, error) {
	return b.GetTaskAtLeast(ctx, id, 0)
}

// GetTaskAtLeast is GetTask for a reader that knows the task reached
// revision minRev (a worker holding work queued at that revision): a
// record older than that, or none, is read again from the stream leader.
// It returns an error matching schemas.ErrTaskNotFound if even the leader
// has no such task, or only an older revision of it.
func (b *Bus) GetTaskAtLeast(ctx context.Context, id string, minRev uint64) (*schemas.TaskRecord, uint64, error) {
	val, rev, err := b.readTask(ctx, id, false)
	if err == nil && rev >= minRev {
		return b.decodeAt(val, rev)
	}
	if err != nil && !errors.Is(err, schemas.ErrTaskNotFound) {
		return nil, 0, err
	}
	if val, rev, err = b.readTask(ctx, id, true); err != nil {
		return nil, 0, err
	}
	if rev < minRev {
		return nil, 0, schemas.Errorf(schemas.ErrTaskNotFound, "task %s at revision %d not found (the store has revision %d)", id, minRev, rev).With("taskId", id)
	}
	return b.decodeAt(val, rev)
}

func (b *Bus) decodeAt(val []byte, rev uint64) (*schemas.TaskRecord, uint64, error) {
	rec, err := decodeRecord(val)
	if err != nil {
		return nil, 0, err
	}
	return rec, rev, nil
}

// readTask reads a task's stored value: from any replica, or with fromLeader
// from the stream leader.
func (b *Bus) readTask(ctx context.Context, id string, fromLeader bool) ([]byte, uint64, error) {
	if !schemas.ValidTaskID(id) {
		// Not schemas.TaskNotFound: an id that is not one may carry
		// anything, so the message quotes it.
		return nil, 0, schemas.Errorf(schemas.ErrTaskNotFound, "task %q not found", id).With("taskId", id)
	}
	var val []byte
	var rev uint64
	var err error
	if fromLeader {
		val, rev, err = b.leaderGetKey(ctx, schemas.BucketTasks, id)
	} else {
		var e jetstream.KeyValueEntry
		if e, err = b.tasks.Get(ctx, id); err == nil {
			val, rev = e.Value(), e.Revision()
		}
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return nil, 0, schemas.TaskNotFound(id)
		}
		return nil, 0, errUnavailable("bus: get task", err)
	}
	return val, rev, nil
}

func decodeRecord(val []byte) (*schemas.TaskRecord, error) {
	var rec schemas.TaskRecord
	if err := readJSON(val, &rec); err != nil {
		return nil, fmt.Errorf("bus: decode task record: %w", err)
	}
	return &rec, nil
}

// DecodeRecord decodes a stored task record (as UntilStateRaw returns it).
func DecodeRecord(val []byte) (*schemas.TaskRecord, error) { return decodeRecord(val) }

// recordTaskPrefix is how every record this package writes begins: the
// task is the first field of schemas.TaskRecord.
var recordTaskPrefix = []byte(`{"task":`)

// RawTask returns the JSON of the task in a stored record without decoding
// it, for an edge that answers with the task as stored: a blocking send
// then costs no decode and re-encode of the record. ok is false when the
// record does not start with its task, or holds a message reply (the answer
// is then not the task); the caller decodes the record instead.
func RawTask(val []byte) (task []byte, ok bool) { return rawTask(val, true) }

// rawTask is RawTask; check is false for bytes already decoded as a
// record, which proved them JSON.
func rawTask(val []byte, check bool) (task []byte, ok bool) {
	if !bytes.HasPrefix(val, recordTaskPrefix) {
		return nil, false
	}
	rest := val[len(recordTaskPrefix):]
	end := objectEnd(rest)
	if end < 0 {
		return nil, false
	}
	// Past the task are the record's own fields; their values hold no
	// object with keys a client chose, so this finds only the reply field
	// (inside strings a quote is escaped, so "reply": cannot match there).
	if bytes.Contains(rest[end:], []byte(`"reply":`)) {
		return nil, false
	}
	// KV takes any bytes, and a worker in another language wrote this:
	// never pass on a task that is not valid JSON.
	if check && !json.Valid(rest[:end]) {
		return nil, false
	}
	return rest[:end], true
}

// objectEnd returns the length of the JSON object b starts with, or -1. It
// tracks strings and escapes and counts brackets; it does not validate.
func objectEnd(b []byte) int {
	if len(b) == 0 || b[0] != '{' {
		return -1
	}
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// update applies change to the current record and stores the result with
// compare-and-swap, retrying on conflicts a bounded number of times. If
// change returns an error the update is abandoned and that error returned
// (with the record as it was read). It returns the stored record and its
// revision. It may start from a record the caller already holds (cached,
// at revision cachedRev; nil to read it), saving a read when nobody else
// wrote meanwhile; cached is modified in place and must not be shared.
//
// A record that would grow past TaskMaxValueSize (plus slack) is not
// written: the error matches errTooLarge. A negative slack (clientSlack)
// bounds a client's write, whose refusal is ErrInvalidParams.
func (b *Bus) update(ctx context.Context, id string, cached *schemas.TaskRecord, cachedRev uint64, change func(*schemas.TaskRecord) error, slack int) (*schemas.TaskRecord, uint64, error) {
	rec, rev, _, err := b.updateStored(ctx, id, cached, cachedRev, change, slack)
	return rec, rev, err
}

// updateStored is update that also returns the bytes it stored (nil when
// it stored nothing), so a caller that queues the task's work hands the
// worker the record as stored at rev without encoding it again.
func (b *Bus) updateStored(ctx context.Context, id string, cached *schemas.TaskRecord, cachedRev uint64, change func(*schemas.TaskRecord) error, slack int) (*schemas.TaskRecord, uint64, []byte, error) {
	// The first read may come from a replica that lags (see consistent.go);
	// once that read lost a compare-and-swap, or change refused what it
	// showed, the record is read from the stream leader: a refusal is only
	// final when it was decided on the latest state.
	fresh := false
	for attempt := 0; attempt < casAttempts; attempt++ {
		rec, rev := cached, cachedRev
		cached = nil
		if rec == nil {
			val, r, err := b.readTask(ctx, id, fresh)
			if err == nil {
				rec, rev, err = b.decodeAt(val, r)
			}
			if errors.Is(err, schemas.ErrTaskNotFound) && !fresh {
				fresh = true
				continue
			}
			if err != nil {
				return nil, 0, nil, err
			}
		}
		wasFinished := rec.Task.Status.State.Terminal()
		if err := change(rec); err != nil {
			// A finished task stays finished, and an event found applied
			// was stored: those hold on any replica's record.
			if !fresh && !errors.Is(err, ErrApplied) && !errors.Is(err, schemas.ErrTaskTerminal) {
				fresh = true
				continue
			}
			return rec, rev, nil, err
		}
		rec.TrimHistory(b.cfg.HistoryCap)
		val, err := encodeRecord(rec)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("bus: encode task: %w", err)
		}
		if len(val) > int(b.cfg.TaskMaxValueSize)+slack {
			if slack < 0 {
				return nil, 0, nil, fmt.Errorf("%w: %w", errTooLarge, b.messageTooLarge(len(val)).With("taskId", id))
			}
			return nil, 0, nil, fmt.Errorf("%w: %w", errTooLarge, schemas.Errorf(schemas.ErrInvalidAgentResponse, "task %s would grow to %d bytes, more than the limit of %d", id, len(val), b.cfg.TaskMaxValueSize))
		}
		finished := rec.Task.Status.State.Terminal()
		held := b.holdSettled(rec, val)
		newRev, err := b.writeTask(ctx, rec, val, rev)
		if err == nil {
			if held {
				b.waiting.confirm(id, val, newRev)
			}
			if finished && !wasFinished {
				state := string(rec.Task.Status.State)
				b.m.finished.Inc(rec.Agent, state)
				b.m.duration.Observe(max(time.Since(rec.CreatedAt.Time), 0).Seconds(), rec.Agent, state)
			}
			return rec, newRev, val, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			// No answer, or trouble: the write may have been stored.
			return nil, 0, nil, fmt.Errorf("%w: %w", errWriteUnclear, errUnavailable("bus: update task", err))
		}
		b.m.conflicts.Inc()
		if !fresh {
			fresh = true // perhaps no race at all, only a lagging read
			continue
		}
		// Lost a race: back off a little, with jitter, so a crowd of
		// writers on one task spreads out instead of colliding again.
		select {
		case <-time.After(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 5)))):
		case <-ctx.Done():
			return nil, 0, nil, ctx.Err()
		}
	}
	return nil, 0, nil, schemas.Errorf(schemas.ErrUnavailable, "task %s is being changed concurrently; retry", id)
}

// writeTask stores a task record, with its index entry in the
// HeaderTaskIndex header (so indexes follow the bucket's headers alone):
// a create when rev is 0 (also over a delete or purge marker the key
// holds), else a compare-and-swap on rev. A write that loses either fails
// with an error matching jetstream.ErrKeyExists. The write that finishes
// a task carries a message TTL of TaskTTL: finished tasks expire that long
// after finishing, unfinished ones never do.
func (b *Bus) writeTask(ctx context.Context, rec *schemas.TaskRecord, val []byte, rev uint64) (uint64, error) {
	m := nats.NewMsg(kvPrefix(schemas.BucketTasks) + rec.Task.ID)
	m.Data = val
	if h := appendIndexEntry(make([]byte, 0, 256), rec.IndexEntry()); len(h) <= maxIndexHeader {
		m.Header.Set(schemas.HeaderTaskIndex, string(h))
	}
	expectLastSubjectSeq(m, rev)
	if rec.Task.Status.State.Terminal() {
		withTTL(m, b.cfg.TaskTTL)
	}
	pa, err := b.publish(ctx, m)
	if err == nil {
		return pa.Sequence, nil
	}
	var api *jetstream.APIError
	if !errors.As(err, &api) || (api.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence && api.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return 0, err
	}
	if rev == 0 {
		// A deleted or purged key is free: create over its marker.
		last, gerr := b.leaderGet(ctx, kvStream(schemas.BucketTasks), m.Subject)
		if gerr == nil && kvOperation(last.Header) != jetstream.KeyValuePut {
			return b.writeTask(ctx, rec, val, last.Seq)
		}
	}
	return 0, fmt.Errorf("%w: %w", err, jetstream.ErrKeyExists)
}

// appendIndexEntry appends e as JSON, as encoding/json writes it (every
// write of the bucket carries one, so it is written by hand).
func appendIndexEntry(b []byte, e schemas.TaskIndexEntry) []byte {
	b = append(b, `{"s":`...)
	b = appendJSONString(b, string(e.State))
	b = append(b, `,"t":`...)
	b = strconv.AppendInt(b, e.At, 10)
	b = append(b, `,"a":`...)
	b = appendJSONString(b, e.Agent)
	for _, m := range [...]struct{ name, v string }{{`,"o":`, e.Owner}, {`,"n":`, e.Tenant}, {`,"c":`, e.Context}, {`,"g":`, e.Origin}} {
		if m.v != "" {
			b = append(b, m.name...)
			b = appendJSONString(b, m.v)
		}
	}
	if e.Reply {
		b = append(b, `,"r":true`...)
	}
	if e.Push {
		b = append(b, `,"p":true`...)
	}
	if e.Approval != 0 {
		b = append(b, `,"v":`...)
		b = strconv.AppendInt(b, e.Approval, 10)
	}
	return append(b, '}')
}

// maxIndexHeader bounds the index header; a record whose entry would be
// longer (a huge client-chosen context id) is indexed from the record.
const maxIndexHeader = 2048

// TaskEvent is one change to a task, as agents and edges produce them:
// exactly one field is set.
type TaskEvent struct {
	Status   *schemas.TaskStatusUpdateEvent
	Artifact *schemas.TaskArtifactUpdateEvent
	Reply    *schemas.Message
	// Continue is a client's answer to an interrupted task; it is published
	// as a SUBMITTED status update.
	Continue *schemas.Message
	// ID is the event's CloudEvent id; default a new one. A writer that
	// retries an event after an unclear failure reuses it: an event already
	// stored is not applied twice, and its re-publish is de-duplicated.
	ID string
}

// ErrApplied refuses a write whose last event the record already holds:
// an earlier attempt of the same write stored it (FoldWrite).
var ErrApplied = errors.New("event already applied")

func (e TaskEvent) apply(rec *schemas.TaskRecord) error {
	switch {
	case e.Status != nil:
		return rec.ApplyStatus(e.Status)
	case e.Artifact != nil:
		return rec.ApplyArtifact(e.Artifact)
	case e.Reply != nil:
		return rec.ApplyReply(e.Reply)
	case e.Continue != nil:
		return rec.ApplyContinue(e.Continue)
	}
	return errors.New("bus: empty task event")
}

// Apply folds one event into a task (one CAS write) and publishes it to the
// task's event subject (one publish), with the new revision as the event
// sequence. That is the whole cost of a transition on the bus. It returns
// schemas.ErrTaskTerminal when the task had already ended (the event is
// absorbed and nothing is published), and the error of a transition the
// state machine refuses.
func (b *Bus) Apply(ctx context.Context, taskID string, ev TaskEvent) (*schemas.TaskRecord, uint64, error) {
	return b.applyFrom(ctx, taskID, nil, 0, ev)
}

// applyFrom is Apply starting from a record the caller holds at revision rev
// (from GetTask or a previous Apply), which saves a KV read per transition
// for a worker that owns the task. rec is modified in place; a nil rec reads
// the current one.
func (b *Bus) applyFrom(ctx context.Context, taskID string, cached *schemas.TaskRecord, cachedRev uint64, ev TaskEvent) (*schemas.TaskRecord, uint64, error) {
	return b.applyEvents(ctx, taskID, cached, cachedRev, []TaskEvent{ev})
}

// applyEvents folds several events into a task in one write (one CAS) and
// publishes them in order, all with the new revision as sequence and their
// position as sequence index: a worker that has WORKING and its first
// artifact, or its last artifact and COMPLETED, to store pays one write.
// Either all events are stored or none; the first refused transition fails
// the whole write. At most MaxEventsPerWrite events.
func (b *Bus) applyEvents(ctx context.Context, taskID string, cached *schemas.TaskRecord, cachedRev uint64, evs []TaskEvent) (*schemas.TaskRecord, uint64, error) {
	return b.ApplyEventsSince(ctx, taskID, cached, cachedRev, nil, evs)
}

// ErrStale refuses a write made from a snapshot of a task that changed
// since (see ApplyEventsSince).
var ErrStale = errors.New("the task changed since the snapshot the write was made from")

// ApplyEventsSince writes evs (see Apply) for a writer that holds a
// snapshot of the task it did not read itself (a work item's, see
// schemas.WorkItem.Record): with since set, the write is refused with
// ErrStale unless the stored record's last event is still *since, that
// is, nobody changed the task after the snapshot (a cancel, another
// delivery's worker). The refusal is decided on the record read from the
// stream leader.
func (b *Bus) ApplyEventsSince(ctx context.Context, taskID string, cached *schemas.TaskRecord, cachedRev uint64, since *string, evs []TaskEvent) (*schemas.TaskRecord, uint64, error) {
	return b.applyEventsIf(ctx, taskID, cached, cachedRev, since, nil, evs)
}

// applyEventsIf is ApplyEventsSince for a write that holds only while pre
// (when set) accepts the stored record too: pre's error refuses the
// write, decided on the leader's record. A write found already applied
// (an earlier attempt whose answer was lost) is only published.
func (b *Bus) applyEventsIf(ctx context.Context, taskID string, cached *schemas.TaskRecord, cachedRev uint64, since *string, pre func(*schemas.TaskRecord) error, evs []TaskEvent) (*schemas.TaskRecord, uint64, error) {
	rec, rev, _, err := b.applyEventsStored(ctx, taskID, cached, cachedRev, since, pre, evs)
	return rec, rev, err
}

// applyEventsStored is applyEventsIf that also returns the bytes of the
// record stored at rev when this call's own write stored them (nil when
// the outcome was settled otherwise: an unclear write, a write found
// applied, a too large result stored as a failure).
func (b *Bus) applyEventsStored(ctx context.Context, taskID string, cached *schemas.TaskRecord, cachedRev uint64, since *string, pre func(*schemas.TaskRecord) error, evs []TaskEvent) (*schemas.TaskRecord, uint64, []byte, error) {
	if len(evs) == 0 || len(evs) > MaxEventsPerWrite {
		return nil, 0, nil, fmt.Errorf("bus: apply %d events at once (1 to %d)", len(evs), MaxEventsPerWrite)
	}
	for i := range evs {
		if evs[i].ID == "" {
			evs[i].ID = schemas.NewID()
		}
	}
	lastID := evs[len(evs)-1].ID
	change := func(r *schemas.TaskRecord) error {
		if pre != nil && r.LastEventID != lastID {
			if err := pre(r); err != nil {
				return err
			}
		}
		return FoldWrite(r, since, evs)
	}
	// A client's answer (a Continue) is bounded as its create was, and
	// refused when too large: the task keeps waiting for input. Only what
	// an agent writes can fail a task for its size.
	slack := 0
	if slices.ContainsFunc(evs, func(e TaskEvent) bool { return e.Continue != nil }) {
		slack = b.clientSlack()
	}
	rec, rev, stored, err := b.updateStored(ctx, taskID, cached, cachedRev, change, slack)
	if unclear(err) {
		rec, rev, err = b.settleUnclear(ctx, taskID, change, slack)
	}
	if errors.Is(err, errTooLarge) && slack >= 0 {
		// What the agent made cannot be stored. The task fails instead,
		// saying why, in the room the bucket keeps past the record limit
		// (the record as stored is within it, and the failure adds a
		// status of a few hundred bytes), so a task can always be
		// finished; the failure is what is published, under the write's
		// own id, so a retry of the write finds it applied (change folds
		// evs, which is now the failure).
		reason := "the agent's result cannot be stored: " + schemas.AsError(err).Message
		evs = []TaskEvent{{ID: lastID, Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateFailed,
			Message: &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleAgent, Parts: []schemas.Part{schemas.TextPart(reason)}}}}}}
		b.log.Warn("failing a task whose result is too large to store", "task_id", taskID, "err", err)
		rec, rev, stored, err = b.updateStored(ctx, taskID, nil, 0, change, failureSlack)
		if unclear(err) {
			rec, rev, err = b.settleUnclear(ctx, taskID, change, failureSlack)
		}
	}
	if errors.Is(err, ErrApplied) {
		err = nil // stored by an earlier attempt; make sure it is published
	}
	if err != nil {
		return rec, rev, nil, err
	}
	if err := b.publishEvents(ctx, rec, rev, evs); err != nil {
		return rec, rev, nil, err
	}
	return rec, rev, stored, nil
}

// errTooLarge marks a task write refused because the record would pass
// the size limit.
var errTooLarge = errors.New("task record too large")

// answerRoomShare is the share of TaskMaxValueSize a client's message (a
// create, an answer to a task waiting for input) must leave free: the
// room its agent has at least for its own answer (its status changes, a
// question, a short reply). 1/256: 4032 bytes of the default 1008 KiB
// record. A larger result still fails the task, saying why (see
// applyEventsIf).
const answerRoomShare = 256

// clientRecordMax is the most a task record may take once a client's
// message is in it (Submit, Continue): TaskMaxValueSize less the room
// kept for the agent's answer. A message past it is refused with
// schemas.ErrInvalidParams and changes nothing.
func (b *Bus) clientRecordMax() int {
	return int(b.cfg.TaskMaxValueSize) + b.clientSlack()
}

// clientSlack is update's slack for a client's write: negative, the room
// kept for the agent's answer.
func (b *Bus) clientSlack() int { return -int(b.cfg.TaskMaxValueSize) / answerRoomShare }

// messageTooLarge refuses a client's message whose task record would take
// size bytes, past clientRecordMax.
func (b *Bus) messageTooLarge(size int) *schemas.Error {
	return schemas.Errorf(schemas.ErrInvalidParams, "the message would make the task record %d bytes, more than the limit of %d (the %d-byte record bound less %d kept for the agent's answer); send a smaller message, or large content as a URL part",
		size, b.clientRecordMax(), b.cfg.TaskMaxValueSize, -b.clientSlack())
}

// failureSlack is how far past TaskMaxValueSize the write that fails a
// task for a result too large may go: the bucket's MaxValueSize keeps
// 4 KiB past the limit for headers, of which the index header takes at
// most maxIndexHeader.
const failureSlack = 1024

// errWriteUnclear marks a task write whose outcome is unknown: the bus did
// not answer, or answered with trouble (a node died before it
// acknowledged), so the write may have been stored.
var errWriteUnclear = errors.New("outcome of the write unknown")

// unclear reports whether a failed write may have been stored anyway.
func unclear(err error) bool { return errors.Is(err, errWriteUnclear) }

// settleUnclear finds out what became of a write with an unclear outcome
// by making it again with the same event ids: a stored one is recognised
// (ErrApplied) and only its events remain to publish; one that was not
// stored is stored now. Until that is known its events cannot be
// published, and nothing else would publish them later (a redelivery finds
// the task already changed), so it keeps trying, past the caller's
// cancellation, for up to publishRetryFor.
func (b *Bus) settleUnclear(ctx context.Context, taskID string, change func(*schemas.TaskRecord) error, slack int) (*schemas.TaskRecord, uint64, error) {
	var rec *schemas.TaskRecord
	var rev uint64
	err := retryWithin(context.WithoutCancel(ctx), publishRetryFor, func(actx context.Context) (bool, error) {
		var err error
		rec, rev, err = b.update(actx, taskID, nil, 0, change, slack)
		// Reading the record can fail too while the bus recovers.
		return !unclear(err) && !errors.Is(err, schemas.ErrUnavailable), err
	})
	if unclear(err) || errors.Is(err, schemas.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return nil, 0, schemas.Errorf(schemas.ErrUnavailable, "task %s: could not learn whether a write was stored; retry", taskID)
	}
	return rec, rev, err
}

// FoldWrite applies one write's events to a task record as the store
// does: ErrApplied when the record's last event is the write's (an
// earlier attempt stored it), ErrStale when since is set and the record's
// last event is no longer *since (see ApplyEventsSince), else each event
// stamped with the task and applied by the record's rules
// (schemas.TaskRecord.ApplyStatus and the others: a finished task takes
// no more) and the last one kept as the record's last event. It is the
// pure half of a write, for a store kept elsewhere (workers.Recorder
// keeps tasks in memory for agents' unit tests). Every event must have
// its id.
func FoldWrite(r *schemas.TaskRecord, since *string, evs []TaskEvent) error {
	if len(evs) == 0 {
		return errors.New("bus: fold no events")
	}
	last := evs[len(evs)-1].ID
	switch {
	case r.LastEventID == last:
		return ErrApplied
	case since != nil && r.LastEventID != *since:
		return ErrStale
	}
	if r.Generation == 0 {
		r.Generation = 1 // a record stored before generations were kept counts from here
	}
	for _, ev := range evs {
		if err := stamp(r, ev); err != nil {
			return err
		}
		r.Generation++
	}
	r.LastEventID, r.LastEventIndex = last, len(evs)-1
	return nil
}

// EventGeneration is the generation of the index-th event of the write
// that stored rec (FoldWrite gave each event one more than the one before,
// and the record keeps the last), so every publish of that write, a retry's
// or PublishMissingFinalEvent's, gives the event the same one.
func EventGeneration(rec *schemas.TaskRecord, index int) schemas.Generation {
	if rec.Generation == 0 {
		return 0
	}
	return rec.Generation - schemas.Generation(rec.LastEventIndex-index)
}

// stamp fills in an event's task and context ids and timestamp from the
// record and folds it in.
func stamp(r *schemas.TaskRecord, ev TaskEvent) error {
	// Generations are the store's to give (EventGeneration), whatever a
	// writer put in its events.
	if ev.Status != nil {
		ev.Status.Generation = 0
		ev.Status.TaskID, ev.Status.ContextID = r.Task.ID, r.Task.ContextID
		if ev.Status.Status.Timestamp == nil {
			ev.Status.Status.Timestamp = schemas.Now()
		}
		if m := ev.Status.Status.Message; m != nil {
			m.TaskID, m.ContextID = r.Task.ID, r.Task.ContextID
		}
	}
	if ev.Artifact != nil {
		ev.Artifact.Generation = 0
		ev.Artifact.TaskID, ev.Artifact.ContextID = r.Task.ID, r.Task.ContextID
	}
	if m := ev.Continue; m != nil {
		m.TaskID, m.ContextID = r.Task.ID, r.Task.ContextID
	}
	if ev.Reply != nil {
		// A message-only answer belongs to the conversation, not to a
		// task the client never saw.
		ev.Reply.ContextID, ev.Reply.TaskID = r.Task.ContextID, ""
	}
	return ev.apply(r)
}

// publishEvents publishes the events of one write: a single event in
// binary mode, several as one batch message (see cloudevents.go), so the
// write costs one publish whatever it stored.
func (b *Bus) publishEvents(ctx context.Context, rec *schemas.TaskRecord, rev uint64, evs []TaskEvent) error {
	ces := make([]outEvent, len(evs))
	for i, ev := range evs {
		ce, err := b.taskCloudEvent(rec, rev, i, ev)
		if err != nil {
			return err
		}
		ces[i] = ce
	}
	if err := b.publishEventMsgs(ctx, schemas.SubjectEvents(rec.Task.ID), ces); err != nil {
		return err
	}
	if rec.Push {
		b.wakePush(ctx, rec.Task.ID)
	}
	return nil
}

// eventsHeadroom is what a message of events leaves of the connection's
// largest payload for its headers.
const eventsHeadroom = 8 << 10

// publishEventMsgs publishes one write's events in order: as one batch
// message, or, when that would pass the largest message the server takes
// (many chunks coalesced into one write; artifacts replaced several times),
// as consecutive batches of the events in halves, each de-duplicated by its
// own last event's id. The split depends only on the events, so a retry of
// the same write publishes the same messages.
func (b *Bus) publishEventMsgs(ctx context.Context, subject string, ces []outEvent) error {
	if len(ces) == 1 {
		return b.publishStored(ctx, encodeMsg(subject, &ces[0]))
	}
	msg, err := encodeBatch(subject, ces)
	if err != nil {
		return err
	}
	if int64(len(msg.Data)) > b.nc.MaxPayload()-eventsHeadroom {
		half := len(ces) / 2
		if err := b.publishEventMsgs(ctx, subject, ces[:half]); err != nil {
			return err
		}
		return b.publishEventMsgs(ctx, subject, ces[half:])
	}
	return b.publishStored(ctx, msg)
}

// PublishMissingFinalEvent makes sure the event that settled a task is in
// its event log, and reports whether it had to publish it. A writer that
// died between storing a write and publishing its events leaves the task
// settled in the store with no settling event: its redelivered work finds
// the task finished and has nothing else to do, and every reader of the
// log would wait for an end that never comes. Whoever finds a settled task
// this way calls it: it reads the log's last event through the stream
// leader and, if that is older than the record, publishes the record's
// final status (or its reply) as the write's last event, with that
// event's id and cursor, so a publish that did land earlier is
// de-duplicated and readers order it where it belongs.
func (b *Bus) PublishMissingFinalEvent(ctx context.Context, rec *schemas.TaskRecord, rev uint64) (bool, error) {
	if !rec.Task.Status.State.Settled() || rec.LastEventID == "" {
		return false, nil
	}
	last, derr, err := b.lastStoredEvent(ctx, rec.Task.ID)
	if err != nil {
		return false, err
	}
	if derr == nil && last.LastCursor() > 0 && last.LastCursor() >= RecordCursor(rec, rev) {
		return false, nil
	}
	ev := TaskEvent{ID: rec.LastEventID}
	if rec.Reply != nil {
		ev.Reply = rec.Reply
	} else {
		ev.Status = &schemas.TaskStatusUpdateEvent{TaskID: rec.Task.ID, ContextID: rec.Task.ContextID, Status: rec.Task.Status}
	}
	ce, err := b.taskCloudEvent(rec, rev, rec.LastEventIndex, ev)
	if err != nil {
		return false, err
	}
	if err := b.publishStored(ctx, encodeMsg(schemas.SubjectEvents(rec.Task.ID), &ce)); err != nil {
		return false, err
	}
	if rec.Push {
		b.wakePush(ctx, rec.Task.ID)
	}
	return true, nil
}

// publishRetryFor bounds the retries of publishing a stored write's
// events, and of settling a write whose outcome is unclear.
const publishRetryFor = 30 * time.Second

// publishStored publishes the events of a write that is already stored.
// Nothing can publish them later (a redelivery finds the task already
// changed and has only the record), so a failed publish is retried — with
// the same Nats-Msg-Id, a repeat is de-duplicated — through the seconds a
// cluster needs to elect a new stream leader after losing a node. The
// caller's cancellation does not cut this short (a worker shutting down
// still publishes what it stored); publishRetryFor bounds it.
func (b *Bus) publishStored(ctx context.Context, msg *nats.Msg) error {
	err := retryWithin(context.WithoutCancel(ctx), publishRetryFor, func(actx context.Context) (bool, error) {
		_, err := b.publish(actx, msg)
		return err == nil, err
	})
	if err != nil {
		return errUnavailable("bus: publish task event", err)
	}
	return nil
}

// taskCloudEvent is the CloudEvent of the index-th event of the write that
// produced revision rev.
func (b *Bus) taskCloudEvent(rec *schemas.TaskRecord, rev uint64, index int, ev TaskEvent) (outEvent, error) {
	var typ string
	var data any
	switch {
	case ev.Status != nil:
		typ, data = schemas.TypeTaskStatus, ev.Status
	case ev.Continue != nil:
		typ, data = schemas.TypeTaskStatus, &schemas.TaskStatusUpdateEvent{TaskID: rec.Task.ID, ContextID: rec.Task.ContextID, Status: rec.Task.Status}
	case ev.Artifact != nil:
		typ, data = schemas.TypeTaskArtifact, ev.Artifact
	default:
		typ, data = schemas.TypeTaskMessage, ev.Reply
	}
	idx := "" // the first of a write carries none (newEvent leaves out empty extensions)
	if index > 0 {
		idx = strconv.Itoa(index)
	}
	gen := "" // none for a record stored before generations were kept
	if g := EventGeneration(rec, index); g > 0 {
		gen = strconv.FormatInt(int64(g), 10)
	}
	return b.newEvent(ev.ID, typ, rec.Task.ID, data, attr{schemas.ExtSequence, schemas.SequenceString(rev)}, attr{schemas.ExtSequenceIndex, idx}, attr{schemas.ExtGeneration, gen})
}

// Retention bounds the finished tasks kept besides their TTL. Zero fields
// do not bound.
type Retention struct {
	// MaxCount is how many finished tasks are kept.
	MaxCount int
	// MaxBytes bounds the stored size of all finished task records.
	MaxBytes int64
}

// SweepOptions says what one TaskIndex.Sweep does.
type SweepOptions struct {
	// Keep bounds the finished tasks: the oldest finished, by status
	// time, are deleted until both bounds hold; an unfinished task is
	// never touched.
	Keep Retention
	// OrphanAfter, when positive, also requeues the work of tasks that
	// have been SUBMITTED this long with no work queued.
	OrphanAfter time.Duration
	// IdleAfter, when positive, cancels tasks that have waited this long
	// for input (INPUT_REQUIRED, AUTH_REQUIRED), with the reason: a
	// client that went away does not hold its tasks for ever.
	IdleAfter time.Duration
}

// SweepResult counts what a sweep did.
// ExpiredApproval is a task whose approval a sweep settled unanswered.
type ExpiredApproval struct {
	TaskID, Agent, Decision string
}

type SweepResult struct {
	Deleted, Requeued, Expired int
	// ApprovalsExpired are the tasks whose pending approval it settled at
	// its expiry (or the task's deadline), for the edge's audit record.
	ApprovalsExpired []ExpiredApproval
	// EventsDropped counts the deleted tasks whose events were deleted.
	EventsDropped int
}

// orphanCandidate is a task that has been SUBMITTED for a while: its work
// is either still queued (a long backlog) or lost.
type orphanCandidate struct {
	id, agent string
	rev       uint64
}

// requeueOrphans queues the work of the candidates that have none: tasks
// SUBMITTED for a while, whose work is either still queued (a long
// backlog) or lost. Such a task is what a process leaves when it dies
// between storing a task and queueing its work (or a node dies before
// acknowledging either, or a refused request could not withdraw its
// task). The work stream is asked (through its leader) whether the task's
// work subject holds work before the task is read again from its leader:
// work acknowledged between the two steps moved its task past the
// revision seen, so a task still at that revision with no work has lost
// it. The work is queued under the submission's own event id, so
// processes that requeue at once leave one copy.
func (b *Bus) requeueOrphans(ctx context.Context, cands []orphanCandidate) (int, error) {
	// queued reports whether c's work is queued, or its agent has work
	// from an edge that predates per-task subjects, which cannot be told
	// apart: either way c is left alone.
	queued := func(c orphanCandidate) (bool, error) {
		for _, w := range []struct{ stream, subject string }{
			{schemas.StreamIntake, schemas.SubjectIntakeTask(c.agent, c.id)},
			{schemas.StreamWork, schemas.SubjectWorkTask(c.agent, c.id)},
			{schemas.StreamWork, schemas.SubjectWork(c.agent)},
		} {
			_, err := b.leaderGet(ctx, w.stream, w.subject)
			if errors.Is(err, errNoMessage) {
				continue
			}
			if err != nil {
				return false, errUnavailable("bus: read work stream", err)
			}
			return true, nil
		}
		return false, nil
	}
	n := 0
	for _, c := range cands {
		q, err := queued(c)
		if err != nil {
			return n, err
		}
		if q {
			continue
		}
		val, rev, err := b.readTask(ctx, c.id, true)
		if err != nil {
			if errors.Is(err, schemas.ErrTaskNotFound) {
				continue
			}
			return n, err
		}
		rec, err := decodeRecord(val)
		if err != nil || rev != c.rev || rec.Task.Status.State != schemas.TaskStateSubmitted || len(rec.Task.History) == 0 {
			continue
		}
		if err := b.requeueSubmission(ctx, rec, rev, PublishOptions{}); err != nil {
			return n, err
		}
		b.log.Warn("requeued the work of a task left without it", "task_id", c.id, "agent", rec.Agent, "revision", rev)
		n++
	}
	return n, nil
}
