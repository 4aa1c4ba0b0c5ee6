package edge

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
)

// Config tunes an edge. Zero fields take the defaults documented on each
// field (applied in New).
type Config struct {
	// Push serves the push-notification config methods and declares
	// pushNotifications in the cards; without it they answer "not
	// supported". CheckWebhook is the outbound policy a webhook URL must
	// pass when a config is created (where it may point, its host name
	// resolved; nil: any URL CheckPushConfig accepts); it is called with
	// the request's context and should bound its own lookups. Its error is
	// answered as invalid params, so it should say what to change.
	Push         bool
	CheckWebhook func(context.Context, *url.URL) error
	// MCP, when set, makes the handler served at /mcp (MCP's Streamable
	// HTTP) from the edge's in-process door: the MCP bridge cmd builds
	// (discovery/mcpbridge), whose every tool call is an A2A call admitted
	// there as the front door admits one. New calls it once.
	MCP func(*InProcess) http.Handler
	// GRPCAddress, when set, is where the edge's gRPC binding is served
	// (host:port, as clients dial it): each agent's card declares it, with
	// the tenant that names the agent (schemas.AgentTenant).
	GRPCAddress string
	// NotificationKeys, when set, returns the JWKS document of the keys
	// push notifications are signed with, served at
	// /.well-known/jwks.json for receivers to verify them (a function: the
	// keys are rotated while the edge runs).
	NotificationKeys func() []byte
	// CardKeys, when set, returns the keys every card the edge serves is
	// signed with (A2A §8.4: the public card, each agent's, the extended
	// card, in every binding), their public half published at
	// /.well-known/jwks.json beside NotificationKeys'. A function: the
	// keys are rotated while the edge runs; a signature is made once per
	// card content and key (cardsig.go). nil, or a nil result: cards are
	// not signed.
	CardKeys func() *auth.SigningKeys
	// PublicURL is the base URL clients reach this edge (and its replicas)
	// at, used in agent cards; default "http://127.0.0.1:8080".
	PublicURL string
	// DefaultAgent is the agent served at "/" and "/.well-known/agent-card.json".
	DefaultAgent string
	// MaxBodyBytes bounds a request body; default 4 MiB.
	MaxBodyBytes int64
	// MaxBodyBuffer bounds the memory all request bodies being read or
	// served hold together on this edge, and MaxBodyBufferPerAddr what
	// those from one source address (an IPv4 address or an IPv6 /64,
	// authenticated or not) hold; defaults 128 MiB and 16 MiB, never
	// below MaxBodyBytes (the largest body always fits). A body's buffer
	// counts as it grows with the bytes that arrive, until its request is
	// answered; a body that would pass either bound is refused with a
	// retryable error (503 + Retry-After, −31503 on JSON-RPC) instead of
	// buffered.
	MaxBodyBuffer, MaxBodyBufferPerAddr int64
	// MaxJSONDepth bounds JSON nesting of a request; default 64.
	MaxJSONDepth int
	// MaxJSONValues bounds the JSON values (numbers, strings, objects,
	// arrays) of one request body; default 65536. Decoded, a small value
	// costs tens of bytes, so this bounds what a body may cost once
	// decoded, where MaxBodyBytes bounds only its text.
	MaxJSONValues int
	// MaxParts bounds the parts of a client's message; default 256.
	MaxParts int
	// MaxPartBytes bounds the content of one part of a client's message
	// (its text, its file's bytes, its URL or its data's JSON); default
	// 1 MiB.
	MaxPartBytes int
	// MaxMessageBytes bounds the content of all parts of a client's
	// message together; default 2 MiB. Both bounds sit below MaxBodyBytes
	// so a client meets one that names the field at fault; the bus's task
	// record bound (1 MiB by default) applies as well.
	MaxMessageBytes int
	// MaxPartURLBytes bounds the URL of a URL part; default 8 KiB.
	MaxPartURLBytes int
	// MaxPartDataDepth bounds the nesting of a data part's JSON value;
	// default 32.
	MaxPartDataDepth int
	// AllowedPartURLSchemes are the URL schemes a client's URL part may
	// use, compared lowercase; default http, https and data. An agent may
	// fetch the URL, so a scheme such as file is refused unless named here.
	AllowedPartURLSchemes []string
	// BlockingTimeout bounds how long a blocking SendMessage waits for the
	// task to settle before answering with its current state; default 60s.
	BlockingTimeout time.Duration
	// CardMaxAge is the Cache-Control max-age of agent cards; default 60s.
	CardMaxAge time.Duration
	// KeepAlive is the interval of SSE keep-alive comments; default 15s.
	KeepAlive time.Duration
	// StreamBuffer bounds the events waiting for one slow SSE client; past
	// it the client's stream is closed and it resumes from its cursor.
	// Default 256.
	StreamBuffer int
	// Limits bounds each caller's request rate and unfinished tasks.
	Limits LimitsConfig
	// MaxBacklogPerAgent bounds the work queued or running for one agent;
	// past it new tasks are refused with a retryable error (503 +
	// Retry-After) and accepted work is unaffected. 0: no bound.
	MaxBacklogPerAgent uint64
	// MaxFinishedTasks bounds how many finished tasks are kept; past it the
	// edge deletes the oldest finished ones (unfinished tasks are never
	// touched). 0: only the task TTL bounds them.
	MaxFinishedTasks int
	// MaxFinishedBytes bounds the stored size of finished task records the
	// same way, oldest finished first. 0: no bytes bound.
	MaxFinishedBytes int64
	// SweepEvery is how often the bounds are enforced and orphaned work is
	// looked for; default 10s.
	SweepEvery time.Duration
	// IdleAfter is how long a task may wait for input (INPUT_REQUIRED,
	// AUTH_REQUIRED) before a sweep cancels it with the reason; default
	// 24h. Negative: never.
	IdleAfter time.Duration
	// OrphanAfter is how long a task may stay SUBMITTED with no work queued
	// before a sweep queues its work (a process died between storing the
	// task and queueing it); default 30s. Negative: never.
	OrphanAfter time.Duration
	// StreamWriteTimeout bounds one write to an SSE client; a client that
	// takes no data for this long is disconnected. Default 60s.
	StreamWriteTimeout time.Duration
	// MaxStreams bounds the SSE streams open at once, shared fairly by
	// source address (an IPv6 /64): once half are open, an address may
	// open one more only while it holds less than its fair share
	// (MaxStreams divided by the addresses holding streams, at least 4).
	// A stream is held for as long as its task runs and is never cut, so
	// set it below the listener's MaxConns: the connections above it are
	// never streams, and stay for other requests and for newcomers. A
	// stream over it is refused: 429 (−31429) past the address's share,
	// 503 (−31503) when all are open, each with Retry-After. 0: no bound.
	MaxStreams int
	// Auth authenticates every A2A request at the front door; nil (or an
	// anonymous authenticator) serves every caller as one anonymous
	// principal. The agent cards declare its schemes.
	Auth *auth.Authenticator
	// ExtendedSkills are skills an agent shows only to authenticated
	// callers, by agent name: its extended agent card
	// (GetExtendedAgentCard) is its public card with these added, and its
	// public card declares one. Only with Auth set; without
	// authentication there is no one to show more to.
	ExtendedSkills map[string][]schemas.AgentSkill
	// CardScopesAsArrays writes the scopes of the cards' securityRequirements
	// as bare arrays ({"schemes": {"apiKey": []}}), the form the official Go
	// SDK (a2a-go v2, through v2.4.0: a2a-go#430) reads and writes, instead
	// of the ProtoJSON form of the spec's StringList ({"schemes": {"apiKey":
	// {"list": []}}}), which that SDK cannot read and protobuf's own parsers
	// and the 1.0 card schema require. Default false: the spec's form.
	CardScopesAsArrays bool
	// Card10Only serves every card (public, per agent, the listing's) in
	// A2A 1.0's form alone (see card10) instead of the union card that
	// carries 0.3's top-level url, preferredTransport and protocolVersion
	// beside 1.0's fields. The union is the default because one card then
	// serves both generations of clients (the spec: implementations SHOULD
	// ignore unrecognized fields); a strict 1.0 validator, whose schema
	// allows no other field, accepts only this form. 0.3's
	// agent/getAuthenticatedExtendedCard answers the union card either way.
	Card10Only bool
	// Trust maps each call to its trust level and says what each level
	// may do (trust.go); the zero policy is the defaults.
	Trust TrustPolicy
	// Approvals says which new tasks wait for a person's approval and who
	// gives it (approval.go).
	Approvals ApprovalPolicy
	// Budgets are what each principal and tenant may spend per period
	// (budget.go); no rules: none.
	Budgets bus.BudgetPolicy
	// PublicMetrics serves /metrics without credentials when Auth is set;
	// otherwise only admin principals read it.
	PublicMetrics bool
	// LoopbackOnly says the edge listens on loopback addresses only. A
	// request there whose Host is neither a loopback name nor PublicURL's
	// host comes from a browser page whose DNS name was rebound to
	// 127.0.0.1 to reach this edge, and is refused (403).
	LoopbackOnly bool
	// OpenAdmin lets an edge that authenticates no one serve its admin
	// routes to every caller: the registry's admin API (writes only while
	// LoopbackOnly) and /metrics. Without it such an edge refuses them
	// (403): the registry is shared by every edge of the bus, so whether
	// a caller may change it cannot depend on entering through an edge
	// that knows no one. An edge that authenticates serves them to its
	// admin principals and ignores this.
	OpenAdmin bool
	// RemoteEnvAllow are the environment variables, beyond those named
	// with schemas.RemoteEnvPrefix, that a remote agent registered here
	// may name in headersFromEnv (see schemas.RemoteEnvAllowed); an entry
	// naming another is refused (400).
	RemoteEnvAllow []string
	// Logger; default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.PublicURL == "" {
		c.PublicURL = "http://127.0.0.1:8080"
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 4 << 20
	}
	if c.MaxBodyBuffer <= 0 {
		c.MaxBodyBuffer = 128 << 20
	}
	if c.MaxBodyBufferPerAddr <= 0 {
		c.MaxBodyBufferPerAddr = 16 << 20
	}
	// A buffer holds one byte past the body, where its end is read.
	c.MaxBodyBuffer = max(c.MaxBodyBuffer, c.MaxBodyBytes+1)
	c.MaxBodyBufferPerAddr = max(c.MaxBodyBufferPerAddr, c.MaxBodyBytes+1)
	if c.MaxJSONDepth <= 0 {
		c.MaxJSONDepth = 64
	}
	if c.MaxJSONValues <= 0 {
		c.MaxJSONValues = 1 << 16
	}
	parts := schemas.DefaultPartLimits()
	if c.MaxParts <= 0 {
		c.MaxParts = parts.MaxParts
	}
	if c.MaxPartBytes <= 0 {
		c.MaxPartBytes = parts.MaxPartBytes
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = parts.MaxMessageBytes
	}
	if c.MaxPartURLBytes <= 0 {
		c.MaxPartURLBytes = parts.MaxURLBytes
	}
	if c.MaxPartDataDepth <= 0 {
		c.MaxPartDataDepth = parts.MaxDataDepth
	}
	if len(c.AllowedPartURLSchemes) == 0 {
		c.AllowedPartURLSchemes = parts.URLSchemes
	}
	c.AllowedPartURLSchemes = lowercase(c.AllowedPartURLSchemes)
	if c.BlockingTimeout <= 0 {
		c.BlockingTimeout = 60 * time.Second
	}
	if c.CardMaxAge <= 0 {
		c.CardMaxAge = 60 * time.Second
	}
	if c.SweepEvery <= 0 {
		c.SweepEvery = 10 * time.Second
	}
	if c.OrphanAfter == 0 {
		c.OrphanAfter = 30 * time.Second
	}
	if c.IdleAfter == 0 {
		c.IdleAfter = 24 * time.Hour
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = 15 * time.Second
	}
	if c.StreamWriteTimeout <= 0 {
		c.StreamWriteTimeout = 60 * time.Second
	}
	if c.StreamBuffer <= 0 {
		c.StreamBuffer = 256
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Server is a stateless A2A edge: every request is answered from the bus
// (task state in KV, agents in the registry), so any number of edges can
// serve the same tasks. It holds only caches that follow the bus (the agent
// directory) and the waiters of its own in-flight blocking requests.
type Server struct {
	cfg         Config
	svc         service     // the A2A service every binding adapts, behind its interceptors
	registry    Registry    // the admin registry routes'
	deadLetters DeadLetters // the dead-letter admin route's
	approvals   Approvals   // the approvals routes'
	audit       AuditLog    // the audit record's: audited calls, admin actions, its admin route
	inbox       RemoteInbox // the remote-push webhook's
	conn        interface{ Connected() bool }
	metrics     *bus.Metrics
	log         *slog.Logger
	tasks       *bus.TaskWatcher
	index       *bus.TaskIndex
	rate        rateLimiter
	trust       *trustPolicy  // Config.Trust as applied (compileTrust)
	streamsOf   callerStreams // streams per caller at levels that bound them
	agents      *bus.AgentDirectory
	writes      *bus.WriteProbe
	mux         *http.ServeMux
	table       []Route // every route mux serves (routes.go)
	handler     http.Handler
	mcp         http.Handler // Config.MCP's handler
	v1, v03     dialect
	openFang    dialect
	drain       drainState // what a shutdown waits for and ends (drain.go)
	m           edgeMetrics
	bodies      *bodyBudget // the memory request bodies hold (readBody)
	cardSigs    cardSignatures
	budgets     *budgetGate // Config.Budgets on the bus; nil: none
	// started is when the edge was built: its own part of every card it
	// serves (interfaces, capabilities, security) is unchanged since.
	started time.Time
}

// New returns an edge on b (a *bus.Bus). Call Run to start following the
// bus, and serve Handler over HTTP.
func New(b Bus, cfg Config) *Server {
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:         cfg,
		registry:    b,
		deadLetters: b,
		approvals:   b,
		audit:       b,
		inbox:       b,
		conn:        b,
		metrics:     b.Metrics(),
		log:         cfg.Logger.With("component", "edge"),
		tasks:       b.NewTaskWatcher(),
		index:       b.NewTaskIndex(),
		agents:      b.NewAgentDirectory(),
		writes:      b.NewWriteProbe(),
		mux:         http.NewServeMux(),
		m:           newEdgeMetrics(b.Metrics()),
		bodies:      newBodyBudget(cfg.MaxBodyBuffer, cfg.MaxBodyBufferPerAddr, newBodyGauge(b.Metrics())),
		started:     time.Now(),
		trust:       compileTrust(cfg.Trust, cfg.Limits.Default, cfg.partLimits()),
	}
	// One follower of the task bucket for both: each write reaches the
	// edge once.
	s.index.Carry(s.tasks)
	s.agents.ReportBacklogs()
	s.budgets = newBudgetGate(b, cfg.Budgets, s.agents, b.Metrics(), s.log)
	s.svc = intercept(&a2aService{
		cfg: &s.cfg, log: s.log, life: b, pushes: b, index: s.index, tasks: s.tasks, drain: &s.drain,
		extendedCard: s.extendedCard,
		makesTasks: func(agent string) bool {
			reg, ok := s.agents.Get(agent)
			return ok && reg.MakesTasks
		},
	}, s.interceptors(b.AgentLoad, b.Config().TaskMaxBytes)...)
	s.v1, s.v03 = s.dialects()
	s.openFang = s.openFangDialect()
	if cfg.MCP != nil {
		s.mcp = cfg.MCP(s.InProcess("mcp"))
	}
	s.routes()
	s.handler = withoutTrailingSlash(s.tenantPaths())
	if cfg.LoopbackOnly {
		s.handler = LoopbackHosts(cfg.PublicURL, s.handler)
	}
	s.handler = s.counted(s.handler)
	return s
}

