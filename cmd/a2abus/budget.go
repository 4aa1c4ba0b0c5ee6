package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// BudgetRuleConfig is one budget of the config file's "budgets" list
// (bus.BudgetRule says what each part means), read by every process of a
// deployment alike (serve, edge, worker: edges charge tasks, llm workers
// count tokens):
//
//	"budgets": [
//	  {"principal": "alice", "period": "1h", "tasks": 100, "tokens": 200000},
//	  {"principal": "*", "period": "24h", "tasks": 1000},
//	  {"tenant": "acme", "period": "24h", "tokens": 5000000}
//	]
//
// A rule names one principal (as the edge names it: an API key's name,
// jwt:ISSUER#SUB, cert:NAME) or one tenant; "*" is every principal (or
// tenant) that no rule of its scope names. period is a Go duration of
// whole seconds: windows are aligned to it (multiples of the period since
// the Unix epoch, UTC), so a 24h budget resets at 00:00 UTC. tasks and
// tokens are the limits per window; an absent one is not limited.
type BudgetRuleConfig struct {
	Principal string           `json:"principal,omitempty"`
	Tenant    string           `json:"tenant,omitempty"`
	Period    schemas.Duration `json:"period"`
	Tasks     int64            `json:"tasks,omitempty"`
	Tokens    int64            `json:"tokens,omitempty"`
}

// budgetPolicy is the bus's BudgetPolicy of rules, or what is wrong with
// them, each error saying which rule.
func budgetPolicy(rules []BudgetRuleConfig) (bus.BudgetPolicy, error) {
	var p bus.BudgetPolicy
	var errs []error
	for i, c := range rules {
		where := fmt.Sprintf("budgets[%d]", i)
		r := bus.BudgetRule{Period: time.Duration(c.Period), Tasks: c.Tasks, Tokens: c.Tokens}
		switch {
		case c.Principal != "" && c.Tenant != "":
			errs = append(errs, fmt.Errorf("%s: name a principal or a tenant, not both (make two rules)", where))
			continue
		case c.Principal != "":
			r.Scope, r.ID = schemas.BudgetScopePrincipal, c.Principal
		case c.Tenant != "":
			r.Scope, r.ID = schemas.BudgetScopeTenant, c.Tenant
		default:
			errs = append(errs, fmt.Errorf(`%s: name a principal or a tenant ("*" for every one)`, where))
			continue
		}
		if r.ID == "*" {
			r.ID, r.Default = "", true
		}
		if err := r.Check(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		p.Rules = append(p.Rules, r)
	}
	if len(errs) == 0 {
		if err := p.Check(); err != nil {
			errs = append(errs, fmt.Errorf("budgets: %w", err))
		}
	}
	return p, errors.Join(errs...)
}

// runBudget is "a2abus budget EDGE_URL": the caller's budgets at an
// a2abus edge (GET /a2a/budget), as a table or --json; an admin may name
// another principal or tenant.
func runBudget(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("a2abus budget", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o clientOptions
	o.credentialFlags(fs, "", "")
	asJSON := fs.Bool("json", false, "print the edge's JSON answer")
	principal := fs.String("principal", "", "another principal's budgets (admins only)")
	tenant := fs.String("tenant", "", "another tenant's budgets (admins, or one of the caller's tenants)")
	timeout := fs.Duration("timeout", 30*time.Second, "timeout of the request")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: a2abus budget EDGE_URL [--principal P] [--tenant T] [--json]")
	}
	o.credentialsFromEnv(getenv)
	base := strings.TrimSuffix(pos[0], "/")
	q := url.Values{}
	if *principal != "" {
		q.Set("principal", *principal)
	}
	if *tenant != "" {
		q.Set("tenant", *tenant)
	}
	path := "/a2a/budget"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	raw, err := adminCall(ctx, &o, base, path, nil, *timeout)
	if err != nil {
		return err
	}
	var list schemas.BudgetList
	if err := json.Unmarshal(raw, &list); err != nil {
		return &cliError{msg: fmt.Sprintf("the edge's answer is not a budget list: %v", err), err: err}
	}
	if *asJSON {
		out, _ := json.MarshalIndent(list, "", "  ")
		fmt.Fprintln(stdout, string(out))
		return nil
	}
	printBudgets(stdout, list, time.Now())
	return nil
}

// printBudgets writes list as a table, one budget a line.
func printBudgets(w io.Writer, list schemas.BudgetList, now time.Time) {
	who := "anonymous"
	if list.Principal != "" {
		who = "principal " + list.Principal
	}
	if list.Tenant != "" {
		who += ", tenant " + list.Tenant
	}
	if len(list.Budgets) == 0 {
		fmt.Fprintf(w, "no budget applies to %s\n", who)
		return
	}
	fmt.Fprintf(w, "budgets of %s\n", who)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tID\tKIND\tPERIOD\tLIMIT\tUSED\tLEFT\tRESETS AT")
	for _, b := range list.Budgets {
		id := b.ID
		if id == "" {
			id = "(default tenant)"
		}
		in := b.ResetsAt.Sub(now).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s (in %s)\n", b.Scope, id, b.Kind, bus.PeriodString(time.Duration(b.Period)),
			b.Limit, b.Used, b.Left, b.ResetsAt.UTC().Format(time.RFC3339), max(in, 0))
	}
	_ = tw.Flush()
}
