package grpcbinding

import (
	"testing"

	"google.golang.org/grpc/codes"

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
