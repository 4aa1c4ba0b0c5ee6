package edge

import (
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// Starting is the HTTP handler of an edge process from the moment its port
// is bound until its edge can serve: the process listens at once, so
// operators and load balancers see it alive, while the bus may still be
// unreachable or a cluster still forming. Until Serve hands it the edge's
// handler it answers every route of the edge's route table (routeTable)
// itself:
//
//   - GET /healthz: 200, the process is alive;
//   - GET /readyz: 503 "not ready: <reason>" (see SetReason);
//   - GET /metrics: the process's metrics, when it was given a registry
//     (no one can be authenticated yet, so only where they are public);
//   - a JSON-RPC route: 503 with Retry-After and a JSON-RPC error from
//     the table's ErrUnavailable row, echoing the request's id when it
//     can be read;
//   - the older REST routes (/a2a/tasks/...): 503 in their error shape;
//   - any other route (HTTP+JSON routes, cards, the agent list, admin),
//     and any path the table does not hold (a tenant's, say): 503 with
//     Retry-After as google.rpc.Status.
//
// Every refusal is retryable: nothing was done. After Serve every request
// goes to the edge's handler, which then owns readiness (and draining).
// Starting is safe for concurrent use.
type Starting struct {
	mux     *http.ServeMux
	metrics *bus.Metrics
	next    atomic.Pointer[http.Handler]
	reason  atomic.Pointer[string]
}

// startingMaxID bounds how much of a JSON-RPC body is read to find its id;
// a longer request is refused with a null id.
const startingMaxID = 64 << 10

// NewStarting returns the handler of an edge of cfg that is not serving
// yet, with the reason "starting". Until the edge is ready no one is
// authenticated, so m is served at /metrics only where the edge serves it
// to every caller (metricsToAll).
func NewStarting(m *bus.Metrics, cfg Config) *Starting {
	if !cfg.metricsToAll() {
		m = nil
	}
	s := &Starting{mux: http.NewServeMux(), metrics: m}
	s.SetReason("starting")
	// The routes of an edge with every optional route off: those (MCP,
	// JWKS) fall to the catch-all below.
	var none Config
	for _, d := range routeTable() {
		if d.when == nil || d.when(&none) {
			s.mux.Handle(d.Pattern, s.answer(d))
		}
	}
	s.mux.HandleFunc("/", s.refuseStatus)
	return s
}

// answer is what s serves for row d.
func (s *Starting) answer(d routeDecl) http.Handler {
	if d.early != nil {
		return d.early(s)
	}
	switch d.form {
	case formJSONRPC:
		return http.HandlerFunc(s.refuseJSONRPC)
	case formLegacy:
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeLegacyError(w, s.unavailable(), 0) })
	default:
		return http.HandlerFunc(s.refuseStatus)
	}
}

func (s *Starting) refuseStatus(w http.ResponseWriter, _ *http.Request) {
	writeStatus(w, s.unavailable(), 0)
}

func (s *Starting) notReady(w http.ResponseWriter, _ *http.Request) {
	writePlain(w, http.StatusServiceUnavailable, "not ready: "+*s.reason.Load())
}

// metricsHandler serves the metrics it was given, else refuses as any
// other route.
func (s *Starting) metricsHandler() http.Handler {
	if s.metrics == nil {
		return http.HandlerFunc(s.refuseStatus)
	}
	return MetricsHandler(s.metrics)
}

// SetReason sets what /readyz and the refusals say the edge is waiting
// for, e.g. "connecting to NATS".
func (s *Starting) SetReason(reason string) { s.reason.Store(&reason) }

// Serve hands every later request to h, the edge's own handler.
func (s *Starting) Serve(h http.Handler) { s.next.Store(&h) }

// ServeHTTP serves r with the edge's handler once Serve was called, and
// refuses it as described on Starting before.
func (s *Starting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.next.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// unavailable is the refusal of one request: the table's retryable
// ErrUnavailable with the current reason.
func (s *Starting) unavailable() *schemas.Error {
	return schemas.Errorf(schemas.ErrUnavailable, "the edge is not ready yet (%s); retry later", *s.reason.Load())
}

// refuseJSONRPC answers a JSON-RPC call with ErrUnavailable, echoing its
// id so the client can match the answer to its call.
func (s *Starting) refuseJSONRPC(w http.ResponseWriter, r *http.Request) {
	id := nullID
	var env struct {
		ID json.RawMessage `json:"id"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, startingMaxID+1))
	if err == nil && len(body) <= startingMaxID && json.Unmarshal(body, &env) == nil && env.ID != nil && validID(env.ID) {
		id = env.ID
	}
	writeRPCError(w, id, s.unavailable())
}
