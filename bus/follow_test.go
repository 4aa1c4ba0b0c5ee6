package bus

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
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
	startRun(t, ctx, "directory", d.Run, d.Ready())
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

// testLogWriter passes log lines to t.Log until off is set (before the
// test ends: t.Log after it would panic).
type testLogWriter struct {
	t   *testing.T
	off atomic.Bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	if !w.off.Load() {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// The user's report: an edge connected to a node of a 3-node cluster (R3
// buckets) whose death takes the edge's task watch consumer with it. Here
// the node lost is the one the edge is connected to, hosts the watch's
// consumer and leads the task bucket's stream (the worst case: the edge
// reconnects elsewhere at once, but its consumer is gone and the stream
// needs a new leader). A change made after the loss must reach a waiter
// once a new leader exists, and no change made before or after is lost.
// The node is shut down (it hands its leaderships over first), or killed
// with SIGKILL as a child process (it hands nothing over; the others elect
// new leaders after their election timeout), and killed once more with the
// edge connected elsewhere, where only missed heartbeats tell. It logs how
// long the watch took to resume; it asserts no time.
func TestTaskWatcherResumesWhenItsNodeDies(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster")
	}
	t.Run("shutdown", func(t *testing.T) { watcherLosesItsNode(t, false, true) })
	t.Run("sigkill", func(t *testing.T) { watcherLosesItsNode(t, true, true) })
	// The edge stays connected: only the missed heartbeats tell the watch
	// its consumer is gone.
	t.Run("sigkill-consumer-host-only", func(t *testing.T) { watcherLosesItsNode(t, true, false) })
}

// watcherLosesItsNode runs the scenario above; kill: the node is killed
// rather than shut down; edgeOnVictim: the edge is connected to it.
func watcherLosesItsNode(t *testing.T, kill, edgeOnVictim bool) {
	const victim = 0
	edgeNode := victim
	if !edgeOnVictim {
		edgeNode = 1
	}
	proc := -1
	if kill {
		proc = victim
	}
	c := startCluster(t, proc)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	stream := kvStream(schemas.BucketTasks)

	// The writer is connected to the other members; it only needs the
	// stream.
	writer, err := Connect(ctx, Config{URL: strings.Join(c.urls[1:], ","), Replicas: 3, Name: "writer", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = writer.Close() })
	// Move the task stream's leadership to the victim.
	streamLeader := func() string {
		st, err := writer.js.Stream(ctx, stream)
		if err != nil {
			return ""
		}
		info, err := st.Info(ctx)
		if err != nil || info.Cluster == nil {
			return ""
		}
		return info.Cluster.Leader
	}
	for deadline := time.Now().Add(30 * time.Second); streamLeader() != c.names[victim]; {
		if time.Now().After(deadline) {
			t.Fatalf("the task stream's leadership never moved to %s", c.names[victim])
		}
		req := fmt.Sprintf(`{"placement":{"preferred":%q}}`, c.names[victim])
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		_, _ = writer.nc.RequestWithContext(rctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, []byte(req))
		rcancel()
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
	}

	// The edge is given one member's URL only; it learns the others from
	// the cluster, as a client behind one address does.
	logs := &testLogWriter{t: t}
	edge, err := Connect(ctx, Config{URL: c.urls[edgeNode], Replicas: 3, Role: "edge", Name: "edge", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = edge.Close() })
	t.Cleanup(func() { logs.off.Store(true) })
	if got := edge.nc.ConnectedServerName(); got != c.names[edgeNode] {
		t.Fatalf("edge connected to %s, want %s", got, c.names[edgeNode])
	}

	tw := edge.NewTaskWatcher()
	tw.RecheckEvery = time.Hour // only notifications count here
	type tapped struct {
		m  followMsg
		at time.Time
	}
	var tapMu sync.Mutex
	var taps []tapped
	tw.tap = func(m followMsg) {
		tapMu.Lock()
		taps = append(taps, tapped{m, time.Now()})
		tapMu.Unlock()
	}
	d := edge.NewAgentDirectory()
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{tw.Run, d.Run} {
		wg.Go(func() {
			if err := run(runCtx); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	for _, ready := range []<-chan struct{}{tw.Ready(), d.Ready()} {
		select {
		case <-ready:
		case <-ctx.Done():
			t.Fatal("the edge's watches never became ready")
		}
	}

	// An R1 consumer is placed on a random member: replace the watch's
	// consumer until it is on the victim.
	host := func(name string) string {
		cons, err := writer.js.Consumer(ctx, stream, name)
		if err != nil || cons.CachedInfo().Cluster == nil {
			return ""
		}
		return cons.CachedInfo().Cluster.Leader
	}
	for i := 0; ; i++ {
		name := tw.f.consumerName()
		if name != "" && host(name) == c.names[victim] {
			break
		}
		if i == 50 {
			t.Fatalf("the watch's consumer never landed on %s", c.names[victim])
		}
		if name != "" {
			_ = writer.js.DeleteConsumer(ctx, stream, name)
		}
		eventually(t, "a replacement consumer", func() bool { n := tw.f.consumerName(); return n != "" && n != name })
	}

	// Tasks whose change is seen before the kill, made just before it, and
	// made after it; each is watched from its stored record, so only a
	// notification can end its wait.
	working := func(s schemas.TaskState) bool { return s == schemas.TaskStateWorking }
	type waited struct {
		id  string
		at  time.Time
		err error
	}
	results := make(chan waited, 12)
	groups := map[string][]string{}
	for _, g := range []string{"before", "around", "after"} {
		for range 4 {
			rec := newRecord("echo")
			if _, _, err := writer.createTask(ctx, rec); err != nil {
				t.Fatal(err)
			}
			w := tw.Watch(rec.Task.ID, rec)
			wg.Go(func() {
				defer w.Close()
				wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
				defer cancel()
				_, err := w.UntilState(wctx, working)
				results <- waited{rec.Task.ID, time.Now(), err}
			})
			groups[g] = append(groups[g], rec.Task.ID)
		}
	}
	for _, id := range groups["before"] {
		if _, _, err := writer.Apply(ctx, id, status(schemas.TaskStateWorking, nil)); err != nil {
			t.Fatal(err)
		}
	}
	for range groups["before"] {
		if r := <-results; r.err != nil {
			t.Fatalf("before the kill, task %s: %v", r.id, r.err)
		}
	}
	for _, id := range groups["around"] {
		if _, _, err := writer.Apply(ctx, id, status(schemas.TaskStateWorking, nil)); err != nil {
			t.Fatal(err)
		}
	}

	oldTasks, oldAgents := tw.f.consumerName(), d.f.consumerName()
	metaLeader := true // unless a member that stays says it leads
	for _, s := range c.servers[1:] {
		if s != nil && s.s.JetStreamIsLeader() {
			metaLeader = false
		}
	}
	killed := time.Now()
	c.stop(victim)
	shutdown := time.Since(killed)

	// How long until each watch has a live consumer again.
	// (A watch whose consumer was elsewhere and whose connection stayed
	// is not affected: it reports "unaffected".)
	resumed := func(f *follower, old string) func() string {
		var at atomic.Int64
		wg.Go(func() {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				if n := f.consumerName(); n != "" && n != old {
					at.Store(int64(time.Since(killed)))
					return
				}
				select {
				case <-runCtx.Done():
					return
				case <-tick.C:
				}
			}
		})
		return func() string {
			if d := time.Duration(at.Load()); d > 0 {
				return d.Round(time.Millisecond).String()
			}
			return "unaffected"
		}
	}
	taskResume, agentResume := resumed(tw.f, oldTasks), resumed(d.f, oldAgents)

	// The changes after the kill, each retried until a leader takes it.
	applied := make(chan time.Duration, len(groups["after"]))
	for _, id := range groups["after"] {
		wg.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, _, err := writer.Apply(actx, id, status(schemas.TaskStateWorking, nil))
				cancel()
				if err == nil {
					applied <- time.Since(killed)
					return
				}
				select {
				case <-ctx.Done():
					applied <- -1
					return
				case <-tick.C:
				}
			}
		})
	}
	var lastNotified time.Duration
	for range len(groups["around"]) + len(groups["after"]) {
		r := <-results
		if r.err != nil {
			t.Fatalf("task %s: the change never reached its waiter: %v", r.id, r.err)
		}
		lastNotified = max(lastNotified, r.at.Sub(killed))
	}
	var lastApplied time.Duration
	for range groups["after"] {
		lastApplied = max(lastApplied, <-applied)
	}

	// Nothing lost, nothing repeated or out of order: the follower handed
	// on strictly increasing stream sequences, among them the current
	// revision of every task.
	eventually(t, "the current revision of every task handed on", func() bool {
		tapMu.Lock()
		seen := map[uint64]string{}
		for _, tp := range taps {
			seen[tp.m.Seq] = tp.m.Subject
		}
		tapMu.Unlock()
		for _, ids := range groups {
			for _, id := range ids {
				_, rev, err := writer.GetTask(ctx, id)
				if err != nil || seen[rev] != kvPrefix(schemas.BucketTasks)+id {
					return false
				}
			}
		}
		return true
	})
	tapMu.Lock()
	var storedAfter, handedAfter time.Duration = -1, -1
	afterIDs := map[string]bool{}
	for _, id := range groups["after"] {
		afterIDs[kvPrefix(schemas.BucketTasks)+id] = true
	}
	for i, tp := range taps {
		if i > 0 && tp.m.Seq <= taps[i-1].m.Seq {
			t.Errorf("seq %d handed on after seq %d", tp.m.Seq, taps[i-1].m.Seq)
		}
		if afterIDs[tp.m.Subject] && tp.m.Stored.After(killed) && storedAfter < 0 {
			storedAfter, handedAfter = tp.m.Stored.Sub(killed), tp.at.Sub(killed)
		}
	}
	tapMu.Unlock()
	how := "shut down"
	if kill {
		how = "killed (SIGKILL)"
	}
	t.Logf("%s %s (the edge's server, the watch consumer's host, the task stream's leader; meta leader: %v) in %v",
		how, c.names[victim], metaLeader, shutdown.Round(time.Millisecond))
	t.Logf("after the loss: task watch consuming again at %v, agent directory at %v; first change after the loss stored at %v, handed on at %v; all changes written by %v, all at their waiters by %v; edge on %s, now on %s",
		taskResume(), agentResume(), storedAfter.Round(time.Millisecond), handedAfter.Round(time.Millisecond),
		lastApplied.Round(time.Millisecond), lastNotified.Round(time.Millisecond), c.names[edgeNode], edge.nc.ConnectedServerName())
}

// How long a follower has been without a consumer counts from the loss,
// not from whoever asks first, and is 0 again once it follows.
func TestFollowerNotFollowingFor(t *testing.T) {
	b := newTestBus(t, Config{})
	f := b.newFollower("test", kvStream(schemas.BucketTasks), jetstream.DeliverNewPolicy, kvPrefix(schemas.BucketTasks)+">")
	if d := f.NotFollowingFor(); d != 0 {
		t.Fatalf("before any consumer: %v", d)
	}
	f.setFollowing("c1")
	if d := f.NotFollowingFor(); d != 0 {
		t.Fatalf("following: %v", d)
	}
	f.setFollowing("")
	lost := time.Now()
	f.lostAt.Store(lost.Add(-3 * time.Second).UnixNano()) // as if lost 3s ago
	if d := f.NotFollowingFor(); d < 3*time.Second {
		t.Fatalf("lost 3s ago: %v", d)
	}
	f.setFollowing("c2")
	if d := f.NotFollowingFor(); d != 0 {
		t.Fatalf("following again: %v", d)
	}
}
