package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
)

// The client commands: a2abus as an A2A client of any agent (not only
// a2abus). They read the agent's card to pick an interface, speak A2A 1.0
// (JSON-RPC or HTTP+JSON) or 0.3, print a readable summary or the A2A
// objects as JSON, and exit non-zero with an actionable message when the
// agent or the network says no.

const clientUsage = `Usage:
  a2abus card URL                       the agent's card
  a2abus send URL TEXT [--stream] [--no-wait] [--task ID] [--context ID]
  a2abus stream URL TEXT                is send --stream
  a2abus get URL TASK_ID [--history N]
  a2abus tasks URL [--context ID] [--state STATE] [--page-size N] [--page-token T]
  a2abus cancel URL TASK_ID
  a2abus subscribe URL TASK_ID [--last-event-id ID]
  a2abus agents URL [--skill ID] [--tag TAG] [--kind local|remote]   (an a2abus edge's registry)

URL is the agent's base URL (its card is read from URL/.well-known/agent-card.json
to pick an interface) or, with --binding, the endpoint itself. Flags may follow the
arguments. Exit status: 0 on success, 1 when the agent or the network failed or a
waited-for task ended FAILED, REJECTED or CANCELED, 2 on a usage error.

Flags:
`

// clientCommands are the commands runClient handles.
var clientCommands = map[string]int{"card": 1, "send": 2, "stream": 2, "get": 2, "tasks": 1, "cancel": 2, "subscribe": 2, "agents": 1}

// cliError is a failure reported by the agent or the network (exit 1), as
// opposed to a usage error (exit 2).
type cliError struct{ err error }

func (e *cliError) Error() string { return e.err.Error() }
func (e *cliError) Unwrap() error { return e.err }

type clientOptions struct {
	output, binding           string
	header                    http.Header
	timeout                   time.Duration
	allowPrivate              bool
	stream, noWait            bool
	taskID, contextID         string
	history, pageSize         int
	state, pageToken, lastEID string
	skills, tags              multiFlag
	kind                      string
}

