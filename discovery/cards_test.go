package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
)

func loopbackFetcher() *discovery.Fetcher {
	return &discovery.Fetcher{Policy: discovery.Policy{AllowLoopback: true}}
}

// serveCard answers every request with body (given the server's URL) and
// the headers; it records the requests.
func serveCard(t *testing.T, status int, header http.Header, body func(url string) string) (*httptest.Server, *[]*http.Request) {
	var mu sync.Mutex
	var reqs []*http.Request
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, r.Clone(context.Background()))
		mu.Unlock()
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body(srv.URL)))
	}))
	t.Cleanup(srv.Close)
	return srv, &reqs
}

// Both card shapes resolve: a 1.0 card at the well-known path, and a 0.3
// card found only at the older path, read as 1.0 interfaces. Every request
// names a2abus in its User-Agent.
func TestFetchBothCardShapes(t *testing.T) {
	ctx := context.Background()
	cs := newCardServer(t)
	f := loopbackFetcher()
	got, err := f.Fetch(ctx, cs.URL, "")
	if err != nil || got.Card.Name != "weather" || got.URL != cs.URL+discovery.WellKnownCard || got.ETag != `"v-1.0.0"` ||
		!got.HasMaxAge || got.MaxAge != time.Minute || got.NoStore || got.NotModified || !strings.Contains(string(got.Raw), `"forecast"`) {
		t.Fatalf("1.0 card: %+v %v", got, err)
	}
	eps := discovery.Endpoints(&got.Card)
	want := []discovery.Endpoint{
		{URL: cs.URL + "/rpc", Binding: schemas.BindingJSONRPC, Version: "1.0"},
		{URL: cs.URL + "/rest", Binding: schemas.BindingHTTPJSON, Version: "1.0"},
	}
	if !reflect.DeepEqual(eps, want) {
		t.Fatalf("1.0 endpoints: %+v", eps)
	}
	// Conditional: the ETag gives a 304.
	if got, err := f.Fetch(ctx, cs.URL, `"v-1.0.0"`); err != nil || !got.NotModified || got.ETag != `"v-1.0.0"` || cs.cond.Load() != 1 {
		t.Fatalf("conditional fetch: %+v %v", got, err)
	}

	old := newCardServer(t)
	old.set(func(c *cardServer) {
		c.path = discovery.WellKnownCardLegacy
		c.body = fmt.Sprintf(card03, old.URL, old.URL, old.URL)
	})
	got, err = f.Fetch(ctx, old.URL+"/", "")
	if err != nil || got.URL != old.URL+discovery.WellKnownCardLegacy || got.Card.Name != "old" {
		t.Fatalf("0.3 card: %+v %v", got, err)
	}
	if old.hitsAt(discovery.WellKnownCard) != 1 || old.hitsAt(discovery.WellKnownCardLegacy) != 1 {
		t.Fatalf("0.3 card: the well-known path was not tried first: %v", old.hits)
	}
	// url + preferredTransport become the first interface, additional
	// interfaces follow (the duplicate of url dropped); a2abus speaks 0.3
	// over JSON-RPC only.
	wantIf := []schemas.AgentInterface{
		{URL: old.URL + "/a2a", ProtocolBinding: "JSONRPC", ProtocolVersion: "0.3.0"},
		{URL: old.URL + "/a2a/rest", ProtocolBinding: "HTTP+JSON", ProtocolVersion: "0.3.0"},
	}
	if !reflect.DeepEqual(got.Card.SupportedInterfaces, wantIf) {
		t.Fatalf("0.3 interfaces: %+v", got.Card.SupportedInterfaces)
	}
	eps = discovery.Endpoints(&got.Card)
	if len(eps) != 1 || eps[0] != (discovery.Endpoint{URL: old.URL + "/a2a", Binding: schemas.BindingJSONRPC, Version: "0.3"}) {
		t.Fatalf("0.3 endpoints: %+v", eps)
	}
	// A URL naming a card file is fetched as is.
	if got, err := f.Fetch(ctx, old.URL+discovery.WellKnownCardLegacy, ""); err != nil || got.Card.Name != "old" || old.hitsAt(discovery.WellKnownCard) != 1 {
		t.Fatalf("card URL: %+v %v (hits %v)", got, err, old.hits)
	}
	for _, s := range []*cardServer{cs, old} {
		for _, ua := range s.agents {
			if !strings.HasPrefix(ua, "a2abus/") || !strings.Contains(ua, discovery.Version) {
				t.Fatalf("User-Agent %q does not name a2abus and its version", ua)
			}
		}
	}
}

