package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
)

// cardWith is a 1.0 card of an agent at u declaring the given
// securitySchemes and securityRequirements (JSON).
func cardWith(u, schemes, requirements string) string {
	return fmt.Sprintf(`{"name":"guarded","description":"d","version":"1",
	  "supportedInterfaces":[{"url":%q,"protocolBinding":"JSONRPC","protocolVersion":"1.0"}],
	  "capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[],
	  "securitySchemes":%s,"securityRequirements":%s}`, u, schemes, requirements)
}

func mustParse(t *testing.T, card string) *schemas.AgentCard {
	t.Helper()
	c, err := discovery.ParseCard([]byte(card))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A card's security reads the same in the 1.0 shape (a oneof per scheme,
// securityRequirements of scheme lists) and the 0.3 shape (OpenAPI's
// type/in/name, security), and reads as a person would say it.
func TestCardSecurityInBothShapes(t *testing.T) {
	v1 := mustParse(t, cardWith("https://a.example/rpc", `{
	  "key":    {"apiKeySecurityScheme": {"location": "header", "name": "X-Agent-Key"}},
	  "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}},
	  "oauth":  {"oauth2SecurityScheme": {"flows": {"clientCredentials": {"tokenUrl": "https://idp.example/token", "scopes": {}}}}},
	  "oidc":   {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://idp.example/.well-known/openid-configuration"}},
	  "mtls":   {"mtlsSecurityScheme": {}},
	  "basic":  {"httpAuthSecurityScheme": {"scheme": "Basic"}},
	  "odd":    {"apiKeySecurityScheme": {"location": "body", "name": "k"}}
	}`, `[{"schemes": {"bearer": {"list": []}}}, {"schemes": {"key": {"list": []}, "oauth": {"list": ["read"]}}}]`))
	// The scopes as bare arrays, as a2a-go v2 servers write them
	// (a2a-go#430).
	var bare schemas.AgentCard = *v1
	bare.SecurityRequirements = []json.RawMessage{json.RawMessage(`{"schemes": {"bearer": []}}`), json.RawMessage(`{"schemes": {"key": [], "oauth": ["read"]}}`)}
	v03 := mustParse(t, `{"name":"guarded","description":"d","version":"1","protocolVersion":"0.3.0",
	  "url":"https://a.example/rpc","preferredTransport":"JSONRPC",
	  "capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[],
	  "securitySchemes":{
	    "key":    {"type": "apiKey", "in": "header", "name": "X-Agent-Key"},
	    "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
	    "oauth":  {"type": "oauth2", "flows": {"clientCredentials": {"tokenUrl": "https://idp.example/token", "scopes": {}}}},
	    "oidc":   {"type": "openIdConnect", "openIdConnectUrl": "https://idp.example/.well-known/openid-configuration"},
	    "mtls":   {"type": "mutualTLS"},
	    "basic":  {"type": "http", "scheme": "basic"},
	    "odd":    {"type": "apiKey", "in": "body", "name": "k"}
	  },
	  "security":[{"bearer": []}, {"key": [], "oauth": ["read"]}]}`)
	want := discovery.Security{
		Schemes: []discovery.SecurityScheme{
			{Name: "basic", Type: discovery.SchemeHTTP, HTTPScheme: "basic"},
			{Name: "bearer", Type: discovery.SchemeHTTP, HTTPScheme: "bearer"},
			{Name: "key", Type: discovery.SchemeAPIKey, In: "header", ParamName: "X-Agent-Key"},
			{Name: "mtls", Type: discovery.SchemeMutualTLS},
			{Name: "oauth", Type: discovery.SchemeOAuth2},
			{Name: "odd"},
			{Name: "oidc", Type: discovery.SchemeOpenIDConnect},
		},
		Requirements: []discovery.Requirement{{"bearer": []string{}}, {"key": []string{}, "oauth": []string{"read"}}},
	}
	for name, card := range map[string]*schemas.AgentCard{"1.0": v1, "1.0 with bare scope arrays": &bare, "0.3": v03} {
		got := discovery.CardSecurity(card)
		if jsonOf(t, got) != jsonOf(t, want) {
			t.Errorf("%s card: security\n%s\nwant\n%s", name, jsonOf(t, got), jsonOf(t, want))
		}
		if s := got.String(); s != `a bearer token ("bearer") or an API key in header X-Agent-Key ("key") and an OAuth2 access token ("oauth")` {
			t.Errorf("%s card: String() = %s", name, s)
		}
	}
	// Without requirements any one scheme will do.
	open := discovery.CardSecurity(mustParse(t, cardWith("https://a.example/rpc", `{"q": {"apiKeySecurityScheme": {"location": "query", "name": "k"}}}`, `[]`)))
	if alts := open.Alternatives(); len(alts) != 1 || alts[0][0] != "q" || open.String() != `an API key in query parameter k ("q")` {
		t.Errorf("one scheme, no requirements: %v %s", alts, open.String())
	}
	if none := discovery.CardSecurity(mustParse(t, cardWith("https://a.example/rpc", `null`, `null`))); none.Declared() || none.String() != "no authentication" {
		t.Errorf("no schemes: %+v", none)
	}

	// An older dialect's card names its schemes (AgentOS): a bearer token,
	// or an API key in the header configured.
	legacy := discovery.CardSecurity(mustParse(t, `{"name":"os","description":"d","url":"https://a.example/a2a/rpc",
	  "capabilities":{},"defaultInputModes":["text"],"defaultOutputModes":["text"],"skills":[],
	  "authentication":{"schemes":["bearer","apiKey","digest"]}}`))
	if s := legacy.String(); s != `an API key ("apiKey") or a bearer token ("bearer") or "digest" (a scheme a2abus cannot read)` {
		t.Errorf("older dialect's schemes: %s", s)
	}
	keyOnly, _ := discovery.NewAuthenticator(discovery.Auth{APIKey: discovery.Secret("k1"), APIKeyHeader: "X-Os-Key"})
	req := httptest.NewRequest(http.MethodPost, "https://a.example/a2a/rpc", nil)
	if err := keyOnly.Apply(context.Background(), req, &legacy); err != nil || req.Header.Get("X-Os-Key") != "k1" {
		t.Errorf("an API key for an older dialect's card: %v %v", err, req.Header)
	}
}

// credRecorder is an agent that records what each request carried and
// answers it: a card at a path ending in .json, else GetTask's task. A
// request whose query names a target (?to=URL) is redirected there
// instead (307, so a JSON-RPC call keeps its body), and not recorded: a
// test writes a chain of redirects in its first URL.
type credRecorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []*http.Request
}

