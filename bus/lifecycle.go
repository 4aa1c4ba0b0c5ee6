package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2abus/a2abus/bus/tracing"
	"github.com/a2abus/a2abus/schemas"
)

// Submitting a task: the record is created (createTask), then its work is
// queued (queueWork). Each step rides out a cluster electing a new leader
// by retrying for up to submitRetryFor; a step that still fails is undone
// (withdrawTask) so a refused request leaves nothing behind. What no one
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

// queueWork queues the work item of a task for its agent in the intake, on
// the subject of the task and its caller (o.Caller), with the event id
// schemas.WorkEventID(task, item.TaskRevision) unless o.ID is set: a repeat
// of the same submission is de-duplicated by JetStream, whoever sends it.
// The dispatch lease holder moves it to the agent's workers in the
// caller's turn (dispatch.go); when that is this process and the item's
// turn is now, it goes to the work stream at once (dispatcher.direct). A
// publish with no clear answer is repeated (same id) for up to
// submitRetryFor within ctx; a full work stream is refused at once.
// Errors match schemas.ErrUnavailable when retrying later may help.
func (b *Bus) queueWork(ctx context.Context, item *schemas.WorkItem, o PublishOptions) error {
	return b.queueItem(ctx, item, item, o)
}

// queueItem is queueWork with the event's data given: the item, or an
// ownWorkItem of it when its record is encodeRecord's.
func (b *Bus) queueItem(ctx context.Context, item *schemas.WorkItem, data any, o PublishOptions) error {
	if !schemas.ValidAgentName(item.Agent) {
		return fmt.Errorf("bus: queue work: invalid agent name %q", item.Agent)
	}
	if !schemas.ValidTaskID(item.TaskID) {
		return fmt.Errorf("bus: queue work: invalid task id %q", item.TaskID)
	}
	if o.ID == "" {
		o.ID = schemas.WorkEventID(item.TaskID, item.TaskRevision)
	}
	if tracing.Enabled() {
		var span trace.Span
		ctx, span = startPublish(ctx, item, o)
		defer span.End()
		o.Traceparent = tracing.Traceparent(ctx)
	}
	ce, err := b.newEvent(o.ID, schemas.TypeWorkExecute, item.TaskID, data,
		attr{schemas.ExtTraceparent, o.Traceparent}, attr{schemas.ExtA2AVersion, o.A2AVersion})
	if err != nil {
		return err
	}
	caller := o.Caller
	if caller == "" {
		caller = schemas.CallerKey("", "", "")
	}
	if d := b.dispatch; d != nil && d.direct(ctx, item.Agent, caller, func() *nats.Msg {
		return encodeMsg(schemas.SubjectWorkTask(item.Agent, item.TaskID), &ce)
	}) {
		return nil
	}
	msg := encodeMsg(schemas.SubjectIntake(item.Agent, caller, item.TaskID), &ce)
	err = retryWithin(ctx, submitRetryFor, func(actx context.Context) (bool, error) {
		_, err := b.publish(actx, msg)
		return err == nil || refused(err), err
	})
	if err != nil {
		return errUnavailable("bus: queue work", err)
	}
	return nil
}

// requeueSubmission queues the work of rec's submission again, for a task
// found SUBMITTED without work (the orphan sweep, a fan-out parent making
// sure of a child it may have queued before a crash), under the
// submission's id. A copy of the work may exist already, so the item
// carries no snapshot: its worker reads the store and sees a task another
// copy took before it runs anything.
func (b *Bus) requeueSubmission(ctx context.Context, rec *schemas.TaskRecord, rev uint64, o PublishOptions) error {
	return b.queueSubmission(ctx, rec, rev, o, nil)
}

// queueSubmission queues rec's submission at rev, the item carrying snap
// (the record as stored; nil for none).
func (b *Bus) queueSubmission(ctx context.Context, rec *schemas.TaskRecord, rev uint64, o PublishOptions, snap []byte) error {
	h := rec.Task.History
	if len(h) == 0 {
		return fmt.Errorf("bus: queue work: task %s has no message to run", rec.Task.ID)
	}
	item := &schemas.WorkItem{TaskID: rec.Task.ID, ContextID: rec.Task.ContextID, Agent: rec.Agent, Message: h[len(h)-1], TaskRevision: rev, Record: snap}
	o.Caller = schemas.CallerKey(rec.Tenant, rec.Owner, rec.Origin)
	if o.Traceparent == "" {
		o.Traceparent = rec.Traceparent
	}
	return b.queueItem(ctx, item, ownWorkItem{item}, o)
}

