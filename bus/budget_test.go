package bus_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
)

// budgetClock is a clock a test moves by hand.
type budgetClock struct{ ns atomic.Int64 }

func (c *budgetClock) now() time.Time         { return time.Unix(0, c.ns.Load()).UTC() }
func (c *budgetClock) set(t time.Time)        { c.ns.Store(t.UnixNano()) }
func (c *budgetClock) add(d time.Duration)    { c.ns.Add(int64(d)) }
func newBudgetClock(t time.Time) *budgetClock { c := &budgetClock{}; c.set(t); return c }
func mustRefusal(t *testing.T, err error) *schemas.Error {
	t.Helper()
	if !errors.Is(err, schemas.ErrRateLimited) {
		t.Fatalf("want a budget refusal (RATE_LIMITED), got %v", err)
	}
	return schemas.AsError(err)
}

// Two connections share one budget: charges from both count against one
// counter, concurrent charges never pass the limit, the refusal says
// when the window resets, a refund gives a task back, and the next window
// starts at zero.
func TestBudgetsAreSharedAndWindowed(t *testing.T) {
	srv, b1 := bustest.New(t, bustest.Options{})
	b2 := bustest.Connect(t, srv, bustest.Options{})
	start := time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)
	clk := newBudgetClock(start.Add(20 * time.Minute))
	pol := bus.BudgetPolicy{
		Rules: []bus.BudgetRule{
			{Scope: schemas.BudgetScopePrincipal, Default: true, Period: time.Hour, Tasks: 5},
			{Scope: schemas.BudgetScopeTenant, ID: "acme", Period: 24 * time.Hour, Tasks: 100},
		},
		Now: clk.now,
	}
	if err := pol.Check(); err != nil {
		t.Fatal(err)
	}
	bs := []*bus.Budgets{b1.Budgets(pol), b2.Budgets(pol)}
	ctx := context.Background()
	alice := bus.Owner{Principal: "alice", Tenant: "acme"}

	// Sixteen charges at once, alternating connections: five pass.
	var wg sync.WaitGroup
	var passed, refused atomic.Int32
	ready := make(chan struct{})
	for i := range 16 {
		wg.Go(func() {
			<-ready
			_, err := bs[i%2].ChargeTask(ctx, alice)
			switch {
			case err == nil:
				passed.Add(1)
			case errors.Is(err, schemas.ErrRateLimited):
				refused.Add(1)
			default:
				t.Errorf("charge: %v", err)
			}
		})
	}
	close(ready)
	wg.Wait()
	if passed.Load() != 5 || refused.Load() != 11 {
		t.Fatalf("%d charges passed, %d refused; want 5 and 11", passed.Load(), refused.Load())
	}
	_, err := bs[0].ChargeTask(ctx, alice)
	e := mustRefusal(t, err)
	if e.Metadata["resetsAt"] != "2030-01-02T11:00:00Z" || e.Metadata["budgetScope"] != "principal" || e.Metadata["budgetLeft"] != "0" {
		t.Fatalf("refusal metadata %v", e.Metadata)
	}
	if e.RetryAfter != 40*60 {
		t.Fatalf("Retry-After %d, want %d", e.RetryAfter, 40*60)
	}
	// A refused charge left the tenant's budget as it was: 5, not 6+.
	st, err := bs[1].Status(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st[0].Used != 5 || st[0].Left != 0 || st[1].Scope != "tenant" || st[1].Used != 5 || !st[1].ResetsAt.Equal(time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("status %+v", st)
	}
	// bob has his own principal budget, but shares the tenant's.
	bob := bus.Owner{Principal: "bob", Tenant: "acme"}
	ch, err := bs[1].ChargeTask(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	if err := bs[0].Refund(ctx, ch); err != nil {
		t.Fatal(err)
	}
	st, _ = bs[0].Status(ctx, bob)
	if st[0].Used != 0 || st[1].Used != 5 {
		t.Fatalf("after a refund: %+v", st)
	}

	// The next window starts at zero, on every connection.
	clk.add(40 * time.Minute)
	for i := range 5 {
		if _, err := bs[i%2].ChargeTask(ctx, alice); err != nil {
			t.Fatalf("charge %d of the new window: %v", i, err)
		}
	}
	_, err = bs[1].ChargeTask(ctx, alice)
	if e := mustRefusal(t, err); e.Metadata["resetsAt"] != "2030-01-02T12:00:00Z" {
		t.Fatalf("refusal in the second window: %v", e.Metadata)
	}
}

// A tenant's budget refusing after its principal's was charged leaves the
// principal's as it was.
func TestBudgetRefusalRefundsTheOthers(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	clk := newBudgetClock(time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC))
	bs := b.Budgets(bus.BudgetPolicy{Rules: []bus.BudgetRule{
		{Scope: schemas.BudgetScopePrincipal, Default: true, Period: time.Hour, Tasks: 10},
		{Scope: schemas.BudgetScopeTenant, Default: true, Period: time.Hour, Tasks: 2},
	}, Now: clk.now})
	ctx := context.Background()
	for _, p := range []string{"a", "b"} {
		if _, err := bs.ChargeTask(ctx, bus.Owner{Principal: p, Tenant: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	c := bus.Owner{Principal: "c", Tenant: "t"}
	_, err := bs.ChargeTask(ctx, c)
	if e := mustRefusal(t, err); e.Metadata["budgetScope"] != "tenant" {
		t.Fatalf("refused by %v", e.Metadata)
	}
	st, err := bs.Status(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Scope != "principal" || st[0].Used != 0 {
		t.Fatalf("the principal's budget after the tenant's refusal: %+v", st)
	}
}

// Tokens are added whatever is left, and a spent tokens budget refuses.
func TestTokenBudget(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	bs := b.Budgets(bus.BudgetPolicy{Rules: []bus.BudgetRule{{Scope: schemas.BudgetScopeTenant, Default: true, Period: time.Hour, Tokens: 100}}})
	ctx := context.Background()
	o := bus.Owner{Tenant: "t"}
	if err := bs.CheckTokens(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := bs.AddTokens(ctx, o, 90); err != nil {
		t.Fatal(err)
	}
	if err := bs.CheckTokens(ctx, o); err != nil {
		t.Fatalf("10 tokens left: %v", err)
	}
	if err := bs.AddTokens(ctx, o, 30); err != nil {
		t.Fatal(err)
	}
	mustRefusal(t, bs.CheckTokens(ctx, o))
	st, _ := bs.Status(ctx, o)
	if len(st) != 1 || st[0].Used != 120 || st[0].Left != 0 || st[0].Kind != schemas.BudgetTokens {
		t.Fatalf("status %+v", st)
	}
}

func TestBudgetPolicyCheck(t *testing.T) {
	for _, r := range []bus.BudgetRule{
		{Scope: "team", Default: true, Period: time.Hour, Tasks: 1},
		{Scope: "tenant", Period: time.Hour, Tasks: 1},
		{Scope: "tenant", ID: "x", Default: true, Period: time.Hour, Tasks: 1},
		{Scope: "tenant", ID: "x", Period: 1500 * time.Millisecond, Tasks: 1},
		{Scope: "tenant", ID: "x", Period: time.Hour},
		{Scope: "tenant", ID: "x", Period: time.Hour, Tasks: -1, Tokens: 5},
	} {
		if err := (bus.BudgetPolicy{Rules: []bus.BudgetRule{r}}).Check(); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
}
