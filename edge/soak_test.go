package edge_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// A soak run: far more tasks pass through than the bounds hold (finished
// tasks capped at 500, events capped per task, the sweep every 200ms), and
// the heap of the process — edge, worker and the in-process NATS server
// together — must stay flat: its size after the second half is compared
// with the size after the first half. Off unless A2ABUS_SOAK=<tasks>:
//
//	A2ABUS_SOAK=20000 go test -run Soak -v ./edge/
func TestSoakMemoryStaysFlat(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("A2ABUS_SOAK"))
	if n == 0 {
		t.Skip("set A2ABUS_SOAK=<tasks> to run")
	}
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{workers.EchoDefinition("echo")},
		// Short retention windows, so a run of seconds shows the steady
		// state a long run reaches (the de-duplication window keeps one id
		// per published message for its length).
		bus:  bustest.Options{Config: bus.Config{EventsMaxAge: 2 * time.Second, Duplicates: time.Second}},
		edge: edge.Config{MaxFinishedTasks: 500, SweepEvery: 200 * time.Millisecond},
	})
	// heap is the settled in-use heap: consumers may still be catching up
	// with the burst just sent (their buffers are lag, not growth), so take
	// the lowest of samples over a few seconds.
	heap := func() uint64 {
		low := ^uint64(0)
		for i := range 40 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			low = min(low, m.HeapInuse)
			if os.Getenv("A2ABUS_SOAK_TRACE") != "" {
				t.Logf("sample %d: %d KiB", i, m.HeapInuse>>10)
			}
			time.Sleep(300 * time.Millisecond) // sampling, not synchronising
		}
		return low
	}
	run := func(count int) {
		var wg sync.WaitGroup
		next := make(chan int)
		for range 8 {
			wg.Go(func() {
				for range next {
					r := h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: ptr(userMessage("soak"))})
					if r.Error != nil {
						t.Errorf("send: %+v", r.Error)
					}
				}
			})
		}
		for i := range count {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	run(n / 2)
	first := heap()
	run(n / 2)
	// Let the sweep catch up with the last tasks before measuring.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	idx := h.b.NewTaskIndex()
	go func() { _ = idx.Run(ctx) }()
	<-idx.Ready()
	deadline := time.Now().Add(30 * time.Second)
	for {
		stored := idx.Len()
		if stored <= 600 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("finished tasks not bounded: %d", stored)
		}
		time.Sleep(100 * time.Millisecond) // waiting for the sweeper
	}
	second := heap()
	t.Logf("%d tasks: heap after first half %d KiB, after second half %d KiB (ratio %.2f)", n, first>>10, second>>10, float64(second)/float64(first))
	if float64(second) > 1.5*float64(first) {
		t.Fatalf("heap grew from %d to %d KiB", first>>10, second>>10)
	}
}
