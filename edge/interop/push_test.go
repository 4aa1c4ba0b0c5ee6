package interop

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/workers"
)

// hook is a webhook on 127.0.0.1 that keeps every body it is sent.
type hook struct {
	*httptest.Server
	got chan []byte
}

func newHook(t *testing.T) *hook {
	h := &hook{got: make(chan []byte, 256)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.got <- b
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.Close)
	return h
}

// startPushA2Abus is a2abus with push notifications on and a sender
// running, its webhooks allowed on 127.0.0.1.
func startPushA2Abus(t *testing.T) string {
	t.Helper()
	base, b := startA2AbusOn(t, edge.Config{DefaultAgent: "echo", Push: true})
	// A plain client, not discovery's guarded one: discovery links
	// a2abus's lf.a2a.v1 messages (its gRPC wire), which cannot share a
	// binary with the SDK's (protobuf's registry refuses the second copy).
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	s, err := workers.NewPushSender(b, workers.PushOptions{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return base
}

// The official Go client creates, reads, lists and deletes push configs
// on every binding, and what a2abus then posts to the webhook is read by
// the SDK's own types: a 1.0 StreamResponse, or for a 0.3 registration a
// 0.3 Task (the SDK's 0.3 module).
func TestOfficialGoClientPushConfigs(t *testing.T) {
	base := startPushA2Abus(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c := clientFor(t, base, "slow", tr)
			res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{
				Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("wait")),
				Config:  &a2a.SendMessageConfig{ReturnImmediately: true},
			})
			if err != nil {
				t.Fatal(err)
			}
			task, ok := res.(*a2a.Task)
			if !ok {
				t.Fatalf("send answered %T", res)
			}
			h := newHook(t)
			created, err := c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "sdk", URL: h.URL + "/a2a", Token: "t-" + tr.name,
				Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "c-" + tr.name}})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if created.ID != "sdk" || created.TaskID != task.ID || created.URL != h.URL+"/a2a" {
				t.Fatalf("created %+v", created)
			}
			got, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "sdk"})
			if err != nil || got.URL != created.URL || got.Token != "" || got.Auth == nil || got.Auth.Scheme != "Bearer" || got.Auth.Credentials != "" { // secrets are write-only
				t.Fatalf("get: %+v, %v", got, err)
			}
			list, err := c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
			if err != nil || len(list) != 1 || list[0].ID != "sdk" {
				t.Fatalf("list: %+v, %v", list, err)
			}
			if _, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "nope"}); err == nil {
				t.Fatal("an unknown config was found")
			}

			// Canceling the task is news: the webhook hears of it.
			if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID}); err != nil {
				t.Fatal(err)
			}
			canceled := false
			for !canceled {
				var body []byte
				select {
				case body = <-h.got:
				case <-ctx.Done():
					t.Fatal("no notification of the cancel")
				}
				if tr.version == "0.3" {
					var t03 a2a03.Task
					if err := json.Unmarshal(body, &t03); err != nil || string(t03.ID) != string(task.ID) {
						t.Fatalf("the SDK's 0.3 Task cannot read %s: %v", body, err)
					}
					canceled = t03.Status.State == a2a03.TaskStateCanceled
					continue
				}
				var sr a2a.StreamResponse
				if err := json.Unmarshal(body, &sr); err != nil {
					t.Fatalf("the SDK's StreamResponse cannot read %s: %v", body, err)
				}
				if ev, ok := sr.Event.(*a2a.TaskStatusUpdateEvent); ok && ev.TaskID == task.ID && ev.Status.State == a2a.TaskStateCanceled {
					canceled = true
				}
			}
			if err := c.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "sdk"}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		})
	}
}
