package edge

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// Limits bounds what one caller may ask of an edge. A caller is an
// authenticated principal in its tenant, or, for anonymous requests, the
// source address. Zero fields do not bound.
type Limits struct {
	// Rate is the sustained requests per second a caller may send, and
	// Burst how many it may send at once before the rate applies.
	Rate  float64
	Burst int
	// MaxUnfinished bounds the caller's tasks that are not finished (over
	// every agent of its tenant): past it, a new task is refused until one
	// finishes, is answered or canceled. Anonymous callers are counted
	// per origin (source address, or IPv6 /64), as their rate is. The
	// count comes from the task
	// index, which follows the store within milliseconds, so a burst may
	// pass it by a few.
	MaxUnfinished int
	// MaxUnfinishedBytes bounds the stored size of those tasks the same
	// way, so no caller can fill the task store with tasks it leaves
	// waiting.
	MaxUnfinishedBytes int64
}

// LimitsConfig is Default for every caller, replaced as a whole by the
// entry of its principal, else of its tenant.
type LimitsConfig struct {
	Default    Limits
	Principals map[string]Limits
	Tenants    map[string]Limits
}

// of is the limits of call c: its principal's entry, else its tenant's,
// else its trust level's (Default with the level's limits over it,
// compiled once: trustLevel.limits).
func (lc *LimitsConfig) of(c *call) Limits {
	if l, ok := lc.Principals[c.caller.principal]; ok && c.caller.principal != "" {
		return l
	}
	if l, ok := lc.Tenants[c.caller.tenant]; ok && c.caller.tenant != "" {
		return l
	}
	if c.level != nil {
		return c.level.limits
	}
	return lc.Default
}

// rateLimiter is the request-rate half of the front door's limits: a
// generic cell rate algorithm per caller, which keeps one time per caller
// (when its next request is due) instead of a bucket to refill. A caller
// whose time has passed is as good as absent, so the map is swept of them
// now and then and holds only callers active within their burst.
type rateLimiter struct {
	mu    sync.Mutex
	due   map[string]time.Time
	swept time.Time
}

// rateSweepEvery is how often the idle callers are forgotten.
const rateSweepEvery = time.Minute

// allow takes one request of key under l at now; if it is over, it says
// when the caller may send again.
func (rl *rateLimiter) allow(key string, l Limits, now time.Time) (bool, time.Duration) {
	if l.Rate <= 0 {
		return true, 0
	}
	interval := time.Duration(float64(time.Second) / l.Rate)
	tolerance := time.Duration(max(l.Burst, 1)-1) * interval
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if now.Sub(rl.swept) > rateSweepEvery {
		for k, t := range rl.due {
			if t.Before(now) {
				delete(rl.due, k)
			}
		}
		rl.swept = now
	}
	due := rl.due[key]
	if due.Before(now) {
		due = now
	}
	if wait := due.Add(-tolerance).Sub(now); wait > 0 {
		return false, wait
	}
	if rl.due == nil {
		rl.due = map[string]time.Time{}
	}
	rl.due[key] = due.Add(interval)
	return true, 0
}

// limitKey is whom c's per-caller limits count: its principal in its
// tenant, or an anonymous caller's origin.
func (c *call) limitKey() string {
	if c.caller.principal == "" {
		return "\x01" + c.caller.origin
	}
	return c.scope()
}

// callerStreams counts the streams each caller holds open on this edge at
// a trust level that bounds them (LevelLimits.MaxStreams). Only such
// callers are counted, and a caller is forgotten when its last stream
// ends, so the map holds only callers with a stream open.
type callerStreams struct {
	mu sync.Mutex
	n  map[string]int
}

// open counts a stream of c's caller until the returned func is called,
// or refuses it (ErrRateLimited, with Retry-After) when the caller holds
// limit streams already.
func (cs *callerStreams) open(c *call, limit int) (func(), *schemas.Error) {
	key := c.limitKey()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if n := cs.n[key]; n >= limit {
		e := schemas.Errorf(schemas.ErrRateLimited, "this caller holds %d streams open, the most its trust level %q allows; close one before opening another", n, c.trust)
		e.RetryAfter = streamRetry
		return nil, e
	}
	if cs.n == nil {
		cs.n = map[string]int{}
	}
	cs.n[key]++
	return func() {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		if cs.n[key]--; cs.n[key] <= 0 {
			delete(cs.n, key)
		}
	}, nil
}

