package auth

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/gowebpki/jcs"
)

// Signed agent cards (A2A 1.0 §8.4). A card's signature is a JWS with a
// detached payload: the card's RFC 8785 (JCS) form without its
// "signatures" member. The card's signatures array holds each as
// {"protected": <base64url protected header>, "signature": <base64url>}
// (AgentCardSignature); the protected header names alg, kid and typ
// "JOSE". The signer is the SigningKeys of a deployment (SignCard); the
// verifier (CardVerifier) checks a card received as served, against keys
// its operator trusts — pinned, or a JWKS at a URL the operator chose —
// and never against a key a signature points to: a "jku", "x5u", "jwk" or
// "x5c" header is not followed (A2A#2099: a jku naming an attacker's key
// set must not make the attacker's card verify).
//
// What is signed is the card as served, every member of it: an a2abus
// card is a union of the 1.0 and 0.3 shapes (schemas.UnionCard), and one
// signature covers both. RFC 8785 is gowebpki/jcs's (number and string
// serialisation are not hand-rolled), which also refuses a card with a
// member named twice, so no reader can see a value the signer did not
// sign.

// Errors of VerifyCard. Every refusal wraps ErrCardRefused and one of the
// others, which says why.
var (
	ErrCardRefused = errors.New("agent card refused")
	// ErrCardUnsigned: the card carries no signature, and the policy
	// requires one.
	ErrCardUnsigned = errors.New("the card is not signed")
	// ErrCardUnknownKey: no key the verifier trusts has the signature's
	// kid (or fits its alg).
	ErrCardUnknownKey = errors.New("signed by a key that is not trusted")
	// ErrCardBadSignature: a trusted key has the signature's kid, and the
	// signature does not verify over this card: the card was changed
	// after it was signed, or the signature is forged.
	ErrCardBadSignature = errors.New("the signature does not match the card")
	// ErrCardUnsupportedAlg: the signature's alg is not an asymmetric
	// algorithm a2abus verifies (HMAC and "none" never are).
	ErrCardUnsupportedAlg = errors.New("unsupported signature algorithm")
	// ErrCardMalformed: the card or a signature is not well-formed (not
	// JSON, a member named twice, a header that is not base64url JSON).
	ErrCardMalformed = errors.New("malformed card or signature")
	// ErrCardKeysUnavailable: the trusted JWKS could not be fetched; a
	// later check may succeed.
	ErrCardKeysUnavailable = errors.New("the trusted keys could not be fetched")
)

// cardAlgorithms are the algorithms a card signature may use: the
// asymmetric ones, as for access tokens.
var cardAlgorithms = supportedAlgorithms

// maxCardSignatures bounds the signatures of one card a verifier reads.
const maxCardSignatures = 16

// cardSignature is one entry of a card's signatures array
// (AgentCardSignature). Its unprotected header is not read: nothing in it
// is signed.
type cardSignature struct {
	Protected string `json:"protected"`
	Signature string `json:"signature"`
}

// CardPayload returns what a card's signatures sign: the RFC 8785
// canonical form of card (JSON) without its top-level "signatures"
// member. It fails for JSON that is not an object, is not valid UTF-8 or
// names a member twice.
func CardPayload(card []byte) ([]byte, error) {
	canon, err := jcs.Transform(card)
	if err != nil {
		return nil, fmt.Errorf("the card has no canonical JSON form: %v", err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(canon, &members); err != nil || members == nil {
		return nil, errors.New("the card is not a JSON object")
	}
	if _, ok := members["signatures"]; !ok {
		return canon, nil
	}
	delete(members, "signatures")
	b, err := json.Marshal(members)
	if err != nil {
		return nil, err
	}
	// Marshal sorts keys by bytes and escapes HTML; canonicalise again.
	return jcs.Transform(b)
}

// withoutEmpty is payload (canonical JSON) with every null, empty string,
// empty array and empty object removed, recursively (a member or element
// that becomes empty goes too), canonical again; ok is false when nothing
// was removed. §8.4.3 has a verifier remove a card's default values
// before canonicalising; the proto schema would say which, and without it
// empty values are what can be removed. The reference SDK (a2a-python)
// signs that form, so its cards verify with it. Accepting it admits no
// changed card: what it drops, the A2A data model reads as absent.
func withoutEmpty(payload []byte) (_ []byte, ok bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false, err
	}
	pruned, changed := prune(v)
	if !changed {
		return nil, false, nil
	}
	if pruned == nil {
		pruned = map[string]any{}
	}
	b, err := json.Marshal(pruned)
	if err != nil {
		return nil, false, err
	}
	out, err := jcs.Transform(b)
	return out, err == nil, err
}

// prune removes empty values from v (see withoutEmpty); it returns nil
// when v itself is empty, and whether anything was removed.
func prune(v any) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		changed := false
		for k, e := range x {
			p, c := prune(e)
			changed = changed || c
			if p == nil {
				delete(x, k)
				changed = true
			} else {
				x[k] = p
			}
		}
		if len(x) == 0 {
			return nil, true
		}
		return x, changed
	case []any:
		out := x[:0]
		changed := false
		for _, e := range x {
			p, c := prune(e)
			changed = changed || c
			if p == nil {
				changed = true
				continue
			}
			out = append(out, p)
		}
		if len(out) == 0 {
			return nil, true
		}
		return out, changed
	case string:
		if x == "" {
			return nil, true
		}
	case nil:
		return nil, true
	}
	return v, false
}

