package edge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// Budgets at the edge: a new task is charged to every tasks budget of its
// caller's principal and tenant before it reaches the lifecycle, and
// refunded when it is then not created (a later interceptor or the
// lifecycle refused it), so a refused task leaves neither a record nor a
// count. A new task for an agent whose runs spend model tokens (its
// registration's spendsTokens: the llm kind) is refused while a tokens
// budget of its caller is spent. The counters are the bus's
// (bus.Budgets), shared by every edge and worker. GET /a2a/budget shows a
// caller its budgets.

// budgetGate holds the edge's budgets: the counters on the bus, the agent
// directory that says which agents spend tokens, and the refusal count.
type budgetGate struct {
	counters *bus.Budgets
	agents   *bus.AgentDirectory
	refused  bus.Counter // a2a_budget_refusals_total{scope,kind}
	log      *slog.Logger
}

// newBudgetGate is the gate of p on b, nil when p has no rules.
func newBudgetGate(b Bus, p bus.BudgetPolicy, agents *bus.AgentDirectory, m *bus.Metrics, log *slog.Logger) *budgetGate {
	if len(p.Rules) == 0 {
		return nil
	}
	return &budgetGate{
		counters: b.Budgets(p),
		agents:   agents,
		refused:  m.Counter("a2a_budget_refusals_total", "New tasks this edge refused because a budget of their caller was spent, by the budget's scope (principal, tenant) and kind (tasks, tokens).", "scope", "kind"),
		log:      log,
	}
}

// charge is the interceptor: a new task passes its caller's tokens
// budgets (for an agent that spends tokens) and is charged to its tasks
// budgets; a charge whose task is not created is refunded.
func (g *budgetGate) charge(ctx context.Context, inv *invocation, next invoker) (any, error) {
	if g == nil || newTask(inv) == nil {
		return next(ctx, inv)
	}
	c := inv.call
	o := bus.Owner{Principal: c.caller.principal, Tenant: c.caller.tenant}
	if reg, ok := g.agents.Get(c.agent); ok && reg.SpendsTokens {
		if err := g.counters.CheckTokens(ctx, o); err != nil {
			g.count(err)
			return nil, err
		}
	}
	ch, err := g.counters.ChargeTask(ctx, o)
	if err != nil {
		g.count(err)
		return nil, err
	}
	res, err := next(ctx, inv)
	if err != nil && !c.created && ch != nil {
		if rerr := g.counters.Refund(context.WithoutCancel(ctx), ch); rerr != nil {
			g.log.Warn("refunding the budget charge of a task that was not created failed; its budgets count one task too many until their windows end",
				"agent", c.agent, "principal", c.caller.principal, "tenant", c.caller.tenant, "err", rerr)
		}
	}
	return res, err
}

// count counts a budget's refusal by its scope and kind.
func (g *budgetGate) count(err error) {
	if e := schemas.AsError(err); errors.Is(err, schemas.ErrRateLimited) && e.Metadata["budgetScope"] != "" {
		g.refused.Inc(e.Metadata["budgetScope"], e.Metadata["budgetKind"])
	}
}

// handleBudget answers GET /a2a/budget: the budgets that apply to the
// caller's principal and tenant (schemas.BudgetList). An admin may ask
// about another with ?principal= and ?tenant=; any caller about another
// of its own tenants with ?tenant=.
func (s *Server) handleBudget(w http.ResponseWriter, r *http.Request) {
	who := sideCaller(r)
	q := r.URL.Query()
	for k := range q {
		if k != "principal" && k != "tenant" {
			writeStatus(w, schemas.Errorf(schemas.ErrInvalidRequest, "unknown query parameter %q; GET /a2a/budget takes principal and tenant (another's: admins only)", k), 0)
			return
		}
	}
	admin := who.admin || (!s.authenticates() && s.cfg.OpenAdmin)
	o := bus.Owner{Principal: who.principal, Tenant: who.tenant}
	if q.Has("principal") {
		if p := q.Get("principal"); p != who.principal && !admin {
			writeStatus(w, schemas.Errorf(schemas.ErrPermissionDenied, "only an admin principal may read another principal's budgets"), 0)
			return
		}
		o.Principal = q.Get("principal")
	}
	if q.Has("tenant") {
		if t := q.Get("tenant"); t != who.tenant && !admin && !slices.Contains(who.tenants, t) {
			writeStatus(w, schemas.Errorf(schemas.ErrPermissionDenied, "tenant %q is not one of this principal's; only an admin may read another tenant's budgets", t), 0)
			return
		}
		o.Tenant = q.Get("tenant")
	}
	out := schemas.BudgetList{Principal: o.Principal, Tenant: o.Tenant, Budgets: []schemas.BudgetStatus{}}
	if s.budgets != nil {
		st, err := s.budgets.counters.Status(r.Context(), o)
		if err != nil {
			e := schemas.AsError(err)
			if errors.Is(e, schemas.ErrInternal) {
				s.log.Warn("reading budgets failed", "err", err)
			}
			writeStatus(w, e, 0)
			return
		}
		if st != nil {
			out.Budgets = st
		}
	}
	writeREST(w, "application/json", out)
}

// sideCallerKey carries the caller admitSideCaller admitted to its
// handler (sideCaller reads it).
type sideCallerKey struct{}

func sideCaller(r *http.Request) caller {
	who, _ := r.Context().Value(sideCallerKey{}).(caller)
	return who
}

// admitSideCaller admits a side door's caller as the front door admits an
// A2A call (admitCaller: authentication, then the caller's rate), and
// answers a refusal as HTTP+JSON does (google.rpc.Status, with the
// challenge or Retry-After).
func (s *Server) admitSideCaller(w http.ResponseWriter, r *http.Request) *http.Request {
	var c call
	if err := s.admitCaller(r, &c); err != nil {
		e, f := s.callerRefusal(r, err)
		status := 0
		if f != nil {
			if f.Challenge != "" {
				w.Header().Set("WWW-Authenticate", f.Challenge)
			}
			if !errors.Is(e, schemas.ErrUnavailable) {
				status = f.Status
			}
		}
		writeStatus(w, e, status)
		return nil
	}
	if c.level != nil && c.level.Refuse {
		writeStatus(w, s.refuseLevel(&c), 0)
		return nil
	}
	return r.WithContext(context.WithValue(r.Context(), sideCallerKey{}, c.caller))
}

// callerSide declares a side door of PolicyCaller: admitted and limited
// as the front door admits A2A calls (admitSideCaller).
func callerSide(pattern string, h func(*Server, http.ResponseWriter, *http.Request)) routeDecl {
	d := side(pattern, PolicyCaller, "", 0, h)
	d.Limit = LimitCaller
	return d
}
