package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2abus/a2abus/bus/tracing"
	"github.com/a2abus/a2abus/discovery"
)

// The process's OpenTelemetry tracing: whether it is on, its exporter and
// resource, from the standard OTEL_* environment (the SDK and exporters
// read the rest of it themselves: OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
// _INSECURE and _CERTIFICATE, OTEL_TRACES_SAMPLER and its argument,
// OTEL_BSP_*, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES). Off, nothing
// is installed and every instrumented place skips its span (see
// bus/tracing).

// tracingWanted says whether the process traces, and why not when the
// operator may have expected it to.
func tracingWanted(cfg Config, getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "none":
		return false
	case "", "otlp":
	default:
		// Only OTLP is built in; another name is a mistake to report,
		// which startTracing does.
		return true
	}
	return cfg.Tracing || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// startTracing installs the tracer provider of the process (OTLP over
// HTTP/protobuf by default, or gRPC as OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
// or OTEL_EXPORTER_OTLP_PROTOCOL says), the W3C trace-context and baggage
// propagators, and turns the process's spans on. The returned function
// flushes what is buffered and stops it, within a few seconds.
func startTracing(ctx context.Context, cfg Config, role string, getenv func(string) string, log *slog.Logger) (func(), error) {
	if exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp != "" && exp != "otlp" {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: a2abus exports traces over OTLP only (otlp, or none to turn tracing off)", exp)
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exporter sdktrace.SpanExporter
	var err error
	switch strings.ToLower(strings.TrimSpace(protocol)) {
	case "", "http/protobuf":
		protocol = "http/protobuf"
		exporter, err = otlptracehttp.New(ctx)
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTLP protocol %q: a2abus exports traces with http/protobuf or grpc", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("the OTLP trace exporter: %w", err)
	}
	// The process's own attributes first, so OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES (WithFromEnv, later) win over them.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("a2abus"), semconv.ServiceVersion(discovery.Version), attribute.String("a2abus.role", role)),
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID(),
		resource.WithFromEnv())
	if err != nil {
		log.Warn("tracing: part of the resource could not be read", "err", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing: export failed", "err", err) }))
	tracing.Enable()
	log.Info("tracing on", "protocol", protocol, "semconv", tracing.SemconvVersion)
	return func() {
		tracing.Disable()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("tracing: flushing spans at exit failed", "err", err)
		}
	}, nil
}

// traceHandler puts the ids of the span a log line was written under
// (slog's ...Context methods) on the line, as trace_id and span_id, so
// logs and traces of one call can be joined.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if tracing.Enabled() {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(as)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}
