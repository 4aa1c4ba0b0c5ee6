package edge_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/edge"
)

// A registry entry names the environment variables the processes running
// it send as headers: only those the operator allows (A2ABUS_REMOTE_… or
// listed), so an admin cannot have every worker send its other secrets to
// a URL the admin chose. The refusal says which variable and how to allow
// it, and nothing is stored.
func TestRegistryEntryNamesOnlyAllowedEnvironmentVariables(t *testing.T) {
	h := authHarnessWith(t, edge.Config{RemoteEnvAllow: []string{"WEATHER_TOKEN"}})
	entry := func(header, variable string) string {
		return `{"remote": {"url": "https://agents.example.com/weather", "headersFromEnv": {"` + header + `": "` + variable + `"}}}`
	}
	for _, c := range []struct {
		name, header, variable string
		want                   int
	}{
		{"any variable", "X-Leak", "OPENAI_API_KEY", http.StatusBadRequest},
		{"the bare prefix", "X-Leak", "A2ABUS_REMOTE_", http.StatusBadRequest},
		{"a name containing the prefix", "X-Leak", "X_A2ABUS_REMOTE_KEY", http.StatusBadRequest},
		{"prefixed", "Authorization", "A2ABUS_REMOTE_WEATHER", http.StatusOK},
		{"listed", "X-Token", "WEATHER_TOKEN", http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			agent := "weather-" + strings.ToLower(strings.ReplaceAll(c.variable, "_", "-"))
			agent = strings.Trim(agent, "-")
			status, _, body := as(t, opsKey, "PUT", h.url+"/a2a/admin/agents/"+agent, "application/json", entry(c.header, c.variable))
			if status != c.want {
				t.Fatalf("PUT naming $%s: %d %s, want %d", c.variable, status, body, c.want)
			}
			if c.want == http.StatusOK {
				return
			}
			for _, want := range []string{c.header, "$" + c.variable, "A2ABUS_REMOTE_", "--remote-env-allow"} {
				if !strings.Contains(string(body), want) {
					t.Errorf("the refusal does not say %q: %s", want, body)
				}
			}
			if status, _, body := as(t, opsKey, "GET", h.url+"/a2a/admin/agents/"+agent, "", ""); status != http.StatusNotFound {
				t.Errorf("a refused entry was stored: %d %s", status, body)
			}
		})
	}
}

// The registry is shared by every edge on the bus: an edge that
// authenticates no one (an "a2abus edge" started without auth flags, on
// loopback) neither changes it nor serves /metrics while another edge of
// the same bus requires admin credentials for both, unless its operator
// opened it (OpenAdmin).
func TestUnauthenticatedEdgeDoesNotOpenTheSharedRegistry(t *testing.T) {
	h := authHarness(t)
	closed := h.startEdge(h.b, edge.Config{LoopbackOnly: true, DefaultAgent: "echo"})
	open := h.startEdge(h.b, edge.Config{LoopbackOnly: true, DefaultAgent: "echo", OpenAdmin: true})
	const maintenance = `{"maintenance": "taken down through an edge that knows no one"}`

	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/a2a/admin/agents/echo", maintenance},
		{"DELETE", "/a2a/admin/agents/echo", ""},
		{"GET", "/a2a/admin/agents", ""},
		{"GET", "/metrics", ""},
	} {
		status, _, body := as(t, "", c.method, closed+c.path, "application/json", c.body)
		if status != http.StatusForbidden || !strings.Contains(string(body), "authenticates no one") || !strings.Contains(string(body), "--open-admin") {
			t.Errorf("%s %s through the unauthenticated edge: %d %s, want 403 with the reason", c.method, c.path, status, body)
		}
	}
	if status, _, body := as(t, opsKey, "GET", h.url+"/a2a/admin/agents/echo", "", ""); status != http.StatusNotFound {
		t.Fatalf("the registry changed through the unauthenticated edge: %d %s", status, body)
	}
	// The authenticating edge still asks for an admin.
	if status, _, _ := as(t, "", "GET", h.url+"/metrics", "", ""); status != http.StatusUnauthorized {
		t.Errorf("metrics without credentials on the authenticating edge: %d", status)
	}

	// Opened by its operator, the edge lets its callers act as admins.
	if status, _, body := as(t, "", "PUT", open+"/a2a/admin/agents/echo", "application/json", maintenance); status != http.StatusOK {
		t.Fatalf("PUT through the opened edge: %d %s", status, body)
	}
	if status, _, body := as(t, opsKey, "GET", h.url+"/a2a/admin/agents/echo", "", ""); status != http.StatusOK || !strings.Contains(string(body), "taken down") {
		t.Fatalf("the entry written through the opened edge, read by an admin: %d %s", status, body)
	}
	if status, _, _ := as(t, "", "GET", open+"/metrics", "", ""); status != http.StatusOK {
		t.Errorf("metrics on the opened edge: %d", status)
	}
}
