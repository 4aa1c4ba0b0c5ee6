package workers_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/bus/tracing/tracingtest"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// A task's push notifications are part of its trace: each attempt is a
// span with its number, around the POST's client span, and the webhook
// is sent the trace context.
func TestPushAttemptsAreTraced(t *testing.T) {
	rec := tracingtest.Record(t)
	ctx, root := rec.Start("the client's request")
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
	got := rec.Trace(t, traceID, "three attempts at the first notification", func(s []sdktrace.ReadOnlySpan) bool {
		n := 0
		for _, sp := range s {
			if sp.Name() == "push notification" && tracingtest.Attr(sp, "a2abus.push.attempt") != "" {
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
		attempts[tracingtest.Attr(sp, "a2abus.push.attempt")] = true
		if tracingtest.Attr(sp, "a2a.task.id") != task.Task.ID {
			t.Errorf("an attempt's task: %q", tracingtest.Attr(sp, "a2a.task.id"))
		}
		post := false
		for _, c := range got {
			post = post || (c.Parent().SpanID() == sp.SpanContext().SpanID() && c.SpanKind() == trace.SpanKindClient && c.Name() == "POST")
		}
		if !post {
			t.Errorf("attempt %s has no POST client span", tracingtest.Attr(sp, "a2abus.push.attempt"))
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
	rec := tracingtest.Record(t)
	ctx, root := rec.Start("the client's request")
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
	got := rec.Trace(t, root.SpanContext().TraceID(), "the chat span and the run", tracingtest.Named("chat gpt-4o-mini", "invoke_agent chat"))
	chat, run := tracingtest.ByName(got, "chat gpt-4o-mini"), tracingtest.ByName(got, "invoke_agent chat")
	if chat.Parent().SpanID() != run.SpanContext().SpanID() || chat.SpanKind() != trace.SpanKindClient {
		t.Errorf("the chat span: parent %s kind %v, want the run's %s, client", chat.Parent().SpanID(), chat.SpanKind(), run.SpanContext().SpanID())
	}
	for k, want := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": "9", "gen_ai.usage.output_tokens": "12"} {
		if got := tracingtest.Attr(chat, k); got != want {
			t.Errorf("chat span %s = %q, want %q", k, got, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) < 36 || sent[3:35] != root.SpanContext().TraceID().String() {
		t.Errorf("the provider was sent traceparent %q", sent)
	}
}
