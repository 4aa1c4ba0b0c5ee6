package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// Work items: the edge queues a TypeWorkExecute event in the intake
// (a2a.intake.<agent>.<caller>.<task>); the dispatch lease holder moves it
// to a2a.work.<agent>.<task> when a worker asks (dispatch.go). The
// workers of that agent share one durable pull consumer and take items
// from it with Fetch.

// PublishOptions carries request context into the published event.
type PublishOptions struct {
	// ID is the CloudEvent id (and Nats-Msg-Id). Reuse it when retrying a
	// publish so JetStream drops the duplicate; default a new id.
	ID string
	// Traceparent is the W3C trace context of the originating request.
	Traceparent string
	// A2AVersion is the protocol version the client spoke.
	A2AVersion string
	// Caller is the schemas.CallerKey of the task's owner, whose turn
	// the work waits for; default the key of no owner.
	Caller string
}

// WorkConsumer takes work for one agent from its durable consumer.
type WorkConsumer struct {
	c     jetstream.Consumer
	agent string
	b     *Bus
	acks  deferredAck
}

// deferredAck holds back the acknowledgement of the item last finished
// until the next is acknowledged or ackDeferral passes. A work-queue
// stream deletes an item on its acknowledgement, and the file store opens
// a new block file (and deletes the old one) whenever that empties the
// stream's last block: at one client every item did, ~10% of serve's CPU.
// One finished item left in the stream a moment longer keeps the block in
// use; its removal then costs only a deletion record. A worker that dies
// meanwhile has its finished item redelivered after AckWait, and the
// redelivery finds the task past the item's revision and settles it
// without running the agent, as after any crash between a write and its
// acknowledgement.
type deferredAck struct {
	mu    sync.Mutex
	held  jetstream.Msg
	timer *time.Timer
	wait  time.Duration // the deferral; 0 is ackDeferral
}

// ackDeferral is the longest an acknowledgement is held back.
const ackDeferral = 100 * time.Millisecond

// ack holds m's acknowledgement back and sends the one it replaces.
func (d *deferredAck) ack(m jetstream.Msg) error {
	d.mu.Lock()
	prev := d.held
	d.held = m
	wait := d.wait
	if wait == 0 {
		wait = ackDeferral
	}
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, func() { _ = d.flush() })
	} else {
		d.timer.Reset(wait)
	}
	d.mu.Unlock()
	if prev != nil {
		return prev.Ack()
	}
	return nil
}

// flush sends the acknowledgement held back, if any.
func (d *deferredAck) flush() error {
	d.mu.Lock()
	m := d.held
	d.held = nil
	d.mu.Unlock()
	if m == nil {
		return nil
	}
	return m.Ack()
}

// stop sends the acknowledgement held back and stops the deferral's timer.
func (d *deferredAck) stop() error {
	d.mu.Lock()
	if d.timer != nil {
		d.timer.Stop()
	}
	d.mu.Unlock()
	return d.flush()
}

// Close sends the acknowledgement still held back; the consumer's worker
// calls it when it stops taking work.
func (wc *WorkConsumer) Close() error { return wc.acks.stop() }

// WorkConsumer binds to the durable work consumer of agent, creating or
// updating it first (idempotent).
func (b *Bus) WorkConsumer(ctx context.Context, agent string) (*WorkConsumer, error) {
	if err := b.ensureAgent(ctx, agent); err != nil {
		return nil, err
	}
	c, err := b.js.Consumer(ctx, schemas.StreamWork, schemas.ConsumerWork(agent))
	if err != nil {
		return nil, fmt.Errorf("bus: bind work consumer of %s: %w", agent, err)
	}
	b.handover.addAgent(agent)
	return &WorkConsumer{c: c, agent: agent, b: b}, nil
}

// Fetch waits until at least one work item is available or maxWait passes,
// and returns up to n items without waiting for more than the first. It
// returns ctx.Err() when ctx ends. Items that cannot be decoded are returned
// with Err set; the caller terminates them.
func (w *WorkConsumer) Fetch(ctx context.Context, n int, maxWait time.Duration) ([]*Work, error) {
	fctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	// A pull request for n items would wait until all n arrive; ask for one
	// (returns as soon as it exists), then take what else is ready.
	out, err := w.collect(ctx, func() (jetstream.MessageBatch, error) {
		return w.c.Fetch(1, jetstream.FetchContext(fctx))
	})
	// The delivery says how many more items waited. It is a hint (the
	// count can lag a publish by a moment); an item it missed is taken by
	// the next Fetch, which the run loop makes at once.
	if err != nil || len(out) == 0 || n <= 1 || out[0].pending == 0 {
		return out, err
	}
	more, err := w.collect(ctx, func() (jetstream.MessageBatch, error) { return w.c.FetchNoWait(n - 1) })
	return append(out, more...), err
}

