package edge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
)

// The route table. routeTable declares every path the edge serves, and
// for each the rules it is served under: who may use it (Policy), how its
// requests are rate-limited (Limit), how large a body it reads (Body) and
// which browser pages of other origins it refuses (Origins). handle is the
// only code that writes to the mux and it applies a row's rules itself, so
// a handler never authenticates, limits or bounds on its own; a row that
// does not declare every rule, or declares one its door cannot apply,
// stops the edge from being built (routeRules). Starting, which answers
// while the edge is not ready, serves the same table.
//
// A2A calls enter by the front door (serve): it authenticates the caller,
// limits its rate, bounds its body, then decodes the call and runs it
// through the one lifecycle, answering in the call's binding. Every other
// route (cards, the agent list, registry admin, the remote agents'
// webhook, MCP, JWKS, health, metrics) is a side door, which handle wraps
// in sideDoor, answering in plain text.
//
// Two origin rules, by Origins:
//
//   - OriginsStateChanging: a request that may change state (any method
//     but GET, HEAD and OPTIONS) from a browser page of another origin is
//     refused. Browsers mark such requests (Sec-Fetch-Site, Origin), and a
//     page can send them to a loopback edge without reading the answer: a
//     form POST, a no-cors fetch. Clients that are not browsers send
//     neither header and pass. Such a request whose body is not JSON is
//     refused too: a form or a no-cors fetch cannot send a JSON media
//     type, and a body without a media type is not taken as JSON.
//   - OriginsSame: as OriginsStateChanging, and every other request from
//     a browser page of another origin is refused as well: MCP's
//     Streamable HTTP requires its servers to check the origin of every
//     connection, its event stream (a GET) included.

// Route is one entry of the edge's route table, as the edge serves it.
type Route struct {
	// Pattern is the net/http.ServeMux pattern ("POST /agents/{agent}").
	Pattern string
	// FrontDoor is true for A2A calls, which pass serve's whole pipeline
	// (authentication, rate, bounds, tenant, lifecycle).
	FrontDoor bool
	// Policy is who may use the route.
	Policy Policy
	// Limit is how its requests are rate-limited.
	Limit Limit
	// Body is the most bytes of a request body the route reads; 0: it
	// reads none.
	Body int64
	// Origins is which requests from browser pages of other origins it
	// refuses.
	Origins Origins
}

// Policy is who may use a route.
type Policy uint8

// The policies. The zero Policy is none, which no route may declare.
const (
	_ Policy = iota
	// PolicyPublic: anyone, without credentials (cards, the agent list,
	// health, JWKS; metrics when configured public).
	PolicyPublic
	// PolicyCaller: a caller the front door authenticates as it does
	// every A2A call (anyone, on an edge that authenticates no one); a
	// side door of this policy (GET /a2a/budget) admits it with the same
	// admitCaller, and always with LimitCaller.
	PolicyCaller
	// PolicyAdmin: admin principals. On an edge that authenticates no
	// one: every caller when Config.OpenAdmin, else no one.
	PolicyAdmin
	// PolicyAdminWrite: as PolicyAdmin, and an edge that authenticates
	// no one lets its callers use it only while it listens on loopback
	// (Config.LoopbackOnly), so anonymous callers beyond it cannot point
	// agents anywhere.
	PolicyAdminWrite
	// PolicyApprover: admin principals and the approvers the approval
	// policy names (ApprovalPolicy.Approvers), for their own tenant; on
	// an edge that authenticates no one, as PolicyAdminWrite (a decision
	// lets work run).
	PolicyApprover
	// PolicyWebhookToken: a sender holding the token one task's webhook
	// was registered with (the remote agents' push notifications). A
	// request without a token is refused before its handler, which
	// compares the token with the task's.
	PolicyWebhookToken
)

func (p Policy) String() string {
	return enumName(int(p), "none", "public", "caller", "admin", "admin-write", "approver", "webhook-token")
}

// Limit is how a route's requests are rate-limited.
type Limit uint8

