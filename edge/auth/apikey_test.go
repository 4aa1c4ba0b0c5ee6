package auth

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

const (
	keyAlice = "alice-key-0123456789abcdef"
	keyRoot  = "root-key-0123456789abcdef="
	keyBob   = "bob-key-0123456789abcdef"
)

func testKeys() []APIKey {
	return []APIKey{
		{Key: keyAlice, Principal: "alice"},
		{Key: keyRoot, Principal: "root", Admin: true},
		{Key: keyBob, Principal: "bob"},
	}
}

func TestAPIKey(t *testing.T) {
	const chDefault = `Bearer realm="a2abus", APIKey realm="a2abus", header="X-API-Key"`
	tests := []struct {
		name    string
		header  string // Config.APIKeyHeader
		req     []string
		want    Principal
		kind    error
		ch      string // the expected challenge of a failure
		scheme  string // Failure.Scheme
		leakKey string
	}{
		{name: "bearer", req: bearer(keyAlice), want: Principal{Name: "alice", Scheme: SchemeAPIKey}},
		{name: "bearer lower-case scheme", req: []string{"Authorization", "bearer  " + keyAlice}, want: Principal{Name: "alice", Scheme: SchemeAPIKey}},
		{name: "x-api-key", req: []string{"X-API-Key", keyBob}, want: Principal{Name: "bob", Scheme: SchemeAPIKey}},
		{name: "x-api-key any case", req: []string{"x-api-key", keyBob}, want: Principal{Name: "bob", Scheme: SchemeAPIKey}},
		{name: "admin by entry", req: bearer(keyRoot), want: Principal{Name: "root", Scheme: SchemeAPIKey, Admin: true}},
		{name: "admin by Admins", req: []string{"X-API-Key", keyBob}, want: Principal{Name: "bob", Scheme: SchemeAPIKey}},
		{name: "authorization decides", req: append(bearer(keyAlice), "X-API-Key", keyBob), want: Principal{Name: "alice", Scheme: SchemeAPIKey}},
		{name: "wrong key bearer", req: bearer(keyAlice + "x"), kind: ErrInvalidCredentials, scheme: SchemeBearer, leakKey: keyAlice + "x",
			ch: `Bearer realm="a2abus", error="invalid_token", error_description="unknown API key", APIKey realm="a2abus", header="X-API-Key"`},
		{name: "wrong key header", req: []string{"X-API-Key", "not-a-key-0123456789"}, kind: ErrInvalidCredentials, scheme: SchemeAPIKey, leakKey: "not-a-key-0123456789",
			ch: `Bearer realm="a2abus", APIKey realm="a2abus", header="X-API-Key", error="invalid_token", error_description="unknown API key"`},
		{name: "prefix of a key", req: bearer(keyAlice[:20]), kind: ErrInvalidCredentials, scheme: SchemeBearer, leakKey: keyAlice[:20],
			ch: `Bearer realm="a2abus", error="invalid_token", error_description="unknown API key", APIKey realm="a2abus", header="X-API-Key"`},
		{name: "empty bearer", req: []string{"Authorization", "Bearer "}, kind: ErrInvalidCredentials, scheme: SchemeBearer,
			ch: `Bearer realm="a2abus", error="invalid_token", error_description="empty Bearer credential", APIKey realm="a2abus", header="X-API-Key"`},
		{name: "missing", kind: ErrNoCredentials, ch: chDefault},
		{name: "basic is not ours", req: []string{"Authorization", "Basic YWxpY2U6c2VjcmV0"}, kind: ErrNoCredentials, ch: chDefault},
		{name: "basic and a key", req: []string{"Authorization", "Basic YWxpY2U6c2VjcmV0", "X-API-Key", keyBob}, want: Principal{Name: "bob", Scheme: SchemeAPIKey}},
		{name: "two authorization headers", req: append(bearer(keyAlice), bearer(keyBob)...), kind: ErrInvalidCredentials, scheme: SchemeBearer, leakKey: keyAlice,
			ch: `Bearer realm="a2abus", error="invalid_token", error_description="several Authorization headers", APIKey realm="a2abus", header="X-API-Key"`},
		{name: "two key headers", req: []string{"X-API-Key", keyAlice, "X-API-Key", keyBob}, kind: ErrInvalidCredentials, scheme: SchemeAPIKey, leakKey: keyAlice,
			ch: `Bearer realm="a2abus", APIKey realm="a2abus", header="X-API-Key", error="invalid_token", error_description="several X-API-Key headers"`},

		// Another header: the raw value there, and only there.
		{name: "custom header", header: "X-Team-Key", req: []string{"X-Team-Key", keyAlice}, want: Principal{Name: "alice", Scheme: SchemeAPIKey}},
		{name: "custom header: bearer not read", header: "X-Team-Key", req: bearer(keyAlice), kind: ErrNoCredentials, ch: `APIKey realm="a2abus", header="X-Team-Key"`},
		{name: "custom header: x-api-key not read", header: "X-Team-Key", req: []string{"X-API-Key", keyAlice}, kind: ErrNoCredentials, ch: `APIKey realm="a2abus", header="X-Team-Key"`},
		{name: "custom header: wrong key", header: "X-Team-Key", req: []string{"X-Team-Key", keyAlice + "y"}, kind: ErrInvalidCredentials, scheme: SchemeAPIKey, leakKey: keyAlice + "y",
			ch: `APIKey realm="a2abus", header="X-Team-Key", error="invalid_token", error_description="unknown API key"`},
		{name: "explicit Authorization is the default", header: "authorization", req: []string{"X-API-Key", keyAlice}, want: Principal{Name: "alice", Scheme: SchemeAPIKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{APIKeys: testKeys(), APIKeyHeader: tt.header}
			if tt.name == "admin by Admins" {
				cfg.Admins = []string{"bob"}
				tt.want.Admin = true
			}
			a := newAuth(t, cfg, nil)
			if a.Anonymous() {
				t.Fatal("Anonymous() with API keys")
			}
			p, err := a.Authenticate(request(tt.req...))
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				if !reflect.DeepEqual(p, tt.want) {
					t.Fatalf("principal %+v, want %+v", p, tt.want)
				}
				return
			}
			f := failure(t, err)
			if !errors.Is(err, tt.kind) {
				t.Fatalf("error %v, want %v", err, tt.kind)
			}
			if f.Status != http.StatusUnauthorized || f.Challenge != tt.ch || f.Scheme != tt.scheme {
				t.Fatalf("failure status %d challenge %q scheme %q, want 401 %q %q", f.Status, f.Challenge, f.Scheme, tt.ch, tt.scheme)
			}
			if !reflect.DeepEqual(p, Principal{}) {
				t.Fatalf("failure with principal %+v", p)
			}
			if tt.leakKey != "" {
				mustNotLeak(t, f, tt.leakKey)
			}
		})
	}
}

