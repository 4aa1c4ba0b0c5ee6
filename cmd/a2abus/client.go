package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
)

// The client commands: a2abus as an A2A client of any agent (not only
// a2abus). They read the agent's card to pick an interface, speak A2A 1.0
// (JSON-RPC, HTTP+JSON or gRPC), 0.3 or the older tasks/send dialect
// (OpenFang, AgentOS), print a readable summary or the A2A objects as JSON, and exit
// 1 with a message a person can act on when the agent or the network says
// no, or when the task they ran ended badly.

const clientUsage = `Usage:
  a2abus card URL                       the agent's card (1.0, 0.3 or tasks/send shape)
  a2abus send URL TEXT [--stream] [--no-wait] [--task ID] [--context ID] [--ref TASK_ID]
  a2abus stream URL TEXT                the same as send --stream
  a2abus get URL TASK_ID [--history N]
  a2abus tasks URL [--context ID] [--state STATE] [--page-size N] [--page-token T]
  a2abus cancel URL TASK_ID
  a2abus subscribe URL TASK_ID [--last-event-id ID]
  a2abus push-configs URL TASK_ID [--delete ID]
                                        a task's push-notification configs, with
                                        a2abus's delivery state (or delete one)
  a2abus agents URL [--skill ID] [--tag TAG] [--kind local|remote] [--health H]
                                        an a2abus edge's agents (GET URL/a2a/agents)

Credentials: --token T is sent as Authorization: Bearer T, --api-key K as
X-API-Key: K, or where the agent's card says (an apiKey scheme's header,
query parameter or cookie); $A2A_TOKEN and $A2A_API_KEY stand in for
absent flags. When the card declares security schemes, only credentials
that match one are sent. A refusal (HTTP 401 or 403) says what the agent
asks for and which flag gives it.

Card signatures (A2A §8.4): --card-trust-keys FILE (a JWK set) or
--card-trust-jwks-url URL checks them against those keys, never a key the
card points to (jku); a signed card that does not verify is refused with
the reason, and --card-require-signed refuses an unsigned card too. A
refused agent is not called.

URL is the agent's base URL: its card (URL/.well-known/agent-card.json,
then URL/.well-known/agent.json, or URL itself when it ends in .json) names
the endpoint, JSON-RPC 1.0 first (gRPC when the card offers only that); a
card with neither supportedInterfaces nor a protocolVersion is read as the
older tasks/send dialect's. An agent without a card is called with
JSON-RPC 1.0 at URL itself; with --binding the card is not read and URL is
the endpoint. With --binding grpc, URL is the gRPC address:
http://HOST:PORT in cleartext, https://HOST:PORT over TLS, or HOST:PORT as
a card names it (cleartext to loopback, else TLS); its path names the
agent (the request's tenant), e.g. http://127.0.0.1:9090/agents/echo for
the agent echo of "a2abus serve --grpc-listen 127.0.0.1:9090". Flags may
come before or after the arguments; put -- before a TEXT that starts
with "-".

Output (-o): text is a summary for a person. json prints the A2A object of
the call, one compact JSON object per line: card: the card as served; send:
the SendMessageResponse ({"task":...} or {"message":...}); get, cancel: the
Task; tasks: the ListTasksResponse; send --stream, subscribe: one
StreamResponse per event, printed as it arrives; agents: the registry.

Exit status: 0 on success, also for a task waiting for input (answer it
with send --task ID); 1 when the agent or the network failed, or when the
task that send, stream or subscribe ran ended FAILED, REJECTED or CANCELED
(get, tasks and cancel report states without judging them); 2 on a usage
error. Errors go to stderr.

Flags:
`

// clientCommands are the commands runClient handles, with the number of
// arguments each takes.
var clientCommands = map[string]int{"card": 1, "send": 2, "stream": 2, "get": 2, "tasks": 1, "cancel": 2, "subscribe": 2, "agents": 1, "push-configs": 2}

// errTaskEnded is wrapped by the error of a command whose task ended
// FAILED, REJECTED or CANCELED.
var errTaskEnded = errors.New("the task ended unsuccessfully")

// cliError is a failure reported by the agent or the network, or a task
// that ended badly (exit 1), as opposed to a usage error (exit 2). Its
// message is written for a person; the error it wraps is the cause, for
// errors.Is and errors.As.
type cliError struct {
	msg string
	err error
}

func (e *cliError) Error() string { return e.msg }
func (e *cliError) Unwrap() error { return e.err }

type clientOptions struct {
	output, binding         string
	header                  http.Header
	token, apiKey           string
	timeout                 time.Duration
	allowPrivate            bool
	stream, noWait          bool
	taskID, contextID       string
	history, pageSize       int
	state                   schemas.TaskState
	pageToken, lastEID      string
	skills, tags            multiFlag
	refs                    multiFlag // send: referenceTaskIds
	kind, health, stateFlag string
	pushURL, pushToken      string
	deleteConfig            string
	cardTrust               CardTrustConfig
}

