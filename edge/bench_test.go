package edge_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// sendBody is the SendMessage request both benchmarks answer.
var sendBody = []byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hello benchmark"}]}}}`)

func postBench(b *testing.B, c *http.Client, url string) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(sendBody))
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkSendMessage measures a blocking SendMessage round trip through
// edge → JetStream → echo worker → KV → edge, next to a bare net/http
// handler that decodes the same request and answers the same JSON in the same
// process (the floor set by HTTP and JSON alone). Compare the two in one run:
//
//	go test -run '^$' -bench SendMessage -benchmem ./edge/
//
// The a2abus case also reports the bus messages one task costs on the edge's
// and the worker's connections (bus-msgs/op: requests and publishes sent).
func BenchmarkSendMessage(b *testing.B) {
	b.Run("bare-http", func(b *testing.B) {
		task := schemas.Task{ID: schemas.NewID(), ContextID: schemas.NewID(), Status: schemas.TaskStatus{State: schemas.TaskStateCompleted, Timestamp: schemas.Now()}}
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				ID     json.RawMessage            `json:"id"`
				Params schemas.SendMessageRequest `json:"params"`
			}
			body, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(body, &req); err != nil || req.Params.Validate() != nil {
				http.Error(w, "bad", 400)
				return
			}
			t := task
			t.History = []schemas.Message{*req.Params.Message}
			t.Artifacts = []schemas.Artifact{{ArtifactID: "a", Parts: req.Params.Message.Parts}}
			out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": schemas.SendMessageResponse{Task: &t}})
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(out)
		}))
		defer ts.Close()
		c := ts.Client()
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			postBench(b, c, ts.URL)
		}
	})
	b.Run("a2abus", func(b *testing.B) {
		srv := bustest.NewServer(b, bustest.Options{})
		edgeBus := bustest.Connect(b, srv, bustest.Options{})
		workerBus := bustest.Connect(b, srv, bustest.Options{})
		h := &harness{t: b, srv: srv, b: edgeBus}
		h.startRunner(workerBus, workers.EchoDefinition("echo"))
		url := h.startEdge(edgeBus, edgeConfigForBench())
		h.waitAgent(url, "echo")
		c := &http.Client{}
		postBench(b, c, url+"/agents/echo") // warm up: consumer bound, connections open
		e0, w0 := bustest.Stats(edgeBus), bustest.Stats(workerBus)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			postBench(b, c, url+"/agents/echo")
		}
		b.StopTimer()
		e1, w1 := bustest.Stats(edgeBus), bustest.Stats(workerBus)
		n := float64(b.N)
		b.ReportMetric(float64(e1.OutMsgs-e0.OutMsgs)/n, "edge-bus-msgs/op")
		b.ReportMetric(float64(w1.OutMsgs-w0.OutMsgs)/n, "worker-bus-msgs/op")
	})
}

// BenchmarkSendMessageParallel is the throughput view: many clients at once.
//
//	go test -run '^$' -bench SendMessageParallel -benchmem ./edge/
func BenchmarkSendMessageParallel(b *testing.B) {
	srv := bustest.NewServer(b, bustest.Options{})
	edgeBus := bustest.Connect(b, srv, bustest.Options{})
	workerBus := bustest.Connect(b, srv, bustest.Options{})
	h := &harness{t: b, srv: srv, b: edgeBus}
	h.startRunner(workerBus, workers.EchoDefinition("echo"))
	url := h.startEdge(edgeBus, edgeConfigForBench())
	h.waitAgent(url, "echo")
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	c := &http.Client{Transport: tr}
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			postBench(b, c, url+"/agents/echo")
		}
	})
	b.StopTimer()
	tr.CloseIdleConnections()
}

func edgeConfigForBench() edge.Config { return edge.Config{} }

// BenchmarkLargeBody is the memory a large request costs: bytes allocated
// in the process (edge, bus client, embedded server and echo worker) per
// byte of body, for a body the part cap refuses and for the largest text
// and raw messages a task takes. Every copy of the body shows here.
//
//	go test -run '^$' -bench LargeBody -benchmem ./edge/
func BenchmarkLargeBody(b *testing.B) {
	h := newHarness(b, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	url := h.url + "/agents/echo"
	raw := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 300<<10))
	for _, bc := range []struct {
		name, parts string
		refused     bool
	}{
		{"refused-4MiB-text", `{"text":"` + strings.Repeat("a", 4<<20-300) + `"}`, true},
		{"refused-4MiB-small-values", `{"text":"x"}],"metadata":{"k":[` + strings.Repeat("0,", 2<<20-200) + `0]},"extensions":[`, true},
		{"accepted-300KiB-text", `{"text":"` + strings.Repeat("b", 300<<10) + `"}`, false},
		{"accepted-300KiB-raw", `{"raw":"` + raw + `","mediaType":"application/octet-stream"}`, false},
	} {
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[` + bc.parts + `]}}}`)
		b.Run(bc.name, func(b *testing.B) {
			c := &http.Client{}
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			b.ResetTimer()
			for b.Loop() {
				resp, err := c.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if bytes.Contains(out, []byte(`"code":-32602`)) != bc.refused || !bytes.Contains(out, []byte(`"jsonrpc"`)) {
					b.Fatalf("unexpected answer %.300s", out)
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N)/float64(len(body)), "B/body-B")
		})
	}
}
