package discovery

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/a2abus/a2abus/schemas"
)

// What an agent's card says about authenticating its callers: the
// securitySchemes it declares (in the 1.0 shape, a oneof keyed by the
// scheme's kind, or the 0.3 shape, OpenAPI's with a "type") and the
// requirements naming which of them a call needs (1.0
// securityRequirements; ParseCard turns a 0.3 card's security into them).

// Security scheme types, named as A2A 0.3 and OpenAPI name them (a 1.0
// card names the same kinds by the key of its oneof).
const (
	SchemeAPIKey        = "apiKey"
	SchemeHTTP          = "http"
	SchemeOAuth2        = "oauth2"
	SchemeOpenIDConnect = "openIdConnect"
	SchemeMutualTLS     = "mutualTLS"
)

// SecurityScheme is one entry of a card's securitySchemes.
type SecurityScheme struct {
	// Name is its key in securitySchemes, which requirements refer to.
	Name string
	// Type is one of the Scheme constants, or "" for a scheme a2abus
	// cannot read.
	Type string
	// HTTPScheme is an http scheme's RFC 7235 name, lower case ("bearer",
	// "basic").
	HTTPScheme string
	// In and ParamName place an apiKey scheme's key: "header", "query" or
	// "cookie", and the header, parameter or cookie name there (empty
	// only for an older dialect's card: the configured header).
	In, ParamName string
}

// Bearer reports whether the scheme takes an Authorization: Bearer token:
// http bearer, oauth2 and openIdConnect (whose access tokens are bearer
// tokens).
func (s SecurityScheme) Bearer() bool {
	switch s.Type {
	case SchemeHTTP:
		return s.HTTPScheme == "bearer"
	case SchemeOAuth2, SchemeOpenIDConnect:
		return true
	}
	return false
}

// String describes the scheme for a person.
func (s SecurityScheme) String() string {
	switch s.Type {
	case SchemeHTTP:
		if s.HTTPScheme == "bearer" {
			return fmt.Sprintf("a bearer token (%q)", s.Name)
		}
		return fmt.Sprintf("HTTP %s authentication (%q, which a2abus does not send)", s.HTTPScheme, s.Name)
	case SchemeAPIKey:
		where := "header"
		switch s.In {
		case "query":
			where = "query parameter"
		case "cookie":
			where = "cookie"
		}
		if s.ParamName == "" {
			return fmt.Sprintf("an API key (%q)", s.Name)
		}
		return fmt.Sprintf("an API key in %s %s (%q)", where, s.ParamName, s.Name)
	case SchemeOAuth2:
		return fmt.Sprintf("an OAuth2 access token (%q)", s.Name)
	case SchemeOpenIDConnect:
		return fmt.Sprintf("an OpenID Connect token (%q)", s.Name)
	case SchemeMutualTLS:
		return fmt.Sprintf("mutual TLS (%q, which a2abus does not offer)", s.Name)
	}
	return fmt.Sprintf("%q (a scheme a2abus cannot read)", s.Name)
}

// Requirement is one way to satisfy a card's security: every scheme named
// (with the scopes listed for it) at once. An empty Requirement lets
// callers in without credentials.
type Requirement map[string][]string

// Security is what a card declares about authentication. The zero value
// declares nothing.
type Security struct {
	// Schemes are the card's securitySchemes, sorted by name.
	Schemes []SecurityScheme
	// Requirements are the alternatives, any one of which a call must
	// satisfy, in the card's order. Empty: any one scheme will do.
	Requirements []Requirement
}

// Declared reports whether the card declares any scheme.
func (s *Security) Declared() bool { return s != nil && len(s.Schemes) > 0 }

// Scheme returns the scheme of that name.
func (s *Security) Scheme(name string) (SecurityScheme, bool) {
	for _, sc := range s.Schemes {
		if sc.Name == name {
			return sc, true
		}
	}
	return SecurityScheme{}, false
}

// Alternatives lists the sets of scheme names a call may satisfy, in
// order: each requirement's schemes (sorted), or each scheme alone when
// the card states no requirements.
func (s *Security) Alternatives() [][]string {
	if s == nil {
		return nil
	}
	if len(s.Requirements) == 0 {
		out := make([][]string, len(s.Schemes))
		for i, sc := range s.Schemes {
			out[i] = []string{sc.Name}
		}
		return out
	}
	out := make([][]string, 0, len(s.Requirements))
	for _, r := range s.Requirements {
		names := make([]string, 0, len(r))
		for n := range r {
			names = append(names, n)
		}
		sort.Strings(names)
		out = append(out, names)
	}
	return out
}

// String describes the alternatives for a person: "a bearer token
// ("bearer") or an API key in header X-API-Key ("key")".
func (s *Security) String() string {
	if !s.Declared() {
		return "no authentication"
	}
	var alts []string
	for _, alt := range s.Alternatives() {
		if len(alt) == 0 {
			alts = append(alts, "no credentials")
			continue
		}
		parts := make([]string, len(alt))
		for i, n := range alt {
			if sc, ok := s.Scheme(n); ok {
				parts[i] = sc.String()
			} else {
				parts[i] = fmt.Sprintf("%q (not among its securitySchemes)", n)
			}
		}
		alts = append(alts, strings.Join(parts, " and "))
	}
	return strings.Join(alts, " or ")
}

