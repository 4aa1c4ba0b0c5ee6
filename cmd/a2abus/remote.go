package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// remoteMonitor owns what a2abus knows about one configured external agent:
// its card (discovered in the background, never blocking start-up), its
// health (re-checked periodically) and the A2A client built from the card.
// The worker group of the remote agent registers what Live says, and the
// remote agent kind calls through Client. One monitor runs per process that
// runs the agent's workers; the card cache they share lives in KV.
type remoteMonitor struct {
	name  string
	url   string
	shown string // url as logs, cards and errors show it (discovery.RedactURL)
	every time.Duration
	// resolve reads the card: from the shared cache when fresh, else from
	// the agent (conditionally). force skips a fresh cache entry, for the
	// periodic check. stale reports a card served from the cache because
	// the agent could not be reached; err is set when there is no card.
	resolve func(ctx context.Context, url string, force bool) (card *schemas.AgentCard, stale bool, lastErr, err error)
	opts    discovery.Options
	prefer  []string
	log     *slog.Logger

	mu     sync.Mutex
	card   *schemas.AgentCard
	client *discovery.Client
	// built is the last client built and the card it was built from,
	// kept while the agent is offline (client nil) so that it is used
	// again when the agent comes back with the same interfaces and
	// security: a gRPC client holds a connection, which a new one would
	// open again (and the old one leave behind).
	built     *discovery.Client
	builtFrom *schemas.AgentCard
	status    schemas.RemoteAgentStatus
	changed   chan struct{}
}

func newRemoteMonitor(name, url string, every time.Duration, opts discovery.Options, prefer []string, log *slog.Logger) *remoteMonitor {
	shown := discovery.RedactURL(url)
	return &remoteMonitor{
		name: name, url: url, shown: shown, every: every, opts: opts, prefer: prefer,
		log:     log.With("agent", name, "remote_url", shown),
		status:  schemas.RemoteAgentStatus{URL: shown, Health: schemas.HealthOffline, LastError: "not checked yet"},
		changed: make(chan struct{}, 1),
	}
}

// Run checks the agent now and then every m.every until ctx ends. A failed
// check is logged and recorded as the agent's health; it never stops Run.
func (m *remoteMonitor) Run(ctx context.Context) {
	t := time.NewTicker(m.every)
	defer t.Stop()
	m.check(ctx, false)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.check(ctx, true)
		}
	}
}

func (m *remoteMonitor) check(ctx context.Context, force bool) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	card, stale, lastErr, err := m.resolve(cctx, m.url, force)
	if ctx.Err() != nil {
		return
	}
	now := schemas.Now()
	m.mu.Lock()
	before := m.status.Health
	m.status.CheckedAt = now
	switch {
	case err != nil:
		m.status.Health, m.status.LastError = schemas.HealthOffline, err.Error()
		m.card, m.client = nil, nil
	case stale:
		m.status.Health = schemas.HealthDegraded
		m.status.LastError = "agent unreachable; serving its cached card"
		if lastErr != nil {
			m.status.LastError = lastErr.Error()
		}
		m.setCard(card)
	default:
		m.status.Health, m.status.LastError, m.status.LastSeen = schemas.HealthOnline, "", now
		m.setCard(card)
	}
	after, msg := m.status.Health, m.status.LastError
	m.mu.Unlock()
	if after != before {
		if after == schemas.HealthOnline {
			m.log.Info("remote agent is online")
		} else {
			m.log.Warn("remote agent is "+after, "err", msg)
		}
	}
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// setCard keeps the card and rebuilds the client when the card's
// interfaces or security changed. A client replaced is not closed: tasks
// under way may still hold it (a gRPC client's connection drops its
// socket once idle, after grpc's idle timeout). m.mu is held.
func (m *remoteMonitor) setCard(card *schemas.AgentCard) {
	m.card = card
	if m.built != nil && sameInterfaces(m.builtFrom, card) && sameSecurity(m.builtFrom, card) {
		m.client = m.built
		return
	}
	c, err := discovery.ClientFor(card, m.opts, m.prefer...)
	if err != nil {
		m.client = nil
		m.status.Health, m.status.LastError = schemas.HealthOffline, err.Error()
		return
	}
	m.client, m.built, m.builtFrom = c, c, card
}

