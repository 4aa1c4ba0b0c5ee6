package edge

import (
	"context"
	"net/http"
	"net/url"

	"github.com/a2abus/a2abus/schemas"
)

// InProcess is the edge's door for adapters in its own process that are
// not among its HTTP bindings: the MCP bridge, whose tool calls become A2A
// calls here instead of requests to the edge's own HTTP routes. It admits
// each call as the front door admits an A2A request — the caller
// authenticated from what the adapter's own request presented
// (schemas.Presented), its rate limited, the agent one this edge serves,
// the tenant selected — then runs it through the service and its
// interceptors, and counts it under the binding "inprocess". The adapter
// only translates: it holds no policy of its own.
//
// Its methods' types are the schemas' and the standard library's, so an
// adapter declares the interface it needs without importing the edge.
type InProcess struct{ s *Server }

// InProcess returns the edge's in-process door.
func (s *Server) InProcess() *InProcess { return &InProcess{s} }

// bindingInProcess is the metrics label of the in-process door's calls.
const bindingInProcess = "inprocess"

// presented is the request a door's checks read for an in-process call:
// what the adapter's request presented, in ctx. Its path names the door
// and the operation, for the refusals' log.
func presented(ctx context.Context, who schemas.Presented, op string) *http.Request {
	r := (&http.Request{Method: http.MethodPost, URL: &url.URL{Path: "inprocess/" + op}, Header: who.Header, RemoteAddr: who.RemoteAddr}).WithContext(ctx)
	if r.Header == nil {
		r.Header = http.Header{}
	}
	if r.RemoteAddr == "" {
		r.RemoteAddr = "127.0.0.1:0" // the process itself
	}
	return r
}

// admit makes the call of an operation for who on agent, through the
// front door's checks; the call's observation is done by the caller.
func (d *InProcess) admit(ctx context.Context, who schemas.Presented, agent, op, tenant string) (*call, *http.Request, error) {
	s := d.s
	r := presented(ctx, who, op)
	c := &call{obs: s.observe(bindingInProcess), d: &s.v1, method: op, agent: agent, version: schemas.ProtocolVersion,
		trace: r.Header.Get("traceparent")}
	c.obs.method = op
	if err := s.admitCaller(r, c); err != nil {
		e, _ := s.callerRefusal(r, err)
		return c, r, d.refused(c, e)
	}
	if !schemas.ValidAgentName(agent) {
		return c, r, d.refused(c, schemas.Errorf(schemas.ErrInvalidParams, "%q is not an agent name", agent).With("field", "agent"))
	}
	if _, ok := s.agents.Get(agent); !ok {
		return c, r, d.refused(c, schemas.Errorf(schemas.ErrMethodNotFound, "no agent %q is served here; GET /a2a/agents lists the agents", agent))
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

// Agents lists the live registry narrowed by q, as who sees it (its
// admins see the operational side of remote agents): what GET /a2a/agents
// answers. Like that route it needs no credentials; the adapter's own
// door bounds how often it is asked.
func (d *InProcess) Agents(ctx context.Context, who schemas.Presented, q schemas.AgentQuery) ([]schemas.AgentEntry, error) {
	return d.s.agentList(q, d.s.seesOperations(presented(ctx, who, "ListAgents"))), nil
}

// GetTask is A2A's GetTask of a task of agent for who.
func (d *InProcess) GetTask(ctx context.Context, who schemas.Presented, agent string, req *schemas.GetTaskRequest) (*schemas.Task, error) {
	c, _, err := d.admit(ctx, who, agent, opGetTask, req.Tenant)
	defer c.obs.done()
	if err != nil {
		return nil, err
	}
	rec, err := d.s.svc.GetTask(ctx, c, req)
	if err != nil {
		return nil, d.failed(c, err)
	}
	t := rec.Task.WithHistoryLength(req.HistoryLength)
	return &t, nil
}

// CancelTask is A2A's CancelTask of a task of agent for who.
func (d *InProcess) CancelTask(ctx context.Context, who schemas.Presented, agent string, req *schemas.CancelTaskRequest) (*schemas.Task, error) {
	c, _, err := d.admit(ctx, who, agent, opCancelTask, req.Tenant)
	defer c.obs.done()
	if err != nil {
		return nil, err
	}
	rec, err := d.s.svc.CancelTask(ctx, c, req)
	if err != nil {
		return nil, d.failed(c, err)
	}
	return &rec.Task, nil
}

// SendStreamingMessage is A2A's SendStreamingMessage to agent for who:
// each event is handed to each as it comes, until the stream ends (the
// task settles, the agent replies, ctx ends) or each returns an error,
// which ends it and is returned. A stream the edge ends short (it falls
// behind, the edge shuts down) returns the error a client would read as
// its last event; a stream cut by ctx returns nil, and what each was given
// is the task as far as it went. Like every stream, it counts against the
// edge's streams and its source address's share of them.
func (d *InProcess) SendStreamingMessage(ctx context.Context, who schemas.Presented, agent string, req *schemas.SendMessageRequest, each func(*schemas.StreamResponse) error) error {
	c, r, err := d.admit(ctx, who, agent, opSendStreamingMessage, req.Tenant)
	defer c.obs.done()
	if err != nil {
		return err
	}
	s := d.s
	closeStream, refused := s.drain.streamOpen(ctx, requestSource(r), s.cfg.MaxStreams)
	if refused != nil {
		return d.refused(c, refused)
	}
	defer s.streamOpen(c.obs)()
	defer closeStream()
	out := &funcStream{each: each}
	if err := s.svc.SendStreamingMessage(ctx, c, req, out); err != nil {
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
	each    func(*schemas.StreamResponse) error
	stopped error          // what each returned, which ended the stream
	failed  *schemas.Error // the error the service ended the stream with
}

func (f *funcStream) start() error     { return nil }
func (f *funcStream) keepAlive() error { return nil }
func (f *funcStream) hold()            {}
func (f *funcStream) release() error   { return nil }

func (f *funcStream) send(_ uint64, r *schemas.StreamResponse) error {
	if f.stopped != nil {
		return f.stopped
	}
	f.stopped = f.each(r)
	return f.stopped
}

func (f *funcStream) fail(e *schemas.Error) error {
	f.failed = e
	return nil
}
