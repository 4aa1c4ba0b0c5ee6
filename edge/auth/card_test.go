package auth

import (
	"encoding/json"
	"testing"
)

// jsonOf renders card values for comparison: each RawMessage compacted
// into one JSON document.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCardSecurity(t *testing.T) {
	keys := []APIKey{{Key: "k-0123456789abcdef", Principal: "alice"}}
	const (
		apiKeyDesc  = "an API key in the X-API-Key header, or as a Bearer token in the Authorization header"
		teamKeyDesc = "an API key in the X-Team-Key header"
		bearerDesc  = "a JWT access token as a Bearer token in the Authorization header"
		oidcDesc    = "a JWT access token of this OpenID Connect issuer, as a Bearer token in the Authorization header"
	)
	tests := []struct {
		name string
		cfg  Config
		// The card fields, as JSON.
		schemes, reqs       string
		schemes03, security string
		union               string
	}{
		{
			name:    "anonymous",
			cfg:     Config{},
			schemes: `null`, reqs: `null`, schemes03: `null`, security: `null`, union: `null`,
		},
		{
			name:      "API keys, default header",
			cfg:       Config{APIKeys: keys},
			schemes:   `{"apiKey":{"apiKeySecurityScheme":{"description":"` + apiKeyDesc + `","location":"header","name":"X-API-Key"}}}`,
			reqs:      `[{"schemes":{"apiKey":{"list":[]}}}]`,
			schemes03: `{"apiKey":{"description":"` + apiKeyDesc + `","in":"header","name":"X-API-Key","type":"apiKey"}}`,
			security:  `[{"apiKey":[]}]`,
			union:     `{"apiKey":{"apiKeySecurityScheme":{"description":"` + apiKeyDesc + `","location":"header","name":"X-API-Key"},"description":"` + apiKeyDesc + `","in":"header","name":"X-API-Key","type":"apiKey"}}`,
		},
		{
			name:      "API keys, own header",
			cfg:       Config{APIKeys: keys, APIKeyHeader: "X-Team-Key"},
			schemes:   `{"apiKey":{"apiKeySecurityScheme":{"description":"` + teamKeyDesc + `","location":"header","name":"X-Team-Key"}}}`,
			reqs:      `[{"schemes":{"apiKey":{"list":[]}}}]`,
			schemes03: `{"apiKey":{"description":"` + teamKeyDesc + `","in":"header","name":"X-Team-Key","type":"apiKey"}}`,
			security:  `[{"apiKey":[]}]`,
			union:     `{"apiKey":{"apiKeySecurityScheme":{"description":"` + teamKeyDesc + `","location":"header","name":"X-Team-Key"},"description":"` + teamKeyDesc + `","in":"header","name":"X-Team-Key","type":"apiKey"}}`,
		},
		{
			name:      "JWT by JWKS URL",
			cfg:       Config{JWT: &JWTConfig{JWKSURL: "https://keys.example/jwks", Issuer: "my-issuer", Audience: []string{"x"}}},
			schemes:   `{"bearer":{"httpAuthSecurityScheme":{"bearerFormat":"JWT","description":"` + bearerDesc + `","scheme":"Bearer"}}}`,
			reqs:      `[{"schemes":{"bearer":{"list":[]}}}]`,
			schemes03: `{"bearer":{"bearerFormat":"JWT","description":"` + bearerDesc + `","scheme":"Bearer","type":"http"}}`,
			security:  `[{"bearer":[]}]`,
			union:     `{"bearer":{"bearerFormat":"JWT","description":"` + bearerDesc + `","httpAuthSecurityScheme":{"bearerFormat":"JWT","description":"` + bearerDesc + `","scheme":"Bearer"},"scheme":"Bearer","type":"http"}}`,
		},
		{
			name:      "JWT of an OIDC issuer",
			cfg:       Config{JWT: &JWTConfig{Issuer: "https://idp.example/realms/a2a/", Audience: []string{"x"}}},
			schemes:   `{"oidc":{"openIdConnectSecurityScheme":{"description":"` + oidcDesc + `","openIdConnectUrl":"https://idp.example/realms/a2a/.well-known/openid-configuration"}}}`,
			reqs:      `[{"schemes":{"oidc":{"list":[]}}}]`,
			schemes03: `{"oidc":{"description":"` + oidcDesc + `","openIdConnectUrl":"https://idp.example/realms/a2a/.well-known/openid-configuration","type":"openIdConnect"}}`,
			security:  `[{"oidc":[]}]`,
			union:     `{"oidc":{"description":"` + oidcDesc + `","openIdConnectSecurityScheme":{"description":"` + oidcDesc + `","openIdConnectUrl":"https://idp.example/realms/a2a/.well-known/openid-configuration"},"openIdConnectUrl":"https://idp.example/realms/a2a/.well-known/openid-configuration","type":"openIdConnect"}}`,
		},
		{
			name:      "API keys and JWT: either",
			cfg:       Config{APIKeys: keys, APIKeyHeader: "X-Team-Key", JWT: &JWTConfig{JWKSURL: "https://keys.example/jwks", Audience: []string{"x"}}},
			schemes:   `{"apiKey":{"apiKeySecurityScheme":{"description":"` + teamKeyDesc + `","location":"header","name":"X-Team-Key"}},"bearer":{"httpAuthSecurityScheme":{"bearerFormat":"JWT","description":"` + bearerDesc + `","scheme":"Bearer"}}}`,
			reqs:      `[{"schemes":{"apiKey":{"list":[]}}},{"schemes":{"bearer":{"list":[]}}}]`,
			schemes03: `{"apiKey":{"description":"` + teamKeyDesc + `","in":"header","name":"X-Team-Key","type":"apiKey"},"bearer":{"bearerFormat":"JWT","description":"` + bearerDesc + `","scheme":"Bearer","type":"http"}}`,
			security:  `[{"apiKey":[]},{"bearer":[]}]`,
			union:     `{"apiKey":{"apiKeySecurityScheme":{"description":"` + teamKeyDesc + `","location":"header","name":"X-Team-Key"},"description":"` + teamKeyDesc + `","in":"header","name":"X-Team-Key","type":"apiKey"},"bearer":{"bearerFormat":"JWT","description":"` + bearerDesc + `","httpAuthSecurityScheme":{"bearerFormat":"JWT","description":"` + bearerDesc + `","scheme":"Bearer"},"scheme":"Bearer","type":"http"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAuth(t, tt.cfg, nil)
			schemes, reqs := a.CardSecurity()
			schemes03, security := a.CardSecurity03()
			for _, c := range []struct{ field, got, want string }{
				{"securitySchemes", jsonOf(t, schemes), tt.schemes},
				{"securityRequirements", jsonOf(t, reqs), tt.reqs},
				{"0.3 securitySchemes", jsonOf(t, schemes03), tt.schemes03},
				{"0.3 security", jsonOf(t, security), tt.security},
				{"union securitySchemes", jsonOf(t, a.UnionSecuritySchemes()), tt.union},
			} {
				if c.got != c.want {
					t.Errorf("%s:\n got %s\nwant %s", c.field, c.got, c.want)
				}
			}
			if a.Anonymous() != (schemes == nil) {
				t.Errorf("Anonymous() = %v with schemes %s", a.Anonymous(), jsonOf(t, schemes))
			}
			// The values are the caller's: changing them changes nothing.
			for k := range schemes {
				schemes[k][0] = 'X'
			}
			if again, _ := a.CardSecurity(); jsonOf(t, again) != tt.schemes {
				t.Errorf("CardSecurity changed by its caller: %s", jsonOf(t, again))
			}
		})
	}
}

// TestCardSecurityShapes decodes the 1.0 values as a strict reader of the
// proto's oneofs would: exactly one member per scheme, with the fields the
// spec requires.
func TestCardSecurityShapes(t *testing.T) {
	a := newAuth(t, Config{
		APIKeys: []APIKey{{Key: "k-0123456789abcdef", Principal: "alice"}},
		JWT:     &JWTConfig{Issuer: "https://idp.example", Audience: []string{"x"}},
	}, nil)
	schemes, reqs := a.CardSecurity()
	for name, raw := range schemes {
		var oneof map[string]map[string]string
		if err := json.Unmarshal(raw, &oneof); err != nil || len(oneof) != 1 {
			t.Fatalf("scheme %s: %s is not one oneof member (%v)", name, raw, err)
		}
		for member, fields := range oneof {
			var required []string
			switch member {
			case "apiKeySecurityScheme":
				required = []string{"location", "name"}
			case "httpAuthSecurityScheme":
				required = []string{"scheme"}
			case "openIdConnectSecurityScheme":
				required = []string{"openIdConnectUrl"}
			default:
				t.Fatalf("scheme %s: unexpected member %s", name, member)
			}
			for _, f := range required {
				if fields[f] == "" {
					t.Errorf("scheme %s: %s.%s is required", name, member, f)
				}
			}
		}
	}
	for _, raw := range reqs {
		var req struct {
			Schemes map[string]struct {
				List []string `json:"list"`
			} `json:"schemes"`
		}
		if err := json.Unmarshal(raw, &req); err != nil || len(req.Schemes) != 1 {
			t.Fatalf("requirement %s (%v)", raw, err)
		}
		for name := range req.Schemes {
			if _, ok := schemes[name]; !ok {
				t.Errorf("requirement names %s, which is not a scheme", name)
			}
		}
	}
}
