package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// Reading a task's events. Every change to a task is stored (KV, revision
// R) and then published on a2a.events.<taskId> with the CloudEvent sequence
// R. A reader starts from the first stored event of the task and passes on
// only events newer than the revision it was given, in stream order, each at
// most once: that makes the task revision a resume cursor any edge can
// serve, and lets a reader start exactly after a KV snapshot (no gap, no
// duplicate). An event older than one already passed on (two writers raced
// to publish) describes a superseded state and is dropped.

// TaskUpdate is one event of a task: exactly one of Status, Artifact, Reply.
type TaskUpdate struct {
	// Rev is the task revision the event produced.
	Rev uint64
	// Cursor orders the task's events, also those of one revision (see
	// EventCursor); it is the resume cursor.
	Cursor uint64
	// ID is the event's CloudEvent id: what a receiver of notifications
	// de-duplicates by.
	ID string
	// Generation is the task's generation after the event (see
	// schemas.TaskRecord.Generation); 0 for an event stored before
	// generations were kept. The event's data does not carry it: an A2A
	// 1.1 answer adds it to its own copy.
	Generation schemas.Generation
	Status     *schemas.TaskStatusUpdateEvent
	Artifact   *schemas.TaskArtifactUpdateEvent
	Reply      *schemas.Message
}

// cursorBits is the room a cursor leaves for events of one revision: one
// write stores at most 1<<cursorBits - 1 events (an agent's streamed
// chunks are coalesced into writes of many events, see workers.Emitter),
// and revisions up to 1<<52 remain. Cursors of releases before it had 4
// bits; the edge reads those as such (its SSE ids name the version).
const cursorBits = 12

// MaxEventsPerWrite bounds the events one write may store.
const MaxEventsPerWrite = 1<<cursorBits - 1

// EventCursor is the cursor of the index-th event stored with revision rev.
func EventCursor(rev uint64, index int) uint64 { return rev<<cursorBits | uint64(index) }

// SplitCursor is the revision and index of a cursor (EventCursor's inverse).
func SplitCursor(c uint64) (rev uint64, index int) {
	return c >> cursorBits, int(c & MaxEventsPerWrite)
}

// MaxRevision is the largest revision a cursor can carry.
const MaxRevision = 1<<(64-cursorBits) - 1

// EarlierCursor reads a cursor of a release before this one's layout
// (revision<<4 | index), which a client may hold across an upgrade; false
// when its revision is past MaxRevision.
func EarlierCursor(c uint64) (uint64, bool) {
	const earlierBits = 4
	rev := c >> earlierBits
	return EventCursor(rev, int(c&(1<<earlierBits-1))), rev <= MaxRevision
}

// RecordCursor is the cursor of the last event stored with a record read
// at revision rev: a reader that has it has everything up to that record.
func RecordCursor(rec *schemas.TaskRecord, rev uint64) uint64 {
	return EventCursor(rev, rec.LastEventIndex)
}

// SnapshotCursor is the cursor just after every event of revision rev: a
// reader that holds the record at rev starts here.
func SnapshotCursor(rev uint64) uint64 { return rev<<cursorBits | MaxEventsPerWrite }

// ErrReaderOverflow ends a reader whose consumer did not keep up: its buffer
// filled. The consumer resumes with a new reader from its last cursor.
var ErrReaderOverflow = errors.New("bus: event reader buffer full; resume from the last cursor")

// readerOpenRetryFor bounds how long opening a reader keeps trying while
// the bus cannot serve it. After a node is killed, until the others have
// elected new leaders (a follower waits 4 to 9 seconds before it
// campaigns) and count the node as gone, a request can go unanswered or be
// told "temporarily unavailable", though the same request a moment later
// succeeds (measured with a node killed: refusals for up to about 10s).
// Like a submit (submitRetryFor), opening a reader rides that out rather
// than refusing the client. (A variable only so that a test can make room
// for a slower election.)
var readerOpenRetryFor = 15 * time.Second

