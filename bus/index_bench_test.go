package bus

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// The cost of listing a page and of a sweep must not grow with the store:
// each is measured with 1k, 10k and 100k stored tasks (a tenth of them the
// lister's, the rest other principals'), one store per size, filled once.
//
//	go test ./bus -run '^$' -bench 'BenchmarkIndex' -benchtime 200x
//
// The goal is that 100k costs at most twice what 1k costs.
func BenchmarkIndex(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		bus := newTestBus(b, Config{TaskMaxBytes: 4 << 30})
		ctx := testCtx(b)
		x := runIndex(b, bus)
		base := time.Now().Add(-time.Hour)
		for i := range n {
			owner := "others"
			if i%10 == 0 {
				owner = "alice"
			}
			state := schemas.TaskStateCompleted
			if i%3 == 0 {
				state = schemas.TaskStateWorking
			}
			rec := newRecord("echo")
			rec.Owner, rec.Tenant = owner, "t1"
			rec.Task.Status = schemas.TaskStatus{State: state, Timestamp: &schemas.Timestamp{Time: base.Add(time.Duration(i) * time.Millisecond)}}
			if _, _, err := bus.createTask(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
		alice := Owner{Agent: "echo", Principal: "alice", Tenant: "t1"}
		if _, err := x.List(ctx, ListQuery{Owner: alice, Limit: 1}); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("list-page50/%d", n), func(b *testing.B) {
			for b.Loop() {
				page, err := x.List(ctx, ListQuery{Owner: alice, Limit: 50})
				if err != nil || len(page.Tasks) != 50 {
					b.Fatalf("%d tasks, %v", len(page.Tasks), err)
				}
			}
		})
		b.Run(fmt.Sprintf("list-state-page50/%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := x.List(ctx, ListQuery{Owner: alice, State: schemas.TaskStateWorking, Limit: 50}); err != nil {
					b.Fatal(err)
				}
			}
		})
		// A sweep with nothing to delete: what every sweep costs.
		b.Run(fmt.Sprintf("sweep-within-bounds/%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := x.Sweep(ctx, SweepOptions{Keep: Retention{MaxCount: 1 << 30}, OrphanAfter: time.Hour}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIndexMemory is what the task index holds per task: n tasks
// applied as the follower hands them on (the index header of each write,
// SUBMITTED then COMPLETED, each in its own context, from a few owners
// and source addresses), then the heap the index keeps, per task.
//
//	go test ./bus -run '^$' -bench IndexMemory -benchtime 1x
func BenchmarkIndexMemory(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := (&Bus{}).NewTaskIndex()
		msgs := make([]followMsg, 0, 2*n)
		base := time.Now().Add(-time.Hour).UnixNano()
		for i := range n {
			id, ctxID := schemas.NewID(), schemas.NewID()
			for w, st := range []schemas.TaskState{schemas.TaskStateSubmitted, schemas.TaskStateCompleted} {
				e := schemas.TaskIndexEntry{State: st, At: base + int64(2*i+w)*int64(time.Millisecond), Agent: "echo",
					Owner: fmt.Sprint("user-", i%50), Tenant: "t1", Context: ctxID, Origin: fmt.Sprint("10.0.0.", i%200)}
				h := nats.Header{}
				h.Set(schemas.HeaderTaskIndex, string(appendIndexEntry(nil, e)))
				msgs = append(msgs, followMsg{Subject: kvPrefix(schemas.BucketTasks) + id, Seq: uint64(2*i + w + 1),
					Op: jetstream.KeyValuePut, Header: h, Size: 1200})
			}
		}
		prefix := kvPrefix(schemas.BucketTasks)
		for i := range msgs {
			m := msgs[i]
			x.apply(context.Background(), strings.TrimPrefix(m.Subject, prefix), m)
		}
		msgs = nil
		runtime.GC()
		runtime.ReadMemStats(&after)
		if len(x.tasks) != n {
			b.Fatalf("%d tasks indexed, want %d", len(x.tasks), n)
		}
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "B/task")
		runtime.KeepAlive(x)
	}
}
