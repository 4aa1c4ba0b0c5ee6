package workers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// Agent is what an agent author implements: take a task and its new message,
// produce events. The first event decides the shape of the answer: Reply
// answers with a message and no task; any other event makes it a task (the
// runtime moves it to WORKING before a first artifact; call Working to
// report progress before that). Execute returns nil when it is done: if it left the
// task neither terminal nor interrupted, the runtime completes it. A non-nil
// error fails the task with the error text as the status message (use
// Fail/Reject for a message of your own). When ctx ends the task was
// canceled, its deadline passed (context.Cause is ErrDeadlineExceeded) or
// the worker is shutting down: return promptly.
//
// A complete agent that greets the user, streams its answer in two chunks
// and finishes:
//
//	type greeter struct{}
//
//	func (greeter) Execute(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
//		name := req.Message.Text()
//		if name == "" {
//			// Ask and stop; the client answers on the same task.
//			return out.InputRequired(ctx, "What is your name?")
//		}
//		art := schemas.Artifact{ArtifactID: "greeting", Name: "greeting",
//			Parts: []schemas.Part{schemas.TextPart("Hello, ")}}
//		if err := out.ArtifactChunk(ctx, art, false, false); err != nil {
//			return err // the task ended meanwhile (canceled): stop
//		}
//		art.Parts = []schemas.Part{schemas.TextPart(name + "!")}
//		if err := out.ArtifactChunk(ctx, art, true, true); err != nil {
//			return err
//		}
//		return out.Complete(ctx, "greeted "+name)
//	}
//
//	// and in main, with b a connected *bus.Bus:
//	r := workers.NewRunner(b, workers.Definition{
//		Name:  "greeter",
//		Card:  schemas.AgentCard{Name: "greeter", Description: "Greets people", Version: "1.0.0"},
//		Agent: greeter{},
//	}, workers.Options{Concurrency: 8})
//	err := r.Run(ctx) // until ctx ends; then finishes or hands back its work
type Agent interface {
	Execute(ctx context.Context, req *Request, out *Emitter) error
}

// TaskMaker is an Agent that answers every message with a task, never
// with a message alone (Emitter.Reply, which its Emitter then refuses):
// its runner registers it so (AgentRegistration.MakesTasks), and edges
// open its streamed sends with the task at once instead of waiting for
// its first event to learn which answer the stream carries.
type TaskMaker interface {
	MakesTasks() bool
}

// makesTasks reports whether agent declares itself a TaskMaker.
func makesTasks(agent Agent) bool {
	m, ok := agent.(TaskMaker)
	return ok && m.MakesTasks()
}

// AgentFunc adapts a function to the Agent interface.
type AgentFunc func(ctx context.Context, req *Request, out *Emitter) error

// Execute calls f.
func (f AgentFunc) Execute(ctx context.Context, req *Request, out *Emitter) error {
	return f(ctx, req, out)
}

// Request is what an agent works on.
type Request struct {
	// Task is the task as stored when work started (SUBMITTED, or WORKING
	// when this is a redelivery), history ending with Message.
	Task schemas.Task
	// Message is the new client message to act on.
	Message schemas.Message
	// Attempt is the delivery attempt of this work item (1 at first; more
	// after a worker crashed or handed the work back).
	Attempt uint64
	// Owner and Tenant are whose task this is (schemas.TaskRecord.Owner),
	// and Origin where an anonymous owner sent it from: work an agent
	// starts on the bus for it (a fan-out's children) is theirs too.
	Owner, Tenant, Origin string
	// Trust is the trust level of the call that created the task (the
	// edge's trust policy: local, private, public, or the operator's own
	// names): an agent may restrict what it does for less trusted callers.
	Trust string
	// Deadline is when the task must be done by (zero: none); ctx ends
	// then. Children the agent starts through its Delegation get it (or
	// their own, when earlier); an agent that hands the work on elsewhere
	// forwards it (the remote kind, as metadata schemas.MetaDeadline).
	Deadline time.Time
	// delegation is what Delegation returns (set by the runner).
	delegation Delegation
	// related reads the tasks of RelatedTasks; nil: none (set by the
	// runner, read on first use only: most agents never ask).
	related     func(context.Context) []schemas.Task
	relatedRead bool
	relatedSeen []schemas.Task
}

