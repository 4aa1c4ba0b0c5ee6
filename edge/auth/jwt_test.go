package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// unsigned makes a token with header alg "none" and no signature.
func unsigned(claims any) string {
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	c, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + "."
}

// hmacWithPublicKey makes the RS/HS confusion attack: an HS256 token whose
// HMAC secret is the RSA public key (PEM), under the RSA key's kid.
func hmacWithPublicKey(t *testing.T, k signingKey, claims any) string {
	der, err := x509.MarshalPKIXPublicKey(k.priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: secret, KeyID: k.kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestJWT(t *testing.T) {
	rs, es := rsaKey(t, "rsa-1"), ecKey(t, "ec-1")
	is := newTestIssuer(t, rs, es)
	clock := newFakeClock()
	now := clock.Now()
	iss := is.url()
	// JWT principals are named by issuer and subject; a bare name in
	// Admins is an API-key principal's, which no token can be.
	name := func(sub string) string { return "jwt:" + iss + "#" + sub }
	a := newAuth(t, Config{
		JWT: &JWTConfig{
			Issuer: iss, Audience: []string{"other", testAudience},
			TenantClaim: "tenant",
		},
		Admins:     []string{name("root"), "ops"},
		HTTPClient: is.srv.Client(),
	}, clock)

	stranger := ecKey(t, "stranger")
	impostor := ecKey(t, "ec-1") // the published kid, another key
	rsAsES := signingKey{kid: "rsa-1", alg: jose.ES256, priv: ecKey(t, "x").priv}

	tests := []struct {
		name  string
		token string
		want  Principal
		kind  error
		why   string // the failure's Reason
	}{
		{"RS256", sign(t, rs, claims(iss, now)), Principal{Name: name("alice"), Scheme: SchemeBearer}, nil, ""},
		{"ES256", sign(t, es, claims(iss, now)), Principal{Name: name("alice"), Scheme: SchemeBearer}, nil, ""},
		{"tenant claim", sign(t, es, claims(iss, now, set("tenant", "acme"), set("sub", "bob"))), Principal{Name: name("bob"), Scheme: SchemeBearer, Tenant: "acme"}, nil, ""},
		{"admin", sign(t, rs, claims(iss, now, set("sub", "root"))), Principal{Name: name("root"), Scheme: SchemeBearer, Admin: true}, nil, ""},
		{"sub of a bare admin name is no admin", sign(t, rs, claims(iss, now, set("sub", "ops"))), Principal{Name: name("ops"), Scheme: SchemeBearer}, nil, ""},
		{"sub shaped like a qualified admin name", sign(t, rs, claims(iss, now, set("sub", name("root")))), Principal{Name: name(name("root")), Scheme: SchemeBearer}, nil, ""},
		{"audience list", sign(t, es, claims(iss, now, set("aud", []string{"x", testAudience}))), Principal{Name: name("alice"), Scheme: SchemeBearer}, nil, ""},
		{"within skew: expired 20s ago", sign(t, es, claims(iss, now, set("exp", now.Add(-20*time.Second).Unix()))), Principal{Name: name("alice"), Scheme: SchemeBearer}, nil, ""},
		{"within skew: valid in 20s", sign(t, es, claims(iss, now, set("nbf", now.Add(20*time.Second).Unix()))), Principal{Name: name("alice"), Scheme: SchemeBearer}, nil, ""},
		{"no nbf or iat", sign(t, es, claims(iss, now, del("nbf"), del("iat"))), Principal{Name: name("alice"), Scheme: SchemeBearer}, nil, ""},

		{"expired", sign(t, es, claims(iss, now, set("exp", now.Add(-time.Minute).Unix()))), Principal{}, ErrInvalidCredentials, "token expired"},
		{"not yet valid", sign(t, es, claims(iss, now, set("nbf", now.Add(time.Minute).Unix()))), Principal{}, ErrInvalidCredentials, "token not valid yet (nbf)"},
		{"issued in the future", sign(t, es, claims(iss, now, set("iat", now.Add(time.Minute).Unix()))), Principal{}, ErrInvalidCredentials, "token issued in the future (iat)"},
		{"no exp", sign(t, es, claims(iss, now, del("exp"))), Principal{}, ErrInvalidCredentials, "token has no exp claim"},
		{"wrong audience", sign(t, rs, claims(iss, now, set("aud", "someone-else"))), Principal{}, ErrInvalidCredentials, "token audience (aud) is not accepted here"},
		{"no audience", sign(t, rs, claims(iss, now, del("aud"))), Principal{}, ErrInvalidCredentials, "token audience (aud) is not accepted here"},
		{"wrong issuer", sign(t, rs, claims("https://evil.example", now)), Principal{}, ErrInvalidCredentials, "token issuer (iss) is not the accepted issuer"},
		{"no subject", sign(t, es, claims(iss, now, del("sub"))), Principal{}, ErrInvalidCredentials, "token has no sub claim naming the principal"},
		{"tenant not a string", sign(t, es, claims(iss, now, set("tenant", 42))), Principal{}, ErrInvalidCredentials, "token claim tenant (the tenant) is not a string"},
		{"alg none", unsigned(claims(iss, now)), Principal{}, ErrInvalidCredentials, "token algorithm none is not accepted (accepted: RS256, ES256)"},
		{"HS256 with the RSA public key", hmacWithPublicKey(t, rs, claims(iss, now)), Principal{}, ErrInvalidCredentials, "token algorithm HS256 is not accepted (accepted: RS256, ES256)"},
		{"unknown key", sign(t, stranger, claims(iss, now)), Principal{}, ErrInvalidCredentials, "token is signed by a key the issuer does not publish, or one unfit for its algorithm"},
		{"impostor of a known kid", sign(t, impostor, claims(iss, now)), Principal{}, ErrInvalidCredentials, "token signature does not verify with the issuer's key"},
		{"ES256 under an RSA kid", sign(t, rsAsES, claims(iss, now)), Principal{}, ErrInvalidCredentials, "token is signed by a key the issuer does not publish, or one unfit for its algorithm"},
		{"tampered payload", tamper(t, sign(t, es, claims(iss, now))), Principal{}, ErrInvalidCredentials, "token signature does not verify with the issuer's key"},
		{"not a JWT", "abc.def", Principal{}, ErrInvalidCredentials, "not a JWT"},
		{"garbage JWS", "e30.e30.e30", Principal{}, ErrInvalidCredentials, "token is not a well-formed JWS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(request(bearer(tt.token)...))
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				if !reflect.DeepEqual(p, tt.want) {
					t.Fatalf("principal %+v, want %+v", p, tt.want)
				}
				// Again, from the cache.
				if p2, err := a.Authenticate(request(bearer(tt.token)...)); err != nil || !reflect.DeepEqual(p2, p) {
					t.Fatalf("second Authenticate = %+v, %v", p2, err)
				}
				return
			}
			f := failure(t, err)
			if !errors.Is(err, tt.kind) || f.Status != http.StatusUnauthorized || f.Scheme != SchemeBearer {
				t.Fatalf("failure %v status %d scheme %q, want %v 401 bearer", err, f.Status, f.Scheme, tt.kind)
			}
			wantCh := `Bearer realm="a2abus", error="invalid_token", error_description="` + quotable(f.Reason) + `"`
			if f.Reason != tt.why {
				t.Fatalf("reason %q, want %q", f.Reason, tt.why)
			}
			if f.Challenge != wantCh {
				t.Fatalf("challenge %q, want %q", f.Challenge, wantCh)
			}
			mustNotLeak(t, f, tt.token)
		})
	}

	if d, j := is.hits(); d != 1 || j != 1 {
		t.Fatalf("discovery fetched %d times and JWKS %d times, want 1 and 1 (unknown kids within the refresh interval do not refetch)", d, j)
	}
	// Missing credentials: 401 without error parameters.
	_, err := a.Authenticate(request())
	if f := failure(t, err); !errors.Is(err, ErrNoCredentials) || f.Challenge != `Bearer realm="a2abus"` || f.Status != http.StatusUnauthorized {
		t.Fatalf("missing: %+v", f)
	}
}

