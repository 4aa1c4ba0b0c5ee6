package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/bus/tracing"
	"github.com/a2abus/a2abus/schemas"
)

// Waking push senders. A write of a task whose record is marked Push
// publishes, after its events, a wake-up on a2a.notify.<taskId> in
// StreamNotify, which holds at most one per task (discard-new per
// subject): a wake-up refused because one is pending is covered by it.
// Every push sender shares one durable consumer of the stream, so one
// sender at a time works a task, in order; the sender reads the task's
// events after each config's cursor, delivers them, stores the cursors
// and acknowledges the wake-up, then looks once more at the task's last
// stored event and wakes the task again if it is newer than what it
// delivered (a write whose wake-up was refused while it worked). A sender
// that dies leaves its wake-up unacknowledged: it is redelivered after
// AckWait, and the cursors say where to resume. Tasks without configs
// publish nothing.

// wakePush publishes a task's wake-up after a write of its events. The
// write is stored and its events published: the wake-up must not fail it,
// and a failure to publish it is logged (the task's next write wakes its
// sender; an operator sees the warning).
func (b *Bus) wakePush(ctx context.Context, taskID string) {
	if err := b.WakePush(ctx, taskID); err != nil {
		b.log.Warn("could not wake the push sender of a task; its next write will", "task_id", taskID, "err", err)
	}
}

// WakePush asks a push sender to deliver the task's undelivered events.
// A wake-up already pending for the task is enough: that refusal is
// success. While the process traces, the wake-up carries the trace
// context of the write that made it, so the notifications it causes are
// part of that trace.
func (b *Bus) WakePush(ctx context.Context, taskID string) error {
	var tp string
	if tracing.Enabled() {
		tp = tracing.Traceparent(ctx)
	}
	ce, err := b.newEvent(schemas.NewID(), schemas.TypePushWake, taskID, schemas.PushWake{TaskID: taskID}, attr{schemas.ExtTraceparent, tp})
	if err != nil {
		return err
	}
	msg := encodeMsg(schemas.SubjectNotify(taskID), &ce)
	published := false
	err = retryWithin(context.WithoutCancel(ctx), publishRetryFor, func(actx context.Context) (bool, error) {
		_, err := b.publish(actx, msg)
		if pendingWake(err) {
			return true, nil // covered by the pending one
		}
		published = err == nil
		return published, err
	})
	if err != nil {
		return errUnavailable("bus: wake push sender", err)
	}
	if published {
		b.m.pushWakes.Inc()
	}
	return nil
}

// pendingWake reports whether a wake-up was refused because the task has
// one pending (StreamNotify's one message per subject).
func pendingWake(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jsErrStoreFailed && strings.Contains(api.Description, "per subject")
}

// PushConsumer takes wake-ups for push senders from the shared durable
// consumer of StreamNotify.
type PushConsumer struct {
	c jetstream.Consumer
	b *Bus
}

// PushConsumer creates or updates the shared consumer (idempotent) and
// binds to it. ackWait is how long a sender may hold a wake-up without a
// heartbeat before it goes to another sender.
func (b *Bus) PushConsumer(ctx context.Context, ackWait time.Duration) (*PushConsumer, error) {
	if ackWait <= 0 {
		ackWait = b.cfg.AckWait
	}
	c, err := b.js.CreateOrUpdateConsumer(ctx, schemas.StreamNotify, jetstream.ConsumerConfig{
		Durable:       schemas.ConsumerPush,
		Description:   "a2abus push senders",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxAckPending: b.cfg.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Replicas:      b.cfg.Replicas,
		MemoryStorage: b.cfg.MemoryStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("bus: provision the push consumer: %w", err)
	}
	return &PushConsumer{c: c, b: b}, nil
}

// Wake is one task's wake-up, held by the sender that took it.
type Wake struct {
	TaskID string
	// Attempt is the delivery count, 1 on first delivery: the sender's
	// retries of a failing webhook are redeliveries (NakWithDelay).
	Attempt uint64
	// Traceparent is the trace context of the write that woke the
	// sender, "" when its process did not trace.
	Traceparent string
	msg         jetstream.Msg
}

// Fetch waits until a wake-up is available or maxWait passes, and returns
// up to n without waiting for more than the first.
func (c *PushConsumer) Fetch(ctx context.Context, n int, maxWait time.Duration) ([]*Wake, error) {
	fctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	var out []*Wake
	take := func(batch jetstream.MessageBatch, err error) error {
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			w := &Wake{msg: m, Attempt: 1}
			if md, err := m.Metadata(); err == nil {
				w.Attempt = md.NumDelivered
			}
			id, ok := schemas.TaskIDFromNotifySubject(m.Subject())
			if !ok || !schemas.ValidTaskID(id) {
				_ = m.Term()
				continue
			}
			w.TaskID = id
			if tp := m.Headers()[headerPrefix+schemas.ExtTraceparent]; len(tp) == 1 {
				w.Traceparent = tp[0]
			}
			out = append(out, w)
		}
		return batch.Error()
	}
	err := take(c.c.Fetch(1, jetstream.FetchContext(fctx)))
	if len(out) > 0 && n > 1 {
		_ = take(c.c.FetchNoWait(n - 1))
	}
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	if len(out) == 0 && err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
		return nil, errUnavailable("bus: fetch push wake-ups", err)
	}
	return out, nil
}

