package edge_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/a2abus/a2abus/bus/tracing/tracingtest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/grpcbinding"
	"github.com/a2abus/a2abus/edge/grpcbinding/a2apb"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// Each binding's call is a server span of the client's trace, named as
// the RPC conventions name lf.a2a.v1's methods whatever the binding, with
// its binding, agent and task, and the work it queues is the next hops of
// the same trace: publish, processing, the agent's run. A refused call's
// span says its error code.
func TestEveryBindingTracesItsCalls(t *testing.T) {
	rec := tracingtest.Record(t)
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
			got := named(rec.Trace(t, traceID, "the call's spans", tracingtest.Named("lf.a2a.v1.A2AService/SendMessage", "send a2a.intake.echo", "process a2a.work.echo", "invoke_agent echo")))
			call := got["lf.a2a.v1.A2AService/SendMessage"]
			if call.Parent().SpanID() != client || call.SpanKind() != trace.SpanKindServer {
				t.Errorf("the call's parent %s kind %v, want the client's %s, server", call.Parent().SpanID(), call.SpanKind(), client)
			}
			if tracingtest.Attr(call, "a2a.binding") != s.binding || tracingtest.Attr(call, "a2a.agent") != "echo" || tracingtest.Attr(call, "a2a.method") != "SendMessage" || tracingtest.Attr(call, "a2a.task.id") == "" {
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
	got := named(rec.Trace(t, traceID, "the call's spans", tracingtest.Named("lf.a2a.v1.A2AService/GetTask")))["lf.a2a.v1.A2AService/GetTask"]
	if got.Status().Code.String() != "Error" || tracingtest.Attr(got, "rpc.response.status_code") != "-32001" {
		t.Errorf("a task not found: status %v, code %q", got.Status(), tracingtest.Attr(got, "rpc.response.status_code"))
	}
}

// named is the spans by name.
func named(spans []sdktrace.ReadOnlySpan) map[string]sdktrace.ReadOnlySpan {
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		out[s.Name()] = s
	}
	return out
}