func sameSecurity(a, b *schemas.AgentCard) bool {
	sa, sb := discovery.CardSecurity(a), discovery.CardSecurity(b)
	return reflect.DeepEqual(sa, sb)
}

func sameInterfaces(a, b *schemas.AgentCard) bool {
	ea, eb := discovery.Endpoints(a), discovery.Endpoints(b)
	if len(ea) != len(eb) {
		return false
	}
	for i := range ea {
		if ea[i] != eb[i] {
			return false
		}
	}
	return true
}

// Live is the card and health the worker group registers: the external
// agent's own description (skills, tags, version) under the local name.
func (m *remoteMonitor) Live() (schemas.AgentCard, *schemas.RemoteAgentStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.status
	if m.card == nil {
		return schemas.AgentCard{Name: m.name, Description: fmt.Sprintf("Proxy of the external A2A agent at %s (not reachable yet).", m.shown), Version: "0.0.0"}, &st
	}
	c := *m.card
	c.Name = m.name
	if c.Description == "" {
		c.Description = "Proxy of the external A2A agent at " + m.shown
	}
	// The edge serves its own interfaces, and asks for its own
	// credentials; the external ones are not ours to advertise.
	c.SupportedInterfaces, c.URL, c.AdditionalInterfaces, c.PreferredTransport = nil, "", nil, ""
	c.SecuritySchemes, c.SecurityRequirements, c.Security, c.Authentication = nil, nil, nil, nil
	// Its signatures sign the external card, not the one the edge
	// serves (which the edge signs itself, with --card-keys).
	c.Signatures = nil
	return c, &st
}

// recheckGap is the least time between two checks Client makes on behalf
// of tasks.
const recheckGap = 2 * time.Second

// errNotReachable is returned by Client while no card is known.
var errNotReachable = errors.New("the external agent has not been reached")

