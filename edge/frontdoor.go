package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
)

// The front door. Every A2A request — 1.0 JSON-RPC, 1.0 HTTP+JSON, 0.3
// JSON-RPC, the older tasks/send dialect on JSON-RPC and on its REST routes
// under /a2a/ — enters through serve: its binding decodes it into one call
// (agent, dialect, method, params, protocol version), the call passes one
// pipeline (the agent is served here, body limits and content type, the
// method exists in the dialect, the version is one the dialect speaks),
// runs, and its binding encodes the answer or the error. Whatever must hold
// for every request — authentication, authorization, rate limits — is
// added to serve and applies to every binding and dialect at once; task
// operations then go through the one lifecycle in bus, which checks the
// owner. An A2A route that does not go through serve is a defect; the
// routes that are not A2A calls are side doors of the route table
// (routes.go), whose declared policy, limit and bounds handle applies.

// call is one decoded request on its way to a method.
type call struct {
	agent       string
	d           *dialect
	method      string
	params      json.RawMessage
	version     string // A2A-Version as sent ("" if absent)
	trace       string // traceparent header
	lastEventID string // Last-Event-ID header: a stream resume cursor
	// gen: the answers carry A2A 1.1 generations (see call.shapeTask):
	// the call named A2A-Version 1.1, or came through an in-process
	// adapter, whose wire reads them safely.
	gen bool
	// ifGeneration is a continuation's ifGenerationMatch (checkSend).
	ifGeneration *schemas.Generation
	accept       string          // Accept header
	answerType   string          // the media type of an HTTP+JSON answer (answerType)
	id           json.RawMessage // JSON-RPC request id; nil on other bindings
	caller       caller          // who is calling, as the pipeline authenticated it
	source       netip.Addr      // where it comes from, as the trust policy sees it (TrustPolicy.source)
	trust        string          // its trust level's name (decideTrust)
	level        *trustLevel     // its trust level, decided once by the front door (decideTrust)
	audited      bool            // its level is audited (admitTrust; auditCalls)
	madeTask     string          // the task a send created (createTask), for its audit record
	pathTenant   string          // the tenant an HTTP+JSON path names (/{tenant}/…); "" if none
	body         bodyHold        // what its body's buffer holds of the edge's bodyBudget (readBody)
	oddKeys      bool            // a member name of the body may be a proto field name (see protoNames)
	bodyMax      int64           // the most of the body its route reads (Route.Body)

	// For tasks of the older dialect: the id to create the task under (""
	// when continuing one), the client's own id for it (what answers
	// carry), and the dialect to record.
	taskID, clientTaskID, dialect string

	// push is the push-notification config a send carried, checked by
	// checkSend, stored with the task it creates or continues.
	push *schemas.TaskPushNotificationConfig

	// deadline is when the task a send creates must be done by (zero:
	// none): the older dialect's, read by legacyCall, then the earlier of
	// it and the metadata's, read by checkSend.
	deadline time.Time

	// approval is what the task a send creates waits for before it runs
	// (requireApproval), nil when nothing requires one; createTask gives
	// it its times.
	approval *schemas.Approval

	// clientIDs: the call names tasks as 0.3 and the older dialect do — a
	// server-made id, or the id the caller chose for a task it created
	// through the older dialect (taskByClientID). rawAnswer: the binding
	// writes a blocking send's stored task as is (preEncoded).
	clientIDs, rawAnswer bool

	obs *observation

	// created: the call stored the task it starts (createTask), so what
	// its budgets were charged for it stands (budget.go).
	created bool
}

// caller is who sent a request: the principal the pipeline authenticated
// ("" when the edge serves anonymously), the tenant it acts in, and
// whether it is an admin (which sees every principal's tasks of that
// tenant).
type caller struct {
	principal, tenant string
	admin             bool
	// origin is where an anonymous caller sends from (see origin); ""
	// for an authenticated one.
	origin string
	// tenants are the other tenants the principal may choose with a
	// request's tenant field.
	tenants []string
}

// owner is whom the call acts for in the task lifecycle.
func (c *call) owner() bus.Owner {
	return bus.Owner{Agent: c.agent, Principal: c.caller.principal, Tenant: c.caller.tenant, Admin: c.caller.admin}
}

