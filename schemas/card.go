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
