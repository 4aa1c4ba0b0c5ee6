package schemas

import (
	"crypto/tls"
	"net/http"
	"strings"
)

// The registry as an edge lists it (GET /a2a/agents), and what an
// adapter in the edge's process presents for the calls it makes there.

// AgentEntry is one agent in GET /a2a/agents: its served card (the list
// is of cards, as OpenFang's GET /a2a/agents is), and beside the card's
// fields the agent's registered name, whether it runs here ("local") or is
// proxied to an external A2A agent ("remote"), its health and how many
// workers run it. Remote, the external agent's address and how its checks
// went, is operational: an edge shows it to admins only.
type AgentEntry struct {
	AgentCard
	Agent  string             `json:"agent"`
	Kind   string             `json:"kind"`
	Remote *RemoteAgentStatus `json:"remote,omitempty"`
	// Health is "maintenance" while an admin has the agent out of service
	// (Maintenance says why), else a remote agent's health, and "online"
	// for a local agent (one listed is one whose workers are live).
	Health      string `json:"health,omitempty"`
	Maintenance string `json:"maintenance,omitempty"`
	// Workers is how many workers run the agent, local or remote (a remote
	// agent's are those proxying it): distinct Runners that refreshed its
	// registration within the agent TTL, as the listing edge saw them. An
	// edge that just started counts only the last to refresh until each
	// worker's next heartbeat. A count, never names: every caller sees it.
	Workers int `json:"workers"`
}

// AgentList is the body of GET /a2a/agents: the cards and how many.
type AgentList struct {
	Agents []AgentEntry `json:"agents"`
	Total  int          `json:"total"`
}

// AgentQuery narrows the list: an agent is listed when it offers every
// skill of Skills, has a skill carrying each tag of Tags, is of Kind and
// in Health (when set), and every word of Text is in its name,
// description, or a skill's id, name, description, tags or examples
// (ignoring case). GET /a2a/agents takes them as skill, tag, kind, health
// and q.
type AgentQuery struct {
	Skills, Tags       []string
	Kind, Health, Text string
}

// Presented is what a request presented to the process that took it: its
// header, credentials among it, and the address it came from (host:port;
// "" for the process itself, as over stdio). An adapter in an edge's
// process that is not one of its HTTP bindings (the MCP bridge) hands the
// edge what its own request presented, and the edge admits each call it
// makes with it as its front door admits an A2A request.
type Presented struct {
	Header     http.Header
	RemoteAddr string
	// TLS is the connection's TLS state (its verified client certificate
	// chains, for mutual TLS); nil over plain connections.
	TLS *tls.ConnectionState
}

// A gRPC request has no path to name an agent by: it names one in its
// tenant field, which A2A defines as an opaque routing value a client
// copies from the interface it chose in the agent's card. An agent's gRPC
// interface declares AgentTenant(tenant, agent); an edge reads a request's
// with RouteTenant.

// AgentTenant is the tenant field that names agent in tenant:
// "agents/<agent>", or "<tenant>/agents/<agent>"; tenant alone for the
// default agent ("").
func AgentTenant(tenant, agent string) string {
	switch {
	case agent == "":
		return tenant
	case tenant == "":
		return "agents/" + agent
	}
	return tenant + "/agents/" + agent
}

// RouteTenant splits a request's tenant field into the tenant it acts in
// and the agent it names ("" for the default agent): the inverse of
// AgentTenant. A tenant whose name ends in "/agents/<name>" is read as
// naming that agent: such a tenant cannot be reached over gRPC.
func RouteTenant(field string) (tenant, agent string) {
	if rest, ok := strings.CutPrefix(field, "agents/"); ok && !strings.Contains(rest, "/") {
		return "", rest
	}
	if i := strings.LastIndex(field, "/agents/"); i >= 0 {
		if rest := field[i+len("/agents/"):]; !strings.Contains(rest, "/") {
			return field[:i], rest
		}
	}
	return field, ""
}
