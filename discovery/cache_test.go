package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
)

const card10 = `{"name":"weather","description":"forecasts","version":"%s",
 "supportedInterfaces":[{"url":"%s/rpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"},
                        {"url":"%s/rest","protocolBinding":"HTTP+JSON","protocolVersion":"1.0"}],
 "capabilities":{"streaming":true},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],
 "skills":[{"id":"forecast","name":"Forecast","description":"weather","tags":["weather"]}]}`

const card03 = `{"name":"old","description":"a 0.3 agent","version":"0.9","protocolVersion":"0.3.0",
 "url":"%s/a2a","preferredTransport":"JSONRPC","additionalInterfaces":[{"url":"%s/a2a","transport":"JSONRPC"}],
 "capabilities":{},"defaultInputModes":["text"],"defaultOutputModes":["text"],
 "skills":[{"id":"old","name":"Old","description":"old","tags":["legacy"]}]}`

// cardServer is a minimal independent agent serving its card with the
// caching headers the test sets; it counts requests and conditional hits.
type cardServer struct {
	*httptest.Server
	mu           sync.Mutex
	version      string
	body         string // overrides the card when set
	cacheControl string
	status       int // when set, answer this instead
	hits, cond   atomic.Int64
	agents       []string // user agents seen
}

func newCardServer(t *testing.T) *cardServer {
	cs := &cardServer{version: "1.0.0", cacheControl: "max-age=60"}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		cs.hits.Add(1)
		cs.agents = append(cs.agents, r.UserAgent())
		if r.URL.Path != discovery.WellKnownCard {
			http.NotFound(w, r)
			return
		}
		if cs.status != 0 {
			w.WriteHeader(cs.status)
			return
		}
		body := cs.body
		if body == "" {
			body = fmt.Sprintf(card10, cs.version, cs.URL, cs.URL)
		}
		etag := `"v-` + cs.version + `"`
		w.Header().Set("ETag", etag)
		w.Header().Set("Cache-Control", cs.cacheControl)
		if r.Header.Get("If-None-Match") == etag {
			cs.cond.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(cs.Close)
	return cs
}

func (cs *cardServer) set(f func(*cardServer)) { cs.mu.Lock(); f(cs); cs.mu.Unlock() }

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newResolver(t *testing.T) (*discovery.Resolver, *clock) {
	_, b := bustest.New(t, bustest.Options{})
	clk := &clock{t: time.Now()}
	return &discovery.Resolver{
		Fetcher: &discovery.Fetcher{Policy: discovery.Policy{AllowLoopback: true}},
		Store:   b, HardTTL: time.Hour, Now: clk.now,
	}, clk
}

// The cache in KV: a fresh card is served without asking the agent; a stale
// one is revalidated with If-None-Match (304); an unreachable agent's card
// is served stale until the hard TTL, with the error recorded; a changed
// card replaces the cached one.
func TestResolverCacheFreshnessRevalidationAndStaleIfError(t *testing.T) {
	ctx := context.Background()
	cs := newCardServer(t)
	r, clk := newResolver(t)

	res, err := r.Resolve(ctx, cs.URL)
	if err != nil || res.Source != discovery.FromAgent || res.Card.Version != "1.0.0" || cs.hits.Load() != 1 {
		t.Fatalf("first resolve: %+v %v (hits %d)", res, err, cs.hits.Load())
	}
	// Fresh (max-age 60): from the cache, no request.
	clk.advance(30 * time.Second)
	res, err = r.Resolve(ctx, cs.URL)
	if err != nil || res.Source != discovery.FromCache || cs.hits.Load() != 1 {
		t.Fatalf("cache hit: %+v %v (hits %d)", res, err, cs.hits.Load())
	}
	// A second resolver (another process) shares the cache.
	r2 := *r
	if res, err := r2.Resolve(ctx, cs.URL); err != nil || res.Source != discovery.FromCache || cs.hits.Load() != 1 {
		t.Fatalf("shared cache: %+v %v", res, err)
	}
	// Stale: conditional GET, answered 304.
	clk.advance(time.Minute)
	res, err = r.Resolve(ctx, cs.URL)
	if err != nil || res.Source != discovery.Revalidated || cs.cond.Load() != 1 || cs.hits.Load() != 2 {
		t.Fatalf("revalidation: %+v %v (hits %d, 304s %d)", res, err, cs.hits.Load(), cs.cond.Load())
	}
	// Fresh again after the 304.
	if res, _ := r.Resolve(ctx, cs.URL); res.Source != discovery.FromCache {
		t.Fatalf("after 304: %s", res.Source)
	}
	// Refresh asks even when fresh; a changed card replaces the cached one.
	cs.set(func(c *cardServer) { c.version = "1.1.0" })
	res, err = r.Refresh(ctx, cs.URL)
	if err != nil || res.Source != discovery.FromAgent || res.Card.Version != "1.1.0" {
		t.Fatalf("changed card: %+v %v", res, err)
	}
	// The agent fails: the cached card is served stale, the error kept.
	cs.set(func(c *cardServer) { c.status = http.StatusServiceUnavailable })
	res, err = r.Refresh(ctx, cs.URL)
	if err != nil || res.Source != discovery.Stale || res.Card.Version != "1.1.0" || res.Err == nil || !strings.Contains(res.Entry.LastError, "503") {
		t.Fatalf("stale-if-error (503): %+v %v", res, err)
	}
	// Down altogether: still stale-if-error within the hard TTL...
	cs.Close()
	clk.advance(50 * time.Minute)
	if res, err := r.Refresh(ctx, cs.URL); err != nil || res.Source != discovery.Stale {
		t.Fatalf("stale-if-error (down): %+v %v", res, err)
	}
	// ...and nothing past it.
	clk.advance(20 * time.Minute)
	if _, err := r.Refresh(ctx, cs.URL); !errors.Is(err, discovery.ErrNoCard) {
		t.Fatalf("past the hard TTL: %v", err)
	}
}

// An invalid card is never cached, nor does it replace a good cached card;
// no-store is honoured; an agent never reached has no card at all.
func TestResolverNeverCachesInvalidCards(t *testing.T) {
	ctx := context.Background()
	cs := newCardServer(t)
	r, clk := newResolver(t)
	store := r.Store

	cs.set(func(c *cardServer) {
		c.body = `{"name":"no interfaces","description":"x","version":"1","capabilities":{},"defaultInputModes":[],"defaultOutputModes":[],"skills":[]}`
	})
	if _, err := r.Resolve(ctx, cs.URL); !errors.Is(err, discovery.ErrInvalidCard) || !errors.Is(err, discovery.ErrNoCard) {
		t.Fatalf("invalid card: %v", err)
	}
	if _, err := store.GetCard(ctx, cs.URL); err == nil {
		t.Fatal("an invalid card was cached")
	}
	// A good card, then the agent starts serving garbage.
	cs.set(func(c *cardServer) { c.body = "" })
	if _, err := r.Resolve(ctx, cs.URL); err != nil {
		t.Fatal(err)
	}
	cs.set(func(c *cardServer) { c.body = `{"name":"broken"`; c.version = "2" })
	clk.advance(2 * time.Minute)
	if _, err := r.Resolve(ctx, cs.URL); !errors.Is(err, discovery.ErrInvalidCard) {
		t.Fatalf("garbage card: %v", err)
	}
	if c, err := store.GetCard(ctx, cs.URL); err != nil || c.Card.Version != "1.0.0" {
		t.Fatalf("the good cached card was replaced: %+v %v", c, err)
	}
	// no-store: served, not cached.
	other := newCardServer(t)
	other.set(func(c *cardServer) { c.cacheControl = "no-store" })
	if res, err := r.Resolve(ctx, other.URL); err != nil || res.Source != discovery.FromAgent {
		t.Fatalf("no-store: %+v %v", res, err)
	}
	if _, err := store.GetCard(ctx, other.URL); err == nil {
		t.Fatal("a no-store card was cached")
	}
	// Never reached.
	if _, err := r.Resolve(ctx, "http://127.0.0.1:1"); !errors.Is(err, discovery.ErrNoCard) {
		t.Fatalf("unreachable agent: %v", err)
	}
}

// Both card shapes resolve: a 1.0 card, and a 0.3 card found only at the
// older well-known path, read as 1.0 interfaces; every request names
// a2abus in its User-Agent.
func TestFetchBothCardShapes(t *testing.T) {
	ctx := context.Background()
	cs := newCardServer(t)
	f := &discovery.Fetcher{Policy: discovery.Policy{AllowLoopback: true}}
	got, err := f.Fetch(ctx, cs.URL, "")
	if err != nil || got.Card.Name != "weather" || got.URL != cs.URL+discovery.WellKnownCard || got.MaxAge != time.Minute || got.ETag == "" {
		t.Fatalf("1.0 card: %+v %v", got, err)
	}
	eps := discovery.Endpoints(&got.Card)
	if len(eps) != 2 || eps[0].Binding != schemas.BindingJSONRPC || eps[0].URL != cs.URL+"/rpc" || eps[1].Binding != schemas.BindingHTTPJSON {
		t.Fatalf("1.0 endpoints: %+v", eps)
	}

	var old *httptest.Server
	old = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != discovery.WellKnownCardLegacy {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, card03, old.URL, old.URL)
	}))
	defer old.Close()
	got, err = f.Fetch(ctx, old.URL, "")
	if err != nil || got.URL != old.URL+discovery.WellKnownCardLegacy || got.Card.Name != "old" {
		t.Fatalf("0.3 card: %+v %v", got, err)
	}
	eps = discovery.Endpoints(&got.Card)
	if len(eps) != 1 || eps[0].URL != old.URL+"/a2a" || !strings.HasPrefix(eps[0].Version, "0.3") || eps[0].Binding != schemas.BindingJSONRPC {
		t.Fatalf("0.3 endpoints: %+v", eps)
	}
	for _, ua := range cs.agents {
		if !strings.HasPrefix(ua, "a2abus/") {
			t.Fatalf("User-Agent %q does not name a2abus", ua)
		}
	}
}

