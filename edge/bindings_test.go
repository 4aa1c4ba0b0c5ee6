package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/edge/grpcbinding"
	"github.com/a2abus/a2abus/edge/grpcbinding/a2apb"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// Authentication and isolation as every binding's client meets them: one
// table of bindings, each driving the A2A operations in its own wire form
// (JSON-RPC 1.0 and 0.3, HTTP+JSON, gRPC), and one set of checks run on
// each. A binding added to the edge gets a row here, not a copy of the
// checks.

// op is one A2A operation as a caller (an API key, "" for none) makes it
// in a tenant ("" for the caller's default) on some binding: the task ids
// it came back with, and the A2A reason of its refusal ("" when it was
// not refused).
type op struct {
	key, tenant string
}

// wire drives the operations on one binding.
type wire struct {
	name    string
	tenants bool // the binding names tenants (0.3 has none)
	// send starts a task (text) or answers one (taskID); it returns the
	// task's id.
	send      func(t *testing.T, o op, text, taskID string) (string, string)
	get       func(t *testing.T, o op, id string) string
	cancel    func(t *testing.T, o op, id string) string
	list      func(t *testing.T, o op) ([]string, string)
	subscribe func(t *testing.T, o op, id, lastEventID string) string
}

// rpcReason is the A2A reason of a JSON-RPC error code, "" for none.
func rpcReason(code int) string {
	if code == 0 {
		return ""
	}
	if e := schemas.ErrorByCode(code); e != nil {
		return e.Reason
	}
	return fmt.Sprintf("code %d", code)
}

