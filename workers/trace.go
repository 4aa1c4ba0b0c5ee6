package workers

import (
	"context"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2abus/a2abus/bus/tracing"
	"github.com/a2abus/a2abus/schemas"
)

// traceDelivery is the outermost step of a delivery while the process
// traces: the consumer span of the work item's processing, a child of
// the producer span whose context the item's CloudEvent carries (and
// linked to it, as the messaging conventions ask of a consumer), so the
// edge's call, the publish and this run are one trace on whichever
// process takes it. Each delivery is a span of its own: a run redelivered
// after a worker crashed is a second consumer span in the same trace,
// with its attempt. The delivery's log lines carry the span's ids.
func (r *Runner) traceDelivery(ctx context.Context, d *delivery, next func(context.Context, *delivery)) {
	if !tracing.Enabled() {
		next(ctx, d)
		return
	}
	w := d.w
	dest := schemas.SubjectWork(r.def.Name)
	parent := tracing.WithTraceparent(ctx, w.Traceparent)
	ctx, span := tracing.Tracer().Start(parent, "process "+dest,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(trace.LinkFromContext(parent)),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(dest),
			semconv.MessagingConsumerGroupName(schemas.ConsumerWork(r.def.Name)),
			semconv.MessagingMessageID(w.EventID),
			tracing.A2AAgent.String(r.def.Name),
			tracing.A2ATaskID.String(w.Item.TaskID),
			tracing.WorkAttempt.Int64(int64(w.Attempt)),
		))
	defer span.End()
	sc := span.SpanContext()
	d.log = d.log.With("trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
	next(ctx, d)
	if d.runErr != nil {
		tracing.Fail(span, "agent", d.runErr)
	}
}

// startRun starts the span of the agent's turn (the GenAI conventions'
// invoke_agent), under which the agent's own calls — an HTTP request of
// the remote, llm or langgraph kinds, the work a fan-out queues — are
// made; end ends it with how the turn ended.
func (r *Runner) startRun(ctx context.Context, d *delivery) (context.Context, func(error)) {
	if !tracing.Enabled() {
		return ctx, func(error) {}
	}
	ctx, span := tracing.Tracer().Start(ctx, "invoke_agent "+r.def.Name,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			tracing.GenAIOperationName.String("invoke_agent"),
			tracing.GenAIAgentName.String(r.def.Name),
			tracing.A2ATaskID.String(d.w.Item.TaskID),
			tracing.A2AContextID.String(d.w.Item.ContextID),
		))
	return ctx, func(err error) {
		tracing.Fail(span, "agent", err)
		span.End()
	}
}
