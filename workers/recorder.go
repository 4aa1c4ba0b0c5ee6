package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// Recorder runs agents on tasks it keeps in memory, as a Runner runs them
// on the bus: for an agent's unit tests, which then need no NATS server.
// It is a TaskWriter: each write is folded into the stored record by the
// store's own rules (bus.FoldWrite), so what the real store refuses (a
// status after the task finished, an artifact on a finished task) is
// refused here too and the agent sees the same ErrTaskEnded. A turn is
// run and settled as a Runner does (see runTurn and settleTurn): a panic
// or an error fails the task with its text, returning without an end
// completes it.
//
// What needs the bus is left out: record size bounds, the push
// notifications a2abus sends to webhooks, redelivery on its own, other
// processes. A Request's RelatedTasks reads the tasks kept here, and its
// Delegation starts children on the agents added with Add (each run in
// its own goroutine as a worker of it would) and hands the agent what
// Notify is given for its task.
//
// A Recorder is safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	tasks   map[string]*recordedTask
	changed chan struct{} // closed and replaced at every write
	agents  map[string]schemas.AgentRegistration
	run     map[string]Agent
	remote  map[string]func([]byte) error // the listeners of ListenRemote, by task
	log     *slog.Logger
}

// recordedTask is one task as stored, with its revision (one per write),
// the events of every write in order, and the cancel of its running turn.
type recordedTask struct {
	val    []byte // the record, encoded: every reader decodes its own copy
	rev    uint64
	events []bus.TaskEvent
	cancel context.CancelCauseFunc
	// attempts counts the turns run for the task's current message.
	attempts uint64
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{tasks: map[string]*recordedTask{}, changed: make(chan struct{}),
		agents: map[string]schemas.AgentRegistration{}, run: map[string]Agent{}, remote: map[string]func([]byte) error{},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// Add makes an agent reachable by the agents run here that delegate
// (Delegation's children and registry), as a worker of def registered on
// the bus would be.
func (r *Recorder) Add(def Definition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.agents[def.Name] = schemas.AgentRegistration{Agent: def.Name, Card: def.Card, Instance: "recorder", UpdatedAt: *schemas.Now()}
	r.run[def.Name] = def.Agent
}

// Start stores a new task of agent name for msg (SUBMITTED, msg its
// history; a new context unless msg names one) and runs agent's turn on
// it, as a Runner would on its first delivery. It returns the task as the
// turn left it.
func (r *Recorder) Start(ctx context.Context, name string, agent Agent, msg schemas.Message) (*schemas.TaskRecord, error) {
	m, err := r.create(bus.Submission{Agent: name, Message: &msg})
	if err != nil {
		return nil, err
	}
	return r.turn(ctx, m.TaskID, m, agent)
}

// create stores the task of a submission as bus.Submit does (a new
// context unless its message names one), and returns its message.
func (r *Recorder) create(s bus.Submission) (schemas.Message, error) {
	msg := *s.Message
	id := s.TaskID
	if id == "" {
		id = schemas.NewID()
	}
	if msg.MessageID == "" {
		msg.MessageID = schemas.NewID()
	}
	if msg.ContextID == "" {
		msg.ContextID = schemas.NewID()
	}
	msg.TaskID = id
	val, err := json.Marshal(bus.SubmittedRecord(s, &msg))
	if err != nil {
		return msg, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tasks[id]; ok {
		return msg, bus.ErrTaskExists
	}
	r.tasks[id] = &recordedTask{val: val, rev: 1}
	r.notifyLocked()
	return msg, nil
}

// Continue answers a task waiting for input (INPUT_REQUIRED or
// AUTH_REQUIRED) with msg, as a client does, and runs agent's next turn
// on it. It returns the task as the turn left it.
func (r *Recorder) Continue(ctx context.Context, taskID string, agent Agent, msg schemas.Message) (*schemas.TaskRecord, error) {
	if msg.MessageID == "" {
		msg.MessageID = schemas.NewID()
	}
	if _, _, err := r.ApplyEventsSince(ctx, taskID, nil, 0, nil, []bus.TaskEvent{{Continue: &msg}}); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.tasks[taskID].attempts = 0
	r.mu.Unlock()
	rec, _, _ := r.read(taskID)
	return r.turn(ctx, taskID, rec.Task.History[len(rec.Task.History)-1], agent)
}

// turn runs agent on the stored task for msg and settles it.
func (r *Recorder) turn(ctx context.Context, id string, msg schemas.Message, agent Agent) (*schemas.TaskRecord, error) {
	rec, rev, err := r.read(id)
	if err != nil || rec.Task.Status.State.Terminal() {
		return rec, err // canceled before its turn: a Runner would not run it
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.mu.Lock()
	t := r.tasks[id]
	t.cancel = cancel
	t.attempts++
	attempt := t.attempts
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		t.cancel = nil
		r.mu.Unlock()
	}()
	em := &Emitter{w: r, taskID: id, ctx: ctx, rec: rec, rev: rev}
	req := &Request{Task: rec.Task, Message: msg, Attempt: attempt, Owner: rec.Owner, Tenant: rec.Tenant, Origin: rec.Origin, Trust: rec.Trust,
		delegation: recorderDelegation{r},
		related:    func(ctx context.Context) []schemas.Task { return relatedTasks(ctx, r.owned, r.log, rec, &msg) }}
	runErr := runTurn(ctx, agent, req, em, r.log)
	if cause := context.Cause(ctx); cause == errCanceled || cause == errShutdown {
		// Canceled: nothing more to record. Stopped: the work goes back
		// unsettled, for Redeliver.
		rec, _, err := r.read(id)
		return rec, err
	}
	if err := settleTurn(context.WithoutCancel(ctx), em, runErr); err != nil && !errors.Is(err, ErrTaskEnded) {
		return nil, err
	}
	rec, _, err = r.read(id)
	return rec, err
}

// Stop stops the turn running on a task as a worker that shuts down (or
// dies) does: its ctx ends, and the task is left as the turn left it,
// unsettled, for Redeliver. Children the turn started run on.
func (r *Recorder) Stop(taskID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.tasks[taskID]; ok && t.cancel != nil {
		t.cancel(errShutdown)
	}
}

// Redeliver runs agent's turn again on a task a stopped turn left
// unfinished, as a Runner does when the work comes back (Request.Attempt
// counts the turns). A finished task is returned as it is: its work is
// done.
func (r *Recorder) Redeliver(ctx context.Context, taskID string, agent Agent) (*schemas.TaskRecord, error) {
	rec, _, err := r.read(taskID)
	if err != nil || rec.Task.Status.State.Terminal() {
		return rec, err
	}
	h := rec.Task.History
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Role == schemas.RoleUser {
			return r.turn(ctx, taskID, h[i], agent)
		}
	}
	return nil, fmt.Errorf("workers: task %s has no message to run", taskID)
}

// TaskIDs are the ids of agent's tasks, in the order they were created.
func (r *Recorder) TaskIDs(agent string) []string {
	r.mu.Lock()
	type created struct {
		id string
		at time.Time
	}
	var all []created
	for id, t := range r.tasks {
		if rec, err := bus.DecodeRecord(t.val); err == nil && rec.Agent == agent {
			all = append(all, created{id, rec.CreatedAt.Time})
		}
	}
	r.mu.Unlock()
	slices.SortStableFunc(all, func(a, b created) int { return a.at.Compare(b.at) })
	ids := make([]string, len(all))
	for i, c := range all {
		ids[i] = c.id
	}
	return ids
}

// Cancel cancels a task as a client does: it is stored CANCELED and the
// turn running on it, if any, sees its ctx end.
func (r *Recorder) Cancel(ctx context.Context, taskID string) (*schemas.TaskRecord, error) {
	return r.cancel(ctx, taskID, nil)
}

// cancel is Cancel with the status message why.
func (r *Recorder) cancel(ctx context.Context, taskID string, why *schemas.Message) (*schemas.TaskRecord, error) {
	rec, _, err := r.ApplyEventsSince(ctx, taskID, nil, 0, nil, []bus.TaskEvent{{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateCanceled, Message: why}}}})
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if c := r.tasks[taskID].cancel; c != nil {
		c(errCanceled)
	}
	r.mu.Unlock()
	return rec, nil
}

