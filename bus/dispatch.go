package bus

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// Fair dispatch. Work is submitted to the intake stream on its caller's
// subject (schemas.SubjectIntake) and run from the agent's work subject,
// whose one durable consumer every worker of the agent shares. Between
// the two, one process of the system — the holder of the dispatch lease —
// moves an item only when a worker of its agent asks for one, taking the
// callers with items waiting in turn. The work stream so holds no queue
// of its own: a caller with a long backlog has at most what its workers
// run, and another caller's task is the next one any of them takes.
//
// What a worker asks for is read from its pull requests as they travel to
// the server ($JS.API.CONSUMER.MSG.NEXT.<work stream>.<consumer>): each is
// a credit of its batch size that lasts until the request expires. Items
// held for their turn stay unacknowledged in the agent's intake consumer,
// kept alive by heartbeats; a holder that dies leaves them there, and the
// next holder recreates the consumer, which hands every one of them back
// at once. An item moves by publishing it to the work subject under its
// own event id (a repeat of the move is dropped by the work stream's
// de-duplication, and a worker finds a task taken by another copy before
// it runs anything), then acknowledging it in the intake.

// dispatchLeaseTTL is how long the dispatch lease outlives its holder's
// last renewal: how long work waits for its turn after the holder dies
// without releasing it. A holder renews it every dispatchLeaseEvery.
const (
	dispatchLease      = "dispatch"
	dispatchLeaseTTL   = 10 * time.Second
	dispatchLeaseEvery = 2 * time.Second
	// intakeAckWait is how long the intake consumer waits before handing
	// an item back; the holder heartbeats what it holds well within it.
	intakeAckWait   = 10 * time.Minute
	intakeHeartbeat = 3 * time.Minute
	// intakeFetch is how many intake items one fetch may bring.
	intakeFetch = 512
	// heldBodiesMax bounds the bodies of held items a term keeps in
	// memory; an item past it is read back from the intake to move.
	heldBodiesMax = 32 << 20
)

// apiNextWork is the subject prefix of the pull requests workers send to
// the work stream's consumers.
const apiNextWork = jsAPIPrefix + "CONSUMER.MSG.NEXT." + schemas.StreamWork + "."

// dispatcher takes the dispatch lease when it is free and dispatches while
// it holds it. Every process with a bus runs one (unless
// Config.NoDispatch); one of them holds the lease.
type dispatcher struct {
	b    *Bus
	stop context.CancelFunc
	done chan struct{}

	mu  sync.Mutex
	cur *dispatchTerm // the term under way, nil while the lease is another's
}

// setTerm records the term under way.
func (d *dispatcher) setTerm(t *dispatchTerm) {
	d.mu.Lock()
	d.cur = t
	d.mu.Unlock()
}

