package edge

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// The interceptor chain of the A2A service: what applies to every call of
// every binding once it is decoded — the admission of new tasks, the call
// log — and the slot where tracing, trust levels and approvals go. The
// front door's own rules (origin, authentication, rate limit, body bound,
// tenant) run before a request is decoded, so nobody unauthenticated makes
// the edge parse a body; they are applied by serve from the route table
// (routes.go), which also classifies what a call failed with, in the
// service or in its adapter (protocolError).

// The operations' names, as A2A 1.0 names them.
const (
	opSendMessage          = "SendMessage"
	opSendStreamingMessage = "SendStreamingMessage"
	opGetTask              = "GetTask"
	opListTasks            = "ListTasks"
	opCancelTask           = "CancelTask"
	opSubscribeToTask      = "SubscribeToTask"
	opCreatePushConfig     = "CreateTaskPushNotificationConfig"
	opGetPushConfig        = "GetTaskPushNotificationConfig"
	opListPushConfigs      = "ListTaskPushNotificationConfigs"
	opDeletePushConfig     = "DeleteTaskPushNotificationConfig"
	opGetExtendedAgentCard = "GetExtendedAgentCard"
	// opWatchTasks is a2abus's extension method, not A2A's (feed.go).
	opWatchTasks = schemas.MethodWatchTasks
)

// invocation is one call of a service operation as interceptors see it:
// the call (caller, agent, dialect), the operation, its typed request (a
// pointer to the schemas type the service method takes; none{} for
// GetExtendedAgentCard), and for a streaming operation the stream its
// events go to, which an interceptor may wrap.
type invocation struct {
	call *call
	op   string
	req  any
	out  streamOut
	// run is the operation itself, what the chain's end calls.
	run invoker
	// ran is set when the chain's end called run: the call was not
	// refused by an interceptor (auditCalls tells the two apart).
	ran bool
}

// invoker runs an invocation: the next interceptor, or the service.
type invoker func(ctx context.Context, inv *invocation) (any, error)

// interceptor runs around every invocation; it calls next to go on, or
// answers (or refuses) itself.
type interceptor func(ctx context.Context, inv *invocation, next invoker) (any, error)

// intercepted is a service behind its interceptor chain, composed once
// (the first interceptor outermost) and ending in the invocation's own
// operation.
type intercepted struct {
	next  service
	chain invoker
}

func intercept(next service, chain ...interceptor) service {
	h := invoker(func(ctx context.Context, inv *invocation) (any, error) {
		inv.ran = true
		return inv.run(ctx, inv)
	})
	for _, ic := range slices.Backward(chain) {
		inner := h
		h = func(ctx context.Context, inv *invocation) (any, error) { return ic(ctx, inv, inner) }
	}
	return &intercepted{next: next, chain: h}
}

// through runs one invocation of op through the chain to fn.
func through[Req, Resp any](ctx context.Context, ic *intercepted, c *call, op string, req Req, out streamOut, fn func(context.Context, *invocation, Req) (Resp, error)) (Resp, error) {
	inv := &invocation{call: c, op: op, req: req, out: out, run: func(ctx context.Context, inv *invocation) (any, error) {
		return fn(ctx, inv, inv.req.(Req))
	}}
	res, err := ic.chain(ctx, inv)
	r, _ := res.(Resp)
	return r, err
}

// newTask is the message of a send that starts a task (its message names
// none: the older dialect's follow-ups name theirs once legacyCall found
// it), nil for every other call: what the interceptors that act on new
// tasks only (admission, budgets, approvals) look at.
func newTask(inv *invocation) *schemas.Message {
	if inv.op != opSendMessage && inv.op != opSendStreamingMessage {
		return nil
	}
	if req, _ := inv.req.(*schemas.SendMessageRequest); req != nil && req.Message != nil && req.Message.TaskID == "" {
		return req.Message
	}
	return nil
}

// none is the result of the operations that answer with a stream or
// nothing.
type none struct{}

func (ic *intercepted) SendMessage(ctx context.Context, c *call, req *schemas.SendMessageRequest) (*sendResult, error) {
	return through(ctx, ic, c, opSendMessage, req, nil, func(ctx context.Context, inv *invocation, req *schemas.SendMessageRequest) (*sendResult, error) {
		return ic.next.SendMessage(ctx, inv.call, req)
	})
}

func (ic *intercepted) SendStreamingMessage(ctx context.Context, c *call, req *schemas.SendMessageRequest, out streamOut) error {
	_, err := through(ctx, ic, c, opSendStreamingMessage, req, out, func(ctx context.Context, inv *invocation, req *schemas.SendMessageRequest) (none, error) {
		return none{}, ic.next.SendStreamingMessage(ctx, inv.call, req, inv.out)
	})
	return err
}

func (ic *intercepted) GetTask(ctx context.Context, c *call, req *schemas.GetTaskRequest) (*schemas.TaskRecord, error) {
	return through(ctx, ic, c, opGetTask, req, nil, func(ctx context.Context, inv *invocation, req *schemas.GetTaskRequest) (*schemas.TaskRecord, error) {
		return ic.next.GetTask(ctx, inv.call, req)
	})
}

func (ic *intercepted) ListTasks(ctx context.Context, c *call, req *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error) {
	return through(ctx, ic, c, opListTasks, req, nil, func(ctx context.Context, inv *invocation, req *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error) {
		return ic.next.ListTasks(ctx, inv.call, req)
	})
}