func runClient(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("a2abus "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := clientOptions{header: http.Header{}}
	fs.StringVar(&o.output, "o", "text", "output: text or json")
	fs.Var(headerFlag(o.header), "header", "request header \"Name: value\", e.g. for auth (repeatable)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "timeout of a call (a stream waits as long as the task runs)")
	fs.StringVar(&o.binding, "binding", "auto", "auto (read the card), jsonrpc, rest or jsonrpc03")
	fs.BoolVar(&o.allowPrivate, "allow-private", true, "allow loopback and private addresses (metadata addresses are always refused)")
	if cmd == "stream" {
		cmd, o.stream = "send", true
	}
	switch cmd {
	case "send":
		fs.BoolVar(&o.stream, "stream", o.stream, "stream the task's progress as it happens")
		fs.BoolVar(&o.noWait, "no-wait", false, "return at once with the task as accepted (non-blocking send)")
		fs.StringVar(&o.taskID, "task", "", "continue this task (e.g. answer an input-required question)")
		fs.StringVar(&o.contextID, "context", "", "send within this context (conversation)")
	case "get":
		fs.IntVar(&o.history, "history", -1, "history messages to include (default: the agent's choice)")
	case "tasks":
		fs.StringVar(&o.contextID, "context", "", "only tasks of this context")
		fs.StringVar(&o.state, "state", "", "only tasks in this state, e.g. TASK_STATE_COMPLETED or completed")
		fs.IntVar(&o.pageSize, "page-size", 0, "tasks per page (default: the agent's)")
		fs.StringVar(&o.pageToken, "page-token", "", "page to read (nextPageToken of the previous page)")
	case "subscribe":
		fs.StringVar(&o.lastEID, "last-event-id", "", "resume after this event id")
	case "agents":
		fs.Var(&o.skills, "skill", "only agents offering this skill id (repeatable)")
		fs.Var(&o.tags, "tag", "only agents with a skill tagged so (repeatable)")
		fs.StringVar(&o.kind, "kind", "", "only local or remote agents")
	}
	fs.Usage = func() { fmt.Fprint(stderr, clientUsage); fs.PrintDefaults() }
	// Flags may come before, between or after the arguments.
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if want := clientCommands[cmd]; len(pos) != want {
		fs.Usage()
		return fmt.Errorf("%s takes %d argument(s), got %d", cmd, want, len(pos))
	}
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("-o must be text or json, got %q", o.output)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := &printer{w: stdout, json: o.output == "json"}
	var err error
	switch cmd {
	case "card":
		err = cmdCard(ctx, o, pos[0], out)
	case "agents":
		err = cmdAgents(ctx, o, pos[0], out)
	default:
		var c *discovery.Client
		if c, err = clientFor(ctx, o, pos[0]); err == nil {
			err = cmdCall(ctx, o, cmd, c, pos[1:], out)
		}
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return &cliError{describe(err)}
	}
	return nil
}

// describe rewrites an error into what a person can act on.
func describe(err error) error {
	var pe *schemas.Error
	if errors.As(err, &pe) {
		return fmt.Errorf("the agent answered: %s (%s, code %d)", pe.Message, pe.Reason, pe.Code)
	}
	var te *discovery.TransportError
	if errors.As(err, &te) {
		hint := ""
		switch {
		case te.Status == 0:
			hint = " (is the agent running, and is the URL right?)"
		case te.Status == http.StatusUnauthorized || te.Status == http.StatusForbidden:
			hint = " (pass credentials with --header 'Authorization: ...')"
		case te.RetryAfter > 0:
			hint = fmt.Sprintf(" (retry after %s)", te.RetryAfter)
		}
		return fmt.Errorf("cannot reach the agent: %v%s", te, hint)
	}
	if errors.Is(err, discovery.ErrForbiddenAddress) {
		return fmt.Errorf("%v (this address is refused for safety; --allow-private permits loopback and private ones)", err)
	}
	return err
}

func (o clientOptions) policy() discovery.Policy {
	return discovery.Policy{AllowLoopback: o.allowPrivate, AllowPrivate: o.allowPrivate, AllowLinkLocal: o.allowPrivate}
}

func (o clientOptions) fetcher() *discovery.Fetcher {
	return &discovery.Fetcher{Policy: o.policy(), Header: o.header, Timeout: o.timeout}
}

// clientFor picks the endpoint: the card's best interface, or with
// --binding the URL itself. An agent without a readable card is tried as a
// JSON-RPC 1.0 endpoint at the URL.
func clientFor(ctx context.Context, o clientOptions, u string) (*discovery.Client, error) {
	opts := discovery.Options{Policy: o.policy(), Header: o.header, Timeout: o.timeout}
	ep := discovery.Endpoint{URL: u, Binding: schemas.BindingJSONRPC, Version: schemas.ProtocolVersion}
	switch o.binding {
	case "jsonrpc":
	case "rest":
		ep.Binding = schemas.BindingHTTPJSON
	case "jsonrpc03":
		ep.Version = schemas.ProtocolVersion03
	case "auto":
		f, err := o.fetcher().Fetch(ctx, u, "")
		if err != nil {
			var te *discovery.TransportError
			if errors.As(err, &te) && te.Status == 0 {
				return nil, err // nothing there at all
			}
			break // no card: try the URL as a JSON-RPC endpoint
		}
		if eps := discovery.Endpoints(&f.Card); len(eps) > 0 {
			ep = eps[0]
		}
	default:
		return nil, fmt.Errorf("--binding must be auto, jsonrpc, rest or jsonrpc03, got %q", o.binding)
	}
	return discovery.NewClient(ep, opts)
}

func cmdCard(ctx context.Context, o clientOptions, u string, out *printer) error {
	f, err := o.fetcher().Fetch(ctx, u, "")
	if err != nil {
		return err
	}
	if out.json {
		return out.raw(f.Raw)
	}
	c := f.Card
	out.line("%s %s — %s", c.Name, c.Version, c.Description)
	out.line("  card from %s", f.URL)
	for _, ep := range discovery.Endpoints(&c) {
		out.line("  interface  %s", ep)
	}
	if c.Capabilities.Streaming != nil && *c.Capabilities.Streaming {
		out.line("  streaming  yes")
	}
	for _, s := range c.Skills {
		out.line("  skill      %s: %s [%s]", s.ID, s.Name, strings.Join(s.Tags, ", "))
	}
	return nil
}

func cmdAgents(ctx context.Context, o clientOptions, u string, out *printer) error {
	q := url.Values{}
	for _, s := range o.skills {
		q.Add("skill", s)
	}
	for _, t := range o.tags {
		q.Add("tag", t)
	}
	if o.kind != "" {
		q.Set("kind", o.kind)
	}
	base := strings.TrimRight(u, "/")
	target := base + "/a2a/agents"
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	for k, vs := range o.header {
		req.Header[k] = vs
	}
	req.Header.Set("User-Agent", discovery.UserAgent)
	res, err := o.policy().Client(o.timeout).Do(req)
	if err != nil {
		return &discovery.TransportError{URL: target, Err: err}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return &discovery.TransportError{URL: target, Status: res.StatusCode, Err: err}
	}
	var list edge.AgentList
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &list) != nil || list.Agents == nil {
		return fmt.Errorf("%s did not answer with an a2abus agent registry (HTTP %d); `agents` lists the agents of an a2abus edge, `card` reads any agent's card", target, res.StatusCode)
	}
	if out.json {
		return out.raw(body)
	}
	if len(list.Agents) == 0 {
		out.line("no agents match")
	}
	for _, a := range list.Agents {
		where := a.Kind
		if a.Remote != nil {
			where = fmt.Sprintf("remote %s, %s", a.Remote.Health, a.Remote.URL)
		}
		out.line("%s (%s) — %s", a.Name, where, a.Card.Description)
		for _, s := range a.Card.Skills {
			out.line("  skill %s: %s [%s]", s.ID, s.Name, strings.Join(s.Tags, ", "))
		}
	}
	return nil
}

func cmdCall(ctx context.Context, o clientOptions, cmd string, c *discovery.Client, args []string, out *printer) error {
	switch cmd {
	case "send":
		msg := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, TaskID: o.taskID, ContextID: o.contextID,
			Parts: []schemas.Part{schemas.TextPart(args[0])}}
		req := &schemas.SendMessageRequest{Message: msg}
		if o.stream {
			s, err := c.SendStreamingMessage(ctx, req)
			if err != nil {
				return err
			}
			return follow(s, out)
		}
		if o.noWait {
			req.Configuration = &schemas.SendMessageConfiguration{ReturnImmediately: true}
		}
		res, err := c.SendMessage(ctx, req)
		if err != nil {
			return err
		}
		if res.Message != nil {
			return out.message(res.Message)
		}
		if err := out.task(res.Task); err != nil {
			return err
		}
		if !o.noWait {
			return endState(res.Task)
		}
		return nil
	case "get":
		req := &schemas.GetTaskRequest{ID: args[0]}
		if o.history >= 0 {
			n := int32(o.history)
			req.HistoryLength = &n
		}
		t, err := c.GetTask(ctx, req)
		if err != nil {
			return err
		}
		return out.task(t)
	case "cancel":
		t, err := c.CancelTask(ctx, &schemas.CancelTaskRequest{ID: args[0]})
		if err != nil {
			return err
		}
		return out.task(t)
	case "subscribe":
		s, err := c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: args[0]}, o.lastEID)
		if err != nil {
			return err
		}
		return follow(s, out)
	case "tasks":
		req := &schemas.ListTasksRequest{ContextID: o.contextID, PageToken: o.pageToken}
		if o.state != "" {
			st := schemas.TaskState(strings.ToUpper(o.state))
			if !strings.HasPrefix(string(st), "TASK_STATE_") {
				st = "TASK_STATE_" + st
			}
			if !st.Valid() {
				return fmt.Errorf("--state %q is not a task state (submitted, working, input_required, completed, failed, canceled, rejected, auth_required)", o.state)
			}
			req.Status = st
		}
		if o.pageSize > 0 {
			n := int32(o.pageSize)
			req.PageSize = &n
		}
		res, err := c.ListTasks(ctx, req)
		if err != nil {
			return err
		}
		if out.json {
			return out.obj(res)
		}
		for _, t := range res.Tasks {
			when := ""
			if t.Status.Timestamp != nil {
				when = t.Status.Timestamp.Time.Format(time.RFC3339)
			}
			out.line("%s  %-26s  context %s  %s", t.ID, t.Status.State, t.ContextID, when)
		}
		out.line("%d task(s)", len(res.Tasks))
		if res.NextPageToken != "" {
			out.line("more: --page-token %s", res.NextPageToken)
		}
		return nil
	}
	return fmt.Errorf("unknown command %q", cmd)
}

