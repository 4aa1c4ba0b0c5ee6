package edge_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
)

// idleAgent registers agent and binds its work consumer, as a runner
// would, but takes no work: every task sent to it stays queued.
func (h *harness) idleAgent(agent string) {
	h.t.Helper()
	ctx := context.Background()
	if err := h.b.RegisterAgent(ctx, schemas.AgentRegistration{Agent: agent, Card: schemas.AgentCard{Name: agent}}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.b.WorkConsumer(ctx, agent); err != nil {
		h.t.Fatal(err)
	}
	h.waitAgent(h.url, agent)
}

// At the backlog bound new tasks get 503 + Retry-After with a JSON-RPC
// error; the tasks already accepted are untouched.
func TestBacklogBoundRefusesNewWork(t *testing.T) {
	h := newHarness(t, harnessOptions{edge: edge.Config{MaxBacklogPerAgent: 3}})
	h.idleAgent("queue")
	var ids []string
	var refused *rpcReply
	// The backlog is sampled at most every 500ms, so the bound is reached
	// within a moment rather than on the exact request.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		r := h.call("queue", "SendMessage", send(userMessage("x"), true))
		if r.Error != nil {
			refused = r
			break
		}
		ids = append(ids, mustResult[schemas.SendMessageResponse](t, r).Task.ID)
	}
	if refused == nil {
		t.Fatal("never refused")
	}
	mustError(t, refused, schemas.ErrUnavailable)
	if refused.status != http.StatusServiceUnavailable || refused.header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q", refused.status, refused.header.Get("Retry-After"))
	}
	if len(ids) < 3 {
		t.Fatalf("only %d accepted", len(ids))
	}
	for _, id := range ids {
		if got := mustResult[schemas.Task](t, h.call("queue", "GetTask", map[string]any{"id": id})); got.Status.State != schemas.TaskStateSubmitted {
			t.Fatalf("accepted task %s is %s", id, got.Status.State)
		}
	}
}

// A request the bus refuses after its task was stored (the work stream is
// full) leaves nothing behind: the client gets a retryable error and no
// task it was never told about stays visible to anyone.
func TestRefusedRequestLeavesNothingBehind(t *testing.T) {
	h := newHarness(t, harnessOptions{bus: bustest.Options{Config: bus.Config{WorkMaxBytes: 4 << 10}}})
	h.idleAgent("queue")
	accepted := map[string]bool{}
	refusals := 0
	for i := 0; i < 40 && refusals < 5; i++ {
		r := h.call("queue", "SendMessage", send(userMessage("fill the work stream"), true))
		if r.Error != nil {
			mustError(t, r, schemas.ErrUnavailable)
			if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
				t.Fatalf("refusal: status %d, Retry-After %q", r.status, r.header.Get("Retry-After"))
			}
			refusals++
			continue
		}
		accepted[mustResult[schemas.SendMessageResponse](t, r).Task.ID] = true
	}
	if refusals == 0 || len(accepted) == 0 {
		t.Fatalf("accepted %d, refused %d: want both", len(accepted), refusals)
	}
	list := mustResult[schemas.ListTasksResponse](t, h.call("queue", "ListTasks", map[string]any{"pageSize": 100}))
	for _, task := range list.Tasks {
		if !accepted[task.ID] {
			t.Errorf("task %s (%s) is visible but was never given to a client", task.ID, task.Status.State)
		}
	}
	if len(list.Tasks) != len(accepted) {
		t.Fatalf("listed %d tasks, accepted %d", len(list.Tasks), len(accepted))
	}
}

// One caller holds at most its share of an agent's backlog bound (1/32,
// at least 16 tasks: 16 of 64 here), counted per caller by the task index:
// past it the caller gets 429 with Retry-After, saying so, while another
// caller is still accepted and the agent's bound is far from reached.
// (Before, one caller could queue up to the agent's bound, and a handful
// of callers kept everyone out with 503.)
func TestOneCallerHoldsItsShareOfTheBacklog(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{{Key: aliceKey, Principal: "alice"}, {Key: bobKey, Principal: "bob"}}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{edge: edge.Config{Auth: a, MaxBacklogPerAgent: 64}})
	h.idleAgent("queue")
	send := func(key string) (int, http.Header, []byte) {
		return as(t, key, "POST", h.url+"/agents/queue/message:send", "application/json",
			`{"message":{"messageId":"`+schemas.NewID()+`","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"returnImmediately":true}}`)
	}
	accepted := 0
	for ; accepted <= 64; accepted++ {
		status, hdr, b := send(aliceKey)
		if status == http.StatusOK {
			continue
		}
		rateLimited(t, "alice past her share of the backlog", status, hdr, b, false)
		if !bytes.Contains(b, []byte("its share of the agent's backlog (at most 16 of 64)")) {
			t.Fatalf("alice refused without saying why: %s", b)
		}
		break
	}
	// The index follows the store within milliseconds: a caller may pass
	// its share by the few tasks created meanwhile, never by much.
	if accepted < 16 || accepted >= 48 {
		t.Fatalf("alice had %d tasks accepted, want her share of 16 (and a few)", accepted)
	}
	if status, _, b := send(bobKey); status != http.StatusOK {
		t.Fatalf("bob while alice holds her share: %d %s", status, b)
	}
}
