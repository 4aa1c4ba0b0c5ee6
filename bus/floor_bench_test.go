package bus

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// BenchmarkJetStreamFloor is what the bus alone costs a blocking task,
// with none of a2abus's code on the way: the JetStream operations a task
// needs, on the provisioned streams (file storage), with payloads of the
// sizes an echo task stores: the edge creates the record and queues the
// work; a worker fetches it, swaps the record, publishes the events and
// acknowledges; the edge learns of the settled record from its follower of
// the bucket, and a second, headers-only follower keeps the task index.
// Its rate is the ceiling of a2abus's blocking sends on the same cores
// before HTTP, JSON and the agent, and with one sender its time per task
// the floor of a blocking send's latency; a2abus's own figures are read
// against them (see ARCHITECTURE.md, "Where the time goes"):
//
//	go test ./bus -run '^$' -bench JetStreamFloor -benchtime 20000x
func BenchmarkJetStreamFloor(b *testing.B) {
	dir := b.TempDir()
	srv, err := StartServer(ServerConfig{DataDir: dir, Anonymous: true})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connect := func(role string) *Bus {
		bb, err := Connect(ctx, Config{Server: srv, Role: role})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = bb.Close() })
		return bb
	}
	edge, worker := connect("edge"), connect("worker")
	if err := worker.ensureAgent(ctx, "echo"); err != nil {
		b.Fatal(err)
	}
	record := bytes.Repeat([]byte("r"), 700)
	settled := bytes.Repeat([]byte("s"), 1100)
	work := bytes.Repeat([]byte("w"), 1500)
	events := bytes.Repeat([]byte("e"), 1800)
	index := strconv.Quote(string(bytes.Repeat([]byte("i"), 140)))
	prefix := kvPrefix(schemas.BucketTasks)

	// The edge's follower of the bucket wakes the sender of a task once
	// its record is written a second time.
	var mu sync.Mutex
	waiting := map[string]chan struct{}{}
	follow := func(headersOnly bool, fn func(jetstream.Msg)) {
		c, err := edge.js.OrderedConsumer(ctx, kvStream(schemas.BucketTasks), jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverNewPolicy, HeadersOnly: headersOnly})
		if err != nil {
			b.Fatal(err)
		}
		cc, err := c.Consume(fn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cc.Stop)
	}
	follow(false, func(m jetstream.Msg) {
		if m.Headers().Get(jetstream.ExpectedLastSubjSeqHeader) == "0" {
			return
		}
		id := m.Subject()[len(prefix):]
		mu.Lock()
		ch := waiting[id]
		delete(waiting, id)
		mu.Unlock()
		if ch != nil {
			close(ch)
		}
	})
	follow(true, func(m jetstream.Msg) { _ = m.Headers().Get(schemas.HeaderTaskIndex) })

	// Workers: one fetch loop, a goroutine per item, as the runner does.
	wc, err := worker.js.Consumer(ctx, schemas.StreamWork, schemas.ConsumerWork("echo"))
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			batch, err := wc.Fetch(64, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				continue
			}
			for m := range batch.Messages() {
				wg.Go(func() {
					id := m.Headers().Get("Task")
					rev, _ := strconv.ParseUint(m.Headers().Get("Rev"), 10, 64)
					kv := nats.NewMsg(prefix + id)
					kv.Data = settled
					kv.Header.Set(schemas.HeaderTaskIndex, index)
					if _, err := worker.js.PublishMsg(context.Background(), kv, jetstream.WithExpectLastSequencePerSubject(rev)); err != nil {
						b.Error(err)
					}
					ev := nats.NewMsg(schemas.SubjectEvents(id))
					ev.Data = events
					ev.Header.Set(nats.MsgIdHdr, id+"-e")
					if _, err := worker.js.PublishMsg(context.Background(), ev); err != nil {
						b.Error(err)
					}
					_ = m.Ack()
				})
			}
		}
	})

	send := func() {
		id := schemas.NewID()
		done := make(chan struct{})
		mu.Lock()
		waiting[id] = done
		mu.Unlock()
		kv := nats.NewMsg(prefix + id)
		kv.Data = record
		kv.Header.Set(schemas.HeaderTaskIndex, index)
		pa, err := edge.js.PublishMsg(ctx, kv, jetstream.WithExpectLastSequencePerSubject(0))
		if err != nil {
			b.Fatal(err)
		}
		w := nats.NewMsg(schemas.SubjectWorkTask("echo", id))
		w.Data = work
		w.Header.Set(nats.MsgIdHdr, id+"-w")
		w.Header.Set("Task", id)
		w.Header.Set("Rev", strconv.FormatUint(pa.Sequence, 10))
		if _, err := edge.js.PublishMsg(ctx, w); err != nil {
			b.Fatal(err)
		}
		<-done
	}
	// 64 senders on 2 cores, as compare.sh's c=64: the rate's ceiling.
	b.Run("senders=64", func(b *testing.B) {
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				send()
			}
		})
	})
	// One sender, as compare.sh's c=1: ns/op is the bus's share of a
	// blocking send's latency, the floor of a2abus's c=1 p50.
	b.Run("senders=1", func(b *testing.B) {
		for b.Loop() {
			send()
		}
	})
	cancel()
	wg.Wait()
}