// eventHub serves every event reader of one process from one follower of
// the events stream (all tasks' subjects), fanned out in memory by task
// id, so a subscriber costs no JetStream consumer: ten thousand SSE
// subscribers on an edge are ten thousand map entries and channels, not
// ten thousand consumers (a stream allows a thousand by default). A task
// that nobody reads costs the hub a subject check per event.
//
// The hub owns pos, the stream sequence up to which it has handed every
// event on. A reader registers at pos, reads what the stream stored for
// its task up to pos (usually nothing newer than the record it started
// from: one read of the task's last event tells), and gets every event
// after pos from the hub, in stream order, none missed and none twice.
type eventHub struct {
	b       *Bus
	f       *follower
	ready   chan struct{}
	mu      sync.Mutex
	pos     uint64
	readers map[string]map[*EventReader]struct{}
}

// events returns the process's hub, started on first use; it runs until
// the connection closes.
func (b *Bus) events() *eventHub {
	b.hubOnce.Do(func() {
		h := &eventHub{b: b, ready: make(chan struct{}), readers: map[string]map[*EventReader]struct{}{}}
		h.f = b.newFollower("events", schemas.StreamEvents, jetstream.DeliverNewPolicy, schemas.SubjectEventsAll)
		ctx, stop := context.WithCancel(context.Background())
		b.hubStop = stop
		go func() {
			prefix := schemas.SubjectEvents("")
			_ = h.f.run(ctx, func(m followMsg) {
				h.dispatch(strings.TrimPrefix(m.Subject, prefix), m)
			}, func() {
				h.mu.Lock()
				h.pos = max(h.pos, h.f.cursor)
				h.mu.Unlock()
				close(h.ready)
			})
		}()
		b.hub = h
	})
	return b.hub
}

// dispatch hands one stored message of the events stream to the readers
// of its task.
func (h *eventHub) dispatch(taskID string, m followMsg) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pos = m.Seq
	rs := h.readers[taskID]
	if len(rs) == 0 {
		return
	}
	us, err := decodeUpdates(&nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Value})
	if err != nil {
		h.b.log.Warn("skipping undecodable task event", "subject", m.Subject, "err", err)
		return
	}
	for r := range rs {
		r.live(us)
	}
}

// add registers r for its task's events after the hub's position, and
// returns that position.
func (h *eventHub) add(r *EventReader) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := h.readers[r.taskID]
	if rs == nil {
		rs = map[*EventReader]struct{}{}
		h.readers[r.taskID] = rs
	}
	rs[r] = struct{}{}
	return h.pos
}

func (h *eventHub) remove(r *EventReader) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rs := h.readers[r.taskID]; rs != nil {
		delete(rs, r)
		if len(rs) == 0 {
			delete(h.readers, r.taskID)
		}
	}
}

// count is how many readers are registered now.
func (h *eventHub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, rs := range h.readers {
		n += len(rs)
	}
	return n
}

// EventReader delivers a task's events; see ReadEvents.
type EventReader struct {
	b      *Bus
	hub    *eventHub
	taskID string
	ch     chan []TaskUpdate

	mu   sync.Mutex
	err  error
	done bool
	last uint64
	// afterGen: only events of a later generation pass (ReadEventsAfterGeneration).
	afterGen schemas.Generation
	// While the reader reads what was stored before it registered, the
	// hub's events wait in pending (bounded by the buffer too).
	replaying bool
	pending   [][]TaskUpdate
	// The replay waits for the consumer of the reader (it never
	// overflows the buffer, however much is stored): sending says a
	// replay send is under way, so finish leaves closing ch to it
	// (closeLater), and stopped, closed by finish, ends the wait.
	sending, closeLater bool
	stopped             chan struct{}
}

