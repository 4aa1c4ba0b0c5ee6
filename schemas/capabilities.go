package schemas

// Capabilities: an agent's skills in the shape gateways outside A2A ask
// for. LiteLLM-RS's agent_capabilities JSON-RPC method (seed 003,
// Capability) and Aleph's GET {endpoint}/capabilities (seed 004,
// Vec<Capability>) both read a list of entries named by `name`; a2abus
// serves both from one derivation of the card (CardCapabilities) and, as a
// client, reads the second back into skills (CapabilitySkills).

// Capability is one thing an agent offers: a skill of its card, with the
// skill's id as its name.
type Capability struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags,omitempty"`
	Examples    []string `json:"examples,omitempty"`
}

// CardCapabilities is a capability per skill of c, in the card's order;
// never nil, so it encodes as an array.
func CardCapabilities(c *AgentCard) []Capability {
	out := make([]Capability, 0, len(c.Skills))
	for _, sk := range c.Skills {
		out = append(out, Capability{Name: sk.ID, Description: sk.Description, Tags: sk.Tags, Examples: sk.Examples})
	}
	return out
}

// CapabilitySkills is a skill per capability, the capability's name as
// the skill's id and name: what a client shows of an agent whose card
// declares no skills but which answers its capabilities.
func CapabilitySkills(caps []Capability) []AgentSkill {
	out := make([]AgentSkill, 0, len(caps))
	for _, c := range caps {
		tags := c.Tags
		if tags == nil {
			tags = []string{} // a skill's tags are required
		}
		out = append(out, AgentSkill{ID: c.Name, Name: c.Name, Description: c.Description, Tags: tags, Examples: c.Examples})
	}
	return out
}