// tamper changes the token's payload (sub alice → mallory), keeping its
// signature.
func tamper(t *testing.T, tok string) string {
	parts := strings.Split(tok, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), `"alice"`, `"mallory"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

// TestJWTOptions: a JWKS URL without discovery and without issuer (iss not
// checked), another principal claim, an algorithm allow-list, and tokens
// without kid.
func TestJWTOptions(t *testing.T) {
	es := ecKey(t, "ec-1")
	rs := rsaKey(t, "rsa-1")
	is := newTestIssuer(t, es, rs)
	clock := newFakeClock()
	now := clock.Now()
	a := newAuth(t, Config{
		JWT: &JWTConfig{
			JWKSURL: is.url() + "/jwks", Audience: []string{testAudience},
			PrincipalClaim: "email", Algorithms: []string{"ES256"},
		},
	}, clock)

	p, err := a.Authenticate(request(bearer(sign(t, es, claims("anyone", now, set("email", "a@example.com"))))...))
	// Without a configured issuer (iss not checked), "jwt:" and the claim.
	if err != nil || !reflect.DeepEqual(p, Principal{Name: "jwt:a@example.com", Scheme: SchemeBearer}) {
		t.Fatalf("email principal: %+v, %v", p, err)
	}
	if _, err := a.Authenticate(request(bearer(sign(t, es, claims("anyone", now)))...)); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("no email claim: %v", err)
	}
	if _, err := a.Authenticate(request(bearer(sign(t, rs, claims("anyone", now, set("email", "b@example.com"))))...)); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("RS256 outside the allow-list: %v", err)
	}
	noKid := signingKey{alg: jose.ES256, priv: es.priv}
	if p, err := a.Authenticate(request(bearer(sign(t, noKid, claims("x", now, set("email", "c@example.com"))))...)); err != nil || p.Name != "jwt:c@example.com" {
		t.Fatalf("token without kid, signed by a published key: %+v, %v", p, err)
	}
	if _, err := a.Authenticate(request(bearer(sign(t, signingKey{alg: jose.ES256, priv: ecKey(t, "").priv}, claims("x", now, set("email", "d@example.com"))))...)); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("token without kid, signed by another key: %v", err)
	}
	if d, _ := is.hits(); d != 0 {
		t.Fatalf("discovery fetched %d times with a JWKS URL configured", d)
	}
}

// TestKeyRotation: the issuer starts signing with a new key; a token with
// it is accepted without restarting the authenticator, once the refresh
// interval since the last fetch has passed (the fake clock moves it).
func TestKeyRotation(t *testing.T) {
	old := ecKey(t, "2026-08")
	is := newTestIssuer(t, old)
	clock := newFakeClock()
	a := newAuth(t, Config{JWT: &JWTConfig{Issuer: is.url(), Audience: []string{testAudience}}}, clock)

	oldTok := sign(t, old, claims(is.url(), clock.Now()))
	if _, err := a.Authenticate(request(bearer(oldTok)...)); err != nil {
		t.Fatalf("old key: %v", err)
	}

	next := ecKey(t, "2026-09")
	is.publish(next)
	newTok := sign(t, next, claims(is.url(), clock.Now()))
	// Within the refresh interval of the first fetch: no new fetch, and
	// the token is refused as signed by an unknown key.
	clock.Advance(DefaultKeyRefreshInterval - time.Second)
	if _, err := a.Authenticate(request(bearer(newTok)...)); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("new key within the refresh interval: %v", err)
	}
	if _, j := is.hits(); j != 1 {
		t.Fatalf("JWKS fetched %d times, want 1", j)
	}
	clock.Advance(time.Second)
	p, err := a.Authenticate(request(bearer(newTok)...))
	if err != nil || p.Name != "jwt:"+is.url()+"#alice" {
		t.Fatalf("new key after the refresh interval: %+v, %v", p, err)
	}
	if _, j := is.hits(); j != 2 {
		t.Fatalf("JWKS fetched %d times, want 2", j)
	}
	// The old key is still published and its token still valid.
	if _, err := a.Authenticate(request(bearer(sign(t, old, claims(is.url(), clock.Now())))...)); err != nil {
		t.Fatalf("old key after rotation: %v", err)
	}
	if d, j := is.hits(); d != 1 || j != 2 {
		t.Fatalf("discovery %d, JWKS %d fetches; want 1 and 2", d, j)
	}
}

// TestIssuerUnavailable: keys that cannot be fetched give 503
// (ErrUnavailable), retried at most once per refresh interval; once the
// JWKS answers, tokens are accepted. A discovery document naming another
// issuer is refused.
func TestIssuerUnavailable(t *testing.T) {
	k := ecKey(t, "k")
	is := newTestIssuer(t, k)
	is.setJWKSStatus(http.StatusInternalServerError)
	clock := newFakeClock()
	a := newAuth(t, Config{JWT: &JWTConfig{Issuer: is.url(), Audience: []string{testAudience}}}, clock)
	tok := sign(t, k, claims(is.url(), clock.Now()))

	for range 3 {
		_, err := a.Authenticate(request(bearer(tok)...))
		f := failure(t, err)
		if !errors.Is(err, ErrUnavailable) || f.Status != http.StatusServiceUnavailable || f.Challenge != "" {
			t.Fatalf("JWKS down: %+v", f)
		}
		if strings.Contains(f.Reason, is.url()) || !strings.Contains(f.Error(), is.url()+"/jwks") {
			t.Fatalf("JWKS down: reason %q shows the issuer's URL, or error %q does not", f.Reason, f.Error())
		}
		mustNotLeak(t, f, tok)
	}
	if _, j := is.hits(); j != 1 {
		t.Fatalf("JWKS fetched %d times within the refresh interval, want 1", j)
	}
	is.setJWKSStatus(http.StatusOK)
	clock.Advance(DefaultKeyRefreshInterval)
	if _, err := a.Authenticate(request(bearer(tok)...)); err != nil {
		t.Fatalf("JWKS back: %v", err)
	}
	// A failed refresh keeps the keys already held.
	is.setJWKSStatus(http.StatusInternalServerError)
	clock.Advance(DefaultKeyRefreshInterval)
	if _, err := a.Authenticate(request(bearer(sign(t, ecKey(t, "unknown"), claims(is.url(), clock.Now())))...)); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("unknown kid while the JWKS is down, keys held: %v", err)
	}
	if _, err := a.Authenticate(request(bearer(sign(t, k, claims(is.url(), clock.Now())))...)); err != nil {
		t.Fatalf("known key while the JWKS is down: %v", err)
	}

	// Discovery naming another issuer.
	is2 := newTestIssuer(t, k)
	is2.issuerInDoc = "https://someone-else.example"
	a2 := newAuth(t, Config{JWT: &JWTConfig{Issuer: is2.url(), Audience: []string{testAudience}}}, clock)
	if _, err := a2.Authenticate(request(bearer(sign(t, k, claims(is2.url(), clock.Now())))...)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("discovery of another issuer: %v", err)
	}
	if _, j := is2.hits(); j != 0 {
		t.Fatalf("JWKS of a refused discovery document fetched %d times", j)
	}
}

// TestTokenCache: a verified token is served from the cache (no key needed
// any more) until it expires, and the cache is bounded.
func TestTokenCache(t *testing.T) {
	k := ecKey(t, "k")
	is := newTestIssuer(t, k)
	clock := newFakeClock()
	a := newAuth(t, Config{JWT: &JWTConfig{Issuer: is.url(), Audience: []string{testAudience}}, MaxCachedTokens: 4}, clock)
	tok := sign(t, k, claims(is.url(), clock.Now(), set("exp", clock.Now().Add(time.Minute).Unix())))
	if _, err := a.Authenticate(request(bearer(tok)...)); err != nil {
		t.Fatal(err)
	}
	// The issuer drops the key: the cached token does not need it.
	is.unpublishAll()
	clock.Advance(time.Minute + DefaultClockSkew) // exp + skew: still valid
	if _, err := a.Authenticate(request(bearer(tok)...)); err != nil {
		t.Fatalf("cached token: %v", err)
	}
	if _, j := is.hits(); j != 1 {
		t.Fatalf("JWKS fetched %d times, want 1", j)
	}
	clock.Advance(time.Second)
	if _, err := a.Authenticate(request(bearer(tok)...)); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("cached token past exp + skew: %v", err)
	}

	is.publish(k)
	clock.Advance(DefaultKeyRefreshInterval)
	for i := range 10 {
		tok := sign(t, k, claims(is.url(), clock.Now(), set("sub", string(rune('a'+i)))))
		if p, err := a.Authenticate(request(bearer(tok)...)); err != nil || p.Name != "jwt:"+is.url()+"#"+string(rune('a'+i)) {
			t.Fatalf("token %d: %+v, %v", i, p, err)
		}
		if n := a.jwt.cache.len(); n > 4 {
			t.Fatalf("cache holds %d tokens, bound 4", n)
		}
	}
}

// TestConcurrentRefresh: many requests naming a new key at once make one
// JWKS fetch, and all are accepted.
func TestConcurrentRefresh(t *testing.T) {
	k := ecKey(t, "k")
	is := newTestIssuer(t, k)
	clock := newFakeClock()
	a := newAuth(t, Config{JWT: &JWTConfig{Issuer: is.url(), Audience: []string{testAudience}}}, clock)

	const n = 32
	toks := make([]string, n)
	for i := range toks {
		toks[i] = sign(t, k, claims(is.url(), clock.Now(), set("jti", string(rune('A'+i)))))
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, tok := range toks {
		wg.Go(func() {
			_, err := a.Authenticate(request(bearer(tok)...))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if d, j := is.hits(); d != 1 || j != 1 {
		t.Fatalf("discovery %d, JWKS %d fetches for %d concurrent requests; want 1 and 1", d, j, n)
	}
}

// TestFetchOutlivesCaller: a request that leaves while the keys are fetched
// gets its answer at once; the fetch goes on for the others.
func TestFetchOutlivesCaller(t *testing.T) {
	k := ecKey(t, "k")
	is := newTestIssuer(t, k)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	is.holdDiscovery(entered, release)
	clock := newFakeClock()
	a := newAuth(t, Config{JWT: &JWTConfig{Issuer: is.url(), Audience: []string{testAudience}}}, clock)
	tok := sign(t, k, claims(is.url(), clock.Now()))

	first := make(chan error, 1)
	go func() {
		_, err := a.Authenticate(request(bearer(tok)...))
		first <- err
	}()
	<-entered // the first request's fetch is under way

	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		_, err := a.Authenticate(request(bearer(tok)...).WithContext(ctx))
		second <- err
	}()
	cancel()
	if err := <-second; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("request that left while the keys were fetched: %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("request whose fetch finished: %v", err)
	}
}

// TestAPIKeysAndJWT: with both, a Bearer credential is an API key when it
// is one, else a JWT; X-API-Key still carries keys. The two schemes name
// principals apart: a token whose sub is a key principal's name is neither
// that principal nor, when that one is an admin, an admin; Admins names
// each scheme's admins by their full names.
func TestAPIKeysAndJWT(t *testing.T) {
	k := ecKey(t, "k")
	is := newTestIssuer(t, k)
	clock := newFakeClock()
	a := newAuth(t, Config{
		APIKeys: testKeys(),
		JWT:     &JWTConfig{Issuer: is.url(), Audience: []string{testAudience}},
		Admins:  []string{"alice", "jwt:" + is.url() + "#bob"},
	}, clock)
	now := clock.Now()
	tests := []struct {
		name string
		req  []string
		want Principal
		why  string
	}{
		{"key as bearer", bearer(keyBob), Principal{Name: "bob", Scheme: SchemeAPIKey}, ""},
		{"key in X-API-Key", []string{"X-API-Key", keyRoot}, Principal{Name: "root", Scheme: SchemeAPIKey, Admin: true}, ""},
		{"key admin by Admins", bearer(keyAlice), Principal{Name: "alice", Scheme: SchemeAPIKey, Admin: true}, ""},
		{"jwt sub of a key admin", bearer(sign(t, k, claims(is.url(), now))), Principal{Name: "jwt:" + is.url() + "#alice", Scheme: SchemeBearer}, ""},
		{"jwt sub of a key admin entry", bearer(sign(t, k, claims(is.url(), now, set("sub", "root")))), Principal{Name: "jwt:" + is.url() + "#root", Scheme: SchemeBearer}, ""},
		{"jwt admin by Admins", bearer(sign(t, k, claims(is.url(), now, set("sub", "bob")))), Principal{Name: "jwt:" + is.url() + "#bob", Scheme: SchemeBearer, Admin: true}, ""},
		{"unknown key", bearer("no-such-key-0123456789"), Principal{}, "unknown API key"},
		{"expired jwt", bearer(sign(t, k, claims(is.url(), now, set("exp", now.Add(-time.Hour).Unix())))), Principal{}, "token expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(request(tt.req...))
			if tt.why == "" {
				if err != nil || !reflect.DeepEqual(p, tt.want) {
					t.Fatalf("Authenticate = %+v, %v; want %+v", p, err, tt.want)
				}
				return
			}
			f := failure(t, err)
			if !errors.Is(err, ErrInvalidCredentials) || f.Reason != tt.why {
				t.Fatalf("failure %v, want ErrInvalidCredentials %q", err, tt.why)
			}
			mustNotLeak(t, f, strings.TrimPrefix(tt.req[1], "Bearer "))
		})
	}
	if _, j := is.hits(); j != 1 {
		t.Fatalf("JWKS fetched %d times; API keys must not fetch it", j)
	}
}

// TestKeyAlgorithmPinned: a JWK that names its "alg" checks tokens of that
// algorithm only, even when another one fits its type.
func TestKeyAlgorithmPinned(t *testing.T) {
	rs := rsaKey(t, "rsa-1") // published with "alg": "RS256"
	is := newTestIssuer(t, rs)
	clock := newFakeClock()
	a := newAuth(t, Config{JWT: &JWTConfig{Issuer: is.url(), Audience: []string{testAudience}, Algorithms: []string{"RS256", "PS256"}}}, clock)
	if _, err := a.Authenticate(request(bearer(sign(t, rs, claims(is.url(), clock.Now())))...)); err != nil {
		t.Fatalf("RS256: %v", err)
	}
	ps := rs
	ps.alg = jose.PS256
	_, err := a.Authenticate(request(bearer(sign(t, ps, claims(is.url(), clock.Now())))...))
	if f := failure(t, err); !errors.Is(err, ErrInvalidCredentials) || f.Reason != "token is signed by a key the issuer does not publish, or one unfit for its algorithm" {
		t.Fatalf("PS256 with a key pinned to RS256: %v", err)
	}
}

// TestKeyFits: which key types and curves check which algorithms.
func TestKeyFits(t *testing.T) {
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub := rsaKey(t, "rsa-1").priv.Public()
	tests := []struct {
		key  verifyKey
		alg  string
		want bool
	}{
		{verifyKey{key: rsaPub}, "RS256", true},
		{verifyKey{key: rsaPub}, "PS512", true},
		{verifyKey{key: rsaPub}, "ES256", false},
		{verifyKey{key: rsaPub}, "HS256", false},
		{verifyKey{key: rsaPub}, "none", false},
		{verifyKey{key: rsaPub, alg: "RS256"}, "RS384", false},
		{verifyKey{key: &p256.PublicKey}, "ES256", true},
		{verifyKey{key: &p256.PublicKey}, "ES384", false},
		{verifyKey{key: &p384.PublicKey}, "ES384", true},
		{verifyKey{key: &p384.PublicKey}, "ES256", false},
		{verifyKey{key: &p256.PublicKey}, "RS256", false},
		{verifyKey{key: edPub}, "EdDSA", true},
		{verifyKey{key: edPub}, "ES256", false},
		{verifyKey{key: []byte("secret")}, "HS256", false},
	}
	for _, tt := range tests {
		if got := tt.key.fits(tt.alg); got != tt.want {
			t.Errorf("%T (alg %q) fits %s = %v, want %v", tt.key.key, tt.key.alg, tt.alg, got, tt.want)
		}
	}
}

// TestUsableKeys: what a JWKS may hold that is not kept.
func TestUsableKeys(t *testing.T) {
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ec := ecKey(t, "ec")
	tests := []struct {
		name string
		jwk  jose.JSONWebKey
		want bool
	}{
		{"public EC", jose.JSONWebKey{Key: ec.priv.Public(), KeyID: "a"}, true},
		{"private EC: its public half", jose.JSONWebKey{Key: ec.priv, KeyID: "a"}, true},
		{"encryption key", jose.JSONWebKey{Key: ec.priv.Public(), KeyID: "a", Use: "enc"}, false},
		{"symmetric", jose.JSONWebKey{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "a"}, false},
		{"RSA 1024", jose.JSONWebKey{Key: &small.PublicKey, KeyID: "a"}, false},
	}
	for _, tt := range tests {
		vk, ok := usable(tt.jwk)
		if ok != tt.want {
			t.Errorf("%s: usable = %v, want %v", tt.name, ok, tt.want)
		}
		if ok {
			if _, public := vk.key.(*ecdsa.PublicKey); !public {
				t.Errorf("%s: kept %T, not a public key", tt.name, vk.key)
			}
		}
	}
}