// held is how many items of agent the term under way holds in memory
// (-1 when this process holds no lease or has not seen the agent).
func (d *dispatcher) held(agent string) int {
	d.mu.Lock()
	t := d.cur
	d.mu.Unlock()
	if t == nil {
		return -1
	}
	t.mu.Lock()
	q := t.agents[agent]
	t.mu.Unlock()
	if q == nil {
		return -1
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held
}

// queueOf is the agent's queue in the term under way, nil when this
// process holds no lease or no worker of the agent has asked yet.
func (d *dispatcher) queueOf(agent string) *agentQueue {
	d.mu.Lock()
	t := d.cur
	d.mu.Unlock()
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	return t.agents[agent]
}

// direct moves a new item of caller straight to the agent's work subject
// when this process holds the dispatch lease, nothing of the agent waits
// for its turn here or is on its way to the work stream, and a worker's
// request is open: the move the term would make the moment the item
// arrived, without the intake's round trips (its publish, the delivery to
// the holder, the acknowledgement). With nothing waiting there is no turn
// to keep, and the credit spent is the one the move would have spent, so
// the work stream still holds only what workers asked for. It reports
// whether the item was stored in the work stream; when not, the caller
// queues it in the intake as always (a copy the direct publish stored
// after all is dropped there as a repeat of its event id when it moves).
// msg builds the work message, only once the move is sure: most items of
// a busy agent, and every item queued by a process that holds no lease,
// take the intake's way.
func (d *dispatcher) direct(ctx context.Context, agent, caller string, msg func() *nats.Msg) bool {
	q := d.queueOf(agent)
	if q == nil {
		return false
	}
	spent, ok := q.takeDirect(caller)
	if !ok {
		return false
	}
	// A publish with no answer soon goes on through the intake, which
	// retries; the work stream drops the intake's copy as a repeat if
	// this one was stored after all.
	pctx, cancel := context.WithTimeout(ctx, directPublishWait)
	ack, err := d.b.publish(pctx, msg())
	cancel()
	q.mu.Lock()
	q.moving--
	if err != nil || ack.Duplicate {
		// Not stored, or stored before: no worker's request was answered.
		q.credits = append(q.credits, spent)
	}
	q.mu.Unlock()
	if err != nil {
		return false
	}
	if !ack.Duplicate {
		d.b.m.dispatched.Inc(agent)
	}
	return true
}

// directPublishWait bounds how long a direct move waits for the work
// stream's answer before the item takes the intake's way instead.
const directPublishWait = 2 * time.Second

func (b *Bus) startDispatch() {
	ctx, cancel := context.WithCancel(context.Background())
	d := &dispatcher{b: b, stop: cancel, done: make(chan struct{})}
	b.dispatch = d
	go d.run(ctx)
}

// close stops dispatching and frees the lease for another process.
func (d *dispatcher) close() {
	d.stop()
	<-d.done
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = d.b.releaseLease(ctx, dispatchLease)
}

func (d *dispatcher) run(ctx context.Context) {
	defer close(d.done)
	var term *dispatchTerm
	var renewed time.Time
	ttl, every := dispatchLeaseTTL, dispatchLeaseEvery
	if d.b.cfg.dispatchLeaseTTL > 0 {
		ttl = d.b.cfg.dispatchLeaseTTL
		every = ttl / 5
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		held, err := d.b.holdShortLease(ctx, dispatchLease, ttl)
		switch {
		case held:
			renewed = time.Now()
			if term == nil {
				term = d.b.startTerm(ctx)
				d.setTerm(term)
			}
		case err != nil && term != nil && time.Since(renewed) < ttl/2:
			// The bus could not say: keep dispatching while the lease
			// certainly still holds.
		case term != nil:
			d.setTerm(nil)
			term.close()
			term = nil
		}
		select {
		case <-ctx.Done():
			if term != nil {
				term.close()
			}
			return
		case <-tick.C:
		}
	}
}

// holdShortLease is holdLease for a lease of its own ttl (a per-key TTL,
// shorter than the bucket's).
func (b *Bus) holdShortLease(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	actx, cancel := context.WithTimeout(ctx, attemptLimit)
	defer cancel()
	if _, err := b.leases.Create(actx, name, []byte(b.source), jetstream.KeyTTL(ttl)); err == nil {
		return true, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return false, errUnavailable("bus: take lease "+name, err)
	}
	e, err := b.leases.Get(actx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, errUnavailable("bus: read lease "+name, err)
	}
	if string(e.Value()) != b.source {
		return false, nil
	}
	// A renewal is an update that sets the TTL again, which the key-value
	// API does not offer: the write it makes, with the TTL header.
	m := nats.NewMsg(kvPrefix(schemas.BucketLeases) + name)
	m.Data = []byte(b.source)
	expectLastSubjectSeq(m, e.Revision())
	withTTL(m, ttl)
	if _, err := b.publish(actx, m); err != nil {
		var api *jetstream.APIError
		if errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return false, nil // taken meanwhile
		}
		return false, errUnavailable("bus: renew lease "+name, err)
	}
	return true, nil
}

// dispatchTerm is one holding of the lease: it follows the workers' pull
// requests and runs an agentQueue for each agent that has workers.
type dispatchTerm struct {
	b      *Bus
	ctx    context.Context
	cancel context.CancelFunc
	intake jetstream.Stream
	sub    *nats.Subscription
	// cancels drops the held work of tasks canceled while queued (their
	// intake items are withdrawn; a body held in memory would still
	// move, and a worker would take it only to find the task canceled).
	cancels *nats.Subscription
	wg      sync.WaitGroup

	// heldBytes is the size of the bodies the term holds.
	heldBytes atomic.Int64

	mu     sync.Mutex
	agents map[string]*agentQueue
	// seen counts each agent's requests while begin counts the waiting
	// ones, which may include them.
	seen map[string]int
	// closed is set by close before it waits for wg: a pull request's
	// callback (a goroutine of the connection, not counted in wg) starts
	// an agent's goroutines only before, so none is added to wg while
	// close waits for it.
	closed bool
}

