package bus

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// The approval half of the task lifecycle (schemas/approval.go says what
// an approval is). A task that needs one is created as any other, with its
// Approval pending, and moved to AUTH_REQUIRED by a first event saying
// what waits for whom, so its caller's stream and push receivers are told
// as of every later step; its work is not queued. Everything after is one
// compare-and-swap on the record, decided on the stream leader's copy:
// the first decision — an approver's, or the sweep's at the expiry or
// the deadline — settles it, and every other finds it settled. The task
// index keeps the pending ones (TaskIndexEntry.Approval), rebuilt from the
// bucket by every process that starts, so approvals survive the restart
// of every process and are listed and expired by whichever edge runs.

// ErrApprovalSettled refuses a decision on an approval that another
// decision (or the expiry) settled first; its error says which.
var ErrApprovalSettled = errors.New("the approval was already decided")

// holdForApproval moves a task just created with its approval pending to
// AUTH_REQUIRED. If that write fails the task stays SUBMITTED with its
// approval pending — listed, decidable and expired like any other, never
// taken for orphaned work — so the caller is answered with the task.
func (b *Bus) holdForApproval(ctx context.Context, rec *schemas.TaskRecord, rev uint64) (*schemas.TaskRecord, uint64, error) {
	a := *rec.Approval
	ev := TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateAuthRequired, Message: schemas.ApprovalMessage(&a, "pending")}}}
	held, hrev, err := b.applyFrom(ctx, rec.Task.ID, rec, rev, ev)
	if err != nil {
		b.log.Warn("moving a task to wait for its approval failed; it is listed for approvers as submitted", "task_id", rec.Task.ID, "agent", rec.Agent, "err", err)
		return rec, rev, nil
	}
	return held, hrev, nil
}

// ApprovalDecider is who decides: the approver's principal and tenant
// (an approver decides the approvals of its own tenant only).
type ApprovalDecider struct {
	Principal, Tenant string
}

// DecideApproval settles the pending approval of task id, of by's tenant:
// approved, the task is SUBMITTED (the notice saying by whom) and its
// work queued — a queue that fails is the orphan sweep's to redo, the
// decision being stored; denied, it ends REJECTED with the reason. Of two
// decisions at once exactly one is stored; the other gets
// ErrApprovalSettled (a schemas.ErrConflict-classed error) naming the
// first. A task without an approval, or of another tenant, is not found.
func (b *Bus) DecideApproval(ctx context.Context, by ApprovalDecider, id string, d schemas.ApprovalDecision) (*schemas.TaskRecord, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	cur, curRev, err := b.GetTask(ctx, id)
	if err != nil || cur.Approval == nil || cur.Tenant != by.Tenant || cur.Reply != nil {
		if err == nil || errors.Is(err, schemas.ErrTaskNotFound) {
			err = schemas.Errorf(schemas.ErrTaskNotFound, "no approval for task %s", id)
		}
		return nil, err
	}
	decision, state := schemas.ApprovalApproved, schemas.TaskStateSubmitted
	if d.Decision == "deny" {
		decision, state = schemas.ApprovalDenied, schemas.TaskStateRejected
	}
	who := by.Principal
	if who == "" {
		who = "an anonymous approver"
	}
	rec, rev, err := b.settleApproval(ctx, id, cur, curRev, decision, state, who, strings.TrimSpace(d.Reason))
	if err != nil {
		return rec, err
	}
	if decision == schemas.ApprovalApproved {
		// Stored SUBMITTED before it is queued, as every submission is: a
		// failed queue leaves it to the orphan sweep.
		_ = b.queue(context.WithoutCancel(ctx), rec, rev, nil, PublishOptions{})
	}
	return rec, nil
}

// settleApproval stores decision on task id's pending approval and moves
// the task to state with the decision's notice, in one compare-and-swap
// that holds only while the approval is pending.
func (b *Bus) settleApproval(ctx context.Context, id string, cur *schemas.TaskRecord, curRev uint64, decision string, state schemas.TaskState, by, reason string) (*schemas.TaskRecord, uint64, error) {
	var notice *schemas.Message
	ev := TaskEvent{ID: schemas.NewID(), Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: state}}}
	pre := func(r *schemas.TaskRecord) error {
		switch {
		case r.Approval == nil:
			return schemas.Errorf(schemas.ErrTaskNotFound, "no approval for task %s", id)
		case !r.Approval.Pending():
			return settledError(id, r.Approval)
		case r.Task.Status.State.Terminal():
			return schemas.Errorf(schemas.ErrConflict, "task %s is already %s; its approval is moot", id, r.Task.Status.State).With("taskId", id)
		}
		// The decision is part of the write pre guards: pre runs on the
		// record the compare-and-swap writes.
		r.Approval.Decision, r.Approval.DecidedBy, r.Approval.DecidedAt, r.Approval.Reason = decision, by, schemas.Now(), reason
		if notice == nil {
			notice = schemas.ApprovalMessage(r.Approval, decision)
		}
		ev.Status.Status.Message = notice
		return nil
	}
	rec, rev, err := b.applyEventsIf(ctx, id, cur, curRev, nil, pre, []TaskEvent{ev})
	if errors.Is(err, schemas.ErrTaskTerminal) {
		if rec != nil && rec.Approval != nil && !rec.Approval.Pending() {
			return rec, rev, settledError(id, rec.Approval)
		}
		return rec, rev, schemas.Errorf(schemas.ErrConflict, "task %s has already ended; its approval is moot", id).With("taskId", id)
	}
	return rec, rev, err
}

