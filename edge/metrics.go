package edge

import (
	"net/http"
	"strconv"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// What the edge counts, in the process's registry (bus.Metrics), served at
// GET /metrics with everything else the process records. Labels are the
// binding, the A2A method (a method this edge does not serve counts as
// "unknown", a request with no readable method as "invalid", so clients
// cannot grow the label set) and the result code: 0 for success, else the
// A2A/JSON-RPC error code of the answer.
type edgeMetrics struct {
	requests bus.Counter   // a2a_rpc_requests_total{binding,method,code}
	duration bus.Histogram // a2a_rpc_request_duration_seconds{binding,method}: unary calls only
	streams  bus.Gauge     // a2a_sse_streams_active
}

func newEdgeMetrics(m *bus.Metrics) edgeMetrics {
	return edgeMetrics{
		requests: m.Counter("a2a_rpc_requests_total", "A2A requests answered, by binding, method and result code (0: success).", "binding", "method", "code"),
		duration: m.Histogram("a2a_rpc_request_duration_seconds", "Time to answer a unary A2A request (streams are not included).", bus.DurationBuckets, "binding", "method"),
		streams:  m.Gauge("a2a_sse_streams_active", "SSE streams open on this edge."),
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

// MetricsHandler serves m in the Prometheus text format: the edge's
// GET /metrics, and any process's --metrics-listen.
func MetricsHandler(m *bus.Metrics) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = m.WriteText(w)
	}
}