// scope is what a client-chosen task id is private to: the caller's
// principal and tenant (see schemas.ScopedLegacyTaskID).
func (c *call) scope() string {
	if c.caller.principal == "" && c.caller.tenant == "" {
		return ""
	}
	return c.caller.tenant + "\x00" + c.caller.principal
}

// publish is what the call passes on to the work it queues.
func (c *call) publish() bus.PublishOptions {
	return bus.PublishOptions{Traceparent: c.trace, A2AVersion: c.version}
}

// dialect is one grammar of A2A methods: their names, the A2A-Version
// values it accepts, and the shape of its stream events.
type dialect struct {
	version   string
	methods   map[string]methodFunc
	streams   map[string]streamFunc
	versionOK func(string) bool
	// versions names what versionOK takes, for its refusal ("": version).
	versions string
	names    schemas.FieldNames // how its messages spell a part's fields
	// event returns how one stream of c shapes each 1.0 StreamResponse.
	event func(c *call) func(*schemas.StreamResponse) any
}

// checkVersion is the refusal of a call of method that names A2A-Version
// v, which the dialect does not speak (nil when it does).
func (d *dialect) checkVersion(v, method string) *schemas.Error {
	if d.versionOK(v) {
		return nil
	}
	versions := d.versions
	if versions == "" {
		versions = d.version
	}
	return schemas.Errorf(schemas.ErrVersionNotSupported, "A2A-Version %q is not supported by %s; it takes %s", v, method, versions).
		With("requestedVersion", v).With("supportedVersions", versions)
}

// methodFunc runs one A2A method and returns its result.
type methodFunc func(ctx context.Context, c *call) (any, error)

// streamFunc runs one streaming method. It returns an error only while
// nothing has been streamed yet; once the stream started it reports errors
// in the stream itself.
type streamFunc func(ctx context.Context, c *call, out streamOut) error

// binding is one wire form requests arrive in and answers leave in.
type binding struct {
	name string // the metrics label
	// agentOf names the agent a request addresses and whether it is served.
	agentOf func(s *Server, r *http.Request) (string, bool)
	// noAgent is the error row for an agent not served here (HTTP 404).
	noAgent *schemas.Error
	// rpc: answers and stream events are JSON-RPC responses to the
	// request's id, and a streaming request that fails before its stream
	// opens is answered as a stream carrying the error when the client
	// accepts one (JSON-RPC stream clients read only the stream).
	rpc         bool
	writeResult func(w http.ResponseWriter, c *call, res any)
	writeError  func(w http.ResponseWriter, c *call, e *schemas.Error, status int)
}

// decodeFunc reads a request into c: its dialect, method and params.
type decodeFunc func(s *Server, w http.ResponseWriter, r *http.Request, c *call) error

