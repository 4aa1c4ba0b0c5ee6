package schemas

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// AuditRecord is one entry of the audit record (StreamAudit): who did
// what, from where, at which trust level, and how it was decided and
// ended. It holds names, addresses and codes only — never a message
// body, a metadata value or a credential — so anyone who may read the
// stream learns who did what, not what they said.
//
// A call of an audited trust level is recorded twice: before it runs
// (Decision AuditAdmitted, Outcome AuditPending; the call is refused if
// that record cannot be stored) and after (Outcome AuditOK or the error's
// code and reason; Decision AuditRefused when the call was refused before
// it ran, say by a quota). A call the trust policy refuses is one record
// with Decision AuditRefused. Admin actions are recorded the same way,
// with Kind AuditAdmin and Method the action (AuditActionRegistryPut, …).
type AuditRecord struct {
	// Time is when the edge wrote the record (UTC).
	Time time.Time `json:"time"`
	// Kind is AuditCall (an A2A call) or AuditAdmin (an admin action).
	Kind string `json:"kind"`
	// Principal is who acted, as the edge names principals (an API key's
	// name, jwt:ISSUER#SUB, cert:NAME); "" for an anonymous caller, or an
	// action of the system itself (a key file reloaded).
	Principal string `json:"principal,omitempty"`
	// Tenant is the tenant the call acted in.
	Tenant string `json:"tenant,omitempty"`
	// Source is the caller's address as the trust policy saw it.
	Source string `json:"source,omitempty"`
	// Trust is the call's trust level.
	Trust string `json:"trust,omitempty"`
	// Method is the A2A operation (SendMessage, GetTask, …) or the admin
	// action.
	Method string `json:"method"`
	// Binding is the binding the call came by (jsonrpc, rest, grpc, mcp,
	// admin for the admin API, process for what a process did itself).
	Binding string `json:"binding,omitempty"`
	// Agent is the agent called, or the agent an admin action changed.
	Agent string `json:"agent,omitempty"`
	// TaskID is the task the call named, or the task it created (in the
	// record after the call).
	TaskID string `json:"taskId,omitempty"`
	// Decision is how the call or action was decided: AuditAdmitted,
	// AuditRefused, AuditApproved, AuditDenied.
	Decision string `json:"decision"`
	// Outcome is how it ended: AuditPending (the record written before
	// it ran), AuditOK, or an error's code and reason ("-31403
	// PERMISSION_DENIED").
	Outcome string `json:"outcome,omitempty"`
	// Writer is the process that wrote the record (its CloudEvent
	// source), set by the bus.
	Writer string `json:"writer,omitempty"`
	// Seq is the record's sequence in the stream, set when it is read.
	Seq uint64 `json:"seq,omitempty"`
}

// The kinds of audit records: the last token of their subject
// (SubjectAudit).
const (
	AuditCall  = "call"
	AuditAdmin = "admin"
)

// The decisions of audit records.
const (
	AuditAdmitted = "admitted"
	AuditRefused  = "refused"
	AuditApproved = "approved"
	AuditDenied   = "denied"
)

// The outcomes of audit records that are not errors (AuditOutcome).
const (
	// AuditPending is the outcome of the record written before a call or
	// action runs.
	AuditPending = "pending"
	// AuditOK is the outcome of one that succeeded.
	AuditOK = "ok"
)

// The admin actions audit records name (Method of an AuditAdmin record).
const (
	AuditActionRegistryPut    = "registry.put"
	AuditActionRegistryDelete = "registry.delete"
	AuditActionKeysReload     = "keys.reload"
	// An approver's decision on a task's approval (decision approved or
	// denied), and an approval the edge's sweep settled at its expiry or
	// its task's deadline (decision denied, by no principal).
	AuditActionApprovalDecide = "approval.decide"
	AuditActionApprovalExpire = "approval.expire"
)

// AuditOutcome is the outcome an audit record gives err: AuditOK for nil,
// else the table error's code and reason ("-31403 PERMISSION_DENIED"),
// never its message, which may repeat what a client sent.
func AuditOutcome(err error) string {
	if err == nil {
		return AuditOK
	}
	e := AsError(err)
	return strconv.Itoa(e.Code) + " " + e.Reason
}

// AuditQuery selects audit records: those matching every field set.
type AuditQuery struct {
	// Principal, TaskID and Agent, when set, are matched exactly.
	Principal string
	TaskID    string
	Agent     string
	// Since and Until, when set, bound the records' times (inclusive).
	Since, Until time.Time
	// Limit is the most records returned: the newest that match.
	Limit int
}

// Match reports whether r is selected by q.
func (q *AuditQuery) Match(r *AuditRecord) bool {
	switch {
	case q.Principal != "" && r.Principal != q.Principal,
		q.TaskID != "" && r.TaskID != q.TaskID,
		q.Agent != "" && r.Agent != q.Agent,
		!q.Since.IsZero() && r.Time.Before(q.Since),
		!q.Until.IsZero() && r.Time.After(q.Until):
		return false
	}
	return true
}

// ParseAuditTime reads a time bound of an audit query: an RFC 3339 time,
// or a duration ("1h", "30m", "7d" for days) meaning that long before
// now.
func ParseAuditTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-01-02T15:04:05Z) nor a duration before now (1h, 30m, 7d)", s)
}