// The older path is tried when the well-known one has no card (404, 410)
// or answers a page that is not JSON; not when the agent fails (5xx), and
// the error says the most telling thing.
func TestFetchFallback(t *testing.T) {
	ctx := context.Background()
	card := func(u string) string { return fmt.Sprintf(card03, u, u, u) }
	cases := []struct {
		name      string
		wellKnown func(w http.ResponseWriter)
		legacy    bool // the older path serves a card
		wantErr   func(error) bool
		wantHits  int
	}{
		{"404", func(w http.ResponseWriter) { w.WriteHeader(404) }, true, nil, 2},
		{"410", func(w http.ResponseWriter) { w.WriteHeader(410) }, true, nil, 2},
		{"html page", func(w http.ResponseWriter) { _, _ = w.Write([]byte("<!doctype html><p>app</p>")) }, true, nil, 2},
		{"500", func(w http.ResponseWriter) { w.WriteHeader(500) }, true, func(err error) bool {
			var te *discovery.TransportError
			return errors.As(err, &te) && te.Status == 500 && !errors.Is(err, discovery.ErrInvalidCard)
		}, 1},
		{"invalid card", func(w http.ResponseWriter) { _, _ = w.Write([]byte(`{"name":"x"}`)) }, true, func(err error) bool {
			return errors.Is(err, discovery.ErrInvalidCard)
		}, 1},
		{"html page, no older card", func(w http.ResponseWriter) { _, _ = w.Write([]byte("<html>")) }, false, func(err error) bool {
			return errors.Is(err, discovery.ErrInvalidCard) // not the older path's 404
		}, 2},
		{"nothing anywhere", func(w http.ResponseWriter) { w.WriteHeader(404) }, false, func(err error) bool {
			var te *discovery.TransportError
			return errors.As(err, &te) && te.Status == 404 && strings.HasSuffix(te.URL, discovery.WellKnownCardLegacy) && !discovery.IsRetryable(err)
		}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			hits := 0
			var srv *httptest.Server
			srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits++
				mu.Unlock()
				switch {
				case r.URL.Path == discovery.WellKnownCard:
					c.wellKnown(w)
				case r.URL.Path == discovery.WellKnownCardLegacy && c.legacy:
					_, _ = w.Write([]byte(card(srv.URL)))
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			got, err := loopbackFetcher().Fetch(ctx, srv.URL, "")
			if c.wantErr == nil && (err != nil || got.Card.Name != "old") {
				t.Fatalf("fallback: %+v %v", got, err)
			}
			if c.wantErr != nil && (err == nil || !c.wantErr(err)) {
				t.Fatalf("err = %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if hits != c.wantHits {
				t.Fatalf("%d requests, want %d", hits, c.wantHits)
			}
		})
	}
}

// Cards missing what a client needs are refused with ErrInvalidCard.
func TestParseCardRequiredFields(t *testing.T) {
	const u = "https://agents.example"
	good := fmt.Sprintf(card10, "1", u, u)
	if _, err := discovery.ParseCard([]byte(good)); err != nil {
		t.Fatalf("good card: %v", err)
	}
	drop := func(field string) string {
		// Rename the field so the card lacks it.
		return strings.Replace(good, `"`+field+`"`, `"x`+field+`"`, 1)
	}
	cases := map[string]string{
		"not json":                     `<html>`,
		"not an object":                `["name"]`,
		"null":                         `null`,
		"wrong type":                   strings.Replace(good, `"skills":[`, `"skills":"all",[`, 1),
		"no name":                      drop("name"),
		"empty name":                   strings.Replace(good, `"name":"weather"`, `"name":""`, 1),
		"null name":                    strings.Replace(good, `"name":"weather"`, `"name":null`, 1),
		"no description":               drop("description"),
		"no version":                   drop("version"),
		"no skills":                    drop("skills"),
		"no capabilities":              drop("capabilities"),
		"no defaultInputModes":         drop("defaultInputModes"),
		"no defaultOutputModes":        drop("defaultOutputModes"),
		"no interface":                 drop("supportedInterfaces"),
		"empty interfaces":             strings.Replace(strings.Replace(good, u+"/rest", "", 1), `"supportedInterfaces":[`, `"supportedInterfaces":[],"z":[`, 1),
		"relative interface url":       strings.Replace(good, u+"/rpc", "/rpc", 1),
		"interface url not http":       strings.Replace(good, u+"/rpc", "mailto:a@b.c", 1),
		"interface without binding":    strings.Replace(good, `"protocolBinding":"JSONRPC",`, "", 1),
		"0.3 card with a relative url": strings.Replace(fmt.Sprintf(card03, u, u, u), `"url":"`+u+`/a2a"`, `"url":"/a2a"`, 1),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			if c, err := discovery.ParseCard([]byte(body)); !errors.Is(err, discovery.ErrInvalidCard) {
				t.Fatalf("err = %v (card %+v), want ErrInvalidCard", err, c)
			}
		})
	}
}