// serve is the front door of every A2A route: see the top of this file.
// It applies the rules of its row rt: the origin rule first, the body
// bound to what the decoder reads (readBody), and the caller policy and
// limit that routeRules holds every front door to.
func (s *Server) serve(rt Route, b *binding, decode decodeFunc) frontDoorHandler {
	return func(w http.ResponseWriter, r *http.Request) {
		o := s.observe(b.name)
		defer o.done()
		c := &call{obs: o, version: a2aVersion(r), trace: r.Header.Get("traceparent"),
			lastEventID: r.Header.Get("Last-Event-ID"), accept: r.Header.Get("Accept"), bodyMax: rt.Body}
		// The body is read by decode and used until the answer is written.
		defer s.bodies.release(&c.body)
		if e := s.checkRoute(r, rt.Origins); e != nil {
			status := 0
			if !b.rpc {
				status = mediaTypeStatus(e)
			}
			s.refuse(w, b, c, e, status)
			return
		}
		c.pathTenant, _ = r.Context().Value(tenantKey{}).(string)
		if err := s.admitCaller(r, c); err != nil {
			s.refuseCaller(w, r, b, c, err)
			return
		}
		if m := c.level.Limits.MaxBodyBytes; m > 0 && m < c.bodyMax {
			c.bodyMax = m // the level's body bound, never above the route's
		}
		agent, ok := b.agentOf(s, r)
		c.agent = agent
		if !ok {
			s.refuse(w, b, c, schemas.Errorf(b.noAgent, "no agent %q is served here; GET /a2a/agents lists the agents", agent), http.StatusNotFound)
			return
		}
		if err := decode(s, w, r, c); err != nil {
			s.refuse(w, b, c, schemas.AsError(err), 0)
			return
		}
		if err := s.selectTenant(c); err != nil {
			s.refuseCaller(w, r, b, c, err)
			return
		}
		d := c.d
		fn, unary := d.methods[c.method]
		sfn, streaming := d.streams[c.method]
		if !unary && !streaming {
			o.method = "unknown"
			s.refuse(w, b, c, schemas.Errorf(schemas.ErrMethodNotFound, "method %q is not an A2A %s method", c.method, d.version).With("method", c.method), 0)
			return
		}
		o.method = c.method
		if e := d.checkVersion(c.version, c.method); e != nil {
			s.refuse(w, b, c, e, 0)
			return
		}
		c.gen = d == &s.v1 && asksGenerations(c.version)
		if streaming {
			s.serveStream(w, r, b, c, sfn)
			return
		}
		res, err := fn(r.Context(), c)
		if err != nil {
			s.refuse(w, b, c, s.protocolError(c, err), 0)
			return
		}
		b.writeResult(w, c, res)
	}
}

// serveStream runs a streaming method over one SSE stream, framed for the
// binding and shaped for the dialect.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, b *binding, c *call, fn streamFunc) {
	closeStream, refused := s.openStream(r.Context(), requestSource(r), c)
	if refused != nil {
		s.refuse(w, b, c, refused, 0)
		return
	}
	defer s.streamOpen(c.obs)()
	defer closeStream()
	out := &sseStream{sseWriter: newSSEWriter(w, s.cfg.StreamWriteTimeout), shape: c.d.event(c)}
	if b.rpc {
		out.rpcID = c.rpcID()
	}
	err := fn(r.Context(), c, out)
	if err == nil {
		return
	}
	pe := s.protocolError(c, err)
	c.obs.failed(pe)
	// A retryable refusal keeps its HTTP status (503 + Retry-After), so
	// proxies and clients back off.
	if out.isStarted() || (b.rpc && pe.RetryAfter == 0 && acceptsSSE(c.accept)) {
		_ = out.fail(pe)
		return
	}
	b.writeError(w, c, pe, 0)
}

// admitCaller is the check of who calls that every door carrying A2A
// calls makes before anything of the call is read (serve, and the
// in-process door): the caller authenticated from what r presents, its
// trust level decided (decideTrust), and its rate limited at that level.
// An anonymous caller is known by where it sends from.
func (s *Server) admitCaller(r *http.Request, c *call) error {
	who, err := s.authenticate(r)
	if err != nil {
		s.m.authFailed(err)
		return err
	}
	if who.principal == "" {
		who.origin = origin(r)
	}
	c.caller = who
	c.source = s.cfg.Trust.source(r)
	s.decideTrust(c)
	if e := s.limitRate(c); e != nil {
		return e
	}
	return nil
}

// authenticates reports whether the edge checks credentials: Config.Auth
// is set and configures a scheme.
func (s *Server) authenticates() bool {
	return s.cfg.Auth != nil && !s.cfg.Auth.Anonymous()
}

// authenticate tells who sent r, with the configured schemes; with none,
// every caller is the one anonymous principal ("").
func (s *Server) authenticate(r *http.Request) (caller, error) {
	if !s.authenticates() {
		return caller{}, nil
	}
	p, err := s.cfg.Auth.Authenticate(r)
	if err != nil {
		return caller{}, err
	}
	return caller{principal: p.Name, tenant: p.Tenant, admin: p.Admin, tenants: p.Tenants}, nil
}