// workSnapshot is the record a work item carries: stored, the bytes as
// stored (encoded from rec when nil), if they are small enough.
func workSnapshot(rec *schemas.TaskRecord, stored []byte) []byte {
	if stored == nil {
		var err error
		if stored, err = encodeRecord(rec); err != nil {
			return nil
		}
	}
	if len(stored) > workSnapshotMax {
		return nil
	}
	return stored
}

// workSnapshotMax bounds the task record a work item carries (see
// schemas.WorkItem.Record): a small record costs less to send twice than
// the worker's read of it; a large one is read back, as the message
// already doubles the item.
const workSnapshotMax = 16 << 10

// ErrTaskTaken is withdrawTask's answer when the task changed since the
// revision given: a worker took it, so it must not be withdrawn.
var ErrTaskTaken = errors.New("task changed since it was submitted")

// withdrawTask deletes a task created at revision rev whose work could not
// be queued, so the refused request leaves nothing behind. It returns
// ErrTaskTaken if the task is no longer at rev (its work was queued after
// all, and a worker took it).
func (b *Bus) withdrawTask(ctx context.Context, id string, rev uint64) error {
	err := b.tasks.Purge(ctx, id, jetstream.LastRevision(rev), jetstream.PurgeTTL(time.Second))
	if err == nil {
		return nil
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return ErrTaskTaken
	}
	return errUnavailable("bus: withdraw task", err)
}

// The task lifecycle: the one way any caller — the edge for every binding
// and dialect, the fan-out agent for its children — submits, continues,
// reads, follows and cancels a task. Each operation names its Owner and
// checks it before it hands anything back, so a caller sees only the tasks
// it owns and an error never tells whether an id exists elsewhere.

// Owner is whom a task operation acts for: the agent whose endpoint was
// called (a task belongs to the agent it was sent to), and the caller —
// the authenticated principal ("" when the edge serves anonymously) in a
// tenant. A task is its creator's: no other principal sees that it exists.
// Admin principals act for every principal of their tenant; nothing else
// bypasses the check, and nothing crosses tenants.
type Owner struct {
	Agent     string
	Principal string
	Tenant    string
	Admin     bool
}

// Owns reports whether rec is visible to o. A message-only exchange (a
// reply instead of a task) is internal and visible to no one.
func (o Owner) Owns(rec *schemas.TaskRecord) bool {
	return rec.Agent == o.Agent && rec.Reply == nil && o.caller(rec)
}

// Sees reports whether the task indexed as e is visible to o, by the rule
// Owns applies to its record; anyAgent widens it to o's tasks of every
// agent (a feed of a caller's tasks: TaskWatcher.Feed).
func (o Owner) Sees(e *schemas.TaskIndexEntry, anyAgent bool) bool {
	return (anyAgent || e.Agent == o.Agent) && !e.Reply && o.callerOf(e.Tenant, e.Owner)
}

// caller reports whether rec was created by o's principal in o's tenant
// (or o is an admin of that tenant).
func (o Owner) caller(rec *schemas.TaskRecord) bool { return o.callerOf(rec.Tenant, rec.Owner) }

// callerOf is the one ownership rule: a task of tenant created by owner
// is o's when o is that principal in that tenant, or an admin of it.
func (o Owner) callerOf(tenant, owner string) bool {
	return tenant == o.Tenant && (o.Admin || owner == o.Principal)
}