// The limits. The zero Limit is none declared, which no route may have.
const (
	_ Limit = iota
	// LimitNone: not rate-limited. Probes and metrics scrapes come from
	// a few known addresses at their own pace, and must be answered when
	// callers are being refused.
	LimitNone
	// LimitCaller: the caller's rate (Config.Limits), by principal, or by
	// source address for an anonymous caller; the front door applies it
	// after authentication.
	LimitCaller
	// LimitAddress: Config.Limits.Default, by source address, before
	// anything else is done: for side doors, which have no principal (or
	// have not checked it yet). Routes of one family share a bucket.
	LimitAddress
)

func (l Limit) String() string {
	return enumName(int(l), "none declared", "none", "caller", "address")
}

// Origins is which requests from browser pages of other origins a route
// refuses (see the top of this file).
type Origins uint8

// The origin rules. The zero Origins is none declared.
const (
	_ Origins = iota
	OriginsStateChanging
	OriginsSame
)

func (o Origins) String() string {
	return enumName(int(o), "none declared", "state-changing", "same-origin")
}

// routeDecl is one row of routeTable: the Route and what serves it.
type routeDecl struct {
	Route
	// body is the declared bound: bodyEdge for Config.MaxBodyBytes, else
	// bytes (0: none is read).
	body int64
	// bucket names the address bucket of a LimitAddress route.
	bucket string
	// form is how Starting refuses the route while the edge is not ready.
	form answerForm
	// handler builds a side door's handler for s; front builds a front
	// door's, which applies the row's rules itself (serve).
	handler func(s *Server) http.Handler
	front   func(s *Server, rt Route) frontDoorHandler
	// early, if set, is what Starting serves instead of a refusal.
	early func(st *Starting) http.Handler
	// when, if set, says whether an edge of cfg serves the route.
	when func(cfg *Config) bool
	// publicWhen, if set, makes the route PolicyPublic for an edge of cfg.
	publicWhen func(cfg *Config) bool
}

// bodyEdge declares a route's body bounded by Config.MaxBodyBytes.
const bodyEdge = -1

// answerForm is the error form of a route's refusals before the edge is
// ready: what its clients read.
type answerForm uint8

const (
	formStatus  answerForm = iota // google.rpc.Status (HTTP+JSON, side doors)
	formJSONRPC                   // a JSON-RPC error echoing the request's id
	formLegacy                    // the older REST routes' error shape
)