// A card body over MaxBytes is refused (ErrInvalidCard), one at the cap
// is read.
func TestFetchBodySizeCap(t *testing.T) {
	ctx := context.Background()
	body := func(n int) func(string) string {
		return func(u string) string {
			c := fmt.Sprintf(card10, "1", u, u)
			pad := n - len(c) - len(`,"pad":""`)
			return c[:len(c)-1] + `,"pad":"` + strings.Repeat("x", pad) + `"}`
		}
	}
	const limit = 4096
	at, _ := serveCard(t, 200, nil, body(limit))
	f := loopbackFetcher()
	f.MaxBytes = limit
	if got, err := f.Fetch(ctx, at.URL+"/card.json", ""); err != nil || len(got.Raw) != limit {
		t.Fatalf("card at the cap: %v", err)
	}
	over, _ := serveCard(t, 200, nil, body(limit+1))
	if _, err := f.Fetch(ctx, over.URL+"/card.json", ""); !errors.Is(err, discovery.ErrInvalidCard) {
		t.Fatalf("card over the cap: %v", err)
	}
	// The default cap is 1 MiB.
	huge, _ := serveCard(t, 200, nil, body(1<<20+1))
	if _, err := loopbackFetcher().Fetch(ctx, huge.URL+"/card.json", ""); !errors.Is(err, discovery.ErrInvalidCard) {
		t.Fatalf("card over the default cap: %v", err)
	}
}

// Fetch sends the configured headers and names a2abus; it conditions on the
// ETag it is given.
func TestFetchRequestHeaders(t *testing.T) {
	srv, reqs := serveCard(t, 200, nil, func(u string) string { return fmt.Sprintf(card10, "1", u, u) })
	f := loopbackFetcher()
	f.Header = http.Header{"Authorization": {"Bearer t0k"}, "User-Agent": {"impostor"}}
	if _, err := f.Fetch(context.Background(), srv.URL, `"e1"`); err != nil {
		t.Fatal(err)
	}
	r := (*reqs)[0]
	if r.Header.Get("Authorization") != "Bearer t0k" || r.Header.Get("If-None-Match") != `"e1"` ||
		r.UserAgent() != discovery.UserAgent || r.Header.Get("Accept") != "application/json" || r.Method != http.MethodGet {
		t.Fatalf("request headers: %v", r.Header)
	}
}