// SignCard returns the signature of an agent card (its JSON; a
// signatures member in it is not signed) by the first key, as an entry of
// the card's signatures array: {"protected": ..., "signature": ...}, the
// protected header naming alg, kid and typ "JOSE".
func (k *SigningKeys) SignCard(card []byte) (json.RawMessage, error) {
	payload, err := CardPayload(card)
	if err != nil {
		return nil, err
	}
	obj, err := k.cardSigner.Sign(payload)
	if err != nil {
		return nil, fmt.Errorf("signing the card: %w", err)
	}
	compact, err := obj.DetachedCompactSerialize()
	if err != nil {
		return nil, fmt.Errorf("signing the card: %w", err)
	}
	protected, rest, _ := strings.Cut(compact, ".")
	return json.Marshal(cardSignature{Protected: protected, Signature: strings.TrimPrefix(rest, ".")})
}

// KeyID is the kid of the key that signs.
func (k *SigningKeys) KeyID() string { return k.kid }

// CardKeys are public keys an operator trusts to sign agent cards,
// pinned: immutable (a changed file makes new ones).
type CardKeys struct {
	keys []verifyKey
}

// ParseCardKeys reads a JWK set of keys trusted to sign agent cards:
// public keys, or private ones (a signer's own key file), whose public
// halves are kept. Every key must be an asymmetric signature key (RSA of
// 2048 bits or more, EC, Ed25519); one that is not is refused, so a
// mistyped file does not quietly trust less than it says.
func ParseCardKeys(data []byte) (*CardKeys, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("%w: card keys: not a JWK set: %v", ErrInvalidConfig, err)
	}
	if len(set.Keys) == 0 || len(set.Keys) > maxKeys {
		return nil, fmt.Errorf("%w: card keys: %d keys; 1 to %d expected", ErrInvalidConfig, len(set.Keys), maxKeys)
	}
	ck := &CardKeys{}
	for i, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("%w: card key %d: %v", ErrInvalidConfig, i, err)
		}
		vk, ok := usable(k)
		if !ok {
			return nil, fmt.Errorf("%w: card key %d (%q): not an asymmetric signature key (RSA of %d bits or more, EC or Ed25519, use \"sig\")", ErrInvalidConfig, i, k.KeyID, minRSABits)
		}
		ck.keys = append(ck.keys, vk)
	}
	return ck, nil
}

func (ck *CardKeys) match(kid, alg string) []any {
	if ck == nil {
		return nil
	}
	return matchKeys(ck.keys, kid, alg)
}

// CardTrust is what a CardVerifier trusts and requires.
type CardTrust struct {
	// Keys returns the pinned keys (nil: none). A function, so a reloaded
	// file takes effect at once.
	Keys func() *CardKeys
	// JWKSURL is a JWK set of trusted keys (https, or http on a loopback
	// host), fetched on first need and again, at most once a minute, when
	// a signature names a key it does not hold (a rotation).
	JWKSURL string
	// Client fetches JWKSURL: the caller's outbound guard (nil: a client
	// with DefaultFetchTimeout). A redirect is followed only to https, or
	// http on a loopback host, whatever its own rule.
	Client *http.Client
	// RequireSigned refuses a card without signatures. Without it an
	// unsigned card is accepted and a signed one must verify: only
	// RequireSigned stops one who can change a card from removing its
	// signatures.
	RequireSigned bool
}