// ReadEvents opens a reader of the events of task taskID with cursors
// greater than after (0: all; SnapshotCursor(rev): those after a record
// read at rev). Events come in groups, as stored: the events of one write
// (a burst of streamed chunks is one write), or what of them is newer than
// the cursor. At most buffer groups wait undelivered, so a reader holds
// references, never copies, of what the hub decoded once for every reader;
// when a slow consumer lets more pile up, the reader ends with
// ErrReaderOverflow (it never slows the publisher or other readers).
// Close it when done.
//
// While the bus cannot serve it (a leader is being elected) it retries for
// up to readerOpenRetryFor within ctx; an error still matching
// schemas.ErrUnavailable after that is the caller's to answer as
// retryable.
func (b *Bus) ReadEvents(ctx context.Context, taskID string, after uint64, buffer int) (*EventReader, error) {
	return b.readEvents(ctx, taskID, after, 0, buffer, false)
}

// ReadEventsAfterGeneration is ReadEvents from the event after generation
// gen (see schemas.TaskRecord.Generation): what an A2A 1.1 client that
// saw gen resumes from. A generation says nothing of where the event is
// stored, so the reader replays the task's stored events from its first
// (they are on the task's own subject, which the stream indexes) and
// passes on those of a later generation; an event stored before
// generations were kept has none and never passes.
func (b *Bus) ReadEventsAfterGeneration(ctx context.Context, taskID string, gen schemas.Generation, buffer int) (*EventReader, error) {
	return b.readEvents(ctx, taskID, 0, gen, buffer, false)
}

// ReadNewTaskEvents is ReadEvents for a task a Submit is creating, called
// from its Follow with the created revision's SnapshotCursor: the task's
// work is not queued yet, so no event after that cursor can be stored (an
// earlier task of a derived id left only older cursors), and every one
// will be stored after the hub's position the reader registers at. The
// reader skips asking the events stream's leader for the task's last
// stored event, a round trip per stream.
func (b *Bus) ReadNewTaskEvents(ctx context.Context, taskID string, after uint64, buffer int) (*EventReader, error) {
	return b.readEvents(ctx, taskID, after, 0, buffer, true)
}

func (b *Bus) readEvents(ctx context.Context, taskID string, after uint64, afterGen schemas.Generation, buffer int, fresh bool) (*EventReader, error) {
	if !schemas.ValidTaskID(taskID) {
		return nil, fmt.Errorf("bus: read events: invalid task id %q", taskID)
	}
	if buffer <= 0 {
		buffer = 256
	}
	h := b.events()
	if h == nil {
		return nil, fmt.Errorf("bus: read events: %w", nats.ErrConnectionClosed)
	}
	wctx, cancel := context.WithTimeout(ctx, readerOpenRetryFor)
	select {
	case <-h.ready:
		cancel()
	case <-wctx.Done():
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, schemas.Errorf(schemas.ErrUnavailable, "the events of task %s cannot be followed yet; retry", taskID)
	}
	r := &EventReader{b: b, hub: h, taskID: taskID, ch: make(chan []TaskUpdate, buffer), last: after, afterGen: afterGen, replaying: true, stopped: make(chan struct{})}
	pos := h.add(r)
	retryable := func(err error) bool {
		return errors.Is(err, schemas.ErrUnavailable) && !errors.Is(err, nats.ErrConnectionClosed)
	}
	var stale bool
	var err error
	if !fresh {
		err = retryWithin(ctx, readerOpenRetryFor, func(actx context.Context) (bool, error) {
			var err error
			stale, err = r.behind(actx)
			return !retryable(err), err
		})
	}
	if err != nil {
		h.remove(r)
		return nil, err
	}
	if !stale {
		r.mu.Lock()
		r.endReplay()
		r.mu.Unlock()
		return r, nil
	}
	// The stored events are read while the caller drains the reader.
	go func() {
		rctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-r.stopped:
				cancel()
			case <-rctx.Done():
			}
		}()
		// A replay reads in a place (Config.MaxReplays) with a
		// consumer of its own, as fast as its reader takes the events;
		// a reader that stops taking them for replayStall loses the
		// place and the consumer, gets what was read without them, and
		// the replay goes on from there in a new place. A slow client
		// so never holds up other resumes, and replays never hold more
		// consumers than places. A reader closed meanwhile gives up
		// its turn.
		from := uint64(1)
		for {
			select {
			case b.replays <- struct{}{}:
			case <-rctx.Done():
				return
			}
			var held []TaskUpdate
			var done bool
			var err error
			// A run that fails (a leader being elected) is tried again
			// from where it got to, for readerOpenRetryFor without
			// progress.
			for stuck, wait := time.Now(), 50*time.Millisecond; ; wait = min(2*wait, time.Second) {
				at := from
				held, from, done, err = r.replay(rctx, from, pos)
				if err == nil || !retryable(err) || !sleepCtx(rctx, wait) {
					break
				}
				if from != at {
					stuck = time.Now()
				} else if time.Since(stuck) > readerOpenRetryFor {
					break
				}
			}
			<-b.replays
			if err != nil {
				r.mu.Lock()
				r.finish(err)
				r.mu.Unlock()
				return
			}
			if len(held) > 0 && !r.put(held) {
				return
			}
			if done {
				break
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.endReplay()
	}()
	return r, nil
}

