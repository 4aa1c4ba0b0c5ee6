package pbwire

import (
	"errors"
	"maps"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/a2abus/a2abus/schemas"
)

// Every row of the error table names a gRPC code grpc knows, so no A2A
// error goes out as UNKNOWN.
func TestEveryErrorRowHasItsGRPCCode(t *testing.T) {
	for _, row := range schemas.ErrorTable {
		if c := codeOf(row.GRPCStatus); c == codes.Unknown || c == codes.OK {
			t.Errorf("%s: GRPCStatus %q reads as %v", row.Reason, row.GRPCStatus, c)
		}
	}
}

// Error reads back what Status writes, for every row: the same row, its
// message, its metadata and when to retry; and a status with a code alone
// (gRPC's own, or another server's) is its code's most general row.
func TestStatusReadsBackIntoTheTable(t *testing.T) {
	for _, row := range schemas.ErrorTable {
		sent := schemas.Errorf(row, "what happened to %s", row.Reason).With("taskId", "t-1")
		sent.RetryAfter = 7
		// Through the wire: a status error as a client receives it.
		st := status.Convert(Status(sent).Err())
		got, reason := Error(st)
		if !reason || !errors.Is(got, row) || got.Message != sent.Message || !maps.Equal(got.Metadata, sent.Metadata) || got.RetryAfter != 7 {
			t.Errorf("%s: read back as %+v (reason %v)", row.Reason, got, reason)
		}
	}
	for c, want := range map[codes.Code]*schemas.Error{
		codes.NotFound:         schemas.ErrTaskNotFound,
		codes.Unauthenticated:  schemas.ErrUnauthenticated,
		codes.PermissionDenied: schemas.ErrPermissionDenied,
		codes.Unavailable:      schemas.ErrUnavailable,
		codes.Unimplemented:    schemas.ErrMethodNotFound,
		codes.DataLoss:         schemas.ErrInternal,
	} {
		got, reason := Error(status.New(c, "from elsewhere"))
		if reason || !errors.Is(got, want) || got.Message != "from elsewhere" {
			t.Errorf("code %v alone: %+v (reason %v), want %s", c, got, reason, want.Reason)
		}
	}
}