func (w *WorkConsumer) collect(ctx context.Context, fetch func() (jetstream.MessageBatch, error)) ([]*Work, error) {
	batch, err := fetch()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("bus: fetch work: %w", err)
	}
	var out []*Work
	for m := range batch.Messages() {
		out = append(out, w.newWork(m))
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		return out, fmt.Errorf("bus: fetch work: %w", err)
	}
	return out, nil
}

// Work is one delivery of a work item. The holder must end it with exactly
// one of Ack, Nak or Term, and call InProgress while it works longer than
// the AckWait.
type Work struct {
	// Item is the decoded work item; zero when Err is set.
	Item schemas.WorkItem
	// Err is set when the message is not a valid work item (poison input).
	Err error
	// Attempt is the delivery count, 1 on first delivery.
	Attempt uint64
	// EventID is the CloudEvent id of the work item.
	EventID string
	// Traceparent is the trace context the edge attached.
	Traceparent string

	msg     jetstream.Msg
	pending uint64 // items waiting behind this one when it was delivered
	b       *Bus
	agent   string
	seq     uint64 // stream sequence in the work stream
	wc      *WorkConsumer
}

func (wc *WorkConsumer) newWork(m jetstream.Msg) *Work {
	w := &Work{msg: m, Attempt: 1, b: wc.b, agent: wc.agent, wc: wc}
	if md, err := m.Metadata(); err == nil {
		w.Attempt, w.pending, w.seq = md.NumDelivered, md.NumPending, md.Sequence.Stream
	}
	if w.Attempt > 1 {
		wc.b.m.redelivered.Inc(wc.agent)
	}
	ev, err := decodeMsg(&nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
	if err != nil {
		w.Err = err
		return w
	}
	w.EventID = ev.ID()
	if tp, ok := ev.Extensions()[schemas.ExtTraceparent]; ok {
		w.Traceparent = fmt.Sprint(tp)
	}
	if ev.Type() != schemas.TypeWorkExecute {
		w.Err = fmt.Errorf("%w: unexpected type %q on a work subject", errMalformedEvent, ev.Type())
		return w
	}
	if err := decodeData(&ev, &w.Item); err != nil {
		w.Err = err
		return w
	}
	if !schemas.ValidTaskID(w.Item.TaskID) {
		w.Err = fmt.Errorf("%w: work item has invalid task id %q", errMalformedEvent, w.Item.TaskID)
	}
	return w
}

// Ack reports the work done; it is removed from the queue with the
// consumer's next acknowledgement, after ackDeferral, or when the
// consumer closes (see deferredAck).
func (w *Work) Ack() error {
	w.count("ack")
	if w.wc != nil {
		return w.wc.acks.ack(w.msg)
	}
	return w.msg.Ack()
}

// Nak hands the work back for redelivery after delay (0: at once).
func (w *Work) Nak(delay time.Duration) error {
	w.count("nak")
	if delay > 0 {
		return w.msg.NakWithDelay(delay)
	}
	return w.msg.Nak()
}

func (w *Work) count(outcome string) {
	if w.b != nil {
		w.b.m.work.Inc(w.agent, outcome)
	}
}

// InProgress resets the AckWait timer: the holder is alive and working.
func (w *Work) InProgress() error { return w.msg.InProgress() }

// Term removes poison work from the queue for good, with a reason the server
// reports in its advisory.
func (w *Work) Term(reason string) error {
	w.count("term")
	return w.msg.TermWithReason(reason)
}

// publishCancel tells the workers of an agent that a task was canceled. It is
// a core NATS publish: best effort, the KV state is authoritative.
func (b *Bus) publishCancel(ctx context.Context, n schemas.CancelNotice) error {
	ce, err := b.newEvent(schemas.NewID(), schemas.TypeTaskCancel, n.TaskID, n)
	if err != nil {
		return err
	}
	if err := b.nc.PublishMsg(encodeMsg(schemas.SubjectCancel(n.Agent), &ce)); err != nil {
		return errUnavailable("bus: publish cancel", err)
	}
	return nil
}

// SubscribeCancels calls fn for every cancel notice of agent until the
// returned stop function is called.
func (b *Bus) SubscribeCancels(agent string, fn func(schemas.CancelNotice)) (stop func(), err error) {
	sub, err := b.nc.Subscribe(schemas.SubjectCancel(agent), func(m *nats.Msg) {
		ev, err := decodeMsg(m)
		if err != nil || ev.Type() != schemas.TypeTaskCancel {
			b.log.Warn("ignoring malformed cancel notice", "subject", m.Subject, "err", err)
			return
		}
		var n schemas.CancelNotice
		if err := decodeData(&ev, &n); err != nil {
			b.log.Warn("ignoring malformed cancel notice", "subject", m.Subject, "err", err)
			return
		}
		fn(n)
	})
	if err != nil {
		return nil, fmt.Errorf("bus: subscribe cancels of %s: %w", agent, err)
	}
	// The subscription is in place on the server when this returns.
	if err := b.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("bus: subscribe cancels of %s: %w", agent, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// AgentBacklog returns how many work items of agent are queued or in
// progress (the durable consumer's pending plus unacknowledged counts).
func (b *Bus) AgentBacklog(ctx context.Context, agent string) (uint64, error) {
	l, err := b.AgentLoad(ctx, agent)
	return l.Backlog, err
}

// AgentLoad is an agent's work as its consumer counts it.
type AgentLoad struct {
	// Backlog is the work items queued or in progress (AgentBacklog).
	Backlog uint64
	// Done is a running count of deliveries that ended (acknowledged,
	// given up or redelivered): its growth between two readings over
	// their interval is the pace the agent works through its backlog.
	Done uint64
}

// AgentLoad reads agent's backlog and its running count of work done,
// from its work consumer's state and its intake's (see agentQueue). It
// returns an error matching schemas.ErrUnavailable if the bus cannot say.
func (b *Bus) AgentLoad(ctx context.Context, agent string) (AgentLoad, error) {
	q, err := b.agentQueue(ctx, agent)
	if err != nil {
		return AgentLoad{}, err
	}
	return AgentLoad{Backlog: q.pending() + q.inFlight, Done: q.done}, nil
}

// queueState is an agent's work as its consumers count it: what
// admission bounds (AgentLoad) and the backlog gauges show (backlog.go)
// come from one reading.
type queueState struct {
	// intake is the items waiting in the intake for their caller's turn,
	// held by the dispatcher or not.
	intake uint64
	// work is the work consumer's undelivered items, and workFloor the
	// stream sequence it delivered last: the oldest of them is the first
	// of the agent's subjects after it.
	work, workFloor uint64
	// inFlight is the items delivered to a worker and not acknowledged
	// (those handed back for redelivery among them), redelivered those
	// of them delivered more than once.
	inFlight, redelivered uint64
	// done is a running count of deliveries that ended (AgentLoad.Done).
	done uint64
}

// pending is the items no worker holds: in the intake or undelivered.
func (q queueState) pending() uint64 { return q.intake + q.work }

// agentQueue reads agent's queue: the durable work consumer's state, and
// the intake's as the dispatcher's consumer counts it, or, while no
// dispatcher reads it, by its subjects (one per task). It returns an
// error matching schemas.ErrUnavailable if the bus cannot say.
func (b *Bus) agentQueue(ctx context.Context, agent string) (queueState, error) {
	var q queueState
	c, err := b.js.Consumer(ctx, schemas.StreamWork, schemas.ConsumerWork(agent))
	switch {
	case err == nil:
		info := c.CachedInfo()
		q.work, q.workFloor = info.NumPending, info.Delivered.Stream
		q.inFlight, q.redelivered = uint64(info.NumAckPending), uint64(info.NumRedelivered)
		q.done = info.Delivered.Consumer - min(q.inFlight, info.Delivered.Consumer)
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		// No worker ever ran: the queue holds what was sent.
	default:
		return queueState{}, errUnavailable("bus: agent backlog", err)
	}
	ic, err := b.js.Consumer(ctx, schemas.StreamIntake, schemas.ConsumerIntake(agent))
	if err == nil {
		ii := ic.CachedInfo()
		q.intake = ii.NumPending + uint64(ii.NumAckPending)
		return q, nil
	}
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return queueState{}, errUnavailable("bus: agent backlog", err)
	}
	st, err := b.js.Stream(ctx, schemas.StreamIntake)
	if err == nil {
		var info *jetstream.StreamInfo
		if info, err = st.Info(ctx, jetstream.WithSubjectFilter(schemas.SubjectIntakeAgent(agent))); err == nil {
			for _, n := range info.State.Subjects {
				q.intake += n
			}
			return q, nil
		}
	}
	return queueState{}, errUnavailable("bus: agent backlog", err)
}
