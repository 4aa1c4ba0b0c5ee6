package discovery

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/a2abus/a2abus/schemas"
)

// Version is a2abus's version, sent in the User-Agent of every request.
const Version = "0.1.0"

// UserAgent names a2abus and its version in every outbound request.
const UserAgent = "a2abus/" + Version + " (+https://github.com/a2abus/a2abus)"

// Endpoint is where and how to reach an agent: one interface of its card.
type Endpoint struct {
	// URL is where the binding is spoken: an http(s) URL, or for gRPC
	// one of the forms grpcAddress (grpc.go) reads — https:// or
	// grpcs:// over TLS, http:// in cleartext, host:port or grpc:// in
	// cleartext to a loopback address and over TLS otherwise.
	URL     string
	Binding string // schemas.BindingJSONRPC, schemas.BindingHTTPJSON or schemas.BindingGRPC
	// Version is the A2A protocol version spoken there: "1.0", "0.3", or
	// schemas.ProtocolVersionLegacy ("0.1") for the older tasks/send
	// dialect (JSON-RPC only).
	Version string
	Tenant  string
	// Streaming is the card's capabilities.streaming, set by Endpoints for
	// the older dialect, the only one that heeds it: its client streams
	// with tasks/sendSubscribe only when it is set, and otherwise polls.
	// 1.0 and 0.3 clients try to stream regardless.
	Streaming bool
}

// String names the endpoint for logs and messages.
func (e Endpoint) String() string {
	if isLegacy(e.Version) {
		return e.Binding + " " + e.Version + " (tasks/send) " + e.URL
	}
	return e.Binding + " " + e.Version + " " + e.URL
}

// The wire forms a user names (the --binding of a2abus's client commands
// and of its load generator): each an endpoint at the URL the user gives.
// A new wire form is a row here and its adapter (wire.go).
var namedWires = []struct{ name, binding, version string }{
	{"jsonrpc", schemas.BindingJSONRPC, schemas.ProtocolVersion},
	{"rest", schemas.BindingHTTPJSON, schemas.ProtocolVersion},
	{"grpc", schemas.BindingGRPC, schemas.ProtocolVersion},
	{"jsonrpc03", schemas.BindingJSONRPC, schemas.ProtocolVersion03},
}

// NamedEndpoint is the endpoint at u of the wire form a user names (one
// of WireNames), and whether name is one. gRPC has no path, so for
// "grpc" the path of an absolute URL is the tenant the calls name
// instead: http://host:port/agents/echo calls the agent echo of an
// a2abus edge, as http://host:8080/agents/echo does over JSON-RPC.
func NamedEndpoint(name, u string) (Endpoint, bool) {
	for _, w := range namedWires {
		if w.name != name {
			continue
		}
		ep := Endpoint{URL: u, Binding: w.binding, Version: w.version}
		if pu, err := url.Parse(u); err == nil && w.binding == schemas.BindingGRPC && pu.Host != "" && strings.Trim(pu.Path, "/") != "" {
			ep.Tenant = strings.Trim(pu.Path, "/")
			pu.Path, pu.RawPath = "", ""
			ep.URL = pu.String()
		}
		return ep, true
	}
	return Endpoint{}, false
}

// WireNames are the names NamedEndpoint takes, in the order to offer them.
func WireNames() []string {
	names := make([]string, len(namedWires))
	for i, w := range namedWires {
		names[i] = w.name
	}
	return names
}