// Task returns the task as stored, and whether there is one.
func (r *Recorder) Task(taskID string) (*schemas.TaskRecord, bool) {
	rec, _, err := r.read(taskID)
	return rec, err == nil
}

// Events returns the events stored for the task, in the order they were
// stored.
func (r *Recorder) Events(taskID string) []bus.TaskEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tasks[taskID]
	if !ok {
		return nil
	}
	out := make([]bus.TaskEvent, len(t.events))
	copy(out, t.events)
	return out
}

// ApplyEventsSince stores evs as one write (TaskWriter): refused with
// bus.ErrStale when since is set and the task changed after it, found
// applied (and not applied again) when its last event is the stored
// record's. cached is not used: the stored record is.
func (r *Recorder) ApplyEventsSince(_ context.Context, taskID string, _ *schemas.TaskRecord, _ uint64, since *string, evs []bus.TaskEvent) (*schemas.TaskRecord, uint64, error) {
	if len(evs) == 0 || len(evs) > bus.MaxEventsPerWrite {
		return nil, 0, fmt.Errorf("workers: apply %d events at once (1 to %d)", len(evs), bus.MaxEventsPerWrite)
	}
	own := make([]bus.TaskEvent, len(evs))
	for i, ev := range evs {
		if ev.ID == "" {
			ev.ID = schemas.NewID()
		}
		c, err := copyEvent(ev)
		if err != nil {
			return nil, 0, err
		}
		own[i] = c
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tasks[taskID]
	if !ok {
		return nil, 0, schemas.TaskNotFound(taskID)
	}
	rec, err := bus.DecodeRecord(t.val)
	if err != nil {
		return nil, 0, err
	}
	switch err := bus.FoldWrite(rec, since, own); {
	case errors.Is(err, bus.ErrApplied):
		return rec, t.rev, nil
	case err != nil:
		return nil, 0, err
	}
	val, err := json.Marshal(rec)
	if err != nil {
		return nil, 0, err
	}
	t.val, t.rev = val, t.rev+1
	t.events = append(t.events, own...)
	r.notifyLocked()
	out, err := bus.DecodeRecord(val)
	return out, t.rev, err
}

// read decodes the stored record of a task.
func (r *Recorder) read(id string) (*schemas.TaskRecord, uint64, error) {
	r.mu.Lock()
	t, ok := r.tasks[id]
	var val []byte
	var rev uint64
	if ok {
		val, rev = t.val, t.rev
	}
	r.mu.Unlock()
	if !ok {
		return nil, 0, schemas.TaskNotFound(id)
	}
	rec, err := bus.DecodeRecord(val)
	return rec, rev, err
}

// notifyLocked wakes every waiter of a change; r.mu is held.
func (r *Recorder) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// owned reads a task as its owner o may (bus.Bus.Task): another's is
// not found.
func (r *Recorder) owned(_ context.Context, o bus.Owner, id string) (*schemas.TaskRecord, uint64, error) {
	rec, rev, err := r.read(id)
	if err == nil && !o.Owns(rec) {
		return nil, 0, schemas.TaskNotFound(id)
	}
	return rec, rev, err
}

// copyEvent is ev with its own copy of what it points to, so neither the
// agent's buffers nor the fold share memory with what is kept; an event
// that does not encode is refused, as the store refuses it.
func copyEvent(ev bus.TaskEvent) (bus.TaskEvent, error) {
	var err error
	clone := func(v any, out any) {
		if err == nil {
			var b []byte
			if b, err = json.Marshal(v); err == nil {
				err = json.Unmarshal(b, out)
			}
		}
	}
	if s := ev.Status; s != nil {
		ev.Status = new(schemas.TaskStatusUpdateEvent)
		clone(s, ev.Status)
	}
	if a := ev.Artifact; a != nil {
		ev.Artifact = new(schemas.TaskArtifactUpdateEvent)
		clone(a, ev.Artifact)
	}
	if m := ev.Reply; m != nil {
		ev.Reply = new(schemas.Message)
		clone(m, ev.Reply)
	}
	if m := ev.Continue; m != nil {
		ev.Continue = new(schemas.Message)
		clone(m, ev.Continue)
	}
	if err != nil {
		return ev, fmt.Errorf("workers: encode event: %w", err)
	}
	return ev, nil
}

// recorderDelegation is the Delegation of the agents a Recorder runs:
// children run on the agents added with Add, in goroutines of their own.
type recorderDelegation struct{ r *Recorder }

func (d recorderDelegation) StartChild(ctx context.Context, s bus.Submission) error {
	r := d.r
	r.mu.Lock()
	agent, ok := r.run[s.Agent]
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("workers: no agent %q was added to this Recorder", s.Agent)
	}
	if s.TaskID == "" {
		return errors.New("workers: a child task needs the id its parent derives")
	}
	msg, err := r.create(s)
	if errors.Is(err, bus.ErrTaskExists) {
		// Started by an earlier attempt of the parent: it runs or ran.
		_, _, err = r.owned(ctx, bus.Owner{Agent: s.Agent, Principal: s.Owner, Tenant: s.Tenant}, s.TaskID)
		return err
	}
	if err != nil {
		return err
	}
	go func() {
		if _, err := r.turn(context.WithoutCancel(ctx), s.TaskID, msg, agent); err != nil {
			r.log.Debug("a child's turn failed", "task_id", s.TaskID, "err", err)
		}
	}()
	return nil
}

