package schemas

import (
	"encoding/json"
	"errors"
	"testing"
)

// Every row of the table survives each wire form it is sent in: what the
// edge encodes, the client decodes back to the same row, message and
// metadata.
func TestWireErrorRoundTrip(t *testing.T) {
	for _, row := range ErrorTable {
		e := Errorf(row, "occurrence of %s", row.Reason).With("taskId", "t-1")
		forms := map[string]any{
			"jsonrpc": e.RPC(),
			"legacy":  e.RPCLegacy(),
			"status":  e.Status(0).Error,
		}
		for name, form := range forms {
			b, err := json.Marshal(form)
			if err != nil {
				t.Fatal(err)
			}
			var w WireError
			if err := json.Unmarshal(b, &w); err != nil {
				t.Fatalf("%s %s: %v", row.Reason, name, err)
			}
			got := w.Decode(0)
			if !errors.Is(got, row) || got.Message != e.Message || got.Metadata["taskId"] != "t-1" {
				t.Errorf("%s as %s (%s) decoded as %s %q %v", row.Reason, name, b, got.Reason, got.Message, got.Metadata)
			}
		}
	}
}

// Agents that send no ErrorInfo are read by JSON-RPC code, or by the gRPC
// status name of a google.rpc.Status, and anything else is an internal
// error carrying the agent's message.
func TestWireErrorWithoutReason(t *testing.T) {
	cases := []struct {
		wire string
		want *Error
	}{
		{`{"code":-32001,"message":"gone"}`, ErrTaskNotFound},
		{`{"code":-32601,"message":"no such method"}`, ErrMethodNotFound},
		{`{"code":404,"status":"NOT_FOUND","message":"gone"}`, ErrTaskNotFound},
		{`{"code":503,"status":"UNAVAILABLE","message":"busy"}`, ErrUnavailable},
		{`{"code":12345,"message":"strange"}`, ErrInternal},
	}
	for _, c := range cases {
		var w WireError
		if err := json.Unmarshal([]byte(c.wire), &w); err != nil {
			t.Fatal(err)
		}
		got := w.Decode(7)
		if !errors.Is(got, c.want) || got.RetryAfter != 7 {
			t.Errorf("%s decoded as %s (retry after %d), want %s", c.wire, got.Reason, got.RetryAfter, c.want.Reason)
		}
	}
}
