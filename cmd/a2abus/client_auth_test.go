package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// echoA2Abus serves an a2abus edge with one echo agent (the default, at
// the root) on an in-process bus, over real HTTP on loopback.
func echoA2Abus(t *testing.T) string {
	t.Helper()
	_, b := bustest.New(t, bustest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	r := workers.NewRunner(b, workers.EchoDefinition("echo"), workers.Options{ShutdownGrace: time.Second})
	rdone := make(chan error, 1)
	go func() { rdone <- r.Run(ctx) }()
	<-r.Ready()
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
		<-rdone
	})
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := e.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	return ts.URL
}

// guarded is an authenticating reverse proxy in front of a real a2abus:
// it serves its own public card (naming itself as the endpoint and
// declaring schemes) and passes every other request on only when allow
// says so, refusing it otherwise as an a2abus edge will: 401 with
// WWW-Authenticate and a JSON-RPC -31401 error, or 403 and -31403.
type guarded struct {
	*httptest.Server
	seen atomic.Int32 // requests that reached the agent
}

// verdict is allow's answer: pass, or refuse with 401 or 403.
type verdict int

const (
	pass verdict = iota
	refuse401
	refuse403
)

func guardAgent(t *testing.T, upstream, challenge, schemes string, allow func(*http.Request) verdict) *guarded {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	g := &guarded{}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/.well-known/") {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"name":"guarded-echo","description":"echo behind a guard","version":"1.0.0",
			  "supportedInterfaces":[{"url":%q,"protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":%q,"protocolBinding":"HTTP+JSON","protocolVersion":"1.0"}],
			  "capabilities":{"streaming":true},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],
			  "skills":[{"id":"echo","name":"Echo","description":"echoes","tags":["demo"]}],
			  "securitySchemes":%s}`, g.URL, g.URL, schemes)
			return
		}
		v := allow(r)
		if v == pass {
			// Read the request first: the server closes an unread body
			// once the (streamed) answer starts.
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			g.seen.Add(1)
			proxy.ServeHTTP(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if v == refuse403 {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-31403,"message":"this caller may not use the agent"}}`)
			return
		}
		w.Header().Set("WWW-Authenticate", challenge)
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-31401,"message":"credentials required"}}`)
	}))
	t.Cleanup(g.Close)
	return g
}

// cliEnv runs a client command with the environment env only.
func cliEnv(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := runClientEnv(context.Background(), args[0], args[1:], &out, &errb, func(k string) string { return env[k] })
	return out.String(), err
}

// The client commands authenticate with --token and --api-key, or
// $A2A_TOKEN and $A2A_API_KEY, to an a2abus behind a guard: the API key
// goes in the header the card names; every command carries them; a
// refusal (401 or 403), or credentials that match none of the card's
// schemes, says what the agent asks for and which flag gives it.
func TestCLICredentials(t *testing.T) {
	upstream := echoA2Abus(t)
	const token, key = "cli-token-1", "cli-key-1"
	const schemes = `{"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
	  "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Agent-Key"}}}`
	g := guardAgent(t, upstream, `Bearer realm="guarded"`, schemes, func(r *http.Request) verdict {
		switch {
		case r.Header.Get("Authorization") == "Bearer banned":
			return refuse403
		case r.Header.Get("Authorization") == "Bearer "+token, r.Header.Get("X-Agent-Key") == key:
			return pass
		}
		return refuse401
	})
	noEnv := map[string]string{}

	sendOK := func(t *testing.T, env map[string]string, args ...string) schemas.Task {
		t.Helper()
		out, err := cliEnv(t, env, append([]string{"send", g.URL, "hello", "-o", "json"}, args...)...)
		var res schemas.SendMessageResponse
		if err != nil || json.Unmarshal([]byte(out), &res) != nil || res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted || artifactText(*res.Task) != "hello" {
			t.Fatalf("send %v: %v\n%s", args, err, out)
		}
		return *res.Task
	}
	t.Run("flags-and-env", func(t *testing.T) {
		sendOK(t, noEnv, "--token", token)
		sendOK(t, noEnv, "--api-key", key)
		sendOK(t, map[string]string{envToken: token})
		sendOK(t, map[string]string{envAPIKey: key})
		// A flag wins over the environment.
		sendOK(t, map[string]string{envToken: "stale"}, "--token", token)
	})

	t.Run("every-command", func(t *testing.T) {
		env := map[string]string{envToken: token}
		task := sendOK(t, env)
		for _, args := range [][]string{
			{"card", g.URL},
			{"get", g.URL, task.ID},
			{"tasks", g.URL},
			{"subscribe", g.URL, task.ID, "--last-event-id", "0"},
			{"send", g.URL, "streamed", "--stream"},
			{"get", g.URL, task.ID, "--binding", "rest"},
			{"agents", g.URL},
		} {
			if out, err := cliEnv(t, env, args...); err != nil {
				t.Errorf("a2abus %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		_, err := cliEnv(t, env, "cancel", g.URL, task.ID)
		wantCLIError(t, err, "TASK_NOT_CANCELABLE") // it got through to the agent
	})

	t.Run("refusals", func(t *testing.T) {
		before := g.seen.Load()
		_, err := cliEnv(t, noEnv, "send", g.URL, "hello")
		wantCLIError(t, err, g.URL+" answered HTTP 401 Unauthorized: credentials required (UNAUTHENTICATED, code -31401); "+
			`its card asks for a bearer token ("bearer") or an API key in header X-Agent-Key ("key"); `+
			`it answered WWW-Authenticate: Bearer realm="guarded"; no credentials were given: `+
			"pass --token TOKEN (or set A2A_TOKEN) or --api-key KEY (or set A2A_API_KEY, sent in header X-Agent-Key as the card says)")
		if !errors.Is(err, schemas.ErrUnauthenticated) {
			t.Fatalf("%v is not ErrUnauthenticated", err)
		}
		_, err = cliEnv(t, map[string]string{envToken: "wrong"}, "get", g.URL, "some-task")
		wantCLIError(t, err, "; the credentials given (a token (--token or $A2A_TOKEN)) were refused: check them, or pass --token TOKEN")
		_, err = cliEnv(t, noEnv, "send", g.URL, "hello", "--token", "banned")
		wantCLIError(t, err, "answered HTTP 403 Forbidden: this caller may not use the agent (UNAUTHORIZED, code -31403); its card asks for")
		wantCLIError(t, err, "the credentials sent were accepted but do not allow this call")
		if !errors.Is(err, schemas.ErrPermissionDenied) {
			t.Fatalf("%v is not ErrPermissionDenied", err)
		}
		// Without a card, the challenge says what to pass.
		_, err = cliEnv(t, noEnv, "send", g.URL, "hello", "--binding", "jsonrpc")
		wantCLIError(t, err, `it answered WWW-Authenticate: Bearer realm="guarded"; no credentials were given: pass --token TOKEN (or set A2A_TOKEN)`)
		if strings.Contains(err.Error(), "--api-key") {
			t.Fatalf("a Bearer challenge suggests --api-key: %v", err)
		}
		_, err = cliEnv(t, noEnv, "agents", g.URL)
		wantCLIError(t, err, g.URL+"/a2a/agents answered HTTP 401 Unauthorized")
		var ae *discovery.AuthError
		if !errors.As(err, &ae) {
			t.Fatalf("agents: %v is not an AuthError", err)
		}
		if g.seen.Load() != before {
			t.Fatal("a refused request reached the agent")
		}
	})

	// An agent whose card asks only for an API key in a header of its own:
	// a token alone is not sent, and the message says to pass a key.
	keyOnly := guardAgent(t, upstream, `ApiKey header="X-Agent-Key"`, `{"key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Agent-Key"}}}`,
		func(r *http.Request) verdict {
			if r.Header.Get("X-Agent-Key") == key && r.Header.Get("X-API-Key") == "" {
				return pass
			}
			return refuse401
		})
	t.Run("card-names-the-key", func(t *testing.T) {
		if _, err := cliEnv(t, noEnv, "send", keyOnly.URL, "hello", "--api-key", key); err != nil {
			t.Fatal(err)
		}
		_, err := cliEnv(t, noEnv, "send", keyOnly.URL, "hello", "--token", token)
		wantCLIError(t, err, keyOnly.URL+`: its card asks for an API key in header X-Agent-Key ("key"), and a token (--token or $A2A_TOKEN) does not match any of that (nothing was sent): pass --api-key KEY (or set A2A_API_KEY, sent in header X-Agent-Key as the card says)`)
		if !errors.Is(err, discovery.ErrNoMatchingCredentials) {
			t.Fatalf("%v is not ErrNoMatchingCredentials", err)
		}
	})

	// A card that declares nothing: the key goes as X-API-Key.
	plain := guardAgent(t, upstream, "", `null`, func(r *http.Request) verdict {
		if r.Header.Get("X-API-Key") == key {
			return pass
		}
		return refuse401
	})
	t.Run("default-key-header", func(t *testing.T) {
		if _, err := cliEnv(t, map[string]string{envAPIKey: key}, "send", plain.URL, "hello"); err != nil {
			t.Fatal(err)
		}
		_, err := cliEnv(t, noEnv, "send", plain.URL, "hello")
		wantCLIError(t, err, "no credentials were given: pass --token TOKEN (or set A2A_TOKEN) or --api-key KEY (or set A2A_API_KEY)")
	})
}

// tokenEndpoint is an OAuth2 token endpoint (client credentials): it
// counts the tokens it issues, issues them with the lifetime the test
// sets, and refuses while told to; valid holds the tokens the guarded
// agent accepts (the test revokes them to make the client get another).
type tokenEndpoint struct {
	*httptest.Server
	issued    atomic.Int32
	expiresIn atomic.Int32
	refuse    atomic.Bool
	valid     sync.Map
}

func newTokenEndpoint(t *testing.T, clientID, secret string) *tokenEndpoint {
	te := &tokenEndpoint{}
	te.expiresIn.Store(3600)
	te.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, pw, ok := r.BasicAuth()
		if !ok {
			id, pw = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		w.Header().Set("Content-Type", "application/json")
		if r.PostForm.Get("grant_type") != "client_credentials" || id != clientID || pw != secret || te.refuse.Load() {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"invalid_client","error_description":"client disabled"}`)
			return
		}
		tok := fmt.Sprintf("oauth-token-%d", te.issued.Add(1))
		te.valid.Store(tok, true)
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": te.expiresIn.Load()})
	}))
	t.Cleanup(te.Close)
	return te
}