// Handler returns the HTTP handler of the edge. Every route is also served
// with a trailing slash.
func (s *Server) Handler() http.Handler { return s.handler }

// Run follows the bus (task watcher, task index, agent directory) and
// probes whether it takes writes, until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 5)
	go func() { errc <- s.tasks.Run(ctx) }()
	go func() { errc <- s.index.Run(ctx) }()
	go func() { errc <- s.agents.Run(ctx) }()
	go func() { errc <- s.writes.Run(ctx) }()
	go func() { errc <- s.sweep(ctx) }()
	var first error
	for range 5 {
		if err := <-errc; err != nil && first == nil {
			first = err
			s.log.Error("edge bus follower stopped", "err", err)
		}
	}
	return first
}

// sweep enforces MaxFinishedTasks and MaxFinishedBytes, requeues
// orphaned work, and settles expired approvals, until ctx ends. Every edge tries; the one holding the
// sweep lease does the work (see bus.TaskIndex.Sweep), at the cost of
// what it deletes.
func (s *Server) sweep(ctx context.Context) error {
	o := bus.SweepOptions{
		Keep:        bus.Retention{MaxCount: s.cfg.MaxFinishedTasks, MaxBytes: s.cfg.MaxFinishedBytes},
		OrphanAfter: max(s.cfg.OrphanAfter, 0),
		IdleAfter:   max(s.cfg.IdleAfter, 0),
	}
	// With nothing of that configured, a tick still settles the approvals
	// that expired (the index answers at once when none is pending).
	t := time.NewTicker(s.cfg.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// Handed on at once, not after the lease's TTL: the sweep of
			// a restarted or surviving edge goes on at its next tick.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := s.index.ReleaseSweep(rctx); err != nil {
				s.log.Warn("releasing the sweep lease failed; another edge takes it when it expires", "err", err)
			}
			return nil
		case <-t.C:
			r, err := s.index.Sweep(ctx, o)
			if err != nil && ctx.Err() == nil {
				s.log.Warn("sweeping tasks failed", "err", err)
			}
			if r.Deleted > 0 {
				s.log.Info("deleted the oldest finished tasks", "count", r.Deleted)
			}
			if r.Expired > 0 {
				s.log.Info("canceled tasks idle for input", "count", r.Expired, "after", o.IdleAfter)
			}
			for _, e := range r.ApprovalsExpired {
				if err := s.auditAdmin(ctx, nil, schemas.AuditActionApprovalExpire, e.Agent, e.TaskID, schemas.AuditDenied, schemas.AuditOK); err != nil {
					s.log.Warn("the audit record of an expired approval could not be written", "task_id", e.TaskID, "err", err)
				}
			}
		}
	}
}

