package discovery_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
)

// A card that offers A2A 1.0 over gRPC only is spoken over gRPC: the
// client dials the address the card names and reaches the agent its
// tenant names, blocking and streaming.
func TestACardOfferingOnlyGRPCIsSpokenOverGRPC(t *testing.T) {
	srv := startEdge(t, edge.Config{}, nil)
	ctx := context.Background()
	card := mustParse(t, `{"name": "echo", "description": "d", "version": "1", "skills": [], "capabilities": {},
		"defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
		"supportedInterfaces": [{"url": "`+srv.grpc+`", "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": "agents/echo"}]}`)
	c, err := discovery.ClientFor(card, loopback())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ep := c.Endpoint(); ep.Binding != schemas.BindingGRPC || ep.URL != srv.grpc || ep.Tenant != "agents/echo" {
		t.Fatalf("the endpoint chosen: %+v", ep)
	}
	res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("over gRPC")})
	if err != nil || res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted || *res.Task.Artifacts[0].Parts[0].Text != "over gRPC" {
		t.Fatalf("send: %+v %v", res, err)
	}
	// The task is echo's, which the tenant named: the default agent's
	// tenant ("") does not find it.
	if _, err := c.GetTask(ctx, &schemas.GetTaskRequest{ID: res.Task.ID}); err != nil {
		t.Fatalf("get: %v", err)
	}
	other, err := discovery.NewClient(discovery.Endpoint{URL: srv.grpc, Binding: schemas.BindingGRPC, Version: "1.0", Tenant: "agents/hang"}, loopback())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.GetTask(ctx, &schemas.GetTaskRequest{ID: res.Task.ID}); !errors.Is(err, schemas.ErrTaskNotFound) {
		t.Fatalf("echo's task read as hang's: %v", err)
	}
	s, err := c.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: text("streamed over gRPC")})
	if err != nil {
		t.Fatal(err)
	}
	if evs := readAll(t, s); len(evs) < 3 || evs[0].ev.Task == nil || lastState(evs) != schemas.TaskStateCompleted {
		t.Fatalf("stream: %d events, last %s", len(evs), lastState(evs))
	}
}

// --binding grpc names the endpoint by a URL: its path, which gRPC has
// no use for, is the tenant the calls name.
func TestNamedGRPCEndpointTakesTheTenantFromThePath(t *testing.T) {
	for u, want := range map[string]discovery.Endpoint{
		"http://127.0.0.1:9090/agents/echo":  {URL: "http://127.0.0.1:9090", Tenant: "agents/echo"},
		"https://a.example/acme/agents/echo": {URL: "https://a.example", Tenant: "acme/agents/echo"},
		"http://127.0.0.1:9090/":             {URL: "http://127.0.0.1:9090/"},
		"127.0.0.1:9090":                     {URL: "127.0.0.1:9090"},
	} {
		ep, ok := discovery.NamedEndpoint("grpc", u)
		want.Binding, want.Version = schemas.BindingGRPC, schemas.ProtocolVersion
		if !ok || ep != want {
			t.Errorf("%s: %+v, want %+v", u, ep, want)
		}
	}
}

// Over TLS (an https URL) a gRPC connection trusts what the client's HTTP
// client trusts: the agent's certificate, whose root only that client
// holds, passes there and is refused with the default roots.
func TestGRPCOverTLSUsesTheHTTPClientsRoots(t *testing.T) {
	ca := httptest.NewTLSServer(http.NotFoundHandler()) // a certificate for 127.0.0.1, and a client that trusts it
	defer ca.Close()
	srv := startEdge(t, edge.Config{}, &tls.Config{Certificates: ca.TLS.Certificates})
	ep := discovery.Endpoint{URL: "https://" + srv.grpc, Binding: schemas.BindingGRPC, Version: "1.0", Tenant: "agents/echo"}
	ctx := context.Background()

	opts := loopback()
	opts.HTTP = ca.Client()
	c, err := discovery.NewClient(ep, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if res, err := c.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("over TLS")}); err != nil || res.Task == nil {
		t.Fatalf("send over TLS: %+v %v", res, err)
	}

	untrusting, err := discovery.NewClient(ep, loopback())
	if err != nil {
		t.Fatal(err)
	}
	defer untrusting.Close()
	// The same agent, which just answered: only the roots differ.
	_, err = untrusting.SendMessage(ctx, &schemas.SendMessageRequest{Message: text("over TLS")})
	var te *discovery.TransportError
	if !errors.As(err, &te) || te.Status != 0 {
		t.Fatalf("a certificate the client does not trust: %v", err)
	}
}