// Environment variables the client commands read when the flags are
// absent.
const (
	envToken  = "A2A_TOKEN"
	envAPIKey = "A2A_API_KEY"
)

func runClient(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	return runClientEnv(ctx, cmd, args, stdout, stderr, os.Getenv)
}

// runClientEnv runs a client command reading the environment through
// getenv.
func runClientEnv(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if cmd == "agents" && len(args) > 0 {
		switch args[0] {
		case "add", "update", "remove":
			return runAgentsAdmin(ctx, args[0], args[1:], stdout, stderr, getenv)
		}
	}
	fs := flag.NewFlagSet("a2abus "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := clientOptions{header: http.Header{}}
	fs.StringVar(&o.output, "o", "text", "output: text or json")
	fs.Var(headerFlag(o.header), "header", "request header \"Name: value\" (repeatable)")
	o.credentialFlags(fs, "", " or where the agent's card says")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "timeout of a call, and of reading the card (a stream lasts as long as the task)")
	fs.StringVar(&o.binding, "binding", "auto", "auto (read the card), or the wire form at the URL, which is then the endpoint: "+strings.Join(discovery.WireNames(), ", "))
	fs.BoolVar(&o.allowPrivate, "allow-private", true, "allow loopback, private and link-local addresses (metadata addresses are always refused)")
	fs.StringVar(&o.cardTrust.KeysFile, "card-trust-keys", "", "JWK set of keys trusted to sign the agent's card: a signed card must verify with one of them")
	fs.StringVar(&o.cardTrust.JWKSURL, "card-trust-jwks-url", "", "JWKS URL of keys trusted to sign the agent's card (the card's own jku is never followed)")
	fs.BoolVar(&o.cardTrust.RequireSigned, "card-require-signed", false, "refuse an agent whose card is not signed by a trusted key (needs --card-trust-keys or --card-trust-jwks-url)")
	if cmd == "stream" {
		cmd, o.stream = "send", true
	}
	switch cmd {
	case "send":
		fs.BoolVar(&o.stream, "stream", o.stream, "print the task's progress as it happens (SendStreamingMessage)")
		fs.BoolVar(&o.noWait, "no-wait", false, "return at once with the task as accepted (returnImmediately)")
		fs.StringVar(&o.taskID, "task", "", "continue this task (e.g. answer an input-required question)")
		fs.StringVar(&o.contextID, "context", "", "send within this context (conversation)")
		fs.Var(&o.refs, "ref", "a task this message refers to (referenceTaskIds; repeatable): an llm agent carries that conversation on")
		fs.StringVar(&o.pushURL, "push-url", "", "register this webhook for the task's push notifications (a2abus webhook --listen runs one)")
		fs.StringVar(&o.pushToken, "push-token", "", "the token the agent sends the webhook with each notification (with --push-url)")
	case "get":
		fs.IntVar(&o.history, "history", -1, "at most N history messages, and print them (default: the agent's choice, not printed)")
	case "tasks":
		fs.StringVar(&o.contextID, "context", "", "only tasks of this context")
		fs.StringVar(&o.stateFlag, "state", "", "only tasks in this state: submitted, working, input-required, auth-required, completed, failed, canceled, rejected (or TASK_STATE_...)")
		fs.IntVar(&o.pageSize, "page-size", 0, "tasks per page (default: the agent's)")
		fs.StringVar(&o.pageToken, "page-token", "", "page to read (the nextPageToken of the previous page)")
	case "subscribe":
		fs.StringVar(&o.lastEID, "last-event-id", "", "resume after this SSE event id (printed when a stream breaks)")
	case "push-configs":
		fs.StringVar(&o.deleteConfig, "delete", "", "delete the config with this id instead of listing")
	case "agents":
		fs.Var(&o.skills, "skill", "only agents offering this skill id (repeatable)")
		fs.Var(&o.tags, "tag", "only agents with a skill tagged so (repeatable)")
		fs.StringVar(&o.kind, "kind", "", "only local or remote agents")
		fs.StringVar(&o.health, "health", "", "only remote agents in this health: online, degraded or offline")
	}
	fs.Usage = func() { fmt.Fprint(stderr, clientUsage); fs.PrintDefaults() }
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err // the flag package has printed the usage
	}
	usageErr := func(format string, a ...any) error {
		fs.Usage()
		return fmt.Errorf(format, a...)
	}
	if want := clientCommands[cmd]; len(pos) != want {
		return usageErr("%s takes %d argument(s), got %d", cmd, want, len(pos))
	}
	switch {
	case o.output != "text" && o.output != "json":
		return usageErr("-o must be text or json, got %q", o.output)
	case !knownBinding(o.binding):
		return usageErr("--binding must be one of %s, got %q", bindingChoices(), o.binding)
	case o.timeout <= 0:
		return usageErr("--timeout must be positive, got %s", o.timeout)
	case o.stream && o.noWait:
		return usageErr("--stream and --no-wait do not go together: a stream returns at once and follows the task")
	case o.pageSize < 0:
		return usageErr("--page-size must not be negative")
	case o.history < -1:
		return usageErr("--history must not be negative")
	case o.kind != "" && o.kind != "local" && o.kind != "remote":
		return usageErr("--kind must be local or remote, got %q", o.kind)
	}
	if o.stateFlag != "" {
		if o.state, err = parseState(o.stateFlag); err != nil {
			return usageErr("%v", err)
		}
	}
	if ep, named := discovery.NamedEndpoint(o.binding, pos[0]); named && ep.Binding == schemas.BindingGRPC && cmd != "card" && cmd != "agents" {
		// A gRPC address: checked as the client reads it.
		if err := discovery.CheckEndpoint(ep); err != nil {
			return usageErr("%v", err)
		}
	} else if u, err := url.Parse(pos[0]); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErr("URL %q must be an absolute http:// or https:// URL", pos[0])
	}
	o.credentialsFromEnv(getenv)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &clientRun{o: o, url: pos[0], out: &printer{w: stdout, json: o.output == "json"}}
	if r.creds, err = o.credentials(); err != nil {
		return err
	}
	if o.binding != "auto" && (o.cardTrust.KeysFile != "" || o.cardTrust.JWKSURL != "") && cmd != "card" {
		return usageErr("--binding %s reads no card, so there is no signature to check; leave out --card-trust-* or use --binding auto", o.binding)
	}
	if r.verify, err = r.cardVerifier(ctx); err != nil {
		return err
	}
	switch cmd {
	case "card":
		err = r.card(ctx)
	case "agents":
		err = r.agents(ctx)
	default:
		var c *discovery.Client
		if c, err = r.client(ctx); err == nil {
			err = r.call(ctx, cmd, c, pos[1:])
			c.Close()
		}
	}
	if err == nil {
		return nil
	}
	var ce *cliError
	if errors.As(err, &ce) {
		return err
	}
	if ctx.Err() != nil {
		return &cliError{msg: "interrupted", err: err}
	}
	return &cliError{msg: r.describe(err), err: err}
}

