package schemas

import (
	"errors"
	"fmt"
)

// Error is a protocol error: one row of the error table plus the message and
// metadata of one occurrence. The edge translates an Error to JSON-RPC,
// HTTP+JSON or 0.3 wire shapes; nothing else decides codes.
//
// Use the sentinels below with errors.Is, and create occurrences with
// Errorf, which keeps the sentinel in the chain.
type Error struct {
	Code       int               // JSON-RPC error code
	Reason     string            // google.rpc.ErrorInfo reason (UPPER_SNAKE_CASE)
	HTTPStatus int               // HTTP status for the HTTP+JSON binding (spec v1.0.1)
	GRPCStatus string            // google.rpc.Code name, used in google.rpc.Status JSON
	Message    string            // human-readable message
	Metadata   map[string]string // ErrorInfo metadata (e.g. taskId)
	// RetryAfter, when positive, is the number of seconds a caller should wait
	// before retrying (overload errors).
	RetryAfter int

	kind *Error // the table row this occurrence came from; nil for rows
}

// ErrorDomain is the ErrorInfo domain of every A2A error.
const ErrorDomain = "a2a-protocol.org"

// The error table. JSON-RPC codes and ErrorInfo reasons follow spec v1.0.1
// §5.4/§9.5; HTTP statuses follow the v1.0.1 mapping.
var (
	ErrParse                     = &Error{Code: -32700, Reason: "PARSE_ERROR", HTTPStatus: 400, GRPCStatus: "INVALID_ARGUMENT", Message: "invalid JSON payload"}
	ErrInvalidRequest            = &Error{Code: -32600, Reason: "INVALID_REQUEST", HTTPStatus: 400, GRPCStatus: "INVALID_ARGUMENT", Message: "request payload validation error"}
	ErrMethodNotFound            = &Error{Code: -32601, Reason: "METHOD_NOT_FOUND", HTTPStatus: 404, GRPCStatus: "UNIMPLEMENTED", Message: "method not found"}
	ErrInvalidParams             = &Error{Code: -32602, Reason: "INVALID_PARAMS", HTTPStatus: 400, GRPCStatus: "INVALID_ARGUMENT", Message: "invalid parameters"}
	ErrInternal                  = &Error{Code: -32603, Reason: "INTERNAL_ERROR", HTTPStatus: 500, GRPCStatus: "INTERNAL", Message: "internal error"}
	ErrTaskNotFound              = &Error{Code: -32001, Reason: "TASK_NOT_FOUND", HTTPStatus: 404, GRPCStatus: "NOT_FOUND", Message: "task not found"}
	ErrTaskNotCancelable         = &Error{Code: -32002, Reason: "TASK_NOT_CANCELABLE", HTTPStatus: 400, GRPCStatus: "FAILED_PRECONDITION", Message: "task cannot be canceled"}
	ErrPushNotSupported          = &Error{Code: -32003, Reason: "PUSH_NOTIFICATION_NOT_SUPPORTED", HTTPStatus: 400, GRPCStatus: "FAILED_PRECONDITION", Message: "push notifications are not supported"}
	ErrUnsupportedOperation      = &Error{Code: -32004, Reason: "UNSUPPORTED_OPERATION", HTTPStatus: 400, GRPCStatus: "FAILED_PRECONDITION", Message: "this operation is not supported"}
	ErrContentTypeNotSupported   = &Error{Code: -32005, Reason: "CONTENT_TYPE_NOT_SUPPORTED", HTTPStatus: 400, GRPCStatus: "INVALID_ARGUMENT", Message: "incompatible content types"}
	ErrInvalidAgentResponse      = &Error{Code: -32006, Reason: "INVALID_AGENT_RESPONSE", HTTPStatus: 500, GRPCStatus: "INTERNAL", Message: "invalid agent response"}
	ErrExtendedCardNotConfigured = &Error{Code: -32007, Reason: "EXTENDED_AGENT_CARD_NOT_CONFIGURED", HTTPStatus: 400, GRPCStatus: "FAILED_PRECONDITION", Message: "extended agent card is not configured"}
	ErrExtensionSupportRequired  = &Error{Code: -32008, Reason: "EXTENSION_SUPPORT_REQUIRED", HTTPStatus: 400, GRPCStatus: "FAILED_PRECONDITION", Message: "a required extension was not requested"}
	ErrVersionNotSupported       = &Error{Code: -32009, Reason: "VERSION_NOT_SUPPORTED", HTTPStatus: 400, GRPCStatus: "FAILED_PRECONDITION", Message: "protocol version not supported"}
	// ErrTaskGenerationMismatch is A2A 1.1's TaskGenerationMismatchError
	// (dev-1.1 §3.2.7, §5.4): a continuation's ifGenerationMatch is not
	// the task's generation. 409 as the mapping table and §11.6's example
	// give it (the change's summary says 412; its table and example win).
	ErrTaskGenerationMismatch = &Error{Code: -32010, Reason: "TASK_GENERATION_MISMATCH", HTTPStatus: 409, GRPCStatus: "ABORTED", Message: "task generation mismatch"}
	// ErrUnavailable is returned when a bound is reached or the bus cannot
	// take work right now; it is retryable and carries RetryAfter (HTTP 503
	// with Retry-After, and retryAfterSeconds in the ErrorInfo metadata).
	// Neither JSON-RPC nor A2A has a code for it; a2abus uses −31503, in the
	// range of the official Go SDK's −31401/−31403, so an overload is never
	// mistaken for an internal error (−32603) a client should not retry.
	ErrUnavailable = &Error{Code: -31503, Reason: "UNAVAILABLE", HTTPStatus: 503, GRPCStatus: "UNAVAILABLE", Message: "service temporarily unavailable", RetryAfter: 1}
	// ErrRateLimited is the answer to a caller over its request rate or its
	// quota of unfinished tasks: HTTP 429 with Retry-After, JSON-RPC −31429
	// with retryAfterSeconds in the ErrorInfo metadata. Nothing the caller
	// already had accepted is affected.
	ErrRateLimited = &Error{Code: -31429, Reason: "RATE_LIMITED", HTTPStatus: 429, GRPCStatus: "RESOURCE_EXHAUSTED", Message: "too many requests", RetryAfter: 1}
	// ErrUnauthenticated and ErrPermissionDenied are the answers of the
	// edge's authentication: no or bad credentials (HTTP 401 with
	// WWW-Authenticate), or a principal not allowed (403). A2A names no
	// JSON-RPC codes for them; a2abus uses the ones the official Go SDK
	// uses, −31401 and −31403, on every binding, and its ErrorInfo reasons
	// (UNAUTHENTICATED, UNAUTHORIZED), which its clients map back to their
	// errors.
	ErrUnauthenticated  = &Error{Code: -31401, Reason: "UNAUTHENTICATED", HTTPStatus: 401, GRPCStatus: "UNAUTHENTICATED", Message: "authentication required"}
	ErrPermissionDenied = &Error{Code: -31403, Reason: "UNAUTHORIZED", HTTPStatus: 403, GRPCStatus: "PERMISSION_DENIED", Message: "permission denied"}
	// ErrConflict refuses a change that another settled first: an
	// approval decided by another approver, or expired (HTTP 409,
	// −31409 in the range of the others a2abus adds).
	ErrConflict = &Error{Code: -31409, Reason: "CONFLICT", HTTPStatus: 409, GRPCStatus: "ABORTED", Message: "conflict"}
)

