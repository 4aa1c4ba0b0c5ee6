package discovery

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/a2abus/a2abus/edge/grpcbinding/a2apb"
	"github.com/a2abus/a2abus/edge/grpcbinding/pbwire"
	"github.com/a2abus/a2abus/schemas"
)

// grpcWire speaks A2A 1.0 over gRPC: lf.a2a.v1.A2AService's methods on the
// endpoint's connection, 1.0's requests converted to its messages and its
// answers back (edge/grpcbinding/pbwire, the conversions the edge's gRPC
// binding serves with), the endpoint's tenant filled into a request that
// names none (an a2abus edge's cards name an agent there, "agents/<name>").
// What an HTTP request carries in headers goes in the call's metadata:
// Options.Header, A2A-Version, Last-Event-ID when resuming, and the
// credentials (authorization, x-api-key, …). An agent's
// google.rpc.Status is read back into the error table (pbwire.Error).
type grpcWire struct{ *conn }

// grpcConn is a gRPC endpoint's one connection, shared by every call of
// its Client and closed by Client.Close. It dials through the policy's
// guarded dialer (the HTTP wires' own, ssrf.go), over TLS with the HTTP
// client's configuration or in cleartext as the URL says (grpcAddress).
type grpcConn struct {
	cc  *grpc.ClientConn
	api a2apb.A2AServiceClient
	// at is the endpoint as an http(s) URL: what the guard checks before
	// each call, what credentials are applied to (grpcWire.callMetadata) and
	// what errors name.
	at *url.URL
	// dialed is the outcome of the last dial, nil when it connected: gRPC
	// reports a failed dial as UNAVAILABLE with its text alone, and a
	// call's error carries the dial's own (an SSRF refusal, a connection
	// refused) instead.
	dialed atomic.Pointer[error]
}

// grpcAddress reads the URL of a gRPC interface: the address to dial
// (host:port) and whether the connection is TLS. The forms:
//
//	https://host[:port], grpcs://host[:port]  TLS (port 443 by default)
//	http://host[:port]                        cleartext HTTP/2 (port 80)
//	host:port, grpc://host:port               cleartext to a loopback address
//	                                          or localhost, else TLS
//
// host:port is how an a2abus edge's cards (and the official SDKs) write
// it; Endpoints turns it into http:// or https:// after the card's HTTP
// interfaces when it has any (an edge serves gRPC over TLS when it
// serves HTTP over TLS). gRPC routes by method, not by path: a path is
// ignored (the specification's own example names one).
func grpcAddress(raw string) (hostport string, secure bool, err error) {
	bad := fmt.Errorf("discovery: gRPC URL %q is not host:port, http(s)://host[:port] or grpc(s)://host[:port]", redactRaw(raw))
	if !strings.Contains(raw, "://") {
		host, port, err := net.SplitHostPort(raw)
		if n, perr := strconv.ParseUint(port, 10, 16); err != nil || host == "" || perr != nil || n == 0 {
			return "", false, bad
		}
		return raw, !loopbackHost(host), nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" || u.Opaque != "" {
		return "", false, bad
	}
	switch strings.ToLower(u.Scheme) {
	case "https", "grpcs":
		secure = true
	case "http":
	case "grpc":
		secure = !loopbackHost(u.Hostname())
	default:
		return "", false, bad
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if secure {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port), secure, nil
}

// loopbackHost reports whether host is a loopback address or localhost.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// grpcTLS is the TLS configuration of gRPC connections: the HTTP client's
// (a clone of its transport's TLSClientConfig: the roots, client
// certificates and versions the HTTP wires use) when it has one, else the
// defaults, the system's roots, as Policy.Client's.
func grpcTLS(hc *http.Client) *tls.Config {
	var cfg *tls.Config
	if hc != nil {
		switch t := hc.Transport.(type) {
		case *guardedTransport:
			cfg = t.next.TLSClientConfig
		case *http.Transport:
			cfg = t.TLSClientConfig
		}
	}
	if cfg == nil {
		return &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return cfg.Clone()
}

// newGRPCConn makes the connection of a gRPC endpoint. Nothing is dialed
// until the first call.
func newGRPCConn(ep Endpoint, opts Options, hc *http.Client) (*grpcConn, error) {
	hostport, secure, err := grpcAddress(ep.URL)
	if err != nil {
		return nil, err
	}
	g := &grpcConn{at: &url.URL{Scheme: "http", Host: hostport}}
	creds := insecure.NewCredentials()
	if secure {
		g.at.Scheme = "https"
		creds = credentials.NewTLS(grpcTLS(hc))
	}
	d := opts.Policy.dialer()
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			g.dialed.Store(&err)
		} else {
			g.dialed.Store(nil)
		}
		return c, err
	}
	// passthrough: the address goes to the dialer as it is, which
	// resolves it and checks every address it connects to, as the HTTP
	// wires' dialer does (a custom dialer also keeps gRPC from any proxy
	// of the environment, which would reach the agent out of the guard's
	// sight).
	g.cc, err = grpc.NewClient("passthrough:///"+hostport,
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(dial),
		// While it cannot connect, gRPC fails calls at once and connects
		// again after a back-off that grows to two minutes by default: a
		// client whose agent comes back would fail that long. Five seconds
		// at most, as an HTTP client would dial again at the next call.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second}, MinConnectTimeout: 10 * time.Second}),
		grpc.WithUserAgent(UserAgent),
		grpc.WithChainUnaryInterceptor(traceUnary),
		grpc.WithChainStreamInterceptor(traceStream),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(int(min(opts.MaxResponseBytes, 1<<31-1)))))
	if err != nil {
		return nil, fmt.Errorf("discovery: gRPC endpoint %s: %w", redactRaw(ep.URL), err)
	}
	g.api = a2apb.NewA2AServiceClient(g.cc)
	return g, nil
}

