package edge_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
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

// exposition is one scrape of /metrics, parsed by the official parser.
type exposition map[string]*dto.MetricFamily

// scrapeMetrics GETs /metrics at base with key (an admin's) and parses the
// whole answer, names held to the classic rules every scraper accepts.
func scrapeMetrics(t *testing.T, base, key string) exposition {
	t.Helper()
	status, header, body := as(t, key, "GET", base+"/metrics", "", "")
	if status != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: %d %s %s", status, header.Get("Content-Type"), body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return fams
}

// value is the series of family name with exactly the label values
// given (a histogram's: its count), and whether there is one.
func (e exposition) value(name string, labels ...string) (float64, bool) {
	f := e[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := len(got) == len(labels)/2
		for i := 0; match && i+1 < len(labels); i += 2 {
			match = got[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// at is value, 0 for a series not (yet) exposed.
func (e exposition) at(name string, labels ...string) float64 {
	v, _ := e.value(name, labels...)
	return v
}

// An edge's /metrics parses with the official Prometheus parser and
// carries the Go runtime's and the process's families, and the families
// operators watch move under load: an agent's backlog (pending while no
// worker takes its work, in flight while a worker holds it), the age of
// its oldest pending item and its workers, task durations by agent and
// final state, refused credentials by scheme, and rate-limit refusals by
// limit, each counting exactly what clients were refused.
func TestMetricsMoveUnderLoad(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{
		{Key: aliceKey, Principal: "alice"}, {Key: bobKey, Principal: "bob"}, {Key: opsKey, Principal: "ops", Admin: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	slow := newBlocker()
	echo := workers.EchoDefinition("echo")
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{echo, {Name: "slow", Agent: slow}},
		edge: edge.Config{Auth: a, Limits: edge.LimitsConfig{
			// bob and the side doors' addresses at 1 a second; alice and
			// the scrapes free.
			Default:    edge.Limits{Rate: 1, Burst: 2},
			Principals: map[string]edge.Limits{"alice": {}, "ops": {}},
		}},
	})
	h.idleAgent("queue")

	before := scrapeMetrics(t, h.url, opsKey)
	for _, name := range []string{"go_goroutines", "go_gc_duration_seconds", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total", "a2a_sse_streams_active", "a2a_bus_messages_sent_total"} {
		if before[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if runtime.GOOS == "linux" {
		for _, name := range []string{"process_resident_memory_bytes", "process_open_fds"} {
			if v, ok := before.value(name); !ok || v <= 0 {
				t.Errorf("%s = %v, %v", name, v, ok)
			}
		}
	}
	if got := before.at("a2a_agent_workers", "agent", "echo"); got != 1 {
		t.Errorf("a2a_agent_workers{echo} = %v before a second runner, want 1", got)
	}

	// The load.
	rpc := func(key, agent string, req any) (int, []byte) {
		status, _, body := as(t, key, "POST", h.url+"/agents/"+agent, "application/json", rpcBody(1, "SendMessage", req))
		return status, body
	}
	for range 3 {
		if status, body := rpc(aliceKey, "echo", send(userMessage("hi"), false)); status != http.StatusOK || !bytes.Contains(body, []byte("TASK_STATE_COMPLETED")) {
			t.Fatalf("echo: %d %s", status, body)
		}
	}
	for range 3 {
		if status, body := rpc(aliceKey, "queue", send(userMessage("wait"), true)); status != http.StatusOK || !bytes.Contains(body, []byte("TASK_STATE_SUBMITTED")) {
			t.Fatalf("queue: %d %s", status, body)
		}
	}
	if status, body := rpc(aliceKey, "slow", send(userMessage("hold"), true)); status != http.StatusOK {
		t.Fatalf("slow: %d %s", status, body)
	}
	<-slow.started // its worker holds the work

	// Refused credentials: a wrong key at the front door (JSON-RPC
	// answers −31401 with HTTP 200) and at an admin side door, both
	// presented as Bearer, none at all; an admin route refusing a known
	// principal is authorisation, and a public route that reads no
	// credential refuses nothing (the address flood below), not counted.
	if status, body := rpc("wrong-key-0123456789abcdef", "echo", send(userMessage("x"), false)); status != http.StatusOK || !bytes.Contains(body, []byte("-31401")) {
		t.Fatalf("wrong key: %d %s", status, body)
	}
	if status, _, _ := as(t, "wrong-key-0123456789abcdef", "GET", h.url+"/metrics", "", ""); status != http.StatusUnauthorized {
		t.Fatalf("wrong key at /metrics: %d", status)
	}
	if status, body := rpc("", "echo", send(userMessage("x"), false)); status != http.StatusOK || !bytes.Contains(body, []byte("-31401")) {
		t.Fatalf("no key: %d %s", status, body)
	}
	if status, _, _ := as(t, bobKey, "GET", h.url+"/metrics", "", ""); status != http.StatusForbidden {
		t.Fatalf("bob at /metrics: %d", status)
	}

	// Floods: bob over his rate at the front door (HTTP+JSON, so a
	// refusal is a 429), an address over the default rate at a side door.
	flood := func(key, url string) (refused int) {
		for range 8 {
			if status, _, _ := as(t, key, "GET", url, "", ""); status == http.StatusTooManyRequests {
				refused++
			}
		}
		if refused == 0 {
			t.Fatalf("8 requests at once to %s, none refused", url)
		}
		return refused
	}
	callerRefused := flood(bobKey, h.url+"/agents/echo/tasks/"+schemas.NewID())
	addressRefused := flood("", h.url+"/a2a/agents")

	h.startRunner(h.b, echo)

	// The backlog gauges are read at most every few seconds; the rest
	// move at once.
	var after exposition
	for deadline := time.Now().Add(20 * time.Second); ; {
		after = scrapeMetrics(t, h.url, opsKey)
		if after.at("a2a_agent_backlog_pending", "agent", "queue") == 3 && after.at("a2a_agent_backlog_in_flight", "agent", "slow") == 1 &&
			after.at("a2a_agent_workers", "agent", "echo") == 2 &&
			after.at("a2a_task_duration_seconds", "agent", "echo", "state", "TASK_STATE_COMPLETED") >= before.at("a2a_task_duration_seconds", "agent", "echo", "state", "TASK_STATE_COMPLETED")+3 {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling the gauges' next reading
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"a2a_agent_backlog_pending", []string{"agent", "queue"}, 3},
		{"a2a_agent_backlog_in_flight", []string{"agent", "queue"}, 0},
		{"a2a_agent_backlog_redelivered", []string{"agent", "queue"}, 0},
		{"a2a_agent_backlog_pending", []string{"agent", "slow"}, 0},
		{"a2a_agent_backlog_in_flight", []string{"agent", "slow"}, 1},
		{"a2a_agent_backlog_oldest_age_seconds", []string{"agent", "slow"}, 0},
		{"a2a_agent_backlog_pending", []string{"agent", "echo"}, 0},
		{"a2a_agent_workers", []string{"agent", "echo"}, 2},
		{"a2a_agent_workers", []string{"agent", "queue"}, 1},
		{"a2a_task_duration_seconds", []string{"agent", "echo", "state", "TASK_STATE_COMPLETED"}, before.at("a2a_task_duration_seconds", "agent", "echo", "state", "TASK_STATE_COMPLETED") + 3},
		{"a2a_tasks_finished_total", []string{"agent", "echo", "state", "TASK_STATE_COMPLETED"}, before.at("a2a_tasks_finished_total", "agent", "echo", "state", "TASK_STATE_COMPLETED") + 3},
		{"a2a_auth_failures_total", []string{"scheme", "bearer", "reason", "invalid"}, before.at("a2a_auth_failures_total", "scheme", "bearer", "reason", "invalid") + 2},
		{"a2a_auth_failures_total", []string{"scheme", "none", "reason", "missing"}, before.at("a2a_auth_failures_total", "scheme", "none", "reason", "missing") + 1},
		{"a2a_rate_limited_total", []string{"limit", "caller"}, before.at("a2a_rate_limited_total", "limit", "caller") + float64(callerRefused)},
		{"a2a_rate_limited_total", []string{"limit", "address"}, before.at("a2a_rate_limited_total", "limit", "address") + float64(addressRefused)},
		{"a2a_sse_streams_active", nil, 0},
	} {
		if got, ok := after.value(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (exposed: %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if age := after.at("a2a_agent_backlog_oldest_age_seconds", "agent", "queue"); age <= 0 || age > 60 {
		t.Errorf("the oldest pending item of queue is %v s old", age)
	}
}
