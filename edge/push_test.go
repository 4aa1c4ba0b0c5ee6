package edge_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// pushHarness is an edge serving push configs, with alice, bob and the
// admin ops, and an outbound policy that refuses one host.
func pushHarness(t *testing.T) *harness {
	t.Helper()
	refuse := func(_ context.Context, u *url.URL) error {
		if u.Hostname() == "169.254.169.254" {
			return errors.New("the destination is a cloud metadata address")
		}
		return nil
	}
	return authHarnessWith(t, edge.Config{Push: true, CheckWebhook: refuse})
}

// rpcAs sends one JSON-RPC call as the holder of key and decodes the reply.
func rpcAs(t *testing.T, h *harness, key, method string, params any) *rpcReply {
	t.Helper()
	_, _, body := as(t, key, "POST", h.url+"/agents/echo", "application/json", rpcBody(1, method, params))
	var r rpcReply
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%s: %s", method, body)
	}
	return &r
}

// Push configs over 1.0 JSON-RPC, HTTP+JSON and 0.3: created, read,
// listed and deleted by the task's owner in every binding (each sees what
// the others stored), with the spec's errors: another caller's task and an
// unknown task or config are not found, a bad or refused URL is invalid
// params; the card declares push notifications.
func TestPushConfigsOnEveryBinding(t *testing.T) {
	h := pushHarness(t)
	task := mustResult[schemas.SendMessageResponse](t, rpcAs(t, h, aliceKey, "SendMessage", send(userMessage("hi"), false))).Task
	id := task.ID

	// 1.0 JSON-RPC.
	created := mustResult[schemas.TaskPushNotificationConfig](t, rpcAs(t, h, aliceKey, "CreateTaskPushNotificationConfig",
		map[string]any{"taskId": id, "url": "https://hooks.example/a2a", "token": "tok", "authentication": map[string]any{"scheme": "Bearer", "credentials": "c"}}))
	if created.ID == "" || created.TaskID != id || created.URL != "https://hooks.example/a2a" || created.Authentication == nil || created.Authentication.Scheme != "Bearer" {
		t.Fatalf("created %+v", created)
	}
	if got := mustResult[schemas.TaskPushNotificationConfig](t, rpcAs(t, h, aliceKey, "GetTaskPushNotificationConfig", map[string]any{"taskId": id, "id": created.ID})); got.ID != created.ID || got.URL != created.URL || got.Token != "" {
		t.Fatalf("got %+v", got)
	}

	// HTTP+JSON: the body is the config, the task is the path's.
	code, _, body := as(t, aliceKey, "POST", h.url+"/agents/echo/tasks/"+id+"/pushNotificationConfigs", "application/json", `{"id":"rest","url":"https://hooks.example/rest"}`)
	if code != 200 || !strings.Contains(string(body), `"taskId":"`+id+`"`) {
		t.Fatalf("REST create: %d %s", code, body)
	}
	code, _, body = as(t, aliceKey, "POST", h.url+"/agents/echo/tasks/"+id+"/pushNotificationConfigs", "application/json", `{"taskId":"`+schemas.NewID()+`","url":"https://hooks.example/x"}`)
	if code != 400 {
		t.Fatalf("REST create for another task than the path's: %d %s", code, body)
	}

	// 0.3: its shapes, the same configs.
	r := rpcAs(t, h, aliceKey, "tasks/pushNotificationConfig/set", map[string]any{"taskId": id,
		"pushNotificationConfig": map[string]any{"id": "old", "url": "https://hooks.example/v03", "authentication": map[string]any{"schemes": []string{"Basic"}, "credentials": "dXM6cHc="}}})
	if v03 := mustResult[schemas.V03TaskPushNotificationConfig](t, r); v03.TaskID != id || v03.PushNotificationConfig.ID != "old" || v03.PushNotificationConfig.Authentication.Schemes[0] != "Basic" {
		t.Fatalf("0.3 set: %s", r.Result)
	}
	if list := mustResult[[]schemas.V03TaskPushNotificationConfig](t, rpcAs(t, h, aliceKey, "tasks/pushNotificationConfig/list", map[string]any{"id": id})); len(list) != 3 {
		t.Fatalf("0.3 list: %+v", list)
	}
	if got := mustResult[schemas.V03TaskPushNotificationConfig](t, rpcAs(t, h, aliceKey, "tasks/pushNotificationConfig/get", map[string]any{"id": id, "pushNotificationConfigId": "rest"})); got.PushNotificationConfig.URL != "https://hooks.example/rest" {
		t.Fatalf("0.3 get: %+v", got)
	}
	mustError(t, rpcAs(t, h, aliceKey, "tasks/pushNotificationConfig/get", map[string]any{"id": id}), schemas.ErrInvalidParams) // three: name one

	// Listed in every binding, oldest first; an admin of the tenant sees them.
	list := mustResult[schemas.ListTaskPushNotificationConfigsResponse](t, rpcAs(t, h, opsKey, "ListTaskPushNotificationConfigs", map[string]any{"taskId": id}))
	if len(list.Configs) != 3 || list.Configs[0].ID != created.ID || list.Configs[1].ID != "rest" || list.Configs[2].ID != "old" {
		t.Fatalf("list: %+v", list)
	}
	code, _, body = as(t, aliceKey, "GET", h.url+"/agents/echo/tasks/"+id+"/pushNotificationConfigs/old", "", "")
	if code != 200 || !strings.Contains(string(body), `"scheme":"Basic"`) {
		t.Fatalf("REST get: %d %s", code, body)
	}

	// Errors.
	for _, c := range []struct {
		key    string
		method string
		params map[string]any
		want   *schemas.Error
	}{
		{bobKey, "CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "url": "https://hooks.example/b"}, schemas.ErrTaskNotFound},
		{bobKey, "GetTaskPushNotificationConfig", map[string]any{"taskId": id, "id": created.ID}, schemas.ErrTaskNotFound},
		{bobKey, "ListTaskPushNotificationConfigs", map[string]any{"taskId": id}, schemas.ErrTaskNotFound},
		{bobKey, "DeleteTaskPushNotificationConfig", map[string]any{"taskId": id, "id": created.ID}, schemas.ErrTaskNotFound},
		{aliceKey, "CreateTaskPushNotificationConfig", map[string]any{"taskId": schemas.NewID(), "url": "https://hooks.example/b"}, schemas.ErrTaskNotFound},
		{aliceKey, "GetTaskPushNotificationConfig", map[string]any{"taskId": id, "id": "nope"}, schemas.ErrTaskNotFound},
		{aliceKey, "CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "url": "not a url"}, schemas.ErrInvalidParams},
		{aliceKey, "CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "url": "http://169.254.169.254/latest"}, schemas.ErrInvalidParams},
		{aliceKey, "CreateTaskPushNotificationConfig", map[string]any{"url": "https://hooks.example/b"}, schemas.ErrInvalidParams},
		{aliceKey, "GetTaskPushNotificationConfig", map[string]any{"taskId": id}, schemas.ErrInvalidParams},
	} {
		mustError(t, rpcAs(t, h, c.key, c.method, c.params), c.want)
	}

	// Delete in each binding; deleting again succeeds.
	for range 2 {
		if r := rpcAs(t, h, aliceKey, "DeleteTaskPushNotificationConfig", map[string]any{"taskId": id, "id": created.ID}); r.Error != nil || string(r.Result) != "{}" {
			t.Fatalf("delete: %s %+v", r.Result, r.Error)
		}
	}
	if code, _, body := as(t, aliceKey, "DELETE", h.url+"/agents/echo/tasks/"+id+"/pushNotificationConfigs/rest", "", ""); code != 200 {
		t.Fatalf("REST delete: %d %s", code, body)
	}
	if r := rpcAs(t, h, aliceKey, "tasks/pushNotificationConfig/delete", map[string]any{"id": id, "pushNotificationConfigId": "old"}); r.Error != nil || string(r.Result) != "null" {
		t.Fatalf("0.3 delete: %s %+v", r.Result, r.Error)
	}
	if list := mustResult[schemas.ListTaskPushNotificationConfigsResponse](t, rpcAs(t, h, aliceKey, "ListTaskPushNotificationConfigs", map[string]any{"taskId": id})); len(list.Configs) != 0 {
		t.Fatalf("after deleting all: %+v", list)
	}

	// The card says so.
	_, _, card := as(t, "", "GET", h.url+"/agents/echo/.well-known/agent-card.json", "", "")
	if !strings.Contains(string(card), `"pushNotifications":true`) {
		t.Fatalf("card: %s", card)
	}
}

// A config sent with a message is stored with the task the message
// creates (or continues) before the agent runs, in 1.0 and 0.3; one that
// names another task, or a URL the policy refuses, is invalid params.
func TestPushConfigInlineWithTheMessage(t *testing.T) {
	h := pushHarness(t)
	req := send(userMessage("hi"), false)
	req.Configuration = &schemas.SendMessageConfiguration{TaskPushNotificationConfig: &schemas.TaskPushNotificationConfig{URL: "https://hooks.example/inline", Token: "t"}}
	task := mustResult[schemas.SendMessageResponse](t, rpcAs(t, h, aliceKey, "SendMessage", req)).Task
	list := mustResult[schemas.ListTaskPushNotificationConfigsResponse](t, rpcAs(t, h, aliceKey, "ListTaskPushNotificationConfigs", map[string]any{"taskId": task.ID}))
	if len(list.Configs) != 1 || list.Configs[0].TaskID != task.ID || list.Configs[0].ID == "" || list.Configs[0].URL != "https://hooks.example/inline" {
		t.Fatalf("inline config stored as %+v", list)
	}

	r := rpcAs(t, h, aliceKey, "message/send", map[string]any{"message": msg03("hi"),
		"configuration": map[string]any{"pushNotificationConfig": map[string]any{"id": "v03", "url": "https://hooks.example/v03"}}})
	var v03 struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(r.Result, &v03); err != nil || v03.ID == "" {
		t.Fatalf("0.3 send: %s %+v", r.Result, r.Error)
	}
	if got := mustResult[schemas.V03TaskPushNotificationConfig](t, rpcAs(t, h, aliceKey, "tasks/pushNotificationConfig/get", map[string]any{"id": v03.ID})); got.PushNotificationConfig.ID != "v03" {
		t.Fatalf("0.3 inline config stored as %+v", got)
	}

	for _, pc := range []*schemas.TaskPushNotificationConfig{
		{TaskID: schemas.NewID(), URL: "https://hooks.example/x"},
		{URL: "http://169.254.169.254/"},
		{URL: "mailto:a@b"},
	} {
		req.Configuration.TaskPushNotificationConfig = pc
		mustError(t, rpcAs(t, h, aliceKey, "SendMessage", req), schemas.ErrInvalidParams)
	}
}

// A message the task refuses registers nothing: an inline config sent
// with an answer of the wrong context, or with a message to a finished
// task, is not left on the task.
func TestRefusedMessageLeavesNoPushConfig(t *testing.T) {
	h := pushHarness(t)
	configs := func(taskID string) []schemas.TaskPushNotificationConfig {
		t.Helper()
		return mustResult[schemas.ListTaskPushNotificationConfigsResponse](t, rpcAs(t, h, aliceKey, "ListTaskPushNotificationConfigs", map[string]any{"taskId": taskID})).Configs
	}
	asking := mustResult[schemas.SendMessageResponse](t, rpcAs(t, h, aliceKey, "SendMessage", send(userMessage(workers.AskCommand), false))).Task
	if asking.Status.State != schemas.TaskStateInputRequired {
		t.Fatalf("/ask left the task %s", asking.Status.State)
	}
	done := mustResult[schemas.SendMessageResponse](t, rpcAs(t, h, aliceKey, "SendMessage", send(userMessage("hi"), false))).Task
	if done.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("hi left the task %s", done.Status.State)
	}
	for _, tc := range []struct {
		name    string
		task    *schemas.Task
		context string
		want    *schemas.Error
	}{
		{"wrong context", asking, "another-context", schemas.ErrInvalidParams},
		{"finished task", done, "", schemas.ErrUnsupportedOperation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := userMessage("answer")
			msg.TaskID, msg.ContextID = tc.task.ID, tc.context
			req := send(msg, false)
			req.Configuration = &schemas.SendMessageConfiguration{TaskPushNotificationConfig: &schemas.TaskPushNotificationConfig{URL: "https://hooks.example/refused"}}
			mustError(t, rpcAs(t, h, aliceKey, "SendMessage", req), tc.want)
			if got := configs(tc.task.ID); len(got) != 0 {
				t.Fatalf("the refused message left configs %+v", got)
			}
		})
	}
	// The answer that is taken keeps its config.
	msg := userMessage("answer")
	msg.TaskID = asking.ID
	req := send(msg, false)
	req.Configuration = &schemas.SendMessageConfiguration{TaskPushNotificationConfig: &schemas.TaskPushNotificationConfig{URL: "https://hooks.example/taken"}}
	mustResult[schemas.SendMessageResponse](t, rpcAs(t, h, aliceKey, "SendMessage", req))
	if got := configs(asking.ID); len(got) != 1 || got[0].URL != "https://hooks.example/taken" {
		t.Fatalf("the answer taken has configs %+v, want the one sent with it", got)
	}
}

// The keys notifications are signed with are public, served to anyone at
// /.well-known/jwks.json as the edge holds them now (a rotation shows at
// once), cacheable with an ETag; an edge without them serves no such path.
func TestJWKSIsServedWhereKeysAre(t *testing.T) {
	doc := []byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`)
	var keys atomic.Pointer[[]byte]
	keys.Store(&doc)
	h := authHarnessWith(t, edge.Config{Push: true, NotificationKeys: func() []byte { return *keys.Load() }})
	code, hdr, body := as(t, "", "GET", h.url+"/.well-known/jwks.json", "", "")
	if code != 200 || string(body) != string(doc) || hdr.Get("ETag") == "" || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("jwks: %d %v %s", code, hdr, body)
	}
	rotated := []byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k2","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`)
	keys.Store(&rotated)
	if _, _, body := as(t, "", "GET", h.url+"/.well-known/jwks.json", "", ""); string(body) != string(rotated) {
		t.Fatalf("after a rotation: %s", body)
	}
	plain := pushHarness(t)
	if code, _, _ := as(t, "", "GET", plain.url+"/.well-known/jwks.json", "", ""); code != 404 {
		t.Fatalf("an edge without keys answered %d", code)
	}
}