// A gRPC connection dials through the outbound guard: a name that
// resolves to a refused address is refused when connecting, nothing is
// sent, and the error is the guard's (not retryable); an address
// literal is refused before any dial.
func TestGRPCDialsThroughTheGuard(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	for _, u := range []string{"localhost:" + port, "http://127.0.0.1:" + port} {
		c, err := discovery.NewClient(discovery.Endpoint{URL: u, Binding: schemas.BindingGRPC, Version: "1.0"}, discovery.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.GetTask(context.Background(), &schemas.GetTaskRequest{ID: "t"})
		c.Close()
		if !errors.Is(err, discovery.ErrForbiddenAddress) || discovery.IsRetryable(err) {
			t.Errorf("%s with loopback refused: %v", u, err)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the guard let %d connections through", n)
	}
}

// An agent nobody answers for is a transport error, retryable, whose
// cause is the dial's.
func TestGRPCUnreachableIsATransportError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c, err := discovery.NewClient(discovery.Endpoint{URL: addr, Binding: schemas.BindingGRPC, Version: "1.0"}, loopback())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.SendMessage(context.Background(), &schemas.SendMessageRequest{Message: text("anyone?")})
	var te *discovery.TransportError
	if !errors.As(err, &te) || te.Status != 0 || !discovery.IsRetryable(err) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("calling nobody: %v", err)
	}
}

// A request with no protobuf form (a part holding text and a URL at once,
// where A2A's Part holds one) is the caller's error, INVALID_PARAMS as an
// agent would answer it over HTTP, and nothing is sent: the address here
// answers nobody.
func TestGRPCRequestWithoutAProtobufFormIsInvalidParams(t *testing.T) {
	c, err := discovery.NewClient(discovery.Endpoint{URL: "127.0.0.1:1", Binding: schemas.BindingGRPC, Version: "1.0"}, loopback())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := text("two things at once")
	u := "https://files.example/a.txt"
	msg.Parts[0].URL = &u
	if _, err := c.SendMessage(context.Background(), &schemas.SendMessageRequest{Message: msg}); !errors.Is(err, schemas.ErrInvalidParams) {
		t.Fatalf("send: %v", err)
	}
	if _, err := c.SendStreamingMessage(context.Background(), &schemas.SendMessageRequest{Message: msg}); !errors.Is(err, schemas.ErrInvalidParams) {
		t.Fatalf("stream: %v", err)
	}
}

// A card that wants its API key in the URL's query cannot be satisfied
// over gRPC, which has no URL to put it in: the call says so and sends
// nothing.
func TestGRPCCannotCarryAKeyInTheQuery(t *testing.T) {
	card := mustParse(t, `{"name": "q", "description": "d", "version": "1", "skills": [], "capabilities": {},
		"defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
		"supportedInterfaces": [{"url": "127.0.0.1:1", "protocolBinding": "GRPC", "protocolVersion": "1.0"}],
		"securitySchemes": {"key": {"apiKeySecurityScheme": {"location": "query", "name": "api_key"}}},
		"securityRequirements": [{"schemes": {"key": {"list": []}}}]}`)
	creds, err := discovery.NewAuthenticator(discovery.Auth{APIKey: discovery.Secret("k-0123456789")})
	if err != nil {
		t.Fatal(err)
	}
	opts := loopback()
	opts.Credentials = creds
	c, err := discovery.ClientFor(card, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.GetTask(context.Background(), &schemas.GetTaskRequest{ID: "t"}); !errors.Is(err, discovery.ErrNoMatchingCredentials) {
		t.Fatalf("a key for the query over gRPC: %v", err)
	}
}
