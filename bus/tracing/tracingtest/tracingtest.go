// Package tracingtest records the spans a test's process makes, with the
// OpenTelemetry SDK in memory: tracing on (bus/tracing) for the test, off
// again after it. It imports testing, so only tests may use it.
package tracingtest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2abus/a2abus/bus/tracing"
)

// Recorder keeps every span the process ends.
type Recorder struct {
	tp    *sdktrace.TracerProvider
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
	ended chan struct{} // closed and replaced at each span's end
}

// Record installs a tracer provider recording into the returned Recorder
// and the W3C trace-context propagator, and turns tracing on until the
// test ends. Tests that record must not run in parallel with others that
// trace (the provider is the process's).
func Record(t testing.TB) *Recorder {
	r := &Recorder{ended: make(chan struct{})}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(r.tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tracing.Enable()
	t.Cleanup(func() {
		tracing.Disable()
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	})
	return r
}

// Start starts a root span: what a client's own work would be.
func (r *Recorder) Start(name string) (context.Context, trace.Span) {
	return r.tp.Tracer("test").Start(context.Background(), name)
}

// Trace returns the ended spans of traceID once cond holds for them,
// failing the test (saying what it waited for) after 20s.
func (r *Recorder) Trace(t testing.TB, traceID trace.TraceID, what string, cond func([]sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		r.mu.Lock()
		var got []sdktrace.ReadOnlySpan
		for _, s := range r.spans {
			if s.SpanContext().TraceID() == traceID {
				got = append(got, s)
			}
		}
		ch := r.ended
		r.mu.Unlock()
		if cond(got) {
			return got
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("waiting for %s; trace %s has %v", what, traceID, Names(got))
		}
	}
}

// Named is a condition of Trace: a span of each name has ended.
func Named(names ...string) func([]sdktrace.ReadOnlySpan) bool {
	return func(spans []sdktrace.ReadOnlySpan) bool {
		have := Names(spans)
		for _, n := range names {
			if !slices.Contains(have, n) {
				return false
			}
		}
		return true
	}
}

// Names is the spans' names.
func Names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}

// ByName is the last ended span of name, nil if none.
func ByName(spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	var out sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = s
		}
	}
	return out
}

// Attr is the span's attribute key as text, "" if it has none.
func Attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// OnStart, OnEnd, Shutdown and ForceFlush make the Recorder the
// provider's span processor.
func (r *Recorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (r *Recorder) OnEnd(s sdktrace.ReadOnlySpan) {
	r.mu.Lock()
	r.spans = append(r.spans, s)
	close(r.ended)
	r.ended = make(chan struct{})
	r.mu.Unlock()
}

func (r *Recorder) Shutdown(context.Context) error   { return nil }
func (r *Recorder) ForceFlush(context.Context) error { return nil }
