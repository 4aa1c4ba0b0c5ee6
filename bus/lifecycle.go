package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// Submitting a task: the record is created (CreateTask), then its work is
// queued (QueueWork). Each step rides out a cluster electing a new leader
// by retrying for up to submitRetryFor; a step that still fails is undone
// (WithdrawTask) so a refused request leaves nothing behind. What no one
// is left to undo (the process died between the steps, or the withdraw
// failed too) is a task SUBMITTED with no work queued: RequeueOrphans
// finds it and queues its work.

// submitRetryFor bounds how long a create or a queueing of work keeps
// retrying while the bus cannot take it (a stream leader being elected
// after a node loss takes a few seconds).
const submitRetryFor = 15 * time.Second

// refused reports whether a bus error is a definitive no (a stream or
// bucket at its bound, a value too large): nothing was stored and
// retrying at once would not help.
func refused(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) && (api.ErrorCode == jsErrStoreFailed || api.Code == 400) {
		return true
	}
	return errors.Is(err, jetstream.ErrMaxBytesExceeded)
}

// QueueWork queues the work item of a task for its agent on the task's own
// subject, with the event id schemas.WorkEventID(task, item.TaskRevision)
// unless o.ID is set: a repeat of the same submission is de-duplicated by
// JetStream, whoever sends it. A publish with no clear answer is repeated
// (same id) for up to submitRetryFor within ctx; a full work stream is
// refused at once. Errors match schemas.ErrUnavailable when retrying later
// may help.
func (b *Bus) QueueWork(ctx context.Context, item *schemas.WorkItem, o PublishOptions) error {
	if !schemas.ValidAgentName(item.Agent) {
		return fmt.Errorf("bus: queue work: invalid agent name %q", item.Agent)
	}
	if !schemas.ValidTaskID(item.TaskID) {
		return fmt.Errorf("bus: queue work: invalid task id %q", item.TaskID)
	}
	if o.ID == "" {
		o.ID = schemas.WorkEventID(item.TaskID, item.TaskRevision)
	}
	ce, err := b.newEvent(o.ID, schemas.TypeWorkExecute, item.TaskID, item, map[string]string{
		schemas.ExtTraceparent: o.Traceparent,
		schemas.ExtA2AVersion:  o.A2AVersion,
	})
	if err != nil {
		return err
	}
	msg := encodeMsg(schemas.SubjectWorkTask(item.Agent, item.TaskID), &ce)
	err = retryWithin(ctx, submitRetryFor, func(actx context.Context) (bool, error) {
		_, err := b.js.PublishMsg(actx, msg)
		return err == nil || refused(err), err
	})
	if err != nil {
		return errUnavailable("bus: queue work", err)
	}
	return nil
}

// QueueSubmission queues the work of the submission that left rec
// SUBMITTED at revision rev: its last message (the one that created or
// continued it) for its agent. The edge, a fan-out parent and the orphan
// sweep all queue a task's work this way, under the submission's id.
func (b *Bus) QueueSubmission(ctx context.Context, rec *schemas.TaskRecord, rev uint64, o PublishOptions) error {
	h := rec.Task.History
	if len(h) == 0 {
		return fmt.Errorf("bus: queue work: task %s has no message to run", rec.Task.ID)
	}
	item := &schemas.WorkItem{TaskID: rec.Task.ID, ContextID: rec.Task.ContextID, Agent: rec.Agent, Message: h[len(h)-1], TaskRevision: rev}
	return b.QueueWork(ctx, item, o)
}

// ErrTaskTaken is WithdrawTask's answer when the task changed since the
// revision given: a worker took it, so it must not be withdrawn.
var ErrTaskTaken = errors.New("task changed since it was submitted")

// WithdrawTask deletes a task created at revision rev whose work could not
// be queued, so the refused request leaves nothing behind. It returns
// ErrTaskTaken if the task is no longer at rev (its work was queued after
// all, and a worker took it).
func (b *Bus) WithdrawTask(ctx context.Context, id string, rev uint64) error {
	err := b.tasks.Purge(ctx, id, jetstream.LastRevision(rev), jetstream.PurgeTTL(time.Second))
	if err == nil {
		return nil
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return ErrTaskTaken
	}
	return errUnavailable("bus: withdraw task", err)
}
