package bus

import (
	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
)

// ReportMetrics registers, in m, the counters of the embedded NATS
// server, read from it when /metrics is scraped (the server's own
// monitoring port stays closed):
//
//	a2a_nats_in_msgs_total, a2a_nats_in_bytes_total     messages and bytes received (clients and routes)
//	a2a_nats_out_msgs_total, a2a_nats_out_bytes_total   messages and bytes sent (clients and routes)
//	a2a_nats_route_in_bytes_total, a2a_nats_route_out_bytes_total   of those, over routes to the other cluster members
//	a2a_nats_jetstream_api_requests_total, a2a_nats_jetstream_api_errors_total   JetStream API requests this server answered
//	a2a_nats_jetstream_store_bytes     bytes the server's JetStream file store holds
//	a2a_nats_stream_messages{stream}   messages a stream (or bucket's stream) holds on this server
//	a2a_nats_stream_bytes{stream}      their bytes
//	a2a_nats_stream_last_seq{stream}   its last sequence: every message ever stored in it
//	a2a_nats_stream_leader{stream}     1 where this server leads the stream's replicas, else 0
//
// Streams are those this server holds a replica of. The route counters
// are the routes connected now: a route that reconnects starts again
// from 0, which Prometheus's rate() reads as a counter reset. The
// capacity model (ARCHITECTURE.md, "Capacity model of the cluster") reads
// them per task. A second call adds nothing.
func (s *Server) ReportMetrics(m *Metrics) {
	if m == nil {
		return
	}
	counter := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	stream := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"stream"}, nil)
	}
	m.collect("a2a_nats", &natsCollector{
		s:          s.s,
		inMsgs:     counter("a2a_nats_in_msgs_total", "Messages the NATS server received, from clients and routes."),
		inBytes:    counter("a2a_nats_in_bytes_total", "Bytes of the messages the NATS server received, from clients and routes."),
		outMsgs:    counter("a2a_nats_out_msgs_total", "Messages the NATS server sent, to clients and routes."),
		outBytes:   counter("a2a_nats_out_bytes_total", "Bytes of the messages the NATS server sent, to clients and routes."),
		routeIn:    counter("a2a_nats_route_in_bytes_total", "Bytes of the messages received over the routes connected now (cluster replication and forwarding)."),
		routeOut:   counter("a2a_nats_route_out_bytes_total", "Bytes of the messages sent over the routes connected now (cluster replication and forwarding)."),
		apiTotal:   counter("a2a_nats_jetstream_api_requests_total", "JetStream API requests this server answered."),
		apiErrors:  counter("a2a_nats_jetstream_api_errors_total", "JetStream API requests this server answered with an error."),
		storeBytes: prometheus.NewDesc("a2a_nats_jetstream_store_bytes", "Bytes the server's JetStream file store holds.", nil, nil),
		msgs:       stream("a2a_nats_stream_messages", "Messages the stream holds on this server."),
		bytes:      stream("a2a_nats_stream_bytes", "Bytes of the messages the stream holds on this server."),
		lastSeq:    stream("a2a_nats_stream_last_seq", "The stream's last sequence on this server: every message ever stored in it."),
		leader:     stream("a2a_nats_stream_leader", "1 where this server leads the stream's replicas (a standalone server leads all), else 0."),
		serverName: s.s.Name(),
	})
}

// natsCollector reads the embedded server's counters at scrape time
// (see ReportMetrics).
type natsCollector struct {
	s                                                     *server.Server
	serverName                                            string
	inMsgs, inBytes, outMsgs, outBytes, routeIn, routeOut *prometheus.Desc
	apiTotal, apiErrors, storeBytes                       *prometheus.Desc
	msgs, bytes, lastSeq, leader                          *prometheus.Desc
}

func (c *natsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.inMsgs, c.inBytes, c.outMsgs, c.outBytes, c.routeIn, c.routeOut,
		c.apiTotal, c.apiErrors, c.storeBytes, c.msgs, c.bytes, c.lastSeq, c.leader} {
		ch <- d
	}
}

func (c *natsCollector) Collect(ch chan<- prometheus.Metric) {
	metric := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, labels...)
	}
	if v, err := c.s.Varz(nil); err == nil {
		metric(c.inMsgs, prometheus.CounterValue, float64(v.InMsgs))
		metric(c.inBytes, prometheus.CounterValue, float64(v.InBytes))
		metric(c.outMsgs, prometheus.CounterValue, float64(v.OutMsgs))
		metric(c.outBytes, prometheus.CounterValue, float64(v.OutBytes))
	}
	if r, err := c.s.Routez(nil); err == nil {
		var in, out int64
		for _, ri := range r.Routes {
			in += ri.InBytes
			out += ri.OutBytes
		}
		metric(c.routeIn, prometheus.CounterValue, float64(in))
		metric(c.routeOut, prometheus.CounterValue, float64(out))
	}
	js, err := c.s.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil || js.Disabled {
		return
	}
	metric(c.apiTotal, prometheus.CounterValue, float64(js.API.Total))
	metric(c.apiErrors, prometheus.CounterValue, float64(js.API.Errors))
	metric(c.storeBytes, prometheus.GaugeValue, float64(js.Store))
	clustered := c.s.JetStreamIsClustered()
	seen := map[string]bool{} // a stream name in two accounts is reported once
	for _, acc := range js.AccountDetails {
		for _, st := range acc.Streams {
			if seen[st.Name] {
				continue
			}
			seen[st.Name] = true
			metric(c.msgs, prometheus.GaugeValue, float64(st.State.Msgs), st.Name)
			metric(c.bytes, prometheus.GaugeValue, float64(st.State.Bytes), st.Name)
			metric(c.lastSeq, prometheus.GaugeValue, float64(st.State.LastSeq), st.Name)
			lead := 0.0
			if !clustered || st.Cluster != nil && st.Cluster.Leader == c.serverName {
				lead = 1
			}
			metric(c.leader, prometheus.GaugeValue, lead, st.Name)
		}
	}
}
