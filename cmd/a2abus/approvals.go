package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
)

// ApprovalsConfig is the edge's approval policy as the config file
// writes it (edge.ApprovalPolicy says what each part means):
//
//	"approvals": {
//	  "agents": ["deploy"],
//	  "skills": {"ops": ["restart"]},
//	  "approvers": ["carol", "jwt:https://idp.example#dave"],
//	  "expireAfter": "4h"
//	}
//
// A trust level requires approval with "approval": true in its trust
// section.
type ApprovalsConfig struct {
	Agents      []string            `json:"agents,omitempty"`
	Skills      map[string][]string `json:"skills,omitempty"`
	Approvers   []string            `json:"approvers,omitempty"`
	ExpireAfter Duration            `json:"expireAfter,omitempty"`
}

// policy is the edge's ApprovalPolicy of c, or what is wrong with it.
func (c ApprovalsConfig) policy() (edge.ApprovalPolicy, error) {
	var errs []error
	for _, a := range c.Approvers {
		if strings.TrimSpace(a) == "" {
			errs = append(errs, errors.New("approvals.approvers: an empty principal name"))
		}
	}
	for agent, skills := range c.Skills {
		if len(skills) == 0 {
			errs = append(errs, fmt.Errorf("approvals.skills.%s: no skill listed", agent))
		}
	}
	if time.Duration(c.ExpireAfter) < 0 {
		errs = append(errs, fmt.Errorf("approvals.expireAfter: %s is negative", time.Duration(c.ExpireAfter)))
	}
	return edge.ApprovalPolicy{Agents: c.Agents, Skills: c.Skills, Approvers: c.Approvers, ExpireAfter: time.Duration(c.ExpireAfter)}, errors.Join(errs...)
}

// runApprovals is "a2abus approvals EDGE_URL" (the pending approvals of
// the approver's tenant) and "a2abus approvals approve|deny EDGE_URL
// TASK_ID --reason WHY", as an admin principal or a configured approver
// (the edge's /a2a/admin/approvals routes).
func runApprovals(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	verb := "list"
	if len(args) > 0 && (args[0] == "approve" || args[0] == "deny") {
		verb, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("a2abus approvals "+strings.TrimPrefix(verb, "list"), flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o clientOptions
	o.credentialFlags(fs, " of an approver (an admin principal or one the edge lists)", "")
	reason := fs.String("reason", "", "why (required to deny: the caller is told)")
	output := fs.String("o", "text", "text or json")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	usageErr := func(format string, a ...any) error {
		fs.Usage()
		return fmt.Errorf(format, a...)
	}
	want := map[string]int{"list": 1, "approve": 2, "deny": 2}[verb]
	if len(pos) != want {
		if verb == "list" {
			return usageErr("usage: a2abus approvals EDGE_URL, or a2abus approvals approve|deny EDGE_URL TASK_ID --reason WHY")
		}
		return usageErr("usage: a2abus approvals %s EDGE_URL TASK_ID --reason WHY", verb)
	}
	if *output != "text" && *output != "json" {
		return usageErr("-o must be text or json, got %q", *output)
	}
	if verb == "deny" && strings.TrimSpace(*reason) == "" {
		return usageErr("a denial needs --reason: the caller is told it")
	}
	o.credentialsFromEnv(getenv)
	base := strings.TrimSuffix(pos[0], "/")
	path := "/a2a/admin/approvals"
	var body any
	if verb != "list" {
		path += "/" + pos[1]
		body = schemas.ApprovalDecision{Decision: verb, Reason: *reason}
	}
	raw, err := adminCall(ctx, &o, base, path, body, 30*time.Second)
	if err != nil {
		return err
	}
	if *output == "json" {
		_, err := stdout.Write(append(bytes.TrimSpace(raw), '\n'))
		return err
	}
	if verb != "list" {
		var r struct{ TaskID, State, Decision, DecidedBy string }
		if err := json.Unmarshal(raw, &r); err != nil {
			return &cliError{msg: "the edge's answer: " + err.Error(), err: err}
		}
		fmt.Fprintf(stdout, "%s %s by %s; the task is %s\n", r.TaskID, r.Decision, r.DecidedBy, strings.TrimPrefix(r.State, "TASK_STATE_"))
		return nil
	}
	var list struct {
		Approvals []schemas.ApprovalSummary `json:"approvals"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return &cliError{msg: "the edge's answer: " + err.Error(), err: err}
	}
	if len(list.Approvals) == 0 {
		fmt.Fprintln(stdout, "no approvals pending")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tAGENT\tCALLER\tTRUST\tWHY\tREQUESTED\tEXPIRES")
	for _, a := range list.Approvals {
		who := a.Owner
		if who == "" {
			who = cmpOr(a.Origin, "-")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.TaskID, a.Agent, who, cmpOr(a.Trust, "-"), strings.Join(a.Reasons, "; "),
			a.RequestedAt.UTC().Format(time.RFC3339), a.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// adminCall makes one call of an edge's own API (admin routes, the
// caller's budgets) with o's credentials: a GET of path (with its query),
// or a POST of body; the answer's body, or an error saying what the edge
// said, bounded by timeout.
func adminCall(ctx context.Context, o *clientOptions, base, path string, body any, timeout time.Duration) ([]byte, error) {
	method := http.MethodGet
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		method, rd = http.MethodPost, bytes.NewReader(b)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, method, base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header = o.credentialHeader()
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		err = discovery.RedactError(err, base)
		return nil, &cliError{msg: err.Error(), err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, &cliError{msg: "reading the edge's answer: " + err.Error(), err: err}
	}
	if resp.StatusCode/100 != 2 {
		msg := strings.TrimSpace(string(raw))
		// A refusal of the A2A front door is a JSON error; say its message.
		var st struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &st) == nil && st.Error.Message != "" {
			msg = st.Error.Message
		}
		where, _, _ := strings.Cut(path, "?")
		return nil, &cliError{msg: fmt.Sprintf("%s %s: %d %s", method, discovery.RedactURL(base+where), resp.StatusCode, msg)}
	}
	return raw, nil
}
