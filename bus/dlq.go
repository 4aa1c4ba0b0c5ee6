package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// Poison work. A work item that cannot be decoded is copied to the
// dead-letter stream and terminated by the worker that took it. A work item
// whose deliveries run out (every worker that took it died or hung) stays in
// the work stream by design of JetStream; the server announces it with a
// max-deliveries advisory, and the agent's workers then move it to the
// dead-letter stream and fail its task with a message saying why. Every step
// is idempotent, so all replicas of an agent may act on the same advisory.

// advisoryMaxDelivs is the subject prefix of JetStream's max-deliveries
// advisories.
const advisoryMaxDelivs = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."

// DeadLetter describes a work item given up on.
type DeadLetter struct {
	Agent      string
	TaskID     string // empty when the item could not be decoded
	Deliveries uint64
	Reason     string
}

// DeadLetter copies this work item to the dead-letter stream with reason and
// removes it from the queue for good.
func (w *Work) DeadLetter(ctx context.Context, reason string) error {
	if err := w.b.deadLetter(ctx, w.agent, w.seq, &nats.Msg{Header: w.msg.Headers(), Data: w.msg.Data()}, reason); err != nil {
		return err
	}
	return w.Term(reason)
}

func (b *Bus) deadLetter(ctx context.Context, agent string, seq uint64, orig *nats.Msg, reason string) error {
	m := nats.NewMsg(schemas.SubjectDLQ(agent))
	for k, v := range orig.Header {
		if k != nats.MsgIdHdr {
			m.Header[k] = v
		}
	}
	m.Header.Set(schemas.HeaderDLQReason, reason)
	m.Header.Set(schemas.HeaderDLQAgent, agent)
	m.Header.Set(schemas.HeaderDLQStreamSeq, strconv.FormatUint(seq, 10))
	m.Header.Set(nats.MsgIdHdr, "dlq-"+strconv.FormatUint(seq, 10)) // one copy, whoever moves it
	m.Data = orig.Data
	if _, err := b.publish(ctx, m); err != nil {
		return errUnavailable("bus: dead-letter work", err)
	}
	b.m.deadLetters.Inc(agent)
	return nil
}

