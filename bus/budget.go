package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// Budgets: what a principal or a tenant may spend per period — tasks
// started, tokens of llm completions — counted in BucketBudgets, so every
// edge and worker of a cluster counts against the same numbers (no
// process counts on its own).
//
// Windows are fixed and aligned to the period: a window of period p
// starts at a multiple of p seconds since the Unix epoch (UTC), so every
// process computes the same window and the same reset time from its own
// clock (24h windows start at 00:00 UTC; 1h windows on the hour; 7 × 24h
// windows on Thursdays, as the epoch was one). Each window of each budget
// has its own counter (schemas.BudgetKey), so a new window starts at zero
// with no reset to coordinate.
//
// A counter changes only by compare-and-swap on its revision (a write
// with Nats-Expected-Last-Subject-Sequence), retried on conflict: two
// edges charging at once both see the other's charge, and a charge at the
// limit is refused whatever edge it lands on. Each write carries a message
// TTL that outlives the counter's window by budgetKeyGrace (a per-key TTL
// rather than the bucket's: rules of different periods share the bucket,
// and a bucket TTL is one duration, which every process provisioning the
// bucket would have to agree on whatever its own rules).

// BudgetRule is one budget: Tasks tasks started and Tokens model tokens
// spent per Period by each principal (Scope schemas.BudgetScopePrincipal)
// or tenant (schemas.BudgetScopeTenant). A rule names its principal or
// tenant by ID (a principal as the edge names it: an API key's name,
// jwt:ISSUER#SUB, cert:NAME), or with Default applies to every principal
// or tenant that no rule of its scope names. Zero Tasks or Tokens: that
// kind is not limited by the rule.
type BudgetRule struct {
	Scope   string
	ID      string
	Default bool
	Period  time.Duration
	Tasks   int64
	Tokens  int64
}

// BudgetPolicy is every budget of the bus. The rules of a principal are
// those naming it, else the default rules of the principal scope; the
// same for a tenant. The principal scope applies to authenticated
// principals only: anonymous callers are held to their tenant's budgets
// (the tenant "" of an edge that authenticates no one).
type BudgetPolicy struct {
	Rules []BudgetRule
	// Now is the clock windows are computed by; nil: time.Now. Tests move
	// it to cross a window's end.
	Now func() time.Time
}

// Check reports what is wrong with the policy's rules, each by its index
// (see BudgetRule.Check), and two rules of one scope, holder and period,
// which would count in one counter.
func (p BudgetPolicy) Check() error {
	var errs []error
	type slot struct {
		scope, id string
		def       bool
		period    time.Duration
	}
	seen := map[slot]int{}
	for i, r := range p.Rules {
		if err := r.Check(); err != nil {
			errs = append(errs, fmt.Errorf("rule %d: %w", i, err))
			continue
		}
		k := slot{r.Scope, r.ID, r.Default, r.Period}
		if j, ok := seen[k]; ok {
			errs = append(errs, fmt.Errorf("rules %d and %d are both for the same %s and period %s; make them one rule", j, i, r.Scope, PeriodString(r.Period)))
		}
		seen[k] = i
	}
	return errors.Join(errs...)
}

// Check reports what is wrong with the rule: an unknown scope, a rule both
// named and default (or neither), a period that is not a whole number of
// seconds of at least one, no limit or a negative one.
func (r BudgetRule) Check() error {
	var errs []error
	if r.Scope != schemas.BudgetScopePrincipal && r.Scope != schemas.BudgetScopeTenant {
		errs = append(errs, fmt.Errorf("scope %q is neither %s nor %s", r.Scope, schemas.BudgetScopePrincipal, schemas.BudgetScopeTenant))
	}
	if r.Default == (r.ID != "") {
		errs = append(errs, fmt.Errorf("name one %s, or make it the default for every %s, not both or neither", r.Scope, r.Scope))
	}
	if r.Period < time.Second || r.Period%time.Second != 0 {
		errs = append(errs, fmt.Errorf("period %s is not a whole number of seconds of at least 1s", r.Period))
	}
	if r.Tasks < 0 || r.Tokens < 0 || r.Tasks == 0 && r.Tokens == 0 {
		errs = append(errs, errors.New("give a positive tasks or tokens limit (or both)"))
	}
	return errors.Join(errs...)
}