// routeTable declares every route of the edge, in the order they are
// added to its mux.
func routeTable() []routeDecl {
	rpc := front("POST /{$}", jsonRPC, formJSONRPC, decodeJSONRPC)
	rows := []routeDecl{
		rpc,
		front("POST /agents/{agent}", jsonRPC, formJSONRPC, decodeJSONRPC),
		side("GET /.well-known/agent-card.json", PolicyPublic, "card", 0, (*Server).handleCard),
		side("GET /.well-known/agent.json", PolicyPublic, "card", 0, (*Server).handleLegacyCard), // the path older clients fetch
		side("GET /agents/{agent}/.well-known/agent-card.json", PolicyPublic, "card", 0, (*Server).handleCard),
		// Aleph's capability discovery: the card's skills as a list, public
		// and limited as the card they are derived from (gateway.go).
		side("GET /capabilities", PolicyPublic, "card", 0, (*Server).handleCapabilities),
		side("GET /agents/{agent}/capabilities", PolicyPublic, "card", 0, (*Server).handleCapabilities),
		side("GET /a2a/agents", PolicyPublic, "agents", 0, (*Server).handleAgentList),
		side("GET /a2a/admin/agents", PolicyAdmin, "admin", 0, (*Server).handleRegistryList),
		side("GET /a2a/admin/agents/{agent}", PolicyAdmin, "admin", 0, (*Server).handleRegistryGet),
		side("PUT /a2a/admin/agents/{agent}", PolicyAdminWrite, "admin", registryEntryMax, (*Server).handleRegistryPut),
		side("DELETE /a2a/admin/agents/{agent}", PolicyAdminWrite, "admin", 0, (*Server).handleRegistryDelete),
		side("POST /a2a/remote/{agent}/tasks/{task}/push", PolicyWebhookToken, "webhook", bodyEdge, (*Server).handleRemotePush),
		side("GET /a2a/admin/dead-letters", PolicyAdmin, "admin", 0, (*Server).handleDeadLetters),
		side("GET /a2a/admin/approvals", PolicyApprover, "admin", 0, (*Server).handleApprovals),
		side("POST /a2a/admin/approvals/{task}", PolicyApprover, "admin", approvalDecisionMax, (*Server).handleApprovalDecision),
		side("GET /a2a/admin/audit", PolicyAdmin, "admin", 0, (*Server).handleAudit),
		// The caller's budgets (budget.go): admitted as an A2A call is.
		callerSide("GET /a2a/budget", (*Server).handleBudget),
		// The dashboard's page holds no data: every datum it shows comes
		// from the API with its user's credentials (dashboard.go).
		{
			Route:   Route{Pattern: "GET /ui", Policy: PolicyPublic, Limit: LimitAddress, Origins: OriginsStateChanging},
			bucket:  "ui",
			handler: func(*Server) http.Handler { return uiFiles() },
		},
		{
			Route:   Route{Pattern: "GET /ui/{file...}", Policy: PolicyPublic, Limit: LimitAddress, Origins: OriginsStateChanging},
			bucket:  "ui",
			handler: func(*Server) http.Handler { return uiFiles() },
		},
		{
			// The session and the tool list need no credentials; each
			// tool call the bridge makes is admitted by the in-process
			// door as the front door admits an A2A call, with what the
			// MCP request presented (inprocess.go).
			Route: Route{Pattern: "/mcp", Policy: PolicyPublic, Limit: LimitAddress, Origins: OriginsSame},
			body:  bodyEdge, bucket: "mcp",
			handler: func(s *Server) http.Handler { return s.mcp },
			when:    func(cfg *Config) bool { return cfg.MCP != nil },
		},
		{
			Route:   Route{Pattern: "GET /.well-known/jwks.json", Policy: PolicyPublic, Limit: LimitAddress, Origins: OriginsStateChanging},
			bucket:  "jwks",
			handler: func(s *Server) http.Handler { return http.HandlerFunc(s.handleJWKS) },
			when:    func(cfg *Config) bool { return cfg.NotificationKeys != nil || cfg.CardKeys != nil },
		},
	}
	rows = append(rows, legacyRows()...)
	rows = append(rows, restRows("")...)
	rows = append(rows, restRows("/agents/{agent}")...)
	return append(rows,
		routeDecl{
			Route:   Route{Pattern: "GET /healthz", Policy: PolicyPublic, Limit: LimitNone, Origins: OriginsStateChanging},
			handler: func(*Server) http.Handler { return http.HandlerFunc(healthz) },
			early:   func(*Starting) http.Handler { return http.HandlerFunc(healthz) },
		},
		routeDecl{
			Route:   Route{Pattern: "GET /readyz", Policy: PolicyPublic, Limit: LimitNone, Origins: OriginsStateChanging},
			handler: func(s *Server) http.Handler { return http.HandlerFunc(s.handleReady) },
			early:   func(st *Starting) http.Handler { return http.HandlerFunc(st.notReady) },
		},
		routeDecl{
			// Metrics are shared by every edge on the bus, so they are
			// an admin's unless the operator made them public.
			Route:      Route{Pattern: "GET /metrics", Policy: PolicyAdmin, Limit: LimitNone, Origins: OriginsStateChanging},
			handler:    func(s *Server) http.Handler { return MetricsHandler(s.metrics) },
			early:      func(st *Starting) http.Handler { return st.metricsHandler() },
			publicWhen: func(cfg *Config) bool { return cfg.PublicMetrics },
		},
	)
}