// Task reads a task owned by o, with its revision.
func (b *Bus) Task(ctx context.Context, o Owner, id string) (*schemas.TaskRecord, uint64, error) {
	if id == "" {
		return nil, 0, schemas.Errorf(schemas.ErrInvalidParams, "id is required")
	}
	rec, rev, err := b.GetTask(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	if !o.Owns(rec) {
		// A missing task costs a second read (the leader confirms it is
		// not there); so does a stranger's, so the two take the same time
		// and the answer's timing does not tell them apart either.
		_, _, _ = b.readTask(ctx, id, true)
		return nil, 0, schemas.TaskNotFound(id)
	}
	return rec, rev, nil
}

// Submission is a new task: its first message for an agent.
type Submission struct {
	Agent string
	// Owner, Tenant and Origin are recorded as the task's (see
	// schemas.TaskRecord.Owner and Origin).
	Owner, Tenant, Origin string
	// Trust is the trust level of the call that creates the task (see
	// schemas.TaskRecord.Trust).
	Trust   string
	Message *schemas.Message
	// TaskID is the id to create the task under; "" makes a new one. A
	// caller that must find its task again after a crash (the fan-out)
	// derives it; ErrTaskExists then tells it the task is there.
	TaskID string
	// Metadata is the task's metadata.
	Metadata map[string]any
	// Dialect and ClientTaskID are recorded for tasks created through the
	// older tasks/send dialect, so reads answer in its shapes.
	Dialect, ClientTaskID string
	// Publish carries the trace and protocol version to the work item.
	Publish PublishOptions
	// PushConfig, when set, is a push-notification config sent with the
	// message, stored for the new task before its work is queued (so its
	// first events are told), in the A2A version PushDialect.
	PushConfig  *schemas.TaskPushNotificationConfig
	PushDialect string
	// Deadline, when not zero, is when the task must be done by
	// (schemas.TaskRecord.Deadline): the edge's reading of the caller's,
	// or a child's parent's.
	Deadline time.Time
	// Approval, when set, holds the task for an approver (approval.go):
	// it is stored waiting in AUTH_REQUIRED and its work is queued only
	// once it is approved.
	Approval *schemas.Approval
}

// SubmittedRecord is the record a submission creates: SUBMITTED now, msg
// (whose TaskID and ContextID are the task's) its history, owned as s
// says. Submit stores it; workers.Recorder keeps it in memory.
func SubmittedRecord(s Submission, msg *schemas.Message) *schemas.TaskRecord {
	now := schemas.Now()
	return &schemas.TaskRecord{
		Task: schemas.Task{
			ID:        msg.TaskID,
			ContextID: msg.ContextID,
			Status:    schemas.TaskStatus{State: schemas.TaskStateSubmitted, Timestamp: now},
			History:   []schemas.Message{*msg},
			Metadata:  s.Metadata,
		},
		Agent:        s.Agent,
		Owner:        s.Owner,
		Tenant:       s.Tenant,
		Origin:       s.Origin,
		Trust:        s.Trust,
		CreatedAt:    *now,
		Dialect:      s.Dialect,
		ClientTaskID: s.ClientTaskID,
		Generation:   1,
		Deadline:     deadline(s.Deadline),
		Approval:     s.Approval,
	}
}

// deadline is a submission's deadline as a record keeps it (nil: none).
func deadline(t time.Time) *schemas.Timestamp {
	if t.IsZero() {
		return nil
	}
	return &schemas.Timestamp{Time: t.UTC().Truncate(time.Millisecond)}
}

// Follow is called once a submission or continuation is stored and before
// its work is queued, so a caller that follows the task's events cannot
// miss what a fast worker publishes.
type Follow func(rec *schemas.TaskRecord, rev uint64)

// Submit stores a new task SUBMITTED and queues its work. If the work
// cannot be queued the task is withdrawn, so a refused request leaves
// nothing behind; a task the withdraw could not remove is left to the
// orphan sweep. The two steps run to their end even if ctx is canceled
// mid-way (each bounds its own retries): a caller that goes away must not
// leave a task half submitted. The message gets the task's id and context
// (a new context when it names none, claimed for s.Owner like a named one:
// see claimContext).
func (b *Bus) Submit(ctx context.Context, s Submission, follow Follow) (*schemas.TaskRecord, uint64, error) {
	msg := s.Message
	id := s.TaskID
	if id == "" {
		id = schemas.NewID()
	}
	newContext := msg.ContextID == ""
	if newContext {
		msg.ContextID = schemas.NewID()
	} else if err := b.claimContext(ctx, msg.ContextID, s.Owner, s.Tenant); err != nil {
		return nil, 0, err
	}
	var push *schemas.PushConfigRecord
	if s.PushConfig != nil {
		var err error
		if push, err = newPushConfig(*s.PushConfig, id, s.PushDialect); err != nil {
			return nil, 0, err
		}
	}
	var claimed func(context.Context) error
	if newContext {
		claimed = b.claimNewContext(msg.ContextID, s.Owner, s.Tenant)
	}
	msg.TaskID = id
	rec := SubmittedRecord(s, msg)
	rec.Push = push != nil
	if tracing.Enabled() {
		rec.Traceparent = tracing.Traceparent(tracing.Parented(ctx, s.Publish.Traceparent))
	}
	sctx := context.WithoutCancel(ctx)
	rev, stored, err := b.createTask(sctx, rec)
	if err != nil {
		return nil, 0, err
	}
	var qerr error
	if claimed != nil {
		// Before the context id leaves this call (to the caller, a
		// follower or the agent), it must be its creator's.
		qerr = claimed(sctx)
	}
	if qerr == nil && push != nil {
		qerr = b.changePushConfigs(sctx, id, func(set *schemas.PushConfigSet) error {
			set.Configs = append(set.Configs[:0], *push)
			return nil
		})
	}
	if qerr == nil {
		if follow != nil {
			follow(rec, rev)
		}
		if s.Approval != nil {
			return b.holdForApproval(sctx, rec, rev)
		}
		if qerr = b.queue(sctx, rec, rev, stored, s.Publish); qerr == nil {
			return rec, rev, nil
		}
	}
	// Undo the create, unless a worker already took the task (the work
	// was queued after all, and only the answer was lost).
	wctx, cancel := context.WithTimeout(sctx, 5*time.Second)
	defer cancel()
	switch werr := b.withdrawTask(wctx, id, rev); {
	case werr == nil:
	case errors.Is(werr, ErrTaskTaken):
		return rec, rev, nil
	default:
		b.log.Warn("withdrawing a task whose work could not be queued failed; the orphan sweep will queue it", "task_id", id, "agent", s.Agent, "err", werr)
	}
	return nil, 0, qerr
}

// queue queues the work of rec's submission at rev, the item carrying the
// record when small (stored: the record as just stored, or nil); an error is a
// retryable ErrUnavailable unless the bus gave a protocol error.
func (b *Bus) queue(ctx context.Context, rec *schemas.TaskRecord, rev uint64, stored []byte, o PublishOptions) error {
	err := b.queueSubmission(ctx, rec, rev, o, workSnapshot(rec, stored))
	if err == nil {
		return nil
	}
	b.log.Warn("queueing work failed", "task_id", rec.Task.ID, "agent", rec.Agent, "err", err)
	var pe *schemas.Error
	if errors.As(err, &pe) {
		return err
	}
	return schemas.Errorf(schemas.ErrUnavailable, "the task could not be queued; retry shortly")
}

// Answer is a client's message to a task waiting for input.
type Answer struct {
	Message *schemas.Message
	// IfGeneration, when set, takes the message only while the task's
	// generation is this one (A2A 1.1's ifGenerationMatch): checked in
	// the compare-and-swap that stores it, on the leader's record, so of
	// two clients that read the same generation exactly one is taken and
	// the other is refused with schemas.ErrTaskGenerationMismatch.
	IfGeneration *schemas.Generation
	Publish      PublishOptions
}

// Continue adds a client message to a task of o's that is waiting for
// input (INPUT_REQUIRED or AUTH_REQUIRED) and queues it. The move back to
// SUBMITTED is one compare-and-swap, so of two concurrent answers only one
// is taken. Once the answer is stored the task is accepted: if its work
// cannot be queued now, the orphan sweep queues it.
func (b *Bus) Continue(ctx context.Context, o Owner, a Answer, follow Follow) (*schemas.TaskRecord, uint64, error) {
	msg := a.Message
	cur, curRev, err := b.answerable(ctx, o, msg.TaskID)
	if err != nil {
		return nil, 0, err
	}
	if msg.ContextID != "" && msg.ContextID != cur.Task.ContextID {
		return nil, 0, schemas.Errorf(schemas.ErrInvalidParams, "message.contextId %q does not match the context of task %s", msg.ContextID, msg.TaskID)
	}
	var pre func(*schemas.TaskRecord) error
	if want := a.IfGeneration; want != nil {
		pre = func(r *schemas.TaskRecord) error {
			if r.Generation != *want {
				return schemas.GenerationMismatch(msg.TaskID, *want, r.Generation)
			}
			return nil
		}
	}
	rec, rev, stored, err := b.applyEventsStored(ctx, msg.TaskID, cur, curRev, nil, pre, []TaskEvent{{Continue: msg}})
	switch {
	case errors.Is(err, schemas.ErrTaskTerminal):
		return nil, 0, schemas.Errorf(schemas.ErrUnsupportedOperation, "task %s is %s and accepts no more messages; start a new task in context %s and list this one in referenceTaskIds", msg.TaskID, rec.Task.Status.State, rec.Task.ContextID).With("taskId", msg.TaskID)
	case errors.Is(err, schemas.ErrAwaitingApproval):
		return nil, 0, schemas.Errorf(schemas.ErrUnsupportedOperation, "task %s is waiting for an approver's decision and takes no message until then", msg.TaskID).With("taskId", msg.TaskID)
	case errors.Is(err, schemas.ErrNotInterrupted):
		return nil, 0, schemas.Errorf(schemas.ErrUnsupportedOperation, "task %s is %s; send the next message when it asks for input", msg.TaskID, rec.Task.Status.State).With("taskId", msg.TaskID)
	case err != nil:
		return nil, 0, err
	}
	if follow != nil {
		follow(rec, rev)
	}
	// The work item carries the bytes the answer's write stored (when
	// small): encoding the record again cost a second encoding of a
	// record that grows with the conversation, up to the history bound.
	b.handWork(rec, rev, stored)
	_ = b.queue(context.WithoutCancel(ctx), rec, rev, stored, a.Publish)
	return rec, rev, nil
}

// Cancel moves a task of o's to CANCELED (one compare-and-swap, one event)
// and tells its agent's workers to stop it; work still queued is skipped
// when a worker takes it. A task already in a terminal state, CANCELED
// included, is not cancelable (ErrTaskNotCancelable, as the spec's error
// table says); the error comes with the task's record, so a caller can
// tell how it ended.
func (b *Bus) Cancel(ctx context.Context, o Owner, id string, why *schemas.Message) (*schemas.TaskRecord, error) {
	cur, curRev, err := b.Task(ctx, o, id)
	if err != nil {
		return nil, err
	}
	queued := cur.Task.Status.State == schemas.TaskStateSubmitted // cur is changed by the write
	rec, _, err := b.applyFrom(ctx, id, cur, curRev, TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateCanceled, Message: why}}})
	if errors.Is(err, schemas.ErrTaskTerminal) {
		return rec, schemas.Errorf(schemas.ErrTaskNotCancelable, "task %s is already %s and cannot be canceled", id, rec.Task.Status.State).With("taskId", id)
	}
	if err != nil {
		return nil, err
	}
	if queued {
		b.withdrawQueuedWork(ctx, rec.Agent, id)
	}
	if err := b.publishCancel(ctx, schemas.CancelNotice{TaskID: id, Agent: o.Agent}); err != nil {
		// The task is canceled in KV; its worker also notices it there.
		b.log.Warn("cancel notice not sent", "task_id", id, "err", err)
	}
	return rec, nil
}