// limitRate refuses a request over its caller's rate: 429 (−31429 on
// JSON-RPC) with the seconds to wait.
func (s *Server) limitRate(c *call) *schemas.Error {
	l := s.cfg.Limits.of(c)
	if l.Rate <= 0 {
		return nil
	}
	ok, wait := s.rate.allow(c.limitKey(), l, time.Now())
	if ok {
		return nil
	}
	s.m.limited.Inc(limitCaller)
	e := schemas.Errorf(schemas.ErrRateLimited, "this caller is over its rate of %g requests a second (burst %d) at trust level %q; retry after the time given", l.Rate, max(l.Burst, 1), c.trust)
	e.RetryAfter = int(math.Ceil(wait.Seconds()))
	return e
}

// unfinishedRetry is the wait a caller over its unfinished-task quota is
// told: long enough for a running task to move.
const unfinishedRetry = 5

// limitUnfinished refuses a new task of a caller at its quota of
// unfinished tasks, and any new task while the task store is nearly full
// (storeFullShare of the bucket): stored tasks that nobody finishes would
// otherwise leave a new task accepted but never able to progress.
func (s *admission) limitUnfinished(c *call) error {
	if limit := s.taskMaxBytes; limit > 0 {
		if used := s.index.StoredBytes(); float64(used) > storeFullShare*float64(limit) {
			// What frees room is not for the edge to time: tasks finishing,
			// answered or canceled, or waiting past IdleAfter for input and
			// expiring; so the message names them and Retry-After is a
			// modest poll interval, not the idle expiry's hours.
			frees := "tasks finish, are answered or canceled"
			if s.cfg.IdleAfter > 0 {
				frees += ", or expire after waiting " + s.cfg.IdleAfter.String() + " for input"
			}
			e := schemas.Errorf(schemas.ErrUnavailable, "the task store is nearly full (%d of %d bytes, mostly tasks not finished); room frees as %s; retry later", used, limit, frees)
			e.RetryAfter = storeFullRetry
			return e
		}
	}
	l := s.cfg.Limits.of(c)
	if l.MaxUnfinished <= 0 && l.MaxUnfinishedBytes <= 0 {
		return nil
	}
	n, size := s.index.Unfinished(c.caller.principal, c.caller.tenant, c.caller.origin)
	var e *schemas.Error
	switch {
	case l.MaxUnfinished > 0 && n >= l.MaxUnfinished:
		e = schemas.Errorf(schemas.ErrRateLimited, "this caller has %d unfinished tasks, its limit; finish, answer or cancel one before starting another", n)
	case l.MaxUnfinishedBytes > 0 && size >= l.MaxUnfinishedBytes:
		e = schemas.Errorf(schemas.ErrRateLimited, "this caller's unfinished tasks hold %d bytes, its limit of %d; finish, answer or cancel some before starting another", size, l.MaxUnfinishedBytes)
	default:
		return nil
	}
	s.limited.Inc(limitUnfinished)
	e.RetryAfter = unfinishedRetry
	return e
}

// storeFullShare is how full the task store may be before new tasks are
// refused, and storeFullRetry the wait they are told. Finished tasks are
// bounded well below it (MaxFinishedBytes, half the bucket by default), so
// only unfinished ones can bring it there.
const (
	storeFullShare = 0.9
	storeFullRetry = 30
)

// allowAddress applies the default rate limit, by source address, to a
// request of a side door declared LimitAddress (it has no principal, or
// has not checked it yet), in bucket: the routes of one family share it.
// Over it: 429 with Retry-After, and false.
func (s *Server) allowAddress(w http.ResponseWriter, r *http.Request, bucket string) bool {
	l := s.cfg.Limits.Default
	if l.Rate <= 0 {
		return true
	}
	ok, wait := s.rate.allow("\x02"+bucket+" "+origin(r), l, time.Now())
	if !ok {
		s.m.limited.Inc(limitAddress)
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		writePlain(w, http.StatusTooManyRequests, "too many requests from this address; retry after the time given")
	}
	return ok
}
