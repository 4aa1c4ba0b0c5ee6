package schemas

import "time"

// Budgets bound what a principal or a tenant may spend per period, across
// every edge and worker of a cluster: tasks started, and tokens of the
// llm kind's completions. Their counters are in BucketBudgets; these are
// the shapes the bucket, the edge's budget route and the CLI share.

// The scopes a budget applies to.
const (
	BudgetScopePrincipal = "principal"
	BudgetScopeTenant    = "tenant"
)

// The kinds of what a budget counts.
const (
	BudgetTasks  = "tasks"
	BudgetTokens = "tokens"
)

// BudgetCount is the value of a counter in BucketBudgets: what was spent
// in one window of one budget. Scope, ID, Kind, Period and Start repeat
// what the key says in digest form, for operators reading the bucket.
type BudgetCount struct {
	Scope  string    `json:"scope"`
	ID     string    `json:"id"`
	Kind   string    `json:"kind"`
	Period Duration  `json:"period"`
	Start  time.Time `json:"start"`
	Used   int64     `json:"used"`
}

// BudgetStatus is one budget as its holder sees it: what it allows in the
// current window, what is spent and left, and when the window ends.
type BudgetStatus struct {
	Scope    string    `json:"scope"`
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`
	Period   Duration  `json:"period"`
	Limit    int64     `json:"limit"`
	Used     int64     `json:"used"`
	Left     int64     `json:"left"`
	ResetsAt time.Time `json:"resetsAt"`
}

// BudgetList is the answer of the edge's GET /a2a/budget: every budget
// that applies to the principal and tenant asked about (none: no budget
// applies).
type BudgetList struct {
	Principal string         `json:"principal"`
	Tenant    string         `json:"tenant"`
	Budgets   []BudgetStatus `json:"budgets"`
}
