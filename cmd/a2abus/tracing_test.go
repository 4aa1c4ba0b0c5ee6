package main

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: what a
// collector would be to the a2abus processes of a test. It keeps every
// span it is sent, with its resource's service name.
type otlpReceiver struct {
	url     string
	mu      sync.Mutex
	spans   []recvSpan
	changed chan struct{} // closed and replaced at each export
}

type recvSpan struct {
	service string
	*tracepb.Span
}

func (s recvSpan) id() string     { return hex.EncodeToString(s.SpanId) }
func (s recvSpan) parent() string { return hex.EncodeToString(s.ParentSpanId) }
func (s recvSpan) trace() string  { return hex.EncodeToString(s.TraceId) }

// attr is the span's attribute key as text ("" if absent).
func (s recvSpan) attr(key string) string {
	for _, kv := range s.Attributes {
		if kv.Key != key {
			continue
		}
		if _, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
			return fmt.Sprint(kv.Value.GetIntValue())
		}
		if _, ok := kv.Value.Value.(*commonpb.AnyValue_StringValue); ok {
			return kv.Value.GetStringValue()
		}
		return kv.Value.String()
	}
	return ""
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{changed: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = zr
		}
		raw, _ := io.ReadAll(body)
		var in coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &in); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		r.mu.Lock()
		for _, rs := range in.ResourceSpans {
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					r.spans = append(r.spans, recvSpan{service, sp})
				}
			}
		}
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.url = "http://" + ln.Addr().String()
	return r
}

// env is what an a2abus process needs to export to r, as service.
func (r *otlpReceiver) env(service string) []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + r.url, "OTEL_SERVICE_NAME=" + service, "OTEL_BSP_SCHEDULE_DELAY=50"}
}

// waitFor returns the spans of trace once done holds for them, failing
// the test after within.
func (r *otlpReceiver) waitFor(t *testing.T, trace string, within time.Duration, done func([]recvSpan) bool) []recvSpan {
	t.Helper()
	deadline := time.After(within)
	for {
		r.mu.Lock()
		var got []recvSpan
		for _, s := range r.spans {
			if s.trace() == trace {
				got = append(got, s)
			}
		}
		ch := r.changed
		r.mu.Unlock()
		if done(got) {
			return got
		}
		select {
		case <-ch:
		case <-deadline:
			var b strings.Builder
			for _, s := range got {
				fmt.Fprintf(&b, "  %s %q kind=%v id=%s parent=%s\n", s.service, s.Name, s.Kind, s.id(), s.parent())
			}
			t.Fatalf("trace %s never became what the test waits for; it has:\n%s", trace, b.String())
		}
	}
}

