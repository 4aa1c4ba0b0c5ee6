package edge

import (
	"fmt"
	"testing"

	"github.com/a2abus/a2abus/edge/auth"

	"github.com/a2abus/a2abus/schemas"
)

// A served card fills in what a registration leaves out (here a skill's
// tags) on a copy: every request shares the registry's cached
// registration, so writing to it races with the other readers.
func TestServedCardLeavesTheRegistrationAlone(t *testing.T) {
	s := fuzzServer()
	reg := schemas.AgentRegistration{Agent: "untagged", Card: schemas.AgentCard{
		Skills: []schemas.AgentSkill{{ID: "echo", Name: "Echo", Description: "no tags given"}},
	}}
	c := s.card(reg)
	if got := c.Skills[0].Tags; len(got) != 1 || got[0] != "untagged" {
		t.Fatalf("served skill tags = %v, want [untagged]", got)
	}
	if reg.Card.Skills[0].Tags != nil {
		t.Fatalf("serving the card wrote %v into the shared registration", reg.Card.Skills[0].Tags)
	}
}

// The date a signed card is modified by moves with the keys: a rotation
// re-signs every card, so a client revalidating by date must not keep the
// old signature; refilling the cache under the same keys moves nothing.
func TestCardKeysDateTheirSignatures(t *testing.T) {
	keys := func() *auth.SigningKeys {
		file, err := auth.RotateSigningKeys(nil, "EdDSA", 1)
		if err != nil {
			t.Fatal(err)
		}
		k, err := auth.ParseSigningKeys(file, "a2abus")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	var c cardSignatures
	if !c.keysSince().IsZero() {
		t.Fatal("a date before any signature")
	}
	k1 := keys()
	if _, err := c.sign(k1, []byte(`{"name":"a"}`)); err != nil {
		t.Fatal(err)
	}
	first := c.keysSince()
	if first.IsZero() {
		t.Fatal("no date for the first keys")
	}
	for i := range maxCachedCardSignatures + 1 { // past the cache's bound: emptied, same keys
		if _, err := c.sign(k1, []byte(fmt.Sprintf(`{"name":"%d"}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	if !c.keysSince().Equal(first) {
		t.Fatalf("the date moved under the same keys: %v, then %v", first, c.keysSince())
	}
	if _, err := c.sign(keys(), []byte(`{"name":"a"}`)); err != nil {
		t.Fatal(err)
	}
	if !c.keysSince().After(first) {
		t.Fatalf("new keys kept the old date %v", c.keysSince())
	}
}