// parseInterspersed parses flags that may come before, between or after
// the positional arguments, and returns the latter. After "--" everything
// is an argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseState reads a task state as a person types it: "completed",
// "input-required", "INPUT_REQUIRED" or "TASK_STATE_INPUT_REQUIRED".
func parseState(s string) (schemas.TaskState, error) {
	st := schemas.TaskState(strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "-", "_")))
	if !strings.HasPrefix(string(st), "TASK_STATE_") {
		st = "TASK_STATE_" + st
	}
	if !st.Valid() {
		return "", fmt.Errorf("--state %q is not a task state (submitted, working, input-required, auth-required, completed, failed, canceled, rejected)", s)
	}
	return st, nil
}

// clientRun is one client command: its options, the URL as typed and how
// the endpoint was chosen, which the error messages explain.
type clientRun struct {
	o   clientOptions
	url string
	out *printer
	// ep is the endpoint called; fromCard is set when the card named it.
	ep       discovery.Endpoint
	fromCard bool
	// noCard is why the card was not used when --binding auto fell back
	// to JSON-RPC at the URL.
	noCard error
	// creds are --token and --api-key (nil when neither is given); sec is
	// what the card declares about authentication.
	creds *discovery.Authenticator
	sec   discovery.Security
	// verify checks the card's signatures (nil: not checked).
	verify discovery.CardVerifier
}

// credentials are the command's --token and --api-key, or nil.
// credentialFlags registers --token and --api-key (for whom, e.g. " of
// an admin principal"; where else a key may go) into o: one spelling of
// the credential flags for every command that calls an edge or agent.
func (o *clientOptions) credentialFlags(fs *flag.FlagSet, whom, keyElsewhere string) {
	fs.StringVar(&o.token, "token", "", "bearer token"+whom+", sent as Authorization: Bearer TOKEN [$"+envToken+"]")
	fs.StringVar(&o.apiKey, "api-key", "", "API key"+whom+", sent as X-API-Key"+keyElsewhere+" [$"+envAPIKey+"]")
}

// credentialsFromEnv fills in from the environment what no flag gave.
func (o *clientOptions) credentialsFromEnv(getenv func(string) string) {
	o.token = cmp.Or(o.token, strings.TrimSpace(getenv(envToken)))
	o.apiKey = cmp.Or(o.apiKey, strings.TrimSpace(getenv(envAPIKey)))
}

