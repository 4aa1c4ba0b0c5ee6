package discovery_test

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2abus/a2abus/bus/tracing"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
)

// ended keeps the spans the process ends (read once the call that made
// them has returned: the client's span ends before its call returns, the
// server's before its answer is written).
type ended struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (e *ended) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (e *ended) OnEnd(s sdktrace.ReadOnlySpan) {
	e.mu.Lock()
	e.spans = append(e.spans, s)
	e.mu.Unlock()
}
func (e *ended) Shutdown(context.Context) error   { return nil }
func (e *ended) ForceFlush(context.Context) error { return nil }

func (e *ended) of(traceID trace.TraceID) []sdktrace.ReadOnlySpan {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []sdktrace.ReadOnlySpan
	for _, s := range e.spans {
		if s.SpanContext().TraceID() == traceID {
			out = append(out, s)
		}
	}
	return out
}

// A call made under a span, over each wire (JSON-RPC, HTTP+JSON, gRPC),
// is a client span of that span's trace that carries the trace to the
// agent it calls: the edge's server span is the client span's child.
func TestEveryWireCarriesTheTrace(t *testing.T) {
	rec := &ended{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tracing.Enable()
	t.Cleanup(func() { tracing.Disable(); otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	srv := startEdge(t, edge.Config{}, nil)
	for _, ep := range []discovery.Endpoint{
		srv.at(discovery.Endpoint{Binding: schemas.BindingJSONRPC, Version: "1.0"}, "echo"),
		srv.at(discovery.Endpoint{Binding: schemas.BindingHTTPJSON, Version: "1.0"}, "echo"),
		srv.at(discovery.Endpoint{Binding: schemas.BindingGRPC, Version: "1.0"}, "echo"),
	} {
		t.Run(ep.Binding, func(t *testing.T) {
			c, err := discovery.NewClient(ep, loopback())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, root := tp.Tracer("test").Start(context.Background(), "the caller's work")
			if _, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("traced")}); err != nil {
				t.Fatal(err)
			}
			root.End()
			var client, server sdktrace.ReadOnlySpan
			for _, s := range rec.of(root.SpanContext().TraceID()) {
				switch {
				case s.SpanKind() == trace.SpanKindClient && s.Parent().SpanID() == root.SpanContext().SpanID():
					client = s
				case s.SpanKind() == trace.SpanKindServer:
					server = s
				}
			}
			if client == nil || server == nil {
				t.Fatalf("client span %v, server span %v in the caller's trace", client != nil, server != nil)
			}
			if server.Parent().SpanID() != client.SpanContext().SpanID() || server.Name() != "lf.a2a.v1.A2AService/SendMessage" {
				t.Errorf("the edge's span %q is a child of %s, want of the client span %q (%s)", server.Name(), server.Parent().SpanID(), client.Name(), client.SpanContext().SpanID())
			}
		})
	}
}