// front declares an A2A route: the front door of binding b, its requests
// decoded by decode.
func front(pattern string, b *binding, form answerForm, decode decodeFunc) routeDecl {
	return routeDecl{
		Route: Route{Pattern: pattern, FrontDoor: true, Policy: PolicyCaller, Limit: LimitCaller, Origins: OriginsStateChanging},
		body:  bodyEdge, form: form,
		front: func(s *Server, rt Route) frontDoorHandler { return s.serve(rt, b, decode) },
	}
}

// readsNoBody is d for a route whose decoder reads no body (its request
// is all in the path and query).
func readsNoBody(d routeDecl) routeDecl {
	d.body = 0
	return d
}

// side declares a side door limited by address in bucket.
func side(pattern string, p Policy, bucket string, body int64, h func(*Server, http.ResponseWriter, *http.Request)) routeDecl {
	return routeDecl{
		Route: Route{Pattern: pattern, Policy: p, Limit: LimitAddress, Origins: OriginsStateChanging},
		body:  body, bucket: bucket,
		handler: func(s *Server) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(s, w, r) })
		},
	}
}

func healthz(w http.ResponseWriter, _ *http.Request) { writePlain(w, http.StatusOK, "ok") }

// resolve is the Route an edge of cfg serves for d.
func (d routeDecl) resolve(cfg *Config) Route {
	rt := d.Route
	rt.Body = d.body
	if d.body == bodyEdge {
		rt.Body = cfg.MaxBodyBytes
	}
	if d.publicWhen != nil && d.publicWhen(cfg) {
		rt.Policy = PolicyPublic
	}
	return rt
}

// routeRules is why a row cannot be served, or nil: every rule declared,
// and only those its door applies (the front door authenticates callers
// and limits them; a side door has no caller to limit).
func routeRules(rt Route, bucket string) error {
	switch {
	case rt.Policy == 0 || rt.Policy > PolicyWebhookToken:
		return errors.New("no policy")
	case rt.Limit == 0 || rt.Limit > LimitAddress:
		return errors.New("no limit")
	case rt.Origins == 0 || rt.Origins > OriginsSame:
		return errors.New("no origin rule")
	case rt.Body < 0:
		return errors.New("no body bound")
	case rt.FrontDoor && (rt.Policy != PolicyCaller || rt.Limit != LimitCaller):
		return errors.New("a front door authenticates and limits callers")
	case !rt.FrontDoor && (rt.Policy == PolicyCaller) != (rt.Limit == LimitCaller):
		return errors.New("a side door authenticates and limits its callers together, as the front door (admitCaller)")
	case rt.Limit == LimitAddress && bucket == "":
		return errors.New("an address limit without a bucket")
	}
	return nil
}

// Routes returns the edge's route table, in the order routes were added.
func (s *Server) Routes() []Route { return append([]Route(nil), s.table...) }

// routes adds every row of the table this edge serves.
func (s *Server) routes() {
	for _, d := range routeTable() {
		if d.when == nil || d.when(&s.cfg) {
			s.handle(d)
		}
	}
}

// frontDoorHandler is what serve returns: a handler that applies its
// row's rules itself, in its binding's error form.
type frontDoorHandler http.HandlerFunc

func (h frontDoorHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h(w, r) }

// handle adds a route, with its rules; a row that breaks routeRules, or
// whose handler is not of its door, is a programming error.
func (s *Server) handle(d routeDecl) {
	rt := d.resolve(&s.cfg)
	err := routeRules(rt, d.bucket)
	if err == nil && (d.front != nil) != rt.FrontDoor {
		err = errors.New("its handler is not of its door")
	}
	if err != nil {
		panic(fmt.Sprintf("edge: route %q: %v", rt.Pattern, err))
	}
	var h http.Handler
	if rt.FrontDoor {
		h = d.front(s, rt)
	} else {
		h = s.sideDoor(rt, d.bucket, d.handler(s))
	}
	s.table = append(s.table, rt)
	s.mux.Handle(rt.Pattern, h)
}

