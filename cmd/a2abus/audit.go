package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// runAudit is "a2abus audit EDGE_URL": the audit record an edge reads
// from the bus (GET /a2a/admin/audit), as an admin principal, filtered by
// principal, task, agent and time, oldest first (newest last), as a table
// or JSON.
func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("a2abus audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o clientOptions
	o.credentialFlags(fs, " of an admin principal", "")
	principal := fs.String("principal", "", "only this principal's records (as the edge names it: an API key's name, jwt:ISSUER#SUB, cert:NAME)")
	task := fs.String("task", "", "only the records of this task id")
	agent := fs.String("agent", "", "only the records of this agent")
	since := fs.String("since", "", "only records since this RFC 3339 time, or this long ago (1h, 7d)")
	until := fs.String("until", "", "only records until this RFC 3339 time, or this long ago")
	limit := fs.Int("limit", 100, "at most this many records, the newest that match (1 to 10000)")
	asJSON := fs.Bool("json", false, "print the records as a JSON array")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: a2abus audit EDGE_URL [--principal P] [--task ID] [--agent NAME] [--since T] [--until T] [--limit N] [--json]")
	}
	now := time.Now()
	for _, t := range []struct{ name, v string }{{"since", *since}, {"until", *until}} {
		if t.v != "" {
			if _, err := schemas.ParseAuditTime(t.v, now); err != nil {
				return fmt.Errorf("--%s: %w", t.name, err)
			}
		}
	}
	if *limit < 1 || *limit > 10000 {
		return fmt.Errorf("--limit is a number from 1 to 10000")
	}
	o.credentialsFromEnv(getenv)
	q := url.Values{"limit": {strconv.Itoa(*limit)}}
	for k, v := range map[string]string{"principal": *principal, "task": *task, "agent": *agent, "since": *since, "until": *until} {
		if v != "" {
			q.Set(k, v)
		}
	}
	base := strings.TrimSuffix(pos[0], "/")
	raw, err := adminCall(ctx, &o, base, "/a2a/admin/audit?"+q.Encode(), nil, 60*time.Second)
	if err != nil {
		return err
	}
	var r struct {
		Records []schemas.AuditRecord `json:"records"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return &cliError{msg: "the edge's answer is not an audit listing: " + err.Error(), err: err}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if r.Records == nil {
			r.Records = []schemas.AuditRecord{}
		}
		return enc.Encode(r.Records)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tPRINCIPAL\tTENANT\tSOURCE\tTRUST\tMETHOD\tBINDING\tAGENT\tTASK\tDECISION\tOUTCOME")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, a := range r.Records {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Time.UTC().Format(time.RFC3339), dash(a.Principal), dash(a.Tenant),
			dash(a.Source), dash(a.Trust), dash(a.Method), dash(a.Binding), dash(a.Agent), dash(a.TaskID), dash(a.Decision), dash(a.Outcome))
	}
	return tw.Flush()
}

// auditKeys records a key file's change, taken or refused, in the audit
// record: a key rotation is an admin action. The keys are in use (or
// refused) by then, so a record that cannot be stored is logged.
func (p *process) auditKeys(b *bus.Bus) func(ctx context.Context, what string, err error) {
	return func(ctx context.Context, what string, err error) {
		r := schemas.AuditRecord{Kind: schemas.AuditAdmin, Method: schemas.AuditActionKeysReload + " (" + what + ")", Binding: "process",
			Decision: schemas.AuditAdmitted, Outcome: schemas.AuditOK}
		if err != nil {
			r.Decision, r.Outcome = schemas.AuditRefused, "the file does not load"
		}
		if aerr := b.AppendAudit(ctx, r); aerr != nil {
			p.log.Warn("the audit record of a key file's change could not be written", "keys", what, "err", aerr)
		}
	}
}
