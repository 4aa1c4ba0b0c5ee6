package bus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/a2abus/a2abus/schemas"
)

// workConsumer binds a WorkConsumer for agent.
func workConsumer(t testing.TB, b *Bus, agent string) *WorkConsumer {
	t.Helper()
	wc, err := b.WorkConsumer(testCtx(t), agent)
	if err != nil {
		t.Fatal(err)
	}
	return wc
}

// fetchOne fetches and expects exactly one work item within 30 s. Like
// a worker's run loop, it asks again when a request expires empty: on a
// loaded machine the dispatcher can miss moving work for one request
// (seen about once in 300 runs under a CPU hog, before and after
// dispatcher.direct), and the next request takes it.
func fetchOne(t testing.TB, wc *WorkConsumer) *Work {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ws, err := wc.Fetch(testCtx(t), 1, 5*time.Second)
		if err != nil {
			t.Fatalf("Fetch: %v", err)
		}
		if len(ws) == 1 {
			return ws[0]
		}
		if len(ws) > 1 || time.Now().After(deadline) {
			t.Fatalf("Fetch returned %d items, want 1", len(ws))
		}
	}
}

// fetchTask fetches until it gets the work item of task id, ending the
// others it takes (Term) as leftovers of earlier steps.
func fetchTask(t testing.TB, wc *WorkConsumer, id string) *Work {
	t.Helper()
	for {
		w := fetchOne(t, wc)
		if w.Item.TaskID == id {
			return w
		}
		t.Logf("skipping the work of task %s, left over from an earlier step", w.Item.TaskID)
		_ = w.Term("left over")
	}
}

// consumerCounts returns the pending and unacknowledged counts of the
// agent's work consumer.
func consumerCounts(t testing.TB, b *Bus, agent string) (pending uint64, ackPending int) {
	t.Helper()
	c, err := b.js.Consumer(testCtx(t), schemas.StreamWork, schemas.ConsumerWork(agent))
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.NumPending, info.NumAckPending
}

func TestPublishWorkThenFetch(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	wc := workConsumer(t, b, "echo")
	rec := newRecord("echo")
	item := workItem(rec)
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if err := b.queueWork(ctx, item, PublishOptions{ID: "evt-1", Traceparent: tp, A2AVersion: "1.0"}); err != nil {
		t.Fatal(err)
	}
	w := fetchOne(t, wc)
	if w.Err != nil {
		t.Fatalf("work decoded with error: %v", w.Err)
	}
	if w.Attempt != 1 || w.EventID != "evt-1" || w.Traceparent != tp {
		t.Errorf("work = attempt %d id %q traceparent %q", w.Attempt, w.EventID, w.Traceparent)
	}
	if w.Item.TaskID != item.TaskID || w.Item.ContextID != item.ContextID || w.Item.Agent != "echo" ||
		w.Item.Message.MessageID != item.Message.MessageID || w.Item.Message.Text() != "hello" {
		t.Errorf("item = %+v, want %+v", w.Item, item)
	}
	if err := w.Ack(); err != nil {
		t.Fatal(err)
	}
	// Work-queue retention: an acknowledged item is gone.
	eventually(t, "the acked item to leave the queue", func() bool { return streamMsgs(t, b, schemas.StreamWork) == 0 })

	if err := b.queueWork(ctx, &schemas.WorkItem{TaskID: rec.Task.ID, Agent: "Not Valid"}, PublishOptions{}); err == nil {
		t.Error("queueWork accepted an invalid agent name")
	}
}