func (te *tokenEndpoint) revokeAll() {
	te.valid.Range(func(k, _ any) bool { te.valid.Delete(k); return true })
}

// Remote agents of a serve process authenticate to their external agents
// (a real a2abus behind guards): OAuth2 client credentials, the token
// fetched once for several tasks, fetched again when the agent refuses it
// and before each use when it is about to expire, and a token endpoint's
// refusal failing the task with its reason; a bearer token from the
// environment; an API key from a file, in the header the card names;
// credentials that match none of the card's schemes failing the task
// with what the agent asks for and what is configured. No secret reaches
// a task or the log.
func TestRemoteAgentCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	upstream := echoA2Abus(t)
	const (
		clientSecret = "client-secret-do-not-print"
		remoteToken  = "env-token-do-not-print"
		fileKey      = "file-key-do-not-print"
	)
	te := newTokenEndpoint(t, "gateway", clientSecret)
	oauthAgent := guardAgent(t, upstream, `Bearer error="invalid_token"`, `{"oauth": {"oauth2SecurityScheme": {"flows": {}}}}`, func(r *http.Request) verdict {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, ok := te.valid.Load(tok); ok {
			return pass
		}
		return refuse401
	})
	bearerAgent := guardAgent(t, upstream, `Bearer`, `{"b": {"httpAuthSecurityScheme": {"scheme": "bearer"}}}`, func(r *http.Request) verdict {
		if r.Header.Get("Authorization") == "Bearer "+remoteToken {
			return pass
		}
		return refuse401
	})
	keyAgent := guardAgent(t, upstream, `ApiKey`, `{"k": {"apiKeySecurityScheme": {"location": "header", "name": "X-Agent-Key"}}}`, func(r *http.Request) verdict {
		if r.Header.Get("X-Agent-Key") == fileKey {
			return pass
		}
		return refuse401
	})

	dir := t.TempDir()
	secretFile, keyFile := filepath.Join(dir, "client-secret"), filepath.Join(dir, "api-key")
	writeFile(t, secretFile, clientSecret+"\n")
	writeFile(t, keyFile, fileKey+"\n")
	cfg := filepath.Join(dir, "gw.json")
	writeFile(t, cfg, fmt.Sprintf(`{
  "outbound": {"allowLoopback": true},
  "agents": [
    {"name": "oauth", "kind": "remote", "url": %q,
     "auth": {"oauth2": {"tokenUrl": %q, "clientId": "gateway", "clientSecretFile": %q, "scopes": ["a2a"]}}},
    {"name": "bearer", "kind": "remote", "url": %q, "auth": {"bearerTokenEnv": "REMOTE_TOKEN"}},
    {"name": "keyed", "kind": "remote", "url": %q, "auth": {"apiKeyFile": %q}},
    {"name": "mismatch", "kind": "remote", "url": %q, "auth": {"bearerTokenEnv": "REMOTE_TOKEN"}}
  ]}`, oauthAgent.URL, te.URL+"/token", secretFile, bearerAgent.URL, keyAgent.URL, keyFile, keyAgent.URL))
	addr := freeAddr(t)
	gw := startProcEnv(t, []string{"REMOTE_TOKEN=" + remoteToken}, "serve", "--listen", addr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", "off", "--config", cfg)
	base := "http://" + addr
	waitReady(t, gw, base)
	waitAgents(t, base, "?kind=remote", "remote agents online", func(l schemas.AgentList) bool {
		for _, n := range []string{"oauth", "bearer", "keyed", "mismatch"} {
			if health(l, n) != schemas.HealthOnline {
				return false
			}
		}
		return true
	})

	// The gateway does not advertise the external agents' schemes as its
	// own.
	resp, err := http.Get(base + "/agents/oauth/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	var card map[string]json.RawMessage
	err = json.NewDecoder(resp.Body).Decode(&card)
	resp.Body.Close()
	if _, has := card["securitySchemes"]; err != nil || has || string(card["name"]) != `"oauth"` {
		t.Fatalf("the gateway's card of a remote agent: %v %s", err, card["securitySchemes"])
	}

	n := 0
	send := func(agent string) schemas.Task {
		t.Helper()
		n++
		var res struct {
			Task schemas.Task `json:"task"`
		}
		msg := schemas.Message{MessageID: fmt.Sprint("m", n), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(fmt.Sprint("task ", n))}}
		if err := json.Unmarshal(rpc(t, base+"/agents/"+agent, "SendMessage", map[string]any{"message": msg}), &res); err != nil {
			t.Fatal(err)
		}
		return res.Task
	}
	completes := func(agent string) {
		t.Helper()
		if task := send(agent); task.Status.State != schemas.TaskStateCompleted || artifactText(task) != fmt.Sprint("task ", n) {
			t.Fatalf("%s: %s %s", agent, task.Status.State, statusText(task))
		}
	}
	fails := func(agent string, says ...string) {
		t.Helper()
		task := send(agent)
		msg := statusText(task)
		for _, s := range says {
			if task.Status.State != schemas.TaskStateFailed || !strings.Contains(msg, s) {
				t.Fatalf("%s: %s %q, want FAILED saying %q", agent, task.Status.State, msg, s)
			}
		}
		for _, secret := range []string{clientSecret, remoteToken, fileKey} {
			if strings.Contains(msg, secret) {
				t.Fatalf("%s: the task's message shows a secret: %q", agent, msg)
			}
		}
	}
	issued := func(want int32) {
		t.Helper()
		if got := te.issued.Load(); got != want {
			t.Fatalf("the token endpoint issued %d tokens, want %d", got, want)
		}
	}

	t.Run("oauth2", func(t *testing.T) {
		for range 3 {
			completes("oauth")
		}
		issued(1)
		te.revokeAll() // the agent refuses the token: another, and the task goes through
		completes("oauth")
		issued(2)
		completes("oauth")
		issued(2)
		te.expiresIn.Store(5) // within the early-expiry margin: fetched before each use
		te.revokeAll()
		completes("oauth")
		completes("oauth")
		issued(4)
		te.expiresIn.Store(3600)
		te.refuse.Store(true) // the refresh fails: so does the task, with the reason
		te.revokeAll()
		fails("oauth", "getting an OAuth2 token from "+te.URL+"/token", `for client "gateway"`, "invalid_client: client disabled")
		te.refuse.Store(false)
		completes("oauth")
	})
	t.Run("bearer-from-env", func(t *testing.T) { completes("bearer") })
	t.Run("api-key-from-file", func(t *testing.T) { completes("keyed") })
	t.Run("mismatch", func(t *testing.T) {
		fails("mismatch", `the agent's card asks for an API key in header X-Agent-Key ("k"); configured: a bearer token`)
	})

	gw.stop(t)
	out := gw.output()
	for _, secret := range []string{clientSecret, remoteToken, fileKey, "oauth-token-"} {
		if strings.Contains(out, secret) {
			t.Fatalf("the gateway's log shows a secret (%s):\n%s", secret, out)
		}
	}
}