// sideDoor applies a side door's rules: its origin rule, its limit, its
// body bound, then its policy.
func (s *Server) sideDoor(rt Route, bucket string, next http.Handler) http.Handler {
	admit := s.admission(rt.Policy)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := s.checkRoute(r, rt.Origins); e != nil {
			status := mediaTypeStatus(e)
			if status == 0 {
				status = e.HTTPStatus
			}
			writePlain(w, status, e.Message)
			return
		}
		if rt.Limit == LimitAddress && !s.allowAddress(w, r, bucket) {
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, rt.Body)
		if r = admit(w, r); r != nil {
			next.ServeHTTP(w, r)
		}
	})
}

// admission returns the check of a side door's policy: the request to
// serve (carrying what the check learned), or nil when it answered a
// refusal.
func (s *Server) admission(p Policy) func(http.ResponseWriter, *http.Request) *http.Request {
	switch p {
	case PolicyAdmin, PolicyAdminWrite:
		return s.admitAdmin(p == PolicyAdminWrite, nil)
	case PolicyApprover:
		return s.admitAdmin(true, s.cfg.Approvals.Approvers)
	case PolicyWebhookToken:
		return admitWebhook
	case PolicyCaller:
		return s.admitSideCaller
	default:
		return func(_ http.ResponseWriter, r *http.Request) *http.Request { return r }
	}
}

// adminKey carries the caller admitAdmin authenticated to its handler
// (adminCaller reads it), so no handler authenticates a second time.
type adminKey struct{}

// adminCaller is the caller admitAdmin let through (the zero caller on an
// edge that authenticates no one).
func adminCaller(r *http.Request) caller {
	who, _ := r.Context().Value(adminKey{}).(caller)
	return who
}

// admitAdmin admits admin principals when the edge authenticates. An edge
// that authenticates no one has no admin to tell apart: it admits every
// caller only when the operator said so (Config.OpenAdmin) and, for a
// route that writes, only while it listens on loopback.
//
// also names principals admitted as admins are (the approvers).
func (s *Server) admitAdmin(writes bool, also []string) func(http.ResponseWriter, *http.Request) *http.Request {
	if !s.authenticates() {
		return func(w http.ResponseWriter, r *http.Request) *http.Request {
			switch {
			case !s.cfg.OpenAdmin:
				writePlain(w, http.StatusForbidden, errNoAdmins)
			case writes && !s.cfg.LoopbackOnly:
				writePlain(w, http.StatusForbidden, "this is changed by admin principals, and this edge authenticates no one beyond loopback; configure authentication and --admins")
			default:
				return r
			}
			return nil
		}
	}
	a := s.cfg.Auth
	return func(w http.ResponseWriter, r *http.Request) *http.Request {
		who, err := s.authenticate(r)
		s.m.authFailed(err)
		if err == nil && !who.admin && !slices.Contains(also, who.principal) {
			err = a.Forbidden("only an admin principal may read this")
		}
		var f *auth.Failure
		switch {
		case errors.As(err, &f):
			if f.Challenge != "" {
				w.Header().Set("WWW-Authenticate", f.Challenge)
			}
			writePlain(w, f.Status, f.Reason)
		case err != nil:
			writePlain(w, http.StatusInternalServerError, "cannot check credentials")
		default:
			return r.WithContext(context.WithValue(r.Context(), adminKey{}, who))
		}
		return nil
	}
}

// errNoAdmins is why an edge that authenticates no one refuses its admin
// routes (see admitAdmin).
const errNoAdmins = "only an admin principal may use this, and this edge authenticates no one: the registry and the metrics are shared by every edge on the bus; " +
	"configure authentication (--api-key-file, $A2ABUS_API_KEYS or --jwt-*) with --admins, or start this edge with --open-admin to let every caller on loopback act as an admin"

// webhookKey carries the token admitWebhook read to its handler.
type webhookKey struct{}

