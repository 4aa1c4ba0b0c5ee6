package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
	Cursor   uint64
	Status   *schemas.TaskStatusUpdateEvent
	Artifact *schemas.TaskArtifactUpdateEvent
	Reply    *schemas.Message
}

// cursorBits is the room a cursor leaves for events of one revision: one
// write stores at most 1<<cursorBits events.
const cursorBits = 4

// MaxEventsPerWrite bounds the events one write may store.
const MaxEventsPerWrite = 1<<cursorBits - 1

// EventCursor is the cursor of the index-th event stored with revision rev.
func EventCursor(rev uint64, index int) uint64 { return rev<<cursorBits | uint64(index) }

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

// EventReader delivers a task's events; see ReadEvents.
type EventReader struct {
	b      *Bus
	taskID string
	ch     chan TaskUpdate
	// stopWatch ends the stall watch; watched is closed when it has ended.
	stopWatch context.CancelFunc
	watched   chan struct{}

	mu   sync.Mutex
	cc   jetstream.ConsumeContext // replaced by the stall watch
	cons jetstream.Consumer
	err  error
	done bool
	last uint64
	// moved is set by every delivery and cleared by the stall watch.
	moved bool
}

// A reader whose consumer sits on a replica still catching up (after a
// node restart) or on a node that is gone may deliver nothing while the
// task's events are in the stream. Its stall watch checks, each
// readerStallAfter with no delivery, whether the task's record holds
// events the reader has not delivered, and if so replaces the consumer
// from the reader's cursor, at most maxReaderReplacements times. The watch
// ends once the reader has caught up with the record: after that, quiet
// means the task is quiet, and the ordered consumer's own heartbeats watch
// the consumer.
const (
	readerStallAfter      = 2 * time.Second
	maxReaderReplacements = 3
)

// readerOpenRetryFor bounds how long opening a reader keeps trying while
// the bus cannot take it. A reader's consumer is created by the cluster's
// meta leader and placed on a member that holds the stream. After a node
// is killed, until the others have elected new leaders (a follower waits 4
// to 9 seconds before it campaigns) and count the node as gone, a create
// can go unanswered or be told "temporarily unavailable", though the same
// create a moment later succeeds (measured with a node killed: refusals
// for up to about 10s). Like a submit (submitRetryFor), opening a reader
// rides that out rather than refusing the client. (A variable only so that
// a test can make room for a slower election.)
var readerOpenRetryFor = 15 * time.Second

// ReadEvents opens a reader of the events of task taskID with cursors
// greater than after (0: all; SnapshotCursor(rev): those after a record
// read at rev). At most buffer events wait undelivered; when a slow
// consumer lets more pile up, the reader ends with ErrReaderOverflow (it
// never slows the publisher or other readers). Close it when done.
//
// While the bus cannot create the reader's consumer (a leader is being
// elected) it retries for up to readerOpenRetryFor within ctx; an error
// still matching schemas.ErrUnavailable after that is the caller's to
// answer as retryable.
func (b *Bus) ReadEvents(ctx context.Context, taskID string, after uint64, buffer int) (*EventReader, error) {
	if !schemas.ValidTaskID(taskID) {
		return nil, fmt.Errorf("bus: read events: invalid task id %q", taskID)
	}
	if buffer <= 0 {
		buffer = 256
	}
	cons, err := b.openEventConsumer(ctx, taskID)
	if err != nil {
		return nil, err
	}
	r := &EventReader{b: b, taskID: taskID, ch: make(chan TaskUpdate, buffer), watched: make(chan struct{}), cons: cons, last: after}
	if r.cc, err = r.consume(cons); err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(context.Background())
	r.stopWatch = stop
	go r.watchStall(wctx)
	return r, nil
}

// consume starts delivering cons's messages to the reader.
func (r *EventReader) consume(cons jetstream.Consumer) (jetstream.ConsumeContext, error) {
	cc, err := cons.Consume(r.handle, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		// Ordered consumers recreate themselves after these; only log.
		r.b.log.Debug("event reader", "task_id", r.taskID, "err", err)
	}))
	if err != nil {
		return nil, errUnavailable("bus: start event reader", err)
	}
	return cc, nil
}

// watchStall is the reader's stall watch (see readerStallAfter); it ends
// when the reader is closed or has caught up with the task's record.
func (r *EventReader) watchStall(ctx context.Context) {
	defer close(r.watched)
	t := time.NewTicker(readerStallAfter)
	defer t.Stop()
	for replaced := 0; replaced < maxReaderReplacements; {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		moved, last, done := r.moved, r.last, r.done
		r.moved = false
		r.mu.Unlock()
		if done {
			return
		}
		if moved {
			continue
		}
		rctx, rcancel := context.WithTimeout(ctx, attemptLimit)
		rec, rev, err := r.b.GetTask(rctx, r.taskID)
		rcancel()
		if err != nil {
			continue
		}
		if RecordCursor(rec, rev) <= last {
			return // caught up: nothing is missing
		}
		cons, err := r.b.openEventConsumer(ctx, r.taskID)
		if err != nil {
			continue
		}
		cc, err := r.consume(cons)
		if err != nil {
			continue
		}
		r.mu.Lock()
		oldCC, oldCons := r.cc, r.cons
		r.cc, r.cons = cc, cons
		r.mu.Unlock()
		r.b.deleteEventConsumer(oldCC, oldCons)
		replaced++
		r.b.log.Warn("replaced an event reader that delivered nothing while its task has newer events", "task_id", r.taskID)
	}
}

