package workers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// BenchmarkPushSender: notifications one sender delivers a second to a
// fast local receiver (a bare 204 handler), from tasks whose events are
// stored with their wake-ups pending, perTask events each. Signing is
// left out (its cost is BenchmarkNotificationSign's in edge/auth).
//
//	go test ./workers -run '^$' -bench PushSender -benchtime 4000x
func BenchmarkPushSender(b *testing.B) {
	for _, perTask := range []int{1, 8} {
		b.Run(fmt.Sprintf("events=%d", perTask), func(b *testing.B) {
			_, bb := bustest.New(b, bustest.Options{})
			var got atomic.Int64
			done := make(chan struct{})
			want := int64(b.N)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusNoContent)
				if got.Add(1) == want {
					close(done)
				}
			}))
			defer srv.Close()
			ctx := context.Background()
			owner := bus.Owner{Agent: "bench", Principal: "p"}
			for made := 0; made < b.N; {
				id := schemas.NewID()
				rec := &schemas.TaskRecord{Task: schemas.Task{ID: id, ContextID: schemas.NewID(), Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted, Timestamp: schemas.Now()}},
					Agent: "bench", Owner: "p", CreatedAt: *schemas.Now()}
				bustest.CreateTask(b, bb, rec) // no work: no agent runs it, its events are applied below
				if _, err := bb.CreatePushConfig(ctx, owner, schemas.TaskPushNotificationConfig{TaskID: id, URL: srv.URL}, "1.0"); err != nil {
					b.Fatal(err)
				}
				n := min(perTask, b.N-made)
				for i := range n {
					a := schemas.Artifact{ArtifactID: "a", Parts: []schemas.Part{schemas.TextPart(fmt.Sprintf("chunk %d", i))}}
					if _, _, err := bb.Apply(ctx, id, bus.TaskEvent{Artifact: &schemas.TaskArtifactUpdateEvent{Artifact: a, Append: i > 0}}); err != nil {
						b.Fatal(err)
					}
				}
				made += n
			}
			s, err := workers.NewPushSender(bb, workers.PushOptions{Client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}})
			if err != nil {
				b.Fatal(err)
			}
			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			b.ResetTimer()
			start := time.Now()
			go func() { _ = s.Run(rctx) }()
			select {
			case <-done:
			case <-time.After(5 * time.Minute):
				b.Fatalf("delivered %d of %d", got.Load(), want)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "notifications/s")
		})
	}
}
