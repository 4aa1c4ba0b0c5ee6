package workers_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/bus/tracing"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// spans keeps the spans the process ends and wakes whoever waits.
type spans struct {
	mu    sync.Mutex
	all   []sdktrace.ReadOnlySpan
	ended chan struct{}
}

func (s *spans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (s *spans) OnEnd(sp sdktrace.ReadOnlySpan) {
	s.mu.Lock()
	s.all = append(s.all, sp)
	close(s.ended)
	s.ended = make(chan struct{})
	s.mu.Unlock()
}
func (s *spans) Shutdown(context.Context) error   { return nil }
func (s *spans) ForceFlush(context.Context) error { return nil }

// traced turns tracing on for the test and returns its spans and a root
// span's context to work under.
func traced(t *testing.T) (*spans, context.Context, trace.Span) {
	s := &spans{ended: make(chan struct{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tracing.Enable()
	t.Cleanup(func() { tracing.Disable(); otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })
	ctx, root := tp.Tracer("test").Start(context.Background(), "the client's request")
	return s, ctx, root
}

// until returns the spans of trace once cond holds for them.
func (s *spans) until(t *testing.T, traceID trace.TraceID, what string, cond func([]sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		var got []sdktrace.ReadOnlySpan
		for _, sp := range s.all {
			if sp.SpanContext().TraceID() == traceID {
				got = append(got, sp)
			}
		}
		ch := s.ended
		s.mu.Unlock()
		if cond(got) {
			return got
		}
		select {
		case <-ch:
		case <-deadline:
			var names []string
			for _, sp := range got {
				names = append(names, sp.Name())
			}
			t.Fatalf("waiting for %s; the trace has %v", what, names)
		}
	}
}

func attr(sp sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range sp.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// A task's push notifications are part of its trace: each attempt is a
// span with its number, around the POST's client span, and the webhook
// is sent the trace context.
func TestPushAttemptsAreTraced(t *testing.T) {
	rec, ctx, root := traced(t)
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, steps(1), workers.Options{})
	startSender(t, b, workers.PushOptions{Timeout: 5 * time.Second})
	hook := newWebhook(t, func(n int, r *http.Request) int {
		if n < 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	msg := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("go")}}
	task, _, err := b.Submit(ctx, bus.Submission{Agent: pushOwner.Agent, Owner: pushOwner.Principal, Message: msg,
		PushConfig: &schemas.TaskPushNotificationConfig{URL: hook.URL}, PushDialect: "1.0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	root.End()
	waitSettled(t, b, task.Task.ID)
	traceID := root.SpanContext().TraceID()
	got := rec.until(t, traceID, "three attempts at the first notification", func(s []sdktrace.ReadOnlySpan) bool {
		n := 0
		for _, sp := range s {
			if sp.Name() == "push notification" && attr(sp, "a2abus.push.attempt") != "" {
				n++
			}
		}
		return n >= 3
	})
	attempts := map[string]bool{}
	for _, sp := range got {
		if sp.Name() != "push notification" {
			continue
		}
		attempts[attr(sp, "a2abus.push.attempt")] = true
		if attr(sp, "a2a.task.id") != task.Task.ID {
			t.Errorf("an attempt's task: %q", attr(sp, "a2a.task.id"))
		}
		post := false
		for _, c := range got {
			post = post || (c.Parent().SpanID() == sp.SpanContext().SpanID() && c.SpanKind() == trace.SpanKindClient && c.Name() == "POST")
		}
		if !post {
			t.Errorf("attempt %s has no POST client span", attr(sp, "a2abus.push.attempt"))
		}
	}
	for _, n := range []string{"1", "2", "3"} {
		if !attempts[n] {
			t.Errorf("no span of attempt %s: %v", n, attempts)
		}
	}
	hook.mu.Lock()
	first := hook.all[0].header.Get("traceparent")
	hook.mu.Unlock()
	if len(first) < 36 || first[3:35] != traceID.String() {
		t.Errorf("the webhook was sent traceparent %q, want one of trace %s", first, traceID)
	}
}

// The llm kind's completion is a chat span of the GenAI conventions, with
// its model and token usage, and the provider is sent the trace context.
func TestLLMCompletionIsTraced(t *testing.T) {
	rec, ctx, root := traced(t)
	var mu sync.Mutex
	var sent string
	srv := fakeOpenAI(t, func(_ map[string]any, h http.Header) (int, string) {
		mu.Lock()
		sent = h.Get("traceparent")
		mu.Unlock()
		return 0, ""
	})
	_, b := bustest.New(t, bustest.Options{})
	hc := discovery.Policy{AllowLoopback: true}.Client(0)
	startRunner(t, b, def("chat", workers.LLM{BaseURL: srv.URL + "/v1", Model: "gpt-4o-mini", HTTP: hc}), workers.Options{})
	msg := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("Hi")}}
	task, _, err := b.Submit(ctx, bus.Submission{Agent: "chat", Message: msg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	root.End()
	if r := waitSettled(t, b, task.Task.ID); r.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("the completion ended %s", r.Task.Status.State)
	}
	got := rec.until(t, root.SpanContext().TraceID(), "the chat span and the run", func(s []sdktrace.ReadOnlySpan) bool {
		have := map[string]bool{}
		for _, sp := range s {
			have[sp.Name()] = true
		}
		return have["chat gpt-4o-mini"] && have["invoke_agent chat"]
	})
	var chat, run sdktrace.ReadOnlySpan
	for _, sp := range got {
		switch sp.Name() {
		case "chat gpt-4o-mini":
			chat = sp
		case "invoke_agent chat":
			run = sp
		}
	}
	if chat.Parent().SpanID() != run.SpanContext().SpanID() || chat.SpanKind() != trace.SpanKindClient {
		t.Errorf("the chat span: parent %s kind %v, want the run's %s, client", chat.Parent().SpanID(), chat.SpanKind(), run.SpanContext().SpanID())
	}
	for k, want := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": "9", "gen_ai.usage.output_tokens": "12"} {
		if got := attr(chat, k); got != want {
			t.Errorf("chat span %s = %q, want %q", k, got, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) < 36 || sent[3:35] != root.SpanContext().TraceID().String() {
		t.Errorf("the provider was sent traceparent %q", sent)
	}
}
