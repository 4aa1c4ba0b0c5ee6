package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/gowebpki/jcs"
)

// testCard is an agent card as a signer would serve it, with what RFC
// 8785 has rules for: keys out of order, non-ASCII text, characters
// encoding/json escapes (<, >, &), numbers in several spellings.
const testCard = `{
  "name": "wetter <Δ>",
  "description": "Vorhersagen & mehr — 天気",
  "version": "1.0.0",
  "supportedInterfaces": [{"url": "https://agents.example/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
  "capabilities": {"streaming": true, "pushNotifications": false,
    "extensions": [{"uri": "https://ext.example/x", "params": {"ratio": 1.50, "big": 1e21, "n": 10}}]},
  "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
  "skills": [{"id": "forecast", "name": "Forecast", "description": "weather", "tags": ["weather"]}]
}`

// independentSignature signs card (JSON without signatures) as another
// implementation of §8.4 would, with go-jose and jcs directly and none of
// this package's signing code: the JWS of the card's RFC 8785 form,
// detached, protected header {alg, kid, typ: JOSE} plus extra. It returns
// the card with the signature in its signatures array.
func independentSignature(t *testing.T, card string, key any, alg jose.SignatureAlgorithm, kid string, extra map[string]any) []byte {
	t.Helper()
	payload, err := jcs.Transform([]byte(card))
	if err != nil {
		t.Fatal(err)
	}
	opts := (&jose.SignerOptions{}).WithType("JOSE").WithHeader("kid", kid)
	for k, v := range extra {
		opts = opts.WithHeader(jose.HeaderKey(k), v)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	compact, err := obj.DetachedCompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(compact, ".")
	if len(parts) != 3 || parts[1] != "" {
		t.Fatalf("not a detached JWS: %s", compact)
	}
	return withSignatures(t, card, map[string]any{"protected": parts[0], "signature": parts[2]})
}

// withSignatures is card with a signatures array of sigs.
func withSignatures(t *testing.T, card string, sigs ...any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(card), &m); err != nil {
		t.Fatal(err)
	}
	m["signatures"] = sigs
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pinned is a verifier trusting keys (public JWKs).
func pinned(t *testing.T, require bool, keys ...jose.JSONWebKey) *CardVerifier {
	t.Helper()
	doc, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := ParseCardKeys(doc)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewCardVerifier(context.Background(), CardTrust{Keys: func() *CardKeys { return ck }, RequireSigned: require})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func edKey(t *testing.T, kid string) (ed25519.PrivateKey, jose.JSONWebKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv, jose.JSONWebKey{Key: pub, KeyID: kid, Use: "sig"}
}

// A card signed by another implementation of §8.4 (go-jose over jcs's
// RFC 8785 form, nothing of this package) verifies, for each of the usual
// algorithms; and a card signed here verifies with that other
// implementation's check, so the two agree on every byte.
func TestCardSignaturesInteroperate(t *testing.T) {
	ctx := context.Background()
	ed, edPub := edKey(t, "ed-1")
	ec := ecKey(t, "ec-1")
	rs := rsaKey(t, "rsa-1")
	// The RSA key's JWK names no alg, so it checks RS256 and PS256 alike.
	v := pinned(t, true, edPub, ec.public(), jose.JSONWebKey{Key: rs.priv.Public(), KeyID: "rsa-1", Use: "sig"})
	for _, c := range []struct {
		alg jose.SignatureAlgorithm
		key any
		kid string
	}{{jose.EdDSA, ed, "ed-1"}, {jose.ES256, ec.priv, "ec-1"}, {jose.RS256, rs.priv, "rsa-1"}, {jose.PS256, rs.priv, "rsa-1"}} {
		signed := independentSignature(t, testCard, c.key, c.alg, c.kid, nil)
		kid, err := v.VerifyCard(ctx, signed)
		if err != nil || kid != c.kid {
			t.Errorf("%s: kid %q, %v; want %q", c.alg, kid, err, c.kid)
		}
	}

	// The other way: SignCard's signature checked without this package.
	for _, alg := range []string{"EdDSA", "ES256"} {
		file, err := RotateSigningKeys(nil, alg, 1)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := ParseSigningKeys(file, "a2abus")
		if err != nil {
			t.Fatal(err)
		}
		sig, err := keys.SignCard([]byte(testCard))
		if err != nil {
			t.Fatal(err)
		}
		var entry map[string]string
		if err := json.Unmarshal(sig, &entry); err != nil || len(entry) != 2 || entry["protected"] == "" || entry["signature"] == "" {
			t.Fatalf("%s: the signature entry is not {protected, signature}: %s", alg, sig)
		}
		hdr, err := base64.RawURLEncoding.DecodeString(entry["protected"])
		if err != nil {
			t.Fatal(err)
		}
		var h map[string]any
		if err := json.Unmarshal(hdr, &h); err != nil || h["alg"] != alg || h["typ"] != "JOSE" || h["kid"] != keys.KeyID() || len(h) != 3 {
			t.Fatalf("%s: protected header %s", alg, hdr)
		}
		payload, err := jcs.Transform([]byte(testCard))
		if err != nil {
			t.Fatal(err)
		}
		jws, err := jose.ParseDetached(entry["protected"]+".."+entry["signature"], payload, []jose.SignatureAlgorithm{jose.SignatureAlgorithm(alg)})
		if err != nil {
			t.Fatal(err)
		}
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(keys.JWKS(), &set); err != nil {
			t.Fatal(err)
		}
		if _, err := jws.Verify(set.Keys[0]); err != nil {
			t.Fatalf("%s: SignCard's signature does not verify independently: %v", alg, err)
		}
		// And this package's verifier, given the card with its signature
		// and the published keys, agrees.
		ck, err := ParseCardKeys(keys.JWKS())
		if err != nil {
			t.Fatal(err)
		}
		own, _ := NewCardVerifier(ctx, CardTrust{Keys: func() *CardKeys { return ck }, RequireSigned: true})
		if kid, err := own.VerifyCard(ctx, withSignatures(t, testCard, json.RawMessage(sig))); err != nil || kid != keys.KeyID() {
			t.Fatalf("%s: %q, %v", alg, kid, err)
		}
	}
}

// Each refusal says why, as its own error: a key not trusted, a card
// changed after it was signed, an algorithm not allowed (HMAC, none), a
// signature that is not a JWS, an unsigned card where one is required.
func TestCardRefusals(t *testing.T) {
	ctx := context.Background()
	ed, edPub := edKey(t, "trusted")
	stranger, _ := edKey(t, "stranger")
	strict, lax := pinned(t, true, edPub), pinned(t, false, edPub)
	good := independentSignature(t, testCard, ed, jose.EdDSA, "trusted", nil)

	tampered := strings.Replace(string(good), `"forecast"`, `"exfiltrate"`, 1)
	if tampered == string(good) {
		t.Fatal("the tampering changed nothing")
	}
	hmac := independentSignature(t, testCard, []byte("0123456789abcdef0123456789abcdef"), jose.HS256, "trusted", nil)
	none := withSignatures(t, testCard, map[string]any{
		"protected": base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"trusted"}`)), "signature": ""})
	// A member named twice: a reader taking the last would see what the
	// signer did not sign.
	twice := strings.Replace(string(good), `"name":`, `"name":"evil","name":`, 1)
	for _, c := range []struct {
		name   string
		card   []byte
		v      *CardVerifier
		reason error
	}{
		{"signed by a key not trusted", independentSignature(t, testCard, stranger, jose.EdDSA, "stranger", nil), lax, ErrCardUnknownKey},
		{"a stranger's key under the trusted kid", independentSignature(t, testCard, stranger, jose.EdDSA, "trusted", nil), lax, ErrCardBadSignature},
		{"changed after signing", []byte(tampered), lax, ErrCardBadSignature},
		{"a member added after signing", []byte(strings.Replace(string(good), `"version":`, `"iconUrl":"https://evil.example/i.png","version":`, 1)), lax, ErrCardBadSignature},
		{"HMAC", hmac, lax, ErrCardUnsupportedAlg},
		{"alg none", none, lax, ErrCardUnsupportedAlg},
		{"protected header not base64url", withSignatures(t, testCard, map[string]any{"protected": "%%%", "signature": "x"}), lax, ErrCardMalformed},
		{"signatures not an array of objects", withSignatures(t, testCard, "nope"), lax, ErrCardMalformed},
		{"a member named twice", []byte(twice), lax, ErrCardMalformed},
		{"unsigned, signatures required", []byte(testCard), strict, ErrCardUnsigned},
		{"an empty signatures array, signatures required", withSignatures(t, testCard), strict, ErrCardUnsigned},
	} {
		kid, err := c.v.VerifyCard(ctx, c.card)
		if !errors.Is(err, ErrCardRefused) || !errors.Is(err, c.reason) || kid != "" {
			t.Errorf("%s: %q, %v; want a refusal for %v", c.name, kid, err, c.reason)
		}
	}
	// Without RequireSigned an unsigned card passes (unchecked), and a
	// signed one must still verify.
	if kid, err := lax.VerifyCard(ctx, []byte(testCard)); err != nil || kid != "" {
		t.Fatalf("unsigned, not required: %q, %v", kid, err)
	}
	// One good signature among bad ones is enough; with none good, the
	// most telling reason (a changed card) is reported.
	var sigs []any
	for _, b := range [][]byte{independentSignature(t, testCard, stranger, jose.EdDSA, "stranger", nil), good} {
		var m struct{ Signatures []any }
		_ = json.Unmarshal(b, &m)
		sigs = append(sigs, m.Signatures...)
	}
	if kid, err := strict.VerifyCard(ctx, withSignatures(t, testCard, sigs...)); err != nil || kid != "trusted" {
		t.Fatalf("a good signature after a stranger's: %q, %v", kid, err)
	}
	changed := strings.Replace(string(withSignatures(t, testCard, sigs...)), `"forecast"`, `"exfiltrate"`, 1)
	if _, err := strict.VerifyCard(ctx, []byte(changed)); !errors.Is(err, ErrCardBadSignature) {
		t.Fatalf("a changed card with two signatures: %v", err)
	}
}

// A signature's jku (and x5u) is never followed: a card signed by an
// attacker's key, whose header points at the attacker's JWKS (served on
// loopback, and publishing that very key), is refused as signed by an
// untrusted key, and the attacker's server is never asked; the operator's
// JWKS URL is the only one fetched.
func TestCardJKUIsNeverFollowed(t *testing.T) {
	ctx := context.Background()
	attacker, attackerPub := edKey(t, "attacker")
	var attackerHits atomic.Int64
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		attackerHits.Add(1)
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{attackerPub}})
	}))
	defer evil.Close()
	_, trustedPub := edKey(t, "trusted")
	doc, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{trustedPub}})
	operator := newJWKSServer(t, doc)

	card := independentSignature(t, testCard, attacker, jose.EdDSA, "attacker", map[string]any{
		"jku": evil.URL + "/jwks.json", "x5u": evil.URL + "/cert.pem"})
	for name, v := range map[string]*CardVerifier{
		"pinned keys":        pinned(t, true, trustedPub),
		"the operator's URL": mustVerifier(t, CardTrust{JWKSURL: operator.URL + "/jwks.json", RequireSigned: true}),
	} {
		kid, err := v.VerifyCard(ctx, card)
		if !errors.Is(err, ErrCardUnknownKey) || kid != "" {
			t.Errorf("%s: %q, %v; want ErrCardUnknownKey", name, kid, err)
		}
		if err != nil && !strings.Contains(err.Error(), "never fetched") {
			t.Errorf("%s: the refusal does not say the jku was not followed: %v", name, err)
		}
	}
	if n := attackerHits.Load(); n != 0 {
		t.Fatalf("the attacker's JWKS was fetched %d times", n)
	}
	operator.mu.Lock()
	fetched := operator.hits
	operator.mu.Unlock()
	if fetched == 0 {
		t.Fatal("the operator's JWKS was never fetched")
	}
}

func mustVerifier(t *testing.T, trust CardTrust) *CardVerifier {
	t.Helper()
	v, err := NewCardVerifier(context.Background(), trust)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// With a trusted JWKS URL, a card signed by a key published after a
// rotation verifies: a kid not held fetches the set again (at most once a
// minute), as for access tokens. An unreachable JWKS is its own refusal,
// one a later check may get past.
func TestCardVerifierFollowsTheTrustedJWKSAcrossARotation(t *testing.T) {
	ctx := context.Background()
	file, _ := RotateSigningKeys(nil, "EdDSA", 2)
	keys, _ := ParseSigningKeys(file, "a2abus")
	srv := newJWKSServer(t, keys.JWKS())
	v := mustVerifier(t, CardTrust{JWKSURL: srv.URL + "/.well-known/jwks.json"})
	clock := newFakeClock()
	v.fetched.now = clock.Now
	signed := func(k *SigningKeys) []byte {
		sig, err := k.SignCard([]byte(testCard))
		if err != nil {
			t.Fatal(err)
		}
		return withSignatures(t, testCard, json.RawMessage(sig))
	}
	if kid, err := v.VerifyCard(ctx, signed(keys)); err != nil || kid != keys.KeyID() {
		t.Fatalf("before the rotation: %q, %v", kid, err)
	}
	rotated, _ := RotateSigningKeys(file, "ES256", 2)
	keys2, _ := ParseSigningKeys(rotated, "a2abus")
	srv.serve(keys2.JWKS())
	if _, err := v.VerifyCard(ctx, signed(keys2)); !errors.Is(err, ErrCardUnknownKey) {
		t.Fatalf("the new key within a minute of the last fetch: %v, want ErrCardUnknownKey", err)
	}
	clock.Advance(2 * time.Minute)
	if kid, err := v.VerifyCard(ctx, signed(keys2)); err != nil || kid != keys2.KeyID() {
		t.Fatalf("after the rotation: %q, %v", kid, err)
	}
	if kid, err := v.VerifyCard(ctx, signed(keys)); err != nil || kid != keys.KeyID() {
		t.Fatalf("the previous key, still published: %q, %v", kid, err)
	}

	down := mustVerifier(t, CardTrust{JWKSURL: "http://127.0.0.1:1/jwks.json"})
	if _, err := down.VerifyCard(ctx, signed(keys)); !errors.Is(err, ErrCardKeysUnavailable) {
		t.Fatalf("an unreachable JWKS: %v, want ErrCardKeysUnavailable", err)
	}
}

// A card signed over its form without empty values — what a2a-python
// signs, by §8.4.3's removal of default values — verifies as served with
// them; a card that differs by more than empty values does not.
func TestCardSignedWithoutItsEmptyValuesVerifies(t *testing.T) {
	ctx := context.Background()
	ed, edPub := edKey(t, "py")
	v := pinned(t, true, edPub)
	const served = `{"name":"py","description":"","version":"1","iconUrl":"",
	  "capabilities":{"streaming":false,"extensions":[]},"securitySchemes":{},
	  "defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],
	  "skills":[{"id":"s","name":"S","description":"d","tags":["t"],"examples":[]}]}`
	const signedForm = `{"name":"py","version":"1","capabilities":{"streaming":false},
	  "defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],
	  "skills":[{"id":"s","name":"S","description":"d","tags":["t"]}]}`
	sig := independentSignature(t, signedForm, ed, jose.EdDSA, "py", nil)
	var m struct{ Signatures []any }
	if err := json.Unmarshal(sig, &m); err != nil {
		t.Fatal(err)
	}
	if kid, err := v.VerifyCard(ctx, withSignatures(t, served, m.Signatures...)); err != nil || kid != "py" {
		t.Fatalf("served with its empty values: %q, %v", kid, err)
	}
	more := strings.Replace(served, `"iconUrl":""`, `"iconUrl":"https://evil.example/i.png"`, 1)
	if _, err := v.VerifyCard(ctx, withSignatures(t, more, m.Signatures...)); !errors.Is(err, ErrCardBadSignature) {
		t.Fatalf("a value added: %v, want ErrCardBadSignature", err)
	}
}

func TestCardTrustConfiguration(t *testing.T) {
	if _, err := NewCardVerifier(context.Background(), CardTrust{RequireSigned: true}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("no keys: %v, want ErrInvalidConfig", err)
	}
	if _, err := NewCardVerifier(context.Background(), CardTrust{JWKSURL: "http://keys.example/jwks.json"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("plain http beyond loopback: %v, want ErrInvalidConfig", err)
	}
	for name, doc := range map[string]string{
		"not JSON": `nope`,
		"no keys":  `{"keys":[]}`,
		"HMAC":     `{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"}]}`,
		"for encryption": `{"keys":[{"kty":"OKP","crv":"Ed25519","use":"enc","kid":"e",
			"x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`,
	} {
		if _, err := ParseCardKeys([]byte(doc)); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	// A signer's private key file is taken for its public halves.
	file, _ := RotateSigningKeys(nil, "EdDSA", 1)
	if _, err := ParseCardKeys(file); err != nil {
		t.Errorf("a private key file: %v", err)
	}
}

// The edge publishes its notification and card keys as one set; a key in
// both is listed once.
func TestMergeJWKS(t *testing.T) {
	a, _ := RotateSigningKeys(nil, "EdDSA", 1)
	ab, _ := RotateSigningKeys(a, "ES256", 2)
	ka, _ := ParseSigningKeys(a, "i")
	kab, _ := ParseSigningKeys(ab, "i")
	doc, err := MergeJWKS(kab.JWKS(), ka.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(doc, &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 2 || set.Keys[0].KeyID != kab.KeyID() || set.Keys[1].KeyID != ka.KeyID() {
		t.Fatalf("merged: %s", doc)
	}
}

// BenchmarkSignCard: what an edge pays for a card content it has not
// signed before (then it is a map lookup).
//
//	go test ./edge/auth -run '^$' -bench SignCard
func BenchmarkSignCard(b *testing.B) {
	file, _ := RotateSigningKeys(nil, "EdDSA", 1)
	keys, _ := ParseSigningKeys(file, "a2abus")
	for b.Loop() {
		if _, err := keys.SignCard([]byte(testCard)); err != nil {
			b.Fatal(err)
		}
	}
}
