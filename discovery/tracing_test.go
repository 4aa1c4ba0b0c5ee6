package discovery_test

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2abus/a2abus/bus/tracing/tracingtest"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
)

// A call made under a span, over each wire (JSON-RPC, HTTP+JSON, gRPC),
// is a client span of that span's trace that carries the trace to the
// agent it calls: the edge's server span is the client span's child.
func TestEveryWireCarriesTheTrace(t *testing.T) {
	rec := tracingtest.Record(t)

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
			ctx, root := rec.Start("the caller's work")
			if _, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("traced")}); err != nil {
				t.Fatal(err)
			}
			root.End()
			var client, server sdktrace.ReadOnlySpan
			got := rec.Trace(t, root.SpanContext().TraceID(), "the edge's span", tracingtest.Named("lf.a2a.v1.A2AService/SendMessage"))
			for _, s := range got {
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