// ErrorTable lists every row, for documentation and exhaustive tests.
var ErrorTable = []*Error{
	ErrParse, ErrInvalidRequest, ErrMethodNotFound, ErrInvalidParams, ErrInternal,
	ErrTaskNotFound, ErrTaskNotCancelable, ErrPushNotSupported, ErrUnsupportedOperation,
	ErrContentTypeNotSupported, ErrInvalidAgentResponse, ErrExtendedCardNotConfigured,
	ErrExtensionSupportRequired, ErrVersionNotSupported, ErrTaskGenerationMismatch, ErrUnavailable,
	ErrUnauthenticated, ErrPermissionDenied, ErrRateLimited, ErrConflict,
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Is reports whether target is the table row e came from (or e itself).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t == e || (e.kind != nil && t == e.kind)
}

// TaskNotFound is the error for a task that is not there, or not the
// caller's (isolation never says which): ErrTaskNotFound naming the id as
// the caller gave it.
func TaskNotFound(id string) *Error {
	return Errorf(ErrTaskNotFound, "task %s not found", id).With("taskId", id)
}

// Errorf returns an occurrence of the table row kind with a formatted
// message; errors.Is(err, kind) holds for it.
func Errorf(kind *Error, format string, args ...any) *Error {
	e := *kind
	e.kind = kind
	if kind.kind != nil { // an occurrence: keep the link to its row
		e.kind = kind.kind
	}
	e.Message = fmt.Sprintf(format, args...)
	return &e
}

// With returns a copy of e with one more metadata entry, for ErrorInfo.
func (e *Error) With(key, value string) *Error {
	c := *e
	if c.kind == nil {
		c.kind = e
	}
	c.Metadata = make(map[string]string, len(e.Metadata)+1)
	for k, v := range e.Metadata {
		c.Metadata[k] = v
	}
	c.Metadata[key] = value
	return &c
}

// AsError classifies any error as a protocol Error: an Error in the chain is
// returned as is; anything else becomes ErrInternal with a generic message
// (the cause is for logs, not for clients).
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Errorf(ErrInternal, "internal error")
}

// ErrorByCode returns the table row for a JSON-RPC code, or nil. Codes that
// two rows share resolve to the standard row.
func ErrorByCode(code int) *Error {
	for _, e := range ErrorTable {
		if e.Code == code {
			return e
		}
	}
	return nil
}

// ErrorByReason returns the table row for an ErrorInfo reason, or nil.
func ErrorByReason(reason string) *Error {
	for _, e := range ErrorTable {
		if e.Reason == reason {
			return e
		}
	}
	return nil
}
