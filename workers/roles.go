package workers

import (
	"context"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// What the workers need of the bus, in the roles they use it in. A
// *bus.Bus is the one implementation; agents see none of it (they write
// through their Emitter and delegate through their Request).

// WorkBus is what a Runner needs: the agent's work and cancel notices, its
// registration, the task store it writes its agents' events to (the
// TaskWriter) and reads snapshots from, and the lifecycle its agents
// delegate through (Delegation).
type WorkBus interface {
	TaskWriter
	Lifecycle
	WorkConsumer(ctx context.Context, agent string) (*bus.WorkConsumer, error)
	SubscribeCancels(agent string, fn func(schemas.CancelNotice)) (stop func(), err error)
	WatchDeadLetters(agent string, fn func(bus.DeadLetter)) (stop func(), err error)
	RegisterAgent(ctx context.Context, reg schemas.AgentRegistration) error
	AgentHeartbeat() time.Duration
	Apply(ctx context.Context, taskID string, ev bus.TaskEvent) (*schemas.TaskRecord, uint64, error)
	GetTaskAtLeast(ctx context.Context, id string, minRev uint64) (*schemas.TaskRecord, uint64, error)
	PublishMissingFinalEvent(ctx context.Context, rec *schemas.TaskRecord, rev uint64) (bool, error)
	Task(ctx context.Context, o bus.Owner, id string) (*schemas.TaskRecord, uint64, error)
	Config() bus.Config
}

// PushBus is what a PushSender needs: the wake-ups of tasks with
// notifications owed, their configs and delivery state, their stored
// events, and the push dead-letter stream.
type PushBus interface {
	PushConsumer(ctx context.Context, ackWait time.Duration) (*bus.PushConsumer, error)
	WakePush(ctx context.Context, taskID string) error
	PushConfigsOf(ctx context.Context, taskID string) ([]schemas.PushConfigRecord, uint64, error)
	ChangePushDelivery(ctx context.Context, taskID string, set *schemas.PushConfigSet, rev uint64, change func(*schemas.PushConfigSet) error) (*schemas.PushConfigSet, uint64, error)
	DeadLetterPush(ctx context.Context, taskID, configID, eventID, reason string, body []byte) error
	LastStoredEvent(ctx context.Context, taskID string) (bus.StoredEvent, error)
	EventsAfter(ctx context.Context, taskID string, from, after uint64, fn func(bus.StoredEvent) bool) (bus.StoredEvent, error)
	GetTask(ctx context.Context, id string) (*schemas.TaskRecord, uint64, error)
	Config() bus.Config
	Metrics() *bus.Metrics
}

var (
	_ WorkBus = (*bus.Bus)(nil)
	_ PushBus = (*bus.Bus)(nil)
)
