package bus

import (
	"strings"
	"testing"
)

// The registry writes the Prometheus text format: HELP and TYPE per family,
// families by name, series by label values, histograms cumulative with
// +Inf, _sum and _count, label values escaped.
func TestMetricsText(t *testing.T) {
	m := NewMetrics()
	c := m.Counter("a2a_b_total", "Counts b.", "agent", "outcome")
	c.Inc("echo", "ack")
	c.Add(2, "echo", "ack")
	c.Inc(`we"ird\`, "nak")
	if again := m.Counter("a2a_b_total", "ignored", "agent", "outcome"); again.f != c.f {
		t.Fatal("registering a family twice made a second one")
	}
	g := m.Gauge("a2a_a_open", "Open things.")
	g.Add(3)
	g.Add(-1)
	h := m.Histogram("a2a_c_seconds", "Durations.", []float64{0.1, 1}, "method")
	h.Observe(0.05, "Get")
	h.Observe(0.1, "Get") // on a bound: counted in it
	h.Observe(5, "Get")
	m.CounterFunc("a2a_d_total", "From elsewhere.", func() float64 { return 7 })

	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP a2a_a_open Open things.
# TYPE a2a_a_open gauge
a2a_a_open 2
# HELP a2a_b_total Counts b.
# TYPE a2a_b_total counter
a2a_b_total{agent="echo",outcome="ack"} 3
a2a_b_total{agent="we\"ird\\",outcome="nak"} 1
# HELP a2a_c_seconds Durations.
# TYPE a2a_c_seconds histogram
a2a_c_seconds_bucket{method="Get",le="0.1"} 2
a2a_c_seconds_bucket{method="Get",le="1"} 2
a2a_c_seconds_bucket{method="Get",le="+Inf"} 3
a2a_c_seconds_sum{method="Get"} 5.15
a2a_c_seconds_count{method="Get"} 3
# HELP a2a_d_total From elsewhere.
# TYPE a2a_d_total counter
a2a_d_total 7
`
	if b.String() != want {
		t.Fatalf("exposition:\n%s\nwant:\n%s", b.String(), want)
	}

	// A nil registry records nothing and writes nothing.
	var none *Metrics
	none.Counter("x_total", "x").Inc()
	none.Histogram("y", "y", DurationBuckets).Observe(1)
	if err := none.WriteText(&b); err != nil {
		t.Fatal(err)
	}
}
