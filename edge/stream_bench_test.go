package edge_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

const benchEvents = 100

// chunker emits benchEvents artifact chunks and completes.
var chunker = workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	for i := range benchEvents {
		a := schemas.Artifact{ArtifactID: "c", Parts: []schemas.Part{schemas.TextPart("chunk " + strconv.Itoa(i))}}
		if err := out.ArtifactChunk(ctx, a, i > 0, i == benchEvents-1); err != nil {
			return err
		}
	}
	return nil
})

// streamer answers a message holding a size in bytes with an artifact of
// that size, streamed in chunks of 256 bytes, and completes.
var streamer = workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	size, err := strconv.Atoi(req.Message.Text())
	if err != nil {
		return err
	}
	chunk := strings.Repeat("s", 255) + "\n"
	for i := 0; i*len(chunk) < size; i++ {
		a := schemas.Artifact{ArtifactID: "big", Parts: []schemas.Part{schemas.TextPart(chunk)}}
		if err := out.ArtifactChunk(ctx, a, i > 0, false); err != nil {
			return err
		}
	}
	return nil
})

// BenchmarkStreamedArtifact streams one large artifact in 256-byte chunks
// to an SSE client, start to end, at three sizes: the cost per byte stays
// flat as the artifact grows (the chunks are stored in a few writes, not a
// record rewrite each):
//
//	go test -run '^$' -bench StreamedArtifact ./edge/
func BenchmarkStreamedArtifact(b *testing.B) {
	h := newBenchHarness(b)
	for _, size := range []int{100_000, 300_000, 900_000} {
		b.Run(strconv.Itoa(size/1000)+"KB", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s, _ := openStream(b, h.url, "streamer", "SendStreamingMessage", send(userMessage(strconv.Itoa(size)), false), "")
				evs, rs := s.all()
				if n := (size + 255) / 256; len(evs) != n+3 || kind(rs[len(rs)-1]) != "status:TASK_STATE_COMPLETED" {
					b.Fatalf("%d events, last %s; want %d ending COMPLETED", len(evs), kind(rs[len(rs)-1]), n+3)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/B")
		})
	}
}

// BenchmarkStream measures streamed tasks through the bus next to a bare
// net/http SSE handler writing the same number of events:
//
//	go test -run '^$' -bench Stream -benchmem ./edge/
//
// first-event: SendStreamingMessage to echo, time until the first event
// (the worker has taken the task). stream-100: a task streaming 100 artifact
// chunks, start to end; per-event = ns/op / 100.
func BenchmarkStream(b *testing.B) {
	b.Run("bare-sse-100", func(b *testing.B) {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			rc := http.NewResponseController(w)
			for i := range benchEvents + 2 {
				fmt.Fprintf(w, "id: %d\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"result\":{\"artifactUpdate\":{\"taskId\":\"t\",\"contextId\":\"c\",\"artifact\":{\"artifactId\":\"c\",\"parts\":[{\"text\":\"chunk %d\"}]},\"append\":true}}}\n\n", i, i)
				_ = rc.Flush()
			}
		}))
		defer ts.Close()
		b.ReportAllocs()
		for b.Loop() {
			resp, err := http.Post(ts.URL, "application/json", nil)
			if err != nil {
				b.Fatal(err)
			}
			s := &sseStream{t: b, resp: resp, r: newReader(resp)}
			n := 0
			for {
				if _, ok := s.next(); !ok {
					break
				}
				n++
			}
			resp.Body.Close()
			if n != benchEvents+2 {
				b.Fatalf("%d events", n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchEvents), "ns/event")
	})
	h := newBenchHarness(b)
	b.Run("a2abus-first-event", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, r := openStream(b, h.url, "echo", "SendStreamingMessage", send(userMessage("hi"), false), "")
			if r != nil {
				b.Fatal(r.Error)
			}
			if _, ok := s.next(); !ok {
				b.Fatal("no event")
			}
			s.resp.Body.Close()
		}
	})
	b.Run("a2abus-stream-100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, _ := openStream(b, h.url, "chunker", "SendStreamingMessage", send(userMessage("go"), false), "")
			// The events are read as the bare client reads them (not
			// decoded), so both sides of the ratio carry the same client
			// work; the last is decoded to check the stream ended well.
			n, last := 0, sseEvent{}
			for ev, ok := s.next(); ok; ev, ok = s.next() {
				n, last = n+1, ev
			}
			if n != benchEvents+3 || kind(s.result(last)) != "status:TASK_STATE_COMPLETED" { // task, working, 100 chunks, completed
				b.Fatalf("%d events, last %q", n, last.data)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchEvents), "ns/event")
	})
}

// BenchmarkSubscribers holds many SSE subscribers on one task of one edge
// and reports the memory each costs (heap of this process, which also holds
// the in-process NATS server and so the subscriber's consumer):
//
//	go test -run '^$' -bench Subscribers -benchtime 1x ./edge/
func BenchmarkSubscribers(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			h := newBenchHarness(b)
			st := newStepper()
			h.startRunner(h.b, workers.Definition{Name: "steps", Agent: st})
			h.waitAgent(h.url, "steps")
			for b.Loop() {
				task := mustResult[schemas.SendMessageResponse](b, h.call("steps", "SendMessage", send(userMessage("go"), true))).Task
				recv(b, st.start, "start")
				runtime.GC()
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				g0 := runtime.NumGoroutine()
				streams := make([]*sseStream, 0, n)
				for range n {
					s, r := openStream(b, h.url, "steps", "SubscribeToTask", map[string]any{"id": task.ID}, "")
					if r != nil {
						b.Fatal(r.Error)
					}
					s.next()
					streams = append(streams, s)
				}
				runtime.GC()
				runtime.ReadMemStats(&m1)
				b.ReportMetric(float64(m1.HeapInuse-m0.HeapInuse)/float64(n), "heap-bytes/subscriber")
				b.ReportMetric(float64(runtime.NumGoroutine()-g0)/float64(n), "goroutines/subscriber")
				steps := st.ch(task.ID)
				steps <- "one event to everyone"
				close(steps)
				for _, s := range streams {
					s.all()
				}
			}
		})
	}
}

func newBenchHarness(b *testing.B) *harness {
	srv := bustest.NewServer(b, bustest.Options{})
	eb := bustest.Connect(b, srv, bustest.Options{})
	wb := bustest.Connect(b, srv, bustest.Options{})
	h := &harness{t: b, srv: srv, b: eb}
	h.startRunner(wb, workers.EchoDefinition("echo"))
	h.startRunner(wb, workers.Definition{Name: "chunker", Agent: chunker})
	h.startRunner(wb, workers.Definition{Name: "streamer", Agent: streamer})
	h.url = h.startEdge(eb, edge.Config{})
	h.waitAgent(h.url, "echo")
	h.waitAgent(h.url, "chunker")
	h.waitAgent(h.url, "streamer")
	return h
}