// followers are the Ready channels of what the edge follows on the bus:
// the task watcher, the task index, the agent directory and the write
// probe.
func (s *Server) followers() []<-chan struct{} {
	return []<-chan struct{}{s.tasks.Ready(), s.index.Ready(), s.agents.Ready(), s.writes.Ready()}
}

// WaitReady blocks until the edge follows the bus and has found it
// writable, or ctx ends.
func (s *Server) WaitReady(ctx context.Context) error {
	for _, ch := range s.followers() {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (s *Server) ready() bool {
	if s.drain.draining() || !s.conn.Connected() {
		return false
	}
	for _, ch := range s.followers() {
		select {
		case <-ch:
		default:
			return false
		}
	}
	return s.followingBus() && s.writes.NotWritableFor() < unfollowedGrace
}

// unfollowedGrace is how long the edge's followers may be replacing their
// consumers (every reconnect does, for a moment), or the bus may refuse
// writes, before /readyz says the edge is not ready: a node lost for longer
// than that means blocking calls would not see their tasks finish, and a
// bus that stores nothing (see bus.WriteProbe) fails every request.
const unfollowedGrace = 2 * time.Second

// followingBus reports whether the task watcher and the agent directory
// follow the bus, or stopped doing so less than unfollowedGrace ago.
func (s *Server) followingBus() bool {
	return s.tasks.NotFollowingFor() < unfollowedGrace && s.agents.NotFollowingFor() < unfollowedGrace
}

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	if !s.ready() {
		writePlain(w, http.StatusServiceUnavailable, "not ready")
		return
	}
	writePlain(w, http.StatusOK, "ready")
}

func writePlain(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body + "\n"))
}
