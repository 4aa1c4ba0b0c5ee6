package discovery_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/gowebpki/jcs"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
)

// newKeys is a signing key file of one key of alg, loaded.
func newKeys(t *testing.T, alg string) *auth.SigningKeys {
	t.Helper()
	file, err := auth.RotateSigningKeys(nil, alg, 1)
	if err != nil {
		t.Fatal(err)
	}
	k, err := auth.ParseSigningKeys(file, "a2abus")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// pinnedVerifier trusts the public half of keys.
func pinnedVerifier(t *testing.T, require bool, keys *auth.SigningKeys) *auth.CardVerifier {
	t.Helper()
	ck, err := auth.ParseCardKeys(keys.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewCardVerifier(context.Background(), auth.CardTrust{Keys: func() *auth.CardKeys { return ck }, RequireSigned: require})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// signedBy is card (JSON) with keys' signature.
func signedBy(t *testing.T, keys *auth.SigningKeys, card string) string {
	t.Helper()
	sig, err := keys.SignCard([]byte(card))
	if err != nil {
		t.Fatal(err)
	}
	return withSignature(t, card, sig)
}

func withSignature(t *testing.T, card string, sig json.RawMessage) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(card), &m); err != nil {
		t.Fatal(err)
	}
	m["signatures"] = []json.RawMessage{sig}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// a2abus verifies its own signed cards over real HTTP: an edge signing
// with its card keys, discovery checking against those keys pinned, or
// fetched from the JWKS the edge publishes; the resolver serves the
// verified card from the cache.
func TestA2AbusVerifiesItsOwnSignedCard(t *testing.T) {
	ctx := context.Background()
	keys := newKeys(t, "ES256")
	base := startA2AbusWith(t, edge.Config{CardKeys: func() *auth.SigningKeys { return keys }})
	viaJWKS, err := auth.NewCardVerifier(ctx, auth.CardTrust{JWKSURL: base + "/.well-known/jwks.json", RequireSigned: true,
		Client: discovery.Policy{AllowLoopback: true}.Client(0)})
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]discovery.CardVerifier{"pinned": pinnedVerifier(t, true, keys), "the edge's JWKS": viaJWKS} {
		f := &discovery.Fetcher{Policy: discovery.Policy{AllowLoopback: true}, Verify: v}
		for _, u := range []string{base, base + "/agents/hang", base + discovery.WellKnownCardLegacy} {
			got, err := f.Fetch(ctx, u, "")
			if err != nil || got.SignedBy != keys.KeyID() {
				t.Fatalf("%s, %s: %+v, %v", name, u, got, err)
			}
		}
	}

	r, b, _ := newResolver(t)
	r.Fetcher.Verify = pinnedVerifier(t, true, keys)
	for _, want := range []discovery.Source{discovery.FromAgent, discovery.FromCache} {
		res, err := r.Resolve(ctx, base)
		if err != nil || res.Source != want || res.Card.Name != "echo" {
			t.Fatalf("resolve, want %s: %+v, %v", want, res, err)
		}
	}
	if c, _ := stored(t, b, base); c == nil || len(c.Card.Signatures) != 1 {
		t.Fatalf("the cached card lost its signature: %+v", c)
	}

	// The client of the card: a call through it works.
	got, err := (&discovery.Fetcher{Policy: discovery.Policy{AllowLoopback: true}, Verify: viaJWKS}).Fetch(ctx, base, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := discovery.ClientFor(&got.Card, loopback())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("signed")}); err != nil {
		t.Fatal(err)
	}
}

