package edge

import (
	"context"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// What an edge needs of the bus, in the roles it uses it in. A *bus.Bus is
// the one implementation; each part of the edge holds only its role, so
// the compiler keeps task operations inside the A2A service (service.go)
// and the side doors to what they own: the registry routes hold the
// registry, the remote-push webhook its inbox, the service the lifecycle.

// Bus is every role an edge is built from (New).
type Bus interface {
	Lifecycle
	PushConfigs
	Registry
	DeadLetters
	Approvals
	AuditLog
	RemoteInbox
	Followers
	Budgets(p bus.BudgetPolicy) *bus.Budgets
	Config() bus.Config
	Connected() bool
	Metrics() *bus.Metrics
}

// Lifecycle is the task lifecycle the A2A service drives: every operation
// names its owner, and the bus checks it before it reads anything.
type Lifecycle interface {
	Submit(ctx context.Context, s bus.Submission, follow bus.Follow) (*schemas.TaskRecord, uint64, error)
	Continue(ctx context.Context, o bus.Owner, a bus.Answer, follow bus.Follow) (*schemas.TaskRecord, uint64, error)
	Cancel(ctx context.Context, o bus.Owner, id string, why *schemas.Message) (*schemas.TaskRecord, error)
	Task(ctx context.Context, o bus.Owner, id string) (*schemas.TaskRecord, uint64, error)
	ReadEvents(ctx context.Context, taskID string, after uint64, buffer int) (*bus.EventReader, error)
	ReadEventsAfterGeneration(ctx context.Context, taskID string, gen schemas.Generation, buffer int) (*bus.EventReader, error)
	ReadNewTaskEvents(ctx context.Context, taskID string, after uint64, buffer int) (*bus.EventReader, error)
	AgentLoad(ctx context.Context, agent string) (bus.AgentLoad, error)
}

// PushConfigs are a task's push-notification configs, read and written as
// its owner.
type PushConfigs interface {
	CreatePushConfig(ctx context.Context, o bus.Owner, c schemas.TaskPushNotificationConfig, dialect string) (*schemas.PushConfigRecord, error)
	PushConfig(ctx context.Context, o bus.Owner, taskID, id string) (*schemas.PushConfigRecord, error)
	PushConfigs(ctx context.Context, o bus.Owner, taskID string) ([]schemas.PushConfigRecord, error)
	DeletePushConfig(ctx context.Context, o bus.Owner, taskID, id string) error
}

// Registry is the admin-written agent registry (the admin routes).
type Registry interface {
	PutRegistryEntry(ctx context.Context, e schemas.RegistryEntry) error
	RegistryEntry(ctx context.Context, agent string) (schemas.RegistryEntry, bool, error)
	DeleteRegistryEntry(ctx context.Context, agent string) error
	RegistryEntries(ctx context.Context) ([]schemas.RegistryEntry, error)
}

// DeadLetters lists what the bus gave up on (an admin route), never a
// body.
type DeadLetters interface {
	ListDeadLetters(ctx context.Context, kind string, limit int) ([]schemas.DeadLetterSummary, error)
}

// Approvals is the approval half of the lifecycle, which the approvals
// routes hold (and nothing else of it).
type Approvals interface {
	DecideApproval(ctx context.Context, by bus.ApprovalDecider, id string, d schemas.ApprovalDecision) (*schemas.TaskRecord, error)
}

// AuditLog is the audit record (audit.go): appended to before an audited
// call or admin action runs and after, read by the audit admin route.
type AuditLog interface {
	AppendAudit(ctx context.Context, r schemas.AuditRecord) error
	AuditRecords(ctx context.Context, q schemas.AuditQuery) ([]schemas.AuditRecord, error)
}

// RemoteInbox takes what a remote agent pushes about a task it runs for a
// local one (the remote-push webhook): the task is read by id, without an
// owner, only to check the webhook's token against it.
type RemoteInbox interface {
	GetTask(ctx context.Context, id string) (*schemas.TaskRecord, uint64, error)
	ForwardRemote(ctx context.Context, taskID string, body []byte) error
}

// Followers are the caches an edge keeps of the bus, each following it.
type Followers interface {
	NewTaskWatcher() *bus.TaskWatcher
	NewTaskIndex() *bus.TaskIndex
	NewAgentDirectory() *bus.AgentDirectory
	NewWriteProbe() *bus.WriteProbe
}

var _ Bus = (*bus.Bus)(nil)
