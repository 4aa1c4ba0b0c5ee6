package bus

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// natsReading is one scrape of m: the value of every series by name and
// stream label (name, or name{stream}).
func natsReading(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range parseText(t, b.String()) {
		if !strings.HasPrefix(name, "a2a_nats_") {
			continue
		}
		for _, s := range f.Metric {
			key := name
			for _, l := range s.Label {
				if l.GetName() == "stream" {
					key = fmt.Sprintf("%s{%s}", name, l.GetValue())
				}
			}
			switch {
			case s.Counter != nil:
				out[key] = s.Counter.GetValue()
			case s.Gauge != nil:
				out[key] = s.Gauge.GetValue()
			}
		}
	}
	return out
}

// publishTo makes stream NAME (subjects NAME.>, file storage, replicas)
// through js and stores n messages of 100 bytes in it.
func publishTo(t *testing.T, js jetstream.JetStream, name string, replicas, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
		Storage: jetstream.FileStorage, Replicas: replicas}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := js.Publish(ctx, fmt.Sprintf("%s.%d", name, i), make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
}

// The embedded server's counters are on the process's registry, read at
// the scrape: a standalone server's traffic, JetStream API requests and
// store, and per stream what it holds, its last sequence and that this
// server (the only one) leads it.
func TestServerMetricsMoveWithTraffic(t *testing.T) {
	s := startServer(t, "")
	m := NewMetrics()
	s.ReportMetrics(m)
	s.ReportMetrics(m) // adds nothing
	b := connect(t, s, Config{})
	before := natsReading(t, m)
	for _, name := range []string{"a2a_nats_in_msgs_total", "a2a_nats_in_bytes_total", "a2a_nats_out_msgs_total",
		"a2a_nats_out_bytes_total", "a2a_nats_route_in_bytes_total", "a2a_nats_route_out_bytes_total",
		"a2a_nats_jetstream_api_requests_total", "a2a_nats_jetstream_api_errors_total", "a2a_nats_jetstream_store_bytes"} {
		if _, ok := before[name]; !ok {
			t.Errorf("no %s in the scrape", name)
		}
	}
	publishTo(t, b.js, "CAPTEST", 1, 5)
	after := natsReading(t, m)
	for _, name := range []string{"a2a_nats_in_msgs_total", "a2a_nats_in_bytes_total", "a2a_nats_out_msgs_total",
		"a2a_nats_jetstream_api_requests_total", "a2a_nats_jetstream_store_bytes"} {
		if after[name] <= before[name] {
			t.Errorf("%s did not move: %v, then %v", name, before[name], after[name])
		}
	}
	if got := after["a2a_nats_in_msgs_total"] - before["a2a_nats_in_msgs_total"]; got < 5 {
		t.Errorf("in_msgs moved by %v after 5 publishes", got)
	}
	if got := after["a2a_nats_in_bytes_total"] - before["a2a_nats_in_bytes_total"]; got < 500 {
		t.Errorf("in_bytes moved by %v after 5 publishes of 100 bytes", got)
	}
	for name, want := range map[string]float64{"a2a_nats_stream_last_seq{CAPTEST}": 5, "a2a_nats_stream_messages{CAPTEST}": 5,
		"a2a_nats_stream_leader{CAPTEST}": 1, "a2a_nats_route_out_bytes_total": 0} {
		if after[name] != want {
			t.Errorf("%s = %v, want %v", name, after[name], want)
		}
	}
	if after["a2a_nats_stream_bytes{CAPTEST}"] < 500 {
		t.Errorf("stream bytes %v for 5 messages of 100 bytes", after["a2a_nats_stream_bytes{CAPTEST}"])
	}
	// The contract's streams are there too, with their leader.
	if _, ok := after["a2a_nats_stream_leader{KV_"+schemas.BucketTasks+"}"]; !ok {
		t.Errorf("no leader series for the task bucket's stream: %v", after)
	}
}

// In a cluster, an R3 stream is on every member; exactly one leads it,
// every member stores every message, and the members' route counters
// carry the replication.
func TestServerMetricsOfAClusterStream(t *testing.T) {
	c := startCluster(t, -1)
	ms := make([]*Metrics, len(c.servers))
	for i, s := range c.servers {
		ms[i] = NewMetrics()
		s.ReportMetrics(ms[i])
	}
	routeOut := func() (sum float64) {
		for _, m := range ms {
			sum += natsReading(t, m)["a2a_nats_route_out_bytes_total"]
		}
		return sum
	}
	before := routeOut()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	b, err := Connect(ctx, Config{URL: c.allURLs(), Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	publishTo(t, b.js, "CAPTEST", 3, 20)
	deadline := time.Now().Add(30 * time.Second)
	for {
		leaders, stored := 0.0, 0
		for _, m := range ms {
			r := natsReading(t, m)
			leaders += r["a2a_nats_stream_leader{CAPTEST}"]
			if r["a2a_nats_stream_last_seq{CAPTEST}"] == 20 {
				stored++
			}
		}
		if leaders == 1 && stored == len(ms) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want one leader and 20 messages on every member; %v leaders, %d members with all", leaders, stored)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if after := routeOut(); after-before < 2*20*100 {
		t.Errorf("route bytes moved by %v: 20 messages of 100 bytes replicated to two followers are more", after-before)
	}
}
