package edge

import (
	"testing"

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
