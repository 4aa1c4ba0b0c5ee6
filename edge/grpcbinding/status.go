package grpcbinding

import (
	"context"
	"errors"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/a2abus/a2abus/schemas"
)

// codeOf is the gRPC code of a google.rpc.Code name, as the error table
// names each row's (schemas.Error.GRPCStatus).
var codeOf = func() map[string]codes.Code {
	m := map[string]codes.Code{}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		m[googleName(c)] = c
	}
	return m
}()

// googleName is the google.rpc.Code name of c (UPPER_SNAKE_CASE).
func googleName(c codes.Code) string {
	switch c {
	case codes.OK:
		return "OK"
	case codes.Canceled:
		return "CANCELLED"
	case codes.Unknown:
		return "UNKNOWN"
	case codes.InvalidArgument:
		return "INVALID_ARGUMENT"
	case codes.DeadlineExceeded:
		return "DEADLINE_EXCEEDED"
	case codes.NotFound:
		return "NOT_FOUND"
	case codes.AlreadyExists:
		return "ALREADY_EXISTS"
	case codes.PermissionDenied:
		return "PERMISSION_DENIED"
	case codes.ResourceExhausted:
		return "RESOURCE_EXHAUSTED"
	case codes.FailedPrecondition:
		return "FAILED_PRECONDITION"
	case codes.Aborted:
		return "ABORTED"
	case codes.OutOfRange:
		return "OUT_OF_RANGE"
	case codes.Unimplemented:
		return "UNIMPLEMENTED"
	case codes.Internal:
		return "INTERNAL"
	case codes.Unavailable:
		return "UNAVAILABLE"
	case codes.DataLoss:
		return "DATA_LOSS"
	case codes.Unauthenticated:
		return "UNAUTHENTICATED"
	}
	return "UNKNOWN"
}

// statusOf is the gRPC status of what the door answered (nil for nil): an
// A2A error as its row's code with an ErrorInfo (its reason, the A2A
// domain, its data as metadata) and, when it says when to retry, a
// RetryInfo; a call ended by its client as CANCELLED. The door already
// classified everything else (it never answers an unclassified error).
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Canceled, "the call was canceled")
	}
	pe := schemas.AsError(err)
	code, ok := codeOf[pe.GRPCStatus]
	if !ok {
		code = codes.Unknown
	}
	st := status.New(code, pe.Message)
	info := &errdetails.ErrorInfo{Reason: pe.Reason, Domain: schemas.ErrorDomain, Metadata: pe.Metadata}
	details := []protoadapt.MessageV1{info}
	if pe.RetryAfter > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(pe.RetryAfter) * time.Second)})
	}
	if withDetails, err := st.WithDetails(details...); err == nil {
		st = withDetails
	}
	return st.Err()
}
