package edge

import (
	"context"
	"log/slog"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// service is the A2A service: every A2A 1.0 operation once, typed, for the
// caller and agent a call names. It is the only code that drives the task
// lifecycle (it alone holds the Lifecycle and PushConfigs roles of the
// bus); every binding and dialect — JSON-RPC 1.0 and 0.3, HTTP+JSON, the
// older tasks/send dialect and OpenFang's REST routes — is an adapter that
// decodes its wire form into these requests and shapes the answers back
// (methods.go, rest.go, v03.go, legacy.go, push.go), and the front door
// (frontdoor.go) reaches it only through the interceptor chain
// (intercept.go), where what applies to every call goes.
//
// Tasks come back as records: a binding shapes the task with what it
// asked for (historyLength) and in the dialect the task was created in.
// Errors are *schemas.Error (the interceptor chain classifies the rest).
type service interface {
	SendMessage(ctx context.Context, c *call, req *schemas.SendMessageRequest) (*sendResult, error)
	SendStreamingMessage(ctx context.Context, c *call, req *schemas.SendMessageRequest, out streamOut) error
	GetTask(ctx context.Context, c *call, req *schemas.GetTaskRequest) (*schemas.TaskRecord, error)
	ListTasks(ctx context.Context, c *call, req *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error)
	CancelTask(ctx context.Context, c *call, req *schemas.CancelTaskRequest) (*schemas.TaskRecord, error)
	SubscribeToTask(ctx context.Context, c *call, req *schemas.SubscribeToTaskRequest, out streamOut) error
	CreateTaskPushNotificationConfig(ctx context.Context, c *call, cfg *schemas.TaskPushNotificationConfig) (*schemas.PushConfigRecord, error)
	GetTaskPushNotificationConfig(ctx context.Context, c *call, req *schemas.GetTaskPushNotificationConfigRequest) (*schemas.PushConfigRecord, error)
	ListTaskPushNotificationConfigs(ctx context.Context, c *call, req *schemas.ListTaskPushNotificationConfigsRequest) ([]schemas.PushConfigRecord, error)
	DeleteTaskPushNotificationConfig(ctx context.Context, c *call, req *schemas.GetTaskPushNotificationConfigRequest) error
	GetExtendedAgentCard(ctx context.Context, c *call) (*schemas.AgentCard, error)
	// WatchTasks is a2abus's task feed (feed.go), an extension method.
	WatchTasks(ctx context.Context, c *call, req *schemas.WatchTasksRequest, out streamOut) error
}

// a2aService is the service over the bus lifecycle. It follows the bus
// through the edge's caches (the watcher a blocking send waits on, the
// index ListTasks pages through) and ends its streams as the edge drains.
type a2aService struct {
	cfg    *Config
	log    *slog.Logger
	life   Lifecycle
	pushes PushConfigs
	tasks  *bus.TaskWatcher
	index  *bus.TaskIndex
	drain  *drainState
	// extendedCard builds the called agent's extended card (cards.go).
	extendedCard func(c *call) (schemas.AgentCard, error)
	// makesTasks reports whether an agent registered as answering with
	// tasks only (schemas.AgentRegistration.MakesTasks).
	makesTasks func(agent string) bool
}

var _ service = (*a2aService)(nil)
