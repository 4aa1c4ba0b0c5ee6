package edge

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// InProcess is the edge's door for adapters in its own process that are
// not among its HTTP bindings: the MCP bridge, whose tool calls become A2A
// calls here instead of requests to the edge's own HTTP routes. It admits
// each call as the front door admits an A2A request — the caller
// authenticated from what the adapter's own request presented
// (schemas.Presented), its rate limited, the agent one this edge serves,
// the tenant selected — then runs it through the service and its
// interceptors, and counts it under the adapter's binding name. The
// adapter only translates: it holds no policy of its own.
//
// Its methods' types are the schemas' and the standard library's, so an
// adapter declares the interface it needs without importing the edge.
type InProcess struct {
	s       *Server
	binding string
}

// InProcess returns the edge's in-process door for an adapter, whose
// calls the metrics count under binding ("mcp", "grpc").
func (s *Server) InProcess(binding string) *InProcess { return &InProcess{s, binding} }

// presented is the request a door's checks read for an in-process call:
// what the adapter's request presented, in ctx. Its path names the
// adapter and the operation, for the refusals' log.
func (d *InProcess) presented(ctx context.Context, who schemas.Presented, op string) *http.Request {
	r := (&http.Request{Method: http.MethodPost, URL: &url.URL{Path: d.binding + "/" + op}, Header: who.Header, RemoteAddr: who.RemoteAddr, TLS: who.TLS}).WithContext(ctx)
	if r.Header == nil {
		r.Header = http.Header{}
	}
	if r.RemoteAddr == "" {
		r.RemoteAddr = "127.0.0.1:0" // the process itself
	}
	return r
}

// admit makes the call of an operation for who on agent ("": the edge's
// default agent), through the front door's checks: the caller, the A2A
// version its header names (if any), the agent, the tenant. The call's
// observation is done by the caller.
func (d *InProcess) admit(ctx context.Context, who schemas.Presented, agent, op, tenant string) (*call, *http.Request, error) {
	s := d.s
	r := d.presented(ctx, who, op)
	c := &call{obs: s.observe(d.binding), d: &s.v1, method: op, agent: agent, version: schemas.ProtocolVersion,
		trace: r.Header.Get("traceparent"), lastEventID: r.Header.Get("Last-Event-ID"), gen: true}
	c.obs.method = op
	if err := s.admitCaller(r, c); err != nil {
		e, _ := s.callerRefusal(r, err)
		return c, r, d.refused(c, e)
	}
	if v := r.Header.Get(schemas.HeaderA2AVersion); v != "" {
		if e := s.v1.checkVersion(v, op); e != nil {
			return c, r, d.refused(c, e)
		}
		c.version = v
	}
	name, ok := s.agentNamed(agent)
	c.agent = name
	switch {
	case agent != "" && !schemas.ValidAgentName(agent):
		return c, r, d.refused(c, schemas.Errorf(schemas.ErrInvalidParams, "%q is not an agent name", agent).With("field", "agent"))
	case !ok:
		return c, r, d.refused(c, schemas.Errorf(schemas.ErrMethodNotFound, "no agent %q is served here; GET /a2a/agents lists the agents", name))
	}
	if err := s.moveToTenant(c, tenant); err != nil {
		e, _ := s.callerRefusal(r, err)
		return c, r, d.refused(c, e)
	}
	return c, r, nil
}

// refused notes what a call is refused with, and returns it.
func (d *InProcess) refused(c *call, e *schemas.Error) error {
	c.obs.failed(e)
	return e
}

// failed is what a call the service ran failed with, classified as the
// front door classifies it.
func (d *InProcess) failed(c *call, err error) error {
	return d.refused(c, d.s.protocolError(c, err))
}

// unary admits one call of op and runs it; what it fails with is
// classified as the front door classifies it.
func unary[Res any](d *InProcess, ctx context.Context, who schemas.Presented, agent, op, tenant string, run func(*call) (Res, error)) (Res, error) {
	c, _, err := d.admit(ctx, who, agent, op, tenant)
	defer c.obs.done()
	var res Res
	if err != nil {
		return res, err
	}
	if res, err = run(c); err != nil {
		return res, d.failed(c, err)
	}
	return res, nil
}

// StreamWriteTimeout is how long one event of a stream may wait for its
// client (edge.Config.StreamWriteTimeout): an adapter whose writes can
// block (gRPC's flow control) ends a stream whose client stops reading
// after it, as the edge ends an SSE stream, and the client resumes.
func (d *InProcess) StreamWriteTimeout() time.Duration { return d.s.cfg.StreamWriteTimeout }