// Client returns the client of the external agent, checking once more if
// none is known yet (the agent was down at start-up).
func (m *remoteMonitor) Client(ctx context.Context) (*discovery.Client, error) {
	m.mu.Lock()
	c, checked := m.client, m.status.CheckedAt
	m.mu.Unlock()
	if c != nil {
		return c, nil
	}
	// Check again, but not for every task: while the agent is down, a
	// burst of tasks must not become a burst of requests to it.
	if checked == nil || time.Since(checked.Time) > recheckGap {
		m.check(ctx, true)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.client == nil {
		return nil, fmt.Errorf("%w at %s: %s", errNotReachable, m.shown, m.status.LastError)
	}
	return m.client, nil
}

// outboundPolicy is the SSRF guard of the configuration.
func (p *process) outboundPolicy() (discovery.Policy, error) {
	o := p.cfg.Outbound
	pol := discovery.Policy{AllowLoopback: o.AllowLoopback, AllowPrivate: o.AllowPrivate, AllowLinkLocal: o.AllowLinkLocal, RequireHTTPS: o.RequireHTTPS}
	const wrong = "outbound: %q is not a CIDR prefix (like 10.1.0.0/16)"
	var err error
	if pol.Allow, err = parsePrefixes(o.Allow, wrong); err != nil {
		return pol, err
	}
	pol.Deny, err = parsePrefixes(o.Deny, wrong)
	return pol, err
}

// remoteOptions are a remote agent's options.
type remoteOptions struct {
	// URL is the base URL of the external A2A agent a remote agent
	// proxies to (its card is read from URL/.well-known/agent-card.json).
	URL string `json:"url,omitempty"`
	// Headers are sent with every request to the external agent.
	Headers map[string]string `json:"headers,omitempty"`
	// Auth authenticates a remote agent to the external agent: a bearer
	// token, an API key or OAuth2 client credentials, chosen by the
	// schemes its card declares; secrets from the environment or files
	// only (see RemoteAuth).
	Auth *RemoteAuth `json:"auth,omitempty"`
	// Binding prefers one of the external agent's interfaces: JSONRPC or
	// HTTP+JSON. Default: the card's best (1.0 before 0.3, JSON-RPC first).
	Binding string `json:"binding,omitempty"`
	// CheckEvery is how often a remote agent's card and health are
	// re-checked. Default 1m.
	CheckEvery Duration `json:"checkEvery,omitempty"`
	// Push makes a remote agent ask the external agent for push
	// notifications to this deployment's edge (at publicUrl, which the
	// external agent must reach) instead of holding a stream open while it
	// works: a long external task then outlives the restart of every
	// a2abus process. PushPollEvery is how often the external task is read
	// while no notification comes (default 1m).
	Push          bool     `json:"push,omitempty"`
	PushPollEvery Duration `json:"pushPollEvery,omitempty"`
}

var remoteKind = kind(func(o *remoteOptions) error {
	if o.Auth != nil {
		return o.Auth.inFile()
	}
	return nil
}, (*process).remoteDefinition)

// remoteDefinition builds a remote agent: a monitor that discovers and
// checks the external agent, and the proxy that calls it.
func (p *process) remoteDefinition(a AgentConfig, o remoteOptions) (workers.Definition, error) {
	def, m, err := p.buildRemote(a.Name, o)
	if err != nil {
		return def, err
	}
	p.monitors = append(p.monitors, m)
	return def, nil
}

// buildRemote builds a remote agent and the monitor of its external agent
// (the caller runs it).
func (p *process) buildRemote(name string, a remoteOptions) (workers.Definition, *remoteMonitor, error) {
	if u, err := url.Parse(a.URL); a.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return workers.Definition{}, nil, fmt.Errorf("a remote agent needs \"url\": the external agent's http(s) base URL (got %q)", discovery.RedactURL(a.URL))
	}
	pol, err := p.outboundURL("url", a.URL)
	if err != nil {
		return workers.Definition{}, nil, err
	}
	header := headerOf(a.Headers)
	var prefer []string
	switch a.Binding {
	case "":
	case schemas.BindingJSONRPC, schemas.BindingHTTPJSON, schemas.BindingGRPC:
		prefer = []string{a.Binding}
	default:
		return workers.Definition{}, nil, fmt.Errorf("binding %q is not JSONRPC, HTTP+JSON or GRPC", a.Binding)
	}
	every := time.Duration(a.CheckEvery)
	if every <= 0 {
		every = time.Minute
	}
	opts := discovery.Options{Policy: pol, Header: header}
	if a.Auth != nil {
		creds, err := a.Auth.credentials(pol, os.LookupEnv)
		if err != nil {
			return workers.Definition{}, nil, fmt.Errorf("auth: %w", err)
		}
		opts.Credentials = creds
	}
	m := newRemoteMonitor(name, a.URL, every, opts, prefer, p.log)
	fetcher := &discovery.Fetcher{Policy: pol, Header: header, Credentials: opts.Credentials, Verify: p.cardVerify}
	m.resolve = func(ctx context.Context, base string, force bool) (*schemas.AgentCard, bool, error, error) {
		// p.bus is connected before any monitor or worker runs.
		resolver := &discovery.Resolver{Fetcher: fetcher, Store: p.bus, HardTTL: time.Duration(p.cfg.Outbound.CardHardTTL), Metrics: p.bus.Metrics()}
		var res *discovery.Resolved
		var err error
		if force {
			res, err = resolver.Refresh(ctx, base)
		} else {
			res, err = resolver.Resolve(ctx, base)
		}
		if err != nil {
			return nil, false, nil, err
		}
		// A card without skills gets the agent's capabilities as skills
		// (Aleph's discovery), so the agent list and routing by skill
		// see what the agent does.
		card := discovery.WithCapabilities(res.Card, res.Entry.Capabilities)
		return &card, res.Source == discovery.Stale, res.Err, nil
	}
	agent := workers.Remote{URL: m.shown, Client: func(ctx context.Context) (workers.RemoteClient, error) {
		c, err := m.Client(ctx)
		if err != nil {
			return nil, err
		}
		return remoteClient{c}, nil
	}}
	if a.Push {
		hooks := strings.TrimSuffix(p.cfg.PublicURL, "/") + "/a2a/remote/" + name + "/tasks/"
		agent.Push = &workers.RemotePush{
			URL:       func(taskID string) string { return hooks + taskID + "/push" },
			PollEvery: time.Duration(a.PushPollEvery),
		}
	}
	return workers.Definition{Name: name, Agent: agent, Live: m.Live, Changed: m.changed}, m, nil
}