// budgetKeyGrace is how long a counter outlives its window: the budget
// route still reads a window that just ended, and a refund racing the
// window's end finds its counter.
const budgetKeyGrace = time.Minute

// budgetCASAttempts bounds the compare-and-swap retries of one counter
// change; past it the change fails as unavailable (the counter is that
// contended).
const budgetCASAttempts = 32

// Budgets counts and enforces a BudgetPolicy on the bus (BucketBudgets).
// It is safe for concurrent use. Errors: a refusal is a *schemas.Error of
// row ErrRateLimited (RetryAfter: the seconds to the window's end;
// metadata budgetScope, budgetKind, budgetLimit, budgetLeft, resetsAt);
// bus trouble matches schemas.ErrUnavailable.
type Budgets struct {
	b     *Bus
	rules []BudgetRule
	now   func() time.Time
}

// Budgets returns the counters of p on b.
func (b *Bus) Budgets(p BudgetPolicy) *Budgets {
	now := p.Now
	if now == nil {
		now = time.Now
	}
	return &Budgets{b: b, rules: append([]BudgetRule(nil), p.Rules...), now: now}
}

// Active reports whether any rule limits kind (schemas.BudgetTasks,
// schemas.BudgetTokens).
func (bs *Budgets) Active(kind string) bool {
	for _, r := range bs.rules {
		if r.limit(kind) > 0 {
			return true
		}
	}
	return false
}

func (r BudgetRule) limit(kind string) int64 {
	if kind == schemas.BudgetTokens {
		return r.Tokens
	}
	return r.Tasks
}

// budgetCounter is one window of one budget that applies to a holder.
type budgetCounter struct {
	key   string
	val   schemas.BudgetCount
	limit int64
	end   time.Time
}

// counters are the counters of kind's budgets that apply to o in the
// window of now: its principal's (named, else default) and its tenant's.
func (bs *Budgets) counters(o Owner, kind string, now time.Time) []budgetCounter {
	var out []budgetCounter
	for _, sc := range []struct{ scope, id string }{{schemas.BudgetScopePrincipal, o.Principal}, {schemas.BudgetScopeTenant, o.Tenant}} {
		if sc.scope == schemas.BudgetScopePrincipal && sc.id == "" {
			continue // anonymous: held to its tenant's budgets
		}
		named := false
		for _, r := range bs.rules {
			if r.Scope == sc.scope && !r.Default && r.ID == sc.id {
				named = true
			}
		}
		for _, r := range bs.rules {
			if r.Scope != sc.scope || r.Default == named || (named && r.ID != sc.id) || r.limit(kind) <= 0 {
				continue
			}
			p := int64(r.Period / time.Second)
			s := now.Unix()
			start := s - ((s%p)+p)%p
			out = append(out, budgetCounter{
				key:   schemas.BudgetKey(kind, sc.scope, sc.id, p, start),
				val:   schemas.BudgetCount{Scope: sc.scope, ID: sc.id, Kind: kind, Period: schemas.Duration(r.Period), Start: time.Unix(start, 0).UTC()},
				limit: r.limit(kind),
				end:   time.Unix(start+p, 0).UTC(),
			})
		}
	}
	return out
}

// BudgetCharge is what ChargeTask counted, for Refund.
type BudgetCharge struct {
	counters []budgetCounter
}