// TestAPIKeysKeptAsDigests: after New the authenticator holds no key in
// clear, and changing the config's slice changes nothing.
func TestAPIKeysKeptAsDigests(t *testing.T) {
	keys := testKeys()
	a := newAuth(t, Config{APIKeys: keys}, nil)
	keys[0].Key = "changed-after-new-0123456789"
	if _, err := a.Authenticate(request(bearer(keyAlice)...)); err != nil {
		t.Fatalf("the config's slice is still read: %v", err)
	}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			for _, k := range testKeys() {
				if strings.Contains(v.String(), k.Key) {
					t.Errorf("the authenticator holds an API key in clear")
				}
			}
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				walk(it.Key())
				walk(it.Value())
			}
		}
	}
	walk(reflect.ValueOf(a))
}

func TestAnonymous(t *testing.T) {
	a := newAuth(t, Config{}, nil)
	if !a.Anonymous() {
		t.Fatal("Anonymous() = false for the zero config")
	}
	for _, req := range [][]string{nil, bearer("whatever-it-is-0123456789")} {
		p, err := a.Authenticate(request(req...))
		if err != nil || !reflect.DeepEqual(p, Principal{Name: AnonymousName, Scheme: SchemeAnonymous}) {
			t.Fatalf("Authenticate = %+v, %v", p, err)
		}
	}
	a = newAuth(t, Config{Admins: []string{AnonymousName}}, nil)
	if p, _ := a.Authenticate(request()); !p.Admin {
		t.Fatal("anonymous listed in Admins is not admin")
	}
}

