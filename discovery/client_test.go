package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// startA2Abus serves an a2abus edge with an echo agent and one that works
// until canceled, over real HTTP on loopback.
func startA2Abus(t *testing.T) string {
	t.Helper()
	_, b := bustest.New(t, bustest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var stops []chan error
	for _, def := range []workers.Definition{workers.EchoDefinition("echo"), {
		Name: "hang", Card: schemas.AgentCard{Name: "hang", Description: "works until canceled", Version: "1"},
		Agent: workers.AgentFunc(func(ctx context.Context, _ *workers.Request, out *workers.Emitter) error {
			if err := out.Working(ctx, "on it"); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		}),
	}} {
		done := make(chan error, 1)
		r := workers.NewRunner(b, def, workers.Options{ShutdownGrace: time.Second})
		go func() { done <- r.Run(ctx) }()
		stops = append(stops, done)
		<-r.Ready()
	}
	ts := httptest.NewUnstartedServer(nil)
	e := edge.New(b, edge.Config{PublicURL: "http://" + ts.Listener.Addr().String()})
	ts.Config.Handler = e.Handler()
	ts.Start()
	edone := make(chan error, 1)
	go func() { edone <- e.Run(ctx) }()
	t.Cleanup(func() {
		ts.Close()
		cancel()
		<-edone
		for _, s := range stops {
			<-s
		}
	})
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := e.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	return ts.URL
}

func text(s string) *schemas.Message {
	return &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(s)}}
}

func drainStream(t *testing.T, s *discovery.Stream) []*schemas.StreamResponse {
	t.Helper()
	defer s.Close()
	var out []*schemas.StreamResponse
	for {
		ev, err := s.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		out = append(out, ev)
	}
}

func lastState(evs []*schemas.StreamResponse) schemas.TaskState {
	var st schemas.TaskState
	for _, ev := range evs {
		switch {
		case ev.Task != nil:
			st = ev.Task.Status.State
		case ev.StatusUpdate != nil:
			st = ev.StatusUpdate.Status.State
		}
	}
	return st
}

