package discovery

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/a2abus/a2abus/bus/tracing"
)

// The gRPC wire's part of tracing: what guardedTransport does for the
// HTTP wires, a call made under a span gets its client span (the RPC
// conventions' lf.a2a.v1.A2AService/<method>) and carries the trace
// context in its metadata, where the other end's gRPC binding reads it as
// an HTTP binding reads the traceparent header.

// traceUnary is the unary client interceptor of the gRPC wire.
func traceUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx, span, ok := startGRPCClient(ctx, method)
	if !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	endGRPCClient(span, err)
	return err
}

// traceStream is the streaming client interceptor: the span lasts until
// the stream's last message (or its error) is received, or its context
// ends (a caller that stops reading).
func traceStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	ctx, span, ok := startGRPCClient(ctx, method)
	if !ok {
		return streamer(ctx, desc, cc, method, opts...)
	}
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		endGRPCClient(span, err)
		return nil, err
	}
	ts := &tracedStream{ClientStream: s, span: span}
	context.AfterFunc(ctx, func() { ts.end(ctx.Err()) })
	return ts, nil
}

type tracedStream struct {
	grpc.ClientStream
	span trace.Span
	once sync.Once
}

func (s *tracedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if errors.Is(err, io.EOF) {
		s.end(nil)
	} else if err != nil {
		s.end(err)
	}
	return err
}

// end ends the span once, with how the stream ended.
func (s *tracedStream) end(err error) {
	s.once.Do(func() { endGRPCClient(s.span, err) })
}

func startGRPCClient(ctx context.Context, method string) (context.Context, trace.Span, bool) {
	if !tracing.Enabled() || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil, false
	}
	name := strings.TrimPrefix(method, "/")
	ctx, span := tracing.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.RPCSystemNameGRPC, semconv.RPCMethod(name)))
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	kv := make([]string, 0, 2*len(carrier))
	for k, v := range carrier {
		kv = append(kv, k, v)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...), span, true
}

func endGRPCClient(span trace.Span, err error) {
	code := status.Code(err)
	span.SetAttributes(semconv.RPCResponseStatusCodeKey.String(code.String()))
	tracing.Fail(span, code.String(), err)
	span.End()
}