// Options configure a Client. The zero value is usable: a guarded HTTP
// client that only reaches public addresses, and the default limits.
type Options struct {
	// HTTP is the HTTP client to use. Default: Policy.Client(0), the
	// SSRF-guarded client; a caller that sets HTTP owns the guard. A gRPC
	// endpoint uses its TLS configuration (see grpcTLS), not its
	// connections.
	HTTP *http.Client
	// Policy guards outbound addresses when HTTP is nil, and always those
	// of a gRPC endpoint, whose connection dials through its guard.
	Policy Policy
	// Header is added to every request.
	Header http.Header
	// Credentials, when set, authenticate every request, chosen by
	// Security (see Credentials.Apply). An agent that refuses an OAuth2
	// token (HTTP 401) gets the request once more with a fresh one.
	Credentials Credentials
	// Security is what the agent's card declares about authentication;
	// ClientFor fills it from the card. Nil: unknown.
	Security *Security
	// Timeout bounds each unary call, and how long a stream may take to
	// start (not the stream itself, which lasts as long as the task).
	// Default 30s.
	Timeout time.Duration
	// MaxResponseBytes bounds a unary response body and one stream event.
	// Default 16 MiB.
	MaxResponseBytes int64
	// PollInterval is how long a stream of an agent of the older dialect
	// that cannot stream waits before polling the task; it doubles while
	// nothing changes, up to MaxPollInterval. Defaults 250ms and 5s.
	PollInterval, MaxPollInterval time.Duration
}

// Client calls one A2A endpoint. It is safe for concurrent use. It keeps
// what its calls taught it about the endpoint (which dialect answers, see
// inDialect; how an agent of the older dialect is reached, see legacy.go),
// so only the first calls pay for finding out: keep one Client per
// endpoint.
type Client struct {
	conn *conn
	// wires are the wire forms the endpoint may be spoken in (wiresFor);
	// spoken is 1 + the index of the one an answer confirmed, 0 until one
	// did.
	wires  []wire
	spoken atomic.Int32
}

// CheckEndpoint refuses an endpoint NewClient cannot speak: its URL (an
// absolute http(s) URL, or a gRPC address as grpcAddress reads it), its
// binding, its version; it dials nothing.
func CheckEndpoint(ep Endpoint) error {
	if ep.Binding == schemas.BindingGRPC {
		if _, _, err := grpcAddress(ep.URL); err != nil {
			return err
		}
	} else if u, err := url.Parse(ep.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("discovery: agent URL %q is not an absolute http(s) URL", ep.URL)
	}
	switch ep.Binding {
	case schemas.BindingJSONRPC, schemas.BindingHTTPJSON, schemas.BindingGRPC:
	default:
		return fmt.Errorf("discovery: binding %q is not supported (JSONRPC, HTTP+JSON or GRPC)", ep.Binding)
	}
	switch {
	case isV1(ep.Version):
	case isV03(ep.Version), isLegacy(ep.Version):
		if ep.Binding != schemas.BindingJSONRPC {
			return fmt.Errorf("discovery: A2A %s is supported over JSONRPC only, not %s", ep.Version, ep.Binding)
		}
	default:
		return fmt.Errorf("discovery: protocol version %q is not supported (1.0, 0.3, or 0.1: the tasks/send dialect)", ep.Version)
	}
	return nil
}

// NewClient returns a client of the endpoint. A client of a gRPC
// endpoint holds a connection of its own (dialed at its first call):
// Close releases it.
func NewClient(ep Endpoint, opts Options) (*Client, error) {
	if err := CheckEndpoint(ep); err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = 16 << 20
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	if opts.MaxPollInterval <= 0 {
		opts.MaxPollInterval = 5 * time.Second
	}
	opts.MaxPollInterval = max(opts.MaxPollInterval, opts.PollInterval)
	hc := opts.HTTP
	if hc == nil {
		hc = opts.Policy.Client(0)
	}
	cn := &conn{ep: ep, http: hc, opts: opts}
	if ep.Binding == schemas.BindingGRPC {
		var err error
		if cn.grpc, err = newGRPCConn(ep, opts, opts.HTTP); err != nil {
			return nil, err
		}
	}
	return &Client{conn: cn, wires: wiresFor(cn)}, nil
}

// Endpoint returns the endpoint the client calls.
func (c *Client) Endpoint() Endpoint { return c.conn.ep }