// What Cache-Control (and Age) make of a card's freshness.
func TestFetchCacheControl(t *testing.T) {
	cases := []struct {
		cc, age   string
		maxAge    time.Duration
		hasMaxAge bool
		noStore   bool
	}{
		{"", "", 0, false, false},
		{"max-age=60", "", time.Minute, true, false},
		{"public, max-age=300", "", 5 * time.Minute, true, false},
		{"Max-Age=30", "", 30 * time.Second, true, false},
		{`max-age="45"`, "", 45 * time.Second, true, false},
		{"max-age=60, s-maxage=10", "", 10 * time.Second, true, false},
		{"s-maxage=10, max-age=60", "", 10 * time.Second, true, false},
		{"max-age=0", "", 0, true, false},
		{"no-cache", "", 0, true, false},
		{"max-age=600, no-cache", "", 0, true, false},
		{"no-store", "", 0, false, true},
		{"no-store, max-age=60", "", time.Minute, true, true},
		{"max-age=-5", "", 0, false, false},
		{"max-age=abc", "", 0, false, false},
		{"max-age=99999999999999999999", "", 0, false, false},
		{"private, must-revalidate", "", 0, false, false},
		{"max-age=60", "15", 45 * time.Second, true, false},
		{"max-age=60", "90", 0, true, false},
		{"max-age=60", "junk", time.Minute, true, false},
		{"", "15", 0, false, false},
	}
	for _, c := range cases {
		t.Run(c.cc+"/age="+c.age, func(t *testing.T) {
			h := http.Header{}
			if c.cc != "" {
				h.Set("Cache-Control", c.cc)
			}
			if c.age != "" {
				h.Set("Age", c.age)
			}
			srv, _ := serveCard(t, 200, h, func(u string) string { return fmt.Sprintf(card10, "1", u, u) })
			got, err := loopbackFetcher().Fetch(context.Background(), srv.URL, "")
			if err != nil {
				t.Fatal(err)
			}
			if got.MaxAge != c.maxAge || got.HasMaxAge != c.hasMaxAge || got.NoStore != c.noStore {
				t.Fatalf("max-age %v (set %v), no-store %v; want %v (%v), %v", got.MaxAge, got.HasMaxAge, got.NoStore, c.maxAge, c.hasMaxAge, c.noStore)
			}
		})
	}
}

// Failures to fetch are told apart: a refused address, an agent that is
// down, an agent that answers an error status.
func TestFetchErrors(t *testing.T) {
	ctx := context.Background()
	srv, _ := serveCard(t, 503, http.Header{"Retry-After": {"9"}}, func(string) string { return "busy" })
	_, err := loopbackFetcher().Fetch(ctx, srv.URL, "")
	var te *discovery.TransportError
	if !errors.As(err, &te) || te.Status != 503 || te.RetryAfter != 9*time.Second || !discovery.IsRetryable(err) {
		t.Fatalf("503: %v", err)
	}
	// The zero policy refuses loopback before connecting.
	if _, err := (&discovery.Fetcher{}).Fetch(ctx, srv.URL, ""); !errors.Is(err, discovery.ErrForbiddenAddress) || discovery.IsRetryable(err) {
		t.Fatalf("loopback refused: %v", err)
	}
	for _, bad := range []string{"", "agents.example", "ftp://agents.example", "http://"} {
		if _, err := loopbackFetcher().Fetch(ctx, bad, ""); err == nil {
			t.Fatalf("%q: no error", bad)
		}
	}
}