// selectTenant moves the call to the tenant it names — A2A 1.0's tenant
// field, or the HTTP+JSON path prefix (both must agree when both are
// given) — if the principal may act there; a tenant it may not is refused
// as forbidden (see refuseCaller), so nothing of one tenant is read for
// another. Without authentication tenants are labels anyone may choose.
func (s *Server) selectTenant(c *call) error {
	want := c.pathTenant
	if bytes.Contains(c.params, []byte(`"tenant"`)) {
		var p struct {
			Tenant string `json:"tenant"`
		}
		if json.Unmarshal(c.params, &p) == nil && p.Tenant != "" {
			if want != "" && p.Tenant != want {
				return schemas.Errorf(schemas.ErrInvalidParams, "the path names tenant %q and the request tenant %q; name one, or the same", want, p.Tenant).With("field", "tenant")
			}
			want = p.Tenant
		}
	}
	return s.moveToTenant(c, want)
}

// moveToTenant moves the call to tenant want ("": stay in the caller's
// own) if its principal may act there (see selectTenant). When a trust
// rule names tenants the call's level is decided again for the tenant it
// now acts in, and a new level's rate is applied too, so no caller
// escapes a tenant's level, or its rate, by naming the tenant in its
// request. (The level's body bound is the one decided before the body was
// read.)
func (s *Server) moveToTenant(c *call, want string) error {
	if want == "" || want == c.caller.tenant {
		return nil
	}
	if !s.authenticates() || slices.Contains(c.caller.tenants, want) {
		c.caller.tenant = want
		if s.trust.byTenant {
			was := c.level
			if s.decideTrust(c); c.level != was {
				if e := s.limitRate(c); e != nil {
					return e
				}
			}
		}
		return nil
	}
	return s.cfg.Auth.Forbidden(fmt.Sprintf("principal %s may not act in tenant %q", c.caller.principal, want))
}

// refuseCaller answers a request that admitCaller or selectTenant
// refused: an authentication failure as 401 with the challenge naming the
// schemes the card declares, 403, or 503 when the issuer's keys cannot be
// fetched; in the binding's form (on JSON-RPC: the error −31401/−31403
// with HTTP 200, and the challenge header).
func (s *Server) refuseCaller(w http.ResponseWriter, r *http.Request, b *binding, c *call, err error) {
	e, f := s.callerRefusal(r, err)
	if f == nil {
		s.refuse(w, b, c, e, 0)
		return
	}
	if f.Challenge != "" {
		w.Header().Set("WWW-Authenticate", f.Challenge)
	}
	status := f.Status
	if errors.Is(e, schemas.ErrUnavailable) || b.rpc {
		// The row's 503 with Retry-After; and on JSON-RPC, HTTP 200 like
		// every JSON-RPC error, which is the only answer JSON-RPC clients
		// (the official SDKs among them) read the error code from. The
		// challenge header goes with it either way.
		status = 0
	}
	s.refuse(w, b, c, e, status)
}

// callerRefusal is the protocol error of a refused caller, and the
// authentication failure it came from (nil for another refusal: a rate,
// a tenant's field). The log says who and why, never the credential.
func (s *Server) callerRefusal(r *http.Request, err error) (*schemas.Error, *auth.Failure) {
	var f *auth.Failure
	if !errors.As(err, &f) {
		return schemas.AsError(err), nil
	}
	kind, level := schemas.ErrUnauthenticated, slog.LevelInfo
	switch f.Status {
	case http.StatusForbidden:
		kind = schemas.ErrPermissionDenied
	case http.StatusServiceUnavailable:
		// Not the caller's fault: one line at warn, with the cause
		// (Failure.Error adds why the issuer's keys could not be fetched).
		kind, level = schemas.ErrUnavailable, slog.LevelWarn
	}
	attrs := []any{"status", f.Status, "reason", f.Reason, "scheme", f.Scheme, "remote", r.RemoteAddr, "path", r.URL.Path}
	if level == slog.LevelWarn {
		attrs = append(attrs, "err", err) // the cause beyond the reason
	}
	s.log.Log(r.Context(), level, "request refused", attrs...)
	return schemas.Errorf(kind, "%s", f.Reason), f
}

// refuse answers a call with an error in its binding's form.
func (s *Server) refuse(w http.ResponseWriter, b *binding, c *call, e *schemas.Error, status int) {
	c.obs.failed(e)
	b.writeError(w, c, e, status)
}