func newCredRecorder(t *testing.T) *credRecorder {
	r := &credRecorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		if to := req.URL.Query().Get("to"); to != "" {
			http.Redirect(w, req, to, http.StatusTemporaryRedirect)
			return
		}
		r.mu.Lock()
		r.seen = append(r.seen, req.Clone(context.Background()))
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(req.URL.Path, ".json") {
			_, _ = io.WriteString(w, cardWith("http://"+req.Host+"/rpc", "null", "null"))
			return
		}
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}`)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *credRecorder) last() *http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		return nil
	}
	return r.seen[len(r.seen)-1]
}

func (r *credRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// credentialsOf is what a request carried: the Authorization header, the
// two API key headers, the query and the cookies.
func credentialsOf(r *http.Request) string {
	var parts []string
	for _, h := range []string{"Authorization", "X-API-Key", "X-Agent-Key"} {
		if v := r.Header.Get(h); v != "" {
			parts = append(parts, h+"="+v)
		}
	}
	if r.URL.RawQuery != "" {
		parts = append(parts, "?"+r.URL.RawQuery)
	}
	for _, c := range r.Cookies() {
		parts = append(parts, "cookie "+c.Name+"="+c.Value)
	}
	return strings.Join(parts, " ")
}

// The credential sent is the one the card asks for: every configured one
// to an agent whose card declares nothing, the matching one otherwise
// (where an apiKey scheme says: header, query or cookie; both for a
// requirement naming two schemes); and nothing at all, with an error
// naming what the card wants and what is configured, when nothing
// matches.
func TestCredentialsFollowTheCard(t *testing.T) {
	agent := newCredRecorder(t)
	token, key := discovery.Secret("tok-1"), discovery.Secret("key-1")
	const (
		bearer  = `"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}`
		header  = `"key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Agent-Key"}}`
		query   = `"key": {"apiKeySecurityScheme": {"location": "query", "name": "api_key"}}`
		cookie  = `"key": {"apiKeySecurityScheme": {"location": "cookie", "name": "session"}}`
		oauth   = `"oauth": {"oauth2SecurityScheme": {"flows": {}}}`
		mtls    = `"mtls": {"mtlsSecurityScheme": {}}`
		anyOne  = `[]`
		both    = `[{"schemes": {"bearer": {"list": []}, "key": {"list": []}}}]`
		openToo = `[{"schemes": {"mtls": {"list": []}}}, {"schemes": {}}]`
	)
	for _, c := range []struct {
		name, schemes, reqs string
		auth                discovery.Auth
		want                string // what the request carried; "" with wantErr: nothing sent
		wantErr             string
	}{
		{name: "no card security", schemes: `null`, reqs: `null`, auth: discovery.Auth{BearerToken: token, APIKey: key}, want: "Authorization=Bearer tok-1 X-API-Key=key-1"},
		{name: "no card security, own header", schemes: `null`, reqs: `null`, auth: discovery.Auth{APIKey: key, APIKeyHeader: "X-Agent-Key"}, want: "X-Agent-Key=key-1"},
		{name: "bearer", schemes: "{" + bearer + "," + header + "}", reqs: `[{"schemes": {"bearer": {"list": []}}}]`, auth: discovery.Auth{BearerToken: token, APIKey: key}, want: "Authorization=Bearer tok-1"},
		{name: "header key", schemes: "{" + header + "}", reqs: anyOne, auth: discovery.Auth{BearerToken: token, APIKey: key}, want: "X-Agent-Key=key-1"},
		{name: "query key", schemes: "{" + query + "}", reqs: anyOne, auth: discovery.Auth{APIKey: key}, want: "?api_key=key-1"},
		{name: "cookie key", schemes: "{" + cookie + "}", reqs: anyOne, auth: discovery.Auth{APIKey: key}, want: "cookie session=key-1"},
		{name: "two schemes at once", schemes: "{" + bearer + "," + header + "}", reqs: both, auth: discovery.Auth{BearerToken: token, APIKey: key}, want: "Authorization=Bearer tok-1 X-Agent-Key=key-1"},
		{name: "a token for oauth2", schemes: "{" + oauth + "}", reqs: anyOne, auth: discovery.Auth{BearerToken: token}, want: "Authorization=Bearer tok-1"},
		{name: "open alternative", schemes: "{" + mtls + "}", reqs: openToo, auth: discovery.Auth{BearerToken: token}, want: ""},
		{name: "no match", schemes: "{" + header + "," + mtls + "}", reqs: anyOne, auth: discovery.Auth{BearerToken: token},
			wantErr: `the agent's card asks for an API key in header X-Agent-Key ("key") or mutual TLS ("mtls", which a2abus does not offer); configured: a bearer token`},
		{name: "half a requirement", schemes: "{" + bearer + "," + header + "}", reqs: both, auth: discovery.Auth{APIKey: key},
			wantErr: `asks for a bearer token ("bearer") and an API key in header X-Agent-Key ("key"); configured: an API key`},
	} {
		t.Run(c.name, func(t *testing.T) {
			creds, err := discovery.NewAuthenticator(c.auth)
			if err != nil {
				t.Fatal(err)
			}
			opts := loopback()
			opts.Credentials = creds
			cl, err := discovery.ClientFor(mustParse(t, cardWith(agent.URL+"/rpc", c.schemes, c.reqs)), opts)
			if err != nil {
				t.Fatal(err)
			}
			before := agent.count()
			_, err = cl.GetTask(context.Background(), &schemas.GetTaskRequest{ID: "t1"})
			if c.wantErr != "" {
				var me *discovery.MismatchError
				if !errors.Is(err, discovery.ErrNoMatchingCredentials) || !errors.As(err, &me) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want a mismatch saying %q", err, c.wantErr)
				}
				if strings.Contains(err.Error(), "tok-1") || strings.Contains(err.Error(), "key-1") {
					t.Fatalf("the error shows a secret: %v", err)
				}
				if agent.count() != before {
					t.Fatal("a call whose credentials match nothing was sent")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := credentialsOf(agent.last()); got != c.want {
				t.Fatalf("the request carried %q, want %q", got, c.want)
			}
		})
	}
}

