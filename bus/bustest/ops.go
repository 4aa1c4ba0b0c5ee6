package bustest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/internal/testhooks"
	"github.com/a2abus/a2abus/schemas"
)

// What a test may do to a bus that no product code may: store a task
// without its work, queue work no submission would, change a record behind
// its writers, drop a connection, and look at what the bus keeps to
// itself. *bus.Bus does not export these; package bus hands them here
// through bus/internal/testhooks (bus/testhooks.go).

// ops are package bus's test operations, as the helpers below call them.
type ops interface {
	CreateTask(b *bus.Bus, ctx context.Context, rec *schemas.TaskRecord) (uint64, error)
	UpdateTask(b *bus.Bus, ctx context.Context, id string, change func(*schemas.TaskRecord) error) (*schemas.TaskRecord, uint64, error)
	QueueWork(b *bus.Bus, ctx context.Context, item *schemas.WorkItem, o bus.PublishOptions) error
	Abort(b *bus.Bus)
	DeadLetters(b *bus.Bus, ctx context.Context, agent string) ([]bus.DeadLetter, error)
	PushDeadLetters(b *bus.Bus, ctx context.Context, taskID string) ([]bus.PushDeadLetter, error)
	StoredEvents(b *bus.Bus, ctx context.Context, taskID string, from uint64, fn func(bus.StoredEvent) bool) error
	EventReaders(b *bus.Bus, ctx context.Context) (int, error)
	EventSubscribers(b *bus.Bus) int
	Stats(b *bus.Bus) bus.Stats
	CheckWritable(b *bus.Bus, ctx context.Context) error
	Provision(b *bus.Bus, ctx context.Context) error
	StoredMessages(b *bus.Bus, ctx context.Context, stream string) ([][]byte, error)
}

// busOps is package bus's value of ops. Should the two drift apart, every
// test that imports bustest fails at once, here.
var busOps = func() ops {
	o, ok := testhooks.Ops.(ops)
	if !ok {
		panic(fmt.Sprintf("bustest: package bus's test operations (%T) are not bustest's ops: change bus/testhooks.go and bus/bustest/ops.go together", testhooks.Ops))
	}
	return o
}()

// opTimeout bounds each operation of a helper that takes no context.
const opTimeout = 30 * time.Second

// must runs op within opTimeout and fails the test, saying what failed,
// if op does.
func must[T any](t testing.TB, what string, op func(context.Context) (T, error)) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	v, err := op(ctx)
	if err != nil {
		t.Fatalf("bustest: %s: %v", what, err)
	}
	return v
}

// CreateTask stores rec as a new task and returns its revision, queueing
// no work for it: what an edge killed between the two steps of a
// submission leaves behind (bus.Submit takes both), or a task for a test
// that runs no agent.
func CreateTask(t testing.TB, b *bus.Bus, rec *schemas.TaskRecord) uint64 {
	t.Helper()
	return must(t, "create task "+rec.Task.ID, func(ctx context.Context) (uint64, error) {
		return busOps.CreateTask(b, ctx, rec)
	})
}

// UpdateTask changes a task's record by compare-and-swap and publishes no
// event: what a writer that died between storing and publishing leaves
// behind. It returns the record as stored and its revision.
func UpdateTask(t testing.TB, b *bus.Bus, id string, change func(*schemas.TaskRecord) error) (*schemas.TaskRecord, uint64) {
	t.Helper()
	var rev uint64
	rec := must(t, "update task "+id, func(ctx context.Context) (rec *schemas.TaskRecord, err error) {
		rec, rev, err = busOps.UpdateTask(b, ctx, id, change)
		return rec, err
	})
	return rec, rev
}

// QueueWork queues item for its agent as no submission does by itself: a
// second copy of a submission's work (o.ID another event id), work for a
// task the store does not have, work for a task that finished. Without
// o.ID the event id is the submission's (schemas.WorkEventID), which
// JetStream de-duplicates.
func QueueWork(t testing.TB, b *bus.Bus, item *schemas.WorkItem, o bus.PublishOptions) {
	t.Helper()
	must(t, "queue work of task "+item.TaskID, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, busOps.QueueWork(b, ctx, item, o)
	})
}