// endReplay hands on the hub's events that waited for the replay; r.mu is
// held.
func (r *EventReader) endReplay() {
	r.replaying = false
	pending := r.pending
	r.pending = nil
	for _, us := range pending {
		r.deliver(us)
	}
}

// newer is the part of us (one stored message's events, in cursor order,
// which is generation order) after the reader's cursor and generation;
// r.mu is held. An older event (two writers raced to publish) describes a
// superseded state and is dropped.
func (r *EventReader) newer(us []TaskUpdate) []TaskUpdate {
	for i, u := range us {
		if u.Cursor > r.last && (r.afterGen == 0 || u.Generation > r.afterGen) {
			return us[i:]
		}
	}
	return nil
}

// behind tells whether the stream stores events of the task newer than
// the reader's cursor: the task's last stored event says.
func (r *EventReader) behind(ctx context.Context) (bool, error) {
	last, derr, err := r.b.lastStoredEvent(ctx, r.taskID)
	if err != nil || last.Seq == 0 {
		return false, err
	}
	r.mu.Lock()
	after := r.last
	r.mu.Unlock()
	// Nothing stored is newer than the cursor: what is stored after the
	// hub's position the hub delivers (and the reader drops as old).
	return derr != nil || last.LastCursor() > after, nil
}

// put passes on the events newer than the reader's cursor, waiting for
// room in the buffer; false once the reader has ended.
func (r *EventReader) put(us []TaskUpdate) bool {
	_, open := r.putWithin(us, 0)
	return open
}

// putWithin is put waiting at most d for room (0: as long as it takes):
// taken reports whether the events went (or none was newer), open whether
// the reader goes on.
func (r *EventReader) putWithin(us []TaskUpdate, d time.Duration) (taken, open bool) {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return false, false
	}
	us = r.newer(us)
	if len(us) == 0 {
		r.mu.Unlock()
		return true, true
	}
	r.sending = true
	r.mu.Unlock()
	sent := false
	select {
	case r.ch <- us:
		sent = true
	case <-r.stopped:
	case <-timeout:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sending = false
	if sent {
		r.last = us[len(us)-1].Cursor
	}
	if r.done && r.closeLater {
		r.closeLater = false
		close(r.ch)
	}
	return sent, !r.done
}

// replayStall is how long a replay waits for its reader to take events
// before it gives up its place and consumer until the reader has.
const replayStall = time.Second

