package workers

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// A delivery's way through a Runner: each policy of the runner —
// dead-lettering what cannot run, reading the task with back-off while the
// bus fails, settling deliveries of finished or foreign tasks, tracking the
// running task (cancel notices, heartbeats, the shutdown grace), recording
// how a turn ended (ack, or retry with back-off) — is one step around the
// next, and the innermost runs the agent's turn (runTurn). The steps are
// listed once, in deliverySteps, in the order a delivery passes them.

// delivery is one delivery of a work item on its way through the steps.
type delivery struct {
	w   *Work
	log *slog.Logger
	// base is the runner's context for its agents, which ends at the end
	// of the shutdown grace: what settling a turn is bounded by.
	base context.Context
	// The task as the turn starts from it, and the last event its first
	// write must find (see snapshot); set by readTask.
	rec   *schemas.TaskRecord
	rev   uint64
	since *string
	// em and runErr are the turn's Emitter and how it ended (runAgent).
	em     *Emitter
	runErr error
}

// step runs one policy around next, or settles the delivery itself and
// does not call next.
type step func(ctx context.Context, d *delivery, next func(context.Context, *delivery))

// deliverySteps are the runner's policies, outermost first.
func (r *Runner) deliverySteps() []step {
	return []step{r.traceDelivery, r.deadLetterMalformed, r.readTask, r.skipSettled, r.track, r.settle, r.keepDeadline}
}

// pipeline composes the steps around runAgent, once per runner.
func (r *Runner) pipeline() func(context.Context, *delivery) {
	next := r.runAgent
	for _, s := range slices.Backward(r.deliverySteps()) {
		inner := next
		next = func(ctx context.Context, d *delivery) { s(ctx, d, inner) }
	}
	return next
}

// handle runs one delivery of a work item to its end: ack when its effects
// are stored, nak (with back-off) when the bus failed or the worker is
// shutting down, dead-lettered when it cannot run.
func (r *Runner) handle(base context.Context, w *Work) {
	r.deliver(base, &delivery{w: w, base: base, log: deliveryLogger(r.log, slog.String("task_id", w.Item.TaskID), slog.String("ce_id", w.EventID), slog.Uint64("attempt", w.Attempt))})
}

// deadLetterMalformed moves a work item that could not be read to the
// dead-letter stream (handing it back if that fails).
func (r *Runner) deadLetterMalformed(ctx context.Context, d *delivery, next func(context.Context, *delivery)) {
	w := d.w
	if w.Err == nil {
		next(ctx, d)
		return
	}
	d.log.Error("dead-lettering malformed work item", "err", w.Err)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.DeadLetter(dctx, "malformed work item: "+w.Err.Error()); err != nil {
		_ = w.Nak(backoff(w.Attempt))
	}
}

// readTask finds the task the turn starts from. A first delivery carrying
// the record it submits runs from it; its first write then checks that
// nothing changed the task since (see schemas.WorkItem.Record), which is
// what the read checks otherwise. The item names the revision it submits,
// so a record read from a replica that has not caught up is read again
// from the leader: work is never dropped because a read missed. While the
// bus fails the work goes back with back-off; a task the store does not
// have is missingTask's.
func (r *Runner) readTask(ctx context.Context, d *delivery, next func(context.Context, *delivery)) {
	w := d.w
	rec, rev, since := snapshot(w)
	if rec != nil && r.canceledHere(w.Item.TaskID) {
		rec, since = nil, nil
	}
	if rec == nil {
		var ok bool
		if rec, rev, ok = r.readStored(ctx, d); !ok {
			return
		}
	}
	d.rec, d.rev, d.since = rec, rev, since
	next(ctx, d)
}

// readStored reads the delivery's task from the store, at least at the
// revision its item submits; when it cannot, it settles the delivery
// (missingTask, or back-off while the bus fails) and reports false.
func (r *Runner) readStored(ctx context.Context, d *delivery) (*schemas.TaskRecord, uint64, bool) {
	w := d.w
	opCtx, opCancel := context.WithTimeout(ctx, 30*time.Second)
	defer opCancel()
	rec, rev, err := r.b.GetTaskAtLeast(opCtx, w.Item.TaskID, w.Item.TaskRevision)
	switch {
	case errors.Is(err, schemas.ErrTaskNotFound):
		r.missingTask(opCtx, w, d.log, err)
		return nil, 0, false
	case err != nil:
		d.log.Warn("reading task failed; handing work back", "err", err)
		_ = w.Nak(backoff(w.Attempt))
		return nil, 0, false
	}
	return rec, rev, true
}

// skipSettled settles, without running the agent, a delivery whose task
// needs no turn: one already finished (a redelivery, or a cancel before
// the work was taken), a second copy of a submission another delivery
// took, or work routed to another agent (dead-lettered).
func (r *Runner) skipSettled(ctx context.Context, d *delivery, next func(context.Context, *delivery)) {
	w, rec := d.w, d.rec
	opCtx, opCancel := context.WithTimeout(ctx, 30*time.Second)
	defer opCancel()
	switch {
	case rec.Task.Status.State.Terminal():
		// The work is done once the event that finished the task is in
		// its log.
		if r.finalEventLogged(opCtx, w, d.log, rec, d.rev) {
			_ = w.Ack()
		}
	case w.Attempt == 1 && w.Item.TaskRevision != 0 && d.rev > w.Item.TaskRevision:
		// Nothing but a worker running this submission changes a task
		// between its submission and the first delivery of its work: this
		// is a second copy of work another delivery took (queued again
		// after JetStream's de-duplication window), not a task to run twice.
		d.log.Warn("work already taken by another delivery of the same submission; dropping this copy", "revision", d.rev, "submitted_revision", w.Item.TaskRevision)
		_ = w.Ack()
	case rec.Agent != r.def.Name:
		d.log.Error("work item routed to the wrong agent", "owner", rec.Agent)
		if err := w.DeadLetter(opCtx, "task belongs to agent "+rec.Agent); err != nil {
			_ = w.Nak(backoff(w.Attempt))
		}
	default:
		opCancel()
		next(ctx, d)
	}
}