// Abort closes b's connection at once, without draining: work in flight
// stays unacknowledged and goes to another worker after AckWait, as when
// the process crashed.
func Abort(b *bus.Bus) { busOps.Abort(b) }

// DeadLetters lists the work items of agent kept in the dead-letter
// stream, oldest first.
func DeadLetters(t testing.TB, b *bus.Bus, agent string) []bus.DeadLetter {
	t.Helper()
	return must(t, "dead letters of "+agent, func(ctx context.Context) ([]bus.DeadLetter, error) {
		return busOps.DeadLetters(b, ctx, agent)
	})
}

// PushDeadLetters lists the push notifications of a task given up on,
// oldest first.
func PushDeadLetters(t testing.TB, b *bus.Bus, taskID string) []bus.PushDeadLetter {
	t.Helper()
	return must(t, "push dead letters of task "+taskID, func(ctx context.Context) ([]bus.PushDeadLetter, error) {
		return busOps.PushDeadLetters(b, ctx, taskID)
	})
}

// StoredEvents reads every event of a task stored in the events stream,
// in order, with a consumer of its own: not the way a push sender reads
// them (bus.Bus.EventsAfter), so a test can hold the sender to it.
func StoredEvents(t testing.TB, b *bus.Bus, taskID string) []bus.StoredEvent {
	t.Helper()
	return must(t, "stored events of task "+taskID, func(ctx context.Context) (out []bus.StoredEvent, err error) {
		err = busOps.StoredEvents(b, ctx, taskID, 0, func(e bus.StoredEvent) bool {
			out = append(out, e)
			return true
		})
		return out, err
	})
}

// Generations is the generation of every event the task's log holds, in
// the order readers pass them on (cursor order, a cursor published twice
// counted once): for a task whose writers all published what they stored,
// 2, 3, … up to the record's generation.
func Generations(t testing.TB, b *bus.Bus, taskID string) []schemas.Generation {
	t.Helper()
	var us []bus.TaskUpdate
	for _, e := range StoredEvents(t, b, taskID) {
		us = append(us, e.Updates...)
	}
	slices.SortStableFunc(us, func(x, y bus.TaskUpdate) int { return cmp.Compare(x.Cursor, y.Cursor) })
	us = slices.CompactFunc(us, func(x, y bus.TaskUpdate) bool { return x.Cursor == y.Cursor })
	gens := make([]schemas.Generation, len(us))
	for i, u := range us {
		gens[i] = u.Generation
	}
	return gens
}

// EventReaders counts the consumers of the events stream now, across
// every process: one for each process's event hub, and one for each
// reader catching up on stored events.
func EventReaders(t testing.TB, b *bus.Bus) int {
	t.Helper()
	return must(t, "event readers", func(ctx context.Context) (int, error) { return busOps.EventReaders(b, ctx) })
}

// EventSubscribers counts the event readers of b's process open now.
func EventSubscribers(b *bus.Bus) int { return busOps.EventSubscribers(b) }

// Stats counts the messages b's connection sent and received so far.
func Stats(b *bus.Bus) bus.Stats { return busOps.Stats(b) }

// CheckWritable asks, within ctx, the leader of each stream an edge
// writes whether it would store a write now, as a bus.WriteProbe does
// every second: nil if every one would, else an error matching
// schemas.ErrUnavailable (or wrapping ctx's).
func CheckWritable(ctx context.Context, b *bus.Bus) error { return busOps.CheckWritable(b, ctx) }

// Provision creates or updates b's streams and buckets again, as a
// process does at start-up.
func Provision(t testing.TB, b *bus.Bus) {
	t.Helper()
	must(t, "provision", func(ctx context.Context) (struct{}, error) { return struct{}{}, busOps.Provision(b, ctx) })
}

// StoredMessages is every message the stream holds, each its subject,
// headers and data in one byte slice: what a test searches for what must
// never be stored (a message body in the audit record).
func StoredMessages(t testing.TB, b *bus.Bus, stream string) [][]byte {
	t.Helper()
	return must(t, "read stream "+stream, func(ctx context.Context) ([][]byte, error) { return busOps.StoredMessages(b, ctx, stream) })
}