// Done acknowledges the wake-up (and waits for the server to have it, so
// that what the sender reads next is after it).
func (w *Wake) Done(ctx context.Context) error { return w.msg.DoubleAck(ctx) }

// Retry hands the wake-up back for redelivery after delay.
func (w *Wake) Retry(delay time.Duration) error { return w.msg.NakWithDelay(delay) }

// InProgress resets the AckWait timer: the sender is alive and delivering.
func (w *Wake) InProgress() error { return w.msg.InProgress() }

// PushConfigsOf reads a task's configs, and their revision (0: none),
// without an owner: the push sender acts for the task's owner, who
// registered them.
func (b *Bus) PushConfigsOf(ctx context.Context, taskID string) ([]schemas.PushConfigRecord, uint64, error) {
	set, rev, err := b.readPushConfigs(ctx, taskID)
	if err != nil {
		return nil, 0, err
	}
	return set.Configs, rev, nil
}

// StoredEvent is one stored message of a task's events: its stream
// sequence and its events, in cursor order.
type StoredEvent struct {
	Seq     uint64
	Updates []TaskUpdate
}

// LastCursor is the cursor of the message's last event (0: none).
func (e StoredEvent) LastCursor() uint64 {
	if len(e.Updates) == 0 {
		return 0
	}
	return e.Updates[len(e.Updates)-1].Cursor
}

// storedEvents calls fn with the task's stored events from stream sequence
// from (0: the first), in order, until fn returns false or the stored ones
// run out.
func (b *Bus) storedEvents(ctx context.Context, taskID string, from uint64, fn func(StoredEvent) bool) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{schemas.SubjectEvents(taskID)}, DeliverPolicy: jetstream.DeliverAllPolicy, InactiveThreshold: 30 * time.Second}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := b.js.OrderedConsumer(ctx, schemas.StreamEvents, cfg)
	if err != nil {
		return errUnavailable("bus: read task events", err)
	}
	defer func() {
		if info := cons.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptLimit)
			_ = b.js.DeleteConsumer(dctx, schemas.StreamEvents, info.Name)
			cancel()
		}
	}()
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return errUnavailable("bus: read task events", err)
		}
		n := 0
		var last *jetstream.MsgMetadata
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return errUnavailable("bus: read task events", err)
			}
			last = md
			us, err := decodeUpdates(&nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
			if err != nil {
				b.log.Warn("skipping undecodable task event", "subject", m.Subject(), "err", err)
				continue
			}
			if len(us) == 0 {
				continue // a deleted task's marker
			}
			if !fn(StoredEvent{Seq: md.Sequence.Stream, Updates: us}) {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return errUnavailable("bus: read task events", err)
		}
		if n == 0 || last == nil || last.NumPending == 0 {
			return nil
		}
	}
}

// LastStoredEvent is the task's last stored message of events, as the
// events stream's leader has it (Seq 0: none).
func (b *Bus) LastStoredEvent(ctx context.Context, taskID string) (StoredEvent, error) {
	e, derr, err := b.lastStoredEvent(ctx, taskID)
	if derr != nil {
		b.log.Warn("skipping undecodable task event", "subject", schemas.SubjectEvents(taskID), "err", derr)
	}
	return e, err
}

// lastStoredEvent reads the task's last stored message of events from the
// events stream's leader (Seq 0: none); derr says it did not decode (its
// Updates are then empty), which each caller weighs its own way.
func (b *Bus) lastStoredEvent(ctx context.Context, taskID string) (e StoredEvent, derr, err error) {
	subject := schemas.SubjectEvents(taskID)
	m, err := b.leaderGet(ctx, schemas.StreamEvents, subject)
	if errors.Is(err, errNoMessage) {
		return StoredEvent{}, nil, nil
	}
	if err != nil {
		return StoredEvent{}, nil, err
	}
	us, derr := decodeUpdates(&nats.Msg{Subject: subject, Header: m.Header, Data: m.Data})
	return StoredEvent{Seq: m.Seq, Updates: us}, derr, nil
}