// RelatedTasks are the earlier tasks the message refers to
// (referenceTaskIds, as A2A has a client continue a conversation in a new
// task), and those their messages refer to in turn, in the order they
// were created: at most MaxRelatedTasks, the nearest kept. Only the same
// owner's tasks of the same agent are read; others are left out, as are
// tasks that are gone. They are read on the first call, which is the
// agent's to make from one goroutine.
func (r *Request) RelatedTasks(ctx context.Context) []schemas.Task {
	if !r.relatedRead && r.related != nil {
		r.relatedSeen = r.related(ctx)
	}
	r.relatedRead = true
	return r.relatedSeen
}

// MaxRelatedTasks bounds Request.RelatedTasks.
const MaxRelatedTasks = 16

// ErrTaskEnded is returned by Emitter methods when the task reached a
// terminal state elsewhere (canceled by the client) or the agent already
// ended it; the agent should stop.
var ErrTaskEnded = errors.New("task has ended")

// TaskWriter stores an agent's events: the one call an Emitter makes, a
// write of one or more events to a task (see bus.ApplyEventsSince for what
// cached, cachedRev and since mean). A *bus.Bus is the real one: a
// compare-and-swap of the stored record and a publish of the events; a
// Recorder keeps tasks in memory, so an agent's unit test needs no NATS.
type TaskWriter interface {
	ApplyEventsSince(ctx context.Context, taskID string, cached *schemas.TaskRecord, cachedRev uint64, since *string, evs []bus.TaskEvent) (*schemas.TaskRecord, uint64, error)
}

// Emitter stores an agent's events for one task, in order. Each write is
// one compare-and-swap of the task record and one publish of the events it
// stored. It is not safe for concurrent use; an agent that produces from
// several goroutines serialises its calls.
//
// Streamed output does not wait for the bus: ArtifactChunk and a progress
// Status (WORKING) return once the event is queued, and the queue is
// written behind the agent, everything queued while the previous write was
// in flight going into the next one (a group commit: a lone event is
// written at once, a fast stream of chunks costs a write per round trip,
// not per chunk, and a record rewritten per write, not per chunk, keeps a
// large streamed artifact linear in its size). Every event stays its own
// event for subscribers, and the Emitter keeps its own copy of what it
// queues (an agent may reuse its buffers). A write that fails ends the
// queue: the events after it are dropped and every later call returns its
// error. The calls that end the agent's run (a terminal or interrupted
// Status, CompleteWith, Reply), Annotate and Flush return only when
// everything before them and their own events are stored.
type Emitter struct {
	w      TaskWriter
	taskID string
	// ctx is the agent's run: queued events are written under it, and it
	// ends when the task is canceled or the worker stops.
	ctx context.Context

	// The writer's state, used only by the one writer of the moment (the
	// caller of a write that waits, or the goroutine writing the queue;
	// busy says one is at work), and read by the runner once the agent is
	// done and Flush returned.
	rec *schemas.TaskRecord
	rev uint64
	// since is set while the record came from the work item, not the
	// store: the first write must find the task unchanged since (see
	// bus.ApplyEventsSince). stale says it did not: the work was canceled
	// or taken by another delivery, and every call ends the agent.
	since   *string
	stale   bool
	settled bool // the agent ended or interrupted the task
	// tasksOnly refuses Reply: the agent registered as a TaskMaker, and
	// edges announce its streams with the task before it says anything.
	tasksOnly bool

	mu          sync.Mutex
	ending      bool // the agent asked for its run's end (a settling status, a reply)
	queue       []queued
	queuedBytes int
	busy        chan struct{} // closed when the writer at work stops; nil when none is
	err         error         // the failed write that ended the queue
}

// queued is an event waiting for the writer, with its estimated size.
type queued struct {
	ev   bus.TaskEvent
	size int
}

// emitRetryFor bounds how long an event waits out a bus that cannot take
// writes (a cluster electing a new leader) before the error reaches the
// agent.
const emitRetryFor = 30 * time.Second

// How much one write takes from the queue, and how much may wait before
// the agent is held back until the writer catches up: a write's events
// go out as one message, which must stay under the server's largest
// (bus splits one that would not, so these are the usual case, not a
// bound the bus relies on).
const (
	maxWriteEvents = bus.MaxEventsPerWrite - 1 // room for the WORKING a first artifact adds
	maxWriteBytes  = 512 << 10
	maxQueuedBytes = 4 * maxWriteBytes
)

// eventOverhead is a stored event's size besides its content: its
// CloudEvent attributes and the ids of the task and context.
const eventOverhead = 640

