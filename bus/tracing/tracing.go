// Package tracing is what every a2abus package shares to make
// OpenTelemetry spans: whether the process records them at all, its
// tracer, the W3C trace context as a2abus carries it (a request's
// traceparent header, a CloudEvent's traceparent attribute — the
// CloudEvents distributed-tracing extension — a task record's), the
// attribute names a2abus adds to the semantic conventions', and the span
// of an outgoing HTTP request.
//
// It is a leaf on the OpenTelemetry API alone. The SDK, its exporters and
// the OTEL_* environment are the process's (cmd/a2abus), which installs a
// tracer provider and then calls Enable. Until then every instrumented
// place checks Enabled first and does nothing else, so a process that
// traces nothing pays one atomic load per place, not the API's no-op
// spans and their attribute slices.
package tracing

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// SemconvVersion is the version of the OpenTelemetry semantic conventions
// the spans follow (HTTP, RPC and messaging; the GenAI attributes, which
// that release's Go package does not carry yet, are named as its
// specification names them).
const SemconvVersion = "1.43.0"

// instrumentation is the name every span's instrumentation scope carries.
const instrumentation = "github.com/a2abus/a2abus"

var enabled atomic.Bool

// Enable turns span recording on for the process, with the tracer
// provider and propagator already installed in the otel globals.
func Enable() { enabled.Store(true) }

// Disable turns it off again (a test's process, or a provider shut down).
func Disable() { enabled.Store(false) }

// Enabled reports whether the process records spans.
func Enabled() bool { return enabled.Load() }

// Tracer is the process's tracer for a2abus's spans.
func Tracer() trace.Tracer {
	return otel.Tracer(instrumentation, trace.WithSchemaURL(semconv.SchemaURL))
}

// traceContext is the W3C Trace Context propagator: what a2abus reads and
// writes itself (a CloudEvent attribute, a task record), whichever
// propagator the process installed for HTTP headers.
var traceContext propagation.TraceContext

// WithTraceparent returns ctx with the remote span context a W3C
// traceparent names as its parent, or ctx unchanged when tp is empty or
// malformed.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}

// Traceparent is the W3C traceparent of ctx's span, "" when it has none.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c["traceparent"]
}

// Parented is ctx with tp as its parent when ctx carries no span of its
// own: what a publish or a background job traces under.
func Parented(ctx context.Context, tp string) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return WithTraceparent(ctx, tp)
}

// The attributes a2abus adds beside the semantic conventions'. Values are
// names and ids, never a message's content or a credential.
const (
	// A2A: the operation (its A2A 1.0 name), the agent, the binding or
	// dialect it came through, the caller's tenant, the task.
	A2AMethod    = attribute.Key("a2a.method")
	A2AAgent     = attribute.Key("a2a.agent")
	A2ABinding   = attribute.Key("a2a.binding")
	A2ATenant    = attribute.Key("a2a.tenant")
	A2ATaskID    = attribute.Key("a2a.task.id")
	A2AContextID = attribute.Key("a2a.context.id")
	A2ATaskState = attribute.Key("a2a.task.state")
	// WorkAttempt is the delivery of a work item a worker runs (1 the
	// first); PushAttempt the attempt at one push notification.
	WorkAttempt  = attribute.Key("a2abus.work.attempt")
	PushAttempt  = attribute.Key("a2abus.push.attempt")
	PushConfigID = attribute.Key("a2abus.push.config_id")
	// AgentKind is the kind of agent a worker runs (echo, exec, remote…).
	AgentKind = attribute.Key("a2abus.agent.kind")
)

// The GenAI semantic conventions' attributes (development status), for
// the agent's run (invoke_agent) and the llm kind's calls (chat).
const (
	GenAIOperationName = attribute.Key("gen_ai.operation.name")
	GenAIProviderName  = attribute.Key("gen_ai.provider.name")
	GenAIAgentName     = attribute.Key("gen_ai.agent.name")
	GenAIRequestModel  = attribute.Key("gen_ai.request.model")
	GenAIResponseModel = attribute.Key("gen_ai.response.model")
	GenAIInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	GenAIOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
)

// Fail marks span as failed when err is set, with errType as its
// error.type and status description. Never the error's text: a transport
// error repeats the URL with its query (which may hold an API key), an
// agent's may quote what it was given.
func Fail(span trace.Span, errType string, err error) {
	if err == nil {
		return
	}
	span.SetAttributes(semconv.ErrorTypeKey.String(errType))
	span.SetStatus(codes.Error, errType)
}

// StartHTTPClient starts the client span of an outgoing HTTP request made
// under ctx's span, and returns the request to send — a copy carrying the
// trace context in the process's propagator's headers — and the function
// that ends the span with what came back. Without a span in ctx (a card
// fetch at start-up, a JWKS refresh) it starts none and returns req: such
// requests belong to no trace.
func StartHTTPClient(req *http.Request) (*http.Request, func(*http.Response, error)) {
	ctx := req.Context()
	if !Enabled() || !trace.SpanContextFromContext(ctx).IsValid() {
		return req, func(*http.Response, error) {}
	}
	u := req.URL
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(req.Method),
		semconv.URLFull(redactURL(u)),
		semconv.ServerAddress(u.Hostname()),
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		attrs = append(attrs, semconv.ServerPort(p))
	} else if u.Scheme == "https" {
		attrs = append(attrs, semconv.ServerPort(443))
	} else if u.Scheme == "http" {
		attrs = append(attrs, semconv.ServerPort(80))
	}
	ctx, span := Tracer().Start(ctx, req.Method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	out := req.Clone(ctx)
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(out.Header))
	return out, func(res *http.Response, err error) {
		switch {
		case err != nil:
			Fail(span, "transport", err)
		case res != nil:
			span.SetAttributes(semconv.HTTPResponseStatusCode(res.StatusCode))
			if res.StatusCode >= 400 {
				span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(res.StatusCode)))
				span.SetStatus(codes.Error, "")
			}
		}
		span.End()
	}
}

// redactURL is u as a span may record it: no user information and no
// query (which may carry an API key), as the HTTP conventions ask.
func redactURL(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return r.String()
}