// replay delivers the task's events the stream stored from stream
// sequence from up to pos (behind said some are newer than the reader's
// cursor), through a consumer that lives for the read, at the pace the
// reader is drained. It returns the events the reader did not take within
// replayStall (to be put without the place), the sequence to go on from,
// and done when nothing more is to be read.
func (r *EventReader) replay(ctx context.Context, from, pos uint64) (held []TaskUpdate, next uint64, done bool, err error) {
	subject := schemas.SubjectEvents(r.taskID)
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy, InactiveThreshold: 30 * time.Second}
	if from > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := r.b.js.OrderedConsumer(ctx, schemas.StreamEvents, cfg)
	if err != nil {
		return nil, from, false, errUnavailable("bus: read task events", err)
	}
	defer func() {
		if info := cons.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptLimit)
			_ = r.b.js.DeleteConsumer(dctx, schemas.StreamEvents, info.Name)
			cancel()
		}
	}()
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(attemptLimit))
		if err != nil {
			if ctx.Err() != nil {
				return nil, from, false, ctx.Err()
			}
			return nil, from, false, errUnavailable("bus: read task events", err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return nil, from, false, errUnavailable("bus: read task events", err)
		}
		if meta.Sequence.Stream > pos {
			return nil, from, true, nil // the hub hands on the rest
		}
		from = meta.Sequence.Stream + 1
		last := meta.Sequence.Stream == pos || meta.NumPending == 0
		us, err := decodeUpdates(&nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
		if err != nil {
			r.b.log.Warn("skipping undecodable task event", "subject", m.Subject(), "err", err)
		} else {
			stall := replayStall
			if r.b.cfg.replayStall > 0 {
				stall = r.b.cfg.replayStall
			}
			switch taken, open := r.putWithin(us, stall); {
			case !open:
				return nil, from, true, nil
			case !taken:
				// The reader takes these in its own time, with no
				// place or consumer held.
				return us, from, last, nil
			}
		}
		if last {
			return nil, from, true, nil
		}
	}
}

// live takes events from the hub; while the reader replays they wait.
// The hub's lock is held: it never blocks.
func (r *EventReader) live(us []TaskUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.replaying {
		if len(r.pending) >= cap(r.ch) {
			r.finish(ErrReaderOverflow)
			return
		}
		r.pending = append(r.pending, us)
		return
	}
	r.deliver(us)
}

// deliver passes on the events newer than the reader's cursor; r.mu is
// held.
func (r *EventReader) deliver(us []TaskUpdate) {
	if r.done {
		return
	}
	if us = r.newer(us); len(us) == 0 {
		return
	}
	select {
	case r.ch <- us:
		r.last = us[len(us)-1].Cursor
	default:
		r.finish(ErrReaderOverflow)
	}
}

// finish ends the reader with err; r.mu is held.
func (r *EventReader) finish(err error) {
	if r.done {
		return
	}
	r.done, r.err = true, err
	close(r.stopped)
	if r.sending {
		r.closeLater = true // put closes ch once its send gave up
		return
	}
	close(r.ch)
}

// C delivers the events, in order, in groups (see ReadEvents); it is
// closed when the reader ends. A group is shared with the process's other
// readers of the task: read it, never change it.
func (r *EventReader) C() <-chan []TaskUpdate { return r.ch }

// Events is C one event at a time, for a consumer that waits on nothing
// else; it ends when the reader does, or when the loop breaks.
func (r *EventReader) Events() iter.Seq[TaskUpdate] {
	return func(yield func(TaskUpdate) bool) {
		for us := range r.ch {
			for _, u := range us {
				if !yield(u) {
					return
				}
			}
		}
	}
}

