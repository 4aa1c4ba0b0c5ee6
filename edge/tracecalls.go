package edge

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2abus/a2abus/bus/tracing"
	"github.com/a2abus/a2abus/schemas"
)

// traceCalls is the interceptor that makes each call's server span, the
// outermost of the chain so the span holds everything the call does: the
// RPC span of the semantic conventions (lf.a2a.v1.A2AService/<operation>,
// whatever the binding), a child of the trace context the client sent
// (its traceparent header or gRPC metadata), with the operation, agent,
// binding, tenant and task as attributes. What the call stores and queues
// is done under this span, so the work's producer span (bus) and the
// record's trace context are its children. A stream's span lasts as long
// as the stream.
func (s *Server) traceCalls(ctx context.Context, inv *invocation, next invoker) (any, error) {
	if !tracing.Enabled() {
		return next(ctx, inv)
	}
	c := inv.call
	binding := ""
	if c.obs != nil {
		binding = c.obs.binding
	}
	rpcMethod := "lf.a2a.v1.A2AService/" + inv.op
	if strings.Contains(inv.op, ".") {
		rpcMethod = inv.op // a2abus's own extension (a2abus.WatchTasks)
	}
	attrs := []attribute.KeyValue{
		rpcSystem(binding), semconv.RPCMethod(rpcMethod),
		tracing.A2AMethod.String(inv.op), tracing.A2AAgent.String(c.agent),
		tracing.A2ABinding.String(binding), tracing.A2ATenant.String(c.caller.tenant),
	}
	if id := requestTaskID(inv.req); id != "" {
		attrs = append(attrs, tracing.A2ATaskID.String(id))
	}
	ctx, span := tracing.Tracer().Start(tracing.WithTraceparent(ctx, c.trace), rpcMethod,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	defer span.End()
	res, err := next(ctx, inv)
	if id, st := resultTask(res); id != "" {
		span.SetAttributes(tracing.A2ATaskID.String(id), tracing.A2ATaskState.String(st))
	}
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled):
		span.SetStatus(codes.Unset, "the client went away")
	default:
		e := schemas.AsError(err)
		code := strconv.Itoa(e.Code)
		span.SetAttributes(semconv.RPCResponseStatusCodeKey.String(code), semconv.ErrorTypeKey.String(code))
		span.SetStatus(codes.Error, e.Message)
	}
	return res, err
}

// traceTask names the task a send created or continued on the call's
// span, where the answer may not say it (a blocking send's stored task
// is written as it is).
func traceTask(ctx context.Context, rec *schemas.TaskRecord) {
	if tracing.Enabled() && rec != nil {
		trace.SpanFromContext(ctx).SetAttributes(tracing.A2ATaskID.String(rec.Task.ID), tracing.A2AContextID.String(rec.Task.ContextID))
	}
}

// rpcSystem is the RPC system of a binding, as the conventions name it.
func rpcSystem(binding string) attribute.KeyValue {
	switch binding {
	case "grpc":
		return semconv.RPCSystemNameGRPC
	case "jsonrpc":
		return semconv.RPCSystemNameJSONRPC
	}
	// HTTP+JSON, OpenFang's routes, MCP tool calls: no RPC system of
	// the conventions' list.
	return semconv.RPCSystemNameKey.String(binding)
}

// requestTaskID is the task a request names, "" for one that names none
// (a send that starts a task, a list).
func requestTaskID(req any) string {
	switch r := req.(type) {
	case *schemas.SendMessageRequest:
		if r.Message != nil {
			return r.Message.TaskID
		}
	case *schemas.GetTaskRequest:
		return r.ID
	case *schemas.CancelTaskRequest:
		return r.ID
	case *schemas.SubscribeToTaskRequest:
		return r.ID
	case *schemas.TaskPushNotificationConfig:
		return r.TaskID
	case *schemas.GetTaskPushNotificationConfigRequest:
		return r.TaskID
	case *schemas.ListTaskPushNotificationConfigsRequest:
		return r.TaskID
	}
	return ""
}

// resultTask is the task a call answered with and its state, if any.
func resultTask(res any) (id, state string) {
	var rec *schemas.TaskRecord
	switch r := res.(type) {
	case *schemas.TaskRecord:
		rec = r
	case *sendResult:
		if r != nil && r.resp != nil && r.resp.Task != nil {
			return r.resp.Task.ID, string(r.resp.Task.Status.State)
		}
	}
	if rec == nil {
		return "", ""
	}
	return rec.Task.ID, string(rec.Task.Status.State)
}