// jsonRPCWire is the JSON-RPC binding in the dialect of version ("1.0",
// or "0.3" with its method names and shapes).
func jsonRPCWire(base, version string) wire {
	v03 := version == "0.3"
	call := func(t *testing.T, o op, method string, params map[string]any, header map[string]string) (json.RawMessage, string) {
		t.Helper()
		if o.tenant != "" {
			params["tenant"] = o.tenant
		}
		req, _ := http.NewRequest("POST", base+"/agents/echo", strings.NewReader(rpcBody(1, method, params)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", version)
		if o.key != "" {
			req.Header.Set("Authorization", "Bearer "+o.key)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			// A stream: its first event says whether it opened.
			data, _, _ := strings.Cut(strings.SplitN(string(raw), "data: ", 2)[1], "\n")
			raw = []byte(data)
		}
		var r struct {
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("%s: %s", method, raw)
		}
		if r.Error != nil {
			return nil, rpcReason(r.Error.Code)
		}
		return r.Result, ""
	}
	taskID := func(t *testing.T, res json.RawMessage) string {
		var v struct {
			ID   string `json:"id"`
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		}
		_ = json.Unmarshal(res, &v)
		if v.Task.ID != "" {
			return v.Task.ID
		}
		return v.ID
	}
	method := func(m10, m03 string) string {
		if v03 {
			return m03
		}
		return m10
	}
	role, text := "ROLE_USER", func(s string) map[string]any { return map[string]any{"text": s} }
	if v03 {
		role, text = "user", func(s string) map[string]any { return map[string]any{"kind": "text", "text": s} }
	}
	return wire{
		name: "JSON-RPC " + version, tenants: !v03,
		send: func(t *testing.T, o op, s, id string) (string, string) {
			msg := map[string]any{"messageId": schemas.NewID(), "role": role, "parts": []any{text(s)}}
			if v03 {
				msg["kind"] = "message"
			}
			if id != "" {
				msg["taskId"] = id
			}
			res, reason := call(t, o, method("SendMessage", "message/send"), map[string]any{"message": msg}, nil)
			return taskID(t, res), reason
		},
		get: func(t *testing.T, o op, id string) string {
			_, reason := call(t, o, method("GetTask", "tasks/get"), map[string]any{"id": id}, nil)
			return reason
		},
		cancel: func(t *testing.T, o op, id string) string {
			_, reason := call(t, o, method("CancelTask", "tasks/cancel"), map[string]any{"id": id}, nil)
			return reason
		},
		list: func(t *testing.T, o op) ([]string, string) {
			if v03 {
				return nil, "no list in 0.3"
			}
			res, reason := call(t, o, "ListTasks", map[string]any{}, nil)
			var l schemas.ListTasksResponse
			_ = json.Unmarshal(res, &l)
			var ids []string
			for _, task := range l.Tasks {
				ids = append(ids, task.ID)
			}
			return ids, reason
		},
		subscribe: func(t *testing.T, o op, id, last string) string {
			h := map[string]string{"Accept": "text/event-stream"}
			if last != "" {
				h["Last-Event-ID"] = last
			}
			_, reason := call(t, o, method("SubscribeToTask", "tasks/resubscribe"), map[string]any{"id": id}, h)
			return reason
		},
	}
}

// restWire is the HTTP+JSON binding.
func restWire(base string) wire {
	do := func(t *testing.T, o op, method, path, body string, header map[string]string) ([]byte, string) {
		t.Helper()
		prefix := "/agents/echo"
		if o.tenant != "" {
			prefix += "/" + o.tenant
		}
		req, _ := http.NewRequest(method, base+prefix+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("A2A-Version", "1.0")
		if o.key != "" {
			req.Header.Set("X-API-Key", o.key)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusOK {
			return raw, ""
		}
		var st struct {
			Error struct {
				Details []struct {
					Reason string `json:"reason"`
				} `json:"details"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &st) != nil || len(st.Error.Details) == 0 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		return nil, st.Error.Details[0].Reason
	}
	return wire{
		name: "HTTP+JSON", tenants: true,
		send: func(t *testing.T, o op, s, id string) (string, string) {
			msg := map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": s}}}
			if id != "" {
				msg["taskId"] = id
			}
			b, _ := json.Marshal(map[string]any{"message": msg})
			raw, reason := do(t, o, "POST", "/message:send", string(b), nil)
			var r schemas.SendMessageResponse
			_ = json.Unmarshal(raw, &r)
			if r.Task != nil {
				return r.Task.ID, reason
			}
			return "", reason
		},
		get: func(t *testing.T, o op, id string) string {
			_, reason := do(t, o, "GET", "/tasks/"+id, "", nil)
			return reason
		},
		cancel: func(t *testing.T, o op, id string) string {
			_, reason := do(t, o, "POST", "/tasks/"+id+":cancel", "{}", nil)
			return reason
		},
		list: func(t *testing.T, o op) ([]string, string) {
			raw, reason := do(t, o, "GET", "/tasks", "", nil)
			var l schemas.ListTasksResponse
			_ = json.Unmarshal(raw, &l)
			var ids []string
			for _, task := range l.Tasks {
				ids = append(ids, task.ID)
			}
			return ids, reason
		},
		subscribe: func(t *testing.T, o op, id, last string) string {
			h := map[string]string{}
			if last != "" {
				h["Last-Event-ID"] = last
			}
			raw, reason := do(t, o, "GET", "/tasks/"+id+":subscribe", "", h)
			if reason == "" && bytes.Contains(raw, []byte(`"error"`)) {
				var st struct {
					Error struct {
						Details []struct {
							Reason string `json:"reason"`
						} `json:"details"`
					} `json:"error"`
				}
				_, data, _ := strings.Cut(string(raw), "data: ")
				data, _, _ = strings.Cut(data, "\n")
				if json.Unmarshal([]byte(data), &st) == nil && len(st.Error.Details) > 0 {
					return st.Error.Details[0].Reason
				}
			}
			return reason
		},
	}
}

// grpcWire is the gRPC binding, served by the edge's in-process door on a
// loopback port of its own, as --grpc-listen serves it.
func grpcWire(t *testing.T, e *edge.Server) wire {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpcbinding.NewServer(e.InProcess("grpc"), grpcbinding.Options{MaxMessageBytes: 1 << 20})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop(time.Second); <-served })
	c := a2apb.NewA2AServiceClient(conn)
	ctxOf := func(o op, md ...string) (context.Context, string) {
		ctx := context.Background()
		if o.key != "" {
			md = append(md, "x-api-key", o.key)
		}
		if len(md) > 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, md...)
		}
		return ctx, schemas.AgentTenant(o.tenant, "echo")
	}
	reason := func(err error) string {
		if err == nil {
			return ""
		}
		st, _ := status.FromError(err)
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				return info.GetReason()
			}
		}
		return "gRPC " + st.Code().String()
	}
	return wire{
		name: "gRPC", tenants: true,
		send: func(t *testing.T, o op, s, id string) (string, string) {
			ctx, tenant := ctxOf(o)
			res, err := c.SendMessage(ctx, &a2apb.SendMessageRequest{Tenant: tenant, Message: &a2apb.Message{MessageId: schemas.NewID(), TaskId: id,
				Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: s}}}}})
			return res.GetTask().GetId(), reason(err)
		},
		get: func(t *testing.T, o op, id string) string {
			ctx, tenant := ctxOf(o)
			_, err := c.GetTask(ctx, &a2apb.GetTaskRequest{Tenant: tenant, Id: id})
			return reason(err)
		},
		cancel: func(t *testing.T, o op, id string) string {
			ctx, tenant := ctxOf(o)
			_, err := c.CancelTask(ctx, &a2apb.CancelTaskRequest{Tenant: tenant, Id: id})
			return reason(err)
		},
		list: func(t *testing.T, o op) ([]string, string) {
			ctx, tenant := ctxOf(o)
			res, err := c.ListTasks(ctx, &a2apb.ListTasksRequest{Tenant: tenant})
			var ids []string
			for _, task := range res.GetTasks() {
				ids = append(ids, task.GetId())
			}
			return ids, reason(err)
		},
		subscribe: func(t *testing.T, o op, id, last string) string {
			var md []string
			if last != "" {
				md = []string{"last-event-id", last}
			}
			ctx, tenant := ctxOf(o, md...)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			s, err := c.SubscribeToTask(ctx, &a2apb.SubscribeToTaskRequest{Tenant: tenant, Id: id})
			if err == nil {
				_, err = s.Recv()
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return reason(err)
		},
	}
}

// Every binding refuses a caller without credentials or with a wrong key
// (UNAUTHENTICATED), keeps each caller's tasks from every other — another
// principal's task is not found, for every operation, also to a stream
// resumed by cursor, and is never listed; an admin sees it — and keeps
// tenants apart: a task of one tenant is not found in another, and a
// tenant a caller may not use is refused (UNAUTHORIZED).
func TestAuthenticationAndIsolationOnEveryBinding(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{
		{Key: aliceKey, Principal: "alice", Tenants: []string{"t1", "t2"}},
		{Key: bobKey, Principal: "bob", Tenants: []string{"t1"}},
		{Key: opsKey, Principal: "ops", Admin: true, Tenants: []string{"t1", "t2"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, edge: edge.Config{Auth: a, DefaultAgent: "echo"}})
	wires := []wire{jsonRPCWire(h.url, "1.0"), jsonRPCWire(h.url, "0.3"), restWire(h.url), grpcWire(t, h.edges[0])}
	alice, bob, ops, nobody, forged := op{key: aliceKey}, op{key: bobKey}, op{key: opsKey}, op{}, op{key: "not-a-key-0123456789abcdef"}
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			expect := func(what, got, want string) {
				t.Helper()
				if got != want {
					t.Errorf("%s: refused with %q, want %q", what, got, want)
				}
			}
			// alice's task waits for input: every operation applies to it.
			id, r := w.send(t, alice, workers.AskCommand, "")
			if r != "" || id == "" {
				t.Fatalf("alice's send: %q %q", id, r)
			}
			for _, stranger := range []op{nobody, forged} {
				_, r := w.send(t, stranger, "hi", "")
				expect("a send without valid credentials", r, "UNAUTHENTICATED")
				expect("a get without valid credentials", w.get(t, stranger, id), "UNAUTHENTICATED")
				expect("a subscription without valid credentials", w.subscribe(t, stranger, id, ""), "UNAUTHENTICATED")
			}
			missing := schemas.NewID()
			for _, target := range []string{id, missing} {
				expect("bob's get", w.get(t, bob, target), "TASK_NOT_FOUND")
				expect("bob's cancel", w.cancel(t, bob, target), "TASK_NOT_FOUND")
				_, r := w.send(t, bob, "mine now", target)
				expect("bob's answer", r, "TASK_NOT_FOUND")
				expect("bob's subscription", w.subscribe(t, bob, target, ""), "TASK_NOT_FOUND")
				expect("bob's resumed subscription", w.subscribe(t, bob, target, "1.0"), "TASK_NOT_FOUND")
			}
			if ids, r := w.list(t, bob); r == "" && slices.Contains(ids, id) {
				t.Errorf("bob's list shows alice's task")
			}
			expect("alice's get", w.get(t, alice, id), "")
			expect("the admin's get", w.get(t, ops, id), "")
			if ids, r := w.list(t, alice); r == "" && !slices.Contains(ids, id) {
				t.Errorf("alice's list lacks her task: %v", ids)
			}
			if !w.tenants {
				return
			}
			inT2, r := w.send(t, op{key: aliceKey, tenant: "t2"}, "in t2", "")
			if r != "" {
				t.Fatalf("alice's send in t2: %q", r)
			}
			expect("alice's t2 task in t1", w.get(t, alice, inT2), "TASK_NOT_FOUND")
			expect("alice's t2 task in t2", w.get(t, op{key: aliceKey, tenant: "t2"}, inT2), "")
			expect("bob naming t2", w.get(t, op{key: bobKey, tenant: "t2"}, inT2), "UNAUTHORIZED")
			if ids, _ := w.list(t, alice); slices.Contains(ids, inT2) {
				t.Errorf("t1's list shows a t2 task")
			}
		})
	}
}