// credentialHeader is o's credentials as plain request headers, for a
// call to an a2abus edge (which reads both): nil when there are none.
func (o clientOptions) credentialHeader() http.Header {
	h := http.Header{}
	if o.token != "" {
		h.Set("Authorization", "Bearer "+o.token)
	}
	if o.apiKey != "" {
		h.Set("X-API-Key", o.apiKey)
	}
	return h
}

func (o clientOptions) credentials() (*discovery.Authenticator, error) {
	if o.token == "" && o.apiKey == "" {
		return nil, nil
	}
	var a discovery.Auth
	if o.token != "" {
		a.BearerToken = discovery.Secret(o.token)
	}
	if o.apiKey != "" {
		a.APIKey = discovery.Secret(o.apiKey)
	}
	return discovery.NewAuthenticator(a)
}

// credentials returns r.creds as a discovery.Credentials (a nil interface
// when there are none).
func (r *clientRun) credentials() discovery.Credentials {
	if r.creds == nil {
		return nil
	}
	return r.creds
}

func (r *clientRun) policy() discovery.Policy {
	p := r.o.allowPrivate
	return discovery.Policy{AllowLoopback: p, AllowPrivate: p, AllowLinkLocal: p}
}

func (r *clientRun) fetcher() *discovery.Fetcher {
	return &discovery.Fetcher{Policy: r.policy(), Header: r.o.header, Credentials: r.credentials(), Timeout: r.o.timeout, Verify: r.verify}
}

// cardVerifier is the verifier of the --card-trust-* flags, nil without
// them. The JWKS URL is reached as the agent is (--allow-private).
func (r *clientRun) cardVerifier(ctx context.Context) (discovery.CardVerifier, error) {
	v, _, err := newCardVerifier(ctx, r.o.cardTrust, func(what, raw string) (discovery.Policy, error) { return r.policy(), nil })
	if err != nil || v == nil {
		return nil, err
	}
	return v, nil
}

// knownBinding reports whether name is a --binding: auto, or a wire form
// discovery names.
func knownBinding(name string) bool {
	_, ok := discovery.NamedEndpoint(name, "")
	return ok || name == "auto"
}

// bindingChoices lists the --binding values, for messages.
func bindingChoices() string {
	return "auto, " + strings.Join(discovery.WireNames(), ", ")
}

// client picks the endpoint: with --binding auto the best interface of the
// card (discovery.ClientFor), or JSON-RPC 1.0 at the URL when there is no
// usable card; with another --binding the URL itself.
func (r *clientRun) client(ctx context.Context) (*discovery.Client, error) {
	opts := discovery.Options{Policy: r.policy(), Header: r.o.header, Credentials: r.credentials(), Timeout: r.o.timeout}
	ep, named := discovery.NamedEndpoint(r.o.binding, r.url)
	if named {
		r.ep = ep
		return discovery.NewClient(r.ep, opts)
	}
	r.ep, _ = discovery.NamedEndpoint("jsonrpc", r.url) // without a usable card
	f, err := r.fetcher().Fetch(ctx, r.url, "")
	if err != nil {
		var te *discovery.TransportError
		var ae *discovery.AuthError
		if (errors.As(err, &te) && te.Status == 0) || errors.Is(err, discovery.ErrForbiddenAddress) || errors.As(err, &ae) || cardRefused(err) {
			return nil, err // nothing answers there, it may not be called, it wants credentials for its card, or its card is not trusted
		}
		r.noCard = err // try the URL as a JSON-RPC endpoint
		return discovery.NewClient(r.ep, opts)
	}
	r.sec = discovery.CardSecurity(&f.Card)
	c, err := discovery.ClientFor(&f.Card, opts)
	if err != nil {
		return nil, err
	}
	r.ep, r.fromCard = c.Endpoint(), true
	return c, nil
}

