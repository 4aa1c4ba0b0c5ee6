package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// cardKeys makes a key file of one key of alg and its keys.
func cardKeys(t *testing.T, alg string) *auth.SigningKeys {
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

// trusting is a verifier that requires signatures and trusts keys' public
// half only.
func trusting(t *testing.T, keys *auth.SigningKeys) *auth.CardVerifier {
	t.Helper()
	ck, err := auth.ParseCardKeys(keys.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewCardVerifier(context.Background(), auth.CardTrust{Keys: func() *auth.CardKeys { return ck }, RequireSigned: true})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// signaturesOf are the signatures array of a card's JSON.
func signaturesOf(t *testing.T, card []byte) []json.RawMessage {
	t.Helper()
	var c struct {
		Signatures []json.RawMessage `json:"signatures"`
	}
	if err := json.Unmarshal(card, &c); err != nil {
		t.Fatalf("not a card: %s", card)
	}
	return c.Signatures
}

// Every card the edge serves is signed with Config.CardKeys, and verifies
// with the public key alone: the public card at both well-known paths,
// each agent's, and the extended card in every binding and version. What
// a worker registered in signatures is not served. A card is signed once
// per content and key (ES256 signatures are randomised, so a signature
// served twice was made once), a rotation signs with the new key at once,
// and the JWKS publishes the card keys beside the notification keys.
func TestServedCardsAreSigned(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{{Key: aliceKey, Principal: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	keys, pushKeys := cardKeys(t, "ES256"), cardKeys(t, "EdDSA")
	var cur atomic.Pointer[auth.SigningKeys]
	cur.Store(keys)
	// A worker that registers a signature of its own: the edge's card is
	// not the one it signed.
	forged := workers.EchoDefinition("forged")
	forged.Card.Signatures = []json.RawMessage{json.RawMessage(`{"protected":"eyJhbGciOiJFUzI1NiJ9","signature":"AAAA"}`)}
	secret := schemas.AgentSkill{ID: "internal", Name: "Internal", Description: "for callers we know", Tags: []string{"internal"}}
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo"), forged},
		edge: edge.Config{Auth: a, ExtendedSkills: map[string][]schemas.AgentSkill{"echo": {secret}},
			CardKeys: cur.Load, NotificationKeys: func() []byte { return pushKeys.JWKS() }, DefaultAgent: "echo"}})

	// cards fetches every form of the cards: name → the card's JSON.
	cards := func() map[string][]byte {
		out := map[string][]byte{}
		for name, path := range map[string]string{
			"well-known": "/.well-known/agent-card.json", "older path": "/.well-known/agent.json",
			"per agent": "/agents/echo/.well-known/agent-card.json", "forged": "/agents/forged/.well-known/agent-card.json",
		} {
			status, _, b := as(t, "", "GET", h.url+path, "", "")
			if status != http.StatusOK {
				t.Fatalf("%s: %d %s", name, status, b)
			}
			out[name] = b
		}
		for name, req := range map[string][4]string{
			"extended 1.0 JSON-RPC": {"POST", "/agents/echo", "application/json", rpcBody(1, "GetExtendedAgentCard", map[string]any{})},
			"extended 0.3 JSON-RPC": {"POST", "/agents/echo", "application/json", rpcBody(1, "agent/getAuthenticatedExtendedCard", nil)},
		} {
			var reply struct {
				Result json.RawMessage `json:"result"`
			}
			status, _, b := as(t, aliceKey, req[0], h.url+req[1], req[2], req[3])
			if status != http.StatusOK || json.Unmarshal(b, &reply) != nil || reply.Result == nil {
				t.Fatalf("%s: %d %s", name, status, b)
			}
			out[name] = reply.Result
		}
		status, _, b := as(t, aliceKey, "GET", h.url+"/agents/echo/extendedAgentCard", "", "")
		if status != http.StatusOK {
			t.Fatalf("extended HTTP+JSON: %d %s", status, b)
		}
		out["extended HTTP+JSON"] = b
		return out
	}

	ctx := context.Background()
	v := trusting(t, keys)
	first := cards()
	for name, card := range first {
		if n := len(signaturesOf(t, card)); n != 1 {
			t.Errorf("%s: %d signatures, want the edge's one: %s", name, n, card)
		}
		if kid, err := v.VerifyCard(ctx, card); err != nil || kid != keys.KeyID() {
			t.Errorf("%s: %q, %v", name, kid, err)
		}
	}
	if !bytes.Contains(first["extended 1.0 JSON-RPC"], []byte(`"id":"internal"`)) {
		t.Fatalf("the extended card lacks its skill: %s", first["extended 1.0 JSON-RPC"])
	}
	// Tampering with a served card is seen.
	changed := bytes.Replace(first["per agent"], []byte(`"echo"`), []byte(`"evil"`), 1)
	if _, err := v.VerifyCard(ctx, changed); !errors.Is(err, auth.ErrCardBadSignature) {
		t.Fatalf("a changed card: %v", err)
	}

	// Signed once: the same signature again.
	again := cards()
	for name, card := range first {
		if !bytes.Equal(signaturesOf(t, card)[0], signaturesOf(t, again[name])[0]) {
			t.Errorf("%s was signed anew for the same content and key", name)
		}
	}

	// The JWKS publishes both sets.
	_, _, doc := as(t, "", "GET", h.url+"/.well-known/jwks.json", "", "")
	for _, kid := range []string{keys.KeyID(), pushKeys.KeyID()} {
		if !bytes.Contains(doc, []byte(`"kid":"`+kid+`"`)) {
			t.Errorf("the JWKS lacks %s: %s", kid, doc)
		}
	}

	// A rotation: the new key signs from the next request.
	rotated := cardKeys(t, "EdDSA")
	cur.Store(rotated)
	v2 := trusting(t, rotated)
	for name, card := range cards() {
		if kid, err := v2.VerifyCard(ctx, card); err != nil || kid != rotated.KeyID() {
			t.Errorf("%s after the rotation: %q, %v", name, kid, err)
		}
	}
	_, _, doc = as(t, "", "GET", h.url+"/.well-known/jwks.json", "", "")
	if !bytes.Contains(doc, []byte(`"kid":"`+rotated.KeyID()+`"`)) {
		t.Errorf("the JWKS lacks the rotated key: %s", doc)
	}

	// The registry lists cards with fields of its own beside them: not
	// cards a signature could cover, so none is shown.
	if _, _, list := as(t, "", "GET", h.url+"/a2a/agents", "", ""); bytes.Contains(list, []byte(`"signatures"`)) {
		t.Errorf("the agent list shows signatures: %s", list)
	}

	// Without keys, no signature.
	cur.Store(nil)
	if _, _, card := as(t, "", "GET", h.url+"/agents/forged/.well-known/agent-card.json", "", ""); len(signaturesOf(t, card)) != 0 {
		t.Errorf("a card served without keys carries signatures: %s", card)
	}
}
