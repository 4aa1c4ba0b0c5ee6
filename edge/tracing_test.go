package edge_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/a2abus/a2abus/bus/tracing"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/grpcbinding"
	"github.com/a2abus/a2abus/edge/grpcbinding/a2apb"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// spanSink keeps the spans the process ends, and wakes whoever waits for
// one.
type spanSink struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
	ended chan struct{}
}

func (s *spanSink) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (s *spanSink) OnEnd(sp sdktrace.ReadOnlySpan) {
	s.mu.Lock()
	s.spans = append(s.spans, sp)
	close(s.ended)
	s.ended = make(chan struct{})
	s.mu.Unlock()
}
func (s *spanSink) Shutdown(context.Context) error   { return nil }
func (s *spanSink) ForceFlush(context.Context) error { return nil }

// traceInProcess turns tracing on for the test, recording into the
// returned sink.
func traceInProcess(t *testing.T) *spanSink {
	sink := &spanSink{ended: make(chan struct{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sink))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tracing.Enable()
	t.Cleanup(func() {
		tracing.Disable()
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	})
	return sink
}

// wait returns the spans of trace once there is one named name of each
// names, failing after a while.
func (s *spanSink) wait(t *testing.T, traceID trace.TraceID, names ...string) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		got := map[string]sdktrace.ReadOnlySpan{}
		for _, sp := range s.spans {
			if sp.SpanContext().TraceID() == traceID {
				got[sp.Name()] = sp
			}
		}
		ch := s.ended
		s.mu.Unlock()
		all := true
		for _, n := range names {
			if _, ok := got[n]; !ok {
				all = false
			}
		}
		if all {
			return got
		}
		select {
		case <-ch:
		case <-deadline:
			have := make([]string, 0, len(got))
			for n := range got {
				have = append(have, n)
			}
			t.Fatalf("trace %s has spans %v, want %v", traceID, have, names)
		}
	}
}

func attrOf(sp sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range sp.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// Each binding's call is a server span of the client's trace, named as
// the RPC conventions name lf.a2a.v1's methods whatever the binding, with
// its binding, agent and task, and the work it queues is the next hops of
// the same trace: publish, processing, the agent's run. A refused call's
// span says its error code.
func TestEveryBindingTracesItsCalls(t *testing.T) {
	sink := traceInProcess(t)
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, edge: edge.Config{DefaultAgent: "echo"}})

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gsrv := grpcbinding.NewServer(h.edges[0].InProcess("grpc"), grpcbinding.Options{MaxMessageBytes: 1 << 20})
	served := make(chan error, 1)
	go func() { served <- gsrv.Serve(l) }()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); gsrv.Stop(time.Second); <-served })
	gc := a2apb.NewA2AServiceClient(conn)

	post := func(path, body, tp string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", h.url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
		req.Header.Set("traceparent", tp)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return string(raw)
	}
	const msg = `{"message":{"role":"ROLE_USER","messageId":"` + "%s" + `","parts":[{"text":"hi"}]}}`
	sends := []struct {
		binding string
		send    func(tp string)
	}{
		{"jsonrpc", func(tp string) {
			post("/agents/echo", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":`+strings.Replace(msg, "%s", schemas.NewID(), 1)+`}`, tp)
		}},
		{"rest", func(tp string) { post("/agents/echo/message:send", strings.Replace(msg, "%s", schemas.NewID(), 1), tp) }},
		{"grpc", func(tp string) {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", tp)
			if _, err := gc.SendMessage(ctx, &a2apb.SendMessageRequest{Tenant: schemas.AgentTenant("", "echo"), Message: &a2apb.Message{MessageId: schemas.NewID(),
				Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hi"}}}}}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for i, s := range sends {
		t.Run(s.binding, func(t *testing.T) {
			traceID := trace.TraceID{0xa2, byte(i + 1)}
			client := trace.SpanID{0xc1, byte(i + 1)}
			s.send("00-" + traceID.String() + "-" + client.String() + "-01")
			got := sink.wait(t, traceID, "lf.a2a.v1.A2AService/SendMessage", "send a2a.intake.echo", "process a2a.work.echo", "invoke_agent echo")
			call := got["lf.a2a.v1.A2AService/SendMessage"]
			if call.Parent().SpanID() != client || call.SpanKind() != trace.SpanKindServer {
				t.Errorf("the call's parent %s kind %v, want the client's %s, server", call.Parent().SpanID(), call.SpanKind(), client)
			}
			if attrOf(call, "a2a.binding") != s.binding || attrOf(call, "a2a.agent") != "echo" || attrOf(call, "a2a.method") != "SendMessage" || attrOf(call, "a2a.task.id") == "" {
				t.Errorf("the call's attributes: %v", call.Attributes())
			}
			chain := []string{"lf.a2a.v1.A2AService/SendMessage", "send a2a.intake.echo", "process a2a.work.echo", "invoke_agent echo"}
			for k := 1; k < len(chain); k++ {
				if got[chain[k]].Parent().SpanID() != got[chain[k-1]].SpanContext().SpanID() {
					t.Errorf("%q is not a child of %q", chain[k], chain[k-1])
				}
			}
		})
	}

	// A refused call: its span has the error's code.
	traceID := trace.TraceID{0xa2, 0xee}
	post("/agents/echo", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"`+schemas.NewID()+`"}}`, "00-"+traceID.String()+"-"+trace.SpanID{1}.String()+"-01")
	got := sink.wait(t, traceID, "lf.a2a.v1.A2AService/GetTask")["lf.a2a.v1.A2AService/GetTask"]
	if got.Status().Code.String() != "Error" || attrOf(got, "rpc.response.status_code") != "-32001" {
		t.Errorf("a task not found: status %v, code %q", got.Status(), attrOf(got, "rpc.response.status_code"))
	}
}
