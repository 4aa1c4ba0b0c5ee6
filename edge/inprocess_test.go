package edge_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
)

// The in-process door (the MCP bridge's) admits a call as the front door
// admits an A2A request, with what the adapter's request presented: no
// credentials, no call; a caller over its rate is refused with when to
// retry; a tenant the principal may not act in is forbidden; an agent not
// served here is said so; another principal's task is not found; and each
// call is counted under its adapter's binding.
func TestInProcessDoorAdmitsAsTheFrontDoor(t *testing.T) {
	h := authHarnessWith(t, edge.Config{Limits: edge.LimitsConfig{Default: edge.Limits{Rate: 0.001, Burst: 4}}})
	door := h.edges[0].InProcess("mcp")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := func(k string) schemas.Presented {
		return schemas.Presented{Header: http.Header{"Authorization": {"Bearer " + k}}, RemoteAddr: "127.0.0.1:5000"}
	}
	alice, bob := key(aliceKey), key(bobKey)
	send := func(who schemas.Presented, agent, text string) (*schemas.Task, error) {
		msg := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)}}
		var task *schemas.Task
		err := door.SendStreamingMessage(ctx, who, agent, &schemas.SendMessageRequest{Message: msg}, func(_ string, ev *schemas.StreamResponse) error {
			if ev.Task != nil {
				task = ev.Task
			}
			return nil
		})
		return task, err
	}

	if _, err := send(schemas.Presented{RemoteAddr: "127.0.0.1:5000"}, "echo", "hi"); !errors.Is(err, schemas.ErrUnauthenticated) {
		t.Fatalf("without credentials: %v", err)
	}
	task, err := send(alice, "echo", "/ask") // waits for input: still hers to read
	if err != nil || task == nil {
		t.Fatalf("alice's send: %v %v", task, err)
	}
	if _, err := door.GetTask(ctx, bob, "echo", &schemas.GetTaskRequest{ID: task.ID}); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("bob reading alice's task: %v", err)
	}
	if got, err := door.GetTask(ctx, alice, "echo", &schemas.GetTaskRequest{ID: task.ID}); err != nil || got.ID != task.ID {
		t.Fatalf("alice reading her task: %v %v", got, err)
	}
	if _, err := door.GetTask(ctx, alice, "echo", &schemas.GetTaskRequest{ID: task.ID, Tenant: "elsewhere"}); !errors.Is(err, schemas.ErrPermissionDenied) {
		t.Fatalf("alice in a tenant not hers: %v", err)
	}
	if _, err := send(alice, "nobody", "hi"); !errors.Is(err, schemas.ErrMethodNotFound) || !strings.Contains(err.Error(), `"nobody"`) {
		t.Fatalf("an agent not served: %v", err)
	}
	// Her burst of 4 is spent (send, get, and the two refused after
	// authentication); the next call waits for her rate.
	_, err = door.CancelTask(ctx, alice, "echo", &schemas.CancelTaskRequest{ID: task.ID})
	var pe *schemas.Error
	if !errors.As(err, &pe) || !errors.Is(pe, schemas.ErrRateLimited) || pe.RetryAfter <= 0 {
		t.Fatalf("alice over her rate: %v", err)
	}
	// Bob's rate is his own.
	if _, err := door.CancelTask(ctx, bob, "echo", &schemas.CancelTaskRequest{ID: task.ID}); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("bob canceling alice's task: %v", err)
	}

	status, _, body := as(t, opsKey, "GET", h.url+"/metrics", "", "")
	if status != http.StatusOK {
		t.Fatalf("metrics: %d", status)
	}
	for _, want := range []string{
		`a2a_rpc_requests_total{binding="mcp",code="0",method="SendStreamingMessage"} 1`,
		`a2a_rpc_requests_total{binding="mcp",code="-32001",method="GetTask"} 1`,
		`a2a_rpc_requests_total{binding="mcp",code="-31429",method="CancelTask"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
