package edge

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/a2abus/a2abus/schemas"
)

// Methods of the gateways a2abus stands in for, beside A2A's own. LiteLLM-RS
// names a `ping` health method and an `agent_capabilities` query on its
// A2A JSON-RPC endpoint (../shared/seeds/003…, A2AMethod::Ping and
// ::AgentCapabilities); a2abus answers both on every agent's endpoint, in
// either version's grammar. Aleph (seed 004) asks GET {endpoint}/capabilities
// for the same list, which the route table serves (handleCapabilities).

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

// capabilitiesResult answers agent_capabilities from the card the agent
// is served with: a capability per skill (schemas.CardCapabilities, the
// entries GET /capabilities answers too), and what the endpoint offers.
type capabilitiesResult struct {
	Agent             string               `json:"agent"`
	Capabilities      []schemas.Capability `json:"capabilities"`
	Streaming         bool                 `json:"streaming"`
	PushNotifications bool                 `json:"pushNotifications"`
}

func (s *Server) rpcAgentCapabilities(_ context.Context, c *call) (any, error) {
	reg, ok := s.agents.Get(c.agent)
	if !ok {
		return nil, schemas.Errorf(schemas.ErrMethodNotFound, "no agent %q is served here", c.agent)
	}
	card := s.card(reg)
	out := capabilitiesResult{Agent: c.agent, Capabilities: schemas.CardCapabilities(&card)}
	if card.Capabilities.Streaming != nil {
		out.Streaming = *card.Capabilities.Streaming
	}
	if card.Capabilities.PushNotifications != nil {
		out.PushNotifications = *card.Capabilities.PushNotifications
	}
	return out, nil
}

// handleCapabilities answers Aleph's capability discovery (seed 004: GET
// {endpoint}/capabilities, decoded as a list of Capability): the served
// card's skills as capabilities, a JSON array. The card is public, so is
// what is derived from it, and it is cached as the card is.
func (s *Server) handleCapabilities(w http.ResponseWriter, r *http.Request) {
	reg, ok := s.servedRegistration(w, r)
	if !ok {
		return
	}
	card := s.card(reg)
	b, err := json.Marshal(schemas.CardCapabilities(&card))
	if err != nil {
		http.Error(w, "encoding the capabilities failed", http.StatusInternalServerError)
		return
	}
	s.writeETagged(w, r, b, s.publicCacheControl(), s.cardModified(reg))
}