// describe says what went wrong in words a person can act on.
func (r *clientRun) describe(err error) string {
	var ae *discovery.AuthError
	if errors.As(err, &ae) {
		return r.refused(ae)
	}
	var me *discovery.MismatchError
	if errors.As(err, &me) {
		return r.mismatch(me)
	}
	var pe *schemas.Error
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s (%s, code %d)", pe.Message, pe.Reason, pe.Code)
	}
	if errors.Is(err, discovery.ErrForbiddenAddress) {
		return forbidden(err)
	}
	var te *discovery.TransportError
	if !errors.As(err, &te) {
		return err.Error()
	}
	cardNote := ""
	if r.fromCard {
		cardNote = fmt.Sprintf("; %s is the %s endpoint the agent's card names (pass another endpoint with --binding)", r.ep.URL, r.ep.Binding)
	}
	var ne net.Error
	switch {
	case te.Status == 0 && (errors.Is(te.Err, context.DeadlineExceeded) || (errors.As(te.Err, &ne) && ne.Timeout())):
		return fmt.Sprintf("no answer from %s within %s (raise --timeout; for long tasks use --stream or --no-wait)%s", te.URL, r.o.timeout, cardNote)
	case te.Status == 0:
		return fmt.Sprintf("cannot reach %s: %s (is the agent running, and is the URL right?)%s", te.URL, netCause(te.Err), cardNote)
	case r.noCard != nil:
		why := r.noCard.Error()
		var ce *discovery.TransportError
		if errors.As(r.noCard, &ce) && ce.Status != 0 {
			why = fmt.Sprintf("HTTP %d %s for its card", ce.Status, http.StatusText(ce.Status))
		}
		return fmt.Sprintf("%s does not look like an A2A agent (%s; HTTP %d %s for a JSON-RPC call): pass the agent's base URL, or its endpoint with --binding",
			r.url, why, te.Status, http.StatusText(te.Status))
	case te.RetryAfter > 0:
		return fmt.Sprintf("%v (the agent asks to retry after %s)", te, te.RetryAfter)
	}
	return te.Error()
}

// refused explains an agent's refusal (HTTP 401 or 403): what it asks for,
// by its card and its WWW-Authenticate challenge, and which flag or
// environment variable gives that.
func (r *clientRun) refused(ae *discovery.AuthError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s answered HTTP %d %s", ae.URL, ae.Status, http.StatusText(ae.Status))
	if ae.Err != nil && ae.Err.Message != "" {
		fmt.Fprintf(&b, ": %s (%s, code %d)", ae.Err.Message, ae.Err.Reason, ae.Err.Code)
	}
	sec := ae.Security
	if !sec.Declared() {
		sec = r.sec
	}
	if sec.Declared() {
		b.WriteString("; its card asks for " + sec.String())
	}
	if ae.Challenge != "" {
		b.WriteString("; it answered WWW-Authenticate: " + ae.Challenge)
	}
	if !ae.Unauthenticated() {
		b.WriteString("; the credentials sent were accepted but do not allow this call: ask the agent's operator for access, or pass other credentials with ")
		b.WriteString(strings.Join(credentialFlags(&sec, ae.Challenge), " or "))
		return b.String()
	}
	if r.creds != nil {
		b.WriteString("; the credentials given (" + r.given() + ") were refused: check them, or pass ")
	} else {
		b.WriteString("; no credentials were given: pass ")
	}
	b.WriteString(strings.Join(credentialFlags(&sec, ae.Challenge), " or "))
	return b.String()
}

// mismatch explains credentials that match none of the schemes the card
// declares (nothing was sent).
func (r *clientRun) mismatch(me *discovery.MismatchError) string {
	return fmt.Sprintf("%s: its card asks for %s, and %s does not match any of that (nothing was sent): pass %s",
		me.URL, me.Wanted.String(), r.given(), strings.Join(credentialFlags(&me.Wanted, ""), " or "))
}

// given names the credentials the command was given, and how.
func (r *clientRun) given() string {
	var g []string
	if r.o.token != "" {
		g = append(g, "a token (--token or $"+envToken+")")
	}
	if r.o.apiKey != "" {
		g = append(g, "an API key (--api-key or $"+envAPIKey+")")
	}
	return strings.Join(g, " and ")
}

// credentialFlags names the flags that give what an agent asks for: by its
// card's schemes, else by its WWW-Authenticate challenge, else both.
func credentialFlags(sec *discovery.Security, challenge string) []string {
	token := "--token TOKEN (or set " + envToken + ")"
	key := "--api-key KEY (or set " + envAPIKey + ")"
	var wantToken, wantKey bool
	keyWhere := ""
	for _, s := range sec.Schemes {
		switch {
		case s.Bearer():
			wantToken = true
		case s.Type == discovery.SchemeAPIKey:
			wantKey = true
			if keyWhere == "" {
				keyWhere = fmt.Sprintf(", sent in %s %s as the card says", s.In, s.ParamName)
			}
		}
	}
	if !wantToken && !wantKey {
		c := strings.ToLower(challenge)
		wantToken = strings.Contains(c, "bearer")
		wantKey = strings.Contains(c, "apikey") || strings.Contains(c, "api-key") || strings.Contains(c, "api_key")
	}
	var out []string
	if wantToken || !wantKey {
		out = append(out, token)
	}
	if wantKey || !wantToken {
		out = append(out, strings.TrimSuffix(key, ")")+keyWhere+")")
	}
	return out
}

// netCause is the part of a network error a person needs: "connection
// refused" rather than "dial tcp 127.0.0.1:1: connect: connection refused".
func netCause(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		err = se.Err
	}
	return err.Error()
}

