// Package mcpbridge serves an a2abus edge's agents as MCP tools: one tool
// per live agent (a2a_<agent>), and list_agents, search_agents, get_task
// and cancel_task. It is an A2A client of the edge, built on the discovery
// client: every tool call is an A2A call through the edge's front door,
// with the credentials of the MCP request that made it (Streamable HTTP)
// or of the process (stdio), so what a caller may do and see over MCP is
// what it may over A2A. The tool list follows the edge's live registry,
// and MCP clients are told when it changes.
//
// The MCP protocol itself — versions from 2024-11-05 on, sessions, stdio
// and Streamable HTTP, progress and list-changed notifications — is the
// official MCP Go SDK's (github.com/modelcontextprotocol/go-sdk).
package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
)

// Options configure a Bridge. Zero fields take the defaults.
type Options struct {
	// BaseURL is the edge's base URL (its public URL: the Host the edge
	// expects). Required.
	BaseURL string
	// HTTP reaches the edge. Default: a plain client. An edge serving
	// /mcp itself passes an in-process transport into its own handler
	// (see HandlerTransport).
	HTTP *http.Client
	// Header is sent with every call (stdio: the process's credentials).
	// Calls made for a Streamable HTTP request forward that request's
	// Authorization and X-API-Key instead.
	Header http.Header
	// Wait bounds how long a tool call waits for its task to settle
	// before answering with the task as it stands; default 60s.
	Wait time.Duration
	// Refresh is how often the registry is read for agents that came or
	// went; default 5s.
	Refresh time.Duration
	// Version is the server version the bridge reports.
	Version string
	Logger  *slog.Logger
}

// Bridge is one MCP server over one edge.
type Bridge struct {
	opt   Options
	srv   *sdk.Server
	log   *slog.Logger
	mu    sync.Mutex
	tools map[string]string // tool name → what its description was made from (the agent's card)
	ready chan struct{}
	once  sync.Once
	// refreshing serialises reads of the registry; tried is when the last
	// one began (Unix nanoseconds), whether it succeeded or not, so calls
	// back off from a registry that fails too.
	refreshing sync.Mutex
	tried      atomic.Int64
}

// forwarded are the request headers a call made for an MCP request over
// HTTP carries to the edge: the caller's credentials.
var forwarded = []string{"Authorization", "X-Api-Key"}

// originHeader is schemas.HeaderMCPOrigin: the MCP client's address, from
// the HTTP handler to the A2A calls made for it.
const originHeader = schemas.HeaderMCPOrigin

// New returns a bridge; Run keeps its tools in step with the registry.
func New(opt Options) (*Bridge, error) {
	if opt.BaseURL == "" {
		return nil, errors.New("mcpbridge: BaseURL is required")
	}
	if opt.HTTP == nil {
		opt.HTTP = &http.Client{}
	}
	if opt.Wait <= 0 {
		opt.Wait = 60 * time.Second
	}
	if opt.Refresh <= 0 {
		opt.Refresh = 5 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	opt.BaseURL = strings.TrimSuffix(opt.BaseURL, "/")
	b := &Bridge{opt: opt, log: opt.Logger.With("component", "mcp"), tools: map[string]string{}, ready: make(chan struct{})}
	// The credentials go on every request the client sends, so it never
	// follows a redirect: they would go along to wherever it points (the
	// edge never redirects an A2A call).
	b.opt.HTTP = &http.Client{Transport: credentials{next: transportOf(opt.HTTP), base: opt.Header}, Timeout: opt.HTTP.Timeout, CheckRedirect: noRedirects}
	b.srv = sdk.NewServer(&sdk.Implementation{Name: "a2abus", Title: "a2abus agents", Version: opt.Version}, &sdk.ServerOptions{
		Instructions: "Each a2a_<agent> tool sends a message to that A2A agent and answers with what it made. " +
			"When the agent asks for input, call the same tool again with the taskId it gave. " +
			"list_agents and search_agents show the agents; get_task and cancel_task act on a task.",
		Logger: opt.Logger,
	})
	b.addFixedTools()
	b.srv.AddReceivingMiddleware(b.freshTools)
	return b, nil
}

// freshTools reads the registry before a tools/list or tools/call when it
// was last read longer than Refresh ago, which it was after a time without
// sessions (Run reads it only while there are some): a new client sees the
// agents as they are now. A call never waits for a read already under
// way: it is served the tools as they are.
func (b *Bridge) freshTools(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if (method == "tools/list" || method == "tools/call") && b.stale() && b.refreshing.TryLock() {
			if b.stale() {
				// The bridge's own read, not the caller's: the tools are
				// everyone's.
				if err := b.read(context.WithoutCancel(ctx)); err != nil {
					b.log.Warn("reading the agent registry failed; serving the tools as they were", "err", err)
				}
			}
			b.refreshing.Unlock()
		}
		return next(ctx, method, req)
	}
}