// A finished item's acknowledgement is held back until the next item is
// acknowledged (so a work-queue stream at one client does not empty its
// last block, and open a new block file, for every item), and is sent
// when the deferral passes or the consumer closes: nothing finished stays
// unacknowledged.
func TestAckOfTheLastItemIsHeldBackThenSent(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	wc := workConsumer(t, b, "held")
	wc.acks.wait = time.Hour // only the next acknowledgement or Close sends it
	first, second := newRecord("held"), newRecord("held")
	for _, rec := range []*schemas.TaskRecord{first, second} {
		if err := b.queueWork(ctx, workItem(rec), PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w1 := fetchTask(t, wc, first.Task.ID)
	if err := w1.Ack(); err != nil {
		t.Fatal(err)
	}
	wc.acks.mu.Lock()
	held := wc.acks.held == w1.msg
	wc.acks.mu.Unlock()
	if !held {
		t.Fatal("the first item's acknowledgement was not held back")
	}
	w2 := fetchTask(t, wc, second.Task.ID)
	if err := w2.Ack(); err != nil {
		t.Fatal(err)
	}
	// The second acknowledgement sends the first: only the second item
	// remains in the stream until the consumer closes.
	eventually(t, "the first item to leave the queue", func() bool {
		_, ap := consumerCounts(t, b, "held")
		return ap == 1 && streamMsgs(t, b, schemas.StreamWork) == 1
	})
	if err := wc.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second item to leave the queue once the consumer closed", func() bool {
		_, ap := consumerCounts(t, b, "held")
		return ap == 0 && streamMsgs(t, b, schemas.StreamWork) == 0
	})

	// Without a next item or a close, the deferral passing sends it.
	wc.acks.mu.Lock()
	wc.acks.wait = time.Millisecond
	wc.acks.mu.Unlock()
	third := newRecord("held")
	if err := b.queueWork(ctx, workItem(third), PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := fetchTask(t, wc, third.Task.ID).Ack(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the last item to leave the queue after the deferral", func() bool { return streamMsgs(t, b, schemas.StreamWork) == 0 })
}

// Fetch asks for one item and then takes what else is ready: it neither
// waits for n items nor leaves ready ones behind.
func TestFetchReturnsWhatIsAvailable(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	wc := workConsumer(t, b, "echo")

	if err := b.queueWork(ctx, workItem(newRecord("echo")), PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	ws, err := wc.Fetch(ctx, 10, 20*time.Second)
	if err != nil || len(ws) != 1 || ws[0].Err != nil {
		t.Fatalf("Fetch(10) with one item queued = %d items, %v", len(ws), err)
	}
	_ = ws[0].Ack()

	want := map[string]bool{}
	for range 3 {
		rec := newRecord("echo")
		want[rec.Task.ID] = true
		if err := b.queueWork(ctx, workItem(rec), PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The first Fetch returns at least one and at most the three ready
	// items. It may return fewer than three: it skips the second pull when
	// the first delivery's NumPending says nothing waits, and the server
	// counts new messages into NumPending asynchronously after the publish
	// ack, so the hint can lag (see the report). Nothing is lost: further
	// Fetches return the rest, each item once.
	first := true
	for len(want) > 0 {
		ws, err = wc.Fetch(ctx, 10, 20*time.Second)
		if err != nil || len(ws) == 0 || len(ws) > 3 {
			t.Fatalf("Fetch(10) with %d items queued = %d items, %v", len(want), len(ws), err)
		}
		if first && len(ws) < 3 {
			t.Logf("first Fetch(10) returned %d of 3 ready items", len(ws))
		}
		first = false
		for _, w := range ws {
			if w.Err != nil || !want[w.Item.TaskID] {
				t.Fatalf("unexpected or repeated work %+v", w)
			}
			delete(want, w.Item.TaskID)
			_ = w.Ack()
		}
	}

	// Nothing queued: an empty result at maxWait, not an error.
	ws, err = wc.Fetch(ctx, 5, 300*time.Millisecond)
	if err != nil || len(ws) != 0 {
		t.Fatalf("Fetch on an empty queue = %d items, %v", len(ws), err)
	}

	// A context that has ended: its error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := wc.Fetch(cctx, 1, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Fetch with a canceled context: %v", err)
	}
}

func TestNakRedelivers(t *testing.T) {
	b := newTestBus(t, Config{})
	wc := workConsumer(t, b, "echo")
	if err := b.queueWork(testCtx(t), workItem(newRecord("echo")), PublishOptions{ID: "nak-me"}); err != nil {
		t.Fatal(err)
	}
	w := fetchOne(t, wc)
	if w.Attempt != 1 {
		t.Fatalf("first delivery attempt %d", w.Attempt)
	}
	if err := w.Nak(0); err != nil {
		t.Fatal(err)
	}
	w2 := fetchOne(t, wc)
	if w2.EventID != "nak-me" || w2.Attempt != 2 {
		t.Fatalf("after Nak: id %q attempt %d, want nak-me attempt 2", w2.EventID, w2.Attempt)
	}
	if err := w2.Nak(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	w3 := fetchOne(t, wc)
	if w3.EventID != "nak-me" || w3.Attempt != 3 {
		t.Fatalf("after delayed Nak: id %q attempt %d", w3.EventID, w3.Attempt)
	}
	_ = w3.Ack()
}

// Work held past AckWait without a heartbeat goes back to the queue, as if
// the worker had crashed.
func TestAckWaitExpiryRedelivers(t *testing.T) {
	b := newTestBus(t, Config{AckWait: 500 * time.Millisecond})
	wc := workConsumer(t, b, "echo")
	if err := b.queueWork(testCtx(t), workItem(newRecord("echo")), PublishOptions{ID: "held"}); err != nil {
		t.Fatal(err)
	}
	w := fetchOne(t, wc)
	if err := w.InProgress(); err != nil {
		t.Fatalf("InProgress: %v", err)
	}
	// Not acked: the next Fetch blocks until the server redelivers it.
	w2 := fetchOne(t, wc)
	if w2.EventID != "held" || w2.Attempt != 2 {
		t.Fatalf("redelivery: id %q attempt %d, want held attempt 2", w2.EventID, w2.Attempt)
	}
	_ = w2.Ack()
}

// A second worker process binds to the same durable consumer: work held by
// a crashed one reaches it.
func TestCrashedWorkersWorkGoesToAnother(t *testing.T) {
	s := startServer(t, "")
	cfg := Config{MemoryStorage: true, AckWait: 500 * time.Millisecond}
	b1 := connect(t, s, cfg)
	b2 := connect(t, s, cfg)
	if err := b1.queueWork(testCtx(t), workItem(newRecord("echo")), PublishOptions{ID: "orphan"}); err != nil {
		t.Fatal(err)
	}
	w := fetchOne(t, workConsumer(t, b1, "echo"))
	if w.EventID != "orphan" {
		t.Fatal(w.EventID)
	}
	b1.abort()
	w2 := fetchOne(t, workConsumer(t, b2, "echo"))
	if w2.EventID != "orphan" || w2.Attempt != 2 {
		t.Fatalf("other worker got id %q attempt %d", w2.EventID, w2.Attempt)
	}
	_ = w2.Ack()
}

func TestMalformedWorkComesBackWithErr(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	wc := workConsumer(t, b, "echo")
	subj := schemas.SubjectWork("echo")

	// No CloudEvent headers at all.
	if _, err := b.js.Publish(ctx, subj, []byte(`{"taskId":"x"}`)); err != nil {
		t.Fatal(err)
	}
	// A valid CloudEvent of the wrong type.
	src := &Bus{source: "urn:a2abus:test:1"}
	ce, err := src.newEvent("wrong-type", schemas.TypeTaskCancel, "", schemas.CancelNotice{TaskID: schemas.NewID(), Agent: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.js.PublishMsg(ctx, encodeMsg(subj, &ce)); err != nil {
		t.Fatal(err)
	}
	// The right type, but data that is not a work item.
	ce, err = src.newEvent("bad-data", schemas.TypeWorkExecute, "", []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.js.PublishMsg(ctx, encodeMsg(subj, &ce)); err != nil {
		t.Fatal(err)
	}
	// A work item whose task id is not one.
	ce, err = src.newEvent("bad-task", schemas.TypeWorkExecute, "", schemas.WorkItem{TaskID: "../../etc", Agent: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.js.PublishMsg(ctx, encodeMsg(subj, &ce)); err != nil {
		t.Fatal(err)
	}

	for i, wantID := range []string{"", "wrong-type", "bad-data", "bad-task"} {
		w := fetchOne(t, wc)
		if w.Err == nil {
			t.Fatalf("poison item %d decoded without error: %+v", i, w)
		}
		if !errors.Is(w.Err, errMalformedEvent) {
			t.Errorf("poison item %d: %v does not wrap errMalformedEvent", i, w.Err)
		}
		if w.EventID != wantID || w.Attempt != 1 {
			t.Errorf("poison item %d: id %q attempt %d, want %q", i, w.EventID, w.Attempt, wantID)
		}
		if err := w.Term("malformed"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "terminated items to leave the queue", func() bool {
		p, ap := consumerCounts(t, b, "echo")
		return p == 0 && ap == 0
	})
}

// A publish retried with the same id is dropped by JetStream: one item.
func TestPublishWorkDeduplicatesByID(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	workConsumer(t, b, "echo")
	item := workItem(newRecord("echo"))
	for range 2 {
		if err := b.queueWork(ctx, item, PublishOptions{ID: "same-id"}); err != nil {
			t.Fatalf("queueWork (retry counts as accepted): %v", err)
		}
	}
	if err := b.queueWork(ctx, item, PublishOptions{ID: "other-id"}); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, b, schemas.StreamIntake); n != 2 {
		t.Fatalf("intake holds %d items after publishing ids same, same, other; want 2", n)
	}
	// The backlog counts them (the consumers count new messages
	// asynchronously); it settles at 2.
	eventually(t, "the backlog to count 2 items", func() bool {
		n, err := b.AgentBacklog(ctx, "echo")
		return err == nil && n == 2
	})
}

func TestCancelNotices(t *testing.T) {
	s := startServer(t, "")
	edge := connect(t, s, Config{MemoryStorage: true, Role: "edge"})
	worker := connect(t, s, Config{MemoryStorage: true, Role: "worker"})

	got := make(chan schemas.CancelNotice, 4)
	stop, err := worker.SubscribeCancels("echo", func(n schemas.CancelNotice) { got <- n })
	if err != nil {
		t.Fatal(err)
	}
	other := make(chan schemas.CancelNotice, 4)
	stopOther, err := worker.SubscribeCancels("other", func(n schemas.CancelNotice) { other <- n })
	if err != nil {
		t.Fatal(err)
	}
	defer stopOther()
	// Core NATS: the interest must reach the server before the publish
	// from another connection.
	if err := worker.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// A malformed notice is ignored, not delivered.
	if err := edge.nc.Publish(schemas.SubjectCancel("echo"), []byte("junk")); err != nil {
		t.Fatal(err)
	}
	id := schemas.NewID()
	if err := edge.publishCancel(testCtx(t), schemas.CancelNotice{TaskID: id, Agent: "echo"}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n.TaskID != id || n.Agent != "echo" {
			t.Fatalf("notice = %+v", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no cancel notice")
	}

	stop()
	if err := worker.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := edge.publishCancel(testCtx(t), schemas.CancelNotice{TaskID: schemas.NewID(), Agent: "echo"}); err != nil {
		t.Fatal(err)
	}
	// A flush round trip on both sides: anything the server routed to the
	// worker has arrived by now.
	if err := edge.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := worker.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		t.Fatalf("notice after stop or junk delivered: %+v", n)
	case n := <-other:
		t.Fatalf("notice for echo delivered to other: %+v", n)
	default:
	}
}

// Work publishes carry the CloudEvent id as Nats-Msg-Id and the trace and
// version extensions as headers.
func TestPublishWorkWireFormat(t *testing.T) {
	b := newTestBus(t, Config{Role: "edge", Name: "e1"})
	ctx := testCtx(t)
	item := workItem(newRecord("echo"))
	sub, err := b.nc.SubscribeSync(schemas.SubjectIntake("echo", schemas.CallerKey("", "", ""), item.TaskID))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := b.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := b.queueWork(ctx, item, PublishOptions{ID: "wire-1", Traceparent: "00-aa-bb-01", A2AVersion: "0.3"}); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for h, want := range map[string]string{
		nats.MsgIdHdr:                  "wire-1",
		"ce-id":                        "wire-1",
		"ce-specversion":               "1.0",
		"ce-type":                      schemas.TypeWorkExecute,
		"ce-source":                    "urn:a2abus:edge:e1",
		"ce-subject":                   item.TaskID,
		"ce-datacontenttype":           "application/json",
		"ce-" + schemas.ExtTraceparent: "00-aa-bb-01",
		"ce-" + schemas.ExtA2AVersion:  "0.3",
	} {
		if got := m.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	if m.Header.Get("ce-time") == "" {
		t.Error("no ce-time header")
	}
}
