package edge_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// A 1.0 request whose members are named as the proto names its fields
// (history_length, context_id, task_push_notification_config, …) is read
// as one in json_names on JSON-RPC and on HTTP+JSON, bodies and query
// parameters alike — ProtoJSON parsers accept both — while metadata keys
// stay the client's; a field given under both names with different
// values is refused.
func TestProtoFieldNamesOnEveryBinding(t *testing.T) {
	h := pushHarness(t)
	type answer struct {
		code int // 0: success; else the JSON-RPC code or HTTP status
		body []byte
	}
	rpc := func(method string, params string) answer {
		t.Helper()
		var p json.RawMessage = []byte(params)
		r := rpcAs(t, h, aliceKey, method, p)
		if r.Error != nil {
			return answer{r.Error.Code, []byte(r.Error.Message)}
		}
		return answer{0, r.Result}
	}
	rest := func(method, path, body string) answer {
		t.Helper()
		code, _, b := as(t, aliceKey, method, h.url+"/agents/echo"+path, "application/json", body)
		if code != http.StatusOK {
			return answer{code, b}
		}
		return answer{0, b}
	}
	task := func(t *testing.T, a answer) schemas.Task {
		t.Helper()
		if a.code != 0 {
			t.Fatalf("refused: %d %s", a.code, a.body)
		}
		var tk schemas.Task
		if err := json.Unmarshal(a.body, &tk); err != nil || tk.ID == "" {
			t.Fatalf("not a task: %s", a.body)
		}
		return tk
	}

	for _, b := range []struct {
		name string
		send func(params string) answer
		get  func(id, query string, params string) answer
		list func(query, params string) answer
		push func(id, body string) answer
		bad  int // the refusal of invalid params
	}{
		{"JSON-RPC",
			func(p string) answer { return rpc("SendMessage", p) },
			func(_, _, p string) answer { return rpc("GetTask", p) },
			func(_, p string) answer { return rpc("ListTasks", p) },
			func(_, p string) answer { return rpc("CreateTaskPushNotificationConfig", p) },
			schemas.ErrInvalidParams.Code},
		{"HTTP+JSON",
			func(p string) answer { return rest("POST", "/message:send", p) },
			func(id, q, _ string) answer { return rest("GET", "/tasks/"+id+"?"+q, "") },
			func(q, _ string) answer { return rest("GET", "/tasks?"+q, "") },
			func(id, p string) answer { return rest("POST", "/tasks/"+id+"/pushNotificationConfigs", p) },
			http.StatusBadRequest},
	} {
		t.Run(b.name, func(t *testing.T) {
			ctx := schemas.NewID()
			var id string
			for i := range 2 {
				a := b.send(`{"message":{"message_id":"` + schemas.NewID() + `","context_id":"` + ctx + `","role":"ROLE_USER","parts":[{"text":"hi","media_type":"text/plain"}],"metadata":{"user_id":"u"}},` +
					`"configuration":{"history_length":0,"accepted_output_modes":["text/plain"],"task_push_notification_config":{"id":"snake","url":"https://hooks.example/snake"}}}`)
				if a.code != 0 {
					t.Fatalf("send %d: %d %s", i, a.code, a.body)
				}
				var sent schemas.SendMessageResponse
				if err := json.Unmarshal(a.body, &sent); err != nil || sent.Task == nil {
					t.Fatalf("send %d: %s", i, a.body)
				}
				if sent.Task.ContextID != ctx || len(sent.Task.History) != 0 {
					t.Fatalf("send %d: context %q (want %q), %d messages of history (history_length 0 asks none)", i, sent.Task.ContextID, ctx, len(sent.Task.History))
				}
				id = sent.Task.ID
			}
			// The config sent under its proto name is the task's.
			list := mustResult[schemas.ListTaskPushNotificationConfigsResponse](t, rpcAs(t, h, aliceKey, "ListTaskPushNotificationConfigs", map[string]any{"taskId": id}))
			if len(list.Configs) != 1 || list.Configs[0].ID != "snake" {
				t.Fatalf("the inline config sent as task_push_notification_config: %+v", list)
			}
			// Metadata keys are the client's own.
			full := task(t, rpc("GetTask", `{"id":"`+id+`"}`))
			if len(full.History) == 0 || full.History[0].Metadata["user_id"] != "u" {
				t.Fatalf("the message's metadata was renamed: %+v", full.History)
			}

			if tk := task(t, b.get(id, "history_length=0", `{"id":"`+id+`","history_length":0}`)); len(tk.History) != 0 {
				t.Fatalf("get with history_length 0: %d messages", len(tk.History))
			}
			a := b.list("context_id="+ctx+"&page_size=1", `{"context_id":"`+ctx+`","page_size":1}`)
			var page schemas.ListTasksResponse
			if a.code != 0 || json.Unmarshal(a.body, &page) != nil {
				t.Fatalf("list: %d %s", a.code, a.body)
			}
			if len(page.Tasks) != 1 || page.Tasks[0].ContextID != ctx || page.TotalSize != 2 || page.NextPageToken == "" {
				t.Fatalf("list by context_id, page_size 1: %d tasks, total %d, next %q", len(page.Tasks), page.TotalSize, page.NextPageToken)
			}
			if a := b.push(id, `{"task_id":"`+id+`","id":"c2","url":"https://hooks.example/c2"}`); a.code != 0 || !strings.Contains(string(a.body), `"taskId":"`+id+`"`) {
				t.Fatalf("create a config naming task_id: %d %s", a.code, a.body)
			}

			// Given twice: the same value is one field; different values are refused.
			if tk := task(t, b.get(id, "historyLength=0&history_length=0", `{"id":"`+id+`","historyLength":0,"history_length":0}`)); len(tk.History) != 0 {
				t.Fatalf("get with history length 0 twice: %d messages", len(tk.History))
			}
			for what, a := range map[string]answer{
				"history length twice": b.get(id, "historyLength=1&history_length=0", `{"id":"`+id+`","historyLength":1,"history_length":0}`),
				"task of another name": b.push(id, `{"taskId":"`+id+`","task_id":"`+schemas.NewID()+`","id":"c3","url":"https://hooks.example/c3"}`),
			} {
				if a.code != b.bad || !strings.Contains(string(a.body), "with different values") {
					t.Errorf("%s: %d %s, want %d naming both names", what, a.code, a.body, b.bad)
				}
			}
		})
	}
}