func transportOf(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}

// Ready is closed once the tools of the registry's agents are served.
func (b *Bridge) Ready() <-chan struct{} { return b.ready }

// Handler serves MCP over Streamable HTTP.
func (b *Bridge) Handler() http.Handler {
	// Idle sessions are closed, so clients that go away do not pile up.
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return b.srv }, &sdk.StreamableHTTPOptions{Logger: b.opt.Logger, SessionTimeout: 30 * time.Minute})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(originHeader)
		r.Header.Set(originHeader, r.RemoteAddr)
		h.ServeHTTP(w, r)
	})
}

// ServeStdio serves MCP over the process's stdin and stdout until the
// client goes or ctx ends.
func (b *Bridge) ServeStdio(ctx context.Context) error {
	return b.srv.Run(ctx, &sdk.StdioTransport{})
}

// ServeIO serves MCP as newline-delimited JSON-RPC over r and w (stdio's
// framing) until the client goes or ctx ends.
func (b *Bridge) ServeIO(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	return b.srv.Run(ctx, &sdk.IOTransport{Reader: r, Writer: w})
}

// Run serves one tool per live agent until ctx ends: it reads the
// registry until a read succeeds, then every Refresh while MCP sessions
// are open (they are told when the list changes). Without sessions nobody
// would be told, and an idle edge would call itself for nothing;
// freshTools reads it again for the next client.
func (b *Bridge) Run(ctx context.Context) error {
	t := time.NewTicker(b.opt.Refresh)
	defer t.Stop()
	for {
		if err := b.tick(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("reading the agent registry failed; keeping the tools served", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// tick is one turn of Run: a read of the registry until one has
// succeeded, and after that while sessions are open.
func (b *Bridge) tick(ctx context.Context) error {
	select {
	case <-b.ready:
		if !b.hasSessions() {
			return nil
		}
	default:
	}
	b.refreshing.Lock()
	defer b.refreshing.Unlock()
	return b.read(ctx)
}

// hasSessions reports whether an MCP client is connected.
func (b *Bridge) hasSessions() bool {
	for range b.srv.Sessions() {
		return true
	}
	return false
}

// stale reports whether the last read began longer than Refresh ago.
func (b *Bridge) stale() bool {
	return time.Since(time.Unix(0, b.tried.Load())) >= b.opt.Refresh
}

// read reads the registry, bounded by Refresh plus a margin (an edge that
// does not answer holds nothing up for long); the caller holds refreshing.
func (b *Bridge) read(ctx context.Context) error {
	b.tried.Store(time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(ctx, b.opt.Refresh+10*time.Second)
	defer cancel()
	return b.refresh(ctx)
}

// agentEntry is what the bridge reads of GET /a2a/agents.
type agentEntry struct {
	schemas.AgentCard
	Agent  string                     `json:"agent"`
	Kind   string                     `json:"kind"`
	Remote *schemas.RemoteAgentStatus `json:"remote,omitempty"`
	Health string                     `json:"health,omitempty"`
}

// agents reads the registry, narrowed by query (GET /a2a/agents's).
func (b *Bridge) agents(ctx context.Context, query url.Values) ([]agentEntry, error) {
	u := b.opt.BaseURL + "/a2a/agents"
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := b.opt.HTTP.Do(req)
	if err != nil {
		return nil, discovery.RedactError(err, u) // it goes to the MCP client
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the registry answered %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var list struct {
		Agents []agentEntry `json:"agents"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("the registry's answer: %w", err)
	}
	return list.Agents, nil
}

// refresh serves a tool for each live agent and removes the tools of
// agents that went; the SDK tells sessions the list changed.
func (b *Bridge) refresh(ctx context.Context) error {
	agents, err := b.agents(ctx, nil)
	if err != nil {
		return err
	}
	live := map[string]agentEntry{}
	for _, a := range agents {
		if a.Health == schemas.HealthOffline || a.Health == schemas.HealthMaintenance {
			continue // it takes no task now: no tool until it does
		}
		if name := ToolName(a.Agent); name != "" {
			live[name] = a
		}
	}
	b.mu.Lock()
	var gone []string
	for name := range b.tools {
		if _, ok := live[name]; !ok {
			gone = append(gone, name)
			delete(b.tools, name)
		}
	}
	// New agents, and agents whose card changed (the tool is served
	// again with the new description; the SDK announces both).
	var added []agentEntry
	for name, a := range live {
		shape := cardShape(a)
		if b.tools[name] != shape {
			b.tools[name] = shape
			added = append(added, a)
		}
	}
	b.mu.Unlock()
	if len(gone) > 0 {
		b.srv.RemoveTools(gone...)
	}
	for _, a := range added {
		b.addAgentTool(a)
	}
	b.once.Do(func() { close(b.ready) })
	return nil
}

// cardShape is what an agent's tool is made from, to tell a changed card.
func cardShape(a agentEntry) string {
	b, _ := json.Marshal(struct {
		Name, Description string
		Skills            []schemas.AgentSkill
	}{a.Name, a.Description, a.Skills})
	return string(b)
}

// ToolName is the tool of an agent: a2a_<agent> ("" for a name MCP
// cannot carry; agent names are already of the letters it allows).
func ToolName(agent string) string {
	if !schemas.ValidAgentName(agent) {
		return ""
	}
	return "a2a_" + agent
}

// clientFor is the A2A client of an agent (A2A 1.0 JSON-RPC on the edge).
func (b *Bridge) clientFor(agent string) (*discovery.Client, error) {
	if !schemas.ValidAgentName(agent) {
		return nil, fmt.Errorf("%q is not an agent name", agent)
	}
	// A client per call: the endpoint is fixed (nothing to learn about
	// it), and a cache keyed by caller-given names would only grow.
	return discovery.NewClient(discovery.Endpoint{URL: b.opt.BaseURL + "/agents/" + agent, Binding: schemas.BindingJSONRPC, Version: schemas.ProtocolVersion},
		discovery.Options{HTTP: b.opt.HTTP, Timeout: b.opt.Wait + 10*time.Second})
}

// noRedirects is http.Client.CheckRedirect for clients that add
// credentials to every request: a redirect is answered, not followed.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// credentials sets the headers a call forwards: those of the MCP request
// that made it (in the context), else the bridge's own.
type credentials struct {
	next http.RoundTripper
	base http.Header
}

type callerKey struct{}

// withCaller puts an MCP request's headers in ctx for the calls it makes.
func withCaller(ctx context.Context, h http.Header) context.Context {
	if h == nil {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, h)
}

func (c credentials) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h, ok := r.Context().Value(callerKey{}).(http.Header); ok {
		for _, k := range forwarded {
			if v := h.Values(k); len(v) > 0 {
				r.Header[http.CanonicalHeaderKey(k)] = slices.Clone(v)
			}
		}
		if o := h.Get(originHeader); o != "" {
			r.Header.Set(originHeader, o)
		}
	} else {
		for k, vs := range c.base {
			r.Header[k] = slices.Clone(vs)
		}
	}
	return c.next.RoundTrip(r)
}