// CardVerifier checks the signatures of agent cards against the keys of a
// CardTrust. Safe for concurrent use.
type CardVerifier struct {
	pinned  func() *CardKeys
	fetched *keySet // nil without a JWKS URL
	require bool
}

// NewCardVerifier returns the verifier of t, which must name keys (Keys,
// JWKSURL or both). ctx bounds the fetches of JWKSURL.
func NewCardVerifier(ctx context.Context, t CardTrust) (*CardVerifier, error) {
	if t.Keys == nil && t.JWKSURL == "" {
		return nil, fmt.Errorf("%w: card signatures: no trusted keys (pinned keys or a JWKS URL)", ErrInvalidConfig)
	}
	v := &CardVerifier{pinned: t.Keys, require: t.RequireSigned}
	if t.JWKSURL != "" {
		if err := checkFetchURL(t.JWKSURL); err != nil {
			return nil, fmt.Errorf("%w: card signatures: JWKS URL: %v", ErrInvalidConfig, err)
		}
		client := t.Client
		if client == nil {
			client = &http.Client{Timeout: DefaultFetchTimeout}
		}
		v.fetched = &keySet{ctx: ctx, client: keyFetchClient(client), jwksURL: t.JWKSURL, minInterval: time.Minute, now: time.Now}
	}
	return v, nil
}

// refusal is why one signature did not verify; rank orders the reasons by
// how much they tell (a trusted key that does not verify says the card was
// changed, which matters more than a key not trusted).
type refusal struct {
	kind   error
	detail string
}

func (r refusal) rank() int {
	switch r.kind {
	case ErrCardBadSignature:
		return 4
	case ErrCardKeysUnavailable:
		return 3
	case ErrCardUnknownKey:
		return 2
	case ErrCardUnsupportedAlg:
		return 1
	}
	return 0
}

// VerifyCard checks the signatures of card, the JSON as the agent served
// it. It returns the kid of the trusted key whose signature verifies (at
// least one must, of those the card carries), or "" for an unsigned card
// when signatures are not required. Its error wraps ErrCardRefused and
// ErrCardUnsigned, ErrCardUnknownKey, ErrCardBadSignature,
// ErrCardUnsupportedAlg, ErrCardMalformed or ErrCardKeysUnavailable; its
// text names the signature's kid and alg, never a key.
func (v *CardVerifier) VerifyCard(ctx context.Context, card []byte) (string, error) {
	refuse := func(kind error, format string, args ...any) (string, error) {
		return "", fmt.Errorf("%w: %w: %s", ErrCardRefused, kind, fmt.Sprintf(format, args...))
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(card, &top); err != nil || top == nil {
		return refuse(ErrCardMalformed, "the card is not a JSON object")
	}
	var sigs []cardSignature
	if raw, ok := top["signatures"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &sigs); err != nil {
			return refuse(ErrCardMalformed, "signatures is not an array of {protected, signature} objects")
		}
	}
	switch {
	case len(sigs) == 0 && v.require:
		return refuse(ErrCardUnsigned, "this client requires signed cards, and the card has no signatures")
	case len(sigs) == 0:
		return "", nil
	case len(sigs) > maxCardSignatures:
		return refuse(ErrCardMalformed, "%d signatures; at most %d are read", len(sigs), maxCardSignatures)
	}
	payload, err := CardPayload(card)
	if err != nil {
		return refuse(ErrCardMalformed, "%v", err)
	}
	payloads := [][]byte{payload}
	if alt, ok, err := withoutEmpty(payload); err == nil && ok {
		payloads = append(payloads, alt)
	}
	var worst refusal
	for i, s := range sigs {
		kid, r := v.verifyOne(ctx, s, payloads)
		if r.kind == nil {
			return kid, nil
		}
		if len(sigs) > 1 {
			r.detail = fmt.Sprintf("signature %d of %d: %s", i+1, len(sigs), r.detail)
		}
		if worst.kind == nil || r.rank() > worst.rank() {
			worst = r
		}
	}
	return refuse(worst.kind, "%s", worst.detail)
}