// EventsAfter calls fn, in order, with the task's stored messages of
// events from stream sequence from on, when the last one holds an event
// after cursor after (else with none), and returns that last one. The
// common case of a sender that keeps up (one new message) costs two reads
// of the stream's leader; more messages are read by a consumer that lives
// for the read.
func (b *Bus) EventsAfter(ctx context.Context, taskID string, from, after uint64, fn func(StoredEvent) bool) (StoredEvent, error) {
	last, err := b.LastStoredEvent(ctx, taskID)
	if err != nil || last.Seq == 0 || last.LastCursor() <= after {
		return last, err
	}
	if from < last.Seq {
		subject := schemas.SubjectEvents(taskID)
		m, err := b.storedMsg(ctx, schemas.StreamEvents, storedMsgRequest{Seq: max(from, 1), NextBySubject: subject})
		if err != nil && !errors.Is(err, errNoMessage) {
			return last, err
		}
		if err == nil && m.Seq < last.Seq {
			return last, b.storedEvents(ctx, taskID, m.Seq, func(e StoredEvent) bool {
				return e.Seq <= last.Seq && fn(e)
			})
		}
	}
	fn(last)
	return last, nil
}

// ChangePushDelivery applies a sender's change to a task's configs (their
// cursors and failure states) by compare-and-swap on set, read at
// revision rev: at once when nobody changed it since (the usual case: the
// sender holding the task's wake-up is its only writer), else on the set
// read again. change sees the set as stored, so configs deleted or
// replaced meanwhile are the caller's to skip. It returns the set as
// stored and its revision (0 when it is not known: the next change reads
// again).
func (b *Bus) ChangePushDelivery(ctx context.Context, taskID string, set *schemas.PushConfigSet, rev uint64, change func(*schemas.PushConfigSet) error) (*schemas.PushConfigSet, uint64, error) {
	if set != nil && rev > 0 {
		kv, err := b.pushConfigs(ctx)
		if err != nil {
			return nil, 0, err
		}
		next := &schemas.PushConfigSet{Configs: slices.Clone(set.Configs)}
		if err := change(next); err != nil {
			return nil, 0, err
		}
		nrev, err := storePushConfigs(ctx, kv, taskID, next, rev)
		if !errors.Is(err, errPushConfigsRace) {
			if err != nil {
				return nil, 0, err
			}
			return next, nrev, nil
		}
	}
	var out *schemas.PushConfigSet
	err := b.changePushConfigs(ctx, taskID, func(cur *schemas.PushConfigSet) error {
		if err := change(cur); err != nil {
			return err
		}
		out = cur
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return out, 0, nil
}

// DeadLetterPush keeps a notification given up on in the dead-letter
// stream (a2a.dlq.push.<taskId>) with the reason, for an operator to
// inspect or replay: the body as it would have been sent and the config's
// id, never its credentials.
func (b *Bus) DeadLetterPush(ctx context.Context, taskID, configID, eventID, reason string, body []byte) error {
	m := nats.NewMsg(schemas.SubjectDLQPush(taskID))
	m.Header.Set(schemas.HeaderDLQReason, reason)
	m.Header.Set(schemas.HeaderDLQPushConfig, configID)
	m.Header.Set(nats.MsgIdHdr, "dlq-push-"+configID+"-"+eventID)
	m.Header.Set("Content-Type", schemas.ContentTypeA2A)
	m.Data = body
	if _, err := b.publish(ctx, m); err != nil {
		return errUnavailable("bus: dead-letter notification", err)
	}
	b.m.pushDeadLetters.Inc()
	return nil
}

// PushDeadLetter is one notification given up on.
type PushDeadLetter struct {
	TaskID, ConfigID, Reason string
	Body                     []byte
}

// pushDeadLetters lists the notifications of a task given up on, oldest
// first.
func (b *Bus) pushDeadLetters(ctx context.Context, taskID string) ([]PushDeadLetter, error) {
	var out []PushDeadLetter
	err := b.drainDLQ(ctx, schemas.SubjectDLQPush(taskID), func(m jetstream.Msg) {
		out = append(out, PushDeadLetter{TaskID: taskID, ConfigID: m.Headers().Get(schemas.HeaderDLQPushConfig), Reason: m.Headers().Get(schemas.HeaderDLQReason), Body: m.Data()})
	})
	return out, err
}