func (ic *intercepted) CancelTask(ctx context.Context, c *call, req *schemas.CancelTaskRequest) (*schemas.TaskRecord, error) {
	return through(ctx, ic, c, opCancelTask, req, nil, func(ctx context.Context, inv *invocation, req *schemas.CancelTaskRequest) (*schemas.TaskRecord, error) {
		return ic.next.CancelTask(ctx, inv.call, req)
	})
}

func (ic *intercepted) SubscribeToTask(ctx context.Context, c *call, req *schemas.SubscribeToTaskRequest, out streamOut) error {
	_, err := through(ctx, ic, c, opSubscribeToTask, req, out, func(ctx context.Context, inv *invocation, req *schemas.SubscribeToTaskRequest) (none, error) {
		return none{}, ic.next.SubscribeToTask(ctx, inv.call, req, inv.out)
	})
	return err
}

func (ic *intercepted) CreateTaskPushNotificationConfig(ctx context.Context, c *call, cfg *schemas.TaskPushNotificationConfig) (*schemas.PushConfigRecord, error) {
	return through(ctx, ic, c, opCreatePushConfig, cfg, nil, func(ctx context.Context, inv *invocation, cfg *schemas.TaskPushNotificationConfig) (*schemas.PushConfigRecord, error) {
		return ic.next.CreateTaskPushNotificationConfig(ctx, inv.call, cfg)
	})
}

func (ic *intercepted) GetTaskPushNotificationConfig(ctx context.Context, c *call, req *schemas.GetTaskPushNotificationConfigRequest) (*schemas.PushConfigRecord, error) {
	return through(ctx, ic, c, opGetPushConfig, req, nil, func(ctx context.Context, inv *invocation, req *schemas.GetTaskPushNotificationConfigRequest) (*schemas.PushConfigRecord, error) {
		return ic.next.GetTaskPushNotificationConfig(ctx, inv.call, req)
	})
}

func (ic *intercepted) ListTaskPushNotificationConfigs(ctx context.Context, c *call, req *schemas.ListTaskPushNotificationConfigsRequest) ([]schemas.PushConfigRecord, error) {
	return through(ctx, ic, c, opListPushConfigs, req, nil, func(ctx context.Context, inv *invocation, req *schemas.ListTaskPushNotificationConfigsRequest) ([]schemas.PushConfigRecord, error) {
		return ic.next.ListTaskPushNotificationConfigs(ctx, inv.call, req)
	})
}

func (ic *intercepted) DeleteTaskPushNotificationConfig(ctx context.Context, c *call, req *schemas.GetTaskPushNotificationConfigRequest) error {
	_, err := through(ctx, ic, c, opDeletePushConfig, req, nil, func(ctx context.Context, inv *invocation, req *schemas.GetTaskPushNotificationConfigRequest) (none, error) {
		return none{}, ic.next.DeleteTaskPushNotificationConfig(ctx, inv.call, req)
	})
	return err
}

func (ic *intercepted) GetExtendedAgentCard(ctx context.Context, c *call) (*schemas.AgentCard, error) {
	return through(ctx, ic, c, opGetExtendedAgentCard, none{}, nil, func(ctx context.Context, inv *invocation, _ none) (*schemas.AgentCard, error) {
		return ic.next.GetExtendedAgentCard(ctx, inv.call)
	})
}

func (ic *intercepted) WatchTasks(ctx context.Context, c *call, req *schemas.WatchTasksRequest, out streamOut) error {
	_, err := through(ctx, ic, c, opWatchTasks, req, out, func(ctx context.Context, inv *invocation, req *schemas.WatchTasksRequest) (none, error) {
		return none{}, ic.next.WatchTasks(ctx, inv.call, req, inv.out)
	})
	return err
}

// interceptors is the edge's chain, outermost first: the call's span
// (tracecalls.go) holds all the rest, the call log sees every call's
// outcome, the call gets its trust level and what the level may not do is
// refused (trust.go), a call of an audited level is recorded before it
// runs and after (audit.go), a new task is admitted, then charged to its
// caller's budgets (budget.go) — both after the audit record, so their
// refusals are recorded too — and one that needs a person's approval is
// marked to be held for it (approval.go) before it reaches the lifecycle.
func (s *Server) interceptors(load func(context.Context, string) (bus.AgentLoad, error), taskMaxBytes int64) []interceptor {
	adm := &admission{cfg: &s.cfg, index: s.index, agents: s.agents, load: load, taskMaxBytes: taskMaxBytes, limited: s.m.limited}
	return []interceptor{s.traceCalls, s.logCalls, s.admitTrust, s.auditCalls, adm.admitNewTasks, s.budgets.charge, s.requireApproval}
}

// logCalls logs each call at debug level: the operation, whom for, how it
// ended and how long it took. Never a body or a credential: the principal
// is a name.
func (s *Server) logCalls(ctx context.Context, inv *invocation, next invoker) (any, error) {
	if !s.log.Enabled(ctx, slog.LevelDebug) {
		return next(ctx, inv)
	}
	start := time.Now()
	res, err := next(ctx, inv)
	c := inv.call
	attrs := []any{"op", inv.op, "agent", c.agent, "tenant", c.caller.tenant, "principal", c.caller.principal, "trust", c.trust, "took", time.Since(start)}
	switch {
	case errors.Is(err, context.Canceled):
		attrs = append(attrs, "ended", "before its answer")
	case err != nil:
		attrs = append(attrs, "code", schemas.AsError(err).Code)
	}
	s.log.DebugContext(ctx, "a2a call", attrs...)
	return res, err
}