// Err tells why C was closed: ErrReaderOverflow; the error that ended a
// replay of what was stored (the bus could not serve it within
// readerOpenRetryFor); or nil after Close.
func (r *EventReader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close stops the reader.
func (r *EventReader) Close() {
	r.hub.remove(r)
	r.mu.Lock()
	r.finish(nil)
	r.mu.Unlock()
}

// decodeUpdates reads the events of one message on a task's event subject
// (one event, or the batch of one write) in order; none from the marker
// of a deleted task.
func decodeUpdates(m *nats.Msg) ([]TaskUpdate, error) {
	if m.Header.Get(schemas.HeaderTaskDeleted) != "" {
		return nil, nil // a deleted task's marker (Bus.dropEvents): no event
	}
	if us := decodeBatchUpdates(m); us != nil {
		return us, nil
	}
	evs, err := decodeMsgs(m)
	if err != nil {
		return nil, err
	}
	us := make([]TaskUpdate, len(evs))
	for i := range evs {
		if us[i], err = decodeUpdate(&evs[i]); err != nil {
			return nil, err
		}
	}
	return us, nil
}

// batchEvent is the part of a structured-mode CloudEvent a task update
// needs.
type batchEvent struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	DataContentType string          `json:"datacontenttype"`
	Sequence        json.RawMessage `json:"sequence"`
	SequenceIndex   json.RawMessage `json:"sequenceindex"`
	Generation      json.RawMessage `json:"a2ageneration"`
	Data            *eventData      `json:"data"`
}

// eventData holds the data of any of the three task event types, so that a
// batch is read in one pass of the decoder rather than each event's data
// kept as raw bytes (scanned twice more) and read again by type. The types
// share taskId, contextId and metadata; a field of another type that does
// not decode makes the batch fall back to the general reading, which
// ignores it as the type's own reading does.
type eventData struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Metadata  map[string]any `json:"metadata"`
	// a status update's
	Status *schemas.TaskStatus `json:"status"`
	// an artifact update's
	Artifact  *schemas.Artifact `json:"artifact"`
	Append    bool              `json:"append"`
	LastChunk bool              `json:"lastChunk"`
	// a message's
	MessageID        string         `json:"messageId"`
	Role             schemas.Role   `json:"role"`
	Parts            []schemas.Part `json:"parts"`
	Extensions       []string       `json:"extensions"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds"`
}

// update is the data as the event of type typ.
func (d *eventData) update(u *TaskUpdate, typ string) bool {
	switch typ {
	case schemas.TypeTaskStatus:
		u.Status = &schemas.TaskStatusUpdateEvent{TaskID: d.TaskID, ContextID: d.ContextID, Metadata: d.Metadata}
		if d.Status != nil {
			u.Status.Status = *d.Status
		}
	case schemas.TypeTaskArtifact:
		u.Artifact = &schemas.TaskArtifactUpdateEvent{TaskID: d.TaskID, ContextID: d.ContextID, Metadata: d.Metadata, Append: d.Append, LastChunk: d.LastChunk}
		if d.Artifact != nil {
			u.Artifact.Artifact = *d.Artifact
		}
	case schemas.TypeTaskMessage:
		u.Reply = &schemas.Message{MessageID: d.MessageID, ContextID: d.ContextID, TaskID: d.TaskID, Role: d.Role, Parts: d.Parts,
			Metadata: d.Metadata, Extensions: d.Extensions, ReferenceTaskIDs: d.ReferenceTaskIDs}
	default:
		return false
	}
	return true
}

// decodeBatchUpdates reads a batch of task events straight into updates,
// or returns nil for decodeMsgs to read it and say what is wrong. A write
// of many chunks is one batch, and every edge's hub decodes every one:
// sdk-go's generic event (attributes, extension maps, the data as bytes
// decoded again) cost several times this.
func decodeBatchUpdates(m *nats.Msg) []TaskUpdate {
	if !strings.HasPrefix(strings.ToLower(headerFold(m.Header, "Content-Type")), contentBatch) {
		return nil
	}
	var evs []batchEvent
	if readJSON(m.Data, &evs) != nil || len(evs) == 0 {
		return nil
	}
	us := make([]TaskUpdate, len(evs))
	for i := range evs {
		ev := &evs[i]
		if ev.SpecVersion != cloudevents.CloudEventsVersionV1 || ev.ID == "" || ev.Source == "" || ev.Data == nil ||
			(ev.DataContentType != "" && !strings.HasPrefix(ev.DataContentType, "application/json")) {
			return nil
		}
		u, err := updateAt(rawText(ev.Sequence), rawText(ev.SequenceIndex), rawText(ev.Generation))
		if err != nil || !ev.Data.update(&u, ev.Type) {
			return nil
		}
		u.ID = ev.ID
		us[i] = u
	}
	return us
}

