package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

const (
	aliceKey = "alice-key-0123456789abcdef"
	bobKey   = "bob-key-0123456789abcdefgh"
	opsKey   = "ops-key-0123456789abcdefgh"
)

// authHarness is an edge that authenticates with API keys of three
// principals: alice, bob and the admin ops.
func authHarness(t *testing.T) *harness {
	t.Helper()
	return authHarnessWith(t, edge.Config{})
}

// authHarnessWith is authHarness with more of the edge's configuration.
func authHarnessWith(t *testing.T, cfg edge.Config) *harness {
	t.Helper()
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{
		{Key: aliceKey, Principal: "alice"}, {Key: bobKey, Principal: "bob"}, {Key: opsKey, Principal: "ops", Admin: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth, cfg.DefaultAgent = a, "echo"
	return newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, edge: cfg})
}

// as sends one request with key (none when ""), and returns the status,
// headers and body.
func as(t *testing.T, key, method, url, contentType, body string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// Every A2A request of every binding and dialect passes the front door's
// authentication: without credentials, or with a wrong key, it is refused
// with 401 and a challenge naming the scheme, in the binding's error form;
// the card and health stay public, and the card declares the scheme.
func TestEveryRouteRequiresCredentials(t *testing.T) {
	h := authHarness(t)
	id := schemas.NewID()
	msg := map[string]any{"messageId": "m", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "x"}}}
	legacy := legacyParams("client-1", "", "x")
	rpc := func(method string, params any) [4]string {
		return [4]string{"POST", "/agents/echo", "application/json", rpcBody(1, method, params)}
	}
	cases := map[string][4]string{
		"1.0 SendMessage":          rpc("SendMessage", map[string]any{"message": msg}),
		"1.0 SendStreamingMessage": rpc("SendStreamingMessage", map[string]any{"message": msg}),
		"1.0 GetTask":              rpc("GetTask", map[string]any{"id": id}),
		"1.0 ListTasks":            rpc("ListTasks", map[string]any{}),
		"1.0 CancelTask":           rpc("CancelTask", map[string]any{"id": id}),
		"1.0 SubscribeToTask":      rpc("SubscribeToTask", map[string]any{"id": id}),
		"1.0 extended card":        rpc("GetExtendedAgentCard", map[string]any{}),
		"1.0 push config":          rpc("CreateTaskPushNotificationConfig", map[string]any{}),
		"0.3 message/send":         rpc("message/send", map[string]any{"message": map[string]any{"messageId": "m", "role": "user", "parts": []any{map[string]any{"kind": "text", "text": "x"}}}}),
		"0.3 tasks/get":            rpc("tasks/get", map[string]any{"id": id}),
		"0.3 tasks/resubscribe":    rpc("tasks/resubscribe", map[string]any{"id": id}),
		"older tasks/send":         rpc("tasks/send", legacy),
		"older sendSubscribe":      rpc("tasks/sendSubscribe", legacy),
		"ping":                     rpc("ping", nil),
		"root JSON-RPC":            {"POST", "/", "application/json", rpcBody(1, "GetTask", map[string]any{"id": id})},
		"REST message:send":        {"POST", "/agents/echo/message:send", "application/json", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}`},
		"REST message:stream":      {"POST", "/message:stream", "application/json", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}`},
		"REST get":                 {"GET", "/agents/echo/tasks/" + id, "", ""},
		"REST list":                {"GET", "/tasks", "", ""},
		"REST cancel":              {"POST", "/tasks/" + id + ":cancel", "application/json", "{}"},
		"REST subscribe":           {"GET", "/tasks/" + id + ":subscribe", "", ""},
		"REST push":                {"GET", "/tasks/" + id + "/pushNotificationConfigs", "", ""},
		"OpenFang send":            {"POST", "/a2a/tasks/send", "application/json", rpcBody(1, "tasks/send", legacy)},
		"OpenFang get":             {"GET", "/a2a/tasks/client-1", "", ""},
		"OpenFang cancel":          {"POST", "/a2a/tasks/client-1/cancel", "", ""},
		"metrics":                  {"GET", "/metrics", "", ""},
	}
	for name, c := range cases {
		for _, key := range []string{"", "not-a-key-of-anyone-0123456789"} {
			status, hdr, body := as(t, key, c[0], h.url+c[1], c[2], c[3])
			// JSON-RPC answers its errors with HTTP 200, the only answer
			// JSON-RPC clients read a code from; the others say 401.
			want := http.StatusUnauthorized
			if c[1] == "/agents/echo" || c[1] == "/" {
				want = http.StatusOK
			}
			if status != want || !strings.Contains(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s with key %q: %d %q %s", name, key, status, hdr.Get("WWW-Authenticate"), body)
				continue
			}
			if c[1] == "/metrics" {
				continue
			}
			if !bytes.Contains(body, []byte(`-31401`)) && !bytes.Contains(body, []byte(`"UNAUTHENTICATED"`)) {
				t.Errorf("%s: the refusal does not name the error: %s", name, body)
			}
			if bytes.Contains(body, []byte(key)) && key != "" {
				t.Errorf("%s: the refusal repeats the credential", name)
			}
		}
	}
	// Public: the cards and health; the card declares what is enforced.
	for _, p := range []string{"/.well-known/agent-card.json", "/.well-known/agent.json", "/agents/echo/.well-known/agent-card.json", "/healthz", "/readyz", "/a2a/agents"} {
		if status, _, body := as(t, "", "GET", h.url+p, "", ""); status != http.StatusOK {
			t.Errorf("GET %s without credentials: %d %s", p, status, body)
		}
	}
	_, _, body := as(t, "", "GET", h.url+"/.well-known/agent-card.json", "", "")
	var card schemas.AgentCard
	if err := json.Unmarshal(body, &card); err != nil || card.SecuritySchemes["apiKey"] == nil || len(card.SecurityRequirements) == 0 || len(card.Security) == 0 {
		t.Fatalf("card security: %s", body)
	}
	// With a key, the same requests are served.
	if status, _, body := as(t, aliceKey, "POST", h.url+"/agents/echo", "application/json", rpcBody(1, "SendMessage", map[string]any{"message": msg})); status != http.StatusOK || !bytes.Contains(body, []byte("TASK_STATE_COMPLETED")) {
		t.Fatalf("alice's send: %d %s", status, body)
	}
	if status, _, _ := as(t, opsKey, "GET", h.url+"/metrics", "", ""); status != http.StatusOK {
		t.Fatalf("the admin reads metrics: %d", status)
	}
	if status, _, _ := as(t, bobKey, "GET", h.url+"/metrics", "", ""); status != http.StatusForbidden {
		t.Fatalf("a non-admin reads metrics: %d", status)
	}
}

