package edge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// Every binding and dialect reaches the A2A service through its
// interceptor chain, each request as the operations it stands for: an
// interceptor added to the chain sees every call of every door, which is
// what the chain's slot (tracing, trust levels, approvals) relies on.
func TestEveryBindingReachesTheServiceThroughItsInterceptors(t *testing.T) {
	srv := bustest.NewServer(t, bustest.Options{})
	b := bustest.Connect(t, srv, bustest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() {
		runDone <- workers.NewRunner(b, workers.EchoDefinition("echo"), workers.Options{ShutdownGrace: time.Second}).Run(ctx)
	}()
	s := New(b, Config{Push: true, DefaultAgent: "echo", PublicURL: "http://127.0.0.1"})
	var mu sync.Mutex
	var seen []string
	s.svc = intercept(s.svc, func(ctx context.Context, inv *invocation, next invoker) (any, error) {
		mu.Lock()
		seen = append(seen, inv.op)
		mu.Unlock()
		return next(ctx, inv)
	})
	edgeDone := make(chan error, 1)
	go func() { edgeDone <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-runDone; <-edgeDone })
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, ok := s.agents.Get("echo"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the echo agent never registered")
		}
		time.Sleep(10 * time.Millisecond) // polling an external condition, not synchronising
	}

	do := func(method, path, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return out
	}
	rpc := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	}
	const msg10 = `{"message":{"role":"ROLE_USER","messageId":"m-%s","parts":[{"text":"hi"}]}}`
	var created struct {
		Result struct {
			Task struct{ ID string } `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal(do("POST", "/", rpc("SendMessage", strings.Replace(msg10, "%s", "0", 1))), &created); err != nil || created.Result.Task.ID == "" {
		t.Fatalf("creating a task: %v %+v", err, created)
	}
	id := created.Result.Task.ID
	msg03 := `{"message":{"role":"user","messageId":"m03","kind":"message","parts":[{"kind":"text","text":"hi"}]}}`
	legacy := `{"id":"client-1","message":{"role":"user","parts":[{"type":"text","text":"hi"}]}}`
	push10 := `{"taskId":"` + id + `","url":"https://127.0.0.1/hook"}`
	for _, tc := range []struct {
		name, method, path, body string
		ops                      []string
	}{
		{"jsonrpc SendMessage", "POST", "/", rpc("SendMessage", strings.Replace(msg10, "%s", "1", 1)), []string{opSendMessage}},
		{"jsonrpc SendStreamingMessage", "POST", "/", rpc("SendStreamingMessage", strings.Replace(msg10, "%s", "2", 1)), []string{opSendStreamingMessage}},
		{"jsonrpc GetTask", "POST", "/", rpc("GetTask", `{"id":"`+id+`"}`), []string{opGetTask}},
		{"jsonrpc ListTasks", "POST", "/", rpc("ListTasks", `{}`), []string{opListTasks}},
		{"jsonrpc CancelTask", "POST", "/", rpc("CancelTask", `{"id":"`+id+`"}`), []string{opCancelTask}},
		{"jsonrpc SubscribeToTask", "POST", "/", rpc("SubscribeToTask", `{"id":"`+id+`"}`), []string{opSubscribeToTask}},
		{"jsonrpc CreatePush", "POST", "/", rpc(opCreatePushConfig, push10), []string{opCreatePushConfig}},
		{"jsonrpc GetPush", "POST", "/", rpc(opGetPushConfig, `{"taskId":"`+id+`","id":"c"}`), []string{opGetPushConfig}},
		{"jsonrpc ListPush", "POST", "/", rpc(opListPushConfigs, `{"taskId":"`+id+`"}`), []string{opListPushConfigs}},
		{"jsonrpc DeletePush", "POST", "/", rpc(opDeletePushConfig, `{"taskId":"`+id+`","id":"c"}`), []string{opDeletePushConfig}},
		{"jsonrpc GetExtendedAgentCard", "POST", "/", rpc(opGetExtendedAgentCard, `{}`), []string{opGetExtendedAgentCard}},

		{"rest send", "POST", "/message:send", strings.Replace(msg10, "%s", "3", 1), []string{opSendMessage}},
		{"rest stream", "POST", "/message:stream", strings.Replace(msg10, "%s", "4", 1), []string{opSendStreamingMessage}},
		{"rest get", "GET", "/tasks/" + id, "", []string{opGetTask}},
		{"rest list", "GET", "/tasks", "", []string{opListTasks}},
		{"rest cancel", "POST", "/tasks/" + id + ":cancel", "", []string{opCancelTask}},
		{"rest subscribe", "GET", "/tasks/" + id + ":subscribe", "", []string{opSubscribeToTask}},
		{"rest create push", "POST", "/tasks/" + id + "/pushNotificationConfigs", push10, []string{opCreatePushConfig}},
		{"rest get push", "GET", "/tasks/" + id + "/pushNotificationConfigs/c", "", []string{opGetPushConfig}},
		{"rest list push", "GET", "/tasks/" + id + "/pushNotificationConfigs", "", []string{opListPushConfigs}},
		{"rest delete push", "DELETE", "/tasks/" + id + "/pushNotificationConfigs/c", "", []string{opDeletePushConfig}},
		{"rest extended card", "GET", "/extendedAgentCard", "", []string{opGetExtendedAgentCard}},

		{"0.3 message/send", "POST", "/", rpc("message/send", msg03), []string{opSendMessage}},
		{"0.3 message/stream", "POST", "/", rpc("message/stream", strings.Replace(msg03, "m03", "m03s", 1)), []string{opSendStreamingMessage}},
		{"0.3 tasks/get", "POST", "/", rpc("tasks/get", `{"id":"`+id+`"}`), []string{opGetTask}},
		{"0.3 tasks/cancel", "POST", "/", rpc("tasks/cancel", `{"id":"`+id+`"}`), []string{opCancelTask}},
		{"0.3 tasks/resubscribe", "POST", "/", rpc("tasks/resubscribe", `{"id":"`+id+`"}`), []string{opGetTask, opSubscribeToTask}},
		{"0.3 push set", "POST", "/", rpc("tasks/pushNotificationConfig/set", `{"taskId":"`+id+`","pushNotificationConfig":{"url":"https://127.0.0.1/hook"}}`), []string{opCreatePushConfig}},
		{"0.3 push get", "POST", "/", rpc("tasks/pushNotificationConfig/get", `{"id":"`+id+`","pushNotificationConfigId":"c"}`), []string{opGetPushConfig}},
		{"0.3 push get only", "POST", "/", rpc("tasks/pushNotificationConfig/get", `{"id":"`+id+`"}`), []string{opListPushConfigs}},
		{"0.3 push list", "POST", "/", rpc("tasks/pushNotificationConfig/list", `{"id":"`+id+`"}`), []string{opListPushConfigs}},
		{"0.3 push delete", "POST", "/", rpc("tasks/pushNotificationConfig/delete", `{"id":"`+id+`","pushNotificationConfigId":"c"}`), []string{opDeletePushConfig}},
		{"0.3 extended card", "POST", "/", rpc("agent/getAuthenticatedExtendedCard", `{}`), []string{opGetExtendedAgentCard}},

		{"older tasks/send", "POST", "/", rpc("tasks/send", legacy), []string{opGetTask, opSendMessage}},
		{"older tasks/send again", "POST", "/", rpc("tasks/send", strings.Replace(legacy, "client-1", "client-2", 1)), []string{opGetTask, opSendMessage}},
		{"older tasks/sendSubscribe", "POST", "/", rpc("tasks/sendSubscribe", strings.Replace(legacy, "client-1", "client-3", 1)), []string{opGetTask, opSendStreamingMessage}},
		{"older tasks/get", "POST", "/", rpc("tasks/get", `{"id":"client-1"}`), []string{opGetTask}},

		{"openfang send", "POST", "/a2a/tasks/send", strings.Replace(legacy, "client-1", "client-4", 1), []string{opGetTask, opSendMessage}},
		{"openfang get", "GET", "/a2a/tasks/client-4", "", []string{opGetTask}},
		{"openfang cancel", "POST", "/a2a/tasks/client-4/cancel", "", []string{opCancelTask}},
	} {
		mu.Lock()
		seen = nil
		mu.Unlock()
		out := do(tc.method, tc.path, tc.body)
		mu.Lock()
		got := slices.Clone(seen)
		mu.Unlock()
		if !slices.Equal(got, tc.ops) {
			t.Errorf("%s: the chain saw %v, want %v (answer %.200s)", tc.name, got, tc.ops, out)
		}
	}

	// The in-process door (the MCP bridge's) reaches it the same way.
	door, who := s.InProcess("test"), schemas.Presented{}
	for _, tc := range []struct {
		name string
		call func() error
		ops  []string
	}{
		{"in-process stream", func() error {
			msg := &schemas.Message{MessageID: "m-in", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("hi")}}
			return door.SendStreamingMessage(ctx, who, "echo", &schemas.SendMessageRequest{Message: msg}, func(string, *schemas.StreamResponse) error { return nil })
		}, []string{opSendStreamingMessage}},
		{"in-process get", func() error { _, err := door.GetTask(ctx, who, "echo", &schemas.GetTaskRequest{ID: id}); return err }, []string{opGetTask}},
		{"in-process cancel", func() error {
			_, err := door.CancelTask(ctx, who, "echo", &schemas.CancelTaskRequest{ID: id})
			return err
		}, []string{opCancelTask}},
	} {
		mu.Lock()
		seen = nil
		mu.Unlock()
		err := tc.call()
		mu.Lock()
		got := slices.Clone(seen)
		mu.Unlock()
		if !slices.Equal(got, tc.ops) {
			t.Errorf("%s: the chain saw %v, want %v (%v)", tc.name, got, tc.ops, err)
		}
	}

	// An interceptor that refuses is answered in each binding's form, and
	// the operation does not run (the slot trust levels and approvals use).
	s.svc = intercept(s.svc, func(context.Context, *invocation, invoker) (any, error) {
		return nil, schemas.Errorf(schemas.ErrPermissionDenied, "refused by policy")
	})
	if out := do("POST", "/", rpc("CancelTask", `{"id":"`+id+`"}`)); !strings.Contains(string(out), `"code":-31403`) {
		t.Errorf("JSON-RPC: %s", out)
	}
	if out := do("POST", "/", rpc(opWatchTasks, `{}`)); !strings.Contains(string(out), `"code":-31403`) {
		t.Errorf("the task feed: %s", out)
	}
	if out := do("POST", "/", rpc("message/send", msg03)); !strings.Contains(string(out), `"code":-31403`) {
		t.Errorf("JSON-RPC 0.3: %s", out)
	}
	req, _ := http.NewRequest("GET", ts.URL+"/tasks/"+id, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("HTTP+JSON: status %d, want 403", resp.StatusCode)
	}
	if out := do("POST", "/a2a/tasks/client-4/cancel", ""); !strings.Contains(string(out), "refused by policy") {
		t.Errorf("OpenFang REST: %s", out)
	}
	if out := do("POST", "/message:stream", strings.Replace(msg10, "%s", "5", 1)); !strings.Contains(string(out), "refused by policy") {
		t.Errorf("HTTP+JSON stream: %s", out)
	}
	if _, err := door.GetTask(ctx, who, "echo", &schemas.GetTaskRequest{ID: id}); !errors.Is(err, schemas.ErrPermissionDenied) {
		t.Errorf("in process: %v", err)
	}
}
