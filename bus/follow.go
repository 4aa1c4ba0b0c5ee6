package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// follower follows the messages of some subjects of a stream, in stream
// order, for one process: the task index (carrying the task watcher on an
// edge), the agent directory and the event hub each run one. It exists
// because the KV watcher of nats.go (a push ordered consumer with a 5s
// idle heartbeat and a back-off growing to 10s) notices a consumer lost
// with a cluster node only after 10-15s and resumes seconds after the
// stream is back; meanwhile nothing is delivered.
//
// The follower owns one ephemeral consumer at a time (AckNone, memory, R1,
// abandoned ones removed by the server after InactiveThreshold) and pulls
// from it with a short idle heartbeat. It owns the cursor: the stream
// sequence of the last message it handed on. On any sign of trouble (two
// heartbeats missed, the consumer deleted, the connection lost, a gap in
// the consumer sequence) it gives the consumer up and creates another
// starting right after the cursor; while creates fail or time out (no
// responders, the cluster electing new leaders) it retries at a short fixed
// interval until ctx ends, so it resumes as soon as the cluster can serve
// it. Messages are
// handed on in stream order, none twice and none skipped: a stream sequence
// not above the cursor is never handed on again.
type follower struct {
	b        *Bus
	name     string // what is followed, for logs and metrics ("tasks", "agents")
	stream   string
	subjects []string
	// start is where the first consumer starts: DeliverNewPolicy (changes
	// from now on) or DeliverLastPerSubjectPolicy (the current value of
	// every subject, then changes). Every later consumer starts after the
	// cursor.
	start jetstream.DeliverPolicy
	// headersOnly asks for the headers of each message without its data
	// (followMsg.Size says how large the data is).
	headersOnly bool
	// valuesOnceCaughtUp limits headersOnly to the catch-up: once
	// everything pending at start was handed on, the follower replaces its
	// consumer with one that delivers data too, starting after the cursor.
	// A follower that serves both the task index (which catches up on
	// headers) and the task watcher (which answers with values) is one
	// consumer instead of two: every write of the bucket is delivered to
	// the process once.
	valuesOnceCaughtUp bool

	// heartbeat is the idle heartbeat asked with every pull; two missed
	// ones end the consumer.
	heartbeat time.Duration
	// retry is the pause between failed attempts to create a consumer. It
	// is fixed, not a growing back-off: a new stream leader is usually
	// elected within 4-9s and the follower should resume right then.
	retry time.Duration
	// attempt bounds one create request.
	attempt time.Duration
	// inactive is the consumer's InactiveThreshold: how long the server
	// keeps a consumer nobody pulls from (one left behind by a crash).
	inactive time.Duration

	following atomic.Bool
	lostAt    atomic.Int64           // unix nanoseconds the live consumer was lost; 0 while following
	consumer  atomic.Pointer[string] // name of the live consumer (tests, logs)

	// The cursor and the catch-up state are owned by the goroutine in run.
	cursor     uint64 // stream sequence of the last message handed on, or the one before where to start
	positioned bool   // cursor is set: later consumers start at cursor+1
	caughtUp   bool   // everything pending when the follower started was handed on
	announced  bool   // caughtUp was called
}

// followMsg is one message handed on by a follower.
type followMsg struct {
	Subject string
	Seq     uint64 // stream sequence
	// Op tells a KV value (Put) from a KV delete or purge marker, including
	// the markers the server writes when a value ages out or is removed.
	Op     jetstream.KeyValueOp
	Value  []byte
	Header nats.Header
	Size   int       // of the data, also when only headers were asked for
	Stored time.Time // when the stream stored it (the server's clock)
	// Initial marks what was pending when the follower started, handed on
	// before it first caught up: for DeliverLastPerSubjectPolicy, the
	// values current at start.
	Initial bool
}

// newFollower returns a follower of subjects of stream; call run.
func (b *Bus) newFollower(name, stream string, start jetstream.DeliverPolicy, subjects ...string) *follower {
	return &follower{
		b: b, name: name, stream: stream, subjects: subjects, start: start,
		heartbeat: time.Second,
		retry:     250 * time.Millisecond,
		attempt:   time.Second,
		inactive:  30 * time.Second,
	}
}

// kvStream and kvPrefix name the stream of a KV bucket and the prefix of
// its subjects (the key follows).
func kvStream(bucket string) string { return "KV_" + bucket }
func kvPrefix(bucket string) string { return "$KV." + bucket + "." }

