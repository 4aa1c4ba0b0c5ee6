package edge

import (
	"context"

	"github.com/a2abus/a2abus/schemas"
)

// Methods of the gateways a2abus stands in for, beside A2A's own. LiteLLM-RS
// names a `ping` health method and an `agent_capabilities` query on its
// A2A JSON-RPC endpoint (../shared/seeds/003…, A2AMethod::Ping and
// ::AgentCapabilities); a2abus answers both on every agent's endpoint, in
// either version's grammar.

func (s *Server) gatewayMethods(m map[string]methodFunc) {
	m["ping"] = s.rpcPing
	m["agent_capabilities"] = s.rpcAgentCapabilities
}

// pingResult is the answer to ping: the agent's health as LiteLLM-RS's
// AgentStatus names it. An agent is served only while it is registered and
// live, so an answer is always "online"; an agent gone from the registry
// gets the endpoint's not-found error instead.
type pingResult struct {
	Status string `json:"status"`
}

func (s *Server) rpcPing(context.Context, *call) (any, error) {
	return pingResult{Status: "online"}, nil
}

// capability is one entry of agent_capabilities: LiteLLM-RS's Capability
// (name, description), made from one skill of the agent's card.
type capability struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags,omitempty"`
	Examples    []string `json:"examples,omitempty"`
}

// capabilitiesResult answers agent_capabilities from the card the agent
// is served with: a capability per skill, and what the endpoint offers.
type capabilitiesResult struct {
	Agent             string       `json:"agent"`
	Capabilities      []capability `json:"capabilities"`
	Streaming         bool         `json:"streaming"`
	PushNotifications bool         `json:"pushNotifications"`
}

func (s *Server) rpcAgentCapabilities(_ context.Context, c *call) (any, error) {
	reg, ok := s.agents.Get(c.agent)
	if !ok {
		return nil, schemas.Errorf(schemas.ErrMethodNotFound, "no agent %q is served here", c.agent)
	}
	card := s.card(reg)
	out := capabilitiesResult{Agent: c.agent, Capabilities: make([]capability, 0, len(card.Skills))}
	for _, sk := range card.Skills {
		out.Capabilities = append(out.Capabilities, capability{Name: sk.ID, Description: sk.Description, Tags: sk.Tags, Examples: sk.Examples})
	}
	if card.Capabilities.Streaming != nil {
		out.Streaming = *card.Capabilities.Streaming
	}
	if card.Capabilities.PushNotifications != nil {
		out.PushNotifications = *card.Capabilities.PushNotifications
	}
	return out, nil
}