func TestForbidden(t *testing.T) {
	a := newAuth(t, Config{APIKeys: testKeys()}, nil)
	f := a.Forbidden(`admin "only"`)
	if !errors.Is(f, ErrForbidden) || f.Status != http.StatusForbidden ||
		f.Challenge != `Bearer realm="a2abus", error="insufficient_scope", error_description="admin  only "` {
		t.Fatalf("Forbidden = %+v", f)
	}
	a = newAuth(t, Config{APIKeys: testKeys(), APIKeyHeader: "X-Team-Key"}, nil)
	if f := a.Forbidden("admin only"); f.Status != http.StatusForbidden || f.Challenge != "" {
		t.Fatalf("Forbidden without Bearer = %+v", f)
	}
}

func TestConfigRefused(t *testing.T) {
	const secret = "secret-value-0123456789"
	jwt := func(mod func(*JWTConfig)) *JWTConfig {
		c := &JWTConfig{Issuer: "https://issuer.example", Audience: []string{testAudience}}
		mod(c)
		return c
	}
	tests := []struct {
		name string
		cfg  Config
	}{
		{"short key", Config{APIKeys: []APIKey{{Key: "short", Principal: "a"}}}},
		{"key with a space", Config{APIKeys: []APIKey{{Key: "secret value 0123456789", Principal: "a"}}}},
		{"key with non-ASCII", Config{APIKeys: []APIKey{{Key: "secret-välue-0123456789", Principal: "a"}}}},
		{"repeated key", Config{APIKeys: []APIKey{{Key: secret, Principal: "a"}, {Key: secret, Principal: "b"}}}},
		{"no principal", Config{APIKeys: []APIKey{{Key: secret}}}},
		{"bad header", Config{APIKeys: []APIKey{{Key: secret, Principal: "a"}}, APIKeyHeader: "X Key"}},
		{"realm with a quote", Config{Realm: `a"b`}},
		{"no audience", Config{JWT: jwt(func(c *JWTConfig) { c.Audience = nil })}},
		{"empty audience", Config{JWT: jwt(func(c *JWTConfig) { c.Audience = []string{""} })}},
		{"no JWKS URL nor issuer", Config{JWT: jwt(func(c *JWTConfig) { c.Issuer = "" })}},
		{"plain http JWKS", Config{JWT: jwt(func(c *JWTConfig) { c.JWKSURL = "http://keys.example/jwks" })}},
		{"plain http issuer", Config{JWT: jwt(func(c *JWTConfig) { c.Issuer = "http://issuer.example" })}},
		{"relative JWKS", Config{JWT: jwt(func(c *JWTConfig) { c.JWKSURL = "/jwks" })}},
		{"issuer not a URL for discovery", Config{JWT: jwt(func(c *JWTConfig) { c.Issuer = "my-issuer" })}},
		{"alg none", Config{JWT: jwt(func(c *JWTConfig) { c.Algorithms = []string{"none"} })}},
		{"alg HS256", Config{JWT: jwt(func(c *JWTConfig) { c.Algorithms = []string{"ES256", "HS256"} })}},
		{"alg unknown", Config{JWT: jwt(func(c *JWTConfig) { c.Algorithms = []string{"rs256"} })}},
		{"negative skew", Config{JWT: jwt(func(c *JWTConfig) { c.ClockSkew = -1 })}},
		{"negative refresh", Config{JWT: jwt(func(c *JWTConfig) { c.KeyRefreshInterval = -1 })}},
		{"negative cache", Config{JWT: jwt(func(*JWTConfig) {}), MaxCachedTokens: -1}},
		{"key principal named like a JWT principal", Config{APIKeys: []APIKey{{Key: secret, Principal: "jwt:https://issuer.example#ops"}}}},
		{"key principal named like a certificate principal", Config{APIKeys: []APIKey{{Key: secret, Principal: "cert:ops"}}}},
		{"empty admin", Config{APIKeys: []APIKey{{Key: secret, Principal: "a"}}, Admins: []string{""}}},
		{"JWT admin without the issuer", Config{JWT: jwt(func(*JWTConfig) {}), Admins: []string{"jwt:ops"}}},
		{"JWT admin of another issuer", Config{JWT: jwt(func(*JWTConfig) {}), Admins: []string{"jwt:https://other.example#ops"}}},
		{"JWT admin without a name", Config{JWT: jwt(func(*JWTConfig) {}), Admins: []string{"jwt:https://issuer.example#"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(t.Context(), tt.cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New = %v, %v; want ErrInvalidConfig", a, err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("error shows a key: %v", err)
			}
		})
	}
	// Accepted: loopback http, an issuer that is no URL with a JWKS URL.
	for _, c := range []*JWTConfig{
		{JWKSURL: "http://127.0.0.1:1/jwks", Audience: []string{"x"}},
		{JWKSURL: "http://localhost:1/jwks", Audience: []string{"x"}},
		{JWKSURL: "http://[::1]:1/jwks", Issuer: "my-issuer", Audience: []string{"x"}},
		{Issuer: "https://issuer.example/tenant/", Audience: []string{"x"}, Algorithms: []string{"PS256", "EdDSA", "ES384"}},
	} {
		if _, err := New(t.Context(), Config{JWT: c}); err != nil {
			t.Errorf("New(%+v): %v", c, err)
		}
	}
}

func TestParseAPIKeys(t *testing.T) {
	got, err := ParseAPIKeys(" k1-0123456789abcdef=alice , k2-0123456789abcd==bob,, ")
	want := []APIKey{{Key: "k1-0123456789abcdef", Principal: "alice"}, {Key: "k2-0123456789abcd=", Principal: "bob"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseAPIKeys = %+v, %v; want %+v", got, err, want)
	}
	if got, err := ParseAPIKeys(""); err != nil || got != nil {
		t.Fatalf("ParseAPIKeys(\"\") = %v, %v", got, err)
	}
	for _, s := range []string{"k1-secret-0123456789", "k1-secret-0123456789=", "=alice", "a=b,k1-secret-0123456789"} {
		_, err := ParseAPIKeys(s)
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ParseAPIKeys(%q) = %v, want ErrInvalidConfig", s, err)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseAPIKeys(%q) error shows the key: %v", s, err)
		}
	}
}