func (b *Bus) startTerm(parent context.Context) *dispatchTerm {
	ctx, cancel := context.WithCancel(parent)
	t := &dispatchTerm{b: b, ctx: ctx, cancel: cancel, agents: map[string]*agentQueue{}, seen: map[string]int{}}
	b.log.Debug("took the dispatch lease", "source", b.source)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.begin()
	}()
	return t
}

// begin subscribes to the workers' pull requests, then gives each agent
// whose workers already wait the credit of their waiting requests (sent
// before the subscription, so never seen).
func (t *dispatchTerm) begin() {
	for t.ctx.Err() == nil {
		st, err := t.b.js.Stream(t.ctx, schemas.StreamIntake)
		if err == nil {
			t.intake = st
			t.sub, err = t.b.nc.Subscribe(apiNextWork+"*", t.pullRequest)
		}
		if err == nil {
			t.cancels, err = t.b.nc.Subscribe(schemas.SubjectCancelAll, t.canceled)
		}
		if err == nil {
			// In place on the server before the waiting requests are
			// counted: a request is seen by one or the other.
			err = t.b.nc.Flush()
		}
		if err == nil {
			break
		}
		t.b.log.Warn("dispatch cannot start yet; retrying", "err", err)
		if !sleepCtx(t.ctx, time.Second) {
			return
		}
	}
	if t.ctx.Err() != nil {
		return
	}
	work, err := t.b.js.Stream(t.ctx, schemas.StreamWork)
	if err != nil {
		return
	}
	names := work.ConsumerNames(t.ctx)
	for name := range names.Name() {
		agent, ok := schemas.AgentFromConsumerWork(name)
		if !ok {
			continue
		}
		c, err := work.Consumer(t.ctx, name)
		if err != nil {
			continue
		}
		t.mu.Lock()
		n := c.CachedInfo().NumWaiting - t.seen[agent]
		t.mu.Unlock()
		if n > 0 {
			// Their size and expiry are not known: a request lasts as
			// long as the workers' default fetch.
			t.queue(agent).credit(n, time.Now().Add(5*time.Second))
		} else {
			t.queue(agent)
		}
	}
	t.mu.Lock()
	t.seen = nil
	t.mu.Unlock()
}

func (t *dispatchTerm) close() {
	t.cancel()
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
	t.mu.Lock()
	for agent := range t.agents {
		t.b.m.waiting.Set(0, agent) // the next holder holds them
	}
	t.mu.Unlock()
	for _, sub := range []*nats.Subscription{t.sub, t.cancels} {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
	}
	t.b.log.Debug("gave up the dispatch lease", "source", t.b.source)
}

// pullRequest credits the agent of a worker's pull request with its batch.
func (t *dispatchTerm) pullRequest(m *nats.Msg) {
	agent, ok := schemas.AgentFromConsumerWork(strings.TrimPrefix(m.Subject, apiNextWork))
	if !ok {
		return
	}
	var req struct {
		Batch   int   `json:"batch"`
		Expires int64 `json:"expires"`
		NoWait  bool  `json:"no_wait"`
	}
	if len(m.Data) > 0 && json.Unmarshal(m.Data, &req) != nil {
		return
	}
	if req.NoWait {
		// Answered at once with what is queued: nothing waits for a
		// move.
		return
	}
	t.mu.Lock()
	if t.seen != nil {
		t.seen[agent]++
	}
	t.mu.Unlock()
	until := time.Now().Add(time.Hour)
	if req.Expires > 0 {
		// A move sent just before the request expires would wait in the
		// work stream for the worker's next request.
		until = time.Now().Add(time.Duration(req.Expires) - 50*time.Millisecond)
	}
	t.queue(agent).credit(max(req.Batch, 1), until)
}

