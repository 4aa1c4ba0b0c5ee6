package bus

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/bus/internal/testhooks"
	"github.com/a2abus/a2abus/schemas"
)

// What only tests may do to a bus, handed to bus/bustest through
// bus/internal/testhooks (which says how): the faults a crash or a race
// leaves behind — a task stored without its work, work queued as no
// submission queues it, a record changed behind its writers, a connection
// dropped — and a look at what the bus keeps to itself. Each operation is
// an unexported method of Bus, so none of them widens what the product
// sees.

func init() { testhooks.Ops = testOps{} }

// testOps are those operations; bustest declares the interface it asserts
// them to, so a change here must be made there too (every test importing
// bustest fails at once until it is).
type testOps struct{}

func (testOps) CreateTask(b *Bus, ctx context.Context, rec *schemas.TaskRecord) (uint64, error) {
	rev, _, err := b.createTask(ctx, rec)
	return rev, err
}

func (testOps) UpdateTask(b *Bus, ctx context.Context, id string, change func(*schemas.TaskRecord) error) (*schemas.TaskRecord, uint64, error) {
	return b.update(ctx, id, nil, 0, change, 0)
}

func (testOps) QueueWork(b *Bus, ctx context.Context, item *schemas.WorkItem, o PublishOptions) error {
	return b.queueWork(ctx, item, o)
}

func (testOps) Abort(b *Bus) { b.abort() }

func (testOps) DeadLetters(b *Bus, ctx context.Context, agent string) ([]DeadLetter, error) {
	return b.deadLetters(ctx, agent)
}

func (testOps) PushDeadLetters(b *Bus, ctx context.Context, taskID string) ([]PushDeadLetter, error) {
	return b.pushDeadLetters(ctx, taskID)
}

func (testOps) StoredEvents(b *Bus, ctx context.Context, taskID string, from uint64, fn func(StoredEvent) bool) error {
	return b.storedEvents(ctx, taskID, from, fn)
}

func (testOps) EventReaders(b *Bus, ctx context.Context) (int, error) { return b.eventReaders(ctx) }

func (testOps) EventSubscribers(b *Bus) int { return b.eventSubscribers() }

func (testOps) Stats(b *Bus) Stats { return b.stats() }

func (testOps) CheckWritable(b *Bus, ctx context.Context) error { return b.checkWritable(ctx) }

func (testOps) Provision(b *Bus, ctx context.Context) error { return b.provision(ctx) }

func (testOps) StoredMessages(b *Bus, ctx context.Context, stream string) ([][]byte, error) {
	st, err := b.js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		raw := []byte(m.Subject)
		for k, vs := range m.Header {
			for _, v := range vs {
				raw = append(raw, k+": "+v+"\n"...)
			}
		}
		out = append(out, append(raw, m.Data...))
	}
	return out, nil
}