// eventSize estimates the encoded size of an event, to bound a write.
func eventSize(ev bus.TaskEvent) int {
	n := eventOverhead
	parts := func(ps []schemas.Part) {
		for _, p := range ps {
			if p.Text != nil {
				n += len(*p.Text) + len(*p.Text)/8 // some escapes
			}
			if p.URL != nil {
				n += len(*p.URL)
			}
			n += len(p.Raw)*4/3 + len(p.Data) + len(p.Filename) + len(p.MediaType)
			if len(p.Metadata) > 0 {
				n += 256 * len(p.Metadata)
			}
		}
	}
	switch {
	case ev.Artifact != nil:
		parts(ev.Artifact.Artifact.Parts)
	case ev.Status != nil && ev.Status.Status.Message != nil:
		parts(ev.Status.Status.Message.Parts)
	case ev.Reply != nil:
		parts(ev.Reply.Parts)
	}
	return n
}

// emit queues evs and starts a writer if none is at work. With wait, it
// returns once they are stored (or refused); a caller that finds no
// writer at work writes them itself, under its own ctx, and an error of
// that write is its alone (it ends the queue only if the task ended).
func (e *Emitter) emit(ctx context.Context, wait bool, evs ...bus.TaskEvent) error {
	size := 0
	items := make([]queued, len(evs))
	for i, ev := range evs {
		items[i] = queued{ev, eventSize(ev)}
		size += items[i].size
	}
	e.mu.Lock()
	// A queue at its bound holds the agent back until the writer has
	// taken from it: an agent faster than the bus slows to its pace.
	if err := e.awaitWriter(ctx, func() bool {
		return e.err == nil && e.queuedBytes > 0 &&
			(e.queuedBytes+size > maxQueuedBytes || len(e.queue)+len(evs) > 4*maxWriteEvents)
	}); err != nil {
		e.mu.Unlock()
		return err
	}
	if e.err != nil {
		err := e.err
		e.mu.Unlock()
		return err
	}
	e.queue = append(e.queue, items...)
	e.queuedBytes += size
	for _, ev := range evs {
		if ev.Reply != nil || ev.Status != nil && ev.Status.Status.State.Settled() {
			e.ending = true
		}
	}
	if e.busy == nil {
		e.busy = make(chan struct{})
		e.mu.Unlock()
		if wait {
			return e.drain(ctx, false)
		}
		go func() { _ = e.drain(e.ctx, true) }()
		return nil
	}
	defer e.mu.Unlock()
	if !wait {
		return nil
	}
	if err := e.awaitWriter(ctx, nil); err != nil {
		return err
	}
	return e.err
}

// awaitWriter waits, with e.mu held (and held again when it returns),
// until no writer is at work or, when more is set, until more says to
// stop waiting; ctx's error if it ended first.
func (e *Emitter) awaitWriter(ctx context.Context, more func() bool) error {
	for e.busy != nil && (more == nil || more()) {
		busy := e.busy
		e.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			e.mu.Lock()
			return ctx.Err()
		}
		e.mu.Lock()
	}
	return nil
}

// drain writes the queue until it is empty, a write at a time, and stops
// being the writer at work. A queued write's failure ends the queue
// (sticky); a waiting caller's own write (sticky false) ends it only when
// the task ended.
func (e *Emitter) drain(ctx context.Context, sticky bool) error {
	var err error
	for {
		e.mu.Lock()
		if len(e.queue) == 0 || err != nil {
			e.queue, e.queuedBytes = e.queue[:0], 0
			close(e.busy)
			e.busy = nil
			e.mu.Unlock()
			return err
		}
		n, size := 0, 0
		for n < len(e.queue) && n < maxWriteEvents && (n == 0 || size+e.queue[n].size <= maxWriteBytes) {
			size += e.queue[n].size
			n++
		}
		batch := make([]bus.TaskEvent, n)
		for i := range batch {
			batch[i] = e.queue[i].ev
		}
		e.queue = append(e.queue[:0], e.queue[n:]...)
		e.queuedBytes -= size
		e.mu.Unlock()

		if err = e.write(ctx, batch); err != nil && (sticky || errors.Is(err, ErrTaskEnded)) {
			e.mu.Lock()
			e.err = err
			e.mu.Unlock()
		}
	}
}

// Flush returns once every event queued so far is stored, or the error
// that ended the queue.
func (e *Emitter) Flush(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.awaitWriter(ctx, nil); err != nil {
		return err
	}
	return e.err
}