// canceled drops the held work of a canceled task.
func (t *dispatchTerm) canceled(m *nats.Msg) {
	ev, err := decodeMsg(m)
	if err != nil || ev.Type() != schemas.TypeTaskCancel {
		return
	}
	var n schemas.CancelNotice
	if decodeData(&ev, &n) != nil {
		return
	}
	t.mu.Lock()
	q := t.agents[n.Agent]
	t.mu.Unlock()
	if q != nil {
		q.drop(n.TaskID)
	}
}

// queue returns the agent's queue, starting it on first use.
func (t *dispatchTerm) queue(agent string) *agentQueue {
	t.mu.Lock()
	defer t.mu.Unlock()
	if q, ok := t.agents[agent]; ok {
		return q
	}
	q := &agentQueue{t: t, agent: agent, callers: map[string][]*heldWork{}, finish: map[string]uint64{}, wake: make(chan struct{}, 1)}
	t.agents[agent] = q
	if !t.closed && t.ctx.Err() == nil {
		t.wg.Add(2)
		go func() { defer t.wg.Done(); q.fetch() }()
		go func() { defer t.wg.Done(); q.release() }()
	}
	return q
}

// heldWork is an intake item waiting for its caller's turn, with its body
// while the term holds less than heldBodiesMax of them.
type heldWork struct {
	reply   string // its acknowledgement subject in the intake
	seq     uint64
	hdr     nats.Header
	data    []byte // nil when over the term's budget: read back to move
	caller  string
	subject string // the work subject it moves to
	tag     uint64 // its turn (see agentQueue)
}

type credit struct {
	n     int
	until time.Time
}

// agentQueue holds an agent's intake items by caller and moves them as the
// agent's workers ask for work, in turns (start-time fair queuing): an
// item's turn is its caller's previous item's turn plus one, or the turn
// being served when its caller had nothing waiting, and the item with the
// lowest turn moves first (the older on a tie). A caller that queues many
// items so takes every n-th move when n callers have work waiting, and a
// caller that comes back after a pause starts at the current turn, with
// no credit saved up from it.
type agentQueue struct {
	t     *dispatchTerm
	agent string
	wake  chan struct{}

	mu      sync.Mutex
	callers map[string][]*heldWork
	finish  map[string]uint64 // each caller's next turn
	vtime   uint64            // the turn of the item moved last
	held    int
	credits []credit
	// moving counts the items taken to move whose publish is not settled
	// (see moveSome).
	moving int

	// cons is the intake consumer fetch reads (set by fetch), for the
	// check that no delivery went astray (checkDeliveries); reset asks
	// fetch for a new consumer, and short counts the checks in a row
	// that found the consumer waiting for more acknowledgements than
	// this term holds.
	cons  atomic.Pointer[jetstream.Consumer]
	reset atomic.Bool
	short int
}

func (q *agentQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *agentQueue) credit(n int, until time.Time) {
	q.mu.Lock()
	q.credits = append(q.credits, credit{n, until})
	q.mu.Unlock()
	q.signal()
}

// fetch brings the agent's intake in as it arrives. The consumer is
// created anew when the term starts: one a previous holder left hands
// back every item that holder held.
func (q *agentQueue) fetch() {
	ctx, b := q.t.ctx, q.t.b
	var cons jetstream.Consumer
	for ctx.Err() == nil {
		var err error
		if q.reset.Swap(false) {
			q.forget()
			cons = nil
		}
		if cons == nil {
			q.cons.Store(nil)
			if cons, err = b.intakeConsumer(ctx, q.agent); err == nil {
				held := cons // its own copy: cons changes when it is replaced
				q.cons.Store(&held)
			}
		}
		if err == nil {
			if hook := b.cfg.beforeIntakeFetch; hook != nil {
				hook(q.agent)
			}
			err = q.fetchOnce(ctx, cons)
		}
		if err != nil && ctx.Err() == nil {
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
				cons = nil
			}
			b.log.Debug("dispatch: fetching intake", "agent", q.agent, "err", err)
			if !sleepCtx(ctx, 250*time.Millisecond) {
				return
			}
		}
	}
}

// fetchOnce brings what arrives in the intake within a few seconds.
func (q *agentQueue) fetchOnce(ctx context.Context, cons jetstream.Consumer) error {
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	batch, err := cons.Fetch(intakeFetch, jetstream.FetchContext(fctx))
	if err != nil {
		return err
	}
	for m := range batch.Messages() {
		q.add(m)
	}
	err = batch.Error()
	if ctx.Err() == nil && (errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)) {
		return nil
	}
	return err
}