// An agent whose card fails the check is refused with the reason, as an
// invalid card: signed by a key not trusted, changed after it was signed,
// with an algorithm not allowed, unsigned where signatures are required —
// and signed by an attacker whose jku points at the attacker's key set,
// which is never fetched.
func TestRefusedCards(t *testing.T) {
	ctx := context.Background()
	trusted, stranger := newKeys(t, "EdDSA"), newKeys(t, "EdDSA")
	cs := newCardServer(t)
	plain := fmt.Sprintf(card10, "1.0.0", cs.URL, cs.URL)

	attackerPub, attacker, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var attackerHits atomic.Int64
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		attackerHits.Add(1)
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: attackerPub, KeyID: "attacker", Use: "sig"}}})
	}))
	defer evil.Close()
	// Made with go-jose and jcs directly, as another signer would.
	payload, err := jcs.Transform([]byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: attacker},
		(&jose.SignerOptions{}).WithType("JOSE").WithHeader("kid", "attacker").WithHeader("jku", evil.URL+"/jwks.json"))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	compact, _ := obj.DetachedCompactSerialize()
	parts := strings.Split(compact, ".")
	withJKU := withSignature(t, plain, json.RawMessage(fmt.Sprintf(`{"protected":%q,"signature":%q}`, parts[0], parts[2])))

	good := signedBy(t, trusted, plain)
	lax := &discovery.Fetcher{Policy: discovery.Policy{AllowLoopback: true}, Verify: pinnedVerifier(t, false, trusted)}
	strict := &discovery.Fetcher{Policy: discovery.Policy{AllowLoopback: true}, Verify: pinnedVerifier(t, true, trusted)}
	for _, c := range []struct {
		name   string
		body   string
		f      *discovery.Fetcher
		reason error
	}{
		{"signed by a key not trusted", signedBy(t, stranger, plain), lax, auth.ErrCardUnknownKey},
		{"changed after signing", strings.Replace(good, `"forecasts"`, `"forecasts, and your secrets"`, 1), lax, auth.ErrCardBadSignature},
		{"a jku pointing at the attacker's keys", withJKU, strict, auth.ErrCardUnknownKey},
		{"HMAC", withSignature(t, plain, json.RawMessage(`{"protected":"eyJhbGciOiJIUzI1NiIsImtpZCI6ImsifQ","signature":"AAAA"}`)), lax, auth.ErrCardUnsupportedAlg},
		{"unsigned, signatures required", plain, strict, auth.ErrCardUnsigned},
	} {
		cs.set(func(cs *cardServer) { cs.body = c.body })
		got, err := c.f.Fetch(ctx, cs.URL, "")
		if !errors.Is(err, discovery.ErrInvalidCard) || !errors.Is(err, auth.ErrCardRefused) || !errors.Is(err, c.reason) || got != nil {
			t.Errorf("%s: %+v, %v; want a refusal for %v", c.name, got, err, c.reason)
		}
	}
	if n := attackerHits.Load(); n != 0 {
		t.Fatalf("the jku's key set was fetched %d times", n)
	}
	// The older card path is not tried after a refusal at the first.
	if n := cs.hitsAt(discovery.WellKnownCardLegacy); n != 0 {
		t.Fatalf("a refused card sent discovery to the older path %d times", n)
	}

	// Accepted: the trusted signature, and an unsigned card when
	// signatures are not required.
	cs.set(func(cs *cardServer) { cs.body = good })
	if got, err := strict.Fetch(ctx, cs.URL, ""); err != nil || got.SignedBy != trusted.KeyID() {
		t.Fatalf("a trusted signature: %+v, %v", got, err)
	}
	cs.set(func(cs *cardServer) { cs.body = plain })
	if got, err := lax.Fetch(ctx, cs.URL, ""); err != nil || got.SignedBy != "" {
		t.Fatalf("unsigned, not required: %+v, %v", got, err)
	}
}

// The card cache is shared by processes that may trust other keys: a
// resolver that checks signatures checks a cached card as it would a
// fetched one. A card another resolver cached unsigned is not served to it
// (the agent is asked again, and refused); a signed one it trusts is
// served from the cache without asking.
func TestResolverChecksCachedCards(t *testing.T) {
	ctx := context.Background()
	keys := newKeys(t, "EdDSA")
	cs := newCardServer(t)
	plain := fmt.Sprintf(card10, "1.0.0", cs.URL, cs.URL)
	open, b, _ := newResolver(t)
	checking := &discovery.Resolver{Fetcher: &discovery.Fetcher{Policy: discovery.Policy{AllowLoopback: true}, Verify: pinnedVerifier(t, true, keys)},
		Store: b, HardTTL: open.HardTTL, Now: open.Now}

	cs.set(func(cs *cardServer) { cs.body = plain })
	if _, err := open.Resolve(ctx, cs.URL); err != nil {
		t.Fatal(err)
	}
	before := cs.total()
	if res, err := checking.Resolve(ctx, cs.URL); !errors.Is(err, discovery.ErrNoCard) || !errors.Is(err, auth.ErrCardUnsigned) {
		t.Fatalf("an unsigned cached card, signatures required: %+v, %v", res, err)
	}
	if cs.total() == before {
		t.Fatal("the checking resolver served its answer without asking the agent")
	}

	cs.set(func(cs *cardServer) { cs.body = signedBy(t, keys, plain); cs.version = "2.0.0" })
	if _, err := open.Refresh(ctx, cs.URL); err != nil {
		t.Fatal(err)
	}
	before = cs.total()
	if res, err := checking.Resolve(ctx, cs.URL); err != nil || res.Source != discovery.FromCache {
		t.Fatalf("a signed cached card: %+v, %v", res, err)
	}
	if cs.total() != before {
		t.Fatal("a trusted cached card was fetched again")
	}
}