// authAgent answers every request with one refusal.
func authAgent(t *testing.T, status int, challenge, contentType, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if challenge != "" {
			w.Header().Set("WWW-Authenticate", challenge)
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// An agent's refusal comes back as an *AuthError on every path (unary and
// streaming JSON-RPC, HTTP+JSON, the older dialect, the card), whether
// the agent says it with HTTP 401/403 or only with JSON-RPC -31401/-31403:
// it matches the table's row, carries the WWW-Authenticate challenge and
// the card's schemes, and is not retryable.
func TestAuthRefusalsAreAuthErrors(t *testing.T) {
	ctx := context.Background()
	const challenge = `Bearer realm="a2abus", error="invalid_token"`
	rpc401 := authAgent(t, 401, challenge, "application/json",
		`{"jsonrpc":"2.0","id":1,"error":{"code":-31401,"message":"token expired","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"UNAUTHENTICATED","domain":"a2a-protocol.org"}]}}`)
	rest403 := authAgent(t, 403, "", "application/json", `{"error":{"code":403,"status":"PERMISSION_DENIED","message":"not yours"}}`)
	rpc200 := authAgent(t, 200, "", "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-31403,"message":"agent x only"}}`)
	plain := authAgent(t, 401, "ApiKey", "text/plain", "who are you?\n")
	sec := discovery.Security{Schemes: []discovery.SecurityScheme{{Name: "bearer", Type: discovery.SchemeHTTP, HTTPScheme: "bearer"}}}

	client := func(u, binding, version string) *discovery.Client {
		opts := loopback()
		opts.Security = &sec
		c, err := discovery.NewClient(discovery.Endpoint{URL: u, Binding: binding, Version: version}, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	stream := func(c *discovery.Client) error {
		s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("x")})
		if err == nil {
			s.Close()
		}
		return err
	}
	get := func(c *discovery.Client) error {
		_, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: "t1"})
		return err
	}
	for _, c := range []struct {
		name      string
		call      func() error
		row       *schemas.Error
		status    int
		challenge string
		msg       string
	}{
		{"1.0 JSON-RPC 401", func() error { return get(client(rpc401.URL, schemas.BindingJSONRPC, "1.0")) }, schemas.ErrUnauthenticated, 401, challenge, "token expired"},
		{"1.0 JSON-RPC stream 401", func() error { return stream(client(rpc401.URL, schemas.BindingJSONRPC, "1.0")) }, schemas.ErrUnauthenticated, 401, challenge, "token expired"},
		{"0.3 JSON-RPC 401", func() error { return get(client(rpc401.URL, schemas.BindingJSONRPC, "0.3")) }, schemas.ErrUnauthenticated, 401, challenge, "token expired"},
		{"tasks/send dialect 401", func() error { return get(client(rpc401.URL, schemas.BindingJSONRPC, "0.1")) }, schemas.ErrUnauthenticated, 401, challenge, "token expired"},
		{"HTTP+JSON 403", func() error { return get(client(rest403.URL, schemas.BindingHTTPJSON, "1.0")) }, schemas.ErrPermissionDenied, 403, "", "not yours"},
		{"HTTP+JSON stream 403", func() error { return stream(client(rest403.URL, schemas.BindingHTTPJSON, "1.0")) }, schemas.ErrPermissionDenied, 403, "", "not yours"},
		{"JSON-RPC -31403 in HTTP 200", func() error { return get(client(rpc200.URL, schemas.BindingJSONRPC, "1.0")) }, schemas.ErrPermissionDenied, 403, "", "agent x only"},
		{"plain 401", func() error { return get(client(plain.URL, schemas.BindingJSONRPC, "1.0")) }, schemas.ErrUnauthenticated, 401, "ApiKey", "authentication required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			var ae *discovery.AuthError
			if !errors.As(err, &ae) || !errors.Is(err, c.row) || ae.Status != c.status || ae.Challenge != c.challenge || ae.Err.Message != c.msg {
				t.Fatalf("error %#v (%v), want an AuthError %d %s %q %q", err, err, c.status, c.row.Reason, c.challenge, c.msg)
			}
			if !ae.Security.Declared() || !strings.Contains(err.Error(), `the agent's card asks for a bearer token ("bearer")`) {
				t.Fatalf("%v does not carry the card's schemes", err)
			}
			if discovery.IsRetryable(err) {
				t.Fatalf("%v is retryable", err)
			}
			if ae.Unauthenticated() != (c.status == 401) {
				t.Fatalf("Unauthenticated() = %v for %d", ae.Unauthenticated(), c.status)
			}
		})
	}
	t.Run("card", func(t *testing.T) {
		_, err := (&discovery.Fetcher{Policy: loopback().Policy}).Fetch(ctx, rpc401.URL, "")
		var ae *discovery.AuthError
		if !errors.As(err, &ae) || ae.Status != 401 || ae.Challenge != challenge || !errors.Is(err, schemas.ErrUnauthenticated) {
			t.Fatalf("card fetch: %v", err)
		}
	})
}