// fanoutOptions are a fanout agent's options.
type fanoutOptions struct {
	// Targets are the agents a fanout agent sends each task to (local
	// names; a remote agent is one too).
	Targets []string `json:"targets,omitempty"`
	// ChildTimeout bounds each fan-out child. Default 5m.
	ChildTimeout Duration `json:"childTimeout,omitempty"`
	// Mode is "all" (default: complete only if every child did) or
	// "partial" (complete if any did).
	Mode string `json:"mode,omitempty"`
}

var fanoutKind = kind(nil, (*process).fanoutDefinition)

// fanoutDefinition builds a fanout agent over the configured targets.
func (p *process) fanoutDefinition(a AgentConfig, o fanoutOptions) (workers.Definition, error) {
	cfg := workers.FanOut{Agents: o.Targets, ChildTimeout: time.Duration(o.ChildTimeout), Mode: o.Mode}
	if err := cfg.Validate(); err != nil {
		return workers.Definition{}, fmt.Errorf("%w (set \"targets\": [\"agent\", ...])", err)
	}
	desc := fmt.Sprintf("Sends each task to %s in parallel and answers with every answer.", strings.Join(o.Targets, ", "))
	return workers.Definition{
		Name: a.Name,
		Card: schemas.AgentCard{Name: a.Name, Description: desc, Version: "1.0.0",
			Skills: []schemas.AgentSkill{{ID: "fanout", Name: "Fan-out", Description: desc, Tags: append([]string{"fanout"}, o.Targets...)}}},
		Agent: cfg,
	}, nil
}

// remoteClient adapts the discovery client to what the remote agent kind
// needs (workers does not depend on discovery).
type remoteClient struct{ c *discovery.Client }

