package bus

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Metrics is one process's counters, gauges and histograms, written in the
// Prometheus text exposition format (0.0.4) by whoever serves HTTP: the
// edge's GET /metrics, or a worker process's --metrics-listen. It is small
// and hand-written because no client library is in the dependency budget.
//
// Every package that does something worth counting registers its families
// here (bus: work outcomes, redeliveries, dead letters, finished tasks,
// store conflicts, bus messages; edge: requests, durations, open streams;
// discovery: card cache results). Label values must stay few: methods,
// codes, agents, states, outcomes — never task or context ids.
//
// Registering a family twice (two runners in one process) returns the
// first one. All methods are safe for concurrent use; a nil *Metrics
// records nothing, so components work without one.
type Metrics struct {
	mu       sync.Mutex
	families map[string]*family
}

// NewMetrics returns an empty registry.
func NewMetrics() *Metrics { return &Metrics{families: map[string]*family{}} }

type family struct {
	name, help, kind string
	labels           []string
	buckets          []float64 // histograms: upper bounds, ascending
	fn               func() float64

	mu     sync.Mutex
	series map[string]*series
}

type series struct {
	values []string
	n      atomic.Int64    // counter or gauge
	counts []atomic.Uint64 // histogram: one per bucket, then +Inf
	sumMu  sync.Mutex
	sum    float64
}

func (m *Metrics) register(name, help, kind string, labels []string, buckets []float64, fn func() float64) *family {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.families[name]; ok {
		return f
	}
	f := &family{name: name, help: help, kind: kind, labels: labels, buckets: buckets, fn: fn, series: map[string]*series{}}
	m.families[name] = f
	return f
}

// add moves the counter or gauge series of the label values by d; a nil
// family (a nil registry) records nothing.
func (f *family) add(d int64, values []string) {
	if f != nil {
		f.get(values).n.Add(d)
	}
}

// get returns the series of the label values, creating it.
func (f *family) get(values []string) *series {
	if len(values) != len(f.labels) {
		panic(fmt.Sprintf("bus: metric %s takes %d label values, got %d", f.name, len(f.labels), len(values)))
	}
	key := strings.Join(values, "\xff")
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.series[key]
	if !ok {
		s = &series{values: slices.Clone(values)}
		if f.kind == "histogram" {
			s.counts = make([]atomic.Uint64, len(f.buckets)+1)
		}
		f.series[key] = s
	}
	return s
}

// Counter is a family of monotonically increasing counts.
type Counter struct{ f *family }

// Counter registers (or returns) a counter family; by convention its name
// ends in _total.
func (m *Metrics) Counter(name, help string, labels ...string) Counter {
	return Counter{m.register(name, help, "counter", labels, nil, nil)}
}

// Add adds n to the series of the label values.
func (c Counter) Add(n int64, values ...string) { c.f.add(n, values) }

// Inc adds one.
func (c Counter) Inc(values ...string) { c.Add(1, values...) }

// Gauge is a family of values that go up and down.
type Gauge struct{ f *family }

// Gauge registers (or returns) a gauge family.
func (m *Metrics) Gauge(name, help string, labels ...string) Gauge {
	return Gauge{m.register(name, help, "gauge", labels, nil, nil)}
}

// Add moves the series of the label values by d.
func (g Gauge) Add(d int64, values ...string) { g.f.add(d, values) }

// Set sets the series of the label values.
func (g Gauge) Set(v int64, values ...string) {
	if g.f != nil {
		g.f.get(values).n.Store(v)
	}
}

// CounterFunc registers a counter without labels whose value is read from
// fn at every scrape (a count kept elsewhere, such as the connection's).
func (m *Metrics) CounterFunc(name, help string, fn func() float64) {
	m.register(name, help, "counter", nil, nil, fn)
}

// Histogram is a family of observations counted into buckets.
type Histogram struct{ f *family }

// DurationBuckets are the default upper bounds, in seconds, for request
// and task durations: 1 ms to 60 s.
var DurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Histogram registers (or returns) a histogram family with the given
// ascending bucket upper bounds.
func (m *Metrics) Histogram(name, help string, buckets []float64, labels ...string) Histogram {
	return Histogram{m.register(name, help, "histogram", labels, buckets, nil)}
}

// Observe records v in the series of the label values.
func (h Histogram) Observe(v float64, values ...string) {
	if h.f == nil {
		return
	}
	s := h.f.get(values)
	i, _ := slices.BinarySearch(h.f.buckets, v) // first bound >= v; len = +Inf
	s.counts[i].Add(1)
	s.sumMu.Lock()
	s.sum += v
	s.sumMu.Unlock()
}

// WriteText writes every family in the Prometheus text format, families
// and series in a stable order.
func (m *Metrics) WriteText(w io.Writer) error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	fams := make([]*family, 0, len(m.families))
	for _, f := range m.families {
		fams = append(fams, f)
	}
	m.mu.Unlock()
	slices.SortFunc(fams, func(a, b *family) int { return strings.Compare(a.name, b.name) })
	bw := bufio.NewWriter(w)
	for _, f := range fams {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", f.name, escapeHelp(f.help), f.name, f.kind)
		if f.fn != nil {
			fmt.Fprintf(bw, "%s %s\n", f.name, formatValue(f.fn()))
			continue
		}
		f.mu.Lock()
		ss := make([]*series, 0, len(f.series))
		for _, s := range f.series {
			ss = append(ss, s)
		}
		f.mu.Unlock()
		slices.SortFunc(ss, func(a, b *series) int { return slices.Compare(a.values, b.values) })
		for _, s := range ss {
			if f.kind != "histogram" {
				fmt.Fprintf(bw, "%s%s %d\n", f.name, labelText(f.labels, s.values, "", ""), s.n.Load())
				continue
			}
			var cum uint64
			for i, ub := range f.buckets {
				cum += s.counts[i].Load()
				fmt.Fprintf(bw, "%s_bucket%s %d\n", f.name, labelText(f.labels, s.values, "le", formatValue(ub)), cum)
			}
			cum += s.counts[len(f.buckets)].Load()
			fmt.Fprintf(bw, "%s_bucket%s %d\n", f.name, labelText(f.labels, s.values, "le", "+Inf"), cum)
			s.sumMu.Lock()
			sum := s.sum
			s.sumMu.Unlock()
			fmt.Fprintf(bw, "%s_sum%s %s\n", f.name, labelText(f.labels, s.values, "", ""), formatValue(sum))
			fmt.Fprintf(bw, "%s_count%s %d\n", f.name, labelText(f.labels, s.values, "", ""), cum)
		}
	}
	return bw.Flush()
}

// labelText renders {a="x",b="y"} with an optional extra label (le).
func labelText(names, values []string, extra, extraValue string) string {
	if len(names) == 0 && extra == "" {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteString(`="`)
		b.WriteString(escapeLabel(values[i]))
		b.WriteByte('"')
	}
	if extra != "" {
		if len(names) > 0 {
			b.WriteByte(',')
		}
		b.WriteString(extra)
		b.WriteString(`="`)
		b.WriteString(extraValue)
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }

func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
