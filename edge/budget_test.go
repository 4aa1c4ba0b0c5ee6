package edge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// testClock is a clock a test moves by hand (bus.BudgetPolicy.Now).
type testClock struct{ ns atomic.Int64 }

func newTestClock(t time.Time) *testClock { c := &testClock{}; c.ns.Store(t.UnixNano()); return c }
func (c *testClock) now() time.Time       { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) add(d time.Duration)  { c.ns.Add(int64(d)) }

// budgetAuth authenticates alice, bob and the admin ops, all of tenant
// acme.
func budgetAuth(t *testing.T) *auth.Authenticator {
	t.Helper()
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{
		{Key: aliceKey, Principal: "alice", Tenants: []string{"acme"}}, {Key: bobKey, Principal: "bob", Tenants: []string{"acme"}},
		{Key: opsKey, Principal: "ops", Tenants: []string{"acme"}, Admin: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// sendAs sends a blocking SendMessage to agent at base with key.
func (h *harness) sendAs(base, key, agent string, req schemas.SendMessageRequest) *rpcReply {
	h.t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": req})
	return h.post(base, "/agents/"+agent, string(body), map[string]string{"A2A-Version": "1.0", "X-API-Key": key})
}

// budgetsOf reads GET /a2a/budget at base as key.
func budgetsOf(t *testing.T, base, key, query string) (int, schemas.BudgetList) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/a2a/budget"+query, nil)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l schemas.BudgetList
	_ = json.NewDecoder(resp.Body).Decode(&l)
	return resp.StatusCode, l
}

// listedTasks is how many tasks ListTasks shows key at base.
func (h *harness) listedTasks(base, key string) int {
	h.t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`
	r := h.post(base, "/agents/echo", body, map[string]string{"A2A-Version": "1.0", "X-API-Key": key})
	return len(mustResult[schemas.ListTasksResponse](h.t, r).Tasks)
}

// Two edges and two workers on one JetStream share one budget: alice's
// three tasks a window, sent alternately to each edge, pass; the fourth
// is refused wherever it lands — 429 semantics (RATE_LIMITED) saying
// which budget, what is left and when it resets, Retry-After the seconds
// until then — and nothing of it is stored. The next window (the clock
// moved) starts at zero.
func TestTwoEdgesAndTwoWorkersShareOneTasksBudget(t *testing.T) {
	clk := newTestClock(time.Date(2030, 5, 6, 7, 15, 0, 0, time.UTC))
	cfg := edge.Config{DefaultAgent: "echo", Auth: budgetAuth(t), Budgets: bus.BudgetPolicy{
		Rules: []bus.BudgetRule{{Scope: schemas.BudgetScopePrincipal, Default: true, Period: time.Hour, Tasks: 3}},
		Now:   clk.now,
	}}
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, runners: 2, edge: cfg})
	second := h.startEdge(bustest.Connect(t, h.srv, bustest.Options{}), cfg)
	h.waitAgent(second, "echo")
	edges := []string{h.url, second}

	for i := range 3 {
		task := mustResult[schemas.SendMessageResponse](t, h.sendAs(edges[i%2], aliceKey, "echo", send(userMessage("hi"), false))).Task
		if task == nil || task.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("task %d through edge %d: %+v", i, i%2, task)
		}
	}
	for i, base := range edges {
		r := mustError(t, h.sendAs(base, aliceKey, "echo", send(userMessage("one too many"), false)), schemas.ErrRateLimited)
		for _, says := range []string{"tasks budget of principal \"alice\"", "3 of 3", "0 left", "resets at 2030-05-06T08:00:00Z"} {
			if !strings.Contains(r.Error.Message, says) {
				t.Errorf("edge %d's refusal %q does not say %q", i, r.Error.Message, says)
			}
		}
		if ra := r.header.Get("Retry-After"); ra != strconv.Itoa(45*60) {
			t.Errorf("edge %d: Retry-After %q, want the 2700 s to the window's end", i, ra)
		}
	}
	// Nothing of the refused tasks: three tasks, three counted.
	if n := h.listedTasks(second, aliceKey); n != 3 {
		t.Fatalf("alice has %d tasks stored, want 3", n)
	}
	status, l := budgetsOf(t, h.url, aliceKey, "")
	if status != http.StatusOK || len(l.Budgets) != 1 || l.Budgets[0].Used != 3 || l.Budgets[0].Left != 0 ||
		!l.Budgets[0].ResetsAt.Equal(time.Date(2030, 5, 6, 8, 0, 0, 0, time.UTC)) || l.Principal != "alice" {
		t.Fatalf("alice's budgets: %d %+v", status, l)
	}
	// bob's budget is his own.
	mustResult[schemas.SendMessageResponse](t, h.sendAs(second, bobKey, "echo", send(userMessage("hi"), false)))

	clk.add(45 * time.Minute)
	mustResult[schemas.SendMessageResponse](t, h.sendAs(second, aliceKey, "echo", send(userMessage("a new hour"), false)))
	if _, l := budgetsOf(t, h.url, aliceKey, ""); l.Budgets[0].Used != 1 || !l.Budgets[0].ResetsAt.Equal(time.Date(2030, 5, 6, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("alice's budgets in the next window: %+v", l)
	}
}

// A task the service refuses after its budget was charged (here a passed
// deadline, checked by the lifecycle's caller after the interceptors) is
// refunded: alice's one task a window is still there for the next send.
// Only admins read another's budgets.
func TestARefusedTaskIsRefunded(t *testing.T) {
	cfg := edge.Config{DefaultAgent: "echo", Auth: budgetAuth(t), Budgets: bus.BudgetPolicy{Rules: []bus.BudgetRule{
		{Scope: schemas.BudgetScopePrincipal, Default: true, Period: time.Hour, Tasks: 1},
		{Scope: schemas.BudgetScopeTenant, ID: "acme", Period: 24 * time.Hour, Tasks: 100},
	}}}
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, edge: cfg})
	m := userMessage("too late")
	m.Metadata = map[string]any{schemas.MetaDeadline: time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)}
	mustError(t, h.sendAs(h.url, aliceKey, "echo", schemas.SendMessageRequest{Message: &m}), schemas.ErrInvalidParams)
	_, l := budgetsOf(t, h.url, aliceKey, "")
	if len(l.Budgets) != 2 || l.Budgets[0].Used != 0 || l.Budgets[1].Scope != schemas.BudgetScopeTenant || l.Budgets[1].Used != 0 {
		t.Fatalf("budgets after a refused task: %+v", l)
	}
	mustResult[schemas.SendMessageResponse](t, h.sendAs(h.url, aliceKey, "echo", send(userMessage("in time"), false)))
	mustError(t, h.sendAs(h.url, aliceKey, "echo", send(userMessage("over"), false)), schemas.ErrRateLimited)

	if status, _ := budgetsOf(t, h.url, bobKey, "?principal=alice"); status != http.StatusForbidden {
		t.Fatalf("bob reading alice's budgets: HTTP %d", status)
	}
	status, l := budgetsOf(t, h.url, opsKey, "?principal=alice")
	if status != http.StatusOK || l.Principal != "alice" || l.Budgets[0].Used != 1 || l.Budgets[1].Used != 1 {
		t.Fatalf("ops reading alice's budgets: %d %+v", status, l)
	}
	if status, _ := budgetsOf(t, h.url, aliceKey, "?agent=x"); status != http.StatusBadRequest {
		t.Fatalf("an unknown parameter: HTTP %d", status)
	}
}

// fakeChat is an OpenAI-compatible chat-completions server answering
// every request with the workers' fixture: a streamed answer whose usage
// is 21 tokens.
func fakeChat(t *testing.T, calls *atomic.Int32) *httptest.Server {
	fixture, err := os.ReadFile("../workers/testdata/openai-chat-stream.txt")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, part := range strings.SplitAfter(string(fixture), "\n\n") {
			_, _ = w.Write([]byte(part))
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Tokens are counted from two workers (two llm agents, each with its
// worker on its own connection) against alice's one tokens budget; once
// it is spent — by the completion that crossed it, which is counted whole
// — a new task for either is refused at the edge, saying so, and a
// worker that finds it spent when a run starts fails the task without
// calling the model.
func TestTokensBudgetOfTheLLMKind(t *testing.T) {
	var calls atomic.Int32
	chat := fakeChat(t, &calls)
	pol := bus.BudgetPolicy{Rules: []bus.BudgetRule{{Scope: schemas.BudgetScopePrincipal, ID: "alice", Period: 24 * time.Hour, Tokens: 50}}}
	srv, b := bustest.New(t, bustest.Options{})
	h := &harness{t: t, srv: srv, b: b}
	for _, name := range []string{"chat-a", "chat-b"} {
		wb := bustest.Connect(t, srv, bustest.Options{})
		h.startRunner(wb, workers.Definition{Name: name, Card: schemas.AgentCard{Name: name},
			Agent: workers.LLM{BaseURL: chat.URL + "/v1", Model: "m", HTTP: chat.Client(), Budget: wb.Budgets(pol)}})
	}
	h.url = h.startEdge(b, edge.Config{DefaultAgent: "chat-a", Auth: budgetAuth(t), Budgets: pol})
	h.waitAgent(h.url, "chat-a")
	h.waitAgent(h.url, "chat-b")

	for i, agent := range []string{"chat-a", "chat-b", "chat-a"} {
		task := mustResult[schemas.SendMessageResponse](t, h.sendAs(h.url, aliceKey, agent, send(userMessage("hi"), false))).Task
		if task == nil || task.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("task %d at %s: %+v", i, agent, task)
		}
	}
	_, l := budgetsOf(t, h.url, aliceKey, "")
	if len(l.Budgets) != 1 || l.Budgets[0].Kind != schemas.BudgetTokens || l.Budgets[0].Used != 63 || l.Budgets[0].Left != 0 {
		t.Fatalf("alice's budgets after three completions: %+v", l)
	}
	r := mustError(t, h.sendAs(h.url, aliceKey, "chat-b", send(userMessage("more"), false)), schemas.ErrRateLimited)
	if !strings.Contains(r.Error.Message, "tokens budget of principal \"alice\"") || !strings.Contains(r.Error.Message, "63 of 50") {
		t.Fatalf("refusal: %s", r.Error.Message)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("the model was called %d times, want 3", n)
	}
	// bob has no tokens budget; an echo-like agent spends none either.
	mustResult[schemas.SendMessageResponse](t, h.sendAs(h.url, bobKey, "chat-b", send(userMessage("hi"), false)))

	// A run that starts with alice's budget spent (its task admitted
	// before) fails without calling the model.
	queued := userMessage("queued before")
	sub, _, err := b.Submit(context.Background(), bus.Submission{Agent: "chat-a", Owner: "alice", Tenant: "acme", Message: &queued}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rec *schemas.TaskRecord
	for deadline := time.Now().Add(20 * time.Second); ; {
		if rec, _, err = b.GetTask(context.Background(), sub.Task.ID); err == nil && rec.Task.Status.State.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queued task never finished: %v %v", rec, err)
		}
		time.Sleep(10 * time.Millisecond) // polling an external condition
	}
	if rec.Task.Status.State != schemas.TaskStateFailed || !strings.Contains(rec.Task.Status.Message.Text(), "tokens budget") {
		t.Fatalf("a run with the budget spent: %s %v", rec.Task.Status.State, rec.Task.Status.Message)
	}
	if n := calls.Load(); n != 4 {
		t.Fatalf("the model was called %d times, want 4 (bob's)", n)
	}
}