func (r remoteClient) SendStreamingMessage(ctx context.Context, req *schemas.SendMessageRequest) (workers.RemoteStream, error) {
	s, err := r.c.SendStreamingMessage(ctx, req)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (r remoteClient) SubscribeToTask(ctx context.Context, req *schemas.SubscribeToTaskRequest) (workers.RemoteStream, error) {
	s, err := r.c.SubscribeToTask(ctx, req, "")
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (r remoteClient) CancelTask(ctx context.Context, req *schemas.CancelTaskRequest) (*schemas.Task, error) {
	return r.c.CancelTask(ctx, req)
}

func (r remoteClient) SendMessage(ctx context.Context, req *schemas.SendMessageRequest) (*schemas.SendMessageResponse, error) {
	return r.c.SendMessage(ctx, req)
}

func (r remoteClient) GetTask(ctx context.Context, req *schemas.GetTaskRequest) (*schemas.Task, error) {
	return r.c.GetTask(ctx, req)
}

// RemoteAuth is how a remote agent authenticates to its external agent
// (the "auth" of a remote agent in the config file). Any of a bearer
// token, an API key and OAuth2 client credentials may be configured; each
// call sends the one that matches a scheme the external agent's card
// declares (to an agent whose card declares none, all of them), and a call
// to an agent whose card declares schemes none of which is configured
// fails, naming both (see discovery.Authenticator).
//
// Secrets come from the environment (…Env: the variable's name, read at
// start-up) or from a file (…File: its path, read at start-up and again
// whenever it changes, so a rotated token is picked up). BearerToken and
// APIKey hold a secret itself, for a Config built in code: a config file
// that sets them is refused. Secrets are never logged nor put in errors.
type RemoteAuth struct {
	BearerToken     string `json:"bearerToken,omitempty"`
	BearerTokenEnv  string `json:"bearerTokenEnv,omitempty"`
	BearerTokenFile string `json:"bearerTokenFile,omitempty"`
	APIKey          string `json:"apiKey,omitempty"`
	APIKeyEnv       string `json:"apiKeyEnv,omitempty"`
	APIKeyFile      string `json:"apiKeyFile,omitempty"`
	// APIKeyHeader is the header the API key goes in when the card names
	// none (default X-API-Key); a card's apiKey scheme says where it goes.
	APIKeyHeader string `json:"apiKeyHeader,omitempty"`
	// OAuth2 gets access tokens with the client credentials grant.
	OAuth2 *RemoteOAuth2 `json:"oauth2,omitempty"`
}

// RemoteOAuth2 is an OAuth2 client of the client credentials grant. The
// token is fetched when first needed, reused until shortly before it
// expires (or until the agent refuses it), then fetched again; a fetch
// that fails fails the task with the token endpoint's reason.
type RemoteOAuth2 struct {
	// TokenURL is the token endpoint (required; it passes the outbound
	// guard like every request).
	TokenURL string `json:"tokenUrl"`
	ClientID string `json:"clientId"`
	// The client secret: from one of these.
	ClientSecretEnv  string   `json:"clientSecretEnv,omitempty"`
	ClientSecretFile string   `json:"clientSecretFile,omitempty"`
	Scopes           []string `json:"scopes,omitempty"`
}

// inFile refuses secrets written in the config file itself.
func (a *RemoteAuth) inFile() error {
	for _, f := range []struct{ name, value, env, file string }{
		{"bearerToken", a.BearerToken, "bearerTokenEnv", "bearerTokenFile"},
		{"apiKey", a.APIKey, "apiKeyEnv", "apiKeyFile"},
	} {
		if f.value != "" {
			return fmt.Errorf("auth.%s holds a secret in the config file; name an environment variable (%s) or a file (%s) instead", f.name, f.env, f.file)
		}
	}
	return nil
}

// credentials builds the agent's discovery.Authenticator, reading the
// environment through lookup; pol guards the token endpoint.
func (a *RemoteAuth) credentials(pol discovery.Policy, lookup func(string) (string, bool)) (*discovery.Authenticator, error) {
	var cfg discovery.Auth
	var err error
	if cfg.BearerToken, err = secret("bearerToken", a.BearerToken, a.BearerTokenEnv, a.BearerTokenFile, lookup); err != nil {
		return nil, err
	}
	if cfg.APIKey, err = secret("apiKey", a.APIKey, a.APIKeyEnv, a.APIKeyFile, lookup); err != nil {
		return nil, err
	}
	cfg.APIKeyHeader = a.APIKeyHeader
	if a.APIKeyHeader != "" && cfg.APIKey == nil {
		return nil, errors.New("apiKeyHeader is set but no API key is (apiKeyEnv or apiKeyFile)")
	}
	if o := a.OAuth2; o != nil {
		if o.TokenURL == "" || o.ClientID == "" {
			return nil, errors.New("oauth2 needs tokenUrl and clientId")
		}
		get, err := secret("oauth2.clientSecret", "", o.ClientSecretEnv, o.ClientSecretFile, lookup)
		if err != nil {
			return nil, err
		}
		if get == nil {
			return nil, errors.New("oauth2 needs the client secret: clientSecretEnv or clientSecretFile")
		}
		cs, err := get()
		if err != nil {
			return nil, err
		}
		cfg.OAuth2 = &discovery.OAuth2{TokenURL: o.TokenURL, ClientID: o.ClientID, ClientSecret: cs, Scopes: o.Scopes, Policy: pol}
	}
	if cfg.BearerToken == nil && cfg.APIKey == nil && cfg.OAuth2 == nil {
		return nil, errors.New("no credential configured (bearerTokenEnv, bearerTokenFile, apiKeyEnv, apiKeyFile or oauth2)")
	}
	return discovery.NewAuthenticator(cfg)
}

// secret reads one secret from the one source configured: literal, the
// environment variable env, or the file. It returns nil when none is.
func secret(name, literal, env, file string, lookup func(string) (string, bool)) (discovery.SecretFunc, error) {
	set := 0
	for _, v := range []string{literal, env, file} {
		if v != "" {
			set++
		}
	}
	switch {
	case set == 0:
		return nil, nil
	case set > 1:
		return nil, fmt.Errorf("%s: set one of %sEnv and %sFile", name, name, name)
	case literal != "":
		return discovery.Secret(literal), nil
	case env != "":
		v, ok := lookup(env)
		if v = strings.TrimSpace(v); !ok || v == "" {
			return nil, fmt.Errorf("%sEnv: $%s is not set", name, env)
		}
		return discovery.Secret(v), nil
	}
	f := &fileSecret{path: file}
	if _, err := f.get(); err != nil {
		return nil, fmt.Errorf("%sFile: %w", name, err)
	}
	return f.get, nil
}

// fileSecret is a secret kept in a file, read again when the file changes
// (a token rotated by a sidecar or a mounted secret).
type fileSecret struct {
	path string

	mu   sync.Mutex
	mod  time.Time
	size int64
	val  string
}

func (f *fileSecret) get() (string, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.val != "" && st.ModTime().Equal(f.mod) && st.Size() == f.size {
		return f.val, nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("%s is empty", f.path)
	}
	f.val, f.mod, f.size = v, st.ModTime(), st.Size()
	return v, nil
}

// routerOptions are a router agent's options: Targets, when set, are the
// only agents it routes to; ChildTimeout bounds the child (default 5m).
type routerOptions struct {
	Targets      []string `json:"targets,omitempty"`
	ChildTimeout Duration `json:"childTimeout,omitempty"`
}

var routerKind = kind(nil, (*process).routerDefinition)

// routerDefinition builds a router agent: it routes by skill and load
// among the live agents (only those of targets, when set).
func (p *process) routerDefinition(a AgentConfig, o routerOptions) (workers.Definition, error) {
	for _, t := range o.Targets {
		if !schemas.ValidAgentName(t) {
			return workers.Definition{}, fmt.Errorf("router target %q is not a valid agent name", t)
		}
	}
	if !p.wantDirectory {
		p.wantDirectory = true
		p.monitors = append(p.monitors, directoryRunner{p})
	}
	desc := "Sends each task to the live agent that offers the skill it needs (named in the message's metadata as " + schemas.MetaSkill + " (or the older " + workers.MetaRouterSkill + "), or matched from its words) with the least work waiting."
	return workers.Definition{
		Name: a.Name,
		Card: schemas.AgentCard{Name: a.Name, Description: desc, Version: "1.0.0",
			Skills: []schemas.AgentSkill{{ID: "route", Name: "Route", Description: desc, Tags: []string{"router"}}}},
		Agent: workers.Router{Name: a.Name, Agents: o.Targets, ChildTimeout: time.Duration(o.ChildTimeout)},
	}, nil
}

// directoryRunner makes and runs the process's registry directory once the
// bus is connected (monitors run after it is).
type directoryRunner struct{ p *process }

func (d directoryRunner) Run(ctx context.Context) {
	if err := d.p.directory.Run(ctx); err != nil && ctx.Err() == nil {
		d.p.log.Error("the agent registry follower stopped", "err", err)
	}
}