// track runs the turn, and settling it, under a context of its own,
// registered as the task's, so a cancel notice ends it (cancelTask), as
// does the heartbeat when the task finished elsewhere and the end of the
// shutdown grace; the heartbeat keeps the delivery alive meanwhile.
func (r *Runner) track(base context.Context, d *delivery, next func(context.Context, *delivery)) {
	ctx, cancel := context.WithCancelCause(base)
	defer cancel(nil)
	id := d.w.Item.TaskID
	r.mu.Lock()
	r.running[id] = cancel
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.running, id)
		r.mu.Unlock()
	}()
	hbDone := make(chan struct{})
	defer close(hbDone)
	go r.heartbeat(ctx, d.w, cancel, hbDone)
	next(ctx, d)
}

// settle records how the agent's turn ended: a canceled task's work is
// done, a shut-down worker's goes back at once for another; a write found
// the task changed under it (dropStale); the bus failed the agent, not the
// task (run it again later, with back-off); otherwise the turn's end is
// stored (settleTurn) and the work acked. It is bounded by the runner's
// context, not the turn's, which the heartbeat may end while it writes.
func (r *Runner) settle(ctx context.Context, d *delivery, next func(context.Context, *delivery)) {
	next(ctx, d)
	w, log, runErr := d.w, d.log, d.runErr
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errShutdown):
		log.Info("handing work back on shutdown")
		_ = w.Nak(0)
		return
	case errors.Is(cause, errCanceled):
		_ = w.Ack()
		return
	}
	finCtx, finCancel := context.WithTimeout(d.base, 30*time.Second)
	defer finCancel()
	if d.em.stale {
		r.dropStale(finCtx, w, log)
		return
	}
	if errors.Is(runErr, schemas.ErrUnavailable) {
		r.finishOnError(w, log, runErr)
		return
	}
	if runErr != nil && !errors.Is(runErr, ErrTaskEnded) {
		log.Info("agent failed", "err", runErr)
	}
	if finErr := settleTurn(finCtx, d.em, runErr); finErr != nil && !errors.Is(finErr, ErrTaskEnded) {
		r.finishOnError(w, log, finErr)
		return
	}
	_ = w.Ack()
}

// keepDeadline holds the turn to its task's deadline
// (schemas.TaskRecord.Deadline). Work taken at or after it does not run:
// the task fails with ErrDeadlineExceeded's text, settled (stored, the work
// acked) as any failed turn. Otherwise the turn's context ends at the
// deadline with ErrDeadlineExceeded as its cause (the exec kind kills its
// process then), and a turn that ended so fails the task the same way —
// unless the agent had settled the task already, or a cancel or the
// shutdown ended the turn first (settle's, by the outer context's cause).
func (r *Runner) keepDeadline(ctx context.Context, d *delivery, next func(context.Context, *delivery)) {
	if d.rec.Deadline == nil {
		next(ctx, d)
		return
	}
	at := d.rec.Deadline.Time
	if !time.Now().Before(at) {
		d.log.Info("deadline passed before the turn started", "deadline", at)
		d.em = r.emitter(ctx, d)
		d.runErr = ErrDeadlineExceeded
		return
	}
	dctx, cancel := context.WithDeadlineCause(ctx, at, ErrDeadlineExceeded)
	defer cancel()
	next(dctx, d)
	if errors.Is(context.Cause(dctx), ErrDeadlineExceeded) && !errors.Is(d.runErr, ErrTaskEnded) && !d.em.settled {
		d.runErr = ErrDeadlineExceeded
	}
}

// emitter is the Emitter of the delivery's turn, writing from the task as
// the turn starts from it.
func (r *Runner) emitter(ctx context.Context, d *delivery) *Emitter {
	return &Emitter{w: r.b, taskID: d.w.Item.TaskID, ctx: ctx, rec: d.rec, rev: d.rev, since: d.since, tasksOnly: r.tasksOnly}
}

// runAgent runs the agent's turn. The agent's first event decides what
// the client sees first: a Reply makes a message-only exchange, anything
// else a task. So the runtime does not mark the task WORKING up front; the
// Emitter does it before the agent's first artifact, in the same write
// (see Emitter.write).
func (r *Runner) runAgent(ctx context.Context, d *delivery) {
	w, rec := d.w, d.rec
	d.em = r.emitter(ctx, d)
	req := &Request{Task: rec.Task, Message: w.Item.Message, Attempt: w.Attempt, Owner: rec.Owner, Tenant: rec.Tenant, Origin: rec.Origin, Trust: rec.Trust,
		delegation: r.delegation,
		related: func(ctx context.Context) []schemas.Task {
			return relatedTasks(ctx, r.b.Task, r.log, rec, &w.Item.Message)
		}}
	if dl := rec.Deadline; dl != nil {
		req.Deadline = dl.Time
		req.delegation = deadlineDelegation{Delegation: r.delegation, deadline: dl.Time}
	}
	ctx, end := r.startRun(ctx, d)
	d.runErr = runTurn(ctx, r.def.Agent, req, d.em, r.log)
	end(d.runErr)
}
