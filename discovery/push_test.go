package discovery_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
)

// The client manages a task's push-notification configs on every binding
// it speaks, against a real a2abus edge.
func TestClientPushConfigsOnEveryBinding(t *testing.T) {
	srv := startEdge(t, edge.Config{Push: true}, nil)
	ctx := context.Background()
	for _, ep := range append(slices.Clone(v1Bindings), discovery.Endpoint{Binding: schemas.BindingJSONRPC, Version: schemas.ProtocolVersion03}) {
		t.Run(ep.Binding+"-"+ep.Version, func(t *testing.T) {
			c, err := discovery.NewClient(srv.at(ep, "hang"), loopback())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("wait"), Configuration: &schemas.SendMessageConfiguration{ReturnImmediately: true}})
			if err != nil || res.Task == nil {
				t.Fatalf("send: %+v %v", res, err)
			}
			id := res.Task.ID
			created, err := c.CreatePushConfig(ctx, schemas.TaskPushNotificationConfig{TaskID: id, ID: "c1", URL: "https://hooks.example/a2a", Token: "tok"})
			if err != nil || created.ID != "c1" || created.URL != "https://hooks.example/a2a" {
				t.Fatalf("create: %+v %v", created, err)
			}
			// The token is write-only; a2abus says it withheld it, where
			// the binding has room for its own members (gRPC's messages
			// have none).
			redacted := []string{"token"}
			if ep.Binding == schemas.BindingGRPC {
				redacted = nil
			}
			got, err := c.PushConfig(ctx, id, "c1")
			if err != nil || got.Token != "" || !slices.Equal(got.Redacted, redacted) || got.Delivery != nil {
				t.Fatalf("get: %+v %v", got, err)
			}
			list, err := c.PushConfigs(ctx, id)
			if err != nil || len(list) != 1 || list[0].ID != "c1" {
				t.Fatalf("list: %+v %v", list, err)
			}
			if err := c.DeletePushConfig(ctx, id, "c1"); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if _, err := c.PushConfig(ctx, id, "c1"); !errors.Is(err, schemas.ErrTaskNotFound) {
				t.Fatalf("a deleted config: %v", err)
			}
			if _, err := c.CreatePushConfig(ctx, schemas.TaskPushNotificationConfig{TaskID: id, URL: "ftp://nope"}); !errors.Is(err, schemas.ErrInvalidParams) {
				t.Fatalf("a bad URL: %v", err)
			}
			if _, err := c.CancelTask(ctx, &schemas.CancelTaskRequest{ID: id}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
