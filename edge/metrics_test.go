package edge_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// GET /metrics shows what the process did, in the Prometheus text format:
// requests by binding, method and result code (an unknown method does not
// become a label), unary durations, open streams, and what the bus
// recorded for the same tasks (work acked, tasks finished).
func TestMetricsEndpoint(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, edge: edge.Config{OpenAdmin: true}})
	res := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: ptr(userMessage("count me"))}))
	mustError(t, h.call("echo", "GetTask", map[string]any{"id": schemas.NewID()}), schemas.ErrTaskNotFound)
	mustError(t, h.call("echo", "NoSuchMethod/"+schemas.NewID(), map[string]any{}), schemas.ErrMethodNotFound)
	if r := h.rest("GET", "/agents/echo/tasks/"+res.Task.ID, "", ""); r.status != 200 {
		t.Fatalf("REST GetTask: %d %s", r.status, r.body)
	}
	s, r := openStream(t, h.url, "echo", "SendStreamingMessage", send(userMessage("stream me"), false), "")
	if r != nil {
		t.Fatalf("no stream: %+v", r.Error)
	}
	s.all() // to the end of the stream

	// The worker acks a task's work just after storing its end, and may do
	// so after the client has its answer: read until both acks are in.
	var text string
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(h.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
			t.Fatalf("GET /metrics: %d %s", resp.StatusCode, ct)
		}
		text = string(body)
		if strings.Contains(text, `a2a_work_messages_total{agent="echo",outcome="ack"} 2`+"\n") || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling another goroutine's progress
	}
	for _, want := range []string{
		`a2a_rpc_requests_total{binding="jsonrpc",code="0",method="SendMessage"} 1`,
		`a2a_rpc_requests_total{binding="jsonrpc",code="-32001",method="GetTask"} 1`,
		`a2a_rpc_requests_total{binding="jsonrpc",code="-32601",method="unknown"} 1`,
		`a2a_rpc_requests_total{binding="jsonrpc",code="0",method="SendStreamingMessage"} 1`,
		`a2a_rpc_requests_total{binding="rest",code="0",method="GetTask"} 1`,
		`a2a_rpc_request_duration_seconds_count{binding="jsonrpc",method="SendMessage"} 1`,
		`a2a_sse_streams_active 0`,
		`a2a_tasks_finished_total{agent="echo",state="TASK_STATE_COMPLETED"} 2`,
		`a2a_work_messages_total{agent="echo",outcome="ack"} 2`,
		"# TYPE a2a_bus_messages_sent_total counter",
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(text, "NoSuchMethod") || strings.Contains(text, res.Task.ID) {
		t.Error("a client-chosen method name or a task id became a label value")
	}
	if strings.Contains(text, `a2a_rpc_request_duration_seconds_count{binding="jsonrpc",method="SendStreamingMessage"}`) {
		t.Error("a stream's lifetime was recorded as a request duration")
	}
}