// withdrawQueuedWork deletes the work queued for a task canceled while
// SUBMITTED, so no worker takes it: its agent never runs, though the work
// item carries a snapshot of the task that still shows it SUBMITTED
// (schemas.WorkItem.Record). The task is finished, so whatever work is
// stored for it is moot. Best effort: work a worker holds already, or a
// delete that fails, is settled by that worker's first write, which finds
// the task changed.
func (b *Bus) withdrawQueuedWork(ctx context.Context, agent, id string) {
	for _, w := range []struct{ stream, subject string }{
		{schemas.StreamIntake, schemas.SubjectIntakeTask(agent, id)},
		{schemas.StreamWork, schemas.SubjectWorkTask(agent, id)},
	} {
		m, err := b.leaderGet(ctx, w.stream, w.subject)
		if err != nil {
			continue // none queued
		}
		st, err := b.js.Stream(ctx, w.stream)
		if err == nil {
			err = st.DeleteMsg(ctx, m.Seq)
		}
		if err != nil {
			b.log.Debug("withdrawing the work of a canceled task", "task_id", id, "err", err)
		}
	}
}

// Await follows a task of o's until it settles (a terminal or interrupted
// state, or a message-only reply) and returns its record then. A reader
// that overflows is replaced from the last event it delivered.
func (b *Bus) Await(ctx context.Context, o Owner, id string) (*schemas.TaskRecord, error) {
	var after uint64
	for {
		rec, rev, err := b.GetTask(ctx, id)
		if err != nil {
			return nil, err
		}
		if rec.Agent != o.Agent || !o.caller(rec) { // a reply is the fan-out's answer: not Owns
			return nil, schemas.TaskNotFound(id)
		}
		if rec.Reply != nil || rec.Task.Status.State.Settled() {
			return rec, nil
		}
		if after == 0 {
			after = SnapshotCursor(rev)
		}
		r, err := b.ReadEvents(ctx, id, after, 64)
		if err != nil {
			return nil, err
		}
		settled := false
		for !settled {
			select {
			case <-ctx.Done():
				r.Close()
				return nil, ctx.Err()
			case us, ok := <-r.C():
				if !ok {
					settled = true // overflow: re-read the record and go on
					break
				}
				for _, u := range us {
					after = u.Cursor
					if settled = u.Reply != nil || (u.Status != nil && u.Status.Status.State.Settled()); settled {
						break
					}
				}
			}
		}
		r.Close()
	}
}

