package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge/auth"
)

// keyServer publishes one ES256 key as a JWKS on 127.0.0.1; token signs
// with it.
func keyServer(t *testing.T) (jwksURL string, token func(sub string) string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	}))
	t.Cleanup(srv.Close)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL + "/jwks", func(sub string) string {
		tok, err := josejwt.Signed(signer).Claims(josejwt.Claims{Subject: sub, Audience: josejwt.Audience{"a2abus"},
			Expiry: josejwt.NewNumericDate(time.Now().Add(time.Hour))}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
}

// authenticatorOf builds the edge's authenticator from command-line
// arguments, as serve and edge do.
func authenticatorOf(t *testing.T, args ...string) (*auth.Authenticator, error) {
	t.Helper()
	cfg, err := loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), args, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	p := &process{cfg: cfg, log: slog.New(slog.DiscardHandler), out: io.Discard}
	return p.authenticator(t.Context())
}

func bearerAs(a *auth.Authenticator, tok string) (auth.Principal, error) {
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return a.Authenticate(r)
}

// The JWT issuer's keys are fetched through the outbound guard like every
// other request to a configured URL: a JWKS on a loopback address is
// refused at start unless the outbound policy allows loopback (saying
// how); one named by a host name that resolves to loopback is refused when
// dialled (the token cannot be checked: 503), and allowed with the policy.
func TestKeyFetchesGoThroughTheOutboundGuard(t *testing.T) {
	jwksURL, token := keyServer(t)
	_, err := authenticatorOf(t, "--jwt-jwks-url", jwksURL, "--jwt-audience", "a2abus")
	if !errors.Is(err, discovery.ErrForbiddenAddress) || !strings.Contains(err.Error(), "jwt jwks url") || !strings.Contains(err.Error(), "outbound") {
		t.Fatalf("a loopback JWKS with the default outbound policy: %v", err)
	}

	byName := strings.Replace(jwksURL, "127.0.0.1", "localhost", 1)
	a, err := authenticatorOf(t, "--jwt-jwks-url", byName, "--jwt-audience", "a2abus")
	if err != nil {
		t.Fatal(err)
	}
	_, err = bearerAs(a, token("alice"))
	if !errors.Is(err, auth.ErrUnavailable) || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("a JWKS at a name resolving to loopback, dialled through the guard: %v", err)
	}

	a, err = authenticatorOf(t, "--jwt-jwks-url", jwksURL, "--jwt-audience", "a2abus", "--outbound-allow-private=true")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := bearerAs(a, token("alice")); err != nil || p.Name != "jwt:alice" {
		t.Fatalf("with the policy allowing loopback: %+v, %v", p, err)
	}
}

// --legacy-principal-names reaches the authenticator: a token's principal
// is its bare sub; without it, "jwt:" and the sub. An --admins entry
// written before names carried the issuer is refused at start, saying the
// form to use.
func TestLegacyPrincipalNamesFlag(t *testing.T) {
	jwksURL, token := keyServer(t)
	base := []string{"--jwt-jwks-url", jwksURL, "--jwt-audience", "a2abus", "--outbound-allow-private=true"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{base, "jwt:alice"},
		{append(base[:len(base):len(base)], "--legacy-principal-names=true"), "alice"},
	} {
		a, err := authenticatorOf(t, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := bearerAs(a, token("alice")); err != nil || p.Name != c.want {
			t.Fatalf("%v: %+v, %v; want %s", c.args, p, err, c.want)
		}
	}
	_, err := authenticatorOf(t, "--jwt-jwks-url", jwksURL, "--jwt-issuer", "https://idp.example", "--jwt-audience", "a2abus",
		"--outbound-allow-private=true", "--admins", "ops,jwt:ops")
	if !errors.Is(err, auth.ErrInvalidConfig) || !strings.Contains(err.Error(), `"jwt:https://idp.example#"`) {
		t.Fatalf("--admins jwt:ops with an issuer: %v", err)
	}
}

// --card-scopes-as-arrays (and its variable) reaches the edge's
// configuration; it is off by default.
func TestCardScopesAsArraysSetting(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{nil, nil, false},
		{[]string{"--card-scopes-as-arrays=true"}, nil, true},
		{nil, map[string]string{"A2ABUS_CARD_SCOPES_AS_ARRAYS": "true"}, true},
	} {
		cfg, err := loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), c.args, func(k string) string { return c.env[k] })
		if err != nil {
			t.Fatal(err)
		}
		p := &process{cfg: cfg, log: slog.New(slog.DiscardHandler), out: io.Discard}
		if got := p.edgeConfig(&prepared{}).CardScopesAsArrays; got != c.want {
			t.Errorf("%v %v: CardScopesAsArrays %v, want %v", c.args, c.env, got, c.want)
		}
	}
}

// --card-form (and its variable) reaches the edge's configuration: the
// union card by default, 1.0's form alone with "1.0", and any other form
// refused at start-up, saying which there are.
func TestCardFormSetting(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{nil, nil, false},
		{[]string{"--card-form", "union"}, nil, false},
		{[]string{"--card-form", "1.0"}, nil, true},
		{nil, map[string]string{"A2ABUS_CARD_FORM": "1.0"}, true},
	} {
		cfg, err := loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), c.args, func(k string) string { return c.env[k] })
		if err != nil {
			t.Fatal(err)
		}
		p := &process{cfg: cfg, log: slog.New(slog.DiscardHandler), out: io.Discard}
		if got := p.edgeConfig(&prepared{}).Card10Only; got != c.want {
			t.Errorf("%v %v: Card10Only %v, want %v", c.args, c.env, got, c.want)
		}
	}
	_, err := loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), []string{"--card-form", "0.3"}, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), `"union" or "1.0"`) {
		t.Errorf("--card-form 0.3: %v, want it refused naming the forms", err)
	}
}
