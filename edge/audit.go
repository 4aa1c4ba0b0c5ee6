package edge

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// The audit record, the edge's part: every call of an audited trust level
// (TrustLevel.Audit) and every admin action is appended to the bus's
// append-only audit stream (bus/audit.go) as schemas.AuditRecord — names,
// addresses, codes, never a body, a metadata value or a credential.
//
// A call is recorded before it runs and after. The first record is the
// gap-free part: if it cannot be stored the call is refused
// (ErrUnavailable, "not run") rather than run unrecorded. The second
// records how the call ended; the call has run by then, so a failure to
// store it is logged at warn and counted (a2a_audit_failures_total), and
// the pair's first record still shows the call was made. One record after
// the call instead of two would leave a call that crashed the edge, or
// whose record failed, with no trace at all; one record before only would
// never say how it ended. A call of an unaudited level pays one bool test
// (auditCalls), nothing else.

// errAuditNotWritten is why an audited call whose first record could not
// be stored was refused.
const errAuditNotWritten = "the audit record of this call could not be written, so the call was not run; retry shortly"

// auditCalls is the interceptor that records the calls of audited levels
// (call.audited, set by admitTrust) before they run — refusing one whose
// record cannot be stored — and after.
func (s *Server) auditCalls(ctx context.Context, inv *invocation, next invoker) (any, error) {
	if !inv.call.audited {
		return next(ctx, inv)
	}
	r := s.callRecord(inv)
	r.Decision, r.Outcome = schemas.AuditAdmitted, schemas.AuditPending
	if err := s.appendAudit(ctx, r); err != nil {
		s.log.Warn("an audited call refused: its audit record could not be written",
			"op", inv.op, "agent", inv.call.agent, "principal", inv.call.caller.principal, "err", err)
		e := schemas.Errorf(schemas.ErrUnavailable, errAuditNotWritten)
		e.RetryAfter = 5
		return nil, e
	}
	res, err := next(ctx, inv)
	decision := schemas.AuditAdmitted
	if !inv.ran {
		decision = schemas.AuditRefused // by an interceptor after this one (admission)
	}
	s.auditOutcome(ctx, inv, res, decision, err)
	return res, err
}

// auditAfter records a call's end (or its refusal before it ran) without
// a result; a record that cannot be stored is logged and counted.
func (s *Server) auditAfter(ctx context.Context, inv *invocation, decision string, err error) {
	s.auditOutcome(ctx, inv, nil, decision, err)
}

func (s *Server) auditOutcome(ctx context.Context, inv *invocation, res any, decision string, err error) {
	r := s.callRecord(inv)
	if id, _ := resultTask(res); id != "" {
		r.TaskID = id
	} else if inv.call.madeTask != "" {
		r.TaskID = inv.call.madeTask
	}
	r.Decision, r.Outcome = decision, auditOutcome(ctx, err)
	// The call's own context may have ended (a client gone): its record
	// is written all the same.
	if aerr := s.appendAudit(context.WithoutCancel(ctx), r); aerr != nil {
		s.log.Warn("the audit record of a call's outcome could not be written (the call has run; its first record stands)",
			"op", inv.op, "agent", inv.call.agent, "principal", inv.call.caller.principal, "task_id", r.TaskID, "outcome", r.Outcome, "err", aerr)
	}
}

// auditOutcome is err's outcome; a call whose client went away is
// "canceled".
func auditOutcome(ctx context.Context, err error) string {
	var e *schemas.Error
	if err != nil && ctx.Err() != nil && !errors.As(err, &e) {
		return "canceled"
	}
	return schemas.AuditOutcome(err)
}

// appendAudit stores r, counting it by decision, or counting the failure.
func (s *Server) appendAudit(ctx context.Context, r schemas.AuditRecord) error {
	if err := s.audit.AppendAudit(ctx, r); err != nil {
		s.m.auditFails.Inc()
		return err
	}
	s.m.auditRecords.Inc(r.Decision)
	return nil
}

// callRecord is the record of inv without its decision and outcome.
func (s *Server) callRecord(inv *invocation) schemas.AuditRecord {
	c := inv.call
	r := schemas.AuditRecord{
		Time: time.Now().UTC(), Kind: schemas.AuditCall,
		Principal: c.caller.principal, Tenant: c.caller.tenant, Trust: c.trust,
		Method: inv.op, Agent: c.agent, TaskID: requestTaskID(inv.req),
	}
	if c.source.IsValid() {
		r.Source = c.source.String()
	}
	if c.obs != nil {
		r.Binding = c.obs.binding
	}
	return r
}