// The client speaks every binding it offers to a real a2abus edge: 1.0
// JSON-RPC, 1.0 HTTP+JSON and 0.3 JSON-RPC, each method, and maps the
// agent's errors back to the error table.
func TestClientEveryBindingAgainstA2Abus(t *testing.T) {
	base := startA2Abus(t)
	ctx := context.Background()
	opts := discovery.Options{Policy: discovery.Policy{AllowLoopback: true}}
	for _, ep := range []discovery.Endpoint{
		{Binding: schemas.BindingJSONRPC, Version: schemas.ProtocolVersion},
		{Binding: schemas.BindingHTTPJSON, Version: schemas.ProtocolVersion},
		{Binding: schemas.BindingJSONRPC, Version: schemas.ProtocolVersion03},
	} {
		t.Run(ep.Binding+"-"+ep.Version, func(t *testing.T) {
			ep.URL = base + "/agents/echo"
			c, err := discovery.NewClient(ep, opts)
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("blocking send")})
			if err != nil || res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted || *res.Task.Artifacts[0].Parts[0].Text != "blocking send" {
				t.Fatalf("send: %+v %v", res, err)
			}
			done := res.Task
			res, err = c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("now"), Configuration: &schemas.SendMessageConfiguration{ReturnImmediately: true}})
			if err != nil || res.Task == nil {
				t.Fatalf("non-blocking send: %+v %v", res, err)
			}
			s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("one two three four five")})
			if err != nil {
				t.Fatal(err)
			}
			evs := drainStream(t, s)
			if len(evs) < 4 || evs[0].Task == nil || lastState(evs) != schemas.TaskStateCompleted || s.LastEventID() == "" {
				t.Fatalf("stream: %d events, last %s", len(evs), lastState(evs))
			}
			got, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: done.ID})
			if err != nil || got.ID != done.ID || got.Status.State != schemas.TaskStateCompleted {
				t.Fatalf("get: %+v %v", got, err)
			}
			list, err := c.ListTasks(ctx, &schemas.ListTasksRequest{ContextID: done.ContextID})
			if ep.Version == schemas.ProtocolVersion03 {
				if !errors.Is(err, schemas.ErrUnsupportedOperation) {
					t.Fatalf("0.3 list: %v", err)
				}
			} else if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != done.ID {
				t.Fatalf("list: %+v %v", list, err)
			}
			// Subscribing to a finished task from its start replays it to the end.
			if sub, err := c.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: res.Task.ID}, ""); err == nil {
				if st := lastState(drainStream(t, sub)); !st.Terminal() {
					t.Fatalf("subscribe ended in %s", st)
				}
			} else if !errors.Is(err, schemas.ErrUnsupportedOperation) {
				t.Fatalf("subscribe: %v", err)
			}
			if _, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: schemas.NewID()}); !errors.Is(err, schemas.ErrTaskNotFound) {
				t.Fatalf("missing task: %v", err)
			}
			if _, err := c.CancelTask(ctx, &schemas.CancelTaskRequest{ID: done.ID}); !errors.Is(err, schemas.ErrTaskNotCancelable) {
				t.Fatalf("cancel of a finished task: %v", err)
			}
			// Cancel a running task, following it on a subscription.
			ep.URL = base + "/agents/hang"
			h, _ := discovery.NewClient(ep, opts)
			run, err := h.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("hang"), Configuration: &schemas.SendMessageConfiguration{ReturnImmediately: true}})
			if err != nil {
				t.Fatal(err)
			}
			sub, err := h.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: run.Task.ID}, "")
			if err != nil {
				t.Fatal(err)
			}
			if first, err := sub.Next(); err != nil || first.Task == nil {
				t.Fatalf("subscription snapshot: %+v %v", first, err)
			}
			canceled, err := h.CancelTask(ctx, &schemas.CancelTaskRequest{ID: run.Task.ID})
			if err != nil || canceled.Status.State != schemas.TaskStateCanceled {
				t.Fatalf("cancel: %+v %v", canceled, err)
			}
			if st := lastState(drainStream(t, sub)); st != schemas.TaskStateCanceled {
				t.Fatalf("subscription ended in %s", st)
			}
		})
	}
}

// Against a minimal independent agent (0.3 JSON-RPC, written here, not
// a2abus): results in the 0.3 "kind" shape are read, its JSON-RPC errors map
// to the error table, and an overloaded answer is a retryable transport
// error carrying Retry-After.
func TestClientAgainstMinimalIndependentAgent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		switch req.Method {
		case "message/send":
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"kind":"task","id":"t-1","contextId":"c-1",
				"status":{"state":"completed","timestamp":"2026-01-01T00:00:00Z"},
				"artifacts":[{"artifactId":"a","parts":[{"kind":"text","text":"independent"}]}]}}`))
		case "tasks/get":
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32001,"message":"no such task"}}`))
		default:
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	c, err := discovery.NewClient(discovery.Endpoint{URL: srv.URL, Binding: schemas.BindingJSONRPC, Version: "0.3.0"},
		discovery.Options{Policy: discovery.Policy{AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("hi")})
	if err != nil || res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted || *res.Task.Artifacts[0].Parts[0].Text != "independent" {
		t.Fatalf("0.3 send: %+v %v", res, err)
	}
	if _, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: "t-9"}); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("0.3 error: %v", err)
	}
	_, err = c.CancelTask(ctx, &schemas.CancelTaskRequest{ID: "t-1"})
	var te *discovery.TransportError
	if !errors.As(err, &te) || te.Status != http.StatusServiceUnavailable || te.RetryAfter != 7*time.Second || !discovery.IsRetryable(err) {
		t.Fatalf("503: %v", err)
	}
	// The zero policy refuses this loopback agent before any request.
	strict, _ := discovery.NewClient(discovery.Endpoint{URL: srv.URL, Binding: schemas.BindingJSONRPC, Version: "1.0"}, discovery.Options{})
	if _, err := strict.GetTask(ctx, &schemas.GetTaskRequest{ID: "x"}); !errors.Is(err, discovery.ErrForbiddenAddress) {
		t.Fatalf("loopback without permission: %v", err)
	}
}