// endAsked reports whether the agent asked for its run's end: a settling
// status or a reply, stored or not.
func (e *Emitter) endAsked() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ending
}

// reopen lets the runner record how the run ended after a queued write
// failed (a refused change fails the task), unless the task ended.
func (e *Emitter) reopen() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !errors.Is(e.err, ErrTaskEnded) {
		e.err = nil
	}
}

// write stores evs in one write (see bus.ApplyEventsSince), with the
// WORKING transition a first artifact needs before it: an artifact never
// arrives on a task a client still sees as queued, and the move costs no
// write of its own.
func (e *Emitter) write(ctx context.Context, evs []bus.TaskEvent) error {
	if e.stale {
		return fmt.Errorf("%w: %w", ErrTaskEnded, bus.ErrStale)
	}
	state := schemas.TaskState("")
	if e.rec != nil {
		state = e.rec.Task.Status.State
	}
	for i := 0; i < len(evs); i++ {
		switch {
		case evs[i].Status != nil:
			state = evs[i].Status.Status.State
		case evs[i].Artifact != nil && state != schemas.TaskStateWorking:
			evs = slices.Insert(evs, i, bus.TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}})
			state = schemas.TaskStateWorking
		}
	}
	for i := range evs {
		evs[i].ID = schemas.NewID() // one id for every attempt of this event
	}
	rec, rev, err := e.w.ApplyEventsSince(ctx, e.taskID, e.rec, e.rev, e.since, evs)
	for delay, deadline := 100*time.Millisecond, time.Now().Add(emitRetryFor); errors.Is(err, schemas.ErrUnavailable) && time.Now().Before(deadline); delay = min(2*delay, 2*time.Second) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		// The write may have landed before the error: re-read; the event
		// ids keep it from being applied twice.
		rec, rev, err = e.w.ApplyEventsSince(ctx, e.taskID, nil, 0, e.since, evs)
	}
	if errors.Is(err, bus.ErrStale) {
		e.stale, e.settled = true, true
		return fmt.Errorf("%w: %w", ErrTaskEnded, err)
	}
	if err != nil {
		e.rec = nil // re-read next time
		if errors.Is(err, schemas.ErrTaskTerminal) {
			e.settled = true
			return fmt.Errorf("%w: %w", ErrTaskEnded, err)
		}
		return err
	}
	e.rec, e.rev, e.since = rec, rev, nil
	if rec.Task.Status.State.Settled() || rec.Reply != nil {
		e.settled = true
	}
	return nil
}

// AgentMessage returns a new agent-role message with the given text.
func AgentMessage(text string) *schemas.Message {
	return &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleAgent, Parts: []schemas.Part{schemas.TextPart(text)}}
}

// Status moves the task to state with an optional agent message. Moving to a
// terminal or interrupted state ends this run of the agent and returns once
// stored; a progress update (WORKING) is queued (see Emitter).
func (e *Emitter) Status(ctx context.Context, state schemas.TaskState, msg *schemas.Message) error {
	if msg != nil {
		if msg.MessageID == "" {
			msg.MessageID = schemas.NewID()
		}
		if msg.Role == "" {
			msg.Role = schemas.RoleAgent
		}
		msg.TaskID = e.taskID
		if err := msg.Validate(); err != nil {
			return fmt.Errorf("workers: status message: %w", err)
		}
	}
	// Progress is queued like a chunk; a move that ends the run waits.
	if msg != nil && !state.Settled() {
		own := *msg
		own.Parts = ownParts(msg.Parts)
		msg = &own
	}
	return e.emit(ctx, state.Settled(), bus.TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: state, Message: msg}}})
}

// Annotate merges md into the task's metadata (keys the agent owns, such
// as the id of work it started elsewhere) and moves the task to WORKING if
// it is not there yet. It is one status update, seen by subscribers, and
// returns once stored: what the agent started is known before it goes on.
func (e *Emitter) Annotate(ctx context.Context, md map[string]any) error {
	return e.emit(ctx, true, annotation(md))
}

// annotateQueued is Annotate queued like progress: the write starts at
// once, in order with every other event, but the caller goes on while it
// is made (an error is that of an earlier write, or this one's at the
// next call). For an agent whose next events are already at hand (a
// relay), so they can go out in the same write.
func (e *Emitter) annotateQueued(ctx context.Context, md map[string]any) error {
	return e.emit(ctx, false, annotation(md))
}