// claimContext makes a context id its first caller's: the first task that
// names it records its owner and tenant, and a task of another caller
// naming it is refused, so no caller attaches work to (or an agent's
// memory of) another's conversation. A context the server makes for a new
// task is claimed for that task's caller as the task is created
// (claimNewContext), so whoever learns its id later cannot take it over.
// An edge without authentication has one caller and claims nothing.
//
// A claim lives TaskTTL from its last write. This process remembers the
// claims it created or read (contextClaims), so a caller continuing its
// own context costs no bus call; past half its life a claim still in use
// is rewritten, which restarts its TTL, so an active conversation keeps
// its owner.
func (b *Bus) claimContext(ctx context.Context, contextID, owner, tenant string) error {
	if owner == "" && tenant == "" {
		return nil
	}
	key := schemas.ContextKey(contextID)
	want := schemas.ContextClaim{Owner: owner, Tenant: tenant}
	refuse := func() error {
		return schemas.Errorf(schemas.ErrInvalidParams, "contextId %q belongs to another caller; omit contextId to start a new context", contextID)
	}
	renewAfter := b.cfg.TaskTTL / 2
	if c, ok := b.claims.get(key); ok && time.Since(c.stored) < renewAfter {
		if c.ContextClaim != want {
			return refuse()
		}
		return nil
	}
	mine, err := json.Marshal(want)
	if err != nil {
		return err
	}
	if _, err := b.contexts.Create(ctx, key, mine); err == nil {
		b.claims.put(key, confirmedClaim{want, time.Now()})
		return nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return errUnavailable("bus: claim context", err)
	}
	// Taken: read the claim where it was decided (a replica may lag).
	m, err := b.leaderGet(ctx, kvStream(schemas.BucketContexts), kvPrefix(schemas.BucketContexts)+key)
	if errors.Is(err, errNoMessage) {
		// Expired between the two calls: claim it again, once.
		if _, err := b.contexts.Create(ctx, key, mine); err == nil {
			b.claims.put(key, confirmedClaim{want, time.Now()})
			return nil
		}
		return errUnavailable("bus: claim context", errors.New("the claim changed while it was read"))
	}
	if err != nil {
		return errUnavailable("bus: read context claim", err)
	}
	var c schemas.ContextClaim
	if json.Unmarshal(m.Data, &c) != nil {
		return refuse()
	}
	stored := m.Time
	if c == want && time.Since(stored) >= renewAfter {
		if _, err := b.contexts.Update(ctx, key, mine, m.Seq); err == nil {
			stored = time.Now()
		}
		// A failed renewal leaves the claim as it was: another process
		// renewed it, and the next use reads it again.
	}
	b.claims.put(key, confirmedClaim{c, stored})
	if c != want {
		return refuse()
	}
	return nil
}

