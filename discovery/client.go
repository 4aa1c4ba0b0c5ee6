package discovery

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// Version is a2abus's version, sent in the User-Agent of every request.
const Version = "0.1.0"

// UserAgent names a2abus and its version in every outbound request.
const UserAgent = "a2abus/" + Version + " (+https://github.com/a2abus/a2abus)"

// Endpoint is where and how to reach an agent: one interface of its card.
type Endpoint struct {
	URL     string
	Binding string // schemas.BindingJSONRPC or schemas.BindingHTTPJSON
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

// Options configure a Client. The zero value is usable: a guarded HTTP
// client that only reaches public addresses, and the default limits.
type Options struct {
	// HTTP is the HTTP client to use. Default: Policy.Client(0), the
	// SSRF-guarded client; a caller that sets HTTP owns the guard.
	HTTP *http.Client
	// Policy guards outbound addresses when HTTP is nil.
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
	ep     Endpoint
	http   *http.Client
	header http.Header
	opts   Options
	ids    atomic.Int64

	// spoken is the dialect an answer confirmed (0 until one did).
	spoken atomic.Int32
	legacy legacyMemo
}

// NewClient returns a client of the endpoint.
func NewClient(ep Endpoint, opts Options) (*Client, error) {
	u, err := url.Parse(ep.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("discovery: agent URL %q is not an absolute http(s) URL", ep.URL)
	}
	switch ep.Binding {
	case schemas.BindingJSONRPC, schemas.BindingHTTPJSON:
	default:
		return nil, fmt.Errorf("discovery: binding %q is not supported (JSONRPC or HTTP+JSON)", ep.Binding)
	}
	switch {
	case isV1(ep.Version):
	case isV03(ep.Version), isLegacy(ep.Version):
		if ep.Binding != schemas.BindingJSONRPC {
			return nil, fmt.Errorf("discovery: A2A %s is supported over JSONRPC only, not %s", ep.Version, ep.Binding)
		}
	default:
		return nil, fmt.Errorf("discovery: protocol version %q is not supported (1.0, 0.3, or 0.1: the tasks/send dialect)", ep.Version)
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
	return &Client{ep: ep, http: hc, header: opts.Header, opts: opts}, nil
}

// Endpoint returns the endpoint the client calls.
func (c *Client) Endpoint() Endpoint { return c.ep }

func isV1(v string) bool { return v == "" || v == "1" || strings.HasPrefix(v, "1.") }
func isV03(v string) bool {
	return v == "0.3" || strings.HasPrefix(v, "0.3.") || v == "0.2" || strings.HasPrefix(v, "0.2.")
}
func isLegacy(v string) bool {
	return v == schemas.ProtocolVersionLegacy || strings.HasPrefix(v, schemas.ProtocolVersionLegacy+".")
}

// dialect is a method set spoken over JSON-RPC (or, for 1.0, HTTP+JSON).
type dialect int32

const (
	dialectV1     dialect = iota + 1
	dialectV03            // message/send, tasks/get, ...
	dialectLegacy         // tasks/send, tasks/get, ...
)

// dialect is what the client speaks: what an answer confirmed, else what
// the endpoint's version says.
func (c *Client) dialect() dialect {
	if d := dialect(c.spoken.Load()); d != 0 {
		return d
	}
	switch {
	case isLegacy(c.ep.Version):
		return dialectLegacy
	case isV03(c.ep.Version):
		return dialectV03
	}
	return dialectV1
}

func (c *Client) v03() bool  { return c.dialect() == dialectV03 }
func (c *Client) rest() bool { return c.ep.Binding == schemas.BindingHTTPJSON }

// inDialect runs a send in the dialect the client speaks and, while no
// answer has confirmed that dialect, once more in the other JSON-RPC one
// when the agent says the method does not exist (-32601). A card tells
// 0.3 from the older tasks/send dialect only by what it leaves out (see
// ParseCard), which A2A 0.2 cards leave out too, and an agent may publish
// a 0.3 card while speaking only tasks/send. The dialect that answers is
// kept, so later calls go straight to it. When neither knows the method,
// the first answer is returned.
func inDialect[T any](c *Client, call func(dialect) (T, error)) (T, error) {
	d := c.dialect()
	out, err := call(d)
	if c.spoken.Load() != 0 || (d != dialectV03 && d != dialectLegacy) || !errors.Is(err, schemas.ErrMethodNotFound) {
		c.confirm(d, err)
		return out, err
	}
	other := dialectLegacy
	if d == dialectLegacy {
		other = dialectV03
	}
	out2, err2 := call(other)
	if errors.Is(err2, schemas.ErrMethodNotFound) {
		return out, err
	}
	c.confirm(other, err2)
	return out2, err2
}

// confirm keeps d as the dialect spoken when the agent's answer shows it
// knew the method: a result, or an error of its own other than
// method-not-found (not a failure to reach it, nor an answer a2abus could
// not read).
func (c *Client) confirm(d dialect, err error) {
	var pe *schemas.Error
	var ae *AuthError
	if err == nil || (errors.As(err, &pe) && !errors.As(err, &ae) && !errors.Is(err, schemas.ErrMethodNotFound) && !errors.Is(err, schemas.ErrInvalidAgentResponse)) {
		c.spoken.CompareAndSwap(0, int32(d))
	}
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
	if c.rest() {
		var res schemas.SendMessageResponse
		if err := c.restCall(ctx, http.MethodPost, req.Tenant, "/message:send", nil, req, &res); err != nil {
			return nil, err
		}
		return c.checkSend(&res)
	}
	return inDialect(c, func(d dialect) (*schemas.SendMessageResponse, error) {
		switch d {
		case dialectLegacy:
			return c.legacySend(ctx, req)
		case dialectV03:
			var raw json.RawMessage
			if err := c.rpc(ctx, "message/send", schemas.SendParamsToV03(req), &raw); err != nil {
				return nil, err
			}
			r, err := schemas.ResultFromV03(raw)
			if err != nil {
				return nil, err
			}
			if r.Task == nil && r.Message == nil {
				return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "message/send answered an event, not a task or message")
			}
			return &schemas.SendMessageResponse{Task: r.Task, Message: r.Message}, nil
		}
		var res schemas.SendMessageResponse
		req := withTenant(c.ep.Tenant, req, func(r *schemas.SendMessageRequest) *string { return &r.Tenant })
		if err := c.rpc(ctx, "SendMessage", req, &res); err != nil {
			return nil, err
		}
		return c.checkSend(&res)
	})
}

// checkSend refuses a send answer holding neither a task nor a message.
func (c *Client) checkSend(res *schemas.SendMessageResponse) (*schemas.SendMessageResponse, error) {
	if res.Task == nil && res.Message == nil {
		return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "SendMessage from %s answered neither a task nor a message", redactRaw(c.ep.URL))
	}
	return res, nil
}