func statusText(t schemas.Task) string {
	if t.Status.Message == nil {
		return ""
	}
	return t.Status.Message.Text()
}

// Remote agents' auth settings: secrets in the config file are refused,
// one source per secret, environment variables that are set, files that
// exist and hold something, and a file re-read when it changes.
func TestRemoteAuthConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.json")
	writeFile(t, file, `{"agents":[{"name":"r","kind":"remote","url":"https://x.example","auth":{"bearerToken":"literal"}}]}`)
	_, err := loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), []string{"--config", file}, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), `agent "r": auth.bearerToken holds a secret in the config file; name an environment variable (bearerTokenEnv) or a file (bearerTokenFile) instead`) {
		t.Fatalf("a literal token in the file: %v", err)
	}

	tokenFile := filepath.Join(dir, "token")
	writeFile(t, tokenFile, "first\n")
	lookup := func(k string) (string, bool) {
		v, ok := map[string]string{"SET": "from-env", "BLANK": " "}[k]
		return v, ok
	}
	for _, c := range []struct {
		auth RemoteAuth
		err  string
	}{
		{RemoteAuth{BearerTokenEnv: "SET", BearerTokenFile: tokenFile}, "bearerToken: set one of bearerTokenEnv and bearerTokenFile"},
		{RemoteAuth{BearerTokenEnv: "UNSET"}, "bearerTokenEnv: $UNSET is not set"},
		{RemoteAuth{APIKeyEnv: "BLANK"}, "apiKeyEnv: $BLANK is not set"},
		{RemoteAuth{APIKeyFile: filepath.Join(dir, "missing")}, "apiKeyFile: stat " + filepath.Join(dir, "missing")},
		{RemoteAuth{APIKeyHeader: "X-K"}, "apiKeyHeader is set but no API key is"},
		{RemoteAuth{OAuth2: &RemoteOAuth2{TokenURL: "https://idp.example/token", ClientID: "c"}}, "oauth2 needs the client secret"},
		{RemoteAuth{OAuth2: &RemoteOAuth2{ClientID: "c", ClientSecretEnv: "SET"}}, "oauth2 needs tokenUrl and clientId"},
		{RemoteAuth{}, "no credential configured"},
	} {
		if _, err := c.auth.credentials(discovery.Policy{}, lookup); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: %v, want %q", c.auth, err, c.err)
		}
	}

	// A token file is read again when it changes.
	get, err := secret("bearerToken", "", "", tokenFile, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := get(); v != "first" {
		t.Fatalf("token %q", v)
	}
	writeFile(t, tokenFile, "second, rotated\n")
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(tokenFile, later, later); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(); v != "second, rotated" {
		t.Fatalf("rotated token %q", v)
	}
}