// forbidden rewrites a refusal of the SSRF guard for the command line,
// whose only switch is --allow-private.
func forbidden(err error) string {
	msg := err.Error()
	for e := err; e != nil; e = errors.Unwrap(e) {
		if errors.Unwrap(e) == discovery.ErrForbiddenAddress {
			msg = strings.TrimPrefix(e.Error(), "discovery: ")
			break
		}
	}
	if strings.HasPrefix(msg, "refusing to connect to ") {
		// Keep the address and its class; the rest names config settings
		// this command does not read.
		if head, _, ok := strings.Cut(msg, "): "); ok {
			msg = head + ")"
		}
	}
	return msg + "; --allow-private (on by default) permits loopback, private and link-local addresses, never metadata, broadcast or unspecified ones"
}

// card prints the agent's card.
func (r *clientRun) card(ctx context.Context) error {
	f, err := r.fetcher().Fetch(ctx, r.url, "")
	if err != nil {
		var te *discovery.TransportError
		if errors.As(err, &te) && te.Status == http.StatusNotFound {
			urls, _ := discovery.CardURLs(r.url)
			return &cliError{err: err, msg: fmt.Sprintf("no agent card at %s (HTTP 404); pass the agent's base URL or its card's URL", strings.Join(urls, " nor at "))}
		}
		return err
	}
	if r.out.json {
		return r.out.raw(f.Raw)
	}
	c := f.Card
	r.out.line("%s %s — %s", c.Name, c.Version, c.Description)
	r.out.line("  card from  %s", f.URL)
	if c.Provider != nil && c.Provider.Organization != "" {
		r.out.line("  provider   %s", c.Provider.Organization)
	}
	eps := discovery.Endpoints(&c)
	for _, ep := range eps {
		r.out.line("  interface  %s", ep)
	}
	if len(eps) == 0 {
		r.out.line("  interface  none a2abus speaks (JSONRPC, HTTP+JSON or GRPC in A2A 1.0, JSONRPC in 0.3, or the tasks/send dialect)")
	}
	if c.Capabilities.Streaming != nil && *c.Capabilities.Streaming {
		r.out.line("  streaming  yes")
	}
	r.out.line("  signature  %s", signatureLine(f))
	for _, s := range c.Skills {
		r.out.line("  skill      %s: %s [%s]", s.ID, s.Name, strings.Join(s.Tags, ", "))
	}
	if len(c.Skills) == 0 {
		// Nothing says what the agent does: ask it as Aleph does (an
		// agent that does not answer there has no capabilities to show).
		caps, _ := r.fetcher().Capabilities(ctx, r.url, &c)
		for _, cp := range caps {
			r.out.line("  capability %s: %s", cp.Name, cp.Description)
		}
	}
	return nil
}

// agents lists the registry of an a2abus edge (GET URL/a2a/agents), a
// non-standard a2abus extension.
func (r *clientRun) agents(ctx context.Context) error {
	q := url.Values{}
	for _, s := range r.o.skills {
		q.Add("skill", s)
	}
	for _, t := range r.o.tags {
		q.Add("tag", t)
	}
	if r.o.kind != "" {
		q.Set("kind", r.o.kind)
	}
	if r.o.health != "" {
		q.Set("health", r.o.health)
	}
	u, _ := url.Parse(r.url) // checked by runClient
	u.Path = strings.TrimRight(u.Path, "/") + "/a2a/agents"
	u.RawQuery = q.Encode()
	target := u.String()
	ctx, cancel := context.WithTimeout(ctx, r.o.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	for k, vs := range r.o.header {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", discovery.UserAgent)
	if r.creds != nil {
		if err := r.creds.Apply(ctx, req, nil); err != nil {
			return err
		}
	}
	res, err := r.policy().Client(r.o.timeout).Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return &discovery.TransportError{URL: target, Err: err}
	}
	defer res.Body.Close()
	if ae := discovery.Refusal(target, res, nil); ae != nil {
		return ae
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return &discovery.TransportError{URL: target, Status: res.StatusCode, Err: err}
	}
	if res.StatusCode == http.StatusBadRequest {
		return &cliError{msg: fmt.Sprintf("%s refused the filters: %s", target, strings.TrimSpace(string(body)))}
	}
	var list schemas.AgentList
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &list) != nil || list.Agents == nil {
		return &cliError{msg: fmt.Sprintf("%s did not answer with an a2abus agent registry (HTTP %d): `agents` lists the agents of an a2abus edge (pass its base URL); `card` reads any agent's card", target, res.StatusCode)}
	}
	if r.out.json {
		return r.out.raw(body)
	}
	if len(list.Agents) == 0 {
		r.out.line("no agents match")
	}
	for _, a := range list.Agents {
		where := a.Kind
		if a.Remote != nil {
			where = fmt.Sprintf("remote %s, %s", a.Remote.Health, a.Remote.URL)
		}
		r.out.line("%s (%s) — %s", a.Agent, where, a.Description)
		if eps := discovery.Endpoints(&a.AgentCard); len(eps) > 0 {
			r.out.line("  endpoint %s", eps[0])
		}
		for _, s := range a.Skills {
			r.out.line("  skill    %s: %s [%s]", s.ID, s.Name, strings.Join(s.Tags, ", "))
		}
	}
	return nil
}