// tokenServer is an OAuth2 token endpoint of the client credentials
// grant: it checks the client, counts the tokens it issues, and issues
// them with the lifetime the test sets, or refuses while told to.
type tokenServer struct {
	*httptest.Server
	id, secret string
	issued     atomic.Int32
	expiresIn  atomic.Int32 // seconds
	refuse     atomic.Bool
	valid      sync.Map // access token → true, until revoked
}

func newTokenServer(t *testing.T, id, secret string) *tokenServer {
	ts := &tokenServer{id: id, secret: secret}
	ts.expiresIn.Store(3600)
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Method != http.MethodPost || r.PostForm.Get("grant_type") != "client_credentials" {
			http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
			return
		}
		user, pass, ok := r.BasicAuth()
		if !ok {
			user, pass = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		w.Header().Set("Content-Type", "application/json")
		if user != ts.id || pass != ts.secret || ts.refuse.Load() {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid_client","error_description":"client disabled"}`)
			return
		}
		tok := fmt.Sprintf("tok-%d", ts.issued.Add(1))
		ts.valid.Store(tok, true)
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": ts.expiresIn.Load(), "scope": r.PostForm.Get("scope")})
	}))
	t.Cleanup(ts.Close)
	return ts
}

// revokeAll makes the agent refuse every token issued so far.
func (ts *tokenServer) revokeAll() {
	ts.valid.Range(func(k, _ any) bool { ts.valid.Delete(k); return true })
}

