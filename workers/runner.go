package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// Definition is one agent as a worker group runs it.
type Definition struct {
	// Name is the agent name: the routing key on the bus and the path
	// segment of its endpoints (see schemas.ValidAgentName).
	Name string
	// Card is the agent's card; the edge fills in supportedInterfaces and
	// defaults for empty required fields.
	Card schemas.AgentCard
	// Agent runs the tasks.
	Agent Agent
	// Live, if set, is asked for the card and remote status at every
	// registration, for an agent whose description changes while it runs
	// (a remote agent learns its card when the external agent answers, and
	// its health with every check). It must be safe for concurrent use.
	Live func() (schemas.AgentCard, *schemas.RemoteAgentStatus)
	// Changed, if set, signals that Live has news: the registration is
	// refreshed at once instead of at the next heartbeat.
	Changed <-chan struct{}
}

// Options tune a Runner. Zero fields take the documented defaults.
type Options struct {
	// Concurrency bounds the tasks one runner executes at once; default 16.
	Concurrency int
	// ShutdownGrace is how long in-flight tasks may finish after Run's ctx
	// ends before they are stopped and handed back; default 10s.
	ShutdownGrace time.Duration
	// FetchWait is how long one fetch waits for work; default 5s.
	FetchWait time.Duration
	// Instance names this runner in logs and its registration; default random.
	Instance string
	// Registry is the live registry of agents the runner's agents may
	// read through their Request's Delegation (the router needs it);
	// nil: Delegation.Agents refuses.
	Registry Registry
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Runner takes work for one agent from the bus and runs it: the run loop of
// a2abus. Any number of runners of the same agent, in any processes, share
// the agent's durable consumer.
type Runner struct {
	b    WorkBus
	def  Definition
	opt  Options
	log  *slog.Logger
	hbEv time.Duration
	// tasksOnly is whether the agent is a TaskMaker: registered so, and
	// its Emitters refuse Reply.
	tasksOnly bool
	// delegation is what its agents' requests delegate through.
	delegation Delegation
	// deliver takes a delivery through the runner's policies to its
	// agent (delivery.go).
	deliver func(context.Context, *delivery)

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc
	// canceled holds the last tasks whose cancel notice came while this
	// runner was not running them: their work, if it comes, is not run
	// from its snapshot but after reading the store (which shows them
	// canceled). The notices are best effort; the snapshot's first-write
	// check is what holds.
	canceled     map[string]struct{}
	canceledRing []string
	ready        chan struct{}
}

// canceledKept bounds Runner.canceled.
const canceledKept = 1024

// Causes of an agent's context ending.
var (
	errCanceled = errors.New("task canceled")
	errShutdown = errors.New("worker shutting down")
)

// ErrDeadlineExceeded is the cause (context.Cause) of an agent's context
// ended by its task's deadline (schemas.TaskRecord.Deadline); the runner
// then fails the task with its text, schemas.DeadlineExceeded.
var ErrDeadlineExceeded = errors.New(schemas.DeadlineExceeded)

// NewRunner returns a runner for def on b.
func NewRunner(b WorkBus, def Definition, opt Options) *Runner {
	if opt.Concurrency <= 0 {
		opt.Concurrency = 16
	}
	if opt.ShutdownGrace <= 0 {
		opt.ShutdownGrace = 10 * time.Second
	}
	if opt.FetchWait <= 0 {
		opt.FetchWait = 5 * time.Second
	}
	if opt.Instance == "" {
		opt.Instance = def.Name + "-" + schemas.NewID()[:8]
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	r := &Runner{
		b: b, def: def, opt: opt,
		delegation: busDelegation{Lifecycle: b, registry: opt.Registry},
		log:        opt.Logger.With("component", "worker", "agent", def.Name, "instance", opt.Instance),
		hbEv:       b.Config().AckWait / 3,
		tasksOnly:  makesTasks(def.Agent),
		running:    map[string]context.CancelCauseFunc{},
		ready:      make(chan struct{}),
	}
	r.deliver = r.pipeline()
	return r
}

// Ready is closed once the runner is registered and takes work.
func (r *Runner) Ready() <-chan struct{} { return r.ready }

// Run registers the agent, then takes and runs work until ctx ends. On
// shutdown it stops taking work, lets in-flight tasks finish for
// ShutdownGrace, then stops them and hands their work back for another
// replica. It returns nil after a clean shutdown.
func (r *Runner) Run(ctx context.Context) error {
	if r.def.Agent == nil {
		return fmt.Errorf("workers: agent %q has no implementation", r.def.Name)
	}
	wc, err := r.b.WorkConsumer(ctx, r.def.Name)
	if err != nil {
		return err
	}
	if err := r.register(ctx); err != nil {
		return err
	}
	stopCancels, err := r.b.SubscribeCancels(r.def.Name, func(n schemas.CancelNotice) { r.cancelTask(n.TaskID) })
	if err != nil {
		return err
	}
	defer stopCancels()
	stopDL, err := r.b.WatchDeadLetters(r.def.Name, r.failDeadLetter)
	if err != nil {
		return err
	}
	defer stopDL()

	// Agents run under their own context, so that ctx ending stops the
	// intake but not the work in flight; it ends after the grace period.
	agentCtx, stopAgents := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopAgents(errShutdown)

	var wg sync.WaitGroup
	wg.Go(func() { r.heartbeatRegistration(ctx) })
	close(r.ready)

	// A fixed pool of Concurrency goroutines takes the work, rather than a
	// goroutine per item: decoding records and running agents grows a
	// goroutine's stack, and a fresh goroutine per task paid that growth
	// every time (a few percent of a short task's CPU). sem holds a slot
	// per item in flight, so a fetched item always finds a pool goroutine.
	sem := make(chan struct{}, r.opt.Concurrency)
	jobs := make(chan *bus.Work)
	for range r.opt.Concurrency {
		wg.Go(func() {
			for w := range jobs {
				r.handle(agentCtx, w)
				<-sem
			}
		})
	}
	// Several fetches wait at once, each for one free slot: work moves to
	// an agent only when one of its workers asks (bus dispatch), so one
	// fetch at a time would take one item per round trip through the
	// dispatcher, and a fetch for more slots than items waiting would
	// hold those slots while it waits.
	var fetchers sync.WaitGroup
	for range min(r.opt.Concurrency, maxFetchers) {
		fetchers.Go(func() { r.fetchLoop(ctx, wc, sem, jobs) })
	}
	fetchers.Wait()
	close(jobs)
	defer wc.Close()

	// Shutdown: give in-flight work the grace period, then stop it.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(r.opt.ShutdownGrace):
		stopAgents(errShutdown)
		<-done
	}
	return nil
}

func (r *Runner) register(ctx context.Context) error {
	reg := schemas.AgentRegistration{Agent: r.def.Name, Card: r.def.Card, Instance: r.opt.Instance}
	if r.def.Live != nil {
		reg.Card, reg.Remote = r.def.Live()
	}
	if t, ok := r.def.Agent.(TokenSpender); ok {
		reg.SpendsTokens = t.SpendsTokens()
	}
	reg.MakesTasks = r.tasksOnly
	return r.b.RegisterAgent(ctx, reg)
}

func (r *Runner) heartbeatRegistration(ctx context.Context) {
	t := time.NewTicker(r.b.AgentHeartbeat())
	defer t.Stop()
	// A failed heartbeat (the registry's leader is being elected) is made
	// again a second later, not a whole interval later: two missed
	// intervals would let edges forget the agent.
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-retry:
		case <-r.def.Changed: // a nil channel never fires
		}
		retry = nil
		if err := r.register(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("agent registration heartbeat failed; retrying", "err", err)
			retry = time.After(time.Second)
		}
	}
}

