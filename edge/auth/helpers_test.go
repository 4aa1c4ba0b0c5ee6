package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testAudience is the audience every test token is made for.
const testAudience = "a2abus-test"

// signingKey is a private key the test issuer signs with.
type signingKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func (k signingKey) public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

// RSA keys are slow to make: one per kid per test binary.
var (
	rsaKeysMu sync.Mutex
	rsaKeys   = map[string]*rsa.PrivateKey{}
)

func rsaKey(t testing.TB, kid string) signingKey {
	t.Helper()
	rsaKeysMu.Lock()
	defer rsaKeysMu.Unlock()
	priv, ok := rsaKeys[kid]
	if !ok {
		var err error
		if priv, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			t.Fatal(err)
		}
		rsaKeys[kid] = priv
	}
	return signingKey{kid: kid, alg: jose.RS256, priv: priv}
}

func ecKey(t testing.TB, kid string) signingKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signingKey{kid: kid, alg: jose.ES256, priv: priv}
}

// sign makes a compact JWS of claims with k (kid in the header).
func sign(t testing.TB, k signingKey, claims any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// testIssuer is an OpenID Connect issuer on 127.0.0.1: a discovery
// document and a JWKS whose keys the test changes, counting fetches.
type testIssuer struct {
	srv *httptest.Server

	mu            sync.Mutex
	keys          []jose.JSONWebKey
	jwksStatus    int // 200 unless a test breaks the JWKS
	issuerInDoc   string
	jwksHits      int
	discoveryHits int
	// When set, discovery signals entered and waits for release to close.
	entered, release chan struct{}
	// redirects answers a GET of a path with 302 to a URL.
	redirects map[string]string
}

func newTestIssuer(t testing.TB, keys ...signingKey) *testIssuer {
	t.Helper()
	is := &testIssuer{jwksStatus: http.StatusOK}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		is.discoveryHits++
		doc := map[string]string{"issuer": is.issuerInDoc, "jwks_uri": is.srv.URL + "/jwks"}
		entered, release := is.entered, is.release
		is.mu.Unlock()
		if entered != nil {
			entered <- struct{}{}
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		is.jwksHits++
		status, set := is.jwksStatus, jose.JSONWebKeySet{Keys: append([]jose.JSONWebKey(nil), is.keys...)}
		is.mu.Unlock()
		if status != http.StatusOK {
			http.Error(w, "broken", status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	})
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		to, ok := is.redirects[r.URL.Path]
		is.mu.Unlock()
		if ok {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		mux.ServeHTTP(w, r)
	})) // listens on 127.0.0.1
	t.Cleanup(is.srv.Close)
	is.issuerInDoc = is.srv.URL
	is.publish(keys...)
	return is
}

// url is the issuer identifier: its base URL.
func (is *testIssuer) url() string { return is.srv.URL }

func (is *testIssuer) publish(keys ...signingKey) {
	is.mu.Lock()
	defer is.mu.Unlock()
	for _, k := range keys {
		is.keys = append(is.keys, k.public())
	}
}

// holdDiscovery makes the next discovery requests signal entered, then
// wait until release is closed.
func (is *testIssuer) holdDiscovery(entered, release chan struct{}) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.entered, is.release = entered, release
}

// redirect makes a GET of path answer 302 to target.
func (is *testIssuer) redirect(path, target string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.redirects == nil {
		is.redirects = map[string]string{}
	}
	is.redirects[path] = target
}

func (is *testIssuer) unpublishAll() {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = nil
}

func (is *testIssuer) setJWKSStatus(status int) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.jwksStatus = status
}

func (is *testIssuer) hits() (discovery, jwks int) {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.discoveryHits, is.jwksHits
}

// fakeClock is the authenticator's clock in tests: time moves only when
// the test says so.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// claims are valid claims for the issuer at now, changed by mods.
func claims(iss string, now time.Time, mods ...func(map[string]any)) map[string]any {
	m := map[string]any{
		"iss": iss, "aud": testAudience, "sub": "alice",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	for _, mod := range mods {
		mod(m)
	}
	return m
}

func set(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
func del(k string) func(map[string]any)        { return func(m map[string]any) { delete(m, k) } }

// newAuth makes an authenticator with the fake clock, failing the test on
// error.
func newAuth(t testing.TB, cfg Config, clock *fakeClock) *Authenticator {
	t.Helper()
	if clock != nil {
		cfg.now = clock.Now
	}
	a, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

// request is a request with the given header name/value pairs.
func request(kv ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/agents/echo", nil)
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Add(kv[i], kv[i+1])
	}
	return r
}

func bearer(cred string) []string { return []string{"Authorization", "Bearer " + cred} }

// failure returns err as a *Failure, failing the test if it is not one.
func failure(t *testing.T, err error) *Failure {
	t.Helper()
	var f *Failure
	if !errors.As(err, &f) {
		t.Fatalf("error %v (%T) is not a *Failure", err, err)
	}
	return f
}

// mustNotLeak fails the test if the failure shows the credential or a
// piece of it (a JWT's parts).
func mustNotLeak(t *testing.T, f *Failure, cred string) {
	t.Helper()
	pieces := []string{cred}
	if parts := strings.Split(cred, "."); len(parts) == 3 {
		pieces = append(pieces, parts...)
	}
	for _, p := range pieces {
		if len(p) < 8 {
			continue
		}
		for _, s := range []string{f.Error(), f.Reason, f.Challenge} {
			if strings.Contains(s, p) {
				t.Errorf("failure %q shows the credential", s)
			}
		}
	}
}
