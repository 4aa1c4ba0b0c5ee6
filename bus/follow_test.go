package bus

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// runFollower runs f until the test ends (or the returned stop is called),
// handing its messages to got; it returns once f has caught up.
func runFollower(t *testing.T, f *follower, got chan<- followMsg) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- f.run(ctx, func(m followMsg) { got <- m }, func() { close(ready) }) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("follower run: %v", err)
		}
	})
	t.Cleanup(stop)
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower never caught up")
	}
	return stop
}

// A consumer deleted out from under the follower is replaced, and the
// replacement starts right after the last message handed on: messages
// written while no consumer existed are handed on, none is skipped and
// none repeated.
func TestFollowerReplacesADeletedConsumer(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	const stream = "FOLLOW_TEST"
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"follow.>"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	var last uint64 // stream sequence of the last message published
	publish := func(n int) {
		t.Helper()
		for range n {
			ack, err := b.js.Publish(ctx, fmt.Sprintf("follow.%d", last%3), fmt.Appendf(nil, "m%d", last+1))
			if err != nil {
				t.Fatal(err)
			}
			last = ack.Sequence
		}
	}
	publish(3) // before the follower: not handed on (it starts with new messages)

	f := b.newFollower("test", stream, jetstream.DeliverNewPolicy, "follow.>")
	got := make(chan followMsg, 1000)
	stop := runFollower(t, f, got)
	next := last + 1 // the next sequence the follower must hand on
	expect := func() {
		t.Helper()
		for next <= last {
			select {
			case m := <-got:
				if m.Seq != next || string(m.Value) != fmt.Sprintf("m%d", next) || m.Op != jetstream.KeyValuePut {
					t.Fatalf("handed on seq %d (%q, op %v), want seq %d", m.Seq, m.Value, m.Op, next)
				}
				next++
			case <-ctx.Done():
				t.Fatalf("waiting for seq %d: %v", next, ctx.Err())
			}
		}
	}
	publish(5)
	expect()

	const rounds = 3
	for range rounds {
		old := f.consumerName()
		deleted := time.Now()
		if err := b.js.DeleteConsumer(ctx, stream, old); err != nil {
			t.Fatal(err)
		}
		// Written while the consumer is gone or being replaced: the
		// replacement must start with them.
		publish(4)
		expect()
		if name := f.consumerName(); name == old || !f.Following() {
			t.Fatalf("after the delete: consumer %q (was %q), following %v", name, old, f.Following())
		}
		t.Logf("deleted consumer replaced; messages written meanwhile handed on %v after the delete", time.Since(deleted).Round(time.Millisecond))
		publish(2)
		expect()
	}

	stop()
	select {
	case m := <-got:
		t.Fatalf("seq %d handed on again", m.Seq)
	default:
	}
	if f.Following() {
		t.Fatal("following after run returned")
	}
	var text strings.Builder
	if err := b.Metrics().WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`a2a_bus_watch_consumers_replaced_total{watch="test"} %d`, rounds); !strings.Contains(text.String(), want) {
		t.Fatalf("metrics lack %q:\n%s", want, text.String())
	}
}

// The follower hands on what a KV message means, as the KV watcher did: a
// value, a client's delete or purge, and the marker the server writes when
// a value with a TTL ages out.
func TestFollowerHandsOnKVOperations(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	prefix := kvPrefix(schemas.BucketTasks)
	f := b.newFollower("test", kvStream(schemas.BucketTasks), jetstream.DeliverNewPolicy, prefix+">")
	got := make(chan followMsg, 100)
	runFollower(t, f, got)

	// Each step is awaited before the next: the bucket keeps one revision
	// per key, so a value overwritten before it was read is gone from the
	// stream (the follower then hands on the newer one only, as a KV
	// watcher would).
	kv := b.tasks
	steps := []struct {
		do       func() error
		key, val string
		op       jetstream.KeyValueOp
	}{
		{func() error { _, err := kv.Put(ctx, "a", []byte("1")); return err }, "a", "1", jetstream.KeyValuePut},
		{func() error { return kv.Delete(ctx, "a") }, "a", "", jetstream.KeyValueDelete},
		{func() error { _, err := kv.Put(ctx, "b", []byte("2")); return err }, "b", "2", jetstream.KeyValuePut},
		{func() error { return kv.Purge(ctx, "b") }, "b", "", jetstream.KeyValuePurge},
		{func() error { _, err := kv.Create(ctx, "c", []byte("3"), jetstream.KeyTTL(time.Second)); return err }, "c", "3", jetstream.KeyValuePut},
		{func() error { return nil }, "c", "", jetstream.KeyValuePurge}, // the server's marker once c aged out
	}
	for i, w := range steps {
		if err := w.do(); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-got:
			if key := strings.TrimPrefix(m.Subject, prefix); key != w.key || m.Op != w.op || (w.op == jetstream.KeyValuePut && string(m.Value) != w.val) {
				t.Fatalf("message %d: key %q op %v value %q; want key %q op %v value %q", i, key, m.Op, m.Value, w.key, w.op, w.val)
			}
			if m.Initial {
				t.Fatalf("message %d marked initial", i)
			}
		case <-ctx.Done():
			t.Fatalf("waiting for message %d (%s %v): %v", i, w.key, w.op, ctx.Err())
		}
	}
}

// The agent directory survives losing its consumer: an agent registered
// after the consumer was deleted shows up, and the agents it knew stay.
func TestAgentDirectoryReplacesItsConsumer(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	if err := b.RegisterAgent(ctx, schemas.AgentRegistration{Agent: "before"}); err != nil {
		t.Fatal(err)
	}
	d := b.NewAgentDirectory()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("directory Run: %v", err)
		}
	})
	select {
	case <-d.Ready():
	case <-ctx.Done():
		t.Fatal("directory never became ready")
	}
	if _, ok := d.Get("before"); !ok || !d.Following() {
		t.Fatalf("before the delete: agent listed %v, following %v", ok, d.Following())
	}
	old := d.f.consumerName()
	if err := b.js.DeleteConsumer(ctx, kvStream(schemas.BucketAgents), old); err != nil {
		t.Fatal(err)
	}
	if err := b.RegisterAgent(ctx, schemas.AgentRegistration{Agent: "after"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agent registered after the delete", func() bool { _, ok := d.Get("after"); return ok })
	if _, ok := d.Get("before"); !ok || !d.Following() || d.f.consumerName() == old {
		t.Fatalf("after the delete: earlier agent listed %v, following %v, consumer %q (was %q)", ok, d.Following(), d.f.consumerName(), old)
	}
}