// grpcSkipped are the headers gRPC's transport sets itself (canonical
// names, as an http.Header keys them): a request's own of these would be
// refused or overwritten.
var grpcSkipped = map[string]bool{"Host": true, "Content-Type": true, "Content-Length": true, "Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Keep-Alive": true, "Proxy-Connection": true, "User-Agent": true}

// callMetadata is what one call carries, as an HTTP wire's request would in
// headers: Options.Header, A2A-Version, Last-Event-ID when resuming, and
// the credentials, applied to a request standing in for the call (the
// Credentials speak HTTP: a bearer token becomes authorization, an API
// key the header the card names, x-api-key by default), whose headers
// become the metadata. It returns that request as sent, for a Refresher
// to judge a refusal by. The guard checks the endpoint first, as it checks
// every HTTP request's URL.
func (w grpcWire) callMetadata(ctx context.Context, lastEventID string) (metadata.MD, *http.Request, error) {
	if err := w.opts.Policy.CheckURL(w.grpc.at); err != nil {
		return nil, nil, err
	}
	// The HTTP wires' request: Options.Header and A2A-Version (a gRPC
	// endpoint is always 1.0).
	req, err := w.newRequest(ctx, http.MethodPost, w.grpc.at.String(), nil)
	if err != nil {
		return nil, nil, err
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	if w.opts.Credentials != nil {
		if err := w.opts.Credentials.Apply(ctx, req, w.opts.Security); err != nil {
			return nil, nil, err
		}
		if req.URL.RawQuery != "" {
			return nil, nil, fmt.Errorf("discovery: %w: the agent's card asks for its API key in the URL's query, which a gRPC call at %s cannot carry", ErrNoMatchingCredentials, w.grpc.at)
		}
	}
	md := make(metadata.MD, len(req.Header))
	for k, vs := range req.Header {
		lower := strings.ToLower(k)
		if grpcSkipped[http.CanonicalHeaderKey(k)] || strings.HasPrefix(lower, "grpc-") {
			continue
		}
		md[lower] = vs
	}
	return md, req, nil
}

// refreshes reports whether a call refused with err is worth sending once
// more: the agent refused its credential (UNAUTHENTICATED) and the
// Credentials dropped the one sent for a fresh one (Refresher), as the
// HTTP wires do on a 401.
func (w grpcWire) refreshes(err error, sent *http.Request) bool {
	rf, ok := w.opts.Credentials.(Refresher)
	return ok && sent != nil && status.Code(err) == codes.Unauthenticated && rf.Invalidate(sent)
}

// callError is what a failed call says: the agent's error of the table
// (an *AuthError for an authentication refusal, as the HTTP wires give),
// or a *TransportError when no answer of the agent's came: ctx ended, or
// gRPC could not reach it or lost it (UNAVAILABLE, DEADLINE_EXCEEDED or
// CANCELED without an A2A ErrorInfo; the dial's own error when a dial
// failed, so an SSRF refusal stays ErrForbiddenAddress).
func (w grpcWire) callError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return &TransportError{URL: w.grpc.at.String(), Err: fmt.Errorf("no answer: %w", ctxErr)}
	}
	st := status.Convert(err)
	e, reason := pbwire.Error(st)
	if !reason {
		switch st.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
			cause := errors.New(st.Message())
			if d := w.grpc.dialed.Load(); d != nil && st.Code() == codes.Unavailable {
				cause = *d
			}
			return &TransportError{URL: w.grpc.at.String(), Err: cause}
		}
	}
	if errors.Is(e, schemas.ErrUnauthenticated) || errors.Is(e, schemas.ErrPermissionDenied) {
		return newAuthError(w.grpc.at.String(), e.HTTPStatus, nil, w.opts.Security, e)
	}
	return e
}