// GetTask returns a task.
func (c *Client) GetTask(ctx context.Context, req *schemas.GetTaskRequest) (*schemas.Task, error) {
	var t schemas.Task
	switch {
	case c.rest():
		q := url.Values{}
		if req.HistoryLength != nil {
			q.Set("historyLength", strconv.Itoa(int(*req.HistoryLength)))
		}
		if err := c.restCall(ctx, http.MethodGet, req.Tenant, "/tasks/"+url.PathEscape(req.ID), q, nil, &t); err != nil {
			return nil, err
		}
	case c.dialect() == dialectLegacy:
		return c.legacyGet(ctx, req.ID, req.HistoryLength)
	case c.v03():
		return c.taskV03(ctx, "tasks/get", schemas.V03TaskQueryParams{ID: req.ID, HistoryLength: req.HistoryLength})
	default:
		req = withTenant(c.ep.Tenant, req, func(r *schemas.GetTaskRequest) *string { return &r.Tenant })
		if err := c.rpc(ctx, "GetTask", req, &t); err != nil {
			return nil, err
		}
	}
	return c.checkTask("GetTask", &t)
}

// CancelTask asks the agent to cancel a task and returns it.
func (c *Client) CancelTask(ctx context.Context, req *schemas.CancelTaskRequest) (*schemas.Task, error) {
	var t schemas.Task
	switch {
	case c.rest():
		if err := c.restCall(ctx, http.MethodPost, req.Tenant, "/tasks/"+url.PathEscape(req.ID)+":cancel", nil, req, &t); err != nil {
			return nil, err
		}
	case c.dialect() == dialectLegacy:
		return c.legacyCancel(ctx, req.ID, req.Metadata)
	case c.v03():
		return c.taskV03(ctx, "tasks/cancel", schemas.V03TaskIDParams{ID: req.ID, Metadata: req.Metadata})
	default:
		req = withTenant(c.ep.Tenant, req, func(r *schemas.CancelTaskRequest) *string { return &r.Tenant })
		if err := c.rpc(ctx, "CancelTask", req, &t); err != nil {
			return nil, err
		}
	}
	return c.checkTask("CancelTask", &t)
}

