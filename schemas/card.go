package schemas

import "encoding/json"

// Protocol bindings named in AgentInterface.protocolBinding.
const (
	BindingJSONRPC  = "JSONRPC"
	BindingHTTPJSON = "HTTP+JSON"
	BindingGRPC     = "GRPC"
)

// ProtocolVersion is the A2A version a2abus speaks natively.
const ProtocolVersion = "1.0"

// AgentCard describes an agent (proto message AgentCard).
type AgentCard struct {
	Name                 string                     `json:"name"`
	Description          string                     `json:"description"`
	SupportedInterfaces  []AgentInterface           `json:"supportedInterfaces"`
	Provider             *AgentProvider             `json:"provider,omitempty"`
	Version              string                     `json:"version"`
	DocumentationURL     string                     `json:"documentationUrl,omitempty"`
	Capabilities         AgentCapabilities          `json:"capabilities"`
	SecuritySchemes      map[string]json.RawMessage `json:"securitySchemes,omitempty"`
	SecurityRequirements []json.RawMessage          `json:"securityRequirements,omitempty"`
	DefaultInputModes    []string                   `json:"defaultInputModes"`
	DefaultOutputModes   []string                   `json:"defaultOutputModes"`
	Skills               []AgentSkill               `json:"skills"`
	Signatures           []json.RawMessage          `json:"signatures,omitempty"`
	IconURL              string                     `json:"iconUrl,omitempty"`

	// The A2A 0.3 fields of a union card, so 0.3 tools can read the same
	// card (1.0 readers ignore them). See UnionCard.
	URL                               string              `json:"url,omitempty"`
	PreferredTransport                string              `json:"preferredTransport,omitempty"`
	ProtocolVersion                   string              `json:"protocolVersion,omitempty"`
	AdditionalInterfaces              []V03AgentInterface `json:"additionalInterfaces,omitempty"`
	SupportsAuthenticatedExtendedCard *bool               `json:"supportsAuthenticatedExtendedCard,omitempty"`
	// Security is 0.3's list of security requirements (1.0 names it
	// securityRequirements; the two share securitySchemes, whose values a
	// union card gives in both shapes side by side).
	Security []json.RawMessage `json:"security,omitempty"`
	// Authentication is the older tasks/send dialect's declaration of the
	// schemes it takes (AgentOS cards: {"schemes": ["bearer"]}).
	Authentication *LegacyAuthentication `json:"authentication,omitempty"`
}

// LegacyAuthentication is the authentication member of an older dialect's
// card: the names of the schemes a caller may use ("bearer", "apiKey").
type LegacyAuthentication struct {
	Schemes []string `json:"schemes"`
}

// V03AgentInterface is an A2A 0.3 additional interface: a URL and transport.
type V03AgentInterface struct {
	URL       string `json:"url"`
	Transport string `json:"transport"`
}

// ProtocolVersion03 is the A2A version of the older JSON-RPC dialect
// a2abus also serves, as 0.3 cards spell it.
const ProtocolVersion03 = "0.3"

// UnionCard fills the 0.3 fields of a card from its supportedInterfaces:
// url and preferredTransport from the first 0.3 interface (or the first
// interface), additionalInterfaces from the 0.3 interfaces only (a 0.3
// client would speak 0.3 to any transport listed there), protocolVersion
// "0.3.0". A card served this way is read by 1.0 and 0.3 clients alike.
func UnionCard(c AgentCard) AgentCard {
	if len(c.SupportedInterfaces) == 0 {
		return c
	}
	main := c.SupportedInterfaces[0]
	for _, in := range c.SupportedInterfaces {
		if in.ProtocolVersion == ProtocolVersion03 {
			main = in
			break
		}
	}
	c.URL, c.PreferredTransport, c.ProtocolVersion = main.URL, main.ProtocolBinding, "0.3.0"
	c.AdditionalInterfaces = nil
	seen := map[V03AgentInterface]bool{}
	for _, in := range c.SupportedInterfaces {
		if in.ProtocolVersion != ProtocolVersion03 {
			continue
		}
		ai := V03AgentInterface{URL: in.URL, Transport: in.ProtocolBinding}
		if !seen[ai] {
			seen[ai] = true
			c.AdditionalInterfaces = append(c.AdditionalInterfaces, ai)
		}
	}
	c.SupportsAuthenticatedExtendedCard = Bool(c.Capabilities.ExtendedAgentCard != nil && *c.Capabilities.ExtendedAgentCard)
	return c
}

// AgentInterface is one endpoint of an agent: a URL, the binding spoken
// there and the protocol version.
type AgentInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	Tenant          string `json:"tenant,omitempty"`
	ProtocolVersion string `json:"protocolVersion"`
}

// AgentProvider names the organisation behind an agent.
type AgentProvider struct {
	URL          string `json:"url"`
	Organization string `json:"organization"`
}

// AgentCapabilities lists the optional features an agent supports.
type AgentCapabilities struct {
	Streaming         *bool            `json:"streaming,omitempty"`
	PushNotifications *bool            `json:"pushNotifications,omitempty"`
	Extensions        []AgentExtension `json:"extensions,omitempty"`
	ExtendedAgentCard *bool            `json:"extendedAgentCard,omitempty"`
}

// AgentExtension declares a protocol extension the agent supports.
type AgentExtension struct {
	URI         string         `json:"uri,omitempty"`
	Description string         `json:"description,omitempty"`
	Required    bool           `json:"required,omitempty"`
	Params      map[string]any `json:"params,omitempty"`
}

// AgentSkill is one thing an agent can do.
type AgentSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
}

// Bool returns a pointer to b, for the optional booleans of a card.
func Bool(b bool) *bool { return &b }
