package workers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// The fanout agent kind: one incoming task becomes a child task for each
// of a configured set of agents on the bus (local ones, or remote ones,
// which are local names too), created exactly as an edge creates tasks, so
// every child is an ordinary task with its own record, workers, events and
// cancel. Each child's answer is added to the parent as an artifact as soon
// as that child finishes; the parent ends when every child has finished or
// timed out.
//
// Child ids derive from the parent id and the agent name, so a redelivered
// parent finds the children its earlier attempt started instead of
// starting them again.

// FanOut modes.
const (
	// FanOutAll completes the parent only if every child completed.
	FanOutAll = "all"
	// FanOutPartial completes the parent if at least one child completed,
	// saying which did not.
	FanOutPartial = "partial"
)

// Metadata keys on the parent's artifacts and the children.
const (
	MetaFanOutAgent  = "a2abus.fanout.agent"
	MetaFanOutTaskID = "a2abus.fanout.taskId"
	MetaFanOutParent = "a2abus.fanout.parent"
)

// FanOut sends each task to several agents at once, through its
// Request's Delegation.
type FanOut struct {
	// Agents are the names of the agents that get a child task each.
	Agents []string
	// ChildTimeout bounds each child; a child still running then is
	// canceled and counts as failed. Default 5 minutes.
	ChildTimeout time.Duration
	// Mode is FanOutAll (default) or FanOutPartial.
	Mode string
}

// Validate checks the configuration.
func (f FanOut) Validate() error {
	if len(f.Agents) == 0 {
		return errors.New("a fanout agent needs at least one agent to send to")
	}
	seen := map[string]bool{}
	for _, a := range f.Agents {
		if !schemas.ValidAgentName(a) {
			return fmt.Errorf("fanout target %q is not a valid agent name", a)
		}
		if seen[a] {
			return fmt.Errorf("fanout target %q is listed twice", a)
		}
		seen[a] = true
	}
	switch f.Mode {
	case "", FanOutAll, FanOutPartial:
	default:
		return fmt.Errorf("fanout mode %q is not %q or %q", f.Mode, FanOutAll, FanOutPartial)
	}
	return nil
}

// childID is the id of the parent's child for agent: stable across
// redeliveries.
func childID(parent, agent string) string {
	ns, err := uuid.Parse(parent)
	if err != nil {
		ns = uuid.NameSpaceOID
	}
	return uuid.NewSHA1(ns, []byte("fanout/"+agent)).String()
}

// childResult is how one child ended.
type childResult struct {
	agent, id string
	ok        bool
	why       string
}