// guard fronts an agent: a request whose Authorization is not a valid
// token of ts is refused as an a2abus edge refuses it (401,
// WWW-Authenticate, JSON-RPC -31401).
func guard(t *testing.T, ts *tokenServer, upstream string) *httptest.Server {
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, valid := ts.valid.Load(tok); !ok || !valid {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("WWW-Authenticate", `Bearer realm="agent", error="invalid_token"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-31401,"message":"invalid token"}}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// OAuth2 client credentials against a real a2abus edge behind a guard
// that accepts only the tokens the test's token endpoint issued: one token
// serves many calls (concurrent ones too), a refused token is replaced
// and the call sent again, unary or streaming; a token that would expire
// within the early-expiry margin is fetched anew for each call; a token
// endpoint that refuses fails the call with its reason and never the
// secret.
func TestOAuth2ClientCredentials(t *testing.T) {
	ctx := context.Background()
	const secret = "very-secret-client-secret"
	ts := newTokenServer(t, "gateway", secret)
	agent := guard(t, ts, startA2Abus(t))
	creds, err := discovery.NewAuthenticator(discovery.Auth{OAuth2: &discovery.OAuth2{
		TokenURL: ts.URL + "/token", ClientID: "gateway", ClientSecret: secret, Scopes: []string{"a2a"}, Policy: loopback().Policy}})
	if err != nil {
		t.Fatal(err)
	}
	opts := loopback()
	opts.Credentials = creds
	card := mustParse(t, cardWith(agent.URL+"/agents/echo", `{"oauth": {"oauth2SecurityScheme": {"flows": {}}}}`, `[]`))
	c, err := discovery.ClientFor(card, opts)
	if err != nil {
		t.Fatal(err)
	}
	send := func(what string) error {
		res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text(what)})
		if err == nil && (res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted) {
			err = fmt.Errorf("send %q: %+v", what, res)
		}
		return err
	}
	stream := func(what string) error {
		s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text(what)})
		if err != nil {
			return err
		}
		if evs := readAll(t, s); lastState(evs) != schemas.TaskStateCompleted {
			return fmt.Errorf("stream %q ended %s", what, lastState(evs))
		}
		return nil
	}
	wantIssued := func(n int32) {
		t.Helper()
		if got := ts.issued.Load(); got != n {
			t.Fatalf("the token endpoint issued %d tokens, want %d", got, n)
		}
	}

	// One token for many calls, eight of them at once.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- send(fmt.Sprint("concurrent ", i))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := stream("streamed"); err != nil {
		t.Fatal(err)
	}
	wantIssued(1)

	// The agent stops accepting it: a new one, and the call goes through.
	ts.revokeAll()
	if err := send("after revocation"); err != nil {
		t.Fatal(err, ts.issued.Load())
	}
	wantIssued(2)
	ts.revokeAll()
	if err := stream("streamed after revocation"); err != nil {
		t.Fatal(err)
	}
	wantIssued(3)
	if err := send("reused again"); err != nil {
		t.Fatal(err)
	}
	wantIssued(3)

	// Tokens that expire within the margin are replaced before each use.
	ts.expiresIn.Store(5)
	ts.revokeAll()
	for i, want := range []int32{4, 5, 6} {
		if err := send(fmt.Sprint("short-lived ", i)); err != nil {
			t.Fatal(err)
		}
		wantIssued(want)
	}

	// The token endpoint refuses: the call fails with its reason.
	ts.expiresIn.Store(3600)
	ts.refuse.Store(true)
	err = send("refused")
	if !errors.Is(err, discovery.ErrCredentialUnavailable) || !strings.Contains(err.Error(), `HTTP 401 Unauthorized invalid_client: client disabled`) ||
		!strings.Contains(err.Error(), `for client "gateway"`) || strings.Contains(err.Error(), secret) {
		t.Fatalf("a refused token fetch: %v", err)
	}
	// Once it issues tokens again, calls go through.
	ts.refuse.Store(false)
	if err := send("recovered"); err != nil {
		t.Fatal(err)
	}
	wantIssued(7)

	// A wrong secret: refused from the first call.
	bad, err := discovery.NewAuthenticator(discovery.Auth{OAuth2: &discovery.OAuth2{TokenURL: ts.URL + "/token", ClientID: "gateway", ClientSecret: "wrong-secret", Policy: loopback().Policy}})
	if err != nil {
		t.Fatal(err)
	}
	opts.Credentials = bad
	bc, _ := discovery.ClientFor(card, opts)
	if _, err := bc.GetTask(ctx, &schemas.GetTaskRequest{ID: "x"}); !errors.Is(err, discovery.ErrCredentialUnavailable) || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("wrong secret: %v", err)
	}

	// Configuration mistakes are caught up front.
	for _, o := range []*discovery.OAuth2{
		{TokenURL: "not a url", ClientID: "x"},
		{TokenURL: ts.URL, ClientID: ""},
		{TokenURL: "http://169.254.169.254/token", ClientID: "x"},
	} {
		if _, err := discovery.NewAuthenticator(discovery.Auth{OAuth2: o}); err == nil {
			t.Errorf("NewAuthenticator(%+v) accepted it", o)
		}
	}
}

// A static bearer token that the agent refuses is not sent again: only
// OAuth2 tokens are refreshed.
func TestStaticTokenRefusedOnce(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	creds, _ := discovery.NewAuthenticator(discovery.Auth{BearerToken: discovery.Secret("stale")})
	opts := loopback()
	opts.Credentials = creds
	c, _ := discovery.NewClient(discovery.Endpoint{URL: srv.URL, Binding: schemas.BindingJSONRPC, Version: "1.0"}, opts)
	_, err := c.GetTask(context.Background(), &schemas.GetTaskRequest{ID: "x"})
	var ae *discovery.AuthError
	if !errors.As(err, &ae) || calls.Load() != 1 {
		t.Fatalf("error %v after %d calls", err, calls.Load())
	}
}

// hop is u redirecting to next.
func hop(u, next string) string { return u + "?to=" + url.QueryEscape(next) }

// A redirect to another origin — here another port of 127.0.0.1 — carries
// none of the configured credentials (Authorization, an API key in a
// header of the configuration's choosing, in the query by way of the
// Referer, or a cookie) nor the configured static headers, on the A2A
// client and the card fetcher alike; a redirect within the origin carries
// them all; and a chain that left the origin does not get them back by
// returning to it. The call itself still speaks the protocol over there.
func TestRedirectsKeepCredentialsAtTheirOrigin(t *testing.T) {
	token, key := discovery.Secret("tok-1"), discovery.Secret("key-1")
	static := http.Header{"X-Static": {"s-1"}}
	const (
		queryKey  = `{"key": {"apiKeySecurityScheme": {"location": "query", "name": "api_key"}}}`
		cookieKey = `{"key": {"apiKeySecurityScheme": {"location": "cookie", "name": "session"}}}`
	)
	// carried lists the credentials and configured headers r carried, and
	// whether it had a Referer (the previous URL, which repeats a key sent
	// in its query).
	carried := func(r *http.Request) string {
		var out []string
		for _, h := range []string{"Authorization", "X-Agent-Key", "X-Static", "Cookie"} {
			if v := r.Header.Get(h); v != "" {
				out = append(out, h+"="+v)
			}
		}
		if r.Header.Get("Referer") != "" {
			out = append(out, "Referer")
		}
		return strings.Join(out, " ")
	}
	creds, err := discovery.NewAuthenticator(discovery.Auth{BearerToken: token, APIKey: key, APIKeyHeader: "X-Agent-Key"})
	if err != nil {
		t.Fatal(err)
	}
	call := func(t *testing.T, target, schemes string) {
		opts := loopback()
		opts.Credentials, opts.Header = creds, static
		var cl *discovery.Client
		var err error
		if schemes == "" { // no card: every credential configured is sent
			cl, err = discovery.NewClient(discovery.Endpoint{URL: target, Binding: schemas.BindingJSONRPC, Version: schemas.ProtocolVersion}, opts)
		} else {
			cl, err = discovery.ClientFor(mustParse(t, cardWith(target, schemes, `[]`)), opts)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.GetTask(context.Background(), &schemas.GetTaskRequest{ID: "t1"}); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(t *testing.T, target string) {
		f := loopbackFetcher()
		f.Credentials, f.Header = creds, static
		if _, err := f.Fetch(context.Background(), target, ""); err != nil {
			t.Fatal(err)
		}
	}

	for _, c := range []struct {
		name  string
		chain func(first, second string) string // the URL called, its redirects in it
		card  string                            // the security schemes of its card; "" no card
		fetch bool                              // fetch a card from it instead of calling
		// second says the second agent answers the call, not the first;
		// want is what its request carried.
		second bool
		want   string
	}{
		{name: "client, another port", chain: func(f, s string) string { return hop(f+"/rpc", s+"/rpc") }, second: true, want: ""},
		{name: "client, same origin", chain: func(f, _ string) string { return hop(f+"/old", f+"/rpc") },
			want: "Authorization=Bearer tok-1 X-Agent-Key=key-1 X-Static=s-1 Referer"},
		{name: "client, there and back", chain: func(f, s string) string { return hop(f+"/rpc", hop(s+"/rpc", f+"/rpc")) }, want: ""},
		{name: "client, key in the query", chain: func(f, s string) string { return hop(f+"/rpc", s+"/rpc") }, card: queryKey, second: true, want: ""},
		{name: "client, key in a cookie", chain: func(f, s string) string { return hop(f+"/rpc", s+"/rpc") }, card: cookieKey, second: true, want: ""},
		{name: "client, key in a cookie, same origin", chain: func(f, _ string) string { return hop(f+"/old", f+"/rpc") }, card: cookieKey,
			want: "X-Static=s-1 Cookie=session=key-1 Referer"},
		{name: "card, another port", chain: func(f, s string) string { return hop(f+"/card.json", s+"/card.json") }, fetch: true, second: true, want: ""},
		// A public card gets no credentials at all (see
		// TestProtectedCardGetsCredentialsWhenItAsks).
		{name: "card, same origin", chain: func(f, _ string) string { return hop(f+"/old.json", f+"/card.json") }, fetch: true,
			want: "X-Static=s-1 Referer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			first, second := newCredRecorder(t), newCredRecorder(t)
			if u := c.chain(first.URL, second.URL); c.fetch {
				fetch(t, u)
			} else {
				call(t, u, c.card)
			}
			at := first
			if c.second {
				at = second
			}
			if n := at.count(); n != 1 {
				t.Fatalf("%s answered %d requests, want 1", at.URL, n)
			}
			r := at.last()
			if got := carried(r); got != c.want {
				t.Fatalf("the request carried %q, want %q", got, c.want)
			}
			if r.Header.Get("User-Agent") != discovery.UserAgent || r.Header.Get("Accept") != "application/json" {
				t.Fatalf("the protocol's own headers were dropped too: %v", r.Header)
			}
		})
	}
}

// A card is fetched without credentials; only an agent that refuses that
// (401) gets them, on a second request, and its card is read.
func TestProtectedCardGetsCredentialsWhenItAsks(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer card-token" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="cards"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(cardWith(srv.URL, `{}`, `[]`)))
	}))
	t.Cleanup(srv.Close)
	creds, err := discovery.NewAuthenticator(discovery.Auth{BearerToken: discovery.Secret("card-token")})
	if err != nil {
		t.Fatal(err)
	}
	f := loopbackFetcher()
	if _, err := f.Fetch(context.Background(), srv.URL+"/card.json", ""); !errors.As(err, new(*discovery.AuthError)) {
		t.Fatalf("without credentials: %v", err)
	}
	f.Credentials = creds
	if _, err := f.Fetch(context.Background(), srv.URL+"/card.json", ""); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != ",,Bearer card-token" {
		t.Fatalf("the agent saw Authorization %q", seen)
	}
}

// The token request is never redirected to another origin, which would get
// the client secret (a 307 repeats the body): the fetch fails, saying why.
func TestOAuth2TokenRequestStaysAtItsOrigin(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/token", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(ts.Close)
	creds, err := discovery.NewAuthenticator(discovery.Auth{OAuth2: &discovery.OAuth2{
		TokenURL: ts.URL + "/token", ClientID: "gateway", ClientSecret: "secret-in-the-body", Policy: loopback().Policy}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "http://127.0.0.1/agent", nil)
	if err := creds.Apply(context.Background(), req, nil); err == nil || !strings.Contains(err.Error(), "another origin") {
		t.Fatalf("a token fetch redirected elsewhere: %v", err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the other origin got %d token requests", n)
	}
}

// An error that repeats a URL as configured (net/http's do, and libraries
// print those into their own text) reads with the URL redacted, and still
// wraps what it wrapped.
func TestRedactErrorHidesTheURLsSecrets(t *testing.T) {
	const raw = "https://user:pw@mcp.example/mcp?api_key=SECRET"
	cause := &url.Error{Op: "Post", URL: raw, Err: context.DeadlineExceeded}
	for _, err := range []error{cause, fmt.Errorf("sending request: %v", cause), fmt.Errorf("connect: %w", cause)} {
		got := discovery.RedactError(err, raw)
		if strings.Contains(got.Error(), "SECRET") || strings.Contains(got.Error(), "pw") || !strings.Contains(got.Error(), "https://mcp.example/mcp") {
			t.Fatalf("%q redacted to %q", err, got)
		}
		if errors.Is(err, context.DeadlineExceeded) != errors.Is(got, context.DeadlineExceeded) {
			t.Fatalf("%q no longer wraps what it wrapped", got)
		}
	}
	plain := errors.New("no URL here")
	if discovery.RedactError(plain, raw) != plain || discovery.RedactError(nil, raw) != nil {
		t.Fatal("an error without the URL is not returned as it is")
	}
}

// An a2abus edge that authenticates, on every 1.0 binding (over gRPC the
// credentials travel as metadata): the client chosen from its card for
// that binding is refused without credentials or with a wrong key (an
// *AuthError, unary and streaming), is let in with an API key where the
// card says (X-API-Key, over gRPC x-api-key metadata), and one principal
// does not see another's task.
func TestCredentialsReachAnAuthenticatingEdgeOnEveryBinding(t *testing.T) {
	const aliceKey, bobKey = "discovery-alice-key-0123456789", "discovery-bob-key-0123456789"
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{{Key: aliceKey, Principal: "alice"}, {Key: bobKey, Principal: "bob"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := startEdge(t, edge.Config{Auth: a}, nil)
	ctx := context.Background()
	f, err := (&discovery.Fetcher{Policy: loopback().Policy}).Fetch(ctx, srv.base+"/agents/echo", "")
	if err != nil {
		t.Fatal(err)
	}
	as := func(t *testing.T, binding string, creds discovery.Auth) *discovery.Client {
		t.Helper()
		opts := loopback()
		if creds.APIKey != nil || creds.BearerToken != nil {
			authn, err := discovery.NewAuthenticator(creds)
			if err != nil {
				t.Fatal(err)
			}
			opts.Credentials = authn
		}
		c, err := discovery.ClientFor(&f.Card, opts, binding)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if c.Endpoint().Binding != binding {
			t.Fatalf("the card's %s endpoint: %+v", binding, c.Endpoint())
		}
		return c
	}
	for _, ep := range v1Bindings {
		t.Run(ep.Binding, func(t *testing.T) {
			refused := func(what string, err error) {
				t.Helper()
				var ae *discovery.AuthError
				if !errors.As(err, &ae) || !errors.Is(err, schemas.ErrUnauthenticated) || !ae.Unauthenticated() || !ae.Security.Declared() {
					t.Fatalf("%s: %v", what, err)
				}
			}
			for name, creds := range map[string]discovery.Auth{"no credentials": {}, "a wrong key": {APIKey: discovery.Secret("not-a-key-of-this-edge-000")}} {
				c := as(t, ep.Binding, creds)
				_, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("hi")})
				refused(name, err)
				refused(name+", streaming", subscribeError(c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("hi")})))
			}
			alice := as(t, ep.Binding, discovery.Auth{APIKey: discovery.Secret(aliceKey)})
			res, err := alice.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("alice's")})
			if err != nil || res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted {
				t.Fatalf("with alice's key: %+v %v", res, err)
			}
			s, err := alice.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("alice's stream")})
			if err != nil {
				t.Fatal(err)
			}
			if evs := readAll(t, s); lastState(evs) != schemas.TaskStateCompleted {
				t.Fatalf("alice's stream ended %s", lastState(evs))
			}
			bob := as(t, ep.Binding, discovery.Auth{APIKey: discovery.Secret(bobKey)})
			if _, err := bob.GetTask(ctx, &schemas.GetTaskRequest{ID: res.Task.ID}); !errors.Is(err, schemas.ErrTaskNotFound) {
				t.Fatalf("bob reading alice's task: %v", err)
			}
			if _, err := alice.GetTask(ctx, &schemas.GetTaskRequest{ID: res.Task.ID}); err != nil {
				t.Fatalf("alice reading her task: %v", err)
			}
		})
	}
}

// rotating is Credentials that send a stale key until the agent refuses
// it (Invalidate), then good, the way an OAuth2 token is replaced.
type rotating struct {
	stale, good string
	mu          sync.Mutex
	current     string
	applied     atomic.Int32
	invalidated atomic.Int32
}

func (r *rotating) Apply(_ context.Context, req *http.Request, _ *discovery.Security) error {
	r.applied.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	req.Header.Set("X-API-Key", r.current)
	return nil
}

func (r *rotating) Invalidate(refused *http.Request) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if refused.Header.Get("X-API-Key") != r.stale {
		return false
	}
	r.invalidated.Add(1)
	r.current = r.good
	return true
}

func (r *rotating) goStale() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current = r.stale
}

// A credential the agent refuses is replaced once and the call sent again,
// unary or streaming, over HTTP+JSON (HTTP 401) and gRPC
// (UNAUTHENTICATED); one that is still refused after that is the agent's
// refusal, not a loop. (JSON-RPC is not among them: an a2abus edge
// answers its refusal -31401 in HTTP 200, and the JSON-RPC wire replaces
// a credential on HTTP 401 only.)
func TestARefusedCredentialIsReplacedOnce(t *testing.T) {
	const key = "discovery-rotated-key-0123456789"
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{{Key: key, Principal: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := startEdge(t, edge.Config{Auth: a}, nil)
	ctx := context.Background()
	for _, ep := range slices.DeleteFunc(slices.Clone(v1Bindings), func(ep discovery.Endpoint) bool { return ep.Binding == schemas.BindingJSONRPC }) {
		t.Run(ep.Binding, func(t *testing.T) {
			creds := &rotating{stale: "expired-key-of-nobody-0000", good: key}
			creds.goStale()
			opts := loopback()
			opts.Credentials = creds
			c, err := discovery.NewClient(srv.at(ep, "echo"), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("again")})
			if err != nil || res.Task == nil || creds.invalidated.Load() != 1 {
				t.Fatalf("send with a stale key: %+v %v (%d replaced)", res, err, creds.invalidated.Load())
			}
			creds.goStale()
			s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("again, streaming")})
			if err != nil {
				t.Fatal(err)
			}
			if evs := readAll(t, s); lastState(evs) != schemas.TaskStateCompleted || creds.invalidated.Load() != 2 {
				t.Fatalf("stream with a stale key ended %s (%d replaced)", lastState(evs), creds.invalidated.Load())
			}

			creds.good = "another-key-of-nobody-00000" // refused too
			creds.goStale()
			before := creds.applied.Load()
			_, err = c.GetTask(ctx, &schemas.GetTaskRequest{ID: res.Task.ID})
			if !errors.Is(err, schemas.ErrUnauthenticated) || creds.applied.Load()-before != 2 {
				t.Fatalf("a replacement refused too: %v after %d tries", err, creds.applied.Load()-before)
			}
		})
	}
}
