package workers_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// BenchmarkGrowthFanOut is the cost of a fan-out's child as the fan-out
// grows (issue 35, "Cost as work grows"): one op is a task to a fanout
// agent with 10 children and one to a fanout agent with 100, each child
// an echo agent of its own name (the fan-out's children are one per
// agent), each parent submitted as an edge submits it and awaited until
// it settles. perchild100/perchild10 is the median time per child of the
// large fan-out over the small one's, measured interleaved in the same
// run (medians: one op caught by another process's burst, or by a
// stall, moves a mean of a few ops more than the growth; slowest-fan100-ms
// shows such a stall):
//
//	go test -run '^$' -bench GrowthFanOut -benchtime 5x ./workers/
func BenchmarkGrowthFanOut(b *testing.B) {
	const small, large = 10, 100
	srv := bustest.NewServer(b, bustest.Options{})
	front := bustest.Connect(b, srv, bustest.Options{}) // submits and dispatches, as an edge does
	parents := bustest.Connect(b, srv, bustest.Options{})
	children := bustest.Connect(b, srv, bustest.Options{})
	var names []string
	for i := range large {
		names = append(names, fmt.Sprintf("child-%03d", i))
		benchRunner(b, children, workers.EchoDefinition(names[i]))
	}
	benchRunner(b, parents, def("fan-10", workers.FanOut{Agents: names[:small]}))
	benchRunner(b, parents, def("fan-100", workers.FanOut{Agents: names}))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tw := front.NewTaskWatcher()
	go tw.Run(ctx)
	<-tw.Ready()
	run := func(agent string, want int) time.Duration {
		t0 := time.Now()
		msg := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("to every child")}}
		rec, _, err := front.Submit(ctx, bus.Submission{Agent: agent, Message: msg}, nil)
		if err != nil {
			b.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
		defer wcancel()
		rec, err = tw.Wait(wctx, rec.Task.ID, func(r *schemas.TaskRecord) bool { return r.Task.Status.State.Settled() })
		if err != nil {
			b.Fatalf("%s: %v", agent, err)
		}
		d := time.Since(t0)
		if rec.Task.Status.State != schemas.TaskStateCompleted || len(rec.Task.Artifacts) != want {
			b.Fatalf("%s ended %s with %d artifacts, want COMPLETED with %d", agent, rec.Task.Status.State, len(rec.Task.Artifacts), want)
		}
		return d
	}
	run("fan-100", large) // warm up: every child's consumer bound
	run("fan-10", small)
	var tSmall, tLarge []time.Duration
	for b.Loop() {
		tSmall = append(tSmall, run("fan-10", small))
		tLarge = append(tLarge, run("fan-100", large))
	}
	perSmall := float64(median(tSmall).Nanoseconds()) / small
	perLarge := float64(median(tLarge).Nanoseconds()) / large
	b.ReportMetric(float64(slices.Max(tLarge).Microseconds())/1e3, "slowest-fan100-ms")
	b.ReportMetric(perSmall/1e3, "perchild10-µs")
	b.ReportMetric(perLarge/1e3, "perchild100-µs")
	b.ReportMetric(perLarge/perSmall, "perchild100/perchild10")
}

// median is the middle of ds (the mean of the two middle ones for an
// even count); ds is sorted in place.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	n := len(ds)
	return (ds[(n-1)/2] + ds[n/2]) / 2
}

// benchRunner runs def on b until the benchmark ends.
func benchRunner(b *testing.B, bb *bus.Bus, def workers.Definition) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- workers.NewRunner(bb, def, workers.Options{ShutdownGrace: time.Second}).Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
}