// withTenant fills a tenant (the endpoint's) into a 1.0 JSON-RPC request
// that names none, on a copy: the caller's request is not changed. field
// picks the request's tenant field.
func withTenant[T any](tenant string, req *T, field func(*T) *string) *T {
	if tenant == "" || *field(req) != "" {
		return req
	}
	r := *req
	*field(&r) = tenant
	return &r
}

// checkTask refuses a task answer without an id (a null or empty result).
func (c *Client) checkTask(method string, t *schemas.Task) (*schemas.Task, error) {
	if t.ID == "" {
		return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "%s from %s answered a task without an id", method, redactRaw(c.ep.URL))
	}
	return t, nil
}

// ListTasks lists tasks. A 0.3 agent, or one of the older dialect, has no
// such method: the answer is ErrUnsupportedOperation.
func (c *Client) ListTasks(ctx context.Context, req *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error) {
	var res schemas.ListTasksResponse
	switch {
	case c.rest():
		q := url.Values{}
		set := func(k, v string) {
			if v != "" {
				q.Set(k, v)
			}
		}
		set("contextId", req.ContextID)
		set("status", string(req.Status))
		set("pageToken", req.PageToken)
		if req.PageSize != nil {
			set("pageSize", strconv.Itoa(int(*req.PageSize)))
		}
		if req.HistoryLength != nil {
			set("historyLength", strconv.Itoa(int(*req.HistoryLength)))
		}
		if req.StatusTimestampAfter != nil {
			set("statusTimestampAfter", req.StatusTimestampAfter.UTC().Format(time.RFC3339Nano))
		}
		if req.IncludeArtifacts {
			set("includeArtifacts", "true")
		}
		if err := c.restCall(ctx, http.MethodGet, req.Tenant, "/tasks", q, nil, &res); err != nil {
			return nil, err
		}
		return &res, nil
	case c.v03():
		return nil, schemas.Errorf(schemas.ErrUnsupportedOperation, "A2A 0.3 agents cannot list tasks")
	case c.dialect() == dialectLegacy:
		return nil, schemas.Errorf(schemas.ErrUnsupportedOperation, "agents of the tasks/send dialect cannot list tasks")
	}
	req = withTenant(c.ep.Tenant, req, func(r *schemas.ListTasksRequest) *string { return &r.Tenant })
	if err := c.rpc(ctx, "ListTasks", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
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
	if c.rest() {
		return c.restStream(ctx, http.MethodPost, req.Tenant, "/message:stream", req, "", false)
	}
	return inDialect(c, func(d dialect) (*Stream, error) {
		switch d {
		case dialectLegacy:
			return c.legacyStream(ctx, c.legacySendSubscribe(req))
		case dialectV03:
			return c.rpcStream(ctx, "message/stream", schemas.SendParamsToV03(req), "", false, true)
		}
		req := withTenant(c.ep.Tenant, req, func(r *schemas.SendMessageRequest) *string { return &r.Tenant })
		return c.rpcStream(ctx, "SendStreamingMessage", req, "", false, false)
	})
}

// SubscribeToTask streams the events of an existing task. lastEventID,
// when not empty, resumes after the event of that SSE id (an a2abus edge
// honours it; other agents may ignore it and send a fresh snapshot). An
// agent of the older dialect is sent tasks/resubscribe when its card says
// it streams, and is otherwise polled as SendStreamingMessage says,
// starting from the task as tasks/get answers it.
func (c *Client) SubscribeToTask(ctx context.Context, req *schemas.SubscribeToTaskRequest, lastEventID string) (*Stream, error) {
	switch {
	case c.rest():
		return c.restStream(ctx, http.MethodGet, req.Tenant, "/tasks/"+url.PathEscape(req.ID)+":subscribe", nil, lastEventID, true)
	case c.dialect() == dialectLegacy:
		return c.legacyStream(ctx, c.legacyResubscribe(req.ID, lastEventID))
	case c.v03():
		return c.rpcStream(ctx, "tasks/resubscribe", schemas.V03TaskIDParams{ID: req.ID}, lastEventID, true, true)
	}
	req = withTenant(c.ep.Tenant, req, func(r *schemas.SubscribeToTaskRequest) *string { return &r.Tenant })
	return c.rpcStream(ctx, "SubscribeToTask", req, lastEventID, true, false)
}

func (c *Client) taskV03(ctx context.Context, method string, params any) (*schemas.Task, error) {
	var raw json.RawMessage
	if err := c.rpc(ctx, method, params, &raw); err != nil {
		return nil, err
	}
	return taskAnswer(method, raw)
}

// taskAnswer reads a task result of tasks/get or tasks/cancel, methods
// 0.3 shares with the older dialect: a 0.3 task (it has a "kind"), else a
// task of the older dialect, since the card's guess between the two may
// be wrong (see inDialect).
func taskAnswer(method string, raw json.RawMessage) (*schemas.Task, error) {
	var head struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(raw, &head) == nil && head.Kind == "" {
		t, err := schemas.LegacyAgentTaskToV1(raw)
		if err != nil {
			return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "%s: %s", method, err.Error())
		}
		return &t, nil
	}
	r, err := schemas.ResultFromV03(raw)
	if err != nil {
		return nil, err
	}
	if r.Task == nil {
		return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "%s answered something other than a task", method)
	}
	return r.Task, nil
}

