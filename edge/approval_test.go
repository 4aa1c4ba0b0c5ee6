package edge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// approvalHarness is an edge whose echo agent needs an approval for every
// task, decided by admins (ops) and the approver bob, expiring after
// expire; it sweeps often, so expiries are settled soon after they are
// due.
func approvalHarness(t *testing.T, p edge.ApprovalPolicy) *harness {
	t.Helper()
	allow := func(context.Context, *url.URL) error { return nil }
	return authHarnessWith(t, edge.Config{Push: true, CheckWebhook: allow, Approvals: p, SweepEvery: 20 * time.Millisecond})
}

// streamAs opens a JSON-RPC stream as the holder of key.
func streamAs(t *testing.T, h *harness, key, method string, params any) *sseStream {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.url+"/agents/echo", strings.NewReader(rpcBody("s1", method, params)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: not a stream: %d %s", method, resp.StatusCode, b)
	}
	return &sseStream{t: t, resp: resp, r: newReader(resp)}
}

// approvals lists the pending approvals as key sees them.
func approvals(t *testing.T, h *harness, key string) (int, []schemas.ApprovalSummary) {
	t.Helper()
	code, _, body := as(t, key, "GET", h.url+"/a2a/admin/approvals", "", "")
	var out struct {
		Approvals []schemas.ApprovalSummary `json:"approvals"`
	}
	if code == http.StatusOK {
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("approvals: %s", body)
		}
	}
	return code, out.Approvals
}

// decide posts a decision as key.
func decide(t *testing.T, h *harness, key, task, decision, reason string) (int, string) {
	t.Helper()
	b, _ := json.Marshal(schemas.ApprovalDecision{Decision: decision, Reason: reason})
	code, _, body := as(t, key, "POST", h.url+"/a2a/admin/approvals/"+task, "application/json", string(b))
	return code, string(body)
}

// statusText is the text of a status's message.
func statusText(st schemas.TaskStatus) string {
	if st.Message == nil {
		return ""
	}
	return st.Message.Text()
}

// hookRecorder is a push receiver: the states it was told, in order.
type hookRecorder struct {
	mu     sync.Mutex
	states []schemas.TaskState
	seen   chan schemas.TaskState
}