// WatchDeadLetters moves work of agent whose deliveries ran out to the
// dead-letter stream and calls fn for each, until stop is called. fn fails
// the task; it may be called more than once for one item (one call per
// replica watching), so it must be idempotent.
func (b *Bus) WatchDeadLetters(agent string, fn func(DeadLetter)) (stop func(), err error) {
	subj := advisoryMaxDelivs + schemas.StreamWork + "." + schemas.ConsumerWork(agent)
	sub, err := b.nc.Subscribe(subj, func(m *nats.Msg) {
		var adv struct {
			StreamSeq  uint64 `json:"stream_seq"`
			Deliveries uint64 `json:"deliveries"`
		}
		if err := json.Unmarshal(m.Data, &adv); err != nil || adv.StreamSeq == 0 {
			b.log.Warn("ignoring malformed max-deliveries advisory", "subject", m.Subject, "err", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dl, err := b.moveToDLQ(ctx, agent, adv.StreamSeq, adv.Deliveries)
		if err != nil {
			b.log.Warn("moving exhausted work to the dead-letter stream failed", "agent", agent, "stream_seq", adv.StreamSeq, "err", err)
			return
		}
		if dl != nil {
			fn(*dl)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("bus: watch dead letters of %s: %w", agent, err)
	}
	if err := b.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("bus: watch dead letters of %s: %w", agent, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// moveToDLQ copies work item seq to the dead-letter stream and deletes it
// from the work stream. It returns nil, nil when another replica already
// moved it.
func (b *Bus) moveToDLQ(ctx context.Context, agent string, seq, deliveries uint64) (*DeadLetter, error) {
	st, err := b.js.Stream(ctx, schemas.StreamWork)
	if err != nil {
		return nil, err
	}
	raw, err := st.GetMsg(ctx, seq)
	if err != nil {
		return nil, nil // gone: acked late, or moved by another replica
	}
	reason := fmt.Sprintf("gave up after %d deliveries: every worker that took this work stopped before finishing it", deliveries)
	if err := b.deadLetter(ctx, agent, seq, &nats.Msg{Header: raw.Header, Data: raw.Data}, reason); err != nil {
		return nil, err
	}
	if err := st.DeleteMsg(ctx, seq); err != nil {
		b.log.Debug("deleting dead-lettered work", "stream_seq", seq, "err", err)
	}
	dl := &DeadLetter{Agent: agent, Deliveries: deliveries, Reason: reason}
	if ev, err := decodeMsg(&nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data}); err == nil {
		var item schemas.WorkItem
		if decodeData(&ev, &item) == nil {
			dl.TaskID = item.TaskID
		}
	}
	return dl, nil
}

// deadLetters lists the work items of agent kept in the dead-letter stream,
// oldest first: what a test inspects after poison work was given up
// (bustest.DeadLetters).
// A copy whose work item cannot be decoded is listed without a task id.
func (b *Bus) deadLetters(ctx context.Context, agent string) ([]DeadLetter, error) {
	var out []DeadLetter
	err := b.drainDLQ(ctx, schemas.SubjectDLQ(agent), func(m jetstream.Msg) {
		dl := DeadLetter{Agent: agent, Reason: m.Headers().Get(schemas.HeaderDLQReason)}
		if ev, err := decodeMsg(&nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}); err == nil {
			var item schemas.WorkItem
			if decodeData(&ev, &item) == nil {
				dl.TaskID = item.TaskID
			}
		}
		out = append(out, dl)
	})
	return out, err
}

// drainDLQ calls each with the dead letters stored on subject, in order:
// as many as the stream counts there when it is called (none: no
// consumer is made), read by a consumer that lives for the read.
func (b *Bus) drainDLQ(ctx context.Context, subject string, each func(jetstream.Msg)) error {
	st, err := b.js.Stream(ctx, schemas.StreamDLQ)
	if err != nil {
		return errUnavailable("bus: read dead letters", err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return errUnavailable("bus: read dead letters", err)
	}
	n := int(info.State.Subjects[subject])
	if n == 0 {
		return nil
	}
	cons, err := b.js.OrderedConsumer(ctx, schemas.StreamDLQ, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return errUnavailable("bus: read dead letters", err)
	}
	defer func() {
		if info := cons.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = b.js.DeleteConsumer(dctx, schemas.StreamDLQ, info.Name)
			cancel()
		}
	}()
	for read := 0; read < n; {
		batch, err := cons.Fetch(n-read, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return errUnavailable("bus: read dead letters", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			each(m)
		}
		if got == 0 {
			return nil // fewer than counted: some aged out meanwhile
		}
		read += got
	}
	return nil
}

// deadLetterScan bounds how many of the dead-letter stream's newest
// messages a listing reads (ListDeadLetters): a listing is of the newest,
// and work and push dead letters share the stream.
const deadLetterScan = 4096

// ListDeadLetters returns the newest dead letters of kind
// (schemas.DeadLetterWork or DeadLetterPush), at most limit, newest first,
// among the stream's newest deadLetterScan messages. It reads their
// headers only (no work item or notification body leaves the stream): the
// agent, the reason, the task (a work item's CloudEvent subject, a
// notification's subject) and when it was stored. Errors match
// schemas.ErrUnavailable.
func (b *Bus) ListDeadLetters(ctx context.Context, kind string, limit int) ([]schemas.DeadLetterSummary, error) {
	filter := schemas.SubjectDLQ("*")
	if kind == schemas.DeadLetterPush {
		filter = schemas.SubjectDLQPush("*")
	}
	out := []schemas.DeadLetterSummary{}
	st, err := b.js.Stream(ctx, schemas.StreamDLQ)
	if err != nil {
		return nil, errUnavailable("bus: list dead letters", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, errUnavailable("bus: list dead letters", err)
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 || limit < 1 {
		return out, nil
	}
	start := info.State.FirstSeq
	if last >= deadLetterScan && last-deadLetterScan+1 > start {
		start = last - deadLetterScan + 1
	}
	cons, err := b.js.OrderedConsumer(ctx, schemas.StreamDLQ, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start, HeadersOnly: true,
	})
	if err != nil {
		return nil, errUnavailable("bus: list dead letters", err)
	}
	defer func() {
		if ci := cons.CachedInfo(); ci != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = b.js.DeleteConsumer(dctx, schemas.StreamDLQ, ci.Name)
			cancel()
		}
	}()
	ring := make([]schemas.DeadLetterSummary, 0, limit)
	next := 0 // where the next one goes once ring is full
	for done := false; !done; {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, errUnavailable("bus: list dead letters", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			d := deadLetterSummary(kind, m)
			if len(ring) < limit {
				ring = append(ring, d)
			} else {
				ring[next] = d
				next = (next + 1) % limit
			}
			if meta, err := m.Metadata(); err != nil || meta.NumPending == 0 || meta.Sequence.Stream >= last {
				done = true
			}
		}
		if got == 0 {
			done = true // none (more) of this kind among the newest
		}
	}
	for i := range ring {
		out = append(out, ring[(next+len(ring)-1-i)%len(ring)])
	}
	return out, nil
}

// deadLetterSummary reads one dead letter's headers.
func deadLetterSummary(kind string, m jetstream.Msg) schemas.DeadLetterSummary {
	h := m.Headers()
	d := schemas.DeadLetterSummary{Kind: schemas.DeadLetterWork, Reason: h.Get(schemas.HeaderDLQReason)}
	if meta, err := m.Metadata(); err == nil {
		d.At = meta.Timestamp.UTC()
	}
	if kind == schemas.DeadLetterPush {
		d.Kind = schemas.DeadLetterPush
		d.TaskID = strings.TrimPrefix(m.Subject(), schemas.SubjectDLQPush(""))
		d.ConfigID = h.Get(schemas.HeaderDLQPushConfig)
		return d
	}
	d.Agent = h.Get(schemas.HeaderDLQAgent)
	if s, err := percentDecode(h.Get(headerPrefix + "subject")); err == nil {
		d.TaskID = s
	}
	return d
}
