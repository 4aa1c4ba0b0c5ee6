package edge

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// admission decides whether a call may start a new task: the agent is not
// in maintenance, the task store has room, the caller is under its quota
// of unfinished tasks (limitUnfinished), and the agent's backlog under its
// bound and the caller under its share of it (admit). It is an interceptor
// of the A2A service (admitNewTasks), so every binding and dialect is held
// to it alike.
type admission struct {
	cfg          *Config
	index        *bus.TaskIndex
	agents       *bus.AgentDirectory
	load         func(ctx context.Context, agent string) (bus.AgentLoad, error)
	taskMaxBytes int64
	backlog      backlogCache
	limited      bus.Counter // a2a_rate_limited_total{limit}
}

// admitNewTasks admits a send that starts a task (newTask).
func (s *admission) admitNewTasks(ctx context.Context, inv *invocation, next invoker) (any, error) {
	if newTask(inv) != nil {
		if err := s.admitTask(ctx, inv.call); err != nil {
			return nil, err
		}
	}
	return next(ctx, inv)
}

func (s *admission) admitTask(ctx context.Context, c *call) error {
	if err := s.limitUnfinished(c); err != nil {
		return err
	}
	if err := s.admit(ctx, c); err != nil {
		return err
	}
	if reg, ok := s.agents.Get(c.agent); ok && reg.Maintenance != "" {
		e := schemas.Errorf(schemas.ErrUnavailable, "agent %s is in maintenance (%s); it takes no new tasks until an admin ends it", c.agent, reg.Maintenance)
		e.RetryAfter = 60
		return e
	}
	return nil
}

// backlogStaleFor is how old a backlog reading may be and still admit
// tasks while the bus cannot give a new one.
const backlogStaleFor = 30 * time.Second

// backlogCache remembers each agent's backlog for a moment, so admission
// costs one bus read per agent per interval, not one per request.
type backlogCache struct {
	mu   sync.Mutex
	seen map[string]backlogEntry
}

// backlogEntry is the last reading of an agent's backlog (n, plus the
// tasks this edge admitted since) and what its pace is measured from: the
// work done at two earlier readings about paceWindow apart, so the pace is
// always measured over one to two windows once the edge has watched that
// long.
type backlogEntry struct {
	n         uint64
	at        time.Time
	from, mid doneMark
	done      uint64 // at the last reading
}

// doneMark is an agent's count of work done (bus.AgentLoad.Done) when read.
type doneMark struct {
	done uint64
	at   time.Time
}

// paceWindow is the shortest span an agent's pace is measured over.
const paceWindow = 10 * time.Second

// read folds a new reading of the agent's load, taken at now, into e.
func (e *backlogEntry) read(l bus.AgentLoad, now time.Time) {
	switch {
	case e.from.at.IsZero() || l.Done < e.mid.done: // first, or the consumer was made anew
		e.from = doneMark{l.Done, now}
		e.mid = e.from
	case now.Sub(e.mid.at) >= paceWindow:
		e.from, e.mid = e.mid, doneMark{l.Done, now}
	}
	e.n, e.at, e.done = l.Backlog, now, l.Done
}

// drainRetry is the Retry-After of a refusal by the agent's backlog.
func (e *backlogEntry) drainRetry() int {
	return drainRetry(e.n, e.done-e.from.done, e.at.Sub(e.from.at))
}

// Bounds of the wait a refusal by an agent's backlog tells (drainRetry).
const (
	minDrainRetry     = 1
	maxDrainRetry     = 300
	unknownDrainRetry = 5 // the edge has not watched the agent long enough to tell
)

// drainRetry is how long an agent takes to work through backlog items at
// the pace it kept recently (done items over span), in whole seconds
// within minDrainRetry..maxDrainRetry: the wait a refused caller is told.
// An agent seen doing nothing for a whole paceWindow gets the most; one
// watched for less than a second, unknownDrainRetry.
func drainRetry(backlog, done uint64, span time.Duration) int {
	switch {
	case span < time.Second:
		return unknownDrainRetry
	case done == 0:
		if span >= paceWindow {
			return maxDrainRetry
		}
		return unknownDrainRetry
	}
	secs := math.Ceil(float64(backlog) * span.Seconds() / float64(done))
	return int(min(max(secs, minDrainRetry), maxDrainRetry))
}

// backlogShare is the share of an agent's backlog bound
// (MaxBacklogPerAgent) one caller may hold queued or running: 1/32, so a
// few callers cannot fill an agent's queue for everyone (32 would have
// to), but never fewer than minBacklogShare tasks, so a small bound still
// lets a caller queue some work ahead (a bound below 32 × 16 = 512 is
// that much easier to fill).
const (
	backlogShare    = 32
	minBacklogShare = 16
)

// admit refuses a new task when the agent's backlog is at its bound, or
// the caller already holds its share of that bound (backlogShare, counted
// by the task index per caller and agent). The backlog is read from the
// bus at most every 500ms; the tasks this edge admits in between are added
// to that reading, so a burst cannot pass the bound in the gap (other
// edges' admissions show at the next reading). A refusal tells the time
// the agent's recent pace takes to work through its backlog.
func (s *admission) admit(ctx context.Context, c *call) error {
	bound, agent := s.cfg.MaxBacklogPerAgent, c.agent
	if bound == 0 {
		return nil
	}
	bc := &s.backlog
	bc.mu.Lock()
	e, ok := bc.seen[agent]
	bc.mu.Unlock()
	if !ok || time.Since(e.at) > 500*time.Millisecond {
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if ok {
			// Holding a reading, don't let a leaderless consumer hold up
			// every request for the bus's whole request timeout.
			rctx, cancel = context.WithTimeout(ctx, time.Second)
		}
		l, err := s.load(rctx, agent)
		cancel()
		switch {
		case err == nil:
			bc.mu.Lock()
			if bc.seen == nil {
				bc.seen = map[string]backlogEntry{}
			}
			e := bc.seen[agent]
			e.read(l, time.Now())
			bc.seen[agent] = e
			bc.mu.Unlock()
		case !ok || time.Since(e.at) > backlogStaleFor:
			return err
		}
		// Otherwise a new consumer leader is being elected (a node was
		// lost): the last reading, a few seconds old, still bounds the
		// backlog, and creating the task needs the bus anyway.
	}
	share := max(bound/backlogShare, minBacklogShare)
	held := uint64(s.index.Queued(c.caller.principal, c.caller.tenant, c.caller.origin, agent))
	bc.mu.Lock()
	defer bc.mu.Unlock()
	e = bc.seen[agent]
	switch {
	case e.n >= bound:
		wait := e.drainRetry()
		err := schemas.Errorf(schemas.ErrUnavailable, "agent %s has %d tasks queued or running, its limit; at its recent pace it works through them in about %d s: retry after that", agent, e.n, wait)
		err.RetryAfter = wait
		return err
	case held >= share:
		s.limited.Inc(limitBacklogShare)
		err := schemas.Errorf(schemas.ErrRateLimited, "this caller has %d tasks queued or running at agent %s, its share of the agent's backlog (at most %d of %d); wait for some to finish, or cancel some, before starting another", held, agent, share, bound)
		err.RetryAfter = e.drainRetry()
		return err
	}
	e.n++
	bc.seen[agent] = e
	return nil
}