// --- JSON-RPC -------------------------------------------------------------

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *wireError      `json:"error"`
}

// wireError is a JSON-RPC error object, or the body of google.rpc.Status;
// schemas decodes it into the one error table.
type wireError = schemas.WireError

func (c *Client) newRequest(ctx context.Context, method, u string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("discovery: encoding request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	for k, vs := range c.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", UserAgent)
	if c.dialect() == dialectV1 {
		req.Header.Set(schemas.HeaderA2AVersion, schemas.ProtocolVersion)
	}
	return req, nil
}

func (c *Client) rpcBody(method string, params any) rpcRequest {
	return rpcRequest{JSONRPC: "2.0", ID: c.ids.Add(1), Method: method, Params: params}
}

// rpc makes one unary JSON-RPC call and decodes its result into out.
func (c *Client) rpc(ctx context.Context, method string, params any, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req, res, body, err := c.exchange(ctx, http.MethodPost, c.ep.URL, c.rpcBody(method, params))
	if err != nil {
		return err
	}
	// One pass straight into out for the common answer; a body that does
	// not decode that way is read again in two steps, to say exactly what
	// is wrong with it.
	fast := rpcResponseInto{Result: out}
	if err := json.Unmarshal(body, &fast); err == nil && fast.Error == nil && bytes.Contains(body, []byte(`"result"`)) {
		return nil
	}
	var r rpcResponse
	if err := json.Unmarshal(body, &r); err != nil || (r.Result == nil && r.Error == nil) {
		return c.notA2A(req, res, body)
	}
	if r.Error != nil {
		return c.protocolError(r.Error, res)
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return schemas.Errorf(schemas.ErrInvalidAgentResponse, "%s from %s: result does not decode: %v", method, redactRaw(c.ep.URL), err)
	}
	return nil
}

// exchange sends one request with a JSON body (nil: none) asking for JSON,
// and reads the whole answer within the client's size bound; ctx carries
// the call's timeout. Every unary call of every binding and dialect goes
// through it, so the guards, credentials and limits apply alike.
func (c *Client) exchange(ctx context.Context, method, u string, body any) (*http.Request, *http.Response, []byte, error) {
	req, err := c.newRequest(ctx, method, u, body)
	if err != nil {
		return nil, nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.do(req)
	if err != nil {
		return nil, nil, nil, err
	}
	defer drain(res.Body)
	b, err := c.readBody(req, res)
	if err != nil {
		return nil, nil, nil, err
	}
	return req, res, b, nil
}

// rpcResponseInto decodes a JSON-RPC response's result into the value
// Result points at (encoding/json fills a non-nil pointer held in an
// interface) in the same pass as the envelope.
type rpcResponseInto struct {
	Result any        `json:"result"`
	Error  *wireError `json:"error"`
}

// rpcStream opens a JSON-RPC stream whose events are 0.3's (v03: the
// dialect the method was sent in, which while the client is still finding
// out may not be the one it speaks yet, see inDialect) or 1.0's.
func (c *Client) rpcStream(ctx context.Context, method string, params any, lastEventID string, subscribe, v03 bool) (*Stream, error) {
	ends := streamEnd(subscribe)
	ctx, cancel := context.WithCancel(ctx)
	req, err := c.newRequest(ctx, http.MethodPost, c.ep.URL, c.rpcBody(method, params))
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	decode := func(data []byte) (*schemas.StreamResponse, bool, error) {
		var r rpcResponse
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, false, schemas.Errorf(schemas.ErrInvalidAgentResponse, "stream event is not a JSON-RPC response: %v", err)
		}
		if r.Error != nil {
			return nil, false, c.protocolError(r.Error, nil)
		}
		if v03 {
			ev, err := schemas.ResultFromV03(r.Result)
			if err != nil {
				return nil, false, err
			}
			// 0.3 marks the last status update final.
			var mark struct {
				Final bool `json:"final"`
			}
			_ = json.Unmarshal(r.Result, &mark)
			// (A subscription goes on past an interrupted state's final
			// mark while the agent keeps the stream open.)
			return &ev, ends(&ev) || (mark.Final && !subscribe), nil
		}
		var ev schemas.StreamResponse
		if err := json.Unmarshal(r.Result, &ev); err != nil {
			return nil, false, schemas.Errorf(schemas.ErrInvalidAgentResponse, "stream event does not decode: %v", err)
		}
		return &ev, ends(&ev), nil
	}
	return c.openStream(req, cancel, decode)
}