// claimNewContext starts claiming a context id the server just made, for
// owner in tenant, and returns what waits for the claim to be stored (nil
// when nothing is claimed: an edge without authentication). The write is
// sent at once and its answer awaited only after the task is created, so
// the claim costs a create no extra round trip. The id is new, so the
// write is a create that meets no claim; one without a clear answer is
// settled by claimContext, which also tells a claim of ours whose answer
// was lost from another's.
func (b *Bus) claimNewContext(contextID, owner, tenant string) func(context.Context) error {
	if owner == "" && tenant == "" {
		return nil
	}
	key := schemas.ContextKey(contextID)
	want := schemas.ContextClaim{Owner: owner, Tenant: tenant}
	val, err := json.Marshal(want)
	if err != nil {
		return func(context.Context) error { return err }
	}
	m := nats.NewMsg(kvPrefix(schemas.BucketContexts) + key)
	m.Data = val
	ack, err := b.js.PublishMsgAsync(m, jetstream.WithExpectLastSequencePerSubject(0))
	return func(ctx context.Context) error {
		if err == nil {
			// The bus's async publish timeout ends the wait for an
			// answer that never comes.
			select {
			case <-ack.Ok():
				b.claims.put(key, confirmedClaim{want, time.Now()})
				return nil
			case <-ack.Err():
			case <-ctx.Done():
				return errUnavailable("bus: claim context", ctx.Err())
			}
		}
		return retryWithin(ctx, submitRetryFor, func(actx context.Context) (bool, error) {
			err := b.claimContext(actx, contextID, owner, tenant)
			return err == nil || !errors.Is(err, schemas.ErrUnavailable), err
		})
	}
}

