package bus

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parseText parses a text exposition with the official parser, names
// held to the classic (legacy) rules every scraper accepts.
func parseText(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, text)
	}
	return fams
}

// The registry writes what was recorded in the Prometheus text format:
// counters summed per label values (escaped), gauges moved both ways,
// histograms cumulative with a bound counted in its bucket, counter
// functions read at the scrape, and the Go runtime's and the process's
// families beside them.
func TestMetricsText(t *testing.T) {
	m := NewMetrics()
	c := m.Counter("a2a_b_total", "Counts b.", "agent", "outcome")
	c.Inc("echo", "ack")
	c.Add(2, "echo", "ack")
	c.Inc(`we"ird\`, "nak")
	// A family registered twice is the first: both handles count in it.
	m.Counter("a2a_b_total", "ignored", "agent", "outcome").Inc("echo", "ack")
	g := m.Gauge("a2a_a_open", "Open things.")
	g.Add(3)
	g.Add(-1)
	h := m.Histogram("a2a_c_seconds", "Durations.", []float64{0.1, 1}, "method")
	h.Observe(0.05, "Get")
	h.Observe(0.1, "Get") // on a bound: counted in it
	h.Observe(5, "Get")
	n := 7.0
	m.CounterFunc("a2a_d_total", "From elsewhere.", func() float64 { return n })
	m.CounterFunc("a2a_d_total", "ignored", func() float64 { return -1 })

	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, line := range []string{
		"# HELP a2a_b_total Counts b.\n# TYPE a2a_b_total counter\n",
		`a2a_b_total{agent="echo",outcome="ack"} 4` + "\n",
		`a2a_b_total{agent="we\"ird\\",outcome="nak"} 1` + "\n",
		"a2a_a_open 2\n",
		`a2a_c_seconds_bucket{method="Get",le="0.1"} 2` + "\n",
		`a2a_c_seconds_bucket{method="Get",le="1"} 2` + "\n",
		`a2a_c_seconds_bucket{method="Get",le="+Inf"} 3` + "\n",
		`a2a_c_seconds_sum{method="Get"} 5.15` + "\n",
		`a2a_c_seconds_count{method="Get"} 3` + "\n",
		"a2a_d_total 7\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("exposition lacks %q:\n%s", line, text)
		}
	}
	fams := parseText(t, text)
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_heap_live_bytes", "go_gc_duration_seconds", "process_open_fds", "process_resident_memory_bytes", "process_cpu_seconds_total"} {
		if fams[name] == nil {
			t.Errorf("exposition lacks %s", name)
		}
	}
	if got := fams["a2a_b_total"].GetType(); got != dto.MetricType_COUNTER {
		t.Errorf("a2a_b_total is a %v", got)
	}

	// Counter functions are read at every scrape.
	n = 9
	b.Reset()
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if got := parseText(t, b.String())["a2a_d_total"].GetMetric()[0].GetCounter().GetValue(); got != 9 {
		t.Errorf("a2a_d_total = %v after the count moved to 9", got)
	}
}

// A nil registry records nothing, writes nothing and serves an empty
// answer, so components work without one.
func TestMetricsNil(t *testing.T) {
	var none *Metrics
	none.Counter("x_total", "x").Inc()
	none.Gauge("y", "y", "a").Set(1, "b")
	none.Histogram("z", "z", DurationBuckets).Observe(1)
	none.CounterFunc("w_total", "w", func() float64 { return 1 })
	var b strings.Builder
	if err := none.WriteText(&b); err != nil || b.Len() != 0 {
		t.Fatalf("nil registry wrote %q, %v", b.String(), err)
	}
	rec := httptest.NewRecorder()
	none.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "go_goroutines") {
		t.Fatalf("nil registry served %d %q", rec.Code, rec.Body.String())
	}
}

// Recording with the wrong number of label values, or registering a name
// again as another kind or with other labels, is a programming error.
func TestMetricsMisusePanics(t *testing.T) {
	m := NewMetrics()
	c := m.Counter("a2a_e_total", "e", "agent")
	m.Gauge("a2a_f", "f")
	for name, f := range map[string]func(){
		"too few values":   func() { c.Inc() },
		"too many values":  func() { c.Inc("a", "b") },
		"another kind":     func() { m.Gauge("a2a_e_total", "e", "agent") },
		"other labels":     func() { m.Counter("a2a_e_total", "e", "agent", "state") },
		"histogram labels": func() { m.Histogram("a2a_f", "f", nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
}

// The handler negotiates the format as the library does: the text
// format by default, the protobuf format for a scraper that asks for it.
func TestMetricsHandler(t *testing.T) {
	m := NewMetrics()
	m.Counter("a2a_g_total", "g").Inc()
	for _, tc := range []struct{ accept, wantType, wantLine string }{
		{"", "text/plain; version=0.0.4", "a2a_g_total 1\n"},
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", "application/vnd.google.protobuf", "a2a_g_total"},
	} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, req)
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tc.wantType) {
			t.Errorf("Accept %q: Content-Type %q, want %q", tc.accept, ct, tc.wantType)
		}
		if !strings.Contains(rec.Body.String(), tc.wantLine) {
			t.Errorf("Accept %q: body lacks %q:\n%s", tc.accept, tc.wantLine, rec.Body.String())
		}
	}
}