// failDeadLetter fails the task of work whose deliveries ran out, saying
// why, so no client waits forever on work nobody will finish.
func (r *Runner) failDeadLetter(dl bus.DeadLetter) {
	if dl.TaskID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := r.b.Apply(ctx, dl.TaskID, bus.TaskEvent{Status: &schemas.TaskStatusUpdateEvent{
		Status: schemas.TaskStatus{State: schemas.TaskStateFailed, Message: AgentMessage(dl.Reason)},
	}})
	if err != nil && !errors.Is(err, schemas.ErrTaskTerminal) {
		r.log.Warn("failing dead-lettered task failed", "task_id", dl.TaskID, "err", err)
	}
}

func (r *Runner) cancelTask(taskID string) {
	r.mu.Lock()
	cancel := r.running[taskID]
	if _, known := r.canceled[taskID]; cancel == nil && !known {
		if r.canceled == nil {
			r.canceled = map[string]struct{}{}
		}
		if len(r.canceledRing) == canceledKept {
			delete(r.canceled, r.canceledRing[0])
			r.canceledRing = r.canceledRing[1:]
		}
		r.canceled[taskID] = struct{}{}
		r.canceledRing = append(r.canceledRing, taskID)
	}
	r.mu.Unlock()
	if cancel != nil {
		cancel(errCanceled)
	}
}

// canceledHere reports whether a cancel notice for taskID came while this
// runner was not running it.
func (r *Runner) canceledHere(taskID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.canceled[taskID]
	return ok
}