// --- HTTP+JSON ------------------------------------------------------------

// restURL is the address of an HTTP+JSON method: the endpoint, the tenant
// (the request's, else the endpoint's), the path and the query.
func (c *Client) restURL(tenant, path string, q url.Values) string {
	u := strings.TrimRight(c.ep.URL, "/")
	if tenant = cmp.Or(tenant, c.ep.Tenant); tenant != "" {
		u += "/" + url.PathEscape(tenant)
	}
	u += path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

func (c *Client) restCall(ctx context.Context, method, tenant, path string, q url.Values, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req, res, b, err := c.exchange(ctx, method, c.restURL(tenant, path, q), body)
	if err != nil {
		return err
	}
	if res.StatusCode/100 != 2 {
		return c.statusError(req, res, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return schemas.Errorf(schemas.ErrInvalidAgentResponse, "%s %s: answer does not decode: %v", method, redact(req.URL), err)
	}
	return nil
}

func (c *Client) restStream(ctx context.Context, method, tenant, path string, body any, lastEventID string, subscribe bool) (*Stream, error) {
	ends := streamEnd(subscribe)
	ctx, cancel := context.WithCancel(ctx)
	req, err := c.newRequest(ctx, method, c.restURL(tenant, path, nil), body)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	decode := func(data []byte) (*schemas.StreamResponse, bool, error) {
		var probe struct {
			Error *wireError `json:"error"`
		}
		if json.Unmarshal(data, &probe) == nil && probe.Error != nil {
			return nil, false, c.protocolError(probe.Error, nil)
		}
		var ev schemas.StreamResponse
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, false, schemas.Errorf(schemas.ErrInvalidAgentResponse, "stream event does not decode: %v", err)
		}
		return &ev, ends(&ev), nil
	}
	return c.openStream(req, cancel, decode)
}

// statusError reads a non-2xx HTTP+JSON answer: a google.rpc.Status body
// becomes its table error; anything else a transport error.
func (c *Client) statusError(req *http.Request, res *http.Response, body []byte) error {
	var st struct {
		Error *wireError `json:"error"`
	}
	if json.Unmarshal(body, &st) == nil && st.Error != nil && (st.Error.Message != "" || st.Error.Status != "") {
		if st.Error.Code == 0 {
			st.Error.Code = res.StatusCode
		}
		return c.protocolError(st.Error, res)
	}
	return c.notA2A(req, res, body)
}

// --- shared ---------------------------------------------------------------

// do sends req with the client's credentials. An answer of HTTP 401 or
// 403 is returned as an *AuthError; a 401 to a request whose credential
// the Credentials can refresh (Refresher) is first sent once more with a
// fresh one.
func (c *Client) do(req *http.Request) (*http.Response, error) {
	res, sent, err := c.send(req)
	if err != nil {
		return nil, err
	}
	if rf, ok := c.opts.Credentials.(Refresher); ok && res.StatusCode == http.StatusUnauthorized && (req.Body == nil || req.GetBody != nil) && rf.Invalidate(sent) {
		drain(res.Body)
		again := req.Clone(req.Context())
		if req.GetBody != nil {
			if again.Body, err = req.GetBody(); err != nil {
				return nil, fmt.Errorf("discovery: %w", err)
			}
		}
		if res, _, err = c.send(again); err != nil {
			return nil, err
		}
	}
	if ae := Refusal(req.URL.String(), res, c.opts.Security); ae != nil {
		drain(res.Body)
		return nil, ae
	}
	return res, nil
}

// send sends a copy of req with the client's credentials applied (req
// itself stays as it was, for a retry and for messages: an API key may go
// in the query), and returns the answer and the request as sent.
func (c *Client) send(req *http.Request) (*http.Response, *http.Request, error) {
	out := req
	if c.opts.Credentials != nil {
		out = req.Clone(req.Context())
		if err := c.opts.Credentials.Apply(req.Context(), out, c.opts.Security); err != nil {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, nil, err
		}
	}
	res, err := c.http.Do(out)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, nil, &TransportError{URL: redact(req.URL), Err: fmt.Errorf("no answer: %w", ctxErr)}
		}
		return nil, nil, &TransportError{URL: redact(req.URL), Err: unwrapURLError(err)}
	}
	return res, out, nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (c *Client) readBody(req *http.Request, res *http.Response) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(res.Body, c.opts.MaxResponseBytes+1))
	if err != nil {
		return nil, &TransportError{URL: redact(req.URL), Status: res.StatusCode, Err: fmt.Errorf("reading the answer: %w", err)}
	}
	if int64(len(b)) > c.opts.MaxResponseBytes {
		return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "answer from %s is larger than %d bytes", redact(req.URL), c.opts.MaxResponseBytes)
	}
	return b, nil
}

