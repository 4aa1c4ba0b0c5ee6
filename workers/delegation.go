package workers

import (
	"context"
	"errors"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// Delegation is what an agent reaches beyond its Emitter: child tasks of
// other agents (the fan-out, the router), owned as their parent is and
// followed through the one task lifecycle; the live registry of agents;
// and the notifications an external agent sends for its task (the remote
// agent in push mode). An agent reaches it through its Request, never a
// bus of its own: a Runner gives the bus's (with Options.Registry), a
// Recorder its own, in memory.
type Delegation interface {
	Lifecycle
	// Agents is the live registry: every agent registered now, once the
	// registry has been read (it waits for that, within ctx).
	Agents(ctx context.Context) ([]schemas.AgentRegistration, error)
}

// Lifecycle is the part of the bus's task lifecycle an agent delegates
// through (Delegation without the registry); a *bus.Bus is the real one.
type Lifecycle interface {
	// StartChild creates the child task s.TaskID (the parent derives it,
	// so a redelivered parent finds its children again), or re-attaches
	// to it: see bus.Bus.StartChild.
	StartChild(ctx context.Context, s bus.Submission) error
	// Await follows a child until it settles (finished, interrupted, or
	// answered with a message), as its owner o.
	Await(ctx context.Context, o bus.Owner, id string) (*schemas.TaskRecord, error)
	// Cancel cancels a child as a client would, as its owner o.
	Cancel(ctx context.Context, o bus.Owner, id string, why *schemas.Message) (*schemas.TaskRecord, error)
	// GetTask reads a task as stored, whoever's it is: for an agent that
	// learned its id from its own work (a child that answered with a
	// message alone is no task to Await's owner check).
	GetTask(ctx context.Context, id string) (*schemas.TaskRecord, uint64, error)
	// AgentBacklog is how much work waits for an agent.
	AgentBacklog(ctx context.Context, agent string) (uint64, error)
	// ListenRemote calls fn with each notification an external agent
	// sends the edge's webhook for the task (a remote agent in push mode),
	// one at a time, until stop is called: see bus.Bus.ListenRemote.
	ListenRemote(taskID string, fn func(body []byte) error) (stop func(), err error)
}

// Registry is the live registry of agents a Runner hands its agents (see
// Delegation.Agents); *bus.AgentDirectory is one.
type Registry interface {
	// Ready is closed once the registry has been read.
	Ready() <-chan struct{}
	List() []schemas.AgentRegistration
}

// ErrNoDelegation is returned by a Request's Delegation calls when its
// runner gives none (a Request made by hand), and by Agents when the
// runner was given no Registry.
var ErrNoDelegation = errors.New("workers: this agent's runner offers no delegation to other agents")

// Delegation returns what the agent may hand work to other agents with.
func (r *Request) Delegation() Delegation {
	if r.delegation == nil {
		return noDelegation{}
	}
	return r.delegation
}

// busDelegation is a Runner's Delegation: the bus's lifecycle and the
// registry the runner was given.
type busDelegation struct {
	Lifecycle
	registry Registry
}

func (d busDelegation) Agents(ctx context.Context) ([]schemas.AgentRegistration, error) {
	if d.registry == nil {
		return nil, ErrNoDelegation
	}
	select {
	case <-d.registry.Ready():
		return d.registry.List(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// deadlineDelegation is the Delegation of a turn whose task has a
// deadline: every child it starts (the fan-out's, the router's, any
// agent's) must be done by then too, or by its own deadline when earlier.
type deadlineDelegation struct {
	Delegation
	deadline time.Time
}

func (d deadlineDelegation) StartChild(ctx context.Context, s bus.Submission) error {
	s.Deadline = schemas.EarlierDeadline(s.Deadline, d.deadline)
	return d.Delegation.StartChild(ctx, s)
}

// noDelegation refuses every call.
type noDelegation struct{}

func (noDelegation) StartChild(context.Context, bus.Submission) error { return ErrNoDelegation }
func (noDelegation) Await(context.Context, bus.Owner, string) (*schemas.TaskRecord, error) {
	return nil, ErrNoDelegation
}
func (noDelegation) Cancel(context.Context, bus.Owner, string, *schemas.Message) (*schemas.TaskRecord, error) {
	return nil, ErrNoDelegation
}
func (noDelegation) GetTask(context.Context, string) (*schemas.TaskRecord, uint64, error) {
	return nil, 0, ErrNoDelegation
}
func (noDelegation) AgentBacklog(context.Context, string) (uint64, error) { return 0, ErrNoDelegation }
func (noDelegation) Agents(context.Context) ([]schemas.AgentRegistration, error) {
	return nil, ErrNoDelegation
}
func (noDelegation) ListenRemote(string, func([]byte) error) (func(), error) {
	return nil, ErrNoDelegation
}
