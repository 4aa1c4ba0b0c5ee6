package pbwire

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/code"
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

// Status is the gRPC status of an A2A error: its row's code with an
// ErrorInfo (its reason, the A2A domain, its metadata) and, when it says
// when to retry, a RetryInfo.
func Status(e *schemas.Error) *status.Status {
	st := status.New(codeOf(e.GRPCStatus), e.Message)
	info := &errdetails.ErrorInfo{Reason: e.Reason, Domain: schemas.ErrorDomain, Metadata: e.Metadata}
	details := []protoadapt.MessageV1{info}
	if e.RetryAfter > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(e.RetryAfter) * time.Second)})
	}
	if withDetails, err := st.WithDetails(details...); err == nil {
		st = withDetails
	}
	return st
}

// Error reads a gRPC status back into the error table, the inverse of
// Status: the row its ErrorInfo's reason names, else the row of its code
// (schemas.WireError.Decode reads both, as it reads every other wire
// form), with the ErrorInfo's metadata and RetryInfo's delay (whole
// seconds, rounded up). reason reports whether the status carried an
// ErrorInfo with a reason: an agent's answer, where a status with a code
// alone may be gRPC's own (a connection that failed, a deadline).
func Error(st *status.Status) (e *schemas.Error, reason bool) {
	w := schemas.WireError{Status: code.Code(st.Code()).String(), Message: st.Message()}
	var infos []schemas.ErrorInfo
	retry := 0
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetReason() != "" {
				infos = append(infos, schemas.ErrorInfo{Type: schemas.ErrorInfoType, Reason: d.GetReason(), Domain: d.GetDomain(), Metadata: d.GetMetadata()})
			}
		case *errdetails.RetryInfo:
			retry = int(math.Ceil(d.GetRetryDelay().AsDuration().Seconds()))
		}
	}
	if len(infos) > 0 {
		w.Details, _ = json.Marshal(infos)
	}
	return w.Decode(retry), len(infos) > 0
}
