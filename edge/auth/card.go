package auth

import (
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// The names of the card's security schemes.
const (
	cardAPIKey = "apiKey" // apiKeySecurityScheme: the API key header
	cardBearer = "bearer" // httpAuthSecurityScheme: Bearer, bearerFormat JWT
	cardOIDC   = "oidc"   // openIdConnectSecurityScheme: the issuer's discovery URL
	cardMTLS   = "mtls"   // mtlsSecurityScheme: a client certificate
)

// cardScheme is one security scheme of the card, in both versions' shapes.
type cardScheme struct {
	name string
	v1   map[string]any // A2A 1.0 (ProtoJSON): {"<oneof member>": {...}}
	v03  map[string]any // A2A 0.3 (OpenAPI style): {"type": ..., ...}
}

// cardSecurity is what the card says of the configured schemes; any one of
// them is enough (the requirements are alternatives).
type cardSecurity struct {
	schemes []cardScheme
}

func newCardSecurity(a *Authenticator) cardSecurity {
	var cs cardSecurity
	if a.keys != nil {
		desc := "an API key in the " + a.keyHeaderName + " header"
		if a.keysAsBearer {
			desc += ", or as a Bearer token in the Authorization header"
		}
		cs.schemes = append(cs.schemes, cardScheme{name: cardAPIKey,
			v1:  map[string]any{"apiKeySecurityScheme": map[string]any{"description": desc, "location": "header", "name": a.keyHeaderName}},
			v03: map[string]any{"type": "apiKey", "in": "header", "name": a.keyHeaderName, "description": desc},
		})
	}
	if a.jwt != nil {
		if u := discoveryURL(a.jwt.issuer); u != "" {
			desc := "a JWT access token of this OpenID Connect issuer, as a Bearer token in the Authorization header"
			cs.schemes = append(cs.schemes, cardScheme{name: cardOIDC,
				v1:  map[string]any{"openIdConnectSecurityScheme": map[string]any{"description": desc, "openIdConnectUrl": u}},
				v03: map[string]any{"type": "openIdConnect", "openIdConnectUrl": u, "description": desc},
			})
		} else {
			desc := "a JWT access token as a Bearer token in the Authorization header"
			cs.schemes = append(cs.schemes, cardScheme{name: cardBearer,
				v1:  map[string]any{"httpAuthSecurityScheme": map[string]any{"description": desc, "scheme": "Bearer", "bearerFormat": "JWT"}},
				v03: map[string]any{"type": "http", "scheme": "Bearer", "bearerFormat": "JWT", "description": desc},
			})
		}
	}
	if a.certs {
		desc := "a client certificate issued by a CA this edge trusts (mutual TLS)"
		cs.schemes = append(cs.schemes, cardScheme{name: cardMTLS,
			v1:  map[string]any{"mtlsSecurityScheme": map[string]any{"description": desc}},
			v03: map[string]any{"type": "mutualTLS", "description": desc},
		})
	}
	return cs
}

// discoveryURL is the OpenID Connect discovery URL of an issuer that is an
// http(s) URL, else "".
func discoveryURL(issuer string) string {
	u, err := url.Parse(issuer)
	if issuer == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return ""
	}
	return strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
}

// CardSecurity returns the agent card's securitySchemes and
// securityRequirements in the A2A 1.0 ProtoJSON shapes, each value ready
// for schemas.AgentCard: one scheme per configured credential, and one
// requirement per scheme (any one is enough). The schemes are
//
//	"apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key", ...}}
//	"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT", ...}}
//	"oidc":   {"openIdConnectSecurityScheme": {"openIdConnectUrl": "<issuer>/.well-known/openid-configuration", ...}}
//
// ("oidc" instead of "bearer" when the JWT issuer is an http(s) URL), and a
// requirement reads {"schemes": {"apiKey": {"list": []}}}. Both are nil
// when the authenticator is anonymous. The values are the caller's.
func (a *Authenticator) CardSecurity() (schemes map[string]json.RawMessage, reqs []json.RawMessage) {
	for _, s := range a.card.schemes {
		if schemes == nil {
			schemes = map[string]json.RawMessage{}
		}
		schemes[s.name] = mustJSON(s.v1)
		reqs = append(reqs, mustJSON(map[string]any{"schemes": map[string]any{s.name: map[string]any{"list": []string{}}}}))
	}
	return schemes, reqs
}

// CardSecurity03 returns the same schemes in the A2A 0.3 shapes: the
// card's securitySchemes values ({"type": "apiKey", "in": "header",
// "name": ...}, {"type": "http", "scheme": "Bearer", "bearerFormat": "JWT"},
// {"type": "openIdConnect", "openIdConnectUrl": ...}) and its "security"
// list, one alternative per scheme ({"apiKey": []}). Both are nil when the
// authenticator is anonymous.
//
// A card served to 1.0 and 0.3 readers at once (schemas.UnionCard) has one
// securitySchemes field: give it UnionSecuritySchemes, and the "security"
// list from here.
func (a *Authenticator) CardSecurity03() (schemes map[string]json.RawMessage, security []json.RawMessage) {
	for _, s := range a.card.schemes {
		if schemes == nil {
			schemes = map[string]json.RawMessage{}
		}
		schemes[s.name] = mustJSON(s.v03)
		security = append(security, mustJSON(map[string][]string{s.name: {}}))
	}
	return schemes, security
}

// UnionSecuritySchemes returns securitySchemes values for a union card: each
// holds the 1.0 oneof member and the 0.3 fields side by side, e.g.
//
//	{"apiKeySecurityScheme": {...}, "type": "apiKey", "in": "header", "name": "X-API-Key", ...}
//
// A 1.0 reader takes the oneof member and ignores the rest; a 0.3 reader
// takes "type" and its fields (the shape a2a-python serves). nil when the
// authenticator is anonymous.
func (a *Authenticator) UnionSecuritySchemes() map[string]json.RawMessage {
	var schemes map[string]json.RawMessage
	for _, s := range a.card.schemes {
		if schemes == nil {
			schemes = map[string]json.RawMessage{}
		}
		merged := maps.Clone(s.v03)
		maps.Copy(merged, s.v1)
		schemes[s.name] = mustJSON(merged)
	}
	return schemes
}

// mustJSON marshals what this file builds: maps of strings, which always
// marshal.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("auth: card security: " + err.Error())
	}
	return b
}

// LegacySchemes names the configured schemes as the older tasks/send
// dialect's cards do (authentication.schemes: "bearer", "apiKey"). nil
// when the authenticator is anonymous.
func (a *Authenticator) LegacySchemes() []string {
	var out []string
	if a.keys != nil {
		out = append(out, "apiKey")
		if a.keysAsBearer {
			out = append(out, "bearer")
		}
	}
	if a.jwt != nil && !slices.Contains(out, "bearer") {
		out = append(out, "bearer")
	}
	return out
}