// ChargeTask counts one task against every tasks budget that applies to
// o. At a budget's limit nothing is counted (what was counted against the
// others before it is refunded) and the error is that budget's refusal.
// A nil charge and nil error: no tasks budget applies.
func (bs *Budgets) ChargeTask(ctx context.Context, o Owner) (*BudgetCharge, error) {
	now := bs.now()
	cs := bs.counters(o, schemas.BudgetTasks, now)
	if len(cs) == 0 {
		return nil, nil
	}
	ch := &BudgetCharge{}
	for _, c := range cs {
		used, ok, err := bs.add(ctx, c, 1, c.limit, now)
		if err != nil || !ok {
			if rerr := bs.Refund(context.WithoutCancel(ctx), ch); rerr != nil {
				bs.b.log.Warn("refunding a refused task's budget charge failed", "err", rerr)
			}
			if err != nil {
				return nil, err
			}
			return nil, bs.refusal(c, used, now)
		}
		ch.counters = append(ch.counters, c)
	}
	return ch, nil
}

// Refund takes back a charge of a task that was not created. A nil charge
// is nothing to refund.
func (bs *Budgets) Refund(ctx context.Context, ch *BudgetCharge) error {
	if ch == nil {
		return nil
	}
	var errs []error
	now := bs.now()
	for _, c := range ch.counters {
		if _, _, err := bs.add(ctx, c, -1, -1, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CheckTokens refuses (as ChargeTask does) when a tokens budget that
// applies to o has nothing left in its window.
func (bs *Budgets) CheckTokens(ctx context.Context, o Owner) error {
	now := bs.now()
	for _, c := range bs.counters(o, schemas.BudgetTokens, now) {
		used, err := bs.read(ctx, c, false)
		if err == nil && used >= c.limit {
			// A replica may lag: a refusal is decided on the leader's count.
			used, err = bs.read(ctx, c, true)
		}
		if err != nil {
			return err
		}
		if used >= c.limit {
			return bs.refusal(c, used, now)
		}
	}
	return nil
}

// AddTokens counts n tokens against every tokens budget that applies to
// o, whatever is left: a completion is counted once it is spent, so a
// budget can end over its limit by the completion that crossed it.
func (bs *Budgets) AddTokens(ctx context.Context, o Owner, n int64) error {
	if n <= 0 {
		return nil
	}
	now := bs.now()
	var errs []error
	for _, c := range bs.counters(o, schemas.BudgetTokens, now) {
		if _, _, err := bs.add(ctx, c, n, -1, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Status is every budget that applies to o, tasks first, as of now.
func (bs *Budgets) Status(ctx context.Context, o Owner) ([]schemas.BudgetStatus, error) {
	now := bs.now()
	var out []schemas.BudgetStatus
	for _, kind := range []string{schemas.BudgetTasks, schemas.BudgetTokens} {
		for _, c := range bs.counters(o, kind, now) {
			used, err := bs.read(ctx, c, false)
			if err != nil {
				return nil, err
			}
			out = append(out, schemas.BudgetStatus{Scope: c.val.Scope, ID: c.val.ID, Kind: kind, Period: c.val.Period,
				Limit: c.limit, Used: used, Left: max(c.limit-used, 0), ResetsAt: c.end})
		}
	}
	return out, nil
}

// refusal is the error of a budget with nothing left.
func (bs *Budgets) refusal(c budgetCounter, used int64, now time.Time) error {
	wait := int(max((c.end.Sub(now)+time.Second-1)/time.Second, 1))
	resets := c.end.Format(time.RFC3339)
	e := schemas.Errorf(schemas.ErrRateLimited, "the %s budget of %s %q is spent: %d of %d %s per %s used, 0 left; it resets at %s (in %d s)",
		c.val.Kind, c.val.Scope, c.val.ID, used, c.limit, c.val.Kind, PeriodString(time.Duration(c.val.Period)), resets, wait).
		With("budgetScope", c.val.Scope).With("budgetKind", c.val.Kind).
		With("budgetLimit", strconv.FormatInt(c.limit, 10)).With("budgetLeft", "0").With("resetsAt", resets)
	e.RetryAfter = wait
	return e
}

// PeriodString writes a budget's period without the zero units Go's
// duration spelling adds ("1h", "90m" as "1h30m", "24h").
func PeriodString(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	if s == "" || strings.HasSuffix(s, "m") || strings.HasSuffix(s, "h") {
		return s
	}
	return d.String()
}

// read is a counter's count (0 when it has none), from any replica or,
// with leader, from the stream's leader.
func (bs *Budgets) read(ctx context.Context, c budgetCounter, leader bool) (int64, error) {
	kv, err := bs.b.budgets.get(ctx, bs.b.js, schemas.BucketBudgets)
	if err != nil {
		return 0, err
	}
	val, _, err := bs.get(ctx, kv, c.key, leader)
	if err != nil {
		return 0, err
	}
	return val.Used, nil
}

// get reads a counter and the revision a compare-and-swap of it expects:
// the last message on its subject, a marker of an expired or deleted key
// included (count 0).
func (bs *Budgets) get(ctx context.Context, kv jetstream.KeyValue, key string, leader bool) (schemas.BudgetCount, uint64, error) {
	var val schemas.BudgetCount
	var data []byte
	var rev uint64
	if leader {
		m, err := bs.b.leaderGet(ctx, kvStream(schemas.BucketBudgets), kvPrefix(schemas.BucketBudgets)+key)
		switch {
		case errors.Is(err, errNoMessage):
			return val, 0, nil
		case err != nil:
			return val, 0, errUnavailable("bus: read budget "+key, err)
		case kvOperation(m.Header) != jetstream.KeyValuePut:
			return val, m.Seq, nil
		}
		data, rev = m.Data, m.Seq
	} else {
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return val, 0, nil
		case err != nil:
			return val, 0, errUnavailable("bus: read budget "+key, err)
		}
		data, rev = e.Value(), e.Revision()
	}
	if err := json.Unmarshal(data, &val); err != nil {
		return val, 0, fmt.Errorf("bus: budget counter %s is not a BudgetCount: %w", key, err)
	}
	return val, rev, nil
}

// add adds delta to a counter unless that takes it past ceiling (ceiling
// < 0: no ceiling; a count never goes below 0). It reports the count it
// ended with, or the count that refused it (ok false). The first read may
// come from any replica; after a conflict, and before a refusal, the
// count is read from the leader.
func (bs *Budgets) add(ctx context.Context, c budgetCounter, delta, ceiling int64, now time.Time) (int64, bool, error) {
	kv, err := bs.b.budgets.get(ctx, bs.b.js, schemas.BucketBudgets)
	if err != nil {
		return 0, false, err
	}
	ttl := max(c.end.Sub(now)+budgetKeyGrace, time.Second)
	for attempt := range budgetCASAttempts {
		leader := attempt > 0
		val, rev, err := bs.get(ctx, kv, c.key, leader)
		if err != nil {
			return 0, false, err
		}
		if ceiling >= 0 && val.Used+delta > ceiling {
			if !leader {
				continue // decide on the leader's count
			}
			return val.Used, false, nil
		}
		next := c.val
		next.Used = max(val.Used+delta, 0)
		if rev == 0 && delta < 0 {
			return 0, true, nil // nothing to refund: the counter is gone
		}
		data, _ := json.Marshal(next)
		m := nats.NewMsg(kvPrefix(schemas.BucketBudgets) + c.key)
		m.Data = data
		expectLastSubjectSeq(m, rev)
		withTTL(m, ttl)
		_, err = bs.b.publish(ctx, m)
		if err == nil {
			return next.Used, true, nil
		}
		var api *jetstream.APIError
		if !errors.As(err, &api) || (api.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence && api.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return 0, false, errUnavailable("bus: count budget "+c.key, err)
		}
		if attempt >= 2 {
			// Contended: spread the retries of the writers that lost.
			select {
			case <-ctx.Done():
				return 0, false, ctx.Err()
			case <-time.After(time.Duration(rand.Int64N(int64(attempt)*int64(time.Millisecond)) + 1)):
			}
		}
	}
	return 0, false, schemas.Errorf(schemas.ErrUnavailable, "the budget counter %s changed under %d attempts in a row; retry shortly", c.key, budgetCASAttempts)
}