// Close releases what the client holds of its own: a gRPC endpoint's
// connection, after which its calls and streams under way end and new
// ones fail. A client of another binding holds nothing of its own (its
// HTTP client's connections are pooled by whoever made it), and Close does
// nothing. It is safe to call more than once.
func (c *Client) Close() error {
	if c.conn.grpc == nil {
		return nil
	}
	if err := c.conn.grpc.cc.Close(); err != nil && status.Code(err) != codes.Canceled {
		return err
	}
	return nil
}

func isV1(v string) bool { return v == "" || v == "1" || strings.HasPrefix(v, "1.") }
func isV03(v string) bool {
	return v == "0.3" || strings.HasPrefix(v, "0.3.") || v == "0.2" || strings.HasPrefix(v, "0.2.")
}
func isLegacy(v string) bool {
	return v == schemas.ProtocolVersionLegacy || strings.HasPrefix(v, schemas.ProtocolVersionLegacy+".")
}

// SendMessage sends a message and returns the task or message the agent
// answers. With Configuration.ReturnImmediately the agent answers at once.
// An answer holding neither is an error matching
// schemas.ErrInvalidAgentResponse.
//
// An agent of the older dialect is sent tasks/send: with the id of the
// task the message continues (Message.TaskID), else with a new id the
// client chooses (an agent may choose its own instead: the answer's id is
// the task's); Message.ContextID is the sessionId. The dialect has no
// returnImmediately: the agent answers when it chooses.
func (c *Client) SendMessage(ctx context.Context, req *schemas.SendMessageRequest) (*schemas.SendMessageResponse, error) {
	return inDialect(c, func(w wire) (*schemas.SendMessageResponse, error) { return w.sendMessage(ctx, req) })
}

// GetTask returns a task.
func (c *Client) GetTask(ctx context.Context, req *schemas.GetTaskRequest) (*schemas.Task, error) {
	return c.wire().getTask(ctx, req)
}

// CancelTask asks the agent to cancel a task and returns it.
func (c *Client) CancelTask(ctx context.Context, req *schemas.CancelTaskRequest) (*schemas.Task, error) {
	return c.wire().cancelTask(ctx, req)
}

// ListTasks lists tasks. A 0.3 agent, or one of the older dialect, has no
// such method: the answer is ErrUnsupportedOperation.
func (c *Client) ListTasks(ctx context.Context, req *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error) {
	return c.wire().listTasks(ctx, req)
}

// SendStreamingMessage sends a message and streams the task's events.
// The agent has the client's Timeout to start the stream, which then lasts
// as long as ctx and the task.
//
// An agent of the older dialect (see SendMessage for the ids) is sent
// tasks/sendSubscribe when its card says it streams; one that does not, or
// answers that it cannot (-32601, or a JSON answer instead of a stream),
// is sent tasks/send and its task polled with tasks/get: the stream starts
// with the task as the agent answered it, then gives an artifact update
// for each new or changed artifact and a status update for each change of
// status, and ends when the task settles.
func (c *Client) SendStreamingMessage(ctx context.Context, req *schemas.SendMessageRequest) (*Stream, error) {
	return inDialect(c, func(w wire) (*Stream, error) { return w.sendStreamingMessage(ctx, req) })
}

// SubscribeToTask streams the events of an existing task. lastEventID,
// when not empty, resumes after the event of that SSE id (an a2abus edge
// honours it; other agents may ignore it and send a fresh snapshot). An
// agent of the older dialect is sent tasks/resubscribe when its card says
// it streams, and is otherwise polled as SendStreamingMessage says,
// starting from the task as tasks/get answers it.
func (c *Client) SubscribeToTask(ctx context.Context, req *schemas.SubscribeToTaskRequest, lastEventID string) (*Stream, error) {
	return c.wire().subscribeToTask(ctx, req, lastEventID)
}
