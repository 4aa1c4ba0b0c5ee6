package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// Approval routing: an agent, a skill of an agent, or a trust level may
// require that a person approve a task before it runs. The requireApproval
// interceptor decides it for every new task of every binding; the bus
// lifecycle holds such a task in AUTH_REQUIRED (bus/approval.go) until an
// approver decides, its approval expires, or its deadline comes. Approvers
// — admin principals and the principals the policy names — list and
// decide the approvals of their tenant through two routes of the route
// table (PolicyApprover):
//
//	GET  /a2a/admin/approvals         the pending ones, soonest to expire first
//	POST /a2a/admin/approvals/{task}  {"decision": "approve"|"deny", "reason": "…"}

// ApprovalPolicy says which new tasks need an approval, who gives it, and
// how long it may wait. The zero policy requires none (a trust level may
// still: TrustLevel.Approval).
type ApprovalPolicy struct {
	// Agents whose every task needs an approval.
	Agents []string
	// Skills of agents (agent → skill ids) whose tasks need one: a task
	// that asks for one of them (callSkill: schemas.MetaSkill, or the
	// agent's only skill).
	Skills map[string][]string
	// Approvers are the principals, besides admin principals, who decide.
	Approvers []string
	// ExpireAfter is how long an approval waits for a decision before the
	// task is REJECTED; default 24h. A task's deadline ends it sooner.
	ExpireAfter time.Duration
}

// requireApproval marks a new task that needs an approval with what
// requires it; the task is created held (createTask, bus.Submit).
func (s *Server) requireApproval(ctx context.Context, inv *invocation, next invoker) (any, error) {
	msg := newTask(inv)
	if msg == nil {
		return next(ctx, inv)
	}
	c := inv.call
	p := &s.cfg.Approvals
	var reasons []string
	if slices.Contains(p.Agents, c.agent) {
		reasons = append(reasons, "agent "+c.agent)
	}
	if skills := p.Skills[c.agent]; len(skills) > 0 {
		if sk := s.callSkill(c, msg); sk != "" && slices.Contains(skills, sk) {
			reasons = append(reasons, "skill "+sk+" of agent "+c.agent)
		}
	}
	if c.level != nil && c.level.Approval {
		reasons = append(reasons, "trust level "+c.trust)
	}
	if len(reasons) > 0 {
		c.approval = &schemas.Approval{Reasons: reasons, Approvers: p.approvers()}
	}
	return next(ctx, inv)
}

// approvers says who decides, for the notices.
func (p *ApprovalPolicy) approvers() string {
	if len(p.Approvers) == 0 {
		return "an admin"
	}
	return "an admin or " + strings.Join(p.Approvers, ", ")
}

func (p *ApprovalPolicy) expireAfter() time.Duration {
	if p.ExpireAfter > 0 {
		return p.ExpireAfter
	}
	return 24 * time.Hour
}

// approvalTimes is the approval c's new task waits for, with its times:
// requested now, expiring after the policy's time or at the task's
// deadline, whichever is first; nil when none is required.
func (s *a2aService) approvalTimes(c *call) *schemas.Approval {
	if c.approval == nil {
		return nil
	}
	a := *c.approval
	now := time.Now().UTC().Truncate(time.Millisecond)
	a.RequestedAt = schemas.Timestamp{Time: now}
	a.ExpiresAt, a.ExpiresFor = schemas.Timestamp{Time: now.Add(s.cfg.Approvals.expireAfter())}, schemas.ApprovalExpired
	if !c.deadline.IsZero() && c.deadline.Before(a.ExpiresAt.Time) {
		a.ExpiresAt, a.ExpiresFor = schemas.Timestamp{Time: c.deadline.UTC().Truncate(time.Millisecond)}, schemas.ApprovalDeadline
	}
	return &a
}

// approvalsMax bounds one listing of pending approvals.
const approvalsMax = 500

// approvalDecisionMax bounds a decision's body.
const approvalDecisionMax = 4 << 10

func (s *Server) handleApprovals(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > approvalsMax {
			writePlain(w, http.StatusBadRequest, "limit is a number from 1 to "+strconv.Itoa(approvalsMax))
			return
		}
		limit = n
	}
	who := adminCaller(r)
	list, err := s.index.PendingApprovals(r.Context(), who.tenant, limit)
	if err != nil {
		writeBusError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": list})
}

func (s *Server) handleApprovalDecision(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("task")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writePlain(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("a decision is at most %d KiB", approvalDecisionMax>>10))
		return
	}
	var d schemas.ApprovalDecision
	if err := json.Unmarshal(body, &d); err != nil {
		writePlain(w, http.StatusBadRequest, `the body is not a decision ({"decision": "approve" or "deny", "reason": "why"}): `+err.Error())
		return
	}
	if err := d.Validate(); err != nil {
		writeBusError(w, err)
		return
	}
	// The decision is on the record before it is made, or not made
	// (gap-free); its outcome after, whatever it was.
	decision := schemas.AuditApproved
	if d.Decision == "deny" {
		decision = schemas.AuditDenied
	}
	if !s.auditAdminBefore(w, r, schemas.AuditActionApprovalDecide, "", id, decision) {
		return
	}
	who := adminCaller(r)
	rec, err := s.approvals.DecideApproval(r.Context(), bus.ApprovalDecider{Principal: who.principal, Tenant: who.tenant}, id, d)
	agent := ""
	if rec != nil {
		agent = rec.Agent
	}
	s.auditAdminAfter(r, schemas.AuditActionApprovalDecide, agent, id, decision, err)
	if err != nil {
		writeBusError(w, err)
		return
	}
	s.log.Info("approval decided", "task_id", id, "agent", rec.Agent, "decision", rec.Approval.Decision, "by", rec.Approval.DecidedBy)
	writeJSON(w, http.StatusOK, map[string]any{"taskId": id, "state": rec.Task.Status.State, "decision": rec.Approval.Decision, "decidedBy": rec.Approval.DecidedBy})
}

// writeBusError answers a side route's failure: the error's own status and
// message when it is a protocol error (a refusal a person acts on), else
// unavailable.
func writeBusError(w http.ResponseWriter, err error) {
	var pe *schemas.Error
	if errors.As(err, &pe) && pe.HTTPStatus != http.StatusInternalServerError && pe.HTTPStatus != http.StatusServiceUnavailable {
		writePlain(w, pe.HTTPStatus, pe.Message)
		return
	}
	w.Header().Set("Retry-After", "5")
	writePlain(w, http.StatusServiceUnavailable, "the bus cannot be reached now; retry ("+schemas.AsError(err).Message+")")
}