// notAMessage is the error of a request that has no protobuf form (a
// value A2A does not define, such as an unknown role): the caller's, as
// an agent would answer it over HTTP; nothing is sent.
func notAMessage(method string, err error) error {
	return schemas.Errorf(schemas.ErrInvalidParams, "%s: the request does not fit A2A's gRPC messages: %v", method, err)
}

// grpcUnary makes one unary call: req, a 1.0 request, converted into in,
// sent by call with the call's metadata within the client's Timeout (once
// more when a refreshed credential may pass, see refreshes), and the
// answer read into res (nil: none wanted).
func grpcUnary[In proto.Message, Out proto.Message](ctx context.Context, w grpcWire, method string, req any, in In,
	call func(context.Context, In, ...grpc.CallOption) (Out, error), res any) error {
	if err := pbwire.ToPB(req, in); err != nil {
		return notAMessage(method, err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	var out Out
	for again := true; ; again = false {
		md, sent, err := w.callMetadata(ctx, "")
		if err != nil {
			return err
		}
		if out, err = call(metadata.NewOutgoingContext(ctx, md), in); err == nil {
			break
		}
		if !again || !w.refreshes(err, sent) {
			return w.callError(ctx, err)
		}
	}
	if res == nil {
		return nil
	}
	if err := pbwire.FromPB(out, res); err != nil {
		return schemas.Errorf(schemas.ErrInvalidAgentResponse, "%s from %s: the answer does not read as A2A: %v", method, w.grpc.at, err)
	}
	return nil
}

// grpcStream opens a server stream: req converted into in and sent by
// call, with the call's metadata (lastEventID, when set, asks to resume
// after that event). The agent has the client's Timeout to take the
// call; the stream then lasts as long as ctx and the task, and ends by
// the end rule of a send's stream or a subscription's (streamEnd). An
// error before the first event, which gRPC gives at the first read, comes
// from the stream's first Next.
func grpcStream[In proto.Message](ctx context.Context, w grpcWire, method string, req any, in In, lastEventID string, subscribe bool,
	call func(context.Context, In, ...grpc.CallOption) (grpc.ServerStreamingClient[a2apb.StreamResponse], error)) (*Stream, error) {
	if err := pbwire.ToPB(req, in); err != nil {
		return nil, notAMessage(method, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	open := func() (grpc.ServerStreamingClient[a2apb.StreamResponse], *http.Request, error) {
		md, sent, err := w.callMetadata(ctx, lastEventID)
		if err != nil {
			return nil, nil, err
		}
		timer := time.AfterFunc(w.opts.Timeout, cancel)
		s, err := call(metadata.NewOutgoingContext(ctx, md), in)
		if !timer.Stop() {
			return nil, nil, &TransportError{URL: w.grpc.at.String(), Err: fmt.Errorf("no answer within %s", w.opts.Timeout)}
		}
		if err != nil {
			return nil, nil, w.callError(ctx, err)
		}
		return s, sent, nil
	}
	s, sent, err := open()
	if err != nil {
		cancel()
		return nil, err
	}
	src := &grpcEvents{w: w, ctx: ctx, stream: s, sent: sent, reopen: open, ends: streamEnd(subscribe)}
	return &Stream{url: w.grpc.at.String(), events: src, cancel: cancel}, nil
}

// grpcEvents are the events of a gRPC server stream, for Stream.Next.
type grpcEvents struct {
	w      grpcWire
	ctx    context.Context // the stream's: Close cancels it
	stream grpc.ServerStreamingClient[a2apb.StreamResponse]
	sent   *http.Request // as the stream's credentials were sent
	// reopen opens the stream again, once, when the agent refused its
	// credential before the first event and a fresh one may pass
	// (grpcWire.refreshes); nil after that or after the first event.
	reopen func() (grpc.ServerStreamingClient[a2apb.StreamResponse], *http.Request, error)
	ends   func(*schemas.StreamResponse) bool
}

func (g *grpcEvents) next() (*schemas.StreamResponse, string, bool, error) {
	m, err := g.stream.Recv()
	if err != nil && g.reopen != nil && g.w.refreshes(err, g.sent) {
		reopen := g.reopen
		g.reopen = nil
		if g.stream, g.sent, err = reopen(); err != nil {
			return nil, "", false, err
		}
		m, err = g.stream.Recv()
	}
	g.reopen = nil
	if errors.Is(err, io.EOF) {
		return nil, "", false, io.EOF
	}
	if err != nil {
		return nil, "", false, g.w.callError(g.ctx, err)
	}
	var ev schemas.StreamResponse
	if err := pbwire.FromPB(m, &ev); err != nil {
		return nil, "", false, schemas.Errorf(schemas.ErrInvalidAgentResponse, "stream event does not read as A2A: %v", err)
	}
	return &ev, generationID(&ev), g.ends(&ev), nil
}

// generationID is the generation an event carries as a resume id, "" for
// none (0: the server keeps none).
func generationID(ev *schemas.StreamResponse) string {
	var g schemas.Generation
	switch {
	case ev.Task != nil:
		g = ev.Task.Generation
	case ev.StatusUpdate != nil:
		g = ev.StatusUpdate.Generation
	case ev.ArtifactUpdate != nil:
		g = ev.ArtifactUpdate.Generation
	}
	if g <= 0 {
		return ""
	}
	return strconv.FormatInt(int64(g), 10)
}

func (w grpcWire) sendMessage(ctx context.Context, req *schemas.SendMessageRequest) (*schemas.SendMessageResponse, error) {
	var res schemas.SendMessageResponse
	req = withTenant(w.ep.Tenant, req, (*schemas.SendMessageRequest).TenantField)
	if err := grpcUnary(ctx, w, "SendMessage", req, &a2apb.SendMessageRequest{}, w.grpc.api.SendMessage, &res); err != nil {
		return nil, err
	}
	return w.checkSend(&res)
}

func (w grpcWire) sendStreamingMessage(ctx context.Context, req *schemas.SendMessageRequest) (*Stream, error) {
	req = withTenant(w.ep.Tenant, req, (*schemas.SendMessageRequest).TenantField)
	return grpcStream(ctx, w, "SendStreamingMessage", req, &a2apb.SendMessageRequest{}, "", false, w.grpc.api.SendStreamingMessage)
}

func (w grpcWire) getTask(ctx context.Context, req *schemas.GetTaskRequest) (*schemas.Task, error) {
	var t schemas.Task
	req = withTenant(w.ep.Tenant, req, (*schemas.GetTaskRequest).TenantField)
	if err := grpcUnary(ctx, w, "GetTask", req, &a2apb.GetTaskRequest{}, w.grpc.api.GetTask, &t); err != nil {
		return nil, err
	}
	return w.checkTask("GetTask", &t)
}

func (w grpcWire) cancelTask(ctx context.Context, req *schemas.CancelTaskRequest) (*schemas.Task, error) {
	var t schemas.Task
	req = withTenant(w.ep.Tenant, req, (*schemas.CancelTaskRequest).TenantField)
	if err := grpcUnary(ctx, w, "CancelTask", req, &a2apb.CancelTaskRequest{}, w.grpc.api.CancelTask, &t); err != nil {
		return nil, err
	}
	return w.checkTask("CancelTask", &t)
}

func (w grpcWire) listTasks(ctx context.Context, req *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error) {
	var res schemas.ListTasksResponse
	req = withTenant(w.ep.Tenant, req, (*schemas.ListTasksRequest).TenantField)
	if err := grpcUnary(ctx, w, "ListTasks", req, &a2apb.ListTasksRequest{}, w.grpc.api.ListTasks, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (w grpcWire) subscribeToTask(ctx context.Context, req *schemas.SubscribeToTaskRequest, lastEventID string) (*Stream, error) {
	req = withTenant(w.ep.Tenant, req, (*schemas.SubscribeToTaskRequest).TenantField)
	return grpcStream(ctx, w, "SubscribeToTask", req, &a2apb.SubscribeToTaskRequest{}, lastEventID, true, w.grpc.api.SubscribeToTask)
}

func (w grpcWire) createPushConfig(ctx context.Context, cfg *schemas.TaskPushNotificationConfig) (*PushConfig, error) {
	var out PushConfig
	cfg = withTenant(w.ep.Tenant, cfg, (*schemas.TaskPushNotificationConfig).TenantField)
	if err := grpcUnary(ctx, w, "CreateTaskPushNotificationConfig", cfg, &a2apb.TaskPushNotificationConfig{}, w.grpc.api.CreateTaskPushNotificationConfig, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w grpcWire) getPushConfig(ctx context.Context, req *schemas.GetTaskPushNotificationConfigRequest) (*PushConfig, error) {
	var out PushConfig
	req = withTenant(w.ep.Tenant, req, (*schemas.GetTaskPushNotificationConfigRequest).TenantField)
	if err := grpcUnary(ctx, w, "GetTaskPushNotificationConfig", req, &a2apb.GetTaskPushNotificationConfigRequest{}, w.grpc.api.GetTaskPushNotificationConfig, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w grpcWire) listPushConfigs(ctx context.Context, req *schemas.ListTaskPushNotificationConfigsRequest) ([]PushConfig, error) {
	var list pushConfigList
	req = withTenant(w.ep.Tenant, req, (*schemas.ListTaskPushNotificationConfigsRequest).TenantField)
	if err := grpcUnary(ctx, w, "ListTaskPushNotificationConfigs", req, &a2apb.ListTaskPushNotificationConfigsRequest{}, w.grpc.api.ListTaskPushNotificationConfigs, &list); err != nil {
		return nil, err
	}
	return list.Configs, nil
}

func (w grpcWire) deletePushConfig(ctx context.Context, req *schemas.GetTaskPushNotificationConfigRequest) error {
	req = withTenant(w.ep.Tenant, req, (*schemas.GetTaskPushNotificationConfigRequest).TenantField)
	return grpcUnary(ctx, w, "DeleteTaskPushNotificationConfig", req, &a2apb.DeleteTaskPushNotificationConfigRequest{}, w.grpc.api.DeleteTaskPushNotificationConfig, nil)
}
