package bus

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Metrics is one process's counters, gauges and histograms, served in the
// Prometheus exposition formats by whoever serves HTTP: the edge's GET
// /metrics, or a worker process's --metrics-listen (Handler). It is a
// thin face over a client_golang registry, so the rest of the module
// records without importing the library (only bus does), and every
// registry carries the Go runtime's (go_*) and the process's (process_*)
// collectors.
//
// Every package that does something worth counting registers its families
// here (bus: work outcomes, redeliveries, dead letters, finished tasks and
// their durations, store conflicts, bus messages, agent backlogs; edge:
// requests, durations, open streams, authentication failures, rate-limit
// refusals; discovery: card cache results). Label values must stay few:
// methods, codes, agents, states, outcomes — never task or context ids.
//
// A family without labels is exposed from its registration, at 0; one
// with labels, from its first series. Registering a family twice (two
// runners in one process) returns the first one; registering a name again as another kind, or with other
// labels, is a programming error and panics. All methods are safe for
// concurrent use; a nil *Metrics records nothing, so components work
// without one.
type Metrics struct {
	reg *prometheus.Registry

	mu       sync.Mutex
	families map[string]family
}

// family is a registered family: its collector, and what it was
// registered as, so a second registration can be checked against it.
type family struct {
	c      prometheus.Collector
	kind   string
	labels int
}

// NewMetrics returns a registry holding the Go runtime's and the
// process's collectors. The runtime's include the live heap
// (go_gc_heap_live_bytes: what the last collection kept), which the heap
// policy keeps the process's memory a multiple of (cmd/a2abus/memlimit.go):
// memory is read against it, not against what garbage fills between
// collections.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Metrics{reg: reg, families: map[string]family{}}
}

// register returns the family registered under name, making it with mk
// if there is none; nil for a nil registry.
func (m *Metrics) register(name, kind string, labels int, mk func() prometheus.Collector) prometheus.Collector {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.families[name]; ok {
		if f.kind != kind || f.labels != labels {
			panic(fmt.Sprintf("bus: metric %s registered as a %s with %d labels, now as a %s with %d", name, f.kind, f.labels, kind, labels))
		}
		return f.c
	}
	c := mk()
	m.reg.MustRegister(c)
	m.families[name] = family{c: c, kind: kind, labels: labels}
	return c
}

// Counter is a family of monotonically increasing counts.
type Counter struct{ v *prometheus.CounterVec }

// Counter registers (or returns) a counter family; by convention its name
// ends in _total.
func (m *Metrics) Counter(name, help string, labels ...string) Counter {
	c := m.register(name, "counter", len(labels), func() prometheus.Collector {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	})
	v, _ := c.(*prometheus.CounterVec)
	if v != nil && len(labels) == 0 {
		v.WithLabelValues() // exposed from the start, at 0
	}
	return Counter{v}
}

// Add adds n (not negative) to the series of the label values; it panics
// when their number is not the family's.
func (c Counter) Add(n int64, values ...string) {
	if c.v != nil {
		c.v.WithLabelValues(values...).Add(float64(n))
	}
}

// Inc adds one.
func (c Counter) Inc(values ...string) { c.Add(1, values...) }

// Gauge is a family of values that go up and down.
type Gauge struct{ v *prometheus.GaugeVec }

// Gauge registers (or returns) a gauge family.
func (m *Metrics) Gauge(name, help string, labels ...string) Gauge {
	c := m.register(name, "gauge", len(labels), func() prometheus.Collector {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	})
	v, _ := c.(*prometheus.GaugeVec)
	if v != nil && len(labels) == 0 {
		v.WithLabelValues()
	}
	return Gauge{v}
}

// Add moves the series of the label values by d.
func (g Gauge) Add(d int64, values ...string) {
	if g.v != nil {
		g.v.WithLabelValues(values...).Add(float64(d))
	}
}

// Set sets the series of the label values.
func (g Gauge) Set(v int64, values ...string) {
	if g.v != nil {
		g.v.WithLabelValues(values...).Set(float64(v))
	}
}

// CounterFunc registers a counter without labels whose value is read from
// fn at every scrape (a count kept elsewhere, such as the connection's).
func (m *Metrics) CounterFunc(name, help string, fn func() float64) {
	m.register(name, "counterfunc", 0, func() prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn)
	})
}

// Histogram is a family of observations counted into buckets.
type Histogram struct{ v *prometheus.HistogramVec }

// DurationBuckets are the default upper bounds, in seconds, for request
// durations: 1 ms to 60 s.
var DurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// TaskDurationBuckets are the upper bounds, in seconds, of task durations
// (created to finished): tasks run from milliseconds (an echo) to hours
// (waiting for input).
var TaskDurationBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600}

// Histogram registers (or returns) a histogram family with the given
// ascending bucket upper bounds (nil: the library's default, 5 ms to 10 s).
func (m *Metrics) Histogram(name, help string, buckets []float64, labels ...string) Histogram {
	c := m.register(name, "histogram", len(labels), func() prometheus.Collector {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	})
	v, _ := c.(*prometheus.HistogramVec)
	if v != nil && len(labels) == 0 {
		v.WithLabelValues()
	}
	return Histogram{v}
}

// Observe records v in the series of the label values.
func (h Histogram) Observe(v float64, values ...string) {
	if h.v != nil {
		h.v.WithLabelValues(values...).Observe(v)
	}
}

// collect registers c, a collector of families read at scrape time (the
// agents' backlogs), under name; a second one under the same name is
// dropped, as a family registered twice is.
func (m *Metrics) collect(name string, c prometheus.Collector) {
	m.register(name, "collector", 0, func() prometheus.Collector { return c })
}

// Handler serves the registry at GET /metrics with the library's content
// negotiation (the text format, or protobuf for a scraper that asks). A collector that fails leaves its families out of the
// answer, not the others. A nil registry serves an empty answer.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{})
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// WriteText writes every family in the Prometheus text format (0.0.4),
// families by name and series by label values. A collector's failure is
// returned after what the others gathered is written.
func (m *Metrics) WriteText(w io.Writer) error {
	if m == nil {
		return nil
	}
	fams, gerr := m.reg.Gather()
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return gerr
}