// protectedHeader is what VerifyCard reads of a protected header before
// go-jose checks the signature: to choose keys and word refusals.
type protectedHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	JKU string `json:"jku"`
	X5U string `json:"x5u"`
}

// verifyOne checks one signature over each payload with every trusted key
// that may have made it.
func (v *CardVerifier) verifyOne(ctx context.Context, s cardSignature, payloads [][]byte) (string, refusal) {
	raw, err := base64.RawURLEncoding.DecodeString(s.Protected)
	var h protectedHeader
	if err != nil || json.Unmarshal(raw, &h) != nil {
		return "", refusal{ErrCardMalformed, "the protected header is not base64url-encoded JSON"}
	}
	if !slices.Contains(cardAlgorithms, jose.SignatureAlgorithm(h.Alg)) {
		return "", refusal{ErrCardUnsupportedAlg, fmt.Sprintf("alg %q (kid %q); a card must be signed with RS*, PS*, ES* or EdDSA", h.Alg, h.Kid)}
	}
	keys, r := v.keysFor(ctx, h)
	if r.kind != nil {
		return "", r
	}
	compact := s.Protected + ".." + s.Signature
	for _, p := range payloads {
		jws, err := jose.ParseDetached(compact, p, cardAlgorithms)
		if err != nil {
			return "", refusal{ErrCardMalformed, fmt.Sprintf("kid %q (%s): not a JWS: %v", h.Kid, h.Alg, err)}
		}
		for _, k := range keys {
			if _, err := jws.Verify(k); err == nil {
				return h.Kid, refusal{}
			}
		}
	}
	return "", refusal{ErrCardBadSignature, fmt.Sprintf("kid %q (%s) is trusted, and its signature does not verify over this card: the card was changed after it was signed, or the signature is forged", h.Kid, h.Alg)}
}

// keysFor returns the trusted keys that may have made a signature with
// header h: the pinned ones with its kid that fit its alg, else those of
// the trusted JWKS (fetched again, rate-limited, when it holds none).
func (v *CardVerifier) keysFor(ctx context.Context, h protectedHeader) ([]any, refusal) {
	var pinned *CardKeys
	if v.pinned != nil {
		pinned = v.pinned()
	}
	if keys := pinned.match(h.Kid, h.Alg); len(keys) > 0 {
		return keys, refusal{}
	}
	if v.fetched != nil {
		keys, err := v.fetched.find(ctx, h.Kid, h.Alg)
		if err == nil {
			return keys, refusal{}
		}
		if errors.Is(err, ErrUnavailable) {
			return nil, refusal{ErrCardKeysUnavailable, fmt.Sprintf("kid %q (%s): %v", h.Kid, h.Alg, err)}
		}
	}
	detail := fmt.Sprintf("kid %q (%s) is not a key this client trusts", h.Kid, h.Alg)
	if cmp.Or(h.JKU, h.X5U) != "" {
		// Said so the operator sees why a key the card points to was
		// not fetched.
		detail += "; the keys a signature points to (jku, x5u) are never fetched: trusted keys are configured"
	}
	return nil, refusal{ErrCardUnknownKey, detail}
}

// MergeJWKS returns one JWK set document of the keys of docs (JWK set
// documents), the first of each kid kept: what an edge publishes when its
// notification keys and card keys are different files.
func MergeJWKS(docs ...[]byte) ([]byte, error) {
	var out struct {
		Keys []json.RawMessage `json:"keys"`
	}
	out.Keys = []json.RawMessage{}
	seen := map[string]bool{}
	for _, d := range docs {
		var set struct {
			Keys []json.RawMessage `json:"keys"`
		}
		if err := json.Unmarshal(d, &set); err != nil {
			return nil, err
		}
		for _, k := range set.Keys {
			var id struct {
				Kid string `json:"kid"`
			}
			_ = json.Unmarshal(k, &id)
			if seen[id.Kid] {
				continue
			}
			seen[id.Kid] = true
			out.Keys = append(out.Keys, k)
		}
	}
	return json.Marshal(out)
}