// auditAdmin records an admin action in the audit record and returns an
// error (matching schemas.ErrUnavailable) when the record was not stored.
// r is the admin's request (its admin principal, as admitAdmin let it
// through, its source address and trust level); nil for an action of the
// edge itself (an approval that expired). action names it
// (schemas.AuditActionRegistryPut, "approval.decide", …); agent and taskID
// what it acted on ("" if nothing); decision one of schemas.AuditAdmitted,
// AuditRefused, AuditApproved, AuditDenied; outcome schemas.AuditPending
// for the record written before the action is made, else AuditOK or
// schemas.AuditOutcome(err).
//
// An action recorded gap-free appends a record with AuditPending before
// it is made, and is not made if that fails (answer 503: the record could
// not be written), then appends its outcome, whose failure is only logged
// (it is counted and the first record stands). Never pass a body, a
// reason text a client wrote, or a credential.
func (s *Server) auditAdmin(ctx context.Context, r *http.Request, action, agent, taskID, decision, outcome string) error {
	rec := schemas.AuditRecord{
		Time: time.Now().UTC(), Kind: schemas.AuditAdmin, Method: action, Agent: agent, TaskID: taskID,
		Decision: decision, Outcome: outcome, Binding: "process",
	}
	if r != nil {
		who := adminCaller(r)
		rec.Principal, rec.Tenant, rec.Binding = who.principal, who.tenant, "admin"
		if src := s.cfg.Trust.source(r); src.IsValid() {
			rec.Source = src.String()
			rec.Trust = s.trust.level(src, who).name
		}
	}
	return s.appendAudit(ctx, rec)
}

// auditAdminBefore is the gap-free first record of an admin action made
// through the admin API: it answers 503 and returns false when the record
// cannot be stored, and the action must not be made.
//
// taskID is the task the action is on ("" for none), decision what it
// decides (schemas.AuditAdmitted for a change, AuditApproved or
// AuditDenied for an approval).
func (s *Server) auditAdminBefore(w http.ResponseWriter, r *http.Request, action, agent, taskID, decision string) bool {
	if err := s.auditAdmin(r.Context(), r, action, agent, taskID, decision, schemas.AuditPending); err != nil {
		s.log.Warn("an admin action refused: its audit record could not be written", "action", action, "agent", agent, "err", err)
		w.Header().Set("Retry-After", "5")
		writePlain(w, http.StatusServiceUnavailable, "the audit record of this change could not be written, so the change was not made; retry shortly")
		return false
	}
	return true
}

// auditAdminAfter records how an admin action made through the admin API
// ended; a record that cannot be stored is logged.
func (s *Server) auditAdminAfter(r *http.Request, action, agent, taskID, decision string, err error) {
	if aerr := s.auditAdmin(context.WithoutCancel(r.Context()), r, action, agent, taskID, decision, schemas.AuditOutcome(err)); aerr != nil {
		s.log.Warn("the audit record of an admin action's outcome could not be written (the action was made; its first record stands)",
			"action", action, "agent", agent, "err", aerr)
	}
}

// auditMax bounds the records one read of the audit route returns.
const auditMax = 10000

// handleAudit answers the audit records a query selects, oldest first
// (newest last): ?principal= &task= &agent= (exact), &since= &until= (RFC
// 3339, or a duration before now: 1h, 7d), &limit= (default 100, at most
// auditMax: the newest that match). Read by admins only (its route's
// PolicyAdmin); the records hold no bodies or credentials.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	q, err := auditQuery(r.URL.Query(), time.Now())
	if err != nil {
		writePlain(w, http.StatusBadRequest, err.Error())
		return
	}
	recs, err := s.audit.AuditRecords(r.Context(), q)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		writePlain(w, http.StatusServiceUnavailable, "the audit record cannot be read now; retry ("+schemas.AsError(err).Message+")")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": recs})
}

// auditQuery reads the audit route's query parameters.
func auditQuery(v map[string][]string, now time.Time) (schemas.AuditQuery, error) {
	get := func(k string) string {
		if vs := v[k]; len(vs) > 0 {
			return strings.TrimSpace(vs[0])
		}
		return ""
	}
	q := schemas.AuditQuery{Principal: get("principal"), TaskID: get("task"), Agent: get("agent"), Limit: 100}
	var err error
	if s := get("since"); s != "" {
		if q.Since, err = schemas.ParseAuditTime(s, now); err != nil {
			return q, errBadParam("since", err)
		}
	}
	if s := get("until"); s != "" {
		if q.Until, err = schemas.ParseAuditTime(s, now); err != nil {
			return q, errBadParam("until", err)
		}
	}
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > auditMax {
			return q, errBadParam("limit", errString("a number from 1 to "+strconv.Itoa(auditMax)))
		}
		q.Limit = n
	}
	return q, nil
}

type errString string

func (e errString) Error() string { return string(e) }

func errBadParam(name string, err error) error { return errString(name + ": " + err.Error()) }