// admitWebhook admits a request carrying a webhook token (the
// notification token header, or a Bearer token); without one it answers
// what a wrong one gets, so a sender learns nothing of the webhook.
func admitWebhook(w http.ResponseWriter, r *http.Request) *http.Request {
	token := schemas.NotificationToken(r.Header.Get)
	if token == "" {
		token, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if token == "" {
		refuseWebhook(w)
		return nil
	}
	return r.WithContext(context.WithValue(r.Context(), webhookKey{}, token))
}

// webhookToken is the token admitWebhook admitted r with.
func webhookToken(r *http.Request) string {
	t, _ := r.Context().Value(webhookKey{}).(string)
	return t
}

// refuseWebhook is the one answer to every refusal of a webhook's
// credential: an unknown task, another agent's, one not in push mode, a
// wrong token or none.
func refuseWebhook(w http.ResponseWriter) {
	writePlain(w, http.StatusNotFound, "no such webhook, or not this token")
}

// crossOrigin tells a browser's cross-origin request from a same-origin
// or non-browser one (Sec-Fetch-Site, else Origin against Host).
var crossOrigin = http.NewCrossOriginProtection()

// checkRoute applies a route's origin rule (see the top of this file) to
// r: nil, or the error row to refuse it with.
func (s *Server) checkRoute(r *http.Request, o Origins) *schemas.Error {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if o == OriginsSame && crossOriginRead(r) {
			return schemas.Errorf(schemas.ErrPermissionDenied, "a %s from a browser page of another origin is refused here", r.Method)
		}
		return nil
	}
	if err := crossOrigin.Check(r); err != nil {
		return schemas.Errorf(schemas.ErrPermissionDenied, "a %s from a browser page of another origin is refused: a2abus takes state-changing requests from its own origin or from clients that are not browsers", r.Method)
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil // nothing to read, as an HTTP+JSON cancel or a DELETE sends
	}
	if !jsonMediaType(ct) {
		if ct == "" {
			return schemas.Errorf(schemas.ErrContentTypeNotSupported, "a request body needs Content-Type %s or application/json", contentA2A)
		}
		return schemas.Errorf(schemas.ErrContentTypeNotSupported, "Content-Type %q is not supported; send %s or application/json", trimMediaType(ct), contentA2A)
	}
	return nil
}

// mediaTypeStatus is the HTTP status of checkRoute's refusal e where HTTP
// decides it: a request body of a media type the route does not take is
// 415 Unsupported Media Type, on every route answered in HTTP statuses.
// (The A2A table's ContentTypeNotSupported row, 400, is about the media
// types of a message's parts; JSON-RPC answers keep HTTP 200 and carry
// the row's code.) 0 for any other refusal: the row's status.
func mediaTypeStatus(e *schemas.Error) int {
	if e.Code == schemas.ErrContentTypeNotSupported.Code {
		return http.StatusUnsupportedMediaType
	}
	return 0
}

// crossOriginRead reports whether a safe-method request comes from a
// browser page of another origin: Sec-Fetch-Site says so, or (from a
// browser that does not send it) Origin names another host than Host.
func crossOriginRead(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return false
	case "":
	default:
		return true
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return false
	}
	u, err := url.Parse(o)
	return err != nil || u.Host != r.Host
}

// trimMediaType bounds a Content-Type repeated in an error message.
func trimMediaType(ct string) string {
	if len(ct) > 100 {
		ct = ct[:100] + "…"
	}
	return strings.ToValidUTF8(ct, "?")
}

// enumName is the name of value i of a rule, "invalid" past the last.
func enumName(i int, names ...string) string {
	if i < 0 || i >= len(names) {
		return "invalid"
	}
	return names[i]
}

// metricsToAll reports whether an edge of c serves /metrics to every
// caller: its row made public (PublicMetrics, the row's publicWhen), or an
// edge that authenticates no one opening its admin routes (OpenAdmin: see
// admitAdmin). A starting edge (NewStarting) follows it.
func (c *Config) metricsToAll() bool {
	return c.PublicMetrics || ((c.Auth == nil || c.Auth.Anonymous()) && c.OpenAdmin)
}