// intakeCheckEvery is how often a term compares what the intake consumer
// has delivered and not yet had acknowledged with what the term holds;
// intakeCheckShort is how many comparisons in a row must find it short
// before the consumer is replaced.
const (
	intakeCheckEvery = 5 * time.Second
	intakeCheckShort = 3
)

// checkDeliveries finds items the intake consumer delivered that never
// reached this term: a delivery lost with a connection that dropped, or
// with a consumer leader that died, or one that arrived after the fetch
// it answered had ended. Such an item waits for its acknowledgement until
// the consumer's AckWait (minutes) while nothing moves it. When the
// consumer counts more unacknowledged items than the term holds and is
// moving, for intakeCheckShort checks in a row (an acknowledgement or a
// delivery in flight is settled well within one), the consumer is
// replaced: the new one delivers every unacknowledged item again, and
// the term forgets what it held (a held item comes again; one it moves
// meanwhile is moved twice, which the work stream's de-duplication or
// the worker's check of the task absorbs).
func (q *agentQueue) checkDeliveries(ctx context.Context) {
	cp := q.cons.Load()
	if cp == nil || q.reset.Load() {
		return
	}
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := (*cp).Info(ictx)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
		// Deleted under the term (by an operator, or lost with its
		// node): fetch makes it again, and the new one delivers what
		// was held.
		q.t.b.log.Warn("dispatch: the intake consumer is gone; making it again", "agent", q.agent)
		q.reset.Store(true)
		return
	}
	if err != nil {
		return
	}
	q.mu.Lock()
	local := q.held + q.moving
	q.mu.Unlock()
	if info.NumAckPending <= local {
		q.short = 0
		return
	}
	if q.short++; q.short < intakeCheckShort {
		return
	}
	q.short = 0
	q.t.b.log.Warn("dispatch: the intake delivered work this holder never received; taking it back", "agent", q.agent,
		"unacknowledged", info.NumAckPending, "held", local)
	q.reset.Store(true)
}

// forget drops every held item, before the consumer is replaced (see
// checkDeliveries): the new one delivers them again.
func (q *agentQueue) forget() {
	q.mu.Lock()
	var bytes int64
	for _, items := range q.callers {
		for _, it := range items {
			bytes += int64(len(it.data))
		}
	}
	q.t.b.m.waiting.Add(-int64(q.held), q.agent)
	q.callers, q.held = map[string][]*heldWork{}, 0
	q.mu.Unlock()
	q.t.heldBytes.Add(-bytes)
}

// intakeConsumer replaces the agent's intake consumer with a new one.
func (b *Bus) intakeConsumer(ctx context.Context, agent string) (jetstream.Consumer, error) {
	name := schemas.ConsumerIntake(agent)
	if err := b.js.DeleteConsumer(ctx, schemas.StreamIntake, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, err
	}
	return b.js.CreateOrUpdateConsumer(ctx, schemas.StreamIntake, jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "a2abus intake of agent " + agent + ", read by the dispatch lease holder",
		FilterSubject: schemas.SubjectIntakeAgent(agent),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       intakeAckWait,
		// Every waiting item is held, so that any caller's next item
		// can be the one to move; what the intake holds is bounded by
		// the stream.
		MaxAckPending: -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Replicas:      b.cfg.Replicas,
		MemoryStorage: b.cfg.MemoryStorage,
	})
}

func (q *agentQueue) add(m jetstream.Msg) {
	agent, caller, task, ok := schemas.ParseIntakeSubject(m.Subject())
	md, err := m.Metadata()
	if !ok || agent != q.agent || err != nil {
		// Not an item a writer of the bus contract queues: it can never
		// run, and leaving it would hold the intake's space.
		q.t.b.log.Warn("dropping a malformed intake item", "subject", m.Subject())
		_ = m.Term()
		return
	}
	q.mu.Lock()
	tag := q.turn(caller)
	it := &heldWork{reply: m.Reply(), seq: md.Sequence.Stream, caller: caller, subject: schemas.SubjectWorkTask(agent, task), tag: tag}
	if n := int64(len(m.Data())); q.t.heldBytes.Add(n) <= heldBodiesMax {
		it.hdr, it.data = m.Headers(), m.Data()
	} else {
		q.t.heldBytes.Add(-n)
	}
	q.callers[caller] = append(q.callers[caller], it)
	q.held++
	q.t.b.m.waiting.Add(1, q.agent)
	q.mu.Unlock()
	q.signal()
}