// call runs one of the commands that speak A2A to the agent.
func (r *clientRun) call(ctx context.Context, cmd string, c *discovery.Client, args []string) error {
	o, out := r.o, r.out
	switch cmd {
	case "send":
		msg := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, TaskID: o.taskID, ContextID: o.contextID,
			Parts: []schemas.Part{schemas.TextPart(args[0])}, ReferenceTaskIDs: o.refs}
		req := &schemas.SendMessageRequest{Message: msg}
		if o.pushURL != "" {
			req.Configuration = &schemas.SendMessageConfiguration{TaskPushNotificationConfig: &schemas.TaskPushNotificationConfig{URL: o.pushURL, Token: o.pushToken}}
		}
		if o.stream {
			s, err := c.SendStreamingMessage(ctx, req)
			if err != nil {
				return err
			}
			return r.follow(ctx, s)
		}
		if o.noWait {
			if req.Configuration == nil {
				req.Configuration = &schemas.SendMessageConfiguration{}
			}
			req.Configuration.ReturnImmediately = true
		}
		res, err := c.SendMessage(ctx, req)
		if err != nil {
			return err
		}
		if out.json {
			if err := out.obj(res); err != nil {
				return err
			}
		}
		switch {
		case res.Task != nil:
			if !out.json {
				r.task(res.Task, false)
			}
			return r.outcome(res.Task.ID, res.Task.Status)
		case res.Message != nil:
			if !out.json {
				out.line("message: %s", partsText(res.Message.Parts))
			}
			return nil
		}
		return schemas.Errorf(schemas.ErrInvalidAgentResponse, "the agent answered neither a task nor a message")
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
		if out.json {
			return out.obj(t)
		}
		r.task(t, o.history > 0)
		return nil
	case "cancel":
		t, err := c.CancelTask(ctx, &schemas.CancelTaskRequest{ID: args[0]})
		if err != nil {
			return err
		}
		if out.json {
			return out.obj(t)
		}
		r.task(t, false)
		return nil
	case "push-configs":
		if o.deleteConfig != "" {
			if err := c.DeletePushConfig(ctx, args[0], o.deleteConfig); err != nil {
				return err
			}
			if !out.json {
				out.line("deleted %s", o.deleteConfig)
			}
			return nil
		}
		list, err := c.PushConfigs(ctx, args[0])
		if err != nil {
			return err
		}
		if out.json {
			return out.obj(map[string]any{"configs": list})
		}
		if len(list) == 0 {
			out.line("no push notification configs")
		}
		for _, pc := range list {
			state := "ok"
			if d := pc.Delivery; d != nil && d.Disabled != "" {
				state = "disabled: " + d.Disabled
			} else if d != nil && d.Failing != nil {
				state = fmt.Sprintf("failing since %s (%d attempts, %d dead-lettered): %s", d.Failing.Since.Format(time.RFC3339), d.Failing.Attempts, d.Failing.DeadLettered, d.Failing.LastError)
			}
			out.line("%s  %s  %s", pc.ID, discovery.RedactURL(pc.URL), state)
		}
		return nil
	case "subscribe":
		s, err := c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: args[0]}, o.lastEID)
		if err != nil {
			return err
		}
		return r.follow(ctx, s)
	case "tasks":
		switch c.Endpoint().Version {
		case schemas.ProtocolVersion03:
			return &cliError{msg: fmt.Sprintf("%s speaks A2A 0.3, which cannot list tasks (get reads one task)", c.Endpoint().URL)}
		case schemas.ProtocolVersionLegacy:
			return &cliError{msg: fmt.Sprintf("%s speaks the older tasks/send dialect, which cannot list tasks (get reads one task)", c.Endpoint().URL)}
		}
		req := &schemas.ListTasksRequest{ContextID: o.contextID, PageToken: o.pageToken, Status: o.state}
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