// Execute starts (or re-attaches to) the children and waits for them.
func (f FanOut) Execute(ctx context.Context, req *Request, out *Emitter) error {
	if err := f.Validate(); err != nil {
		return err
	}
	timeout := f.ChildTimeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	if err := out.Annotate(ctx, map[string]any{"a2abus.fanout.agents": strings.Join(f.Agents, ",")}); err != nil {
		return err
	}
	var (
		mu      sync.Mutex // the Emitter is not safe for concurrent use
		results = make([]childResult, len(f.Agents))
		wg      sync.WaitGroup
	)
	for i, agent := range f.Agents {
		wg.Go(func() {
			results[i] = f.child(ctx, req, agent, timeout, func(a schemas.Artifact) error {
				mu.Lock()
				defer mu.Unlock()
				return out.Artifact(ctx, a)
			})
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	okCount := 0
	var failed []string
	for _, r := range results {
		if r.ok {
			okCount++
		} else {
			failed = append(failed, r.agent+": "+r.why)
		}
	}
	sort.Strings(failed)
	summary := fmt.Sprintf("%d of %d agents answered", okCount, len(f.Agents))
	if len(failed) > 0 {
		summary += "; " + strings.Join(failed, "; ")
	}
	if okCount == len(f.Agents) || (f.Mode == FanOutPartial && okCount > 0) {
		return out.Complete(ctx, summary)
	}
	return out.Fail(ctx, summary)
}

// child runs one child to its end and hands its answer to add.
func (f FanOut) child(ctx context.Context, req *Request, agent string, timeout time.Duration, add func(schemas.Artifact) error) childResult {
	id := childID(req.Task.ID, agent)
	o := childOwner(req, agent)
	res := childResult{agent: agent, id: id}
	if err := f.start(ctx, req, o, id); err != nil {
		res.why = "could not be started: " + err.Error()
		return res
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rec, err := req.Delegation().Await(cctx, o, id) // follow the child until it settles
	switch {
	case ctx.Err() != nil:
		// The parent was canceled (or the worker is stopping: then the
		// children run on and the next attempt re-attaches to them).
		if errors.Is(context.Cause(ctx), errCanceled) {
			f.cancelChild(ctx, req, o, id)
		}
		res.why = "parent stopped"
		return res
	case err != nil && errors.Is(err, context.DeadlineExceeded):
		if rec = f.cancelChild(ctx, req, o, id); rec == nil {
			res.why = fmt.Sprintf("timed out after %s (canceled)", timeout)
			return res
		}
		// It settled just as the time ran out: take its answer.
	case err != nil:
		res.why = err.Error()
		return res
	}
	meta := map[string]any{MetaFanOutAgent: agent, MetaFanOutTaskID: id}
	if rec.Reply != nil {
		a := schemas.Artifact{ArtifactID: agent + ":reply", Name: agent, Parts: rec.Reply.Parts, Metadata: meta}
		if err := add(a); err != nil {
			res.why = err.Error()
			return res
		}
	}
	for _, art := range rec.Task.Artifacts {
		a := art
		a.ArtifactID = agent + ":" + art.ArtifactID
		if a.Name == "" {
			a.Name = agent
		}
		a.Metadata = meta
		if err := add(a); err != nil {
			res.why = err.Error()
			return res
		}
	}
	st := rec.Task.Status
	if st.State == schemas.TaskStateCompleted && rec.Reply == nil && len(rec.Task.Artifacts) == 0 && st.Message != nil && len(st.Message.Parts) > 0 {
		// Agents of the older tasks/send dialect (OpenFang, AgentOS) answer
		// in the completing status message: that is the child's answer.
		a := schemas.Artifact{ArtifactID: agent + ":answer", Name: agent, Parts: st.Message.Parts, Metadata: meta}
		if err := add(a); err != nil {
			res.why = err.Error()
			return res
		}
	}
	switch st.State {
	case schemas.TaskStateCompleted:
		res.ok = true
	case schemas.TaskStateInputRequired, schemas.TaskStateAuthRequired:
		f.cancelChild(ctx, req, o, id)
		res.why = "asked for input, which a fan-out cannot give (canceled)"
	default:
		res.why = strings.ToLower(strings.TrimPrefix(string(st.State), "TASK_STATE_"))
		if st.Message != nil && st.Message.Text() != "" {
			res.why += ": " + st.Message.Text()
		}
	}
	return res
}

// start creates the child task, or re-attaches to the one an earlier
// attempt of the parent created (see Delegation.StartChild).
func (f FanOut) start(ctx context.Context, req *Request, o bus.Owner, id string) error {
	msg := req.Message
	msg.MessageID = schemas.NewID()
	msg.ContextID = req.Task.ContextID
	msg.Metadata = map[string]any{MetaFanOutParent: req.Task.ID}
	return req.Delegation().StartChild(ctx, bus.Submission{Agent: o.Agent, Owner: req.Owner, Tenant: req.Tenant, Origin: req.Origin, Trust: req.Trust, Message: &msg, TaskID: id,
		Metadata: map[string]any{MetaFanOutParent: req.Task.ID}})
}

// childOwner is whom the parent's children belong to: the parent's owner,
// at the child's agent.
func childOwner(req *Request, agent string) bus.Owner {
	return bus.Owner{Agent: agent, Principal: req.Owner, Tenant: req.Tenant}
}

// cancelChild cancels a child the way a client would (bus.Cancel). If the
// child had already ended otherwise it returns the child's record, else
// nil.
func (f FanOut) cancelChild(ctx context.Context, req *Request, o bus.Owner, id string) *schemas.TaskRecord {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rec, err := req.Delegation().Cancel(cctx, o, id, AgentMessage("canceled by the fan-out that started it"))
	if err == nil {
		return nil
	}
	if rec == nil {
		// A child that answered with a message alone is no task to the
		// lifecycle; read how it ended.
		rec, _, _ = req.Delegation().GetTask(cctx, id)
	}
	if rec != nil && (rec.Reply != nil || (rec.Task.Status.State.Terminal() && rec.Task.Status.State != schemas.TaskStateCanceled)) {
		return rec
	}
	return nil
}
