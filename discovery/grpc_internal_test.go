package discovery

import (
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// The URL forms of a gRPC interface, and whether each is spoken over TLS:
// https and grpcs always, http never, host:port and grpc:// in cleartext
// to loopback only.
func TestGRPCAddressForms(t *testing.T) {
	for _, c := range []struct {
		url, addr string
		tls       bool
	}{
		{"127.0.0.1:50051", "127.0.0.1:50051", false},
		{"[::1]:50051", "[::1]:50051", false},
		{"localhost:50051", "localhost:50051", false},
		{"agent.example:50051", "agent.example:50051", true},
		{"10.0.0.5:50051", "10.0.0.5:50051", true},
		{"grpc://127.0.0.1:50051", "127.0.0.1:50051", false},
		{"grpc://agent.example:50051", "agent.example:50051", true},
		{"grpcs://127.0.0.1:50051", "127.0.0.1:50051", true},
		{"grpcs://agent.example", "agent.example:443", true},
		{"https://agent.example/a2a/grpc", "agent.example:443", true},
		{"HTTPS://agent.example:8443", "agent.example:8443", true},
		{"http://agent.example:50051", "agent.example:50051", false},
		{"http://agent.example", "agent.example:80", false},
	} {
		addr, secure, err := grpcAddress(c.url)
		if err != nil || addr != c.addr || secure != c.tls {
			t.Errorf("%s: %s tls %v (%v), want %s tls %v", c.url, addr, secure, err, c.addr, c.tls)
		}
	}
	for _, bad := range []string{"", "agent.example", ":50051", "127.0.0.1:", "ftp://agent.example:21", "https://", "unix:///tmp/a2a.sock", "agent.example:50051/path"} {
		if addr, _, err := grpcAddress(bad); err == nil {
			t.Errorf("%q read as %s", bad, addr)
		}
	}
}

// A card's host:port gRPC URL is spoken as its HTTP interfaces are (an
// a2abus edge serves gRPC over TLS exactly when it serves HTTP over TLS);
// an explicit scheme, or a card without HTTP interfaces, keeps the URL.
func TestCardGRPCURLFollowsItsHTTPInterfaces(t *testing.T) {
	card := func(grpcURL string, http ...string) *schemas.AgentCard {
		c := &schemas.AgentCard{}
		for _, u := range http {
			c.SupportedInterfaces = append(c.SupportedInterfaces, schemas.AgentInterface{URL: u, ProtocolBinding: schemas.BindingJSONRPC, ProtocolVersion: "1.0"})
		}
		c.SupportedInterfaces = append(c.SupportedInterfaces, schemas.AgentInterface{URL: grpcURL, ProtocolBinding: schemas.BindingGRPC, ProtocolVersion: "1.0", Tenant: "agents/a"})
		return c
	}
	for _, c := range []struct {
		card *schemas.AgentCard
		want string
	}{
		{card("agent.example:9090", "https://agent.example/agents/a"), "https://agent.example:9090"},
		{card("127.0.0.1:9090", "https://127.0.0.1:8443/agents/a"), "https://127.0.0.1:9090"},
		{card("10.0.0.5:9090", "http://10.0.0.5:8080/agents/a"), "http://10.0.0.5:9090"},
		{card("grpc://10.0.0.5:9090", "http://10.0.0.5:8080/agents/a", "https://agent.example/agents/a"), "https://10.0.0.5:9090"},
		{card("grpcs://agent.example:9090", "http://agent.example/agents/a"), "grpcs://agent.example:9090"},
		{card("agent.example:9090"), "agent.example:9090"},
	} {
		eps := Endpoints(c.card, schemas.BindingGRPC)
		if len(eps) != 1 || eps[0].URL != c.want || eps[0].Tenant != "agents/a" {
			t.Errorf("%+v: %+v, want %s", c.card.SupportedInterfaces, eps, c.want)
		}
	}
}