// follow prints a stream's events as they arrive, and fails if the task
// ended badly.
func follow(s *discovery.Stream, out *printer) error {
	defer s.Close()
	var last *schemas.TaskState
	for {
		ev, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if out.json {
			if err := out.obj(ev); err != nil {
				return err
			}
		}
		switch {
		case ev.Task != nil:
			st := ev.Task.Status.State
			last = &st
			if !out.json {
				out.line("task %s  %s", ev.Task.ID, st)
			}
		case ev.StatusUpdate != nil:
			st := ev.StatusUpdate.Status.State
			last = &st
			if !out.json {
				line := "status " + string(st)
				if m := ev.StatusUpdate.Status.Message; m != nil && m.Text() != "" {
					line += ": " + m.Text()
				}
				out.line("%s", line)
			}
		case ev.ArtifactUpdate != nil:
			if !out.json {
				a := ev.ArtifactUpdate.Artifact
				name := a.Name
				if name == "" {
					name = a.ArtifactID
				}
				verb := "artifact"
				if ev.ArtifactUpdate.Append {
					verb = "  +"
				}
				out.line("%s %s: %s", verb, name, partsText(a.Parts))
			}
		case ev.Message != nil:
			if !out.json {
				out.line("message: %s", ev.Message.Text())
			}
			return nil
		}
	}
	if last != nil {
		switch *last {
		case schemas.TaskStateFailed, schemas.TaskStateRejected, schemas.TaskStateCanceled:
			return fmt.Errorf("the task ended %s", *last)
		}
	}
	return nil
}