func annotation(md map[string]any) bus.TaskEvent {
	return bus.TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateWorking}, Metadata: md}}
}

// Working reports progress: the task stays WORKING with a new message.
func (e *Emitter) Working(ctx context.Context, text string) error {
	return e.Status(ctx, schemas.TaskStateWorking, AgentMessage(text))
}

// Complete ends the task successfully with a message (empty text: none).
func (e *Emitter) Complete(ctx context.Context, text string) error {
	return e.Status(ctx, schemas.TaskStateCompleted, optMessage(text))
}

// Fail ends the task as FAILED with a message saying why.
func (e *Emitter) Fail(ctx context.Context, text string) error {
	return e.Status(ctx, schemas.TaskStateFailed, optMessage(text))
}

// Reject ends the task as REJECTED: the agent will not do it.
func (e *Emitter) Reject(ctx context.Context, text string) error {
	return e.Status(ctx, schemas.TaskStateRejected, optMessage(text))
}

// InputRequired interrupts the task with a question for the client.
func (e *Emitter) InputRequired(ctx context.Context, question string) error {
	return e.Status(ctx, schemas.TaskStateInputRequired, optMessage(question))
}

// AuthRequired interrupts the task until the client authenticates.
func (e *Emitter) AuthRequired(ctx context.Context, text string) error {
	return e.Status(ctx, schemas.TaskStateAuthRequired, optMessage(text))
}

func optMessage(text string) *schemas.Message {
	if text == "" {
		return nil
	}
	return AgentMessage(text)
}

// Artifact publishes a whole artifact (one chunk that is also the last).
func (e *Emitter) Artifact(ctx context.Context, a schemas.Artifact) error {
	return e.ArtifactChunk(ctx, a, false, true)
}

// ArtifactChunk publishes a chunk of an artifact. With appendParts the parts
// are added to the artifact with the same id sent before; lastChunk marks the
// artifact complete. An empty ArtifactID gets a new one. The chunk is
// queued (see Emitter): an error is that of an earlier write.
func (e *Emitter) ArtifactChunk(ctx context.Context, a schemas.Artifact, appendParts, lastChunk bool) error {
	if a.ArtifactID == "" {
		a.ArtifactID = schemas.NewID()
	}
	if err := a.Validate(); err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	a.Parts = ownParts(a.Parts)
	return e.emit(ctx, false, bus.TaskEvent{Artifact: &schemas.TaskArtifactUpdateEvent{Artifact: a, Append: appendParts, LastChunk: lastChunk}})
}

// ownParts copies parts and the bytes they hold: a queued chunk is written
// after the call returns, and an agent may reuse its buffers by then.
func ownParts(parts []schemas.Part) []schemas.Part {
	out := slices.Clone(parts)
	for i := range out {
		out[i].Raw = bytes.Clone(out[i].Raw)
		out[i].Data = bytes.Clone(out[i].Data)
	}
	return out
}

// CompleteWith publishes the last chunk of an artifact and completes the
// task with a message (empty text: none), in one write: the usual end of
// an agent that answers and is done. Subscribers see the same events as
// ArtifactChunk followed by Complete.
func (e *Emitter) CompleteWith(ctx context.Context, a schemas.Artifact, appendParts bool, text string) error {
	if a.ArtifactID == "" {
		a.ArtifactID = schemas.NewID()
	}
	if err := a.Validate(); err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	msg := optMessage(text)
	if msg != nil {
		msg.TaskID = e.taskID
	}
	return e.emit(ctx, true,
		bus.TaskEvent{Artifact: &schemas.TaskArtifactUpdateEvent{Artifact: a, Append: appendParts, LastChunk: true}},
		bus.TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateCompleted, Message: msg}}})
}

// Reply answers with a Message instead of a task: the client's SendMessage
// returns this message. It ends the exchange; call it at most once and as
// the only event.
func (e *Emitter) Reply(ctx context.Context, msg schemas.Message) error {
	if msg.MessageID == "" {
		msg.MessageID = schemas.NewID()
	}
	msg.Role = schemas.RoleAgent
	if err := msg.Validate(); err != nil {
		return fmt.Errorf("workers: reply: %w", err)
	}
	if e.tasksOnly {
		return errors.New("workers: reply: the agent is a TaskMaker (it answers with tasks only, and its streams begin with the task), so it cannot answer with a message alone")
	}
	return e.emit(ctx, true, bus.TaskEvent{Reply: &msg})
}
