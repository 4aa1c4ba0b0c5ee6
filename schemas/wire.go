package schemas

import (
	"encoding/json"
	"maps"
	"strconv"
	"strings"
)

// The wire forms of a protocol Error, both ways: the edge encodes an Error
// for the binding a request came on, and the client (discovery) decodes an
// agent's error back into the same table row. One codec for both, so a
// code, reason or status can only mean one thing in a2abus.

// ErrorInfoType is the @type of google.rpc.ErrorInfo as a typed detail.
const ErrorInfoType = "type.googleapis.com/google.rpc.ErrorInfo"

// ErrorInfo is google.rpc.ErrorInfo as a typed detail: the reason that
// names the table row, its domain and the occurrence's metadata.
type ErrorInfo struct {
	Type     string            `json:"@type"`
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Details is the typed-detail list of e: its ErrorInfo. Every binding sends
// it (JSON-RPC error.data of 1.0 and 0.3, google.rpc.Status details); the
// official Go SDK's 0.3 client requires the list form too.
func (e *Error) Details() []ErrorInfo {
	meta := e.Metadata
	if e.RetryAfter > 0 {
		meta = make(map[string]string, len(e.Metadata)+1)
		maps.Copy(meta, e.Metadata)
		meta[MetaRetryAfter] = strconv.Itoa(e.RetryAfter)
	}
	return []ErrorInfo{{Type: ErrorInfoType, Reason: e.Reason, Domain: ErrorDomain, Metadata: meta}}
}

// MetaRetryAfter is the ErrorInfo metadata entry of a retryable error: the
// seconds to wait, as Retry-After says it on HTTP, for JSON-RPC clients
// that see no header.
const MetaRetryAfter = "retryAfterSeconds"

// RPCError is a JSON-RPC 2.0 error object.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// RPC is e as a JSON-RPC error object (A2A 1.0 and 0.3).
func (e *Error) RPC() *RPCError {
	return &RPCError{Code: e.Code, Message: e.Message, Data: e.Details()}
}

// RPCLegacy is e as the error object of the older dialect's REST routes,
// whose clients read error.data as an object: the reason and domain with
// the metadata entries beside them.
func (e *Error) RPCLegacy() *RPCError {
	return &RPCError{Code: e.Code, Message: e.Message, Data: V03ErrorData(e)}
}

// Status is google.rpc.Status as JSON: the HTTP+JSON binding's error body.
type Status struct {
	Error StatusBody `json:"error"`
}

// StatusBody is the inside of a google.rpc.Status.
type StatusBody struct {
	Code    int         `json:"code"`
	Status  string      `json:"status"`
	Message string      `json:"message"`
	Details []ErrorInfo `json:"details"`
}

// Status is e as google.rpc.Status with the table's HTTP status, or
// httpStatus when non-zero.
func (e *Error) Status(httpStatus int) Status {
	if httpStatus == 0 {
		httpStatus = e.HTTPStatus
	}
	return Status{Error: StatusBody{Code: httpStatus, Status: e.GRPCStatus, Message: e.Message, Details: e.Details()}}
}

// WireError is an error as an agent sent it: a JSON-RPC error object (code,
// message, data) or the inside of a google.rpc.Status (code, status,
// message, details). Decode reads either.
type WireError struct {
	Code    int             `json:"code"`
	Status  string          `json:"status"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Details json.RawMessage `json:"details"`
}

// Decode returns the table occurrence of an agent's error: by ErrorInfo
// reason when the agent sent one (1.0 details list or 0.3 data object),
// else by JSON-RPC code, else by gRPC status name; an error matching none
// is ErrInternal with the agent's message. retryAfter (seconds, from the
// answer's Retry-After) is kept when positive.
func (w *WireError) Decode(retryAfter int) *Error {
	details := w.Details
	if len(details) == 0 {
		details = w.Data
	}
	reason, meta := errorInfoOf(details)
	row := ErrorByReason(reason)
	if row == nil && w.Status == "" {
		row = ErrorByCode(w.Code)
	}
	if row == nil && w.Status != "" {
		row = byGRPCStatus[w.Status]
	}
	if row == nil {
		row = ErrInternal
	}
	msg := w.Message
	if msg == "" {
		msg = row.Message
	}
	e := Errorf(row, "%s", msg)
	for k, v := range meta {
		e = e.With(k, v)
	}
	if n, err := strconv.Atoi(meta[MetaRetryAfter]); retryAfter <= 0 && err == nil {
		retryAfter = n
	}
	if retryAfter > 0 {
		e.RetryAfter = retryAfter
	}
	return e
}

// byGRPCStatus reads a google.rpc.Status without an ErrorInfo reason: its
// status name alone is shared by several rows, so each name maps to its
// most general row.
var byGRPCStatus = map[string]*Error{
	"INVALID_ARGUMENT":    ErrInvalidParams,
	"NOT_FOUND":           ErrTaskNotFound,
	"UNIMPLEMENTED":       ErrMethodNotFound,
	"FAILED_PRECONDITION": ErrUnsupportedOperation,
	"INTERNAL":            ErrInternal,
	"UNAVAILABLE":         ErrUnavailable,
	"UNAUTHENTICATED":     ErrUnauthenticated,
	"PERMISSION_DENIED":   ErrPermissionDenied,
}

// errorInfoOf finds the ErrorInfo in error details: a 1.0 details array of
// typed objects, or a 0.3 data object carrying a reason.
func errorInfoOf(raw json.RawMessage) (string, map[string]string) {
	if len(raw) == 0 {
		return "", nil
	}
	type info struct {
		Type     string         `json:"@type"`
		Reason   string         `json:"reason"`
		Metadata map[string]any `json:"metadata"`
	}
	strs := func(m map[string]any) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if s, ok := v.(string); ok && k != "reason" && k != "domain" && k != "@type" {
				out[k] = s
			}
		}
		return out
	}
	var list []info
	if json.Unmarshal(raw, &list) == nil {
		for _, d := range list {
			if d.Reason != "" && (d.Type == "" || strings.HasSuffix(d.Type, "google.rpc.ErrorInfo")) {
				return d.Reason, strs(d.Metadata)
			}
		}
		return "", nil
	}
	var obj map[string]any
	if json.Unmarshal(raw, &obj) == nil {
		if r, ok := obj["reason"].(string); ok {
			return r, strs(obj)
		}
	}
	return "", nil
}
