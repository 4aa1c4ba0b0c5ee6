package edge_test

import (
	"net/http"
	"testing"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/workers"
)

// BenchmarkSendMessageAudit is what the audit record costs a blocking
// send: the same send from loopback (the local level) unaudited, and
// with the level audited (two records appended, the first awaited before
// the call runs).
//
//	go test -run '^$' -bench SendMessageAudit -benchmem ./edge/
func BenchmarkSendMessageAudit(b *testing.B) {
	for _, c := range []struct {
		name  string
		audit bool
	}{{"unaudited", false}, {"audited", true}} {
		b.Run(c.name, func(b *testing.B) {
			srv := bustest.NewServer(b, bustest.Options{})
			edgeBus := bustest.Connect(b, srv, bustest.Options{})
			workerBus := bustest.Connect(b, srv, bustest.Options{})
			h := &harness{t: b, srv: srv, b: edgeBus}
			h.startRunner(workerBus, workers.EchoDefinition("echo"))
			cfg := edgeConfigForBench()
			if c.audit {
				cfg.Trust.Levels = map[string]edge.TrustLevel{edge.TrustLocal: {Audit: true}}
			}
			url := h.startEdge(edgeBus, cfg)
			h.waitAgent(url, "echo")
			client := &http.Client{}
			postBench(b, client, url+"/agents/echo") // warm up
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				postBench(b, client, url+"/agents/echo")
			}
		})
	}
}