// settledError tells a decision that came too late what settled it.
func settledError(id string, a *schemas.Approval) error {
	var e *schemas.Error
	switch at := a.ExpiresAt.UTC().Format(time.RFC3339); a.Decision {
	case schemas.ApprovalExpired:
		e = schemas.Errorf(schemas.ErrConflict, "the approval of task %s already expired at %s", id, at)
	case schemas.ApprovalDeadline:
		e = schemas.Errorf(schemas.ErrConflict, "the approval of task %s already reached the task's deadline at %s", id, at)
	default:
		e = schemas.Errorf(schemas.ErrConflict, "task %s was already %s by %s", id, a.Decision, a.DecidedBy)
	}
	return errors.Join(e.With("taskId", id).With("decision", a.Decision), ErrApprovalSettled)
}

// expireApproval settles task id's approval at its expiry: REJECTED, or
// FAILED when its deadline came first. It returns what it settled, nil
// for an approval decided meanwhile, or no longer due, left alone.
func (b *Bus) expireApproval(ctx context.Context, id string) (*ExpiredApproval, error) {
	cur, curRev, err := b.GetTask(ctx, id)
	switch {
	case errors.Is(err, schemas.ErrTaskNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case !cur.Approval.Pending() || time.Now().Before(cur.Approval.ExpiresAt.Time):
		return nil, nil
	}
	decision, state := schemas.ApprovalExpired, schemas.TaskStateRejected
	if cur.Approval.ExpiresFor == schemas.ApprovalDeadline {
		decision, state = schemas.ApprovalDeadline, schemas.TaskStateFailed
	}
	rec, _, err := b.settleApproval(ctx, id, cur, curRev, decision, state, "expiry", "")
	switch {
	case errors.Is(err, ErrApprovalSettled) || errors.Is(err, schemas.ErrConflict) || errors.Is(err, schemas.ErrTaskNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	b.log.Info("an approval expired; the task was not run", "task_id", id, "agent", rec.Agent, "decision", decision)
	return &ExpiredApproval{TaskID: id, Agent: rec.Agent, Decision: decision}, nil
}

// approvalsPending reports whether any task waits for an approval.
func (x *TaskIndex) approvalsPending() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.approvals) > 0
}

// PendingApprovals lists the pending approvals of tenant, the soonest to
// expire first, at most limit (0: all), from the index and each task's record.
func (x *TaskIndex) PendingApprovals(ctx context.Context, tenant string, limit int) ([]schemas.ApprovalSummary, error) {
	if err := x.catchUp(ctx); err != nil {
		return nil, err
	}
	x.mu.RLock()
	var ids []*indexEntry
	for _, e := range x.approvals {
		if e.Tenant == tenant {
			ids = append(ids, e)
		}
	}
	x.mu.RUnlock()
	slices.SortFunc(ids, func(a, b *indexEntry) int {
		return cmp.Or(cmp.Compare(a.Approval, b.Approval), strings.Compare(a.id, b.id))
	})
	out := []schemas.ApprovalSummary{}
	for _, e := range ids {
		if limit > 0 && len(out) >= limit {
			break
		}
		rec, _, err := x.b.GetTask(ctx, e.id)
		if errors.Is(err, schemas.ErrTaskNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		a := rec.Approval
		if !a.Pending() || rec.Task.Status.State.Terminal() || rec.Tenant != tenant {
			continue
		}
		out = append(out, schemas.ApprovalSummary{TaskID: rec.Task.ID, ContextID: rec.Task.ContextID, Agent: rec.Agent, Tenant: rec.Tenant,
			Owner: rec.Owner, Origin: rec.Origin, Trust: rec.Trust, Reasons: a.Reasons, Approvers: a.Approvers,
			RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt, ExpiresFor: a.ExpiresFor})
	}
	return out, nil
}
