package bus

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// queueFor queues n new tasks of agent for caller and returns their ids.
func queueFor(t *testing.T, b *Bus, agent, caller string, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		rec := newRecord(agent)
		if err := b.queueWork(testCtx(t), workItem(rec), PublishOptions{Caller: caller}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.Task.ID)
	}
	return ids
}

// heldByDispatcher is how many of agent's intake items b's dispatcher
// holds (delivered to it and taken in, not yet moved).
func heldByDispatcher(t *testing.T, b *Bus, agent string) int {
	t.Helper()
	return b.dispatch.held(agent)
}

// workStreamEmpty checks that the agent's work stream queues nothing
// (no worker asks): no item is pending there, and the one acknowledged
// last is settled (an acknowledgement is a publish the consumer takes in
// on its own, after a read of its counts may have been answered).
func workStreamEmpty(t *testing.T, b *Bus, agent string) {
	t.Helper()
	if p, _ := consumerCounts(t, b, agent); p != 0 {
		t.Fatalf("work stream holds %d pending with no worker asking, want none", p)
	}
	eventually(t, "the last acknowledgement to settle", func() bool {
		p, ap := consumerCounts(t, b, agent)
		return p == 0 && ap == 0
	})
}

// The agent's workers get the callers' work in turn, not in the order it
// was queued: a caller with five tasks queued first does not keep another
// caller's single task waiting behind them.
func TestDispatchTakesCallersInTurn(t *testing.T) {
	b := newTestBus(t, Config{})
	wc := workConsumer(t, b, "fair")
	callerOf := map[string]string{}
	for _, q := range []struct {
		caller string
		n      int
	}{{"a", 5}, {"b", 1}, {"c", 2}} {
		for _, id := range queueFor(t, b, "fair", schemas.CallerKey("", q.caller, ""), q.n) {
			callerOf[id] = q.caller
		}
	}
	var order []string
	take := func() {
		w := fetchOne(t, wc)
		order = append(order, callerOf[w.Item.TaskID])
		if err := w.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	// The first request finds the agent (and a's first task, the oldest);
	// then every item is held, waiting for its turn.
	take()
	eventually(t, "the dispatcher to hold the other seven items", func() bool { return heldByDispatcher(t, b, "fair") == 7 })
	for range 7 {
		take()
	}
	if want := []string{"a", "b", "c", "a", "c", "a", "a", "a"}; !slices.Equal(order, want) {
		t.Fatalf("callers served in the order %v, want %v", order, want)
	}
	workStreamEmpty(t, b, "fair")
}

// Work waits in the intake until a worker asks for it: the work stream
// never holds a queue that a later caller would wait behind.
func TestDispatchMovesWorkOnlyWhenAWorkerAsks(t *testing.T) {
	b := newTestBus(t, Config{})
	wc := workConsumer(t, b, "asked")
	queueFor(t, b, "asked", schemas.CallerKey("", "a", ""), 3)
	take := func() {
		w := fetchOne(t, wc)
		if err := w.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	take()
	eventually(t, "the dispatcher to hold the other two", func() bool { return heldByDispatcher(t, b, "asked") == 2 })
	workStreamEmpty(t, b, "asked")
	// The dispatcher acknowledges the intake's copy of the item it moved
	// after the move, so the backlog counts it until that lands.
	eventually(t, "the backlog to be the 2 items waiting in the intake", func() bool {
		n, err := b.AgentBacklog(testCtx(t), "asked")
		return err == nil && n == 2
	})
	take()
	take()
}

// A holder of the dispatch lease that dies holding work loses nothing:
// the next holder takes the lease when it expires and gets back every item
// the dead one held, each delivered once.
func TestDispatchHolderThatDiesHandsItsWorkOn(t *testing.T) {
	s := startServer(t, "")
	first := connect(t, s, Config{MemoryStorage: true, Role: "edge", dispatchLeaseTTL: time.Second})
	wc := workConsumer(t, first, "handover")
	ids := queueFor(t, first, "handover", schemas.CallerKey("", "a", ""), 4)
	w := fetchOne(t, wc)
	if err := w.Ack(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first holder to hold the other three", func() bool { return heldByDispatcher(t, first, "handover") == 3 })
	// It dies: its connection ends without releasing anything.
	first.abort()
	second := connect(t, s, Config{MemoryStorage: true, Role: "edge", dispatchLeaseTTL: time.Second})
	wc2 := workConsumer(t, second, "handover")
	got := []string{w.Item.TaskID}
	for range 3 {
		w := fetchOne(t, wc2)
		got = append(got, w.Item.TaskID)
		if err := w.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(got)
	slices.Sort(ids)
	if !slices.Equal(got, ids) {
		t.Fatalf("tasks run %v, want each of %v once", got, ids)
	}
	ws, err := wc2.Fetch(testCtx(t), 1, 200*time.Millisecond)
	if err != nil || len(ws) != 0 {
		t.Fatalf("a fifth delivery: %d items, %v", len(ws), err)
	}
	if n := streamMsgs(t, second, schemas.StreamIntake); n != 0 {
		t.Fatalf("the intake still holds %d items", n)
	}
}

// An item a previous holder moved but whose acknowledgement in the intake
// was lost (it died right after) is moved again by the next holder; the
// work stream drops that copy as a repeat, and the worker's request it
// was taken for is answered by the next item, not left waiting until it
// expires.
func TestDispatchMoveDroppedAsARepeatSpendsNoRequest(t *testing.T) {
	b := newTestBus(t, Config{})
	caller := schemas.CallerKey("", "a", "")
	ids := queueFor(t, b, "repeat", caller, 2)
	// The earlier move of the first item: in the work stream under its
	// own id, taken and acknowledged by a worker (gone from the stream,
	// remembered by its de-duplication).
	intake, err := b.js.Stream(testCtx(t), schemas.StreamIntake)
	if err != nil {
		t.Fatal(err)
	}
	first, err := intake.GetLastMsgForSubject(testCtx(t), schemas.SubjectIntake("repeat", caller, ids[0]))
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(schemas.SubjectWorkTask("repeat", ids[0]))
	m.Header, m.Data = first.Header, first.Data
	ack, err := b.js.PublishMsg(testCtx(t), m)
	if err != nil {
		t.Fatal(err)
	}
	work, err := b.js.Stream(testCtx(t), schemas.StreamWork)
	if err != nil {
		t.Fatal(err)
	}
	if err := work.DeleteMsg(testCtx(t), ack.Sequence); err != nil {
		t.Fatal(err)
	}
	w := fetchOne(t, workConsumer(t, b, "repeat"))
	if w.Item.TaskID != ids[1] {
		t.Fatalf("got work for %s, want the next item %s", w.Item.TaskID, ids[1])
	}
	if err := w.Ack(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the intake to hold nothing", func() bool { return streamMsgs(t, b, schemas.StreamIntake) == 0 })
}

// An item the intake delivered that never reached the dispatcher (lost
// with a connection or a consumer leader that went down, or arriving
// after its fetch ended) is not left waiting for the consumer's AckWait:
// the dispatcher finds the consumer waiting for more acknowledgements
// than it holds, replaces it, and the item moves to the next worker that
// asks. (Before, it waited ten minutes: tasks accepted during a node's
// loss stayed SUBMITTED.)
func TestDispatchTakesBackADeliveryItNeverReceived(t *testing.T) {
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b := newTestBus(t, Config{intakeCheckEvery: 50 * time.Millisecond, beforeIntakeFetch: func(agent string) {
		if agent == "astray" {
			once.Do(func() { close(reached); <-release })
		}
	}})
	var released sync.Once
	free := func() { released.Do(func() { close(release) }) }
	t.Cleanup(free) // a failure below must not leave the dispatcher waiting
	wc := workConsumer(t, b, "astray")
	// Queued before any worker asks, the item waits in the intake (with a
	// request open it would go straight to the work stream: see
	// dispatcher.direct). A worker's request then makes the dispatcher
	// take the agent up; its first fetch of the intake waits until the
	// item is taken away.
	id := queueFor(t, b, "astray", schemas.CallerKey("", "a", ""), 1)[0]
	go func() { _, _ = wc.Fetch(testCtx(t), 1, 200*time.Millisecond) }()
	<-reached
	cons, err := b.js.Consumer(testCtx(t), schemas.StreamIntake, schemas.ConsumerIntake("astray"))
	if err != nil {
		t.Fatal(err)
	}
	stolen, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range stolen.Messages() {
		n++ // delivered, never acknowledged: as a delivery that went astray
	}
	if n != 1 {
		t.Fatalf("took %d deliveries away, want 1", n)
	}
	free()
	w := fetchOne(t, wc)
	if w.Item.TaskID != id {
		t.Fatalf("got work for %s, want %s", w.Item.TaskID, id)
	}
	if err := w.Ack(); err != nil {
		t.Fatal(err)
	}
}

// The intake consumer deleted under a holding dispatcher (an operator, a
// stream restored, a consumer lost with its node) is made again, and work
// goes on moving; the check of the consumer's deliveries, which reads it
// meanwhile, copes with it gone.
func TestDispatchRecreatesItsIntakeConsumer(t *testing.T) {
	b := newTestBus(t, Config{intakeCheckEvery: time.Millisecond})
	wc := workConsumer(t, b, "gone")
	take := func() {
		w := fetchOne(t, wc)
		if err := w.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	queueFor(t, b, "gone", schemas.CallerKey("", "a", ""), 1)
	take()
	for range 3 {
		eventually(t, "the intake consumer to be there", func() bool {
			_, err := b.js.Consumer(testCtx(t), schemas.StreamIntake, schemas.ConsumerIntake("gone"))
			return err == nil
		})
		if err := b.js.DeleteConsumer(testCtx(t), schemas.StreamIntake, schemas.ConsumerIntake("gone")); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatal(err)
		}
	}
	queueFor(t, b, "gone", schemas.CallerKey("", "a", ""), 1)
	take()
}

// intakeLastSeq is the intake stream's last sequence: every item ever
// queued there.
func intakeLastSeq(t *testing.T, b *Bus) uint64 {
	t.Helper()
	st, err := b.js.Stream(testCtx(t), schemas.StreamIntake)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// openCredit is how many items the dispatcher holds workers' requests
// for, for agent.
func openCredit(b *Bus, agent string) int {
	q := b.dispatch.queueOf(agent)
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.liveCredits(time.Now())
	n := 0
	for _, c := range q.credits {
		n += c.n
	}
	return n
}

// With a worker asking and nothing waiting for its turn, a new item goes
// straight to the work stream (the intake is never written), and counts
// as its caller's turn; with no worker asking, new items queue in the
// intake and move in turns, and the work stream holds only what workers
// asked for.
func TestDispatchDirectWhenNothingWaits(t *testing.T) {
	b := newTestBus(t, Config{})
	wc := workConsumer(t, b, "direct")
	before := intakeLastSeq(t, b)
	got := make(chan *Work, 1)
	go func() {
		ws, err := wc.Fetch(testCtx(t), 1, 10*time.Second)
		if err == nil && len(ws) == 1 {
			got <- ws[0]
		}
		close(got)
	}()
	eventually(t, "the worker's request to reach the dispatcher", func() bool { return openCredit(b, "direct") == 1 })
	id := queueFor(t, b, "direct", schemas.CallerKey("", "a", ""), 1)[0]
	w := <-got
	if w == nil || w.Item.TaskID != id {
		t.Fatalf("the asking worker got %v, want the work of %s", w, id)
	}
	if err := w.Ack(); err != nil {
		t.Fatal(err)
	}
	if after := intakeLastSeq(t, b); after != before {
		t.Fatalf("the intake stored %d items for work that went straight to a waiting worker", after-before)
	}
	if openCredit(b, "direct") != 0 {
		t.Fatal("the direct move did not spend the worker's request")
	}

	// No worker asking: items wait in the intake, in turns.
	queued := append(queueFor(t, b, "direct", schemas.CallerKey("", "a", ""), 2), queueFor(t, b, "direct", schemas.CallerKey("", "b", ""), 1)...)
	if after := intakeLastSeq(t, b); after != before+3 {
		t.Fatalf("the intake stored %d items, want 3", after-before)
	}
	workStreamEmpty(t, b, "direct")
	var order []string
	for range 3 {
		w := fetchOne(t, wc)
		order = append(order, w.Item.TaskID)
		if err := w.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	// The item that went straight to the worker was a's turn: b, which
	// had none, goes first.
	if want := []string{queued[2], queued[0], queued[1]}; !slices.Equal(order, want) {
		t.Fatalf("taken in the order %v, want b's, then a's two %v", order, want)
	}
}