func (d recorderDelegation) Await(ctx context.Context, o bus.Owner, id string) (*schemas.TaskRecord, error) {
	r := d.r
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		rec, _, err := r.owned(ctx, o, id)
		if err != nil {
			return nil, err
		}
		if rec.Reply != nil || rec.Task.Status.State.Settled() {
			return rec, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return rec, ctx.Err()
		}
	}
}

func (d recorderDelegation) Cancel(ctx context.Context, o bus.Owner, id string, why *schemas.Message) (*schemas.TaskRecord, error) {
	rec, _, err := d.r.owned(ctx, o, id)
	if err != nil {
		return nil, err
	}
	out, err := d.r.cancel(ctx, id, why)
	if err != nil {
		return rec, err
	}
	return out, nil
}

func (d recorderDelegation) GetTask(_ context.Context, id string) (*schemas.TaskRecord, uint64, error) {
	return d.r.read(id)
}

// AgentBacklog counts the agent's tasks not yet taken (SUBMITTED).
func (d recorderDelegation) AgentBacklog(_ context.Context, agent string) (uint64, error) {
	r := d.r
	r.mu.Lock()
	defer r.mu.Unlock()
	var n uint64
	for _, t := range r.tasks {
		rec, err := bus.DecodeRecord(t.val)
		if err == nil && rec.Agent == agent && rec.Task.Status.State == schemas.TaskStateSubmitted {
			n++
		}
	}
	return n, nil
}

func (d recorderDelegation) Agents(context.Context) ([]schemas.AgentRegistration, error) {
	r := d.r
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]schemas.AgentRegistration, 0, len(r.agents))
	for _, reg := range r.agents {
		out = append(out, reg)
	}
	return out, nil
}

func (d recorderDelegation) ListenRemote(taskID string, fn func([]byte) error) (func(), error) {
	r := d.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.remote[taskID] = fn
	return func() {
		r.mu.Lock()
		delete(r.remote, taskID)
		r.mu.Unlock()
	}, nil
}

// Notify hands a notification body for a task to the agent listening for
// it (Delegation.ListenRemote), as the edge's webhook does, and returns
// the listener's answer; bus.ErrNoRemoteListener when none listens.
func (r *Recorder) Notify(taskID string, body []byte) error {
	r.mu.Lock()
	fn := r.remote[taskID]
	r.mu.Unlock()
	if fn == nil {
		return bus.ErrNoRemoteListener
	}
	return fn(body)
}