// Agents lists the live registry narrowed by q, as who sees it (its
// admins see the operational side of remote agents): what GET /a2a/agents
// answers. Like that route it needs no credentials; the adapter's own
// door bounds how often it is asked.
func (d *InProcess) Agents(ctx context.Context, who schemas.Presented, q schemas.AgentQuery) ([]schemas.AgentEntry, error) {
	return d.s.agentList(q, d.s.seesOperations(d.presented(ctx, who, "ListAgents"))), nil
}

// GetTask is A2A's GetTask of a task of agent for who.
func (d *InProcess) GetTask(ctx context.Context, who schemas.Presented, agent string, req *schemas.GetTaskRequest) (*schemas.Task, error) {
	return unary(d, ctx, who, agent, opGetTask, req.Tenant, func(c *call) (*schemas.Task, error) {
		rec, err := d.s.svc.GetTask(ctx, c, req)
		if err != nil {
			return nil, err
		}
		t := c.shapeTask(rec, req.HistoryLength)
		return &t, nil
	})
}

// CancelTask is A2A's CancelTask of a task of agent for who.
func (d *InProcess) CancelTask(ctx context.Context, who schemas.Presented, agent string, req *schemas.CancelTaskRequest) (*schemas.Task, error) {
	return unary(d, ctx, who, agent, opCancelTask, req.Tenant, func(c *call) (*schemas.Task, error) {
		rec, err := d.s.svc.CancelTask(ctx, c, req)
		if err != nil {
			return nil, err
		}
		t := c.shapeTask(rec, nil)
		return &t, nil
	})
}

// SendMessage is A2A's SendMessage to agent for who: with
// returnImmediately the task as accepted, else the task once it settles
// (or the edge's blocking timeout passes), or the agent's reply.
func (d *InProcess) SendMessage(ctx context.Context, who schemas.Presented, agent string, req *schemas.SendMessageRequest) (*schemas.SendMessageResponse, error) {
	return unary(d, ctx, who, agent, opSendMessage, req.Tenant, func(c *call) (*schemas.SendMessageResponse, error) {
		res, err := d.s.svc.SendMessage(ctx, c, req)
		if err != nil {
			return nil, err
		}
		return res.resp, nil
	})
}

// ListTasks is A2A's ListTasks of who's tasks of agent.
func (d *InProcess) ListTasks(ctx context.Context, who schemas.Presented, agent string, req *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error) {
	return unary(d, ctx, who, agent, opListTasks, req.Tenant, func(c *call) (*schemas.ListTasksResponse, error) {
		return d.s.svc.ListTasks(ctx, c, req)
	})
}

// CreateTaskPushNotificationConfig is A2A's: the config stored, as every
// binding answers it (its secrets withheld).
func (d *InProcess) CreateTaskPushNotificationConfig(ctx context.Context, who schemas.Presented, agent string, cfg *schemas.TaskPushNotificationConfig) (*schemas.TaskPushNotificationConfig, error) {
	return unary(d, ctx, who, agent, opCreatePushConfig, cfg.Tenant, func(c *call) (*schemas.TaskPushNotificationConfig, error) {
		pr, err := d.s.svc.CreateTaskPushNotificationConfig(ctx, c, cfg)
		if err != nil {
			return nil, err
		}
		v, _ := shown(pr.Config)
		return &v, nil
	})
}

// GetTaskPushNotificationConfig is A2A's (the config's secrets withheld).
func (d *InProcess) GetTaskPushNotificationConfig(ctx context.Context, who schemas.Presented, agent string, req *schemas.GetTaskPushNotificationConfigRequest) (*schemas.TaskPushNotificationConfig, error) {
	return unary(d, ctx, who, agent, opGetPushConfig, req.Tenant, func(c *call) (*schemas.TaskPushNotificationConfig, error) {
		pr, err := d.s.svc.GetTaskPushNotificationConfig(ctx, c, req)
		if err != nil {
			return nil, err
		}
		v, _ := shown(pr.Config)
		return &v, nil
	})
}

// ListTaskPushNotificationConfigs is A2A's: every config of the task, in
// one page (the configs' secrets withheld).
func (d *InProcess) ListTaskPushNotificationConfigs(ctx context.Context, who schemas.Presented, agent string, req *schemas.ListTaskPushNotificationConfigsRequest) ([]schemas.TaskPushNotificationConfig, error) {
	return unary(d, ctx, who, agent, opListPushConfigs, req.Tenant, func(c *call) ([]schemas.TaskPushNotificationConfig, error) {
		prs, err := d.s.svc.ListTaskPushNotificationConfigs(ctx, c, req)
		if err != nil {
			return nil, err
		}
		out := make([]schemas.TaskPushNotificationConfig, len(prs))
		for i := range prs {
			out[i], _ = shown(prs[i].Config)
		}
		return out, nil
	})
}

