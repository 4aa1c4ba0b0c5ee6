package bus

import (
	"context"
	"strings"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2abus/a2abus/bus/tracing"
	"github.com/a2abus/a2abus/schemas"
)

// startPublish starts the producer span of a work item's publish: a
// child of the span that queues it (the edge's call, a worker's run that
// delegates, a sweep re-queueing under the trace the task's record
// keeps), whose context the item's CloudEvent then carries as its
// traceparent (the CloudEvents distributed-tracing extension), so the
// worker's consumer span is its child on whichever process, and on every
// delivery. The subject's caller and task parts are left out of the
// span's name and destination, which must stay of few values.
func startPublish(ctx context.Context, item *schemas.WorkItem, o PublishOptions) (context.Context, trace.Span) {
	dest := strings.TrimSuffix(schemas.SubjectIntakeAgent(item.Agent), ".>")
	return tracing.Tracer().Start(tracing.Parented(ctx, o.Traceparent), "send "+dest,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"),
			semconv.MessagingDestinationName(dest),
			semconv.MessagingDestinationTemplate(dest+".{caller}.{task}"),
			semconv.MessagingMessageID(o.ID),
			tracing.A2AAgent.String(item.Agent),
			tracing.A2ATaskID.String(item.TaskID),
		))
}
