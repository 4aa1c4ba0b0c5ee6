package grpcbinding

import (
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/a2abus/a2abus/schemas"
)

// codeOf is the gRPC code of a google.rpc.Code name, as the error table
// names each row's (schemas.Error.GRPCStatus): grpc's codes reads those
// names itself, as they appear in JSON.
func codeOf(name string) codes.Code {
	var c codes.Code
	if c.UnmarshalJSON([]byte(strconv.Quote(name))) != nil {
		return codes.Unknown
	}
	return c
}

// statusOf is the gRPC status of what the door answered (nil for nil): an
// A2A error as its row's code with an ErrorInfo (its reason, the A2A
// domain, its data as metadata) and, when it says when to retry, a
// RetryInfo. A status already (a stream's failed Send) passes as it is.
// The door classified everything else, a call ended before its answer
// among it (UNAVAILABLE: its client, if still there, retries).
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	pe := schemas.AsError(err)
	st := status.New(codeOf(pe.GRPCStatus), pe.Message)
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