// Following reports whether the follower has a live consumer. It is false
// from the first sign of trouble until a replacement is consuming.
func (f *follower) Following() bool { return f.following.Load() }

// NotFollowingFor is how long ago the follower lost its live consumer, 0
// while it has one (or before it ever had one).
func (f *follower) NotFollowingFor() time.Duration {
	if at := f.lostAt.Load(); at != 0 && !f.following.Load() {
		return time.Since(time.Unix(0, at))
	}
	return 0
}

// consumerName returns the name of the live consumer, "" if none.
func (f *follower) consumerName() string {
	if p := f.consumer.Load(); p != nil {
		return *p
	}
	return ""
}

func (f *follower) setFollowing(name string) {
	f.consumer.Store(&name)
	if name != "" {
		f.lostAt.Store(0)
	} else if f.following.Load() {
		f.lostAt.Store(time.Now().UnixNano())
	}
	f.following.Store(name != "")
	v := int64(0)
	if name != "" {
		v = 1
	}
	f.b.m.following.Set(v, f.name)
}

var (
	errFollowGap  = errors.New("a gap in the consumer sequence")
	errFollowConn = errors.New("the connection was lost")
	// errFollowValues ends a headers-only session that caught up, for a
	// follower whose data is wanted from then on (valuesOnceCaughtUp).
	errFollowValues = errors.New("caught up on headers; following with values")
)

// run hands every message to handle, in stream order, from the goroutine
// that called it, until ctx ends; then it returns nil. caughtUp is called
// once, as soon as the follower has a consumer and has handed on everything
// that was pending when it started.
func (f *follower) run(ctx context.Context, handle func(followMsg), caughtUp func()) error {
	// Losing the connection ends a session. Being connected again needs
	// no event: a session starts only once connected (see session).
	statuses := f.b.nc.StatusChanged(nats.RECONNECTING)
	defer f.b.nc.RemoveStatusListener(statuses)
	log := f.b.log.With("watch", f.name, "stream", f.stream)
	var lost time.Time // when the last live consumer failed
	attempts := 0
	for {
		// A connection lost before the consumer exists does not concern it;
		// one from now on does. (The event is sent before the connection's
		// state changes, so a loss drained here is seen by the connected
		// check that follows.)
		for len(statuses) > 0 {
			<-statuses
		}
		attempts++
		live, err := f.session(ctx, statuses, handle, caughtUp, func() {
			if !lost.IsZero() {
				log.Info("watch resumed with a new consumer", "after", time.Since(lost).Round(time.Millisecond), "attempts", attempts, "from_seq", f.cursor+1)
				f.b.m.replaced.Inc(f.name)
			}
		})
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errFollowValues) {
			attempts = 0
			continue
		}
		if live {
			// Replace at once: the first attempt often succeeds (a deleted
			// consumer, a reconnect to a healthy node).
			log.Warn("watch lost its consumer; replacing it", "err", err, "after_seq", f.cursor)
			lost, attempts = time.Now(), 0
			continue
		}
		if attempts == 1 || attempts%20 == 0 {
			log.Debug("watch cannot create a consumer yet; retrying", "err", err, "attempts", attempts)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(f.retry):
		}
	}
}

// config is the consumer to create now: after the cursor, or at the start
// position before anything was handed on.
func (f *follower) config() jetstream.ConsumerConfig {
	cfg := jetstream.ConsumerConfig{
		Description:       "a2abus " + f.name + " watch of " + f.b.source,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: f.inactive,
		DeliverPolicy:     f.start,
		HeadersOnly:       f.headersOnly && !(f.valuesOnceCaughtUp && f.caughtUp),
	}
	if len(f.subjects) == 1 {
		cfg.FilterSubject = f.subjects[0]
	} else {
		cfg.FilterSubjects = f.subjects
	}
	if f.positioned {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = f.cursor + 1
	}
	return cfg
}