// A config whose webhook fails shows it, in get and list of every
// version, under a2abusDelivery; a healthy one carries no such member.
func TestPushConfigShowsItsDeliveryState(t *testing.T) {
	h := pushHarness(t)
	id := mustResult[schemas.SendMessageResponse](t, rpcAs(t, h, aliceKey, "SendMessage", send(userMessage("hi"), false))).Task.ID
	for _, cid := range []string{"bad", "good"} {
		mustResult[schemas.TaskPushNotificationConfig](t, rpcAs(t, h, aliceKey, "CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "id": cid, "url": "https://hooks.example/" + cid}))
	}
	if _, _, err := h.b.ChangePushDelivery(context.Background(), id, nil, 0, func(set *schemas.PushConfigSet) error {
		set.Configs[set.Index("bad")].Failing = &schemas.PushFailure{Since: *schemas.Now(), Attempts: 3, LastError: "the webhook answered 503 Service Unavailable"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, params string }{
		{"GetTaskPushNotificationConfig", `{"taskId":"` + id + `","id":"bad"}`},
		{"ListTaskPushNotificationConfigs", `{"taskId":"` + id + `"}`},
		{"tasks/pushNotificationConfig/get", `{"id":"` + id + `","pushNotificationConfigId":"bad"}`},
		{"tasks/pushNotificationConfig/list", `{"id":"` + id + `"}`},
	} {
		r := rpcAs(t, h, aliceKey, c.method, json.RawMessage(c.params))
		if r.Error != nil || !strings.Contains(string(r.Result), `"a2abusDelivery":{"failing":{`) || !strings.Contains(string(r.Result), `"attempts":3`) ||
			strings.Count(string(r.Result), "a2abusDelivery") != 1 {
			t.Errorf("%s: %s %+v", c.method, r.Result, r.Error)
		}
	}
	if r := rpcAs(t, h, aliceKey, "GetTaskPushNotificationConfig", map[string]any{"taskId": id, "id": "good"}); strings.Contains(string(r.Result), "a2abusDelivery") {
		t.Errorf("a healthy config: %s", r.Result)
	}
}

// A config created on a finished task is stored and stays readable — got,
// listed, then deleted — while a push sender runs, on 1.0 JSON-RPC,
// HTTP+JSON and 0.3: the specification lists no error for creating one on
// a finished task (the TCK creates them on completed tasks), and a sender
// that dropped the configs of a finished task once its last event was
// delivered made the create's answer a lie.
func TestPushConfigOfAFinishedTaskStaysReadable(t *testing.T) {
	h := pushHarness(t)
	passes := make(chan string, 64)
	s, err := workers.NewPushSender(h.b, workers.PushOptions{Client: &http.Client{}, Stored: func(id string) { passes <- id }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	rest := func(method, path, body string) (int, []byte) {
		t.Helper()
		code, _, b := as(t, aliceKey, method, h.url+"/agents/echo"+path, "application/json", body)
		return code, b
	}
	rpc := func(method string, params map[string]any) (int, []byte) {
		t.Helper()
		r := rpcAs(t, h, aliceKey, method, params)
		if r.Error != nil {
			return r.Error.Code, []byte(r.Error.Message)
		}
		return 0, r.Result
	}
	for _, b := range []struct {
		name              string
		create, get, list func(task string) (int, []byte)
		del               func(task string) (int, []byte)
		ok, notFound      int
	}{
		{"1.0 JSON-RPC",
			func(id string) (int, []byte) {
				return rpc("CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "id": "kept", "url": "https://hooks.example/kept"})
			},
			func(id string) (int, []byte) {
				return rpc("GetTaskPushNotificationConfig", map[string]any{"taskId": id, "id": "kept"})
			},
			func(id string) (int, []byte) {
				return rpc("ListTaskPushNotificationConfigs", map[string]any{"taskId": id})
			},
			func(id string) (int, []byte) {
				return rpc("DeleteTaskPushNotificationConfig", map[string]any{"taskId": id, "id": "kept"})
			},
			0, schemas.ErrTaskNotFound.Code},
		{"HTTP+JSON",
			func(id string) (int, []byte) {
				return rest("POST", "/tasks/"+id+"/pushNotificationConfigs", `{"id":"kept","url":"https://hooks.example/kept"}`)
			},
			func(id string) (int, []byte) { return rest("GET", "/tasks/"+id+"/pushNotificationConfigs/kept", "") },
			func(id string) (int, []byte) { return rest("GET", "/tasks/"+id+"/pushNotificationConfigs", "") },
			func(id string) (int, []byte) { return rest("DELETE", "/tasks/"+id+"/pushNotificationConfigs/kept", "") },
			http.StatusOK, http.StatusNotFound},
		{"0.3 JSON-RPC",
			func(id string) (int, []byte) {
				return rpc("tasks/pushNotificationConfig/set", map[string]any{"taskId": id, "pushNotificationConfig": map[string]any{"id": "kept", "url": "https://hooks.example/kept"}})
			},
			func(id string) (int, []byte) {
				return rpc("tasks/pushNotificationConfig/get", map[string]any{"id": id, "pushNotificationConfigId": "kept"})
			},
			func(id string) (int, []byte) {
				return rpc("tasks/pushNotificationConfig/list", map[string]any{"id": id})
			},
			func(id string) (int, []byte) {
				return rpc("tasks/pushNotificationConfig/delete", map[string]any{"id": id, "pushNotificationConfigId": "kept"})
			},
			0, schemas.ErrTaskNotFound.Code},
	} {
		t.Run(b.name, func(t *testing.T) {
			task := mustResult[schemas.SendMessageResponse](t, rpcAs(t, h, aliceKey, "SendMessage", send(userMessage("hi"), false))).Task
			if task.Status.State != schemas.TaskStateCompleted {
				t.Fatalf("the task is %s, want it finished", task.Status.State)
			}
			if code, body := b.create(task.ID); code != b.ok || !strings.Contains(string(body), "https://hooks.example/kept") {
				t.Fatalf("create: %d %s", code, body)
			}
			// The create woke the sender: wait for its pass over the task.
			for id := ""; id != task.ID; {
				select {
				case id = <-passes:
				case <-time.After(30 * time.Second):
					t.Fatal("the push sender never looked at the task")
				}
			}
			if code, body := b.get(task.ID); code != b.ok || !strings.Contains(string(body), `"kept"`) {
				t.Fatalf("get after the sender's pass: %d %s", code, body)
			}
			if code, body := b.list(task.ID); code != b.ok || !strings.Contains(string(body), `"kept"`) {
				t.Fatalf("list after the sender's pass: %d %s", code, body)
			}
			if code, body := b.del(task.ID); code != b.ok {
				t.Fatalf("delete: %d %s", code, body)
			}
			if code, body := b.get(task.ID); code != b.notFound {
				t.Fatalf("get after delete: %d %s, want %d", code, body, b.notFound)
			}
		})
	}
}
