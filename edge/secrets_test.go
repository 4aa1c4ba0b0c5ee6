package edge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// A push config's secrets — its token and its authentication's
// credentials — are write-only: no answer carries them back, to the
// task's owner or to an admin, on 1.0 JSON-RPC, HTTP+JSON or 0.3, created
// or read or listed; each answer names the members withheld and keeps the
// scheme. The webhook still receives them: delivery reads what is stored.
func TestPushSecretsAreWriteOnly(t *testing.T) {
	h := pushHarness(t)
	const token, creds = "tok-secret-0123456789", "cred-secret-0123456789"
	type hit struct{ token, authorization string }
	hits := make(chan hit, 64)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- hit{r.Header.Get(schemas.HeaderNotificationToken), r.Header.Get("Authorization")}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	secrets := map[string]any{"token": token, "authentication": map[string]any{"scheme": "Bearer", "credentials": creds}}
	with := func(m map[string]any) map[string]any {
		for k, v := range secrets {
			m[k] = v
		}
		return m
	}

	// Created inline with the message, so it is told of the task's events.
	req := send(userMessage("hi"), false)
	req.Configuration = &schemas.SendMessageConfiguration{TaskPushNotificationConfig: &schemas.TaskPushNotificationConfig{
		ID: "inline", URL: hook.URL + "/a2a", Token: token, Authentication: &schemas.AuthenticationInfo{Scheme: "Bearer", Credentials: creds}}}
	id := mustResult[schemas.SendMessageResponse](t, rpcAs(t, h, aliceKey, "SendMessage", req)).Task.ID
	taskPath := h.url + "/agents/echo/tasks/" + id + "/pushNotificationConfigs"

	// Every answer that carries a config, created or read.
	answers := map[string]string{}
	raw := func(name string, r *rpcReply) {
		t.Helper()
		if r.Error != nil {
			t.Fatalf("%s: %d %s", name, r.Error.Code, r.Error.Message)
		}
		answers[name] = string(r.Result)
	}
	raw("1.0 create", rpcAs(t, h, aliceKey, "CreateTaskPushNotificationConfig", with(map[string]any{"taskId": id, "id": "v1", "url": "https://hooks.example/v1"})))
	raw("0.3 set", rpcAs(t, h, aliceKey, "tasks/pushNotificationConfig/set", map[string]any{"taskId": id, "pushNotificationConfig": map[string]any{
		"id": "v03", "url": "https://hooks.example/v03", "token": token, "authentication": map[string]any{"schemes": []string{"Bearer"}, "credentials": creds}}}))
	restBody, _ := json.Marshal(with(map[string]any{"id": "rest", "url": "https://hooks.example/rest"}))
	code, _, body := as(t, aliceKey, "POST", taskPath, "application/json", string(restBody))
	if code != 200 {
		t.Fatalf("HTTP+JSON create: %d %s", code, body)
	}
	answers["HTTP+JSON create"] = string(body)
	for _, who := range []struct{ name, key string }{{"owner", aliceKey}, {"admin", opsKey}} {
		raw(who.name+" 1.0 get", rpcAs(t, h, who.key, "GetTaskPushNotificationConfig", map[string]any{"taskId": id, "id": "inline"}))
		raw(who.name+" 1.0 list", rpcAs(t, h, who.key, "ListTaskPushNotificationConfigs", map[string]any{"taskId": id}))
		raw(who.name+" 0.3 get", rpcAs(t, h, who.key, "tasks/pushNotificationConfig/get", map[string]any{"id": id, "pushNotificationConfigId": "v03"}))
		raw(who.name+" 0.3 list", rpcAs(t, h, who.key, "tasks/pushNotificationConfig/list", map[string]any{"id": id}))
		for _, path := range []string{taskPath, taskPath + "/rest"} {
			code, _, body := as(t, who.key, "GET", path, "", "")
			if code != 200 {
				t.Fatalf("%s GET %s: %d %s", who.name, path, code, body)
			}
			answers[who.name+" HTTP+JSON GET "+strings.TrimPrefix(path, h.url)] = string(body)
		}
	}
	for name, a := range answers {
		if strings.Contains(a, token) || strings.Contains(a, creds) {
			t.Errorf("%s shows a secret: %s", name, a)
		}
		if !strings.Contains(a, `"a2abusRedacted":["token","authentication.credentials"]`) {
			t.Errorf("%s does not say which secrets it withholds: %s", name, a)
		}
		if !strings.Contains(a, `"scheme":"Bearer"`) && !strings.Contains(a, `"schemes":["Bearer"]`) {
			t.Errorf("%s does not show the authentication scheme: %s", name, a)
		}
	}
	if len(answers) != 15 {
		t.Fatalf("%d answers checked, want 15", len(answers))
	}

	// The sender starts only now, every answer checked: the webhook gets
	// the secrets as stored.
	s, err := workers.NewPushSender(h.b, workers.PushOptions{Client: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case got := <-hits:
		if got.token != token || got.authorization != "Bearer "+creds {
			t.Fatalf("the webhook got token %q, authorization %q", got.token, got.authorization)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook was never notified")
	}
}

// A registry entry's plain headers are shown to every admin, so one named
// like a credential header is refused (400) with where it belongs
// (headersFromEnv), as Authorization always was; other headers are kept.
func TestRegistryRefusesCredentialLookingPlainHeaders(t *testing.T) {
	h := authHarness(t)
	for _, c := range []struct {
		header string
		want   int
	}{
		{"X-Auth-Token", http.StatusBadRequest},
		{"Api-Key", http.StatusBadRequest},
		{"X-Goog-Api-Key", http.StatusBadRequest},
		{"x-client-secret", http.StatusBadRequest},
		{"X-Session-Id", http.StatusBadRequest},
		{"Proxy-Authorization", http.StatusBadRequest},
		{"Cookie", http.StatusBadRequest},
		{"X-Password", http.StatusBadRequest},
		{"Authorization", http.StatusBadRequest},
		{"X-Tenant", http.StatusOK},
		{"Accept-Language", http.StatusOK},
	} {
		t.Run(c.header, func(t *testing.T) {
			agent := "far-" + strings.ToLower(strings.ReplaceAll(c.header, "-", ""))
			entry := `{"remote": {"url": "https://agents.example.com/a2a", "headers": {"` + c.header + `": "v-0123456789"}}}`
			status, _, body := as(t, opsKey, "PUT", h.url+"/a2a/admin/agents/"+agent, "application/json", entry)
			if status != c.want {
				t.Fatalf("PUT with a plain %s header: %d %s, want %d", c.header, status, body, c.want)
			}
			if c.want == http.StatusOK {
				return
			}
			if !strings.Contains(string(body), c.header) || !strings.Contains(string(body), "headersFromEnv") || strings.Contains(string(body), "v-0123456789") {
				t.Errorf("the refusal: %s", body)
			}
			if status, _, body := as(t, opsKey, "GET", h.url+"/a2a/admin/agents/"+agent, "", ""); status != http.StatusNotFound {
				t.Errorf("a refused entry was stored: %d %s", status, body)
			}
		})
	}
}

// remoteAgent is a local definition that describes itself as a remote
// agent does, offline, with a status naming an internal host.
func remoteAgent(name string) workers.Definition {
	return workers.Definition{
		Name:  name,
		Agent: workers.Echo{},
		Live: func() (schemas.AgentCard, *schemas.RemoteAgentStatus) {
			return schemas.AgentCard{Name: name, Description: "forecasts"},
				&schemas.RemoteAgentStatus{URL: "http://10.9.8.7:8443/internal/a2a", Health: schemas.HealthOffline, CheckedAt: schemas.Now(),
					LastError: "dial tcp 10.9.8.7:8443: connect: connection refused"}
		},
		Changed: make(chan struct{}),
	}
}

// GET /a2a/agents needs no credentials and shows every caller the cards
// with each agent's name, kind and health; a remote agent's status (its
// URL, an internal host, and its last error) only to admins: to an admin
// principal of an authenticating edge, and on an edge that authenticates
// no one only when it serves its admin routes to all (OpenAdmin). What
// depends on the caller is not cacheable by shared caches. A live local
// agent is online, so health=online finds it (issue 30).
func TestAgentListShowsRemoteStatusToAdminsOnly(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{
		{Key: aliceKey, Principal: "alice"}, {Key: opsKey, Principal: "ops", Admin: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{workers.EchoDefinition("echo"), remoteAgent("weather")},
		edge:   edge.Config{Auth: a, DefaultAgent: "echo"},
	})
	anonymous := h.startEdge(h.b, edge.Config{DefaultAgent: "echo"})
	open := h.startEdge(h.b, edge.Config{DefaultAgent: "echo", OpenAdmin: true})
	internal := []string{"10.9.8.7", "/internal/a2a", "lastError", "connection refused"}

	for _, c := range []struct {
		name, base, key string
		operator        bool
		cache           string
	}{
		{"no credentials", h.url, "", false, "private"},
		{"wrong credentials", h.url, "not-a-key-0123456789abc", false, "private"},
		{"a non-admin", h.url, aliceKey, false, "private"},
		{"an admin", h.url, opsKey, true, "private"},
		{"an edge that authenticates no one", anonymous, "", false, "public"},
		{"an edge open to all as admins", open, "", true, "public"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, hdr, body := as(t, c.key, "GET", c.base+"/a2a/agents", "", "")
			var l schemas.AgentList
			if status != http.StatusOK || json.Unmarshal(body, &l) != nil || len(l.Agents) != 2 {
				t.Fatalf("%d %s", status, body)
			}
			if !strings.HasPrefix(hdr.Get("Cache-Control"), c.cache) {
				t.Errorf("Cache-Control %q, want %s", hdr.Get("Cache-Control"), c.cache)
			}
			echo, weather := l.Agents[0], l.Agents[1]
			if echo.Kind != "local" || echo.Health != schemas.HealthOnline || weather.Kind != "remote" || weather.Health != schemas.HealthOffline || weather.Description != "forecasts" {
				t.Errorf("entries: %+v / %+v", echo, weather)
			}
			for _, s := range internal {
				if shown := strings.Contains(string(body), s); shown != c.operator {
					t.Errorf("%q shown: %v, want %v: %s", s, shown, c.operator, body)
				}
			}
			if c.operator && (weather.Remote == nil || weather.Remote.URL != "http://10.9.8.7:8443/internal/a2a") {
				t.Errorf("the admin's view of the remote agent: %+v", weather.Remote)
			}
		})
	}

	for _, c := range []struct {
		query string
		want  []string
	}{
		{"?health=online", []string{"echo"}},
		{"?health=offline", []string{"weather"}},
		{"?kind=local&health=online", []string{"echo"}},
	} {
		_, _, body := as(t, "", "GET", h.url+"/a2a/agents"+c.query, "", "")
		var l schemas.AgentList
		if err := json.Unmarshal(body, &l); err != nil || strings.Join(names(l), ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: %s, want %v", c.query, body, c.want)
		}
	}
}