// snapshot is the task record a first delivery starts from (Work.Snapshot:
// the record this process's edge handed over, or the one the item carries,
// see schemas.WorkItem.Record), its revision and the last event the first
// write must find; nil when there is none (or one that is not this task's
// or no longer SUBMITTED), and the store is read instead.
func snapshot(w *Work) (*schemas.TaskRecord, uint64, *string) {
	if w.Attempt != 1 || w.Item.TaskRevision == 0 {
		return nil, 0, nil
	}
	rec := w.Snapshot()
	if rec == nil || rec.Task.ID != w.Item.TaskID || rec.Task.Status.State != schemas.TaskStateSubmitted {
		return nil, 0, nil
	}
	since := rec.LastEventID
	return rec, w.Item.TaskRevision, &since
}

// dropStale settles work whose first write found the task changed since
// the item's snapshot: canceled while queued, or run by another delivery
// of the same submission. Had the worker read the store first it would
// not have run the agent; it drops the work now, after making sure a
// finished task's last event is in its log, as for any work that finds
// its task finished.
func (r *Runner) dropStale(ctx context.Context, w *Work, log *slog.Logger) {
	rec, rev, err := r.b.GetTaskAtLeast(ctx, w.Item.TaskID, w.Item.TaskRevision)
	if err != nil && !errors.Is(err, schemas.ErrTaskNotFound) {
		log.Warn("reading a task that changed under its work failed; handing work back", "err", err)
		_ = w.Nak(backoff(w.Attempt))
		return
	}
	if err == nil && rec.Task.Status.State.Terminal() && !r.finalEventLogged(ctx, w, log, rec, rev) {
		return
	}
	log.Warn("the task changed before this work's first write (canceled, or taken by another delivery); dropping the work")
	_ = w.Ack()
}

// finalEventLogged makes sure the event that finished rec is in its log
// (its writer may have died before publishing it; see
// bus.PublishMissingFinalEvent). If that cannot be checked it hands the
// work back and reports false.
func (r *Runner) finalEventLogged(ctx context.Context, w *Work, log *slog.Logger, rec *schemas.TaskRecord, rev uint64) bool {
	published, err := r.b.PublishMissingFinalEvent(ctx, rec, rev)
	if err != nil {
		log.Warn("checking a finished task's event log failed; handing work back", "err", err)
		_ = w.Nak(backoff(w.Attempt))
		return false
	}
	if published {
		log.Warn("published the final event of a task whose writer died before publishing it")
	}
	return true
}

// missingTaskDeliveries is how many deliveries work for a task that cannot
// be found gets (with back-off between them) before it is dead-lettered.
const missingTaskDeliveries = 3

// missingTask settles work whose task the store does not have, even read
// from the stream leader: it is tried again a few times (a task withdrawn
// by a refused request, or restored, settles meanwhile), then moved to the
// dead-letter stream with the reason, never acknowledged away in silence.
func (r *Runner) missingTask(ctx context.Context, w *Work, log *slog.Logger, err error) {
	limit := min(uint64(missingTaskDeliveries), uint64(max(r.b.Config().MaxDeliver, 1)))
	if w.Attempt < limit {
		log.Warn("work for a task not found; trying again later", "err", err)
		_ = w.Nak(backoff(w.Attempt))
		return
	}
	reason := fmt.Sprintf("task %s not found after %d deliveries: %v", w.Item.TaskID, w.Attempt, err)
	log.Error("dead-lettering work for a task that does not exist", "err", err)
	if derr := w.DeadLetter(ctx, reason); derr != nil {
		_ = w.Nak(backoff(w.Attempt))
	}
}

// runTurn runs one turn of an agent as every runner of it does, the
// Runner on the bus and the Recorder in memory: a panic becomes the
// agent's error (one bad task cannot take the worker down), returning
// without an end completes the task (queued behind the agent's last
// chunks, in their write when they still wait), and what the agent queued
// is written under ctx, which ends on cancel and shutdown too, so this
// returns promptly either way and nothing writes behind the work's ack or
// Nak. It returns how the turn ended, for settleTurn.
func runTurn(ctx context.Context, agent Agent, req *Request, em *Emitter, log *slog.Logger) error {
	runErr := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				log.Error("agent panicked", "task_id", req.Task.ID, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				err = fmt.Errorf("agent crashed: %v", p)
			}
		}()
		return agent.Execute(ctx, req, em)
	}()
	if runErr == nil && !em.endAsked() {
		runErr = em.Status(ctx, schemas.TaskStateCompleted, nil)
	}
	flushErr := em.Flush(context.WithoutCancel(ctx))
	if runErr == nil {
		runErr = flushErr
	}
	em.reopen()
	return runErr
}

