package edge_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
)

// At the backlog bound new tasks get 503 + Retry-After with a JSON-RPC
// error; the tasks already accepted are untouched.
func TestBacklogBoundRefusesNewWork(t *testing.T) {
	h := newHarness(t, harnessOptions{edge: edge.Config{MaxBacklogPerAgent: 3}})
	if err := h.b.RegisterAgent(context.Background(), schemas.AgentRegistration{Agent: "queue", Card: schemas.AgentCard{Name: "queue"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.b.EnsureAgent(context.Background(), "queue"); err != nil {
		t.Fatal(err)
	}
	h.waitAgent(h.url, "queue")
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
