package edge

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
)

// What the edge counts, in the process's registry (bus.Metrics), served at
// GET /metrics with everything else the process records. Labels are the
// binding, the A2A method (a method this edge does not serve counts as
// "unknown", a request with no readable method as "invalid", so clients
// cannot grow the label set) and the result code: 0 for success, else the
// A2A/JSON-RPC error code of the answer; the scheme a refused credential
// came by and why; the limit that refused a request.
type edgeMetrics struct {
	requests     bus.Counter   // a2a_rpc_requests_total{binding,method,code}
	duration     bus.Histogram // a2a_rpc_request_duration_seconds{binding,method}: unary calls only
	streams      bus.Gauge     // a2a_sse_streams_active: the SSE clients
	authFails    bus.Counter   // a2a_auth_failures_total{scheme,reason}
	limited      bus.Counter   // a2a_rate_limited_total{limit}
	trustCalls   bus.Counter   // a2a_trust_calls_total{level}
	trustRefused bus.Counter   // a2a_trust_refusals_total{level,reason}
}

func newEdgeMetrics(m *bus.Metrics) edgeMetrics {
	return edgeMetrics{
		requests:     m.Counter("a2a_rpc_requests_total", "A2A requests answered, by binding, method and result code (0: success).", "binding", "method", "code"),
		duration:     m.Histogram("a2a_rpc_request_duration_seconds", "Time to answer a unary A2A request (streams are not included).", bus.DurationBuckets, "binding", "method"),
		streams:      m.Gauge("a2a_sse_streams_active", "SSE streams open on this edge."),
		authFails:    m.Counter("a2a_auth_failures_total", "Requests whose credentials this edge refused, by the scheme they came by (apiKey, bearer, none) and why (missing, invalid, unavailable: the issuer's keys could not be fetched).", "scheme", "reason"),
		trustCalls:   m.Counter("a2a_trust_calls_total", "A2A calls by the trust level the edge gave them (trust.go).", "level"),
		trustRefused: m.Counter("a2a_trust_refusals_total", "A2A calls refused for their trust level, by level and why: level (the level is refused), agent (the level may not call the agent), skill (the level may not call the skill the message calls).", "level", "reason"),
		limited:      m.Counter("a2a_rate_limited_total", "Requests this edge refused with 429, by the limit: caller (the caller's rate), address (the default rate of a source address, on the side doors), unfinished (the caller's unfinished tasks), backlog_share (the caller's share of an agent's backlog), streams (the address's share of the edge's streams), level_streams (a caller's streams at its trust level's bound).", "limit"),
	}
}

// The limits a refusal is counted under (a2a_rate_limited_total).
const (
	limitCaller       = "caller"
	limitAddress      = "address"
	limitUnfinished   = "unfinished"
	limitBacklogShare = "backlog_share"
	limitStreams      = "streams"
	limitLevelStreams = "level_streams"
)

// openStream counts a stream of c from src against its trust level's
// bound of streams per caller (LevelLimits.MaxStreams) and the edge's
// stream limits (drainState.streamOpen), and a refusal of the caller's or
// the address's share as a 429.
func (s *Server) openStream(ctx context.Context, src netip.Addr, c *call) (func(), *schemas.Error) {
	var closeCaller func()
	if limit := c.level.Limits.MaxStreams; limit > 0 {
		var refused *schemas.Error
		if closeCaller, refused = s.streamsOf.open(c, limit); refused != nil {
			s.m.limited.Inc(limitLevelStreams)
			return nil, refused
		}
	}
	closeStream, refused := s.drain.streamOpen(ctx, src, s.cfg.MaxStreams)
	if refused != nil && refused.Code == schemas.ErrRateLimited.Code {
		s.m.limited.Inc(limitStreams)
	}
	if closeCaller == nil {
		return closeStream, refused
	}
	if refused != nil {
		closeCaller()
		return nil, refused
	}
	return func() { closeStream(); closeCaller() }, nil
}

// authFailed counts the credential a door refused (err from
// authenticate; nil counts nothing) by the scheme it came by and the
// failure's kind; a forbidden principal was authenticated, and is not
// counted. Only the doors that refuse count: a public route that merely
// asks who calls (the cards, the agent list) does not.
func (m *edgeMetrics) authFailed(err error) {
	var f *auth.Failure
	if !errors.As(err, &f) {
		return
	}
	scheme := f.Scheme
	if scheme == "" {
		scheme = "none"
	}
	switch {
	case errors.Is(f, auth.ErrNoCredentials):
		m.authFails.Inc(scheme, "missing")
	case errors.Is(f, auth.ErrInvalidCredentials):
		m.authFails.Inc(scheme, "invalid")
	case errors.Is(f, auth.ErrUnavailable):
		m.authFails.Inc(scheme, "unavailable")
	}
}

// observation is one request being measured; done records it.
type observation struct {
	m       *edgeMetrics
	binding string
	method  string
	code    int
	stream  bool
	start   time.Time
}

func (s *Server) observe(binding string) *observation {
	return &observation{m: &s.m, binding: binding, method: "invalid", start: time.Now()}
}

// failed notes the error the request is answered with.
func (o *observation) failed(e *schemas.Error) {
	if e != nil {
		o.code = e.Code
	}
}

func (o *observation) done() {
	o.m.requests.Inc(o.binding, o.method, strconv.Itoa(o.code))
	if !o.stream {
		o.m.duration.Observe(time.Since(o.start).Seconds(), o.binding, o.method)
	}
}

// streamOpen counts an SSE stream as open until the returned func is called.
func (s *Server) streamOpen(o *observation) func() {
	o.stream = true
	s.m.streams.Add(1)
	return func() { s.m.streams.Add(-1) }
}

// MetricsHandler serves m in the Prometheus exposition formats: the
// edge's GET /metrics, and any process's --metrics-listen.
func MetricsHandler(m *bus.Metrics) http.Handler { return m.Handler() }