// openEventConsumer creates the ordered consumer of a task's events,
// trying again while the bus answers with a retryable error (see
// readerOpenRetryFor). A connection closed for good is not retried. An
// attempt that timed out may still have created its consumer on the
// server: no one reads it, and the inactivity threshold reaps it.
func (b *Bus) openEventConsumer(ctx context.Context, taskID string) (jetstream.Consumer, error) {
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{schemas.SubjectEvents(taskID)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		// Close deletes the consumer; this reaps those of a crashed edge.
		InactiveThreshold: 30 * time.Second,
	}
	var cons jetstream.Consumer
	err := retryWithin(ctx, readerOpenRetryFor, func(actx context.Context) (bool, error) {
		var err error
		if cons, err = b.js.OrderedConsumer(actx, schemas.StreamEvents, cfg); err == nil {
			return true, nil
		}
		err = errUnavailable("bus: open event reader", err)
		return !errors.Is(err, schemas.ErrUnavailable) || errors.Is(err, nats.ErrConnectionClosed), err
	})
	if err != nil {
		return nil, err
	}
	return cons, nil
}

func (r *EventReader) handle(m jetstream.Msg) {
	us, err := decodeUpdates(&nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
	if err != nil {
		r.b.log.Warn("skipping undecodable task event", "subject", m.Subject(), "err", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range us {
		if r.done {
			return
		}
		if u.Cursor <= r.last {
			continue
		}
		select {
		case r.ch <- u:
			r.last, r.moved = u.Cursor, true
		default:
			r.finish(ErrReaderOverflow)
		}
	}
}

// finish ends the reader with err; r.mu is held.
func (r *EventReader) finish(err error) {
	if r.done {
		return
	}
	r.done, r.err = true, err
	close(r.ch)
}

// C delivers the events; it is closed when the reader ends.
func (r *EventReader) C() <-chan TaskUpdate { return r.ch }

// Err tells why C was closed: ErrReaderOverflow, or nil after Close.
func (r *EventReader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close stops the reader and deletes its consumer on the server at once
// (an ordered consumer's Stop leaves it to the inactivity reaper).
func (r *EventReader) Close() {
	r.stopWatch()
	<-r.watched
	r.mu.Lock()
	cc, cons := r.cc, r.cons
	r.mu.Unlock()
	r.b.deleteEventConsumer(cc, cons)
	r.mu.Lock()
	r.finish(nil)
	r.mu.Unlock()
}

// deleteEventConsumer stops consuming and deletes the consumer.
func (b *Bus) deleteEventConsumer(cc jetstream.ConsumeContext, cons jetstream.Consumer) {
	cc.Stop()
	if info := cons.CachedInfo(); info != nil {
		ctx, cancel := context.WithTimeout(context.Background(), attemptLimit)
		_ = b.js.DeleteConsumer(ctx, schemas.StreamEvents, info.Name)
		cancel()
	}
}

// decodeUpdates reads the events of one message on a task's event subject
// (one event, or the batch of one write) in order.
func decodeUpdates(m *nats.Msg) ([]TaskUpdate, error) {
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

// decodeUpdate reads one task event. Extension values are read as text:
// sdk-go types a number in a structured event as an integer.
func decodeUpdate(ev *cloudevents.Event) (TaskUpdate, error) {
	var u TaskUpdate
	var err error
	seq := extString(ev, schemas.ExtSequence)
	u.Rev, err = strconv.ParseUint(seq, 10, 64)
	if err != nil || u.Rev >= 1<<(64-cursorBits) {
		return u, fmt.Errorf("%w: sequence %q", errMalformedEvent, seq)
	}
	index := 0
	if v := extString(ev, schemas.ExtSequenceIndex); v != "" {
		if index, err = strconv.Atoi(v); err != nil || index < 0 || index > MaxEventsPerWrite {
			return u, fmt.Errorf("%w: sequence index %q", errMalformedEvent, v)
		}
	}
	u.Cursor = EventCursor(u.Rev, index)
	switch ev.Type() {
	case schemas.TypeTaskStatus:
		u.Status = new(schemas.TaskStatusUpdateEvent)
		err = decodeData(ev, u.Status)
	case schemas.TypeTaskArtifact:
		u.Artifact = new(schemas.TaskArtifactUpdateEvent)
		err = decodeData(ev, u.Artifact)
	case schemas.TypeTaskMessage:
		u.Reply = new(schemas.Message)
		err = decodeData(ev, u.Reply)
	default:
		err = fmt.Errorf("%w: unexpected type %q on an events subject", errMalformedEvent, ev.Type())
	}
	return u, err
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

// EventReaders returns how many readers (consumers) the events stream has
// now, across all processes; for tests and metrics.
func (b *Bus) EventReaders(ctx context.Context) (int, error) {
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