// take returns the next item to move and the credit it spent, or nil when
// no worker asks or nothing waits.
func (q *agentQueue) take() (*heldWork, credit) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.liveCredits(time.Now())
	if len(q.credits) == 0 || q.held == 0 {
		return nil, credit{}
	}
	spent := q.spend()
	var it *heldWork
	for _, items := range q.callers {
		if h := items[0]; it == nil || h.tag < it.tag || h.tag == it.tag && h.seq < it.seq {
			it = h
		}
	}
	if items := q.callers[it.caller]; len(items) == 1 {
		delete(q.callers, it.caller)
	} else {
		q.callers[it.caller] = items[1:]
	}
	q.vtime = it.tag
	q.held--
	q.moving++
	q.t.b.m.waiting.Add(-1, q.agent)
	if len(q.finish) > 2*len(q.callers)+64 {
		// Callers with nothing waiting whose next turn has come: they
		// would start at the current turn anyway.
		for c, f := range q.finish {
			if _, waiting := q.callers[c]; !waiting && f <= q.vtime {
				delete(q.finish, c)
			}
		}
	}
	return it, spent
}

// liveCredits drops the credits whose requests expired or are spent;
// q.mu is held.
func (q *agentQueue) liveCredits(now time.Time) {
	live := q.credits[:0]
	for _, c := range q.credits {
		if c.until.After(now) && c.n > 0 {
			live = append(live, c)
		}
	}
	q.credits = live
}

// spend takes one from the oldest live credit; q.mu is held and a credit
// is there.
func (q *agentQueue) spend() credit {
	spent := credit{1, q.credits[0].until}
	if q.credits[0].n--; q.credits[0].n == 0 {
		q.credits = q.credits[1:]
	}
	return spent
}

// takeDirect gives the credit a new item of caller moves with, straight
// to the work stream (dispatcher.direct), when the agent has nothing
// waiting here and nothing moving: the item takes its turn as add gives
// it and is served at once, as take would serve it. The caller settles
// it (moving) when the publish has an answer.
func (q *agentQueue) takeDirect(caller string) (credit, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held > 0 || q.moving > 0 {
		return credit{}, false
	}
	q.liveCredits(time.Now())
	if len(q.credits) == 0 {
		return credit{}, false
	}
	q.vtime = q.turn(caller)
	q.moving++
	return q.spend(), true
}

// turn gives a new item of caller its turn (see agentQueue): its caller's
// previous item's plus one, or the turn being served; q.mu is held.
func (q *agentQueue) turn(caller string) uint64 {
	tag := max(q.vtime, q.finish[caller])
	q.finish[caller] = tag + 1
	return tag
}

// drop forgets the held work of task, acknowledging it in the intake.
func (q *agentQueue) drop(task string) {
	subject := schemas.SubjectWorkTask(q.agent, task)
	q.mu.Lock()
	var gone *heldWork
	for caller, items := range q.callers {
		for i, it := range items {
			if it.subject != subject {
				continue
			}
			gone = it
			if len(items) == 1 {
				delete(q.callers, caller)
			} else {
				q.callers[caller] = append(items[:i:i], items[i+1:]...)
			}
			q.held--
			q.t.b.m.waiting.Add(-1, q.agent)
			break
		}
		if gone != nil {
			break
		}
	}
	q.mu.Unlock()
	if gone != nil {
		q.t.heldBytes.Add(-int64(len(gone.data)))
		_ = q.t.b.nc.Publish(gone.reply, ackAck)
	}
}

// putBack returns an item that could not move to the front of its
// caller's items, with the credit it spent.
func (q *agentQueue) putBack(it *heldWork, c credit) {
	q.mu.Lock()
	q.callers[it.caller] = append([]*heldWork{it}, q.callers[it.caller]...)
	q.held++
	q.moving--
	q.t.b.m.waiting.Add(1, q.agent)
	q.credits = append(q.credits, c)
	q.mu.Unlock()
}