func TestReadAPIKeys(t *testing.T) {
	body := "# a2abus API keys\n\nk1-0123456789abcdef alice\n  k2-0123456789abcdef  root  admin  # the operator\nk3-0123456789abcdef bob # ci\n"
	got, err := ReadAPIKeys(strings.NewReader(body))
	want := []APIKey{
		{Key: "k1-0123456789abcdef", Principal: "alice"},
		{Key: "k2-0123456789abcdef", Principal: "root", Admin: true},
		{Key: "k3-0123456789abcdef", Principal: "bob"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadAPIKeys = %+v, %v; want %+v", got, err, want)
	}
	a := newAuth(t, Config{APIKeys: got}, nil)
	if p, err := a.Authenticate(request(bearer("k2-0123456789abcdef")...)); err != nil || !p.Admin {
		t.Fatalf("the file's admin key: %+v, %v", p, err)
	}

	for _, line := range []string{"k1-secret-0123456789", "k1-secret-0123456789 alice root", "k1-secret-0123456789 alice admin extra"} {
		_, err := ReadAPIKeys(strings.NewReader("# ok\n" + line + "\n"))
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("line %q: %v, want ErrInvalidConfig naming line 2", line, err)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("line %q: the error shows the key: %v", line, err)
		}
	}
}

// A key file line may give the principal its tenants, the first by
// default; the principal an API key stands for carries them.
func TestAPIKeyTenants(t *testing.T) {
	keys, err := ReadAPIKeys(strings.NewReader("k-0123456789abcdef alice tenants=t1,t2\nk-fedcba9876543210 ops admin tenants=t1\n"))
	if err != nil || len(keys) != 2 || !reflect.DeepEqual(keys[0].Tenants, []string{"t1", "t2"}) || !keys[1].Admin || keys[1].Tenants[0] != "t1" {
		t.Fatalf("keys %+v %v", keys, err)
	}
	for _, bad := range []string{"k-0123456789abcdef alice tenants=", "k-0123456789abcdef alice admin admin", "k-0123456789abcdef alice tenants=a tenants=b"} {
		if _, err := ReadAPIKeys(strings.NewReader(bad)); err == nil || strings.Contains(err.Error(), "k-0123") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	a, err := New(context.Background(), Config{APIKeys: keys})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", "k-0123456789abcdef")
	p, err := a.Authenticate(r)
	if err != nil || p.Tenant != "t1" || !reflect.DeepEqual(p.Tenants, []string{"t2"}) {
		t.Fatalf("principal %+v %v", p, err)
	}
}