// follow prints a stream's events as they arrive, and judges the state the
// task was last seen in. A stream that breaks says how to resume it.
func (r *clientRun) follow(ctx context.Context, s *discovery.Stream) error {
	defer s.Close()
	out := r.out
	var taskID string
	var status *schemas.TaskStatus
	for {
		ev, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			msg := r.describe(err)
			if ctx.Err() != nil {
				msg = "interrupted"
			}
			if id := s.LastEventID(); id != "" && taskID != "" {
				msg += fmt.Sprintf("; resume with: a2abus subscribe %s %s --last-event-id %s%s", r.url, taskID, id, r.bindingFlag())
			}
			return &cliError{msg: msg, err: err}
		}
		if out.json {
			if err := out.obj(ev); err != nil {
				return err
			}
		}
		switch {
		case ev.Task != nil:
			taskID, status = ev.Task.ID, &ev.Task.Status
			if !out.json {
				out.line("task %s  %s  (context %s)", ev.Task.ID, ev.Task.Status.State, ev.Task.ContextID)
				if m := ev.Task.Status.Message; m != nil && m.Text() != "" {
					out.line("  status   %s", m.Text())
				}
				for _, a := range ev.Task.Artifacts {
					out.line("  artifact %s: %s", artifactName(a), partsText(a.Parts))
				}
			}
		case ev.StatusUpdate != nil:
			taskID, status = ev.StatusUpdate.TaskID, &ev.StatusUpdate.Status
			if !out.json {
				line := "status " + string(status.State)
				if m := status.Message; m != nil && m.Text() != "" {
					line += ": " + m.Text()
				}
				out.line("%s", line)
			}
		case ev.ArtifactUpdate != nil:
			taskID = ev.ArtifactUpdate.TaskID
			if !out.json {
				a := ev.ArtifactUpdate.Artifact
				verb := "artifact "
				if ev.ArtifactUpdate.Append {
					verb = "  + "
				}
				out.line("%s%s: %s", verb, artifactName(a), partsText(a.Parts))
			}
		case ev.Message != nil:
			if !out.json {
				out.line("message: %s", partsText(ev.Message.Parts))
			}
			return nil // a message ends the exchange
		}
	}
	if status == nil {
		return nil
	}
	if !out.json {
		r.hint(taskID, status.State)
	}
	return r.outcome(taskID, *status)
}

// outcome fails a task that ended FAILED, REJECTED or CANCELED, with its
// status message.
func (r *clientRun) outcome(id string, st schemas.TaskStatus) error {
	switch st.State {
	case schemas.TaskStateFailed, schemas.TaskStateRejected, schemas.TaskStateCanceled:
		msg := fmt.Sprintf("task %s ended %s", id, st.State)
		if st.Message != nil && st.Message.Text() != "" {
			msg += ": " + st.Message.Text()
		}
		return &cliError{msg: msg, err: errTaskEnded}
	}
	return nil
}

// hint tells a person what to do next with a task that is not finished.
func (r *clientRun) hint(id string, st schemas.TaskState) {
	switch {
	case st.Interrupted():
		r.out.line("  reply    a2abus send %s TEXT --task %s%s", r.url, id, r.bindingFlag())
	case !st.Terminal():
		r.out.line("  follow   a2abus subscribe %s %s%s", r.url, id, r.bindingFlag())
	}
}

// bindingFlag is the --binding a command line the hints suggest needs to
// reach the same endpoint: none when the card chose it.
func (r *clientRun) bindingFlag() string {
	if r.o.binding == "auto" {
		return ""
	}
	return " --binding " + r.o.binding
}

// task prints a task for a person.
func (r *clientRun) task(t *schemas.Task, history bool) {
	out := r.out
	out.line("task %s  %s", t.ID, t.Status.State)
	out.line("  context  %s", t.ContextID)
	if m := t.Status.Message; m != nil && m.Text() != "" {
		out.line("  status   %s", m.Text())
	}
	for _, a := range t.Artifacts {
		out.line("  artifact %s: %s", artifactName(a), partsText(a.Parts))
	}
	if history {
		for _, m := range t.History {
			out.line("  history  %s: %s", strings.TrimPrefix(string(m.Role), "ROLE_"), partsText(m.Parts))
		}
	}
	r.hint(t.ID, t.Status.State)
}

func artifactName(a schemas.Artifact) string {
	if a.Name != "" {
		return a.Name
	}
	return a.ArtifactID
}

// partsText renders parts for a person: text as is, files and data named.
func partsText(ps []schemas.Part) string {
	var b strings.Builder
	for _, p := range ps {
		switch {
		case p.Text != nil:
			b.WriteString(*p.Text)
		case p.URL != nil:
			b.WriteString("[file " + *p.URL + "]")
		case p.Raw != nil:
			fmt.Fprintf(&b, "[file %s, %d bytes]", cmp.Or(p.Filename, p.MediaType, "unnamed"), len(p.Raw))
		case p.Data != nil:
			b.Write(p.Data)
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

// raw prints JSON as the agent sent it, compacted onto one line.
func (p *printer) raw(b []byte) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := p.w.Write(buf.Bytes())
	return err
}