// release moves items while workers ask for them, and heartbeats the
// items it holds.
func (q *agentQueue) release() {
	ctx := q.t.ctx
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	beat, checked := time.Now(), time.Now()
	checkEvery := intakeCheckEvery
	if d := q.t.b.cfg.intakeCheckEvery; d > 0 {
		checkEvery = d
		tick.Reset(min(d, time.Second))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		case <-tick.C:
			if time.Since(beat) >= intakeHeartbeat {
				beat = time.Now()
				q.heartbeat()
			}
			if time.Since(checked) >= checkEvery {
				checked = time.Now()
				q.checkDeliveries(ctx)
			}
		}
		for ctx.Err() == nil && q.moveSome(ctx) {
		}
	}
}

// moving is an item on its way to the work stream.
type moving struct {
	it    *heldWork
	spent credit
	ack   jetstream.PubAckFuture
}

// moveSome moves what the workers ask for now, the publishes in flight
// together, and reports whether it moved everything it took (so more may
// be taken at once).
func (q *agentQueue) moveSome(ctx context.Context) bool {
	b := q.t.b
	var batch []moving
	for len(batch) < intakeFetch {
		it, spent := q.take()
		if it == nil {
			break
		}
		hdr, data := it.hdr, it.data
		if data == nil {
			raw, err := q.t.intake.GetMsg(ctx, it.seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				// Withdrawn (its task was canceled): the request it
				// was for still waits.
				_ = b.nc.Publish(it.reply, ackAck)
				q.mu.Lock()
				q.credits = append(q.credits, spent)
				q.moving--
				q.mu.Unlock()
				continue
			}
			if err != nil {
				q.putBack(it, spent)
				break
			}
			hdr, data = raw.Header, raw.Data
		}
		m := nats.NewMsg(it.subject)
		m.Header, m.Data = hdr, data
		f, err := b.js.PublishMsgAsync(m)
		if err != nil {
			q.putBack(it, spent)
			break
		}
		batch = append(batch, moving{it, spent, f})
	}
	ok, moved := true, 0
	for _, mv := range batch {
		var err error
		var ack *jetstream.PubAck
		select {
		case ack = <-mv.ack.Ok():
		case err = <-mv.ack.Err():
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			q.putBack(mv.it, mv.spent)
			if ok && ctx.Err() == nil {
				b.log.Debug("dispatch: moving work", "agent", q.agent, "err", err)
			}
			ok = false
			continue
		}
		q.t.heldBytes.Add(-int64(len(mv.it.data)))
		mv.it.data, mv.it.hdr = nil, nil
		if ack.Duplicate {
			// Moved before (by a holder whose acknowledgement in the
			// intake was lost with it): the work stream dropped this
			// copy, so no worker's request was answered, and the credit
			// goes back for the next item. (Were the earlier copy still
			// waiting in the work stream, it answers the request and the
			// next item waits there for the one after.)
			q.mu.Lock()
			q.credits = append(q.credits, mv.spent)
			q.mu.Unlock()
		} else {
			b.m.dispatched.Inc(q.agent)
		}
		// An acknowledgement lost hands the item back after the
		// AckWait (or at the next checkDeliveries): moved again, it is
		// dropped as a repeat or found taken.
		_ = b.nc.Publish(mv.it.reply, ackAck)
		moved++
	}
	if moved > 0 {
		q.mu.Lock()
		q.moving -= moved
		q.mu.Unlock()
	}
	if !ok {
		sleepCtx(ctx, 250*time.Millisecond)
	}
	return ok && len(batch) > 0
}

// The acknowledgements the dispatcher sends to the intake.
var (
	ackAck        = []byte("+ACK")
	ackInProgress = []byte("+WPI")
)

func (q *agentQueue) heartbeat() {
	q.mu.Lock()
	var held []string
	for _, items := range q.callers {
		for _, it := range items {
			held = append(held, it.reply)
		}
	}
	q.mu.Unlock()
	for _, r := range held {
		_ = q.t.b.nc.Publish(r, ackInProgress)
	}
}

// sleepCtx waits d, or less if ctx ends first; false when it ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