// A task is its creator's: every operation of another principal answers
// exactly as for a task that does not exist, listing shows only one's own
// tasks, and an admin sees all.
func TestCallersSeeOnlyTheirOwnTasks(t *testing.T) {
	h := authHarness(t)
	send := func(key, text string) schemas.Task {
		t.Helper()
		_, _, body := as(t, key, "POST", h.url+"/agents/echo", "application/json", rpcBody(1, "SendMessage", map[string]any{
			"message": map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}}))
		var r struct {
			Result schemas.SendMessageResponse `json:"result"`
		}
		if err := json.Unmarshal(body, &r); err != nil || r.Result.Task == nil {
			t.Fatalf("send: %s", body)
		}
		return *r.Result.Task
	}
	alice := send(aliceKey, "alice's")
	ask := send(aliceKey, workers.AskCommand) // waits in INPUT_REQUIRED
	missing := schemas.NewID()
	same := func(what, method string, params func(id string) any) {
		t.Helper()
		for _, id := range []string{alice.ID, ask.ID} {
			_, _, got := as(t, bobKey, "POST", h.url+"/agents/echo", "application/json", rpcBody(1, method, params(id)))
			_, _, want := as(t, bobKey, "POST", h.url+"/agents/echo", "application/json", rpcBody(1, method, params(missing)))
			if g, w := strings.ReplaceAll(string(got), id, "ID"), strings.ReplaceAll(string(want), missing, "ID"); g != w {
				t.Errorf("%s of another's task:\n got %s\nwant %s", what, g, w)
			}
		}
	}
	same("GetTask", "GetTask", func(id string) any { return map[string]any{"id": id} })
	same("CancelTask", "CancelTask", func(id string) any { return map[string]any{"id": id} })
	same("0.3 tasks/get", "tasks/get", func(id string) any { return map[string]any{"id": id} })
	same("continuing", "SendMessage", func(id string) any {
		return map[string]any{"message": map[string]any{"messageId": "m-" + id, "taskId": id, "role": "ROLE_USER", "parts": []any{map[string]any{"text": "mine now"}}}}
	})
	for _, p := range []string{"/agents/echo/tasks/", "/agents/echo/tasks/"} {
		sa, _, a := as(t, bobKey, "GET", h.url+p+alice.ID, "", "")
		sm, _, m := as(t, bobKey, "GET", h.url+p+missing, "", "")
		if sa != sm || strings.ReplaceAll(string(a), alice.ID, "ID") != strings.ReplaceAll(string(m), missing, "ID") {
			t.Errorf("REST get of another's task: %d %s, missing: %d %s", sa, a, sm, m)
		}
	}
	// Streams too: a subscription to another's task is refused as a
	// missing one, with or without a resume cursor.
	for _, cursor := range []string{"", "1"} {
		req, _ := http.NewRequest("POST", h.url+"/agents/echo", strings.NewReader(rpcBody(1, "SubscribeToTask", map[string]any{"id": ask.ID})))
		req.Header.Set("Authorization", "Bearer "+bobKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		if cursor != "" {
			req.Header.Set("Last-Event-ID", cursor)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(b, []byte("-32001")) {
			t.Errorf("bob subscribing to alice's task (cursor %q): %s", cursor, b)
		}
	}
	list := func(key string, params map[string]any) []string {
		t.Helper()
		_, _, body := as(t, key, "POST", h.url+"/agents/echo", "application/json", rpcBody(1, "ListTasks", params))
		var r struct {
			Result schemas.ListTasksResponse `json:"result"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("list: %s", body)
		}
		var ids []string
		for _, t := range r.Result.Tasks {
			ids = append(ids, t.ID)
		}
		return ids
	}
	if got := list(bobKey, map[string]any{}); len(got) != 0 {
		t.Errorf("bob lists %v", got)
	}
	if got := list(bobKey, map[string]any{"contextId": alice.ContextID}); len(got) != 0 {
		t.Errorf("bob lists alice's context: %v", got)
	}
	if got := list(aliceKey, map[string]any{}); len(got) != 2 {
		t.Errorf("alice lists %v", got)
	}
	if got := list(opsKey, map[string]any{}); len(got) != 2 {
		t.Errorf("the admin lists %v", got)
	}
	// The task is still alice's, untouched: bob's cancel did nothing.
	_, _, body := as(t, aliceKey, "POST", h.url+"/agents/echo", "application/json", rpcBody(1, "GetTask", map[string]any{"id": ask.ID}))
	if !bytes.Contains(body, []byte("TASK_STATE_INPUT_REQUIRED")) {
		t.Fatalf("alice's task after bob's attempts: %s", body)
	}
}

// In the older dialect the client names the task: two callers that choose
// the same id get two tasks, and neither reaches the other's.
func TestClientChosenIDsArePrivate(t *testing.T) {
	h := authHarness(t)
	send := func(key, text string) schemas.LegacyTask {
		t.Helper()
		_, _, body := as(t, key, "POST", h.url+"/agents/echo", "application/json", rpcBody(1, "tasks/send", legacyParams("shared-1", "", text)))
		var r struct {
			Result schemas.LegacyTask `json:"result"`
		}
		if err := json.Unmarshal(body, &r); err != nil || r.Result.ID != "shared-1" {
			t.Fatalf("tasks/send: %s", body)
		}
		return r.Result
	}
	send(aliceKey, workers.AskCommand) // alice's waits for input
	bob := send(bobKey, "bob's own")
	if bob.Status.State != "completed" || len(bob.History) == 0 || *bob.History[0].Parts[0].Text != "bob's own" {
		t.Fatalf("bob's task is not his own new one: %+v", bob)
	}
	// alice's task still waits for her; her answer completes it.
	alice := send(aliceKey, "the answer")
	if alice.Status.State != "completed" || len(alice.History) < 2 {
		t.Fatalf("alice's task: %+v", alice)
	}
	// OpenFang's routes see the same separation.
	_, _, a := as(t, aliceKey, "GET", h.url+"/a2a/tasks/shared-1", "", "")
	_, _, b := as(t, bobKey, "GET", h.url+"/a2a/tasks/shared-1", "", "")
	if bytes.Equal(a, b) || !bytes.Contains(a, []byte("the answer")) || bytes.Contains(b, []byte("the answer")) {
		t.Fatalf("OpenFang get:\nalice %s\nbob   %s", a, b)
	}
}

// An agent with extended skills declares an extended card on its public
// card and serves it, with those skills, to authenticated callers only, on
// every binding and version; an agent without any has none.
func TestExtendedCardForAuthenticatedCallers(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{{Key: aliceKey, Principal: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	secret := schemas.AgentSkill{ID: "internal", Name: "Internal", Description: "only for callers we know", Tags: []string{"internal"}}
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo"), workers.EchoDefinition("plain")},
		edge: edge.Config{Auth: a, ExtendedSkills: map[string][]schemas.AgentSkill{"echo": {secret}}}})
	_, _, body := as(t, "", "GET", h.url+"/agents/echo/.well-known/agent-card.json", "", "")
	var public schemas.AgentCard
	if err := json.Unmarshal(body, &public); err != nil || public.Capabilities.ExtendedAgentCard == nil || !*public.Capabilities.ExtendedAgentCard ||
		public.SupportsAuthenticatedExtendedCard == nil || !*public.SupportsAuthenticatedExtendedCard || bytes.Contains(body, []byte("internal")) {
		t.Fatalf("public card: %s", body)
	}
	hasSecret := func(b []byte) bool { return bytes.Contains(b, []byte(`"id":"internal"`)) }
	result := func(b []byte) []byte {
		var r struct{ Result json.RawMessage }
		if json.Unmarshal(b, &r) != nil || r.Result == nil {
			return b // HTTP+JSON: the card itself
		}
		return r.Result
	}
	for _, c := range []struct {
		name string
		req  [4]string
		// check fails t unless the answered card is in the version's form.
		check func(t *testing.T, card []byte)
	}{
		{"1.0 JSON-RPC", [4]string{"POST", "/agents/echo", "application/json", rpcBody(1, "GetExtendedAgentCard", map[string]any{})}, only10Card},
		{"HTTP+JSON", [4]string{"GET", "/agents/echo/extendedAgentCard", "", ""}, only10Card},
		{"0.3 JSON-RPC", [4]string{"POST", "/agents/echo", "application/json", rpcBody(1, "agent/getAuthenticatedExtendedCard", nil)}, func(t *testing.T, card []byte) {
			var c03 struct {
				URL, ProtocolVersion              string
				SupportsAuthenticatedExtendedCard *bool
				Security                          []map[string][]string
				SecuritySchemes                   map[string]struct{ Type string }
			}
			if err := json.Unmarshal(card, &c03); err != nil || c03.URL == "" || c03.ProtocolVersion != "0.3.0" || c03.SupportsAuthenticatedExtendedCard == nil ||
				len(c03.Security) == 0 || len(c03.SecuritySchemes) == 0 {
				t.Fatalf("not a card 0.3 clients read: %s", card)
			}
			for name, sc := range c03.SecuritySchemes {
				if sc.Type == "" {
					t.Fatalf("scheme %s has no 0.3 type: %s", name, card)
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := c.req
			if status, _, b := as(t, "", req[0], h.url+req[1], req[2], req[3]); hasSecret(b) || (status != 401 && !bytes.Contains(b, []byte("-31401"))) {
				t.Errorf("without credentials: %d %s", status, b)
			}
			status, _, b := as(t, aliceKey, req[0], h.url+req[1], req[2], req[3])
			if status != 200 || !hasSecret(b) {
				t.Fatalf("with a key: %d %s", status, b)
			}
			c.check(t, result(b))
		})
	}
	if _, _, b := as(t, aliceKey, "POST", h.url+"/agents/plain", "application/json", rpcBody(1, "GetExtendedAgentCard", map[string]any{})); !bytes.Contains(b, []byte("-32007")) {
		t.Errorf("an agent without extended skills: %s", b)
	}
}

// only10Card fails t unless card holds only what A2A 1.0's AgentCard
// defines (its proto's fields, by json_name) and declares its security
// schemes in 1.0's shape alone (one member of the SecurityScheme oneof):
// what the 1.0 card schema accepts.
func only10Card(t *testing.T, card []byte) {
	t.Helper()
	fields := map[string]bool{"name": true, "description": true, "supportedInterfaces": true, "provider": true, "version": true,
		"documentationUrl": true, "capabilities": true, "securitySchemes": true, "securityRequirements": true, "defaultInputModes": true,
		"defaultOutputModes": true, "skills": true, "signatures": true, "iconUrl": true}
	oneof := map[string]bool{"apiKeySecurityScheme": true, "httpAuthSecurityScheme": true, "oauth2SecurityScheme": true,
		"openIdConnectSecurityScheme": true, "mtlsSecurityScheme": true}
	var c struct {
		SecuritySchemes      map[string]map[string]json.RawMessage `json:"securitySchemes"`
		SecurityRequirements []json.RawMessage                     `json:"securityRequirements"`
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(card, &all); err != nil || json.Unmarshal(card, &c) != nil {
		t.Fatalf("not a card: %s", card)
	}
	for k := range all {
		if !fields[k] {
			t.Errorf("member %q is not a field of A2A 1.0's AgentCard", k)
		}
	}
	if len(c.SecuritySchemes) == 0 || len(c.SecurityRequirements) == 0 {
		t.Errorf("an authenticating agent's card declares no security: %s", card)
	}
	for name, sc := range c.SecuritySchemes {
		for k := range sc {
			if !oneof[k] || len(sc) != 1 {
				t.Errorf("security scheme %s is not in 1.0's shape (one member of the oneof): %s", name, card)
			}
		}
	}
}

// A principal acts in the tenants its key names, choosing one with the
// request's tenant field (the first by default); tasks, reads and lists
// never cross tenants, and a tenant it may not use is refused (−31403).
func TestTenantsDoNotCross(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{
		{Key: aliceKey, Principal: "alice", Tenants: []string{"t1", "t2"}},
		{Key: bobKey, Principal: "bob", Tenants: []string{"t1"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, edge: edge.Config{Auth: a}})
	call := func(key, method string, params map[string]any) []byte {
		t.Helper()
		_, _, b := as(t, key, "POST", h.url+"/agents/echo", "application/json", rpcBody(1, method, params))
		return b
	}
	msg := map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": "in t2"}}}
	var sent struct {
		Result schemas.SendMessageResponse `json:"result"`
	}
	if b := call(aliceKey, "SendMessage", map[string]any{"message": msg, "tenant": "t2"}); json.Unmarshal(b, &sent) != nil || sent.Result.Task == nil {
		t.Fatalf("send in t2: %s", b)
	}
	id := sent.Result.Task.ID
	if b := call(aliceKey, "GetTask", map[string]any{"id": id}); !bytes.Contains(b, []byte("-32001")) {
		t.Errorf("alice's t2 task read in her default tenant t1: %s", b)
	}
	if b := call(aliceKey, "GetTask", map[string]any{"id": id, "tenant": "t2"}); !bytes.Contains(b, []byte(id)) || bytes.Contains(b, []byte(`"error"`)) {
		t.Errorf("alice's t2 task read in t2: %s", b)
	}
	if b := call(aliceKey, "ListTasks", map[string]any{}); bytes.Contains(b, []byte(id)) {
		t.Errorf("t1's list shows a t2 task: %s", b)
	}
	if b := call(aliceKey, "ListTasks", map[string]any{"tenant": "t2"}); !bytes.Contains(b, []byte(id)) {
		t.Errorf("t2's list lacks its task: %s", b)
	}
	if b := call(bobKey, "GetTask", map[string]any{"id": id, "tenant": "t2"}); !bytes.Contains(b, []byte("-31403")) {
		t.Errorf("bob naming a tenant he may not use: %s", b)
	}
	if status, _, b := as(t, bobKey, "GET", h.url+"/agents/echo/tasks/"+id+"?tenant=t2", "", ""); status != http.StatusForbidden {
		t.Errorf("bob over HTTP+JSON in t2: %d %s", status, b)
	}

	// The HTTP+JSON path prefix selects the tenant as the field does.
	for _, u := range []string{"/agents/echo/t2/tasks/" + id, "/t2/agents/echo/tasks/" + id} {
		status, _, b := as(t, aliceKey, "GET", h.url+u, "", "")
		if want := u[1] == 'a'; (status == 200) != want || (status == 200 && !bytes.Contains(b, []byte(id))) {
			t.Errorf("alice GET %s: %d %s", u, status, b)
		}
	}
	if status, _, b := as(t, bobKey, "GET", h.url+"/agents/echo/t2/tasks/"+id, "", ""); status != http.StatusForbidden {
		t.Errorf("bob's path into t2: %d %s", status, b)
	}
	if status, _, b := as(t, aliceKey, "GET", h.url+"/agents/echo/t1/tasks/"+id, "", ""); status != http.StatusNotFound {
		t.Errorf("alice's t2 task through t1's path: %d %s", status, b)
	}
	if status, _, b := as(t, aliceKey, "GET", h.url+"/agents/echo/t1/tasks/"+id+"?tenant=t2", "", ""); status != http.StatusBadRequest || !bytes.Contains(b, []byte("tenant")) {
		t.Errorf("path and query naming different tenants: %d %s", status, b)
	}
	status, _, b := as(t, aliceKey, "POST", h.url+"/agents/echo/t2/message:send", "application/json", `{"message":{"messageId":"m-path","role":"ROLE_USER","parts":[{"text":"by path"}]}}`)
	var byPath schemas.SendMessageResponse
	if status != 200 || json.Unmarshal(b, &byPath) != nil || byPath.Task == nil {
		t.Fatalf("send by tenant path: %d %s", status, b)
	}
	if b := call(aliceKey, "GetTask", map[string]any{"id": byPath.Task.ID, "tenant": "t2"}); !bytes.Contains(b, []byte(byPath.Task.ID)) || bytes.Contains(b, []byte(`"error"`)) {
		t.Errorf("the task sent by tenant path is not in t2: %s", b)
	}
	if status, _, b := as(t, aliceKey, "GET", h.url+"/agents/echo/t2/nothing/here", "", ""); status != http.StatusNotFound {
		t.Errorf("an unknown path under a tenant: %d %s", status, b)
	}
}

// A context id one caller chose cannot be named by another.
func TestContextsStayWithTheirCaller(t *testing.T) {
	h := authHarness(t)
	send := func(key string) []byte {
		_, _, b := as(t, key, "POST", h.url+"/agents/echo", "application/json", rpcBody(1, "SendMessage", map[string]any{
			"message": map[string]any{"messageId": schemas.NewID(), "contextId": "alice-conversation", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hi"}}}}))
		return b
	}
	if b := send(aliceKey); !bytes.Contains(b, []byte("TASK_STATE_COMPLETED")) {
		t.Fatalf("alice: %s", b)
	}
	if b := send(bobKey); !bytes.Contains(b, []byte("-32602")) {
		t.Fatalf("bob naming alice's context: %s", b)
	}
	if b := send(aliceKey); !bytes.Contains(b, []byte("TASK_STATE_COMPLETED")) {
		t.Fatalf("alice again: %s", b)
	}
}

// The cards' securityRequirements hold each scheme's scopes in the spec's
// ProtoJSON form, a StringList {"list": [...]}; with CardScopesAsArrays,
// as the bare array the official Go SDK reads (a2a-go#430), on the public
// card and the extended card alike.
func TestCardScopesAsArrays(t *testing.T) {
	skills := map[string][]schemas.AgentSkill{"echo": {{ID: "more", Name: "More", Description: "d", Tags: []string{"t"}}}}
	for _, c := range []struct {
		name   string
		arrays bool
		want   string
	}{
		{"the spec's form", false, `"securityRequirements":[{"schemes":{"apiKey":{"list":[]}}}]`},
		{"bare arrays", true, `"securityRequirements":[{"schemes":{"apiKey":[]}}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := authHarnessWith(t, edge.Config{CardScopesAsArrays: c.arrays, ExtendedSkills: skills})
			_, _, public := as(t, "", "GET", h.url+"/agents/echo/.well-known/agent-card.json", "", "")
			_, _, extended := as(t, aliceKey, "GET", h.url+"/agents/echo/extendedAgentCard", "", "")
			for name, card := range map[string][]byte{"public card": public, "extended card": extended} {
				if !bytes.Contains(card, []byte(c.want)) {
					t.Errorf("%s: %s, want %s", name, card, c.want)
				}
			}
		})
	}
}

// With Card10Only every card route serves A2A 1.0's form alone, the one a
// strict 1.0 card schema accepts, while 0.3's extended-card method still
// answers the union card its clients read.
func TestCard10OnlyServesThe10FormEverywhere(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{{Key: aliceKey, Principal: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	secret := schemas.AgentSkill{ID: "internal", Name: "Internal", Description: "only for callers we know", Tags: []string{"internal"}}
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")},
		edge: edge.Config{Auth: a, ExtendedSkills: map[string][]schemas.AgentSkill{"echo": {secret}}, Card10Only: true}})
	for _, path := range []string{"/.well-known/agent-card.json", "/agents/echo/.well-known/agent-card.json"} {
		t.Run(path, func(t *testing.T) {
			status, _, body := as(t, "", "GET", h.url+path, "", "")
			if status != 200 {
				t.Fatalf("%d %s", status, body)
			}
			only10Card(t, body)
			var c schemas.AgentCard
			if err := json.Unmarshal(body, &c); err != nil || len(c.SupportedInterfaces) == 0 || c.Capabilities.ExtendedAgentCard == nil || !*c.Capabilities.ExtendedAgentCard {
				t.Errorf("the 1.0 card lost what it declares: %s", body)
			}
		})
	}
	// The path only clients older than 1.0 fetch keeps the union card.
	if _, _, b := as(t, "", "GET", h.url+"/.well-known/agent.json", "", ""); !bytes.Contains(b, []byte(`"url":`)) || !bytes.Contains(b, []byte(`"protocolVersion":"0.3.0"`)) {
		t.Errorf("the legacy path's card is not the union card: %s", b)
	}
	_, _, b := as(t, aliceKey, "POST", h.url+"/agents/echo", "application/json", rpcBody(1, "agent/getAuthenticatedExtendedCard", nil))
	var r struct {
		Result struct {
			URL, ProtocolVersion string
		}
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Result.URL == "" || r.Result.ProtocolVersion != "0.3.0" {
		t.Errorf("0.3's extended card is not the union card: %s", b)
	}
}
