package schemas

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Approvals: a task that needs a person's approval before it runs (its
// agent, the skill it asks for, or its caller's trust level requires it)
// is stored with its Approval pending and waits in TASK_STATE_AUTH_REQUIRED
// — A2A's state for a task that cannot go on until someone authorizes it,
// where INPUT_REQUIRED would ask the caller for a message the caller
// cannot give. An approver's decision, the approval's expiry or the task's
// deadline settles it, once: approved, the task is SUBMITTED and its work
// queued; denied or expired, it ends REJECTED; past its deadline, FAILED.

// The decisions an approval ends with.
const (
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
	// ApprovalDeadline: the task's deadline came first.
	ApprovalDeadline = "deadline"
)

// MetaApproval, in the metadata of the status messages an approval writes
// (waiting, approved, denied, expired), describes it for clients that act
// on it: an ApprovalNotice. Those messages are notices, kept in the
// task's status and out of its history, so the agent's conversation is
// the caller's and its own.
const MetaApproval = "a2abus.approval"

// Approval is a task's approval as its record keeps it. Clients see the
// notices it writes, never the record.
type Approval struct {
	// Reasons say what requires it: "agent deploy", "skill deploy/prod",
	// "trust level public".
	Reasons []string `json:"reasons"`
	// Approvers says who may decide, as people read it.
	Approvers   string    `json:"approvers,omitempty"`
	RequestedAt Timestamp `json:"requestedAt"`
	// ExpiresAt is when it is settled without a decision: the configured
	// expiry or the task's deadline, whichever is first (ExpiresFor).
	ExpiresAt  Timestamp `json:"expiresAt"`
	ExpiresFor string    `json:"expiresFor,omitempty"` // ApprovalExpired or ApprovalDeadline
	// Decision is "" while it is pending, else one of the Approval*
	// decisions; DecidedBy the approver (or "expiry"), Reason theirs.
	Decision  string     `json:"decision,omitempty"`
	DecidedBy string     `json:"decidedBy,omitempty"`
	DecidedAt *Timestamp `json:"decidedAt,omitempty"`
	Reason    string     `json:"reason,omitempty"`
}

// Pending reports whether a is waiting for a decision.
func (a *Approval) Pending() bool { return a != nil && a.Decision == "" }

// ApprovalNotice is MetaApproval's value.
type ApprovalNotice struct {
	State     string     `json:"state"` // "pending" or a decision
	Reasons   []string   `json:"reasons,omitempty"`
	ExpiresAt *Timestamp `json:"expiresAt,omitempty"`
	DecidedBy string     `json:"decidedBy,omitempty"`
	Reason    string     `json:"reason,omitempty"`
}

// ApprovalSummary is one pending approval as approvers list it: the task
// it holds and why, never the task's messages.
type ApprovalSummary struct {
	TaskID      string    `json:"taskId"`
	ContextID   string    `json:"contextId"`
	Agent       string    `json:"agent"`
	Tenant      string    `json:"tenant,omitempty"`
	Owner       string    `json:"owner,omitempty"`
	Origin      string    `json:"origin,omitempty"`
	Trust       string    `json:"trust,omitempty"`
	Reasons     []string  `json:"reasons"`
	Approvers   string    `json:"approvers,omitempty"`
	RequestedAt Timestamp `json:"requestedAt"`
	ExpiresAt   Timestamp `json:"expiresAt"`
	ExpiresFor  string    `json:"expiresFor,omitempty"`
}

// ApprovalDecision is an approver's answer to a pending approval.
type ApprovalDecision struct {
	// Decision is "approve" or "deny".
	Decision string `json:"decision"`
	// Reason is why; required to deny, so the caller is told.
	Reason string `json:"reason,omitempty"`
}

// ApprovalDecisionMaxReason bounds a decision's reason: it goes into the
// task's status message.
const ApprovalDecisionMaxReason = 1024

// Validate says what is wrong with d, if anything.
func (d ApprovalDecision) Validate() error {
	switch d.Decision {
	case "approve":
	case "deny":
		if strings.TrimSpace(d.Reason) == "" {
			return Errorf(ErrInvalidParams, "a denial needs a reason: the caller is told it")
		}
	default:
		return Errorf(ErrInvalidParams, "decision must be \"approve\" or \"deny\", not %q", d.Decision)
	}
	if len(d.Reason) > ApprovalDecisionMaxReason {
		return Errorf(ErrInvalidParams, "the reason is %d bytes; at most %d", len(d.Reason), ApprovalDecisionMaxReason)
	}
	return nil
}

// ErrAwaitingApproval refuses a client's message to a task whose approval
// is pending (ApplyContinue): only an approver moves it on.
var ErrAwaitingApproval = errors.New("task is waiting for approval")

// ApprovalMessage is the notice a of task taskID writes with state (a
// decision, or "pending"): its text says what waits for whom, or what was
// decided, by whom and why.
func ApprovalMessage(a *Approval, state string) *Message {
	n := ApprovalNotice{State: state}
	var text string
	switch state {
	case ApprovalApproved:
		text = "Approved by " + a.DecidedBy + "."
		if a.Reason != "" {
			text = "Approved by " + a.DecidedBy + ": " + a.Reason
		}
		n.DecidedBy, n.Reason = a.DecidedBy, a.Reason
	case ApprovalDenied:
		text = "Denied by " + a.DecidedBy + ": " + a.Reason
		n.DecidedBy, n.Reason = a.DecidedBy, a.Reason
	case ApprovalExpired:
		text = fmt.Sprintf("No approver decided by %s; the approval expired and the task was not run.", a.ExpiresAt.UTC().Format(time.RFC3339))
	case ApprovalDeadline:
		text = fmt.Sprintf("Deadline exceeded at %s while waiting for approval; the task was not run.", a.ExpiresAt.UTC().Format(time.RFC3339))
	default:
		n.Reasons = a.Reasons
		exp := a.ExpiresAt
		n.ExpiresAt = &exp
		who := a.Approvers
		if who == "" {
			who = "an approver"
		}
		text = fmt.Sprintf("Waiting for approval by %s (%s required it); it expires at %s.", who, strings.Join(a.Reasons, ", "), exp.UTC().Format(time.RFC3339))
	}
	return &Message{MessageID: NewID(), Role: RoleAgent, Parts: []Part{TextPart(text)}, Metadata: map[string]any{MetaApproval: n}}
}

// approvalNotice reports whether m is an approval's notice (kept out of
// history).
func approvalNotice(m *Message) bool {
	if m == nil || m.Metadata == nil {
		return false
	}
	_, ok := m.Metadata[MetaApproval]
	return ok
}
