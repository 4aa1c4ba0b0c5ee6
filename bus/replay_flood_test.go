package bus

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// A crowd of resumes far behind one long task (300 writes, ~4.8 MB of
// events): every reader either gets every stored event, in order, or ends
// with an error to retry — none ends cleanly short of the task's events —
// and the crowd holds no more of JetStream's consumers than the process's
// replay places (Config.MaxReplays, 64). (Before the places, each such
// resume replayed through an ordered consumer of its own: 1 500 of them
// hit the server's 1 000-consumer limit and ~400 streams ended empty
// without an error.) CI runs 24 readers; A2ABUS_ATTACK=full runs 1 500.
// A scenario (see scenario): the README's test command leaves it out.
func TestFarBehindResumesAllStreamOrFail(t *testing.T) {
	scenario(t)
	readers, writes := 24, 300
	if os.Getenv("A2ABUS_ATTACK") == "full" {
		readers = 1500
	}
	b := newTestBus(t, Config{NoDispatch: true})
	ctx := testCtx(t)
	rec := &schemas.TaskRecord{Task: schemas.Task{ID: schemas.NewID(), ContextID: "c", Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}, Agent: "a"}
	rev, _, err := b.createTask(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	chunk := strings.Repeat("x", 16<<10)
	for i := range writes {
		// One artifact replaced each time: the record stays small, the
		// events add up.
		if _, rev, err = b.applyFrom(ctx, rec.Task.ID, rec, rev, artifact("a", fmt.Sprintf("%04d", i)+chunk)); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg                    sync.WaitGroup
		mu                    sync.Mutex
		complete, failed, cut int
		most                  int
	)
	for range readers {
		wg.Go(func() {
			r, err := b.ReadEvents(ctx, rec.Task.ID, 0, 16)
			if err != nil {
				t.Logf("open: %v", err)
				mu.Lock()
				failed++
				mu.Unlock()
				return
			}
			defer r.Close()
			got := 0
			for u := range r.Events() {
				if u.Artifact == nil || len(u.Artifact.Artifact.Parts) == 0 || u.Artifact.Artifact.Parts[0].Text == nil ||
					!strings.HasPrefix(*u.Artifact.Artifact.Parts[0].Text, fmt.Sprintf("%04d", got)) {
					t.Errorf("event %d missing or out of order", got)
					return
				}
				if got++; got == writes {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case got == writes:
				complete++
			case r.Err() != nil:
				if failed == 0 {
					t.Logf("first failure after %d events: %v", got, r.Err())
				}
				failed++
			default:
				cut++
			}
			if n, err := b.eventReaders(ctx); err == nil {
				most = max(most, n)
			}
		})
	}
	wg.Wait()
	t.Logf("%d readers: %d got all %d events, %d ended with an error to retry; at most %d consumers of the events stream", readers, complete, writes, failed, most)
	if cut > 0 {
		t.Fatalf("%d of %d readers ended short of the task's events without an error", cut, readers)
	}
	if complete+failed != readers || complete == 0 {
		t.Fatalf("%d complete and %d failed of %d", complete, failed, readers)
	}
	if most > 64+6 {
		t.Fatalf("%d consumers of the events stream while the crowd resumed; want the hub's, the 64 places' and a few being deleted", most)
	}
}