// settleTurn records how a turn ended: an error of the agent fails the
// task with its text, a turn that left the task open completes it, and a
// task that ended meanwhile (canceled) is left as it is.
func settleTurn(ctx context.Context, em *Emitter, runErr error) error {
	switch {
	case errors.Is(runErr, ErrTaskEnded):
		return nil
	case runErr != nil:
		return em.Fail(ctx, runErr.Error())
	case !em.settled:
		return em.Status(ctx, schemas.TaskStateCompleted, nil)
	}
	return nil
}

// finishOnError settles a delivery whose bookkeeping failed: absorbed events
// are done; bus trouble is retried after a back-off.
func (r *Runner) finishOnError(w *Work, log *slog.Logger, err error) {
	if errors.Is(err, ErrTaskEnded) || errors.Is(err, schemas.ErrTaskTerminal) {
		_ = w.Ack()
		return
	}
	log.Warn("storing task progress failed; handing work back", "err", err)
	_ = w.Nak(backoff(w.Attempt))
}

// heartbeat keeps a long task's work item alive (InProgress every AckWait/3)
// and, as a safety net for lost cancel notices, stops the agent when the
// task became terminal in KV.
func (r *Runner) heartbeat(ctx context.Context, w *Work, cancel context.CancelCauseFunc, done <-chan struct{}) {
	t := time.NewTicker(r.hbEv)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			_ = w.InProgress()
			rec, _, err := r.b.GetTask(ctx, w.Item.TaskID)
			if err == nil && rec.Task.Status.State.Terminal() {
				cancel(errCanceled)
				return
			}
		}
	}
}

// backoff is the redelivery delay after a failed attempt.
func backoff(attempt uint64) time.Duration {
	d := time.Second << min(attempt, 6)
	return min(d, time.Minute)
}

// Work is the bus's work delivery, named here for the agent runtime.
type Work = bus.Work

// relatedTasks reads the tasks msg refers to, and theirs in turn (see
// Request.RelatedTasks) with read, the owned read of the runner's store
// (Bus.Task, or a Recorder's), as rec's owner would: breadth first from
// the last referenced (so the bound keeps the nearest), then put in the
// order they were created. Each read is one task; the number of reads is
// bounded too, so references to tasks that cannot be read cost little.
func relatedTasks(ctx context.Context, read func(context.Context, bus.Owner, string) (*schemas.TaskRecord, uint64, error), log *slog.Logger, rec *schemas.TaskRecord, msg *schemas.Message) []schemas.Task {
	if len(msg.ReferenceTaskIDs) == 0 {
		return nil
	}
	owner := bus.Owner{Agent: rec.Agent, Principal: rec.Owner, Tenant: rec.Tenant}
	seen := map[string]bool{rec.Task.ID: true}
	var queue []string
	push := func(ids []string) {
		for i := len(ids) - 1; i >= 0; i-- { // the last referenced is the newest
			if id := ids[i]; !seen[id] && schemas.ValidTaskID(id) {
				seen[id] = true
				queue = append(queue, id)
			}
		}
	}
	push(msg.ReferenceTaskIDs)
	var found []*schemas.TaskRecord
	for reads := 0; len(queue) > 0 && len(found) < MaxRelatedTasks && reads < 2*MaxRelatedTasks; reads++ {
		id := queue[0]
		queue = queue[1:]
		t, _, err := read(ctx, owner, id)
		if err != nil {
			log.Debug("a referenced task is left out", "task_id", rec.Task.ID, "reference", id, "err", err)
			continue
		}
		found = append(found, t)
		for i := len(t.Task.History) - 1; i >= 0; i-- {
			if m := t.Task.History[i]; m.Role == schemas.RoleUser {
				push(m.ReferenceTaskIDs)
			}
		}
	}
	// Creation times are to the millisecond: within one, a task reached
	// later in the walk (referred to by one reached before) is the older.
	slices.Reverse(found)
	slices.SortStableFunc(found, func(a, b *schemas.TaskRecord) int { return a.CreatedAt.Compare(b.CreatedAt.Time) })
	out := make([]schemas.Task, len(found))
	for i, t := range found {
		out[i] = t.Task
	}
	return out
}

// maxFetchers bounds the fetches one runner has waiting at once.
const maxFetchers = 16

// fetchLoop takes work for a free slot of sem at a time and hands it to
// jobs until ctx ends.
func (r *Runner) fetchLoop(ctx context.Context, wc *bus.WorkConsumer, sem chan struct{}, jobs chan<- *bus.Work) {
	for ctx.Err() == nil {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		works, err := wc.Fetch(ctx, 1, r.opt.FetchWait)
		if len(works) == 0 {
			<-sem
		}
		if err != nil && ctx.Err() == nil {
			r.log.Warn("fetching work failed; retrying", "err", err)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
		for _, w := range works {
			jobs <- w
		}
	}
}
