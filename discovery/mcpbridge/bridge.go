// Package mcpbridge serves an a2abus edge's agents as MCP tools: one tool
// per live agent (a2a_<agent>), and list_agents, search_agents, get_task
// and cancel_task. It is an adapter of the edge that only translates:
// every tool call is an A2A call the edge admits with what the MCP request
// that made it presented (its credentials and address over Streamable
// HTTP; the process's own over stdio), so what a caller may do and see
// over MCP is what it may over A2A. It reaches the edge through Edge: on
// an edge, its in-process door (edge.InProcess); for "a2abus mcp --url",
// the edge's HTTP API (NewHTTPEdge). The tool list follows the edge's live
// registry, and MCP clients are told when it changes.
//
// The MCP protocol itself — versions from 2024-11-05 on, sessions, stdio
// and Streamable HTTP, progress and list-changed notifications — is the
// official MCP Go SDK's (github.com/modelcontextprotocol/go-sdk).
package mcpbridge

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2abus/a2abus/schemas"
)

// Edge is what the bridge needs of an a2abus edge: its agents, and the
// A2A calls of the tools, each made for who (what the MCP request
// presented), which the edge authenticates, limits and confines to the
// caller's tasks as it does every A2A call. edge.InProcess is one, as is
// NewHTTPEdge's.
type Edge interface {
	// Agents lists the live registry narrowed by q, as who sees it.
	Agents(ctx context.Context, who schemas.Presented, q schemas.AgentQuery) ([]schemas.AgentEntry, error)
	// SendStreamingMessage sends to agent and hands each event (with its id) to each
	// until the stream ends or each returns an error (which it returns).
	SendStreamingMessage(ctx context.Context, who schemas.Presented, agent string, req *schemas.SendMessageRequest, each func(id string, ev *schemas.StreamResponse) error) error
	GetTask(ctx context.Context, who schemas.Presented, agent string, req *schemas.GetTaskRequest) (*schemas.Task, error)
	CancelTask(ctx context.Context, who schemas.Presented, agent string, req *schemas.CancelTaskRequest) (*schemas.Task, error)
}

// Options configure a Bridge. Zero fields take the defaults.
type Options struct {
	// Edge is the edge whose agents are served. Required.
	Edge Edge
	// Header is what calls made over stdio present (the process's
	// credentials), and the bridge's own reads of the registry. Calls
	// made for a Streamable HTTP request present that request's header
	// instead.
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

// originHeader is schemas.HeaderMCPOrigin: the MCP client's address, from
// the HTTP handler to the A2A calls made for it.
const originHeader = schemas.HeaderMCPOrigin

// New returns a bridge over opt.Edge (a nil Edge is a programming
// error); Run keeps its tools in step with the registry.
func New(opt Options) *Bridge {
	if opt.Edge == nil {
		panic("mcpbridge: New without an Edge")
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
	b := &Bridge{opt: opt, log: opt.Logger.With("component", "mcp"), tools: map[string]string{}, ready: make(chan struct{})}
	b.srv = sdk.NewServer(&sdk.Implementation{Name: "a2abus", Title: "a2abus agents", Version: opt.Version}, &sdk.ServerOptions{
		Instructions: "Each a2a_<agent> tool sends a message to that A2A agent and answers with what it made. " +
			"When the agent asks for input, call the same tool again with the taskId it gave. " +
			"list_agents and search_agents show the agents; get_task and cancel_task act on a task.",
		Logger: opt.Logger,
	})
	b.addFixedTools()
	b.srv.AddReceivingMiddleware(b.freshTools)
	return b
}

// caller is what the MCP request that made a call presented: over
// Streamable HTTP its header and the client's address (Handler puts it in
// the header), over stdio the bridge's own header.
func (b *Bridge) caller(req *sdk.CallToolRequest) schemas.Presented {
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		return schemas.Presented{Header: req.Extra.Header, RemoteAddr: req.Extra.Header.Get(originHeader)}
	}
	return b.own()
}

// own is what the bridge's own calls present.
func (b *Bridge) own() schemas.Presented { return schemas.Presented{Header: b.opt.Header} }

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

// refresh serves a tool for each live agent and removes the tools of
// agents that went; the SDK tells sessions the list changed.
func (b *Bridge) refresh(ctx context.Context) error {
	agents, err := b.opt.Edge.Agents(ctx, b.own(), schemas.AgentQuery{})
	if err != nil {
		return err
	}
	live := map[string]schemas.AgentEntry{}
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
	var added []schemas.AgentEntry
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
func cardShape(a schemas.AgentEntry) string {
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