// Endpoints lists what a2abus can speak, best first: 1.0 before 0.3, the
// preferred bindings in order (gRPC last by default, 1.0 only), then the
// card's order; a card that offers only gRPC is spoken over gRPC.
func TestEndpointsOrdering(t *testing.T) {
	in := func(url, binding, version string) schemas.AgentInterface {
		return schemas.AgentInterface{URL: url, ProtocolBinding: binding, ProtocolVersion: version}
	}
	card := &schemas.AgentCard{SupportedInterfaces: []schemas.AgentInterface{
		in("https://a/v03", "JSONRPC", "0.3.0"),
		in("https://a/grpc", "GRPC", "1.0"),
		in("https://a/grpc03", "GRPC", "0.3"),
		in("https://a/rest", "HTTP+JSON", "1.0"),
		in("https://a/v03rest", "HTTP+JSON", "0.3"),
		in("https://a/rpc", "jsonrpc", "1.0.1"),
		in("https://a/rpc2", "JSONRPC", ""),
		in("https://a/v2", "JSONRPC", "2.0"),
		{URL: "https://a/tenant", ProtocolBinding: "HTTP+JSON", ProtocolVersion: "1.0", Tenant: "acme"},
	}}
	ep := func(url, binding, version, tenant string) discovery.Endpoint {
		return discovery.Endpoint{URL: url, Binding: binding, Version: version, Tenant: tenant}
	}
	cases := []struct {
		prefer []string
		want   []discovery.Endpoint
	}{
		{nil, []discovery.Endpoint{
			ep("https://a/rpc", "JSONRPC", "1.0", ""), ep("https://a/rpc2", "JSONRPC", "1.0", ""),
			ep("https://a/rest", "HTTP+JSON", "1.0", ""), ep("https://a/tenant", "HTTP+JSON", "1.0", "acme"),
			ep("https://a/grpc", "GRPC", "1.0", ""),
			ep("https://a/v03", "JSONRPC", "0.3", ""),
		}},
		{[]string{"HTTP+JSON", "JSONRPC"}, []discovery.Endpoint{
			ep("https://a/rest", "HTTP+JSON", "1.0", ""), ep("https://a/tenant", "HTTP+JSON", "1.0", "acme"),
			ep("https://a/rpc", "JSONRPC", "1.0", ""), ep("https://a/rpc2", "JSONRPC", "1.0", ""),
			ep("https://a/v03", "JSONRPC", "0.3", ""),
		}},
		{[]string{"HTTP+JSON"}, []discovery.Endpoint{
			ep("https://a/rest", "HTTP+JSON", "1.0", ""), ep("https://a/tenant", "HTTP+JSON", "1.0", "acme"),
		}},
		{[]string{"GRPC"}, []discovery.Endpoint{ep("https://a/grpc", "GRPC", "1.0", "")}},
		{[]string{"MQTT"}, []discovery.Endpoint{}},
	}
	for _, c := range cases {
		if got := discovery.Endpoints(card, c.prefer...); !reflect.DeepEqual(got, c.want) {
			t.Errorf("prefer %v:\n got  %+v\n want %+v", c.prefer, got, c.want)
		}
	}
	if _, err := discovery.ClientFor(card, discovery.Options{}, "MQTT"); err == nil {
		t.Fatal("ClientFor with nothing to speak")
	}
	c, err := discovery.ClientFor(card, discovery.Options{})
	if err != nil || c.Endpoint() != ep("https://a/rpc", "JSONRPC", "1.0", "") {
		t.Fatalf("ClientFor: %+v %v", c, err)
	}
	onlyGRPC := &schemas.AgentCard{Name: "g", SupportedInterfaces: []schemas.AgentInterface{
		in("https://a/v03", "JSONRPC", "0.3.0"), {URL: "agent.example:50051", ProtocolBinding: "GRPC", ProtocolVersion: "1.0", Tenant: "agents/g"}}}
	g, err := discovery.ClientFor(onlyGRPC, discovery.Options{})
	if err != nil || g.Endpoint() != ep("https://agent.example:50051", "GRPC", "1.0", "agents/g") {
		t.Fatalf("ClientFor a card offering 1.0 over gRPC only: %+v %v", g, err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}