// protocolError classifies what a method failed with — the service's
// errors and its adapter's alike — into the error the client gets; an
// internal one is logged with its cause, which the client never sees.
func (s *Server) protocolError(c *call, err error) *schemas.Error {
	if errors.Is(err, context.Canceled) {
		// The request was ended before its answer: the client left, or
		// the edge is shutting down past its grace. Nothing failed that a
		// retry would not mend.
		s.log.Debug("request ended before its answer", "method", c.method, "agent", c.agent, "err", err)
		return schemas.Errorf(schemas.ErrUnavailable, "the request was ended before its answer (the edge is shutting down); retry")
	}
	pe := schemas.AsError(err)
	if errors.Is(pe, schemas.ErrInternal) {
		s.log.Error("request failed", "method", c.method, "agent", c.agent, "err", err)
	}
	return pe
}

// rpcID is the id JSON-RPC answers carry: the request's, or null.
func (c *call) rpcID() json.RawMessage {
	if c.id == nil {
		return nullID
	}
	return c.id
}

func a2aVersion(r *http.Request) string {
	if v := r.Header.Get(schemas.HeaderA2AVersion); v != "" {
		return v
	}
	return r.URL.Query().Get(schemas.HeaderA2AVersion)
}

func acceptsSSE(accept string) bool {
	return strings.Contains(accept, "text/event-stream")
}

// pathAgent is the agent of the routes under /agents/{agent} and of the
// root routes (the default agent).
func pathAgent(s *Server, r *http.Request) (string, bool) { return s.resolveAgent(r) }