func newHookRecorder(t *testing.T) (*hookRecorder, string) {
	hr := &hookRecorder{seen: make(chan schemas.TaskState, 64)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev schemas.StreamResponse
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &ev); err == nil && ev.StatusUpdate != nil {
			hr.mu.Lock()
			hr.states = append(hr.states, ev.StatusUpdate.Status.State)
			hr.mu.Unlock()
			hr.seen <- ev.StatusUpdate.Status.State
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return hr, srv.URL
}

// until reads the states the receiver is told until want.
func (hr *hookRecorder) until(t *testing.T, want schemas.TaskState) []schemas.TaskState {
	t.Helper()
	for {
		if recv(t, hr.seen, "a push notification of "+string(want)) == want {
			hr.mu.Lock()
			defer hr.mu.Unlock()
			return append([]schemas.TaskState(nil), hr.states...)
		}
	}
}

// waitAs polls GetTask as key until the task is in state.
func waitAs(t *testing.T, h *harness, key, id string, state schemas.TaskState) schemas.Task {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last schemas.Task
	for time.Now().Before(deadline) {
		last = mustResult[schemas.Task](t, rpcAs(t, h, key, "GetTask", map[string]any{"id": id}))
		if last.Status.State == state {
			return last
		}
		time.Sleep(10 * time.Millisecond) // polling an external condition
	}
	t.Fatalf("task %s never reached %s (last %s %q)", id, state, last.Status.State, statusText(last.Status))
	return last
}

func startPushSender(t *testing.T, h *harness) {
	t.Helper()
	s, err := workers.NewPushSender(h.b, workers.PushOptions{Client: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// A task of an agent that needs approval is stored and answered at once,
// waiting in AUTH_REQUIRED with a status that says for whom and why; it
// does not run, takes no message from its caller, and is listed for
// approvers only. Approved, it runs and completes; its caller's
// subscription and its push receiver see every step; a second decision is
// told the first; its history is the conversation, without the notices.
func TestApprovalHoldsATaskUntilApproved(t *testing.T) {
	h := approvalHarness(t, edge.ApprovalPolicy{Agents: []string{"echo"}, Approvers: []string{"bob"}})
	startPushSender(t, h)
	hook, hookURL := newHookRecorder(t)

	req := send(userMessage("deploy to prod"), false)
	req.Configuration.TaskPushNotificationConfig = &schemas.TaskPushNotificationConfig{ID: "hook", URL: hookURL}
	task := mustResult[schemas.SendMessageResponse](t, rpcAs(t, h, aliceKey, "SendMessage", req)).Task
	if task == nil || task.Status.State != schemas.TaskStateAuthRequired {
		t.Fatalf("a held task is answered as %+v, want AUTH_REQUIRED", task)
	}
	if txt := statusText(task.Status); !strings.Contains(txt, "Waiting for approval by an admin or bob") || !strings.Contains(txt, "agent echo") {
		t.Errorf("the status says %q", txt)
	}
	notice, _ := task.Status.Message.Metadata[schemas.MetaApproval].(map[string]any)
	if notice["state"] != "pending" {
		t.Errorf("the status message's %s is %v", schemas.MetaApproval, notice)
	}
	id := task.ID
	sub := streamAs(t, h, aliceKey, "SubscribeToTask", map[string]any{"id": id})
	if ev, _ := sub.next(); kind(sub.result(ev)) != "task:TASK_STATE_AUTH_REQUIRED" {
		t.Fatalf("the subscription opens with %s", kind(sub.result(ev)))
	}

	follow := userMessage("please")
	follow.TaskID = id
	mustError(t, rpcAs(t, h, aliceKey, "SendMessage", send(follow, false)), schemas.ErrUnsupportedOperation)

	if code, _ := approvals(t, h, aliceKey); code != http.StatusForbidden {
		t.Errorf("alice lists approvals: HTTP %d, want 403", code)
	}
	if code, _ := decide(t, h, aliceKey, id, "approve", ""); code != http.StatusForbidden {
		t.Errorf("alice approves her own task: HTTP %d, want 403", code)
	}
	code, list := approvals(t, h, bobKey)
	if code != http.StatusOK || len(list) != 1 || list[0].TaskID != id || list[0].Owner != "alice" || list[0].Reasons[0] != "agent echo" {
		t.Fatalf("bob's list: HTTP %d %+v", code, list)
	}
	if got := mustResult[schemas.Task](t, rpcAs(t, h, aliceKey, "GetTask", map[string]any{"id": id})); got.Status.State != schemas.TaskStateAuthRequired {
		t.Fatalf("before the decision the task is %s", got.Status.State)
	}

	if code, body := decide(t, h, bobKey, id, "approve", "change window open"); code != http.StatusOK || !strings.Contains(body, "approved") {
		t.Fatalf("bob's approval: HTTP %d %s", code, body)
	}
	if code, body := decide(t, h, opsKey, id, "deny", "too late"); code != http.StatusConflict || !strings.Contains(body, "already approved by bob") {
		t.Errorf("a second decision: HTTP %d %s", code, body)
	}

	// Both decisions are on the audit record, before and after each.
	recs, err := h.b.AuditRecords(context.Background(), schemas.AuditQuery{TaskID: id, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var decided []string
	for _, r := range recs {
		if r.Method == schemas.AuditActionApprovalDecide {
			decided = append(decided, r.Principal+" "+r.Decision+" "+r.Outcome)
		}
	}
	if len(decided) != 4 || decided[0] != "bob approved pending" || decided[1] != "bob approved ok" || decided[2] != "ops denied pending" || !strings.HasPrefix(decided[3], "ops denied -31409") {
		t.Errorf("the audit record of the decisions: %q", decided)
	}

	_, rs := sub.all()
	got := kinds(rs)
	if !strings.HasPrefix(got, "status:TASK_STATE_SUBMITTED") || !strings.HasSuffix(got, "status:TASK_STATE_COMPLETED") {
		t.Errorf("the subscription saw %s", got)
	}
	if txt := statusText(rs[0].StatusUpdate.Status); txt != "Approved by bob: change window open" {
		t.Errorf("the approval's notice says %q", txt)
	}
	states := hook.until(t, schemas.TaskStateCompleted)
	if len(states) < 3 || states[0] != schemas.TaskStateAuthRequired || states[1] != schemas.TaskStateSubmitted {
		t.Errorf("the push receiver was told %v", states)
	}
	done := mustResult[schemas.Task](t, rpcAs(t, h, aliceKey, "GetTask", map[string]any{"id": id}))
	for _, m := range done.History {
		if _, ok := m.Metadata[schemas.MetaApproval]; ok {
			t.Errorf("an approval notice is in the history: %q", m.Text())
		}
	}
	if done.History[0].Text() != "deploy to prod" || len(done.Artifacts) == 0 {
		t.Errorf("the approved task ran as %+v", done)
	}
	if _, list := approvals(t, h, opsKey); len(list) != 0 {
		t.Errorf("after the decision, approvals still lists %+v", list)
	}
}

// Denied, a task ends REJECTED with the approver's reason and never runs;
// a denial without a reason is refused, as is a decision on a task that
// needs none or on an unknown one.
func TestApprovalDenied(t *testing.T) {
	h := approvalHarness(t, edge.ApprovalPolicy{Agents: []string{"echo"}})
	id := mustResult[schemas.SendMessageResponse](t, rpcAs(t, h, aliceKey, "SendMessage", send(userMessage("rm -rf"), false))).Task.ID
	if code, body := decide(t, h, opsKey, id, "deny", " "); code != http.StatusBadRequest {
		t.Errorf("a denial without a reason: HTTP %d %s", code, body)
	}
	if code, body := decide(t, h, opsKey, id, "maybe", ""); code != http.StatusBadRequest {
		t.Errorf("an unknown decision: HTTP %d %s", code, body)
	}
	if code, body := decide(t, h, opsKey, schemas.NewID(), "approve", ""); code != http.StatusNotFound {
		t.Errorf("a decision on an unknown task: HTTP %d %s", code, body)
	}
	if code, body := decide(t, h, opsKey, id, "deny", "not during the freeze"); code != http.StatusOK {
		t.Fatalf("denial: HTTP %d %s", code, body)
	}
	got := mustResult[schemas.Task](t, rpcAs(t, h, aliceKey, "GetTask", map[string]any{"id": id}))
	if got.Status.State != schemas.TaskStateRejected || statusText(got.Status) != "Denied by ops: not during the freeze" || len(got.Artifacts) != 0 {
		t.Errorf("the denied task: %s %q, %d artifacts", got.Status.State, statusText(got.Status), len(got.Artifacts))
	}
	if code, body := decide(t, h, opsKey, id, "approve", ""); code != http.StatusConflict || !strings.Contains(body, "already denied by ops") {
		t.Errorf("approving a denied task: HTTP %d %s", code, body)
	}
}

// A pending approval expires: its task ends REJECTED saying so, or FAILED
// when its deadline comes before the approval's expiry. A decision after
// either is told so.
func TestApprovalExpiresAndCannotOutliveTheDeadline(t *testing.T) {
	h := approvalHarness(t, edge.ApprovalPolicy{Agents: []string{"echo"}, ExpireAfter: 300 * time.Millisecond})
	expiring := mustResult[schemas.SendMessageResponse](t, rpcAs(t, h, aliceKey, "SendMessage", send(userMessage("one"), false))).Task.ID
	msg := userMessage("two")
	msg.Metadata = map[string]any{schemas.MetaDeadline: "50ms"}
	late := mustResult[schemas.SendMessageResponse](t, rpcAs(t, h, aliceKey, "SendMessage", send(msg, false))).Task
	if !strings.Contains(statusText(late.Status), "expires at") {
		t.Errorf("the deadline task's status: %q", statusText(late.Status))
	}

	failed := waitAs(t, h, aliceKey, late.ID, schemas.TaskStateFailed)
	if !strings.Contains(statusText(failed.Status), "Deadline exceeded") {
		t.Errorf("the task past its deadline: %q", statusText(failed.Status))
	}
	rejected := waitAs(t, h, aliceKey, expiring, schemas.TaskStateRejected)
	if !strings.Contains(statusText(rejected.Status), "the approval expired") {
		t.Errorf("the expired task: %q", statusText(rejected.Status))
	}
	if code, body := decide(t, h, opsKey, expiring, "approve", ""); code != http.StatusConflict || !strings.Contains(body, "already expired") {
		t.Errorf("approving an expired approval: HTTP %d %s", code, body)
	}
	// The sweep records the expiry after it stores it, so the record can
	// land after the refused decision's own.
	eventuallyTrue(t, "the expiry's audit record", func() bool {
		recs, err := h.b.AuditRecords(context.Background(), schemas.AuditQuery{TaskID: expiring, Limit: 100})
		return err == nil && slices.ContainsFunc(recs, func(r schemas.AuditRecord) bool {
			return r.Method == schemas.AuditActionApprovalExpire && r.Decision == schemas.AuditDenied
		})
	})
}

// Approvers deciding the same approvals at once: exactly one decision of
// each is stored, the other told who came first, and the task ends as the
// winner decided.
func TestRacingApproversGetOneDecision(t *testing.T) {
	h := approvalHarness(t, edge.ApprovalPolicy{Agents: []string{"echo"}, Approvers: []string{"bob"}})
	const n = 8
	for i := range n {
		id := mustResult[schemas.SendMessageResponse](t, rpcAs(t, h, aliceKey, "SendMessage", send(userMessage("race"), false))).Task.ID
		type result struct {
			code int
			body string
		}
		res := make([]result, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for j, d := range []struct{ key, decision, reason string }{{bobKey, "approve", "ok"}, {opsKey, "deny", "no"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				code, body := decide(t, h, d.key, id, d.decision, d.reason)
				res[j] = result{code, body}
			}()
		}
		close(start)
		wg.Wait()
		var want schemas.TaskState
		switch {
		case res[0].code == http.StatusOK && res[1].code == http.StatusConflict:
			want = schemas.TaskStateCompleted
		case res[1].code == http.StatusOK && res[0].code == http.StatusConflict:
			want = schemas.TaskStateRejected
		default:
			t.Fatalf("race %d: the decisions were answered %+v", i, res)
		}
		waitAs(t, h, aliceKey, id, want)
	}
}

// What requires an approval: a trust level (here the one alice's calls
// get), a skill of an agent the message asks for; everything else runs at
// once.
func TestApprovalByTrustLevelAndSkill(t *testing.T) {
	allow := func(context.Context, *url.URL) error { return nil }
	h := authHarnessWith(t, edge.Config{CheckWebhook: allow, SweepEvery: 20 * time.Millisecond,
		Approvals: edge.ApprovalPolicy{Skills: map[string][]string{"echo": {"ask"}}},
		Trust: edge.TrustPolicy{Rules: []edge.TrustRule{{Level: "guarded", Principals: []string{"alice"}}},
			Levels: map[string]edge.TrustLevel{"guarded": {Approval: true}}}})
	state := func(key string, meta map[string]any) (schemas.TaskState, string) {
		m := userMessage("hello")
		m.Metadata = meta
		task := mustResult[schemas.SendMessageResponse](t, rpcAs(t, h, key, "SendMessage", send(m, false))).Task
		return task.Status.State, statusText(task.Status)
	}
	if st, txt := state(aliceKey, nil); st != schemas.TaskStateAuthRequired || !strings.Contains(txt, "trust level guarded") {
		t.Errorf("alice's task: %s %q", st, txt)
	}
	if st, _ := state(bobKey, nil); st != schemas.TaskStateCompleted {
		t.Errorf("bob's task: %s", st)
	}
	if st, txt := state(bobKey, map[string]any{"a2abus.skill": "ask"}); st != schemas.TaskStateAuthRequired || !strings.Contains(txt, "skill ask of agent echo") {
		t.Errorf("bob's task asking for the skill: %s %q", st, txt)
	}
	if st, _ := state(bobKey, map[string]any{"a2abus.skill": "echo"}); st != schemas.TaskStateCompleted {
		t.Errorf("bob's task asking for another skill: %s", st)
	}
}