// endState fails a waited-for task that ended badly (after it was printed).
func endState(t *schemas.Task) error {
	switch t.Status.State {
	case schemas.TaskStateFailed, schemas.TaskStateRejected, schemas.TaskStateCanceled:
		why := ""
		if t.Status.Message != nil && t.Status.Message.Text() != "" {
			why = ": " + t.Status.Message.Text()
		}
		return fmt.Errorf("task %s ended %s%s", t.ID, t.Status.State, why)
	}
	return nil
}

func partsText(ps []schemas.Part) string {
	var b strings.Builder
	for _, p := range ps {
		switch {
		case p.Text != nil:
			b.WriteString(*p.Text)
		case p.URL != nil:
			b.WriteString("[file " + *p.URL + "]")
		default:
			b.WriteString("[data]")
		}
	}
	return b.String()
}

// printer writes either a human summary or JSON objects, one per line.
type printer struct {
	w    io.Writer
	json bool
}

func (p *printer) line(format string, args ...any) { fmt.Fprintf(p.w, format+"\n", args...) }

func (p *printer) obj(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.w, "%s\n", b)
	return err
}

func (p *printer) raw(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return p.obj(v)
}

func (p *printer) message(m *schemas.Message) error {
	if p.json {
		return p.obj(map[string]any{"message": m})
	}
	p.line("message: %s", m.Text())
	return nil
}

func (p *printer) task(t *schemas.Task) error {
	if p.json {
		return p.obj(t)
	}
	p.line("task %s  %s", t.ID, t.Status.State)
	p.line("  context  %s", t.ContextID)
	if m := t.Status.Message; m != nil && m.Text() != "" {
		p.line("  status   %s", m.Text())
	}
	for _, a := range t.Artifacts {
		name := a.Name
		if name == "" {
			name = a.ArtifactID
		}
		p.line("  artifact %s: %s", name, partsText(a.Parts))
	}
	return nil
}