// readBody reads a request body within the edge's limits (serve checked
// its media type: see checkRoute). The body passes a bodyGuard as it arrives; when
// the guard or a limit stops the read, c.id is the JSON-RPC id the guard
// saw, so the refusal answers it.
//
// The buffer is memory held for a client that may send its bytes slowly
// or never end them (until the listener's body deadline), so it grows
// only as bytes arrive, and every byte of it is taken from the edge's
// bodyBudget (c.body, given back by serve once the request is answered):
// past the edge's or the source address's share the read stops with a
// retryable refusal. A body that states its length grows toward exactly
// that length, so the last growth leaves no slack; one of up to
// bodyFirstRead bytes, as most are, takes one allocation.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, c *call) ([]byte, error) {
	limit := c.bodyMax
	if r.ContentLength > limit {
		// Refused before the body is read, but for a short head that
		// names the JSON-RPC id the answer goes to (the connection is not
		// reused).
		w.Header().Set("Connection", "close")
		head := make([]byte, min(bodyIDHead, limit))
		n, _ := io.ReadFull(r.Body, head)
		g := s.newBodyGuard()
		_, _ = g.Write(head[:n])
		c.id = g.id(head[:n])
		return nil, schemas.Errorf(schemas.ErrInvalidRequest, "request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, limit)
	}
	c.body.src = requestSource(r)
	g := s.newBodyGuard()
	in := http.MaxBytesReader(w, r.Body, limit)
	var buf []byte
	var err error
	var over *schemas.Error // the body budget's refusal
	for {
		if len(buf) == cap(buf) {
			next := bodyGrowth(int64(cap(buf)), r.ContentLength, limit)
			if over = s.bodies.take(&c.body, next-int64(cap(buf))); over != nil {
				break
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		var n int
		n, err = in.Read(buf[len(buf):cap(buf)])
		if n > 0 {
			_, _ = g.Write(buf[len(buf) : len(buf)+n])
			buf = buf[:len(buf)+n]
			if g.err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if err == io.EOF && g.err == nil && over == nil {
		c.oddKeys = g.oddKeys
		return buf, nil
	}
	c.id = g.id(buf)
	// The rest of a refused body is not read: the connection is not
	// reused.
	w.Header().Set("Connection", "close")
	var tooBig *http.MaxBytesError
	switch {
	case g.err != nil:
		return nil, g.err
	case over != nil:
		return nil, over
	case errors.As(err, &tooBig):
		return nil, schemas.Errorf(schemas.ErrInvalidRequest, "request body exceeds the limit of %d bytes", limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The listener's body deadline (HTTPConfig.ReadBodyTimeout).
		return nil, schemas.Errorf(schemas.ErrInvalidRequest, "the request body did not arrive in time")
	}
	return nil, schemas.Errorf(schemas.ErrInvalidRequest, "reading request body: %v", err)
}

// bodyIDHead is how much of a body stated too long is read to find the
// JSON-RPC id to answer: clients put the envelope's members first.
const bodyIDHead = 4 << 10

// bodyFirstRead is the most a body's buffer takes before any of its bytes
// have arrived: enough for most requests in one allocation, little for
// one that never sends.
const bodyFirstRead = 64 << 10

// bodyGrowth is the next capacity of a body buffer that is full at have
// bytes: double (bodyFirstRead at first), and never more than the stated
// length or the limit, plus the one byte where the end of the body is
// read.
func bodyGrowth(have, stated, limit int64) int64 {
	next := max(2*have, bodyFirstRead)
	if stated >= 0 && stated >= have {
		next = min(next, stated+1)
	}
	return min(next, limit+1)
}

// readParams reads a body that is a method's params object: valid JSON
// within the guard's bounds; an empty body or null is {}.
func (s *Server) readParams(w http.ResponseWriter, r *http.Request, c *call) (json.RawMessage, error) {
	body, err := s.readBody(w, r, c)
	if err != nil {
		return nil, err
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || string(body) == "null" {
		return nil, nil // no params (some clients send a JSON null)
	}
	if !json.Valid(body) {
		return nil, schemas.Errorf(schemas.ErrParse, "request body is not valid JSON")
	}
	if body[0] != '{' {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "the request body must be a JSON object")
	}
	return s.protoParams(c, body)
}

// protoParams is a 1.0 call's params with the member names spelt as the
// proto spells its fields made json_names (see protoNames); the params of
// other dialects, and of a body whose names the guard found plain, are
// returned as they are. The copy is taken from the body budget as the
// body was.
func (s *Server) protoParams(c *call, params json.RawMessage) (json.RawMessage, error) {
	if c.d != &s.v1 || !c.oddKeys || len(bytes.TrimSpace(params)) == 0 {
		return params, nil
	}
	if e := s.bodies.take(&c.body, int64(len(params))); e != nil {
		return nil, e
	}
	return protoNames(params)
}

func jsonMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || mt == contentA2A)
}

// paramsOf encodes params built from a URL (path and query) as the JSON a
// method decodes, so every binding hands methods the same params.
func paramsOf(v map[string]any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// queryInt32 reads an optional integer query parameter into m.
func queryInt32(q url.Values, m map[string]any, name string) error {
	v := q.Get(name)
	if v == "" {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return schemas.Errorf(schemas.ErrInvalidParams, "%s must be an integer, got %q", name, v)
	}
	m[name] = n
	return nil
}

// withoutTrailingSlash serves a path with a trailing slash as the path
// without it: some clients join the card's interface URL and a method
// with one slash too many.
func withoutTrailingSlash(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
			u := *r.URL
			u.Path = strings.TrimRight(p, "/")
			if u.Path == "" {
				u.Path = "/"
			}
			u.RawPath = ""
			r2 := *r
			r2.URL = &u
			r = &r2
		}
		next.ServeHTTP(w, r)
	})
}

// LoopbackHosts serves next only to requests whose Host names a listener
// on loopback: localhost, a loopback address, or the host of publicURL
// ("" for none); others are refused (403). A browser sends the page's own
// DNS name as Host, so a page that rebinds its name to 127.0.0.1 cannot
// use the visitor's browser to reach a local listener. The edge applies it
// when it listens on loopback (Config.LoopbackOnly); cmd applies it to its
// metrics and profiler listeners there too.
func LoopbackHosts(publicURL string, next http.Handler) http.Handler {
	public := ""
	if u, err := url.Parse(publicURL); err == nil {
		public = strings.ToLower(u.Hostname())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if auth.LoopbackHost(host) || (public != "" && strings.EqualFold(strings.Trim(host, "[]"), public)) {
			next.ServeHTTP(w, r)
			return
		}
		writePlain(w, http.StatusForbidden, "host "+strconv.Quote(r.Host)+" is not served here: this listener is on loopback only; use localhost or 127.0.0.1 (or the edge's public URL)")
	})
}
