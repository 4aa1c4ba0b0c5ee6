package schemas

import "encoding/json"

// Validation of REQUIRED fields (proto field_behavior REQUIRED). Each
// function returns an ErrInvalidParams occurrence naming the field path, so
// the client can fix its request; unknown fields are never an error.

// Validate checks a SendMessageRequest: a message is required and must be
// valid, and historyLength, if given, must not be negative.
func (r *SendMessageRequest) Validate() error {
	if r.Message == nil {
		return Errorf(ErrInvalidParams, "message is required")
	}
	if err := r.Message.validate("message"); err != nil {
		return err
	}
	if c := r.Configuration; c != nil && c.HistoryLength != nil && *c.HistoryLength < 0 {
		return Errorf(ErrInvalidParams, "configuration.historyLength must not be negative")
	}
	return nil
}

// Validate checks a Message sent by a client or an agent.
func (m *Message) Validate() error { return m.validate("message") }

func (m *Message) validate(path string) error {
	if m.MessageID == "" {
		return Errorf(ErrInvalidParams, "%s.messageId is required", path)
	}
	switch m.Role {
	case RoleUser, RoleAgent:
	case "":
		return Errorf(ErrInvalidParams, "%s.role is required", path)
	default:
		return Errorf(ErrInvalidParams, "%s.role %q is not ROLE_USER or ROLE_AGENT", path, m.Role)
	}
	if len(m.Parts) == 0 {
		return Errorf(ErrInvalidParams, "%s.parts must hold at least one part", path)
	}
	for i := range m.Parts {
		if err := m.Parts[i].validate(path, i); err != nil {
			return err
		}
	}
	return nil
}

func (p *Part) validate(path string, i int) error {
	n := 0
	if p.Text != nil {
		n++
	}
	if p.Raw != nil {
		n++
	}
	if p.URL != nil {
		n++
	}
	if string(p.Data) == "null" {
		p.Data = nil // JSON null is no content
	}
	if len(p.Data) > 0 {
		n++
	}
	if n != 1 {
		return Errorf(ErrInvalidParams, "%s.parts[%d] must set exactly one of text, raw, url, data (has %d)", path, i, n)
	}
	if p.Data != nil && !json.Valid(p.Data) {
		return Errorf(ErrInvalidParams, "%s.parts[%d].data is not valid JSON", path, i)
	}
	return nil
}

// Validate checks an Artifact produced by an agent.
func (a *Artifact) Validate() error {
	if a.ArtifactID == "" {
		return Errorf(ErrInvalidParams, "artifact.artifactId is required")
	}
	if len(a.Parts) == 0 {
		return Errorf(ErrInvalidParams, "artifact.parts must hold at least one part")
	}
	for i := range a.Parts {
		if err := a.Parts[i].validate("artifact", i); err != nil {
			return err
		}
	}
	return nil
}

// ValidateHistoryLength checks an optional historyLength parameter.
func ValidateHistoryLength(n *int32) error {
	if n != nil && *n < 0 {
		return Errorf(ErrInvalidParams, "historyLength must not be negative")
	}
	return nil
}