// contextClaims remembers the context claims this process has confirmed.
// A claim never changes owner while it lives, so an entry younger than
// half the claim's TTL decides without asking the bus. It is bounded: past
// maxConfirmedClaims entries an arbitrary one is forgotten (and read again
// when next needed).
type contextClaims struct {
	mu sync.Mutex
	m  map[string]confirmedClaim
}

// confirmedClaim is a claim as this process last wrote or read it.
type confirmedClaim struct {
	schemas.ContextClaim
	stored time.Time // when its last write was stored: its TTL runs from here
}

const maxConfirmedClaims = 8192

func (cc *contextClaims) get(key string) (confirmedClaim, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	c, ok := cc.m[key]
	return c, ok
}

func (cc *contextClaims) put(key string, c confirmedClaim) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.m == nil {
		cc.m = make(map[string]confirmedClaim)
	}
	if _, ok := cc.m[key]; !ok && len(cc.m) >= maxConfirmedClaims {
		for k := range cc.m {
			delete(cc.m, k)
			break
		}
	}
	cc.m[key] = c
}

// StartChild creates a task that another task's agent starts (a fan-out's
// or a router's child) under the id s.TaskID, which the parent derives so
// that a redelivery of it finds its children again: created once, a
// child found SUBMITTED has its work queued again under the submission's
// id (de-duplicated by JetStream when the first publish landed), and one
// running or finished is left to run. A task at that id that is not the
// submission's owner's is not found. The re-attach is the lifecycle's,
// so no agent composes reads, creates and re-queues itself.
func (b *Bus) StartChild(ctx context.Context, s Submission) error {
	if s.TaskID == "" {
		return errors.New("bus: a child task needs the id its parent derives")
	}
	o := Owner{Agent: s.Agent, Principal: s.Owner, Tenant: s.Tenant}
	rec, rev, err := b.GetTask(ctx, s.TaskID)
	switch {
	case errors.Is(err, schemas.ErrTaskNotFound):
		_, _, err = b.Submit(ctx, s, nil)
		if !errors.Is(err, ErrTaskExists) {
			return err
		}
		// Another attempt of the same parent (a redelivery racing this
		// one) created it first: go on with that child.
		if rec, rev, err = b.GetTask(ctx, s.TaskID); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if !o.Owns(rec) {
		return schemas.TaskNotFound(s.TaskID)
	}
	if rec.Task.Status.State != schemas.TaskStateSubmitted {
		return nil // running or finished: nothing to queue
	}
	return b.requeueSubmission(ctx, rec, rev, s.Publish)
}
