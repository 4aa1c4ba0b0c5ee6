package bus

import (
	"cmp"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// storedGenerations is the generation of every event the task's log
// holds, in the order readers pass them on (cursor order; a repeat of a
// cursor, a publish two writers raced, counted once).
func storedGenerations(t *testing.T, b *Bus, taskID string) []schemas.Generation {
	t.Helper()
	var us []TaskUpdate
	if err := b.storedEvents(testCtx(t), taskID, 0, func(e StoredEvent) bool {
		us = append(us, e.Updates...)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(us, func(a, b TaskUpdate) int { return cmp.Compare(a.Cursor, b.Cursor) })
	us = slices.CompactFunc(us, func(a, b TaskUpdate) bool { return a.Cursor == b.Cursor })
	gens := make([]schemas.Generation, len(us))
	for i, u := range us {
		gens[i] = u.Generation
	}
	return gens
}

// from is first, first+1, …, last.
func from(first, last schemas.Generation) []schemas.Generation {
	var gs []schemas.Generation
	for g := first; g <= last; g++ {
		gs = append(gs, g)
	}
	return gs
}

// Writers racing on one task — single events and writes of several — each
// get their events numbered by the compare-and-swap that stores them: the
// record's generation is one more than its events, and the log holds each
// generation once, in the order readers deliver.
func TestGenerationsAreContiguousUnderConcurrentWriters(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := newRecord("echo")
	createTask(t, b, rec)
	if got, _, _ := b.GetTask(ctx, rec.Task.ID); got.Generation != 1 {
		t.Fatalf("a new task's generation = %d, want 1", got.Generation)
	}
	if _, _, err := b.Apply(ctx, rec.Task.ID, status(schemas.TaskStateWorking, nil)); err != nil {
		t.Fatal(err)
	}
	const writers, writes = 6, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*writes)
	for range writers {
		wg.Go(func() {
			for i := range writes {
				var err error
				if i%2 == 0 {
					_, _, err = b.Apply(ctx, rec.Task.ID, artifact(schemas.NewID(), "x"))
				} else {
					_, _, err = b.applyEvents(ctx, rec.Task.ID, nil, 0, []TaskEvent{artifact(schemas.NewID(), "a"), artifact(schemas.NewID(), "b")})
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	final, _, err := b.Apply(ctx, rec.Task.ID, status(schemas.TaskStateCompleted, nil))
	if err != nil {
		t.Fatal(err)
	}
	events := 1 + writers*(3*1+2*2) + 1 // WORKING, the artifacts, COMPLETED
	if want := schemas.Generation(1 + events); final.Generation != want {
		t.Errorf("final generation = %d, want %d", final.Generation, want)
	}
	if got := storedGenerations(t, b, rec.Task.ID); !slices.Equal(got, from(2, final.Generation)) {
		t.Errorf("the log's generations = %v, want 2…%d once each, in order", got, final.Generation)
	}
}

// A write retried after an unclear outcome (same event ids) is recognised
// as stored and only published again: it counts once, and its events keep
// their generations.
func TestARetriedWriteKeepsItsGenerations(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := newRecord("echo")
	createTask(t, b, rec)
	evs := []TaskEvent{{ID: "w1", Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}}, {ID: "w2", Artifact: &schemas.TaskArtifactUpdateEvent{Artifact: schemas.Artifact{ArtifactID: "a", Parts: []schemas.Part{schemas.TextPart("x")}}}}}
	first, _, err := b.applyEvents(ctx, rec.Task.ID, nil, 0, slices.Clone(evs))
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := b.applyEvents(ctx, rec.Task.ID, nil, 0, slices.Clone(evs))
	if err != nil {
		t.Fatal(err)
	}
	if first.Generation != 3 || again.Generation != 3 {
		t.Errorf("generations after the write and its retry = %d, %d; want 3, 3", first.Generation, again.Generation)
	}
	if got := storedGenerations(t, b, rec.Task.ID); !slices.Equal(got, []schemas.Generation{2, 3}) {
		t.Errorf("the log's generations = %v, want [2 3]", got)
	}
	// A writer's own generation is not what is stored or published.
	forged := &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateCompleted}, Generation: 99}
	done, _, err := b.Apply(ctx, rec.Task.ID, TaskEvent{Status: forged})
	if err != nil || done.Generation != 4 {
		t.Fatalf("completed at generation %d (%v), want 4", done.Generation, err)
	}
	if got := storedGenerations(t, b, rec.Task.ID); !slices.Equal(got, []schemas.Generation{2, 3, 4}) {
		t.Errorf("the log's generations = %v, want [2 3 4]", got)
	}
}

// ifGenerationMatch is decided in the write that stores the answer: of
// two clients that read the same generation exactly one is taken; the
// other, and one that read an older generation, are refused with the
// generation they expected and the one the task has.
func TestContinueIfGenerationMatchTakesExactlyOne(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := newRecord("echo")
	createTask(t, b, rec)
	asked, _, err := b.Apply(ctx, rec.Task.ID, status(schemas.TaskStateInputRequired, agentMsg("which one?")))
	if err != nil {
		t.Fatal(err)
	}
	g := asked.Generation
	answer := func(text string, want schemas.Generation) error {
		msg := &schemas.Message{MessageID: schemas.NewID(), TaskID: rec.Task.ID, Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)}}
		_, _, err := b.Continue(ctx, Owner{Agent: "echo"}, Answer{Message: msg, IfGeneration: &want}, nil)
		return err
	}
	stale := g - 1
	if err := answer("stale", stale); !errors.Is(err, schemas.ErrTaskGenerationMismatch) {
		t.Fatalf("an answer expecting generation %d of a task at %d: %v", stale, g, err)
	} else if e := schemas.AsError(err); e.Metadata["expectedGeneration"] != "1" || e.Metadata["currentGeneration"] != "2" || e.Metadata["taskId"] != rec.Task.ID {
		t.Errorf("mismatch metadata = %v", e.Metadata)
	}
	var wg sync.WaitGroup
	results := make([]error, 2)
	for i := range results {
		wg.Go(func() { results[i] = answer("racer", g) })
	}
	wg.Wait()
	won, lost := 0, 0
	for _, err := range results {
		switch {
		case err == nil:
			won++
		case errors.Is(err, schemas.ErrTaskGenerationMismatch):
			lost++
		default:
			t.Errorf("racer: %v", err)
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("two racers at generation %d: %d taken, %d refused; want 1 and 1", g, won, lost)
	}
	got, _, _ := b.GetTask(ctx, rec.Task.ID)
	if got.Generation != g+1 || got.Task.Status.State != schemas.TaskStateSubmitted || len(got.Task.History) != 3 {
		t.Errorf("after the race: generation %d, %s, %d messages; want %d, SUBMITTED, 3", got.Generation, got.Task.Status.State, len(got.Task.History), g+1)
	}
	// A matching generation on a task that takes no answer is the
	// state's refusal, not a mismatch.
	if err := answer("late", got.Generation); !errors.Is(err, schemas.ErrUnsupportedOperation) {
		t.Errorf("an answer to a SUBMITTED task at its generation: %v", err)
	}
}

// A reader resumed by generation gets exactly the events after it, also
// those of a write it saw part of.
func TestReadEventsAfterGeneration(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	rec := newRecord("echo")
	createTask(t, b, rec)
	if _, _, err := b.applyEvents(ctx, rec.Task.ID, nil, 0, []TaskEvent{status(schemas.TaskStateWorking, nil), artifact("a", "1"), artifact("b", "2")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Apply(ctx, rec.Task.ID, status(schemas.TaskStateCompleted, nil)); err != nil {
		t.Fatal(err)
	}
	for after, want := range map[schemas.Generation][]schemas.Generation{0: {2, 3, 4, 5}, 2: {3, 4, 5}, 3: {4, 5}, 4: {5}} {
		r, err := b.ReadEventsAfterGeneration(ctx, rec.Task.ID, after, 8)
		if err != nil {
			t.Fatal(err)
		}
		var got []schemas.Generation
		for u := range r.Events() {
			got = append(got, u.Generation)
			if u.Status != nil && u.Status.Status.State.Terminal() {
				break
			}
		}
		r.Close()
		if !slices.Equal(got, want) {
			t.Errorf("after generation %d: %v, want %v", after, got, want)
		}
	}
}
