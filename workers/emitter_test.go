package workers

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
)

// newTestTask stores a SUBMITTED task, with no work queued (the test is
// its agent), and returns its record and revision.
func newTestTask(t *testing.T, b *bus.Bus) (*schemas.TaskRecord, uint64) {
	t.Helper()
	id := schemas.NewID()
	msg := schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, TaskID: id, ContextID: schemas.NewID(), Parts: []schemas.Part{schemas.TextPart("go")}}
	rec := &schemas.TaskRecord{
		Task:      schemas.Task{ID: id, ContextID: msg.ContextID, Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted, Timestamp: schemas.Now()}, History: []schemas.Message{msg}},
		Agent:     "chunks",
		CreatedAt: *schemas.Now(),
	}
	return rec, bustest.CreateTask(t, b, rec)
}

// newTestEmitter is an Emitter of a new SUBMITTED task, as a runner makes
// it for a first delivery.
func newTestEmitter(t *testing.T) (*bus.Bus, *Emitter, *schemas.TaskRecord, context.Context) {
	t.Helper()
	_, b := bustest.New(t, bustest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	rec, rev := newTestTask(t, b)
	return b, &Emitter{w: b, taskID: rec.Task.ID, ctx: ctx, rec: rec, rev: rev}, rec, ctx
}

// holdWriter makes e behave as while a write is in flight, so that what the
// agent emits queues until release, which starts the writer as the end of
// that write would.
func holdWriter(e *Emitter) (release func()) {
	e.mu.Lock()
	e.busy = make(chan struct{})
	e.mu.Unlock()
	return func() { go func() { _ = e.drain(e.ctx, true) }() }
}

// A stream of chunks queued while a write is in flight costs a few writes
// bounded by their size, not one per chunk, and every chunk is still its
// own event, in order, with the artifact stored whole: a large streamed
// artifact costs writes in proportion to its size, each a record rewrite.
func TestEmitterCoalescesQueuedChunks(t *testing.T) {
	b, e, rec, ctx := newTestEmitter(t)
	rev := e.rev

	const chunks = 3000
	release := holdWriter(e)
	var want strings.Builder
	estimated := 0
	for i := range chunks {
		text := "chunk " + strconv.Itoa(i) + strings.Repeat(".", i%50) + "\n"
		want.WriteString(text)
		ev := bus.TaskEvent{Artifact: &schemas.TaskArtifactUpdateEvent{Artifact: schemas.Artifact{ArtifactID: "a", Parts: []schemas.Part{schemas.TextPart(text)}}}}
		estimated += eventSize(ev)
		if err := e.ArtifactChunk(ctx, schemas.Artifact{ArtifactID: "a", Parts: []schemas.Part{schemas.TextPart(text)}}, i > 0, false); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	release()
	if err := e.Complete(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	stored, finalRev, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	writes := int(finalRev - rev)
	if most := estimated/maxWriteBytes + 2; writes > most || writes < 2 {
		t.Fatalf("%d chunks (%d bytes estimated) took %d writes; want at most %d", chunks, estimated, writes, most)
	}
	if got := stored.Task.Status.State; got != schemas.TaskStateCompleted {
		t.Fatalf("state %s", got)
	}
	if len(stored.Task.Artifacts) != 1 || len(stored.Task.Artifacts[0].Parts) != chunks {
		t.Fatalf("stored artifacts %d", len(stored.Task.Artifacts))
	}
	var got strings.Builder
	for _, p := range stored.Task.Artifacts[0].Parts {
		got.WriteString(*p.Text)
	}
	if got.String() != want.String() {
		t.Fatal("the stored artifact is not the chunks in order")
	}

	// Subscribers see WORKING, each chunk as its own event in order, and
	// COMPLETED last, with increasing cursors.
	r, err := b.ReadEvents(ctx, rec.Task.ID, 0, chunks+8)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var seen strings.Builder
	var last uint64
	n := 0
	for u := range r.Events() {
		if u.Cursor <= last && n > 0 {
			t.Fatalf("event %d: cursor %d after %d", n, u.Cursor, last)
		}
		last = u.Cursor
		switch {
		case n == 0:
			if u.Status == nil || u.Status.Status.State != schemas.TaskStateWorking {
				t.Fatalf("first event %+v, want WORKING", u)
			}
		case u.Artifact != nil:
			if u.Artifact.Append != (n > 1) {
				t.Fatalf("chunk %d: append %v", n-1, u.Artifact.Append)
			}
			seen.WriteString(*u.Artifact.Artifact.Parts[0].Text)
		case u.Status != nil && u.Status.Status.State == schemas.TaskStateCompleted:
			if n != chunks+1 {
				t.Fatalf("COMPLETED after %d events, want %d", n, chunks+1)
			}
			if seen.String() != want.String() {
				t.Fatal("the streamed chunks are not the chunks in order")
			}
			return
		default:
			t.Fatalf("event %d: %+v", n, u)
		}
		n++
	}
	t.Fatalf("the events ended after %d: %v", n, r.Err())
}

// A queued write that fails ends the queue: the agent's next call says so,
// and nothing queued after it is stored.
func TestEmitterQueuedFailureEndsTheQueue(t *testing.T) {
	b, e, rec, ctx := newTestEmitter(t)

	// The task is canceled while the agent's chunks wait for the writer.
	release := holdWriter(e)
	for i := range 3 {
		if err := e.ArtifactChunk(ctx, schemas.Artifact{ArtifactID: "a", Parts: []schemas.Part{schemas.TextPart("x")}}, i > 0, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Cancel(ctx, bus.Owner{Agent: "chunks"}, rec.Task.ID, nil); err != nil {
		t.Fatal(err)
	}
	release()
	if err := e.Flush(ctx); !errors.Is(err, ErrTaskEnded) {
		t.Fatalf("flush after the task was canceled: %v, want ErrTaskEnded", err)
	}
	if err := e.ArtifactChunk(ctx, schemas.Artifact{ArtifactID: "a", Parts: []schemas.Part{schemas.TextPart("y")}}, true, false); !errors.Is(err, ErrTaskEnded) {
		t.Fatalf("a chunk after the queue ended: %v, want ErrTaskEnded", err)
	}
	stored, _, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Task.Status.State != schemas.TaskStateCanceled || len(stored.Task.Artifacts) != 0 {
		t.Fatalf("stored %s with %d artifacts", stored.Task.Status.State, len(stored.Task.Artifacts))
	}
}

// A queued chunk is written after the call returns: what the agent does
// with its buffers by then does not change what is stored.
func TestEmitterQueuedChunkOwnsItsBytes(t *testing.T) {
	b, e, rec, ctx := newTestEmitter(t)

	release := holdWriter(e)
	buf := []byte("first")
	data := []byte(`{"n":1}`)
	parts := []schemas.Part{{Raw: buf, MediaType: "text/plain"}, {Data: data}}
	if err := e.ArtifactChunk(ctx, schemas.Artifact{ArtifactID: "a", Parts: parts}, false, false); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXX")
	copy(data, `{"n":2}`)
	parts[0] = schemas.TextPart("replaced")
	release()
	if err := e.Complete(ctx, ""); err != nil {
		t.Fatal(err)
	}
	stored, _, err := b.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := stored.Task.Artifacts[0].Parts
	if len(got) != 2 || string(got[0].Raw) != "first" || string(got[1].Data) != `{"n":1}` {
		t.Fatalf("stored parts %+v", got)
	}
}
