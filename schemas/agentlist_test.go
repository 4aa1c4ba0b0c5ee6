package schemas

import "testing"

// The tenant field routes: "agents/<agent>" and "<tenant>/agents/<agent>"
// name an agent, anything else is a tenant of the default agent.
func TestAgentTenantRoutes(t *testing.T) {
	for _, tc := range []struct{ in, tenant, agent string }{
		{"", "", ""},
		{"acme", "acme", ""},
		{"agents/echo", "", "echo"},
		{"acme/agents/echo", "acme", "echo"},
		{"agents/echo/more", "agents/echo/more", ""},
	} {
		if tenant, agent := RouteTenant(tc.in); tenant != tc.tenant || agent != tc.agent {
			t.Errorf("RouteTenant(%q) = %q, %q; want %q, %q", tc.in, tenant, agent, tc.tenant, tc.agent)
		}
		if back := AgentTenant(tc.tenant, tc.agent); back != tc.in {
			t.Errorf("AgentTenant(%q, %q) = %q, want %q", tc.tenant, tc.agent, back, tc.in)
		}
	}
}