// find is the spans named name exported by service.
func find(spans []recvSpan, service, name string) []recvSpan {
	var out []recvSpan
	for _, s := range spans {
		if s.service == service && s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// sendTraced sends text to agent at base as A2A 1.0 JSON-RPC, with the
// client's traceparent, and returns the task.
func sendTraced(t *testing.T, url, traceparent, text string, blocking bool) schemas.Task {
	t.Helper()
	msg := schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)}}
	params := map[string]any{"message": msg, "configuration": map[string]any{"returnImmediately": !blocking}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		Result struct {
			Task schemas.Task `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.Result.Task.ID == "" {
		t.Fatalf("SendMessage: %s", raw)
	}
	return r.Result.Task
}

// One task sent by a client to a remote agent of one a2abus, which
// proxies it to a second a2abus: one trace, across the three processes,
// from the client's span through each edge's call, the work's publish
// and consumption, the agent's run and the HTTP call between them; the
// trace ids in the log lines; no message content in any attribute.
func TestTraceFollowsATaskThroughTwoA2abusProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	recv := startOTLPReceiver(t)
	dir := t.TempDir()
	extAddr, gwAddr := freeAddr(t), freeAddr(t)
	ext := startProcEnv(t, recv.env("ext"), "serve", "--listen", extAddr, "--data-dir", filepath.Join(dir, "ext"), "--nats-listen", "off")
	waitReady(t, ext, "http://"+extAddr)
	cfg := filepath.Join(dir, "gw.json")
	writeFile(t, cfg, fmt.Sprintf(`{"outbound": {"allowLoopback": true},
  "agents": [{"name": "far", "kind": "remote", "url": "http://%s/agents/echo", "checkEvery": "200ms"}]}`, extAddr))
	gw := startProcEnv(t, recv.env("gw"), "serve", "--listen", gwAddr, "--data-dir", filepath.Join(dir, "gw"), "--nats-listen", "off", "--config", cfg, "--log-level", "debug")
	base := "http://" + gwAddr
	waitReady(t, gw, base)
	waitAgents(t, base, "?kind=remote", "far online", func(l schemas.AgentList) bool { return health(l, "far") == schemas.HealthOnline })

	const traceID, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	const secret = "the-body-no-span-may-carry"
	task := sendTraced(t, base+"/agents/far", "00-"+traceID+"-"+clientSpan+"-01", secret, true)
	if task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("the proxied task ended %s", task.Status.State)
	}

	const call = "lf.a2a.v1.A2AService/SendMessage"
	// The external a2abus's server span ends after its answer is written,
	// later than its worker's spans, so it can reach the receiver in a
	// later export batch: the wait covers it too.
	extServed := func(s []recvSpan) bool {
		for _, sp := range s {
			if sp.service == "ext" && sp.Kind == tracepb.Span_SPAN_KIND_SERVER {
				return true
			}
		}
		return false
	}
	spans := recv.waitFor(t, traceID, 30*time.Second, func(s []recvSpan) bool {
		return len(find(s, "gw", call)) == 1 && len(find(s, "ext", "invoke_agent echo")) == 1 && len(find(s, "ext", "send a2a.intake.echo")) == 1 &&
			len(find(s, "gw", "invoke_agent far")) == 1 && len(find(s, "gw", "process a2a.work.far")) == 1 && extServed(s)
	})
	byID := map[string]recvSpan{}
	for _, s := range spans {
		byID[s.id()] = s
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), secret) {
				t.Errorf("span %q of %s carries the message's text in %s", s.Name, s.service, kv.Key)
			}
		}
	}
	one := func(service, name string) recvSpan {
		t.Helper()
		got := find(spans, service, name)
		if len(got) != 1 {
			t.Fatalf("%d spans %q from %s in the trace, want 1", len(got), name, service)
		}
		return got[0]
	}
	childOf := func(child, parent recvSpan) {
		t.Helper()
		if child.parent() != parent.id() {
			t.Errorf("%s's %q is a child of %s (%q), want of %q", child.service, child.Name, child.parent(), byID[child.parent()].Name, parent.Name)
		}
	}

	// The gateway: the client's span → the call → the publish → the
	// worker's processing (linked to the publish) → the agent's run →
	// its HTTP call to the external a2abus.
	gwCall := one("gw", call)
	if gwCall.parent() != clientSpan || gwCall.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("the gateway's call: parent %s kind %v, want the client's span %s, server", gwCall.parent(), gwCall.Kind, clientSpan)
	}
	for k, want := range map[string]string{"a2a.method": "SendMessage", "a2a.agent": "far", "a2a.binding": "jsonrpc", "rpc.system.name": "jsonrpc", "a2a.task.id": task.ID} {
		if got := gwCall.attr(k); got != want {
			t.Errorf("the gateway's call: %s = %q, want %q", k, got, want)
		}
	}
	gwSend := one("gw", "send a2a.intake.far")
	childOf(gwSend, gwCall)
	gwProcess := one("gw", "process a2a.work.far")
	childOf(gwProcess, gwSend)
	if len(gwProcess.Links) != 1 || hex.EncodeToString(gwProcess.Links[0].SpanId) != gwSend.id() {
		t.Errorf("the gateway's processing is not linked to the publish: %v", gwProcess.Links)
	}
	if gwSend.Kind != tracepb.Span_SPAN_KIND_PRODUCER || gwProcess.Kind != tracepb.Span_SPAN_KIND_CONSUMER {
		t.Errorf("publish kind %v, processing kind %v", gwSend.Kind, gwProcess.Kind)
	}
	if gwProcess.attr("a2abus.work.attempt") != "1" || gwProcess.attr("messaging.system") != "nats" {
		t.Errorf("processing attributes: attempt %q, system %q", gwProcess.attr("a2abus.work.attempt"), gwProcess.attr("messaging.system"))
	}
	gwRun := one("gw", "invoke_agent far")
	childOf(gwRun, gwProcess)
	var gwHTTP recvSpan
	for _, s := range spans {
		if s.service == "gw" && s.Kind == tracepb.Span_SPAN_KIND_CLIENT && s.parent() == gwRun.id() && s.Name == "POST" {
			gwHTTP = s
		}
	}
	if gwHTTP.Span == nil {
		t.Fatalf("the remote agent's run made no HTTP client span")
	}
	if !strings.HasPrefix(gwHTTP.attr("url.full"), "http://"+extAddr+"/agents/echo") {
		t.Errorf("the HTTP call's url.full %q", gwHTTP.attr("url.full"))
	}

	// The external a2abus: its call is the gateway's HTTP call's child,
	// and the same chain follows.
	var extCall recvSpan
	for _, s := range spans {
		if s.service == "ext" && s.Kind == tracepb.Span_SPAN_KIND_SERVER {
			extCall = s
		}
	}
	if extCall.Span == nil {
		t.Fatalf("the external a2abus made no server span in the trace")
	}
	if !strings.HasPrefix(extCall.Name, "lf.a2a.v1.A2AService/Send") || extCall.attr("a2a.agent") != "echo" {
		t.Errorf("the external a2abus's call: %q for agent %q", extCall.Name, extCall.attr("a2a.agent"))
	}
	childOf(extCall, gwHTTP)
	extSend := one("ext", "send a2a.intake.echo")
	childOf(extSend, extCall)
	extProcess := one("ext", "process a2a.work.echo")
	childOf(extProcess, extSend)
	childOf(one("ext", "invoke_agent echo"), extProcess)

	// The gateway's debug log of the call carries the trace.
	waitOutput(t, gw, "trace_id="+traceID, 10*time.Second)
}

// A worker killed in the middle of a task: the task's redelivered run is
// a second consumer span in the same trace, with its attempt, under the
// edge's publish.
func TestTraceOfARedeliveredRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	recv := startOTLPReceiver(t)
	dir := t.TempDir()
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	common := []string{"--ack-wait", "2s"}
	serve := startProcEnv(t, recv.env("edge"), append([]string{"serve", "--listen", httpAddr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", natsAddr, "--agent", "echo"}, common...)...)
	base := "http://" + httpAddr
	waitReady(t, serve, base)
	nats := "nats://" + natsAddr
	creds := servedCreds(filepath.Join(dir, "data"), bus.RoleWorker)
	worker := []string{"worker", "--nats", nats, "--nats-creds", creds, "--agent", "tck"}
	first := startProcEnv(t, recv.env("worker"), append(worker, common...)...)
	waitAgentCard(t, base, "tck")

	const traceID = "5cf92f3577b34da6a3ce929d0e0e4736"
	// The conformance agent holds this task WORKING for 4s.
	task := sendTraced(t, base+"/agents/tck", "00-"+traceID+"-00f067aa0ba902b7-01", "test-resubscribe-message-id-crash", false)
	waitTask(t, base, "tck", task.ID, 30*time.Second, func(t schemas.Task) bool { return t.Status.State == schemas.TaskStateWorking })
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.done
	first.done <- nil
	startProcEnv(t, recv.env("worker"), append(worker, common...)...)
	if done := waitTask(t, base, "tck", task.ID, 60*time.Second, func(t schemas.Task) bool { return t.Status.State.Terminal() }); done.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("state %s", done.Status.State)
	}

	spans := recv.waitFor(t, traceID, 30*time.Second, func(s []recvSpan) bool {
		for _, p := range find(s, "worker", "process a2a.work.tck") {
			if p.attr("a2abus.work.attempt") == "2" {
				return len(find(s, "edge", "send a2a.intake.tck")) == 1
			}
		}
		return false
	})
	send := find(spans, "edge", "send a2a.intake.tck")[0]
	for _, p := range find(spans, "worker", "process a2a.work.tck") {
		if p.parent() != send.id() {
			t.Errorf("attempt %s's processing is a child of %s, want the edge's publish %s", p.attr("a2abus.work.attempt"), p.parent(), send.id())
		}
	}
}

// Whether a process traces: the standard environment decides, the flag
// turns it on without an endpoint, the two off switches win, and an
// exporter or protocol a2abus does not have is refused with a message
// that says what it has.
func TestTracingIsDecidedByTheStandardEnvironment(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	on, off := Config{Tracing: true}, Config{}
	for _, c := range []struct {
		name string
		cfg  Config
		env  func(string) string
		want bool
	}{
		{"nothing set", off, env(), false},
		{"an endpoint", off, env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"), true},
		{"a traces endpoint", off, env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces"), true},
		{"the flag", on, env(), true},
		{"the SDK disabled", on, env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_SDK_DISABLED", "true"), false},
		{"no exporter", on, env("OTEL_TRACES_EXPORTER", "none"), false},
	} {
		if got := tracingWanted(c.cfg, c.env); got != c.want {
			t.Errorf("%s: tracing %v, want %v", c.name, got, c.want)
		}
	}
	for _, bad := range []struct {
		env  func(string) string
		says string
	}{
		{env("OTEL_TRACES_EXPORTER", "zipkin"), "OTLP only"},
		{env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"), "http/protobuf or grpc"},
	} {
		_, err := startTracing(t.Context(), on, "serve", bad.env, newLogger(Config{}, io.Discard))
		if err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("startTracing: %v, want an error saying %q", err, bad.says)
		}
	}
}