// notA2A describes an answer that is not an A2A response: usually a proxy
// error page, a wrong URL or an overloaded agent.
func (c *Client) notA2A(req *http.Request, res *http.Response, body []byte) error {
	snippet := strings.TrimSpace(string(body))
	if len(snippet) > 200 {
		snippet = snippet[:200] + "…"
	}
	return &TransportError{URL: redact(req.URL), Status: res.StatusCode, RetryAfter: retryAfter(res),
		Err: fmt.Errorf("answer is not an A2A response (HTTP %d %s): %q", res.StatusCode, http.StatusText(res.StatusCode), snippet)}
}

// protocolError turns a wire error into an occurrence of our table (see
// schemas.WireError.Decode), with the answer's Retry-After; an
// authentication refusal (an agent may answer -31401 or -31403 with HTTP
// 200) comes back as an *AuthError, as an HTTP 401 or 403 does.
func (c *Client) protocolError(w *wireError, res *http.Response) error {
	e := w.Decode(int(retryAfter(res) / time.Second))
	if errors.Is(e, schemas.ErrUnauthenticated) || errors.Is(e, schemas.ErrPermissionDenied) {
		return newAuthError(c.ep.URL, e.HTTPStatus, res, c.opts.Security, e)
	}
	return e
}

// retryAfter reads Retry-After: delay-seconds, or an HTTP date (rounded
// to whole seconds, at least one).
func retryAfter(res *http.Response) time.Duration {
	if res == nil {
		return 0
	}
	h := strings.TrimSpace(res.Header.Get("Retry-After"))
	if h == "" {
		return 0
	}
	if n, err := strconv.Atoi(h); err == nil {
		return time.Duration(max(n, 0)) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(time.Until(t).Round(time.Second), time.Second)
	}
	return 0
}

func drain(r io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r, 64<<10))
	_ = r.Close()
}

// TransportError is a failure to reach an agent, or an answer that is not
// A2A at all (an HTML error page, a wrong URL).
type TransportError struct {
	URL        string
	Status     int           // HTTP status, 0 when there was no answer (or it broke off)
	RetryAfter time.Duration // from Retry-After, when the agent sent one
	Err        error
}

func (e *TransportError) Error() string { return "calling " + e.URL + ": " + e.Err.Error() }
func (e *TransportError) Unwrap() error { return e.Err }

// IsRetryable reports whether err is worth retrying later: the agent was
// unreachable, overloaded (HTTP 429/502/503/504) or said UNAVAILABLE. A
// refusal by the SSRF guard, or a call the caller canceled, is not.
func IsRetryable(err error) bool {
	if errors.Is(err, ErrForbiddenAddress) || errors.Is(err, context.Canceled) {
		return false
	}
	var te *TransportError
	if errors.As(err, &te) {
		switch te.Status {
		case 0, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	return errors.Is(err, schemas.ErrUnavailable)
}