// DeleteTaskPushNotificationConfig is A2A's.
func (d *InProcess) DeleteTaskPushNotificationConfig(ctx context.Context, who schemas.Presented, agent string, req *schemas.GetTaskPushNotificationConfigRequest) error {
	_, err := unary(d, ctx, who, agent, opDeletePushConfig, req.Tenant, func(c *call) (none, error) {
		return none{}, d.s.svc.DeleteTaskPushNotificationConfig(ctx, c, req)
	})
	return err
}

// GetExtendedAgentCard is A2A's: agent's card for an authenticated who.
func (d *InProcess) GetExtendedAgentCard(ctx context.Context, who schemas.Presented, agent, tenant string) (*schemas.AgentCard, error) {
	return unary(d, ctx, who, agent, opGetExtendedAgentCard, tenant, func(c *call) (*schemas.AgentCard, error) {
		return d.s.svc.GetExtendedAgentCard(ctx, c)
	})
}

// SendStreamingMessage is A2A's SendStreamingMessage to agent for who:
// each event is handed to each with its id (what an SSE stream sends as
// the event's id, and SubscribeToTask resumes after) as it comes, until
// the stream ends (the task settles, the agent replies, ctx ends) or each
// returns an error, which ends it and is returned. A stream the edge ends
// short (it falls behind, the edge shuts down) returns the error a client
// would read as its last event; a stream cut by ctx returns nil, and what
// each was given is the task as far as it went. Like every stream, it
// counts against the edge's streams and its source address's share.
func (d *InProcess) SendStreamingMessage(ctx context.Context, who schemas.Presented, agent string, req *schemas.SendMessageRequest, each func(id string, ev *schemas.StreamResponse) error) error {
	return d.stream(ctx, who, agent, opSendStreamingMessage, req.Tenant, each, func(c *call, out streamOut) error {
		return d.s.svc.SendStreamingMessage(ctx, c, req, out)
	})
}

// SubscribeToTask is A2A's SubscribeToTask of a task of agent for who, as
// SendStreamingMessage streams: from the task's snapshot, or, when who's
// header carries Last-Event-ID (the id of the last event it was given),
// every event after that one.
func (d *InProcess) SubscribeToTask(ctx context.Context, who schemas.Presented, agent string, req *schemas.SubscribeToTaskRequest, each func(id string, ev *schemas.StreamResponse) error) error {
	return d.stream(ctx, who, agent, opSubscribeToTask, req.Tenant, each, func(c *call, out streamOut) error {
		return d.s.svc.SubscribeToTask(ctx, c, req, out)
	})
}

// stream admits a streaming call and runs it with a funcStream.
func (d *InProcess) stream(ctx context.Context, who schemas.Presented, agent, op, tenant string, each func(string, *schemas.StreamResponse) error, run func(*call, streamOut) error) error {
	c, r, err := d.admit(ctx, who, agent, op, tenant)
	defer c.obs.done()
	if err != nil {
		return err
	}
	s := d.s
	closeStream, refused := s.openStream(ctx, requestSource(r), c)
	if refused != nil {
		return d.refused(c, refused)
	}
	defer s.streamOpen(c.obs)()
	defer closeStream()
	out := &funcStream{each: each}
	if err := run(c, out); err != nil {
		return d.failed(c, err)
	}
	switch {
	case out.stopped != nil:
		return out.stopped
	case out.failed != nil:
		return d.refused(c, out.failed)
	}
	return nil
}

// funcStream is a stream of the in-process door: events go to a function
// as they come; the error a stream ends with is kept, to be returned.
type funcStream struct {
	each    func(string, *schemas.StreamResponse) error
	stopped error          // what each returned, which ended the stream
	failed  *schemas.Error // the error the service ended the stream with
}

func (f *funcStream) start() error     { return nil }
func (f *funcStream) keepAlive() error { return nil }
func (f *funcStream) hold()            {}
func (f *funcStream) release() error   { return nil }

func (f *funcStream) send(id string, r *schemas.StreamResponse) error {
	if f.stopped != nil {
		return f.stopped
	}
	f.stopped = f.each(id, r)
	return f.stopped
}

func (f *funcStream) fail(e *schemas.Error) error {
	f.failed = e
	return nil
}
