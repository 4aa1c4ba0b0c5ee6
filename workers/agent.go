package workers

import (
	"context"
	"errors"
	"fmt"
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
// canceled or the worker is shutting down: return promptly.
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
}

// ErrTaskEnded is returned by Emitter methods when the task reached a
// terminal state elsewhere (canceled by the client) or the agent already
// ended it; the agent should stop.
var ErrTaskEnded = errors.New("task has ended")

// Emitter publishes an agent's events for one task. Each call is one
// compare-and-swap of the task record and one event on the bus, done before
// the call returns. It is not safe for concurrent use; an agent that
// produces from several goroutines serialises its calls.
type Emitter struct {
	b       *bus.Bus
	taskID  string
	rec     *schemas.TaskRecord
	rev     uint64
	settled bool // the agent ended or interrupted the task
	// since is set while the record came from the work item, not the
	// store: the first write must find the task unchanged since (see
	// bus.ApplyEventsSince). stale says it did not: the work was canceled
	// or taken by another delivery, and every call ends the agent.
	since *string
	stale bool
}

// emitRetryFor bounds how long an event waits out a bus that cannot take
// writes (a cluster electing a new leader) before the error reaches the
// agent.
const emitRetryFor = 30 * time.Second

func (e *Emitter) apply(ctx context.Context, ev bus.TaskEvent) error {
	return e.applyAll(ctx, ev)
}

// applyAll stores events in one write (see bus.ApplyEvents).
func (e *Emitter) applyAll(ctx context.Context, evs ...bus.TaskEvent) error {
	if e.stale {
		return fmt.Errorf("%w: %w", ErrTaskEnded, bus.ErrStale)
	}
	for i := range evs {
		evs[i].ID = schemas.NewID() // one id for every attempt of this event
	}
	rec, rev, err := e.b.ApplyEventsSince(ctx, e.taskID, e.rec, e.rev, e.since, evs)
	for delay, deadline := 100*time.Millisecond, time.Now().Add(emitRetryFor); errors.Is(err, schemas.ErrUnavailable) && time.Now().Before(deadline); delay = min(2*delay, 2*time.Second) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		// The write may have landed before the error: re-read; the event
		// ids keep it from being applied twice.
		rec, rev, err = e.b.ApplyEventsSince(ctx, e.taskID, nil, 0, e.since, evs)
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
	return nil
}

// working is the WORKING transition to store with an agent's first
// artifact, or none if the task is WORKING already: an artifact never
// arrives on a task a client still sees as queued, and the move costs no
// write of its own.
func (e *Emitter) working() []bus.TaskEvent {
	if e.rec != nil && e.rec.Task.Status.State == schemas.TaskStateWorking {
		return nil
	}
	return []bus.TaskEvent{{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}}}
}

// AgentMessage returns a new agent-role message with the given text.
func AgentMessage(text string) *schemas.Message {
	return &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleAgent, Parts: []schemas.Part{schemas.TextPart(text)}}
}

// Status moves the task to state with an optional agent message. Moving to a
// terminal or interrupted state ends this run of the agent.
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
	err := e.apply(ctx, bus.TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: state, Message: msg}}})
	if err == nil && state.Settled() {
		e.settled = true
	}
	return err
}

// Annotate merges md into the task's metadata (keys the agent owns, such
// as the id of work it started elsewhere) and moves the task to WORKING if
// it is not there yet. It is one status update, seen by subscribers.
func (e *Emitter) Annotate(ctx context.Context, md map[string]any) error {
	return e.apply(ctx, bus.TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateWorking}, Metadata: md}})
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
// artifact complete. An empty ArtifactID gets a new one.
func (e *Emitter) ArtifactChunk(ctx context.Context, a schemas.Artifact, appendParts, lastChunk bool) error {
	if a.ArtifactID == "" {
		a.ArtifactID = schemas.NewID()
	}
	if err := a.Validate(); err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	evs := append(e.working(), bus.TaskEvent{Artifact: &schemas.TaskArtifactUpdateEvent{Artifact: a, Append: appendParts, LastChunk: lastChunk}})
	return e.applyAll(ctx, evs...)
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
	evs := append(e.working(),
		bus.TaskEvent{Artifact: &schemas.TaskArtifactUpdateEvent{Artifact: a, Append: appendParts, LastChunk: true}},
		bus.TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateCompleted, Message: msg}}})
	err := e.applyAll(ctx, evs...)
	if err == nil {
		e.settled = true
	}
	return err
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
	err := e.apply(ctx, bus.TaskEvent{Reply: &msg})
	if err == nil {
		e.settled = true
	}
	return err
}