// rawText is an extension value as text: a JSON string's content (without
// decoding escapes: a value that has any is not a number, and is left to
// the general reading) or a number's digits; "" when absent.
func rawText(raw json.RawMessage) string {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		raw = raw[1 : n-1]
	}
	return string(raw)
}

// decodeUpdate reads one task event. Extension values are read as text:
// sdk-go types a number in a structured event as an integer.
func decodeUpdate(ev *cloudevents.Event) (TaskUpdate, error) {
	u, err := taskUpdate(ev.Type(), extString(ev, schemas.ExtSequence), extString(ev, schemas.ExtSequenceIndex), extString(ev, schemas.ExtGeneration), ev.Data())
	u.ID = ev.ID()
	return u, err
}

// taskUpdate is the update of a task event of type typ with data, its
// sequence, sequence index and generation as written (an absent index or
// generation is 0): both readings of task events end here.
func taskUpdate(typ, seq, index, gen string, data []byte) (TaskUpdate, error) {
	u, err := updateAt(seq, index, gen)
	if err != nil {
		return u, err
	}
	switch typ {
	case schemas.TypeTaskStatus:
		u.Status = new(schemas.TaskStatusUpdateEvent)
		err = readJSON(data, u.Status)
	case schemas.TypeTaskArtifact:
		u.Artifact = new(schemas.TaskArtifactUpdateEvent)
		err = readJSON(data, u.Artifact)
	case schemas.TypeTaskMessage:
		u.Reply = new(schemas.Message)
		err = readJSON(data, u.Reply)
	default:
		return u, fmt.Errorf("%w: unexpected type %q on an events subject", errMalformedEvent, typ)
	}
	if err != nil {
		return u, fmt.Errorf("%w: %s data: %v", errMalformedEvent, typ, err)
	}
	return u, nil
}

// updateAt is an update with the revision and cursor of an event's
// sequence and sequence index, and its generation, as written (an absent
// index or generation is 0).
func updateAt(seq, index, gen string) (TaskUpdate, error) {
	var u TaskUpdate
	var err error
	u.Rev, err = strconv.ParseUint(seq, 10, 64)
	if err != nil || u.Rev > MaxRevision {
		return u, fmt.Errorf("%w: sequence %q", errMalformedEvent, seq)
	}
	i := 0
	if index != "" {
		if i, err = strconv.Atoi(index); err != nil || i < 0 || i > MaxEventsPerWrite {
			return u, fmt.Errorf("%w: sequence index %q", errMalformedEvent, index)
		}
	}
	u.Cursor = EventCursor(u.Rev, i)
	if gen != "" {
		g, err := strconv.ParseInt(gen, 10, 64)
		if err != nil || g < 1 {
			return u, fmt.Errorf("%w: generation %q", errMalformedEvent, gen)
		}
		u.Generation = schemas.Generation(g)
	}
	return u, nil
}

// extString is an extension attribute's value as text ("" when absent).
func extString(ev *cloudevents.Event, name string) string {
	v, ok := ev.Extensions()[name]
	if !ok || v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// eventReaders returns how many consumers the events stream has now,
// across all processes (each process's hub has one; a reader catching up
// on stored events has one for that while); for tests
// (bustest.EventReaders).
func (b *Bus) eventReaders(ctx context.Context) (int, error) {
	st, err := b.js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Consumers, nil
}

// eventSubscribers counts the readers of this process open now.
func (b *Bus) eventSubscribers() int {
	if h := b.events(); h != nil {
		return h.count()
	}
	return 0
}