// session creates one consumer and hands on what it delivers until it
// fails or ctx ends. live tells whether the consumer got going; onLive is
// called when it does.
func (f *follower) session(ctx context.Context, statuses <-chan nats.Status, handle func(followMsg), caughtUp, onLive func()) (live bool, err error) {
	if !f.b.nc.IsConnected() {
		return false, nats.ErrDisconnected
	}
	cfg := f.config()
	actx, cancel := context.WithTimeout(ctx, f.attempt)
	cons, err := f.b.js.CreateConsumer(actx, f.stream, cfg)
	cancel()
	if err != nil {
		return false, fmt.Errorf("create consumer: %w", err)
	}
	info := cons.CachedInfo()
	defer f.discard(info.Name)
	if !f.positioned && cfg.DeliverPolicy == jetstream.DeliverNewPolicy {
		// New means after what the stream held when the consumer was made;
		// a replacement must start there too, even if nothing came since.
		f.cursor, f.positioned = info.Delivered.Stream, true
	}
	it, err := cons.Messages(jetstream.PullHeartbeat(f.heartbeat))
	if err != nil {
		return false, fmt.Errorf("consume: %w", err)
	}
	defer it.Stop()

	// Losing the connection ends the session: the pull request waited on
	// the node that held it, and the consumer may be gone with that node.
	sctx, stop := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case st := <-statuses:
			stop(fmt.Errorf("%w (%v)", errFollowConn, st))
		case <-sctx.Done():
		}
	}()
	defer func() {
		stop(nil)
		<-watched
	}()

	f.setFollowing(info.Name)
	defer f.setFollowing("")
	onLive()
	pending := info.NumPending // at creation
	if (f.caughtUp || pending == 0) && f.reachedEnd(cfg.HeadersOnly, caughtUp) {
		return true, errFollowValues
	}
	var dseq, received uint64
	for {
		msg, err := it.Next(jetstream.NextContext(sctx))
		if err != nil {
			if cause := context.Cause(sctx); cause != nil && ctx.Err() == nil && errors.Is(err, context.Canceled) {
				err = cause
			}
			return true, err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return true, fmt.Errorf("message metadata: %w", err)
		}
		if meta.Sequence.Consumer != dseq+1 {
			return true, fmt.Errorf("%w: %d after %d", errFollowGap, meta.Sequence.Consumer, dseq)
		}
		dseq = meta.Sequence.Consumer
		received++
		if f.positioned && meta.Sequence.Stream <= f.cursor {
			continue // handed on already
		}
		f.cursor, f.positioned = meta.Sequence.Stream, true
		size := len(msg.Data())
		if cfg.HeadersOnly {
			size, _ = strconv.Atoi(msg.Headers().Get(nats.MsgSize))
		}
		handle(followMsg{
			Subject: msg.Subject(),
			Seq:     meta.Sequence.Stream,
			Op:      kvOperation(msg.Headers()),
			Value:   msg.Data(),
			Header:  msg.Headers(),
			Size:    size,
			Stored:  meta.Timestamp,
			Initial: !f.caughtUp,
		})
		if !f.caughtUp && (meta.NumPending == 0 || received >= pending) && f.reachedEnd(cfg.HeadersOnly, caughtUp) {
			return true, errFollowValues
		}
	}
}

// reachedEnd marks the follower caught up with what was pending when it
// started and calls caughtUp the first time, unless the session delivers
// headers only and the follower goes on with values
// (valuesOnceCaughtUp): then the session should end (true), and the
// follower is caught up once the consumer that delivers values is live.
func (f *follower) reachedEnd(headersOnly bool, caughtUp func()) (endSession bool) {
	f.caughtUp = true
	if headersOnly && f.valuesOnceCaughtUp {
		return true
	}
	if !f.announced {
		f.announced = true
		caughtUp()
	}
	return false
}

// discard deletes a consumer the follower gave up, in the background and
// best effort: if its node is gone or unreachable, the server removes it
// after InactiveThreshold anyway.
func (f *follower) discard(name string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), f.attempt)
		defer cancel()
		_ = f.b.js.DeleteConsumer(ctx, f.stream, name)
	}()
}

// kvOperation reads what a message of a KV stream means: a value, or a
// delete or purge marker written by a client (KV-Operation) or by the
// server when a value aged out or was removed (Nats-Marker-Reason). It
// reads them as the KV watcher of nats.go does.
func kvOperation(h nats.Header) jetstream.KeyValueOp {
	if len(h) == 0 {
		return jetstream.KeyValuePut
	}
	if op := h.Get("KV-Operation"); op != "" {
		switch op {
		case "DEL":
			return jetstream.KeyValueDelete
		case "PURGE":
			return jetstream.KeyValuePurge
		}
		return jetstream.KeyValuePut
	}
	switch h.Get(jetstream.MarkerReasonHeader) {
	case "MaxAge", "Purge":
		return jetstream.KeyValuePurge
	case "Remove":
		return jetstream.KeyValueDelete
	}
	return jetstream.KeyValuePut
}