// Cards missing what a client needs are refused with ErrInvalidCard, and so
// is a body over the size cap.
func TestFetchRejectsInvalidCards(t *testing.T) {
	ctx := context.Background()
	good := func(url string) string { return fmt.Sprintf(card10, "1", url, url) }
	cases := map[string]func(url string) string{
		"not json":        func(string) string { return `<html>` },
		"no name":         func(u string) string { return strings.Replace(good(u), `"name":"weather",`, "", 1) },
		"no skills":       func(u string) string { return strings.Replace(good(u), `"skills"`, `"skillz"`, 1) },
		"no capabilities": func(u string) string { return strings.Replace(good(u), `"capabilities"`, `"caps"`, 1) },
		"relative url":    func(u string) string { return strings.ReplaceAll(good(u), u+"/rpc", "/rpc") },
		"no interface":    func(u string) string { return strings.Replace(good(u), `"supportedInterfaces"`, `"interfaces"`, 1) },
		"too big": func(u string) string {
			return good(u)[:len(good(u))-1] + `,"pad":"` + strings.Repeat("x", 2<<20) + `"}`
		},
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			var srv *httptest.Server
			srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte(body(srv.URL)))
			}))
			defer srv.Close()
			f := &discovery.Fetcher{Policy: discovery.Policy{AllowLoopback: true}}
			if _, err := f.Fetch(ctx, srv.URL, ""); !errors.Is(err, discovery.ErrInvalidCard) {
				t.Fatalf("err = %v, want ErrInvalidCard", err)
			}
		})
	}
}