// CardSecurity reads what a card declares about authentication: its
// securitySchemes in the 1.0 or 0.3 shape, and its securityRequirements
// (else a 0.3 card's security). Schemes that do not decode are kept with
// an empty Type, so a requirement naming one cannot be met by guesswork.
// A card of the older tasks/send dialect that names its schemes
// (authentication.schemes, as AgentOS's do) declares each as one
// alternative: "bearer" an http bearer scheme, "apiKey" an API key in
// the configured header (Auth.APIKeyHeader, default X-API-Key), "basic"
// HTTP Basic; any other name a scheme a2abus cannot read.
func CardSecurity(c *schemas.AgentCard) Security {
	var s Security
	for name, raw := range c.SecuritySchemes {
		s.Schemes = append(s.Schemes, parseScheme(name, raw))
	}
	if len(s.Schemes) == 0 && c.Authentication != nil {
		for _, name := range c.Authentication.Schemes {
			s.Schemes = append(s.Schemes, legacyScheme(name))
		}
	}
	sort.Slice(s.Schemes, func(i, j int) bool { return s.Schemes[i].Name < s.Schemes[j].Name })
	reqs := c.SecurityRequirements
	if len(reqs) == 0 {
		reqs = c.Security
	}
	for _, raw := range reqs {
		if r, ok := parseRequirement(raw); ok {
			s.Requirements = append(s.Requirements, r)
		}
	}
	return s
}

// legacyScheme is a scheme an older dialect's card names.
func legacyScheme(name string) SecurityScheme {
	s := SecurityScheme{Name: name}
	switch strings.ToLower(name) {
	case "bearer":
		s.Type, s.HTTPScheme = SchemeHTTP, "bearer"
	case "basic":
		s.Type, s.HTTPScheme = SchemeHTTP, "basic"
	case "apikey", "api_key", "api-key":
		s.Type, s.In = SchemeAPIKey, "header" // ParamName empty: the configured header
	}
	return s
}

// wireScheme is a security scheme in either shape: 1.0 (one key naming
// the kind) or 0.3 (type, in, name, scheme).
type wireScheme struct {
	Type   string `json:"type"`
	In     string `json:"in"`
	Name   string `json:"name"`
	Scheme string `json:"scheme"`

	APIKey *struct {
		Location string `json:"location"`
		Name     string `json:"name"`
	} `json:"apiKeySecurityScheme"`
	HTTPAuth *struct {
		Scheme string `json:"scheme"`
	} `json:"httpAuthSecurityScheme"`
	OAuth2 json.RawMessage `json:"oauth2SecurityScheme"`
	OIDC   json.RawMessage `json:"openIdConnectSecurityScheme"`
	MTLS   json.RawMessage `json:"mtlsSecurityScheme"`
}

func parseScheme(name string, raw json.RawMessage) SecurityScheme {
	s := SecurityScheme{Name: name}
	var w wireScheme
	if json.Unmarshal(raw, &w) != nil {
		return s
	}
	switch {
	case w.APIKey != nil:
		s.Type, s.In, s.ParamName = SchemeAPIKey, strings.ToLower(w.APIKey.Location), w.APIKey.Name
	case w.HTTPAuth != nil:
		s.Type, s.HTTPScheme = SchemeHTTP, strings.ToLower(w.HTTPAuth.Scheme)
	case w.OAuth2 != nil:
		s.Type = SchemeOAuth2
	case w.OIDC != nil:
		s.Type = SchemeOpenIDConnect
	case w.MTLS != nil:
		s.Type = SchemeMutualTLS
	default:
		switch w.Type {
		case SchemeAPIKey:
			s.Type, s.In, s.ParamName = SchemeAPIKey, strings.ToLower(w.In), w.Name
		case SchemeHTTP:
			s.Type, s.HTTPScheme = SchemeHTTP, strings.ToLower(w.Scheme)
		case SchemeOAuth2, SchemeOpenIDConnect, SchemeMutualTLS:
			s.Type = w.Type
		}
	}
	if s.Type == SchemeAPIKey {
		switch s.In {
		case "header", "query", "cookie":
		default:
			s.Type = "" // nowhere a2abus can put the key
		}
		if s.ParamName == "" {
			s.Type = ""
		}
		if s.Type == "" {
			s = SecurityScheme{Name: name}
		}
	}
	return s
}

// parseRequirement reads one requirement: 1.0 {"schemes": {name: {"list":
// [scopes]}}}, the same with bare scope arrays {"schemes": {name:
// [scopes]}} (what a2a-go v2 servers write, a2a-go#430), or the 0.3
// {name: [scopes]}.
func parseRequirement(raw json.RawMessage) (Requirement, bool) {
	var v1 struct {
		Schemes map[string]json.RawMessage `json:"schemes"`
	}
	if json.Unmarshal(raw, &v1) == nil && v1.Schemes != nil {
		r := Requirement{}
		for n, v := range v1.Schemes {
			var l struct {
				List []string `json:"list"`
			}
			if json.Unmarshal(v, &l) != nil && json.Unmarshal(v, &l.List) != nil {
				return nil, false
			}
			r[n] = l.List
		}
		return r, true
	}
	var v03 map[string][]string
	if json.Unmarshal(raw, &v03) == nil && v03 != nil {
		return Requirement(v03), true
	}
	return nil, false
}
