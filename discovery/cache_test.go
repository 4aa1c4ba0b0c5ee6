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

	"github.com/a2abus/a2abus/bus"
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
 "url":"%s/a2a","preferredTransport":"JSONRPC","additionalInterfaces":[{"url":"%s/a2a","transport":"JSONRPC"},{"url":"%s/a2a/rest","transport":"HTTP+JSON"}],
 "capabilities":{},"defaultInputModes":["text"],"defaultOutputModes":["text"],
 "skills":[{"id":"old","name":"Old","description":"old","tags":["legacy"]}]}`

// cardServer is a minimal independent agent serving its card at one path
// with the caching headers the test sets. It counts requests per path and
// the conditional requests it answered 304.
type cardServer struct {
	*httptest.Server
	mu           sync.Mutex
	path         string // where the card is; default the well-known path
	version      string
	body         string // overrides the card when set
	cacheControl string
	age          string // Age header, when set
	status       int    // when set, answer this instead
	always304    bool
	hits         map[string]int
	cond         atomic.Int64
	agents       []string // user agents seen
}

func newCardServer(t *testing.T) *cardServer {
	cs := &cardServer{path: discovery.WellKnownCard, version: "1.0.0", cacheControl: "max-age=60", hits: map[string]int{}}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		cs.hits[r.URL.Path]++
		cs.agents = append(cs.agents, r.UserAgent())
		if r.URL.Path != cs.path {
			http.NotFound(w, r)
			return
		}
		if cs.status != 0 {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(cs.status)
			_, _ = w.Write([]byte("<html>down for maintenance</html>"))
			return
		}
		body := cs.body
		if body == "" {
			body = fmt.Sprintf(card10, cs.version, cs.URL, cs.URL)
		}
		etag := `"v-` + cs.version + `"`
		w.Header().Set("ETag", etag)
		if cs.cacheControl != "" {
			w.Header().Set("Cache-Control", cs.cacheControl)
		}
		if cs.age != "" {
			w.Header().Set("Age", cs.age)
		}
		if cs.always304 || r.Header.Get("If-None-Match") == etag {
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

// total is the number of requests the server answered.
func (cs *cardServer) total() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	n := 0
	for _, h := range cs.hits {
		n += h
	}
	return n
}

func (cs *cardServer) hitsAt(path string) int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.hits[path]
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newStore(t *testing.T) *bus.Bus {
	_, b := bustest.New(t, bustest.Options{})
	return b
}

func newResolver(t *testing.T) (*discovery.Resolver, *bus.Bus, *clock) {
	b := newStore(t)
	clk := &clock{t: time.Now().Truncate(time.Millisecond)}
	return &discovery.Resolver{
		Fetcher: &discovery.Fetcher{Policy: discovery.Policy{AllowLoopback: true}},
		Store:   b, HardTTL: time.Hour, Now: clk.now, Metrics: b.Metrics(),
	}, b, clk
}

// stored returns the cache entry of url and its revision (0: none).
func stored(t *testing.T, b *bus.Bus, url string) (*schemas.CachedCard, uint64) {
	t.Helper()
	c, rev, err := b.GetCard(context.Background(), url)
	if errors.Is(err, bus.ErrCardNotCached) {
		return nil, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return c, rev
}

// The CardStore contract, against the real A2A_CARDS bucket: absent cards
// are ErrCardNotCached, every write is a new revision, delete is
// idempotent, and a card too large for one message is kept without its
// raw copy (or refused when even the parsed card is too large).
func TestBusCardStoreContract(t *testing.T) {
	ctx := context.Background()
	var store discovery.CardStore = newStore(t)
	const u = "https://agents.example/weather"
	if _, _, err := store.GetCard(ctx, u); !errors.Is(err, bus.ErrCardNotCached) {
		t.Fatalf("absent card: %v", err)
	}
	if err := store.DeleteCard(ctx, u); err != nil {
		t.Fatalf("deleting an absent card: %v", err)
	}
	now := schemas.Timestamp{Time: time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)}
	in := &schemas.CachedCard{URL: u, CardURL: u + discovery.WellKnownCard, ETag: `"e1"`,
		Card: schemas.AgentCard{Name: "weather", Version: "1"}, Raw: []byte(`{"name":"weather"}`),
		FreshUntil: now, FetchedAt: now, CheckedAt: now, LastError: "boom", LastErrorAt: &now}
	if err := store.PutCard(ctx, in); err != nil {
		t.Fatal(err)
	}
	got, rev1, err := store.GetCard(ctx, u)
	if err != nil || got.ETag != `"e1"` || got.Card.Name != "weather" || string(got.Raw) != `{"name":"weather"}` ||
		!got.CheckedAt.Equal(now.Time) || got.LastError != "boom" || !got.LastErrorAt.Equal(now.Time) || rev1 == 0 {
		t.Fatalf("round trip: %+v rev %d %v", got, rev1, err)
	}
	in.ETag = `"e2"`
	if err := store.PutCard(ctx, in); err != nil {
		t.Fatal(err)
	}
	if got, rev2, err := store.GetCard(ctx, u); err != nil || got.ETag != `"e2"` || rev2 <= rev1 {
		t.Fatalf("replace: %+v rev %d→%d %v", got, rev1, rev2, err)
	}
	// Another spelling of a URL is another key: normalising is the
	// resolver's job.
	if _, _, err := store.GetCard(ctx, u+"/"); !errors.Is(err, bus.ErrCardNotCached) {
		t.Fatalf("other key: %v", err)
	}
	// Too large with its raw copy: kept without it.
	big := *in
	big.Raw = []byte(`"` + strings.Repeat("r", 700<<10) + `"`)
	big.Card.Description = strings.Repeat("d", 500<<10)
	if err := store.PutCard(ctx, &big); err != nil {
		t.Fatalf("large card: %v", err)
	}
	if got, _, err := store.GetCard(ctx, u); err != nil || got.Raw != nil || len(got.Card.Description) != 500<<10 {
		t.Fatalf("large card stored as %d raw bytes, %d description bytes, %v", len(got.Raw), len(got.Card.Description), err)
	}
	// Too large even so: refused, the previous entry kept.
	big.Card.Description = strings.Repeat("d", 3<<20)
	if err := store.PutCard(ctx, &big); !errors.Is(err, schemas.ErrInvalidAgentResponse) {
		t.Fatalf("huge card: %v", err)
	}
	if _, _, err := store.GetCard(ctx, u); err != nil {
		t.Fatalf("after a refused write: %v", err)
	}
	if err := store.DeleteCard(ctx, u); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.GetCard(ctx, u); !errors.Is(err, bus.ErrCardNotCached) {
		t.Fatalf("after delete: %v", err)
	}
}

// A fresh card is served from the cache without a request (nor a write),
// to every resolver sharing the bucket and under every spelling of the
// agent's URL.
func TestResolverServesFreshCardsFromTheCache(t *testing.T) {
	ctx := context.Background()
	cs := newCardServer(t)
	r, b, clk := newResolver(t)

	res, err := r.Resolve(ctx, cs.URL)
	if err != nil || res.Source != discovery.FromAgent || res.Card.Version != "1.0.0" || cs.total() != 1 {
		t.Fatalf("first resolve: %+v %v (hits %d)", res, err, cs.total())
	}
	entry, rev := stored(t, b, cs.URL)
	if entry == nil || entry.CardURL != cs.URL+discovery.WellKnownCard || entry.ETag != `"v-1.0.0"` ||
		!entry.FetchedAt.Equal(clk.now()) || !entry.FreshUntil.Equal(clk.now().Add(time.Minute)) || len(entry.Raw) == 0 {
		t.Fatalf("cached entry: %+v", entry)
	}
	clk.advance(30 * time.Second)
	res, err = r.Resolve(ctx, cs.URL)
	if err != nil || res.Source != discovery.FromCache || res.Card.Version != "1.0.0" || cs.total() != 1 {
		t.Fatalf("cache hit: %+v %v (hits %d)", res, err, cs.total())
	}
	if _, rev2 := stored(t, b, cs.URL); rev2 != rev {
		t.Fatalf("a cache hit wrote to the cache (revision %d→%d)", rev, rev2)
	}
	// Another process (resolver) shares the cache, whatever the spelling.
	r2 := *r
	for _, u := range []string{cs.URL, cs.URL + "/", strings.ToUpper(cs.URL[:4]) + cs.URL[4:] + "/#frag"} {
		if res, err := r2.Resolve(ctx, u); err != nil || res.Source != discovery.FromCache {
			t.Fatalf("shared cache, %s: %+v %v", u, res, err)
		}
	}
	if cs.total() != 1 {
		t.Fatalf("hits %d, want 1", cs.total())
	}
	// Not a URL: an error before any request.
	if _, err := r.Resolve(ctx, "ftp://agents.example"); err == nil || errors.Is(err, discovery.ErrNoCard) {
		t.Fatalf("bad URL: %v", err)
	}
	// Every resolution is counted by where its card came from.
	var text strings.Builder
	if err := b.Metrics().WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`a2a_discovery_cache_total{result="fetched"} 1`,
		`a2a_discovery_cache_total{result="cache"} 4`,
		`a2a_discovery_cache_total{result="error"} 1`,
	} {
		if !strings.Contains(text.String(), want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, text.String())
		}
	}
}

// A stale card is revalidated with If-None-Match: a 304 renews it (keeping
// the card and its fetch time), a changed card replaces it, and Refresh
// asks even when the card is fresh.
func TestResolverRevalidatesStaleCards(t *testing.T) {
	ctx := context.Background()
	cs := newCardServer(t)
	r, b, clk := newResolver(t)
	if _, err := r.Resolve(ctx, cs.URL); err != nil {
		t.Fatal(err)
	}
	fetched := clk.now()

	clk.advance(61 * time.Second)
	res, err := r.Resolve(ctx, cs.URL)
	if err != nil || res.Source != discovery.Revalidated || res.Card.Version != "1.0.0" || cs.cond.Load() != 1 || cs.total() != 2 {
		t.Fatalf("revalidation: %+v %v (hits %d, 304s %d)", res, err, cs.total(), cs.cond.Load())
	}
	entry, _ := stored(t, b, cs.URL)
	if !entry.FetchedAt.Equal(fetched) || !entry.CheckedAt.Equal(clk.now()) || !entry.FreshUntil.Equal(clk.now().Add(time.Minute)) {
		t.Fatalf("after 304: %+v", entry)
	}
	if res, _ := r.Resolve(ctx, cs.URL); res.Source != discovery.FromCache || cs.total() != 2 {
		t.Fatalf("after 304: %s", res.Source)
	}
	// Refresh asks although the card is fresh.
	if res, err := r.Refresh(ctx, cs.URL); err != nil || res.Source != discovery.Revalidated || cs.total() != 3 {
		t.Fatalf("refresh: %+v %v", res, err)
	}
	// The card changes: the old ETag no longer matches, the new card
	// replaces the cached one.
	cs.set(func(c *cardServer) { c.version = "1.1.0" })
	clk.advance(2 * time.Minute)
	res, err = r.Resolve(ctx, cs.URL)
	if err != nil || res.Source != discovery.FromAgent || res.Card.Version != "1.1.0" {
		t.Fatalf("changed card: %+v %v", res, err)
	}
	if entry, _ := stored(t, b, cs.URL); entry.Card.Version != "1.1.0" || entry.ETag != `"v-1.1.0"` || !entry.FetchedAt.Equal(clk.now()) {
		t.Fatalf("changed card cached as %+v", entry)
	}
}

// While the agent cannot be reached (5xx, or no answer at all) its cached
// card is served stale with the error recorded, without asking again for
// ErrorBackoff; once the agent answers the error is cleared; past the hard
// TTL nothing is served. A card that is gone (404) is not served stale.
func TestResolverServesStaleIfError(t *testing.T) {
	for _, down := range []struct {
		name string
		fail func(*cardServer)
		want string
	}{
		{"503", func(cs *cardServer) { cs.set(func(c *cardServer) { c.status = http.StatusServiceUnavailable }) }, "503"},
		{"unreachable", func(cs *cardServer) { cs.Close() }, "connect"},
	} {
		t.Run(down.name, func(t *testing.T) {
			ctx := context.Background()
			cs := newCardServer(t)
			r, b, clk := newResolver(t)
			if _, err := r.Resolve(ctx, cs.URL); err != nil {
				t.Fatal(err)
			}
			checked := clk.now()
			down.fail(cs)
			clk.advance(2 * time.Minute)
			res, err := r.Resolve(ctx, cs.URL)
			if err != nil || res.Source != discovery.Stale || res.Card.Name != "weather" || res.Err == nil || !discovery.IsRetryable(res.Err) {
				t.Fatalf("stale-if-error: %+v %v", res, err)
			}
			entry, _ := stored(t, b, cs.URL)
			if !strings.Contains(entry.LastError, down.want) || entry.LastErrorAt == nil || !entry.LastErrorAt.Equal(clk.now()) ||
				!entry.CheckedAt.Equal(checked) {
				t.Fatalf("error not recorded: %+v", entry)
			}
			// Within the back-off, no request: the recorded error is served.
			hits := cs.total()
			clk.advance(5 * time.Second)
			if res, err := r.Resolve(ctx, cs.URL); err != nil || res.Source != discovery.Stale || res.Err == nil || cs.total() != hits {
				t.Fatalf("within back-off: %+v %v (hits %d→%d)", res, err, hits, cs.total())
			}
			// Refresh asks anyway; so does Resolve after the back-off.
			if res, err := r.Refresh(ctx, cs.URL); err != nil || res.Source != discovery.Stale {
				t.Fatalf("refresh while down: %+v %v", res, err)
			}
			clk.advance(30 * time.Minute)
			if res, err := r.Resolve(ctx, cs.URL); err != nil || res.Source != discovery.Stale {
				t.Fatalf("after back-off: %+v %v", res, err)
			}
			if down.name == "503" {
				// The agent is back: revalidated, the error cleared.
				cs.set(func(c *cardServer) { c.status = 0 })
				clk.advance(time.Minute)
				if res, err := r.Resolve(ctx, cs.URL); err != nil || res.Source != discovery.Revalidated {
					t.Fatalf("agent back: %+v %v", res, err)
				}
				if entry, _ := stored(t, b, cs.URL); entry.LastError != "" || entry.LastErrorAt != nil {
					t.Fatalf("error kept after recovery: %+v", entry)
				}
				return
			}
			// Past the hard TTL (an hour after the agent last answered).
			clk.advance(30 * time.Minute)
			_, err = r.Resolve(ctx, cs.URL)
			var te *discovery.TransportError
			if !errors.Is(err, discovery.ErrNoCard) || !errors.As(err, &te) {
				t.Fatalf("past the hard TTL: %v", err)
			}
		})
	}

	t.Run("gone", func(t *testing.T) {
		ctx := context.Background()
		cs := newCardServer(t)
		r, _, clk := newResolver(t)
		if _, err := r.Resolve(ctx, cs.URL); err != nil {
			t.Fatal(err)
		}
		cs.set(func(c *cardServer) { c.path = "/elsewhere" })
		clk.advance(2 * time.Minute)
		if _, err := r.Resolve(ctx, cs.URL); !errors.Is(err, discovery.ErrNoCard) {
			t.Fatalf("card gone: %v", err)
		}
	})
}

// An invalid card is never cached, nor does it replace (or get served as)
// a good cached card.
func TestResolverNeverCachesInvalidCards(t *testing.T) {
	ctx := context.Background()
	cs := newCardServer(t)
	r, b, clk := newResolver(t)

	cs.set(func(c *cardServer) {
		c.body = `{"name":"no interfaces","description":"x","version":"1","capabilities":{},"defaultInputModes":[],"defaultOutputModes":[],"skills":[]}`
	})
	if _, err := r.Resolve(ctx, cs.URL); !errors.Is(err, discovery.ErrInvalidCard) || !errors.Is(err, discovery.ErrNoCard) {
		t.Fatalf("invalid card: %v", err)
	}
	if e, _ := stored(t, b, cs.URL); e != nil {
		t.Fatalf("an invalid card was cached: %+v", e)
	}
	// A good card, then the agent starts serving garbage.
	cs.set(func(c *cardServer) { c.body = "" })
	if _, err := r.Resolve(ctx, cs.URL); err != nil {
		t.Fatal(err)
	}
	_, rev := stored(t, b, cs.URL)
	cs.set(func(c *cardServer) { c.body = `{"name":"broken"`; c.version = "2" })
	clk.advance(2 * time.Minute)
	for _, resolve := range []func(context.Context, string) (*discovery.Resolved, error){r.Resolve, r.Refresh} {
		if res, err := resolve(ctx, cs.URL); !errors.Is(err, discovery.ErrInvalidCard) {
			t.Fatalf("garbage card: %+v %v", res, err)
		}
	}
	if e, rev2 := stored(t, b, cs.URL); e == nil || e.Card.Version != "1.0.0" || rev2 != rev {
		t.Fatalf("the good cached card was touched: %+v (revision %d→%d)", e, rev, rev2)
	}
	// A 304 to a request that was not conditional is not a card either.
	other := newCardServer(t)
	other.set(func(c *cardServer) { c.always304 = true })
	if _, err := r.Resolve(ctx, other.URL); !errors.Is(err, discovery.ErrNoCard) {
		t.Fatalf("unconditional 304: %v", err)
	}
	if e, _ := stored(t, b, other.URL); e != nil {
		t.Fatalf("cached after an unconditional 304: %+v", e)
	}
	// Never reached at all.
	if _, err := r.Resolve(ctx, "http://127.0.0.1:1"); !errors.Is(err, discovery.ErrNoCard) {
		t.Fatalf("unreachable agent: %v", err)
	}
}

// Cache-Control: no-store cards are served but never kept (and drop an
// older cached copy); no-cache cards are revalidated on every call; with
// no max-age DefaultMaxAge applies; Age shortens the freshness.
func TestResolverCacheControl(t *testing.T) {
	ctx := context.Background()
	t.Run("no-store", func(t *testing.T) {
		cs := newCardServer(t)
		r, b, clk := newResolver(t)
		cs.set(func(c *cardServer) { c.cacheControl = "no-store" })
		if res, err := r.Resolve(ctx, cs.URL); err != nil || res.Source != discovery.FromAgent || res.Entry == nil {
			t.Fatalf("no-store: %+v %v", res, err)
		}
		if e, _ := stored(t, b, cs.URL); e != nil {
			t.Fatalf("a no-store card was cached: %+v", e)
		}
		if res, _ := r.Resolve(ctx, cs.URL); res.Source != discovery.FromAgent || cs.total() != 2 {
			t.Fatalf("no-store again: %s, hits %d", res.Source, cs.total())
		}
		// A cacheable card, then the agent says no-store: forgotten.
		cs.set(func(c *cardServer) { c.cacheControl = "max-age=60"; c.version = "2" })
		if _, err := r.Resolve(ctx, cs.URL); err != nil {
			t.Fatal(err)
		}
		cs.set(func(c *cardServer) { c.cacheControl = "no-store"; c.version = "3" })
		clk.advance(2 * time.Minute)
		if res, err := r.Resolve(ctx, cs.URL); err != nil || res.Card.Version != "3" {
			t.Fatalf("no-store over a cached card: %+v %v", res, err)
		}
		if e, _ := stored(t, b, cs.URL); e != nil {
			t.Fatalf("the older card was kept: %+v", e)
		}
	})
	t.Run("no-cache", func(t *testing.T) {
		cs := newCardServer(t)
		r, b, _ := newResolver(t)
		cs.set(func(c *cardServer) { c.cacheControl = "no-cache" })
		if _, err := r.Resolve(ctx, cs.URL); err != nil {
			t.Fatal(err)
		}
		if e, _ := stored(t, b, cs.URL); e == nil {
			t.Fatal("a no-cache card is stored (and revalidated)")
		}
		for i := range 3 {
			if res, err := r.Resolve(ctx, cs.URL); err != nil || res.Source != discovery.Revalidated || cs.cond.Load() != int64(i+1) {
				t.Fatalf("no-cache call %d: %+v %v", i, res, err)
			}
		}
	})
	t.Run("default max-age", func(t *testing.T) {
		cs := newCardServer(t)
		r, _, clk := newResolver(t)
		r.DefaultMaxAge = 2 * time.Minute
		cs.set(func(c *cardServer) { c.cacheControl = "" })
		if _, err := r.Resolve(ctx, cs.URL); err != nil {
			t.Fatal(err)
		}
		clk.advance(time.Minute)
		if res, _ := r.Resolve(ctx, cs.URL); res.Source != discovery.FromCache {
			t.Fatalf("within the default max-age: %s", res.Source)
		}
		clk.advance(90 * time.Second)
		if res, _ := r.Resolve(ctx, cs.URL); res.Source != discovery.Revalidated {
			t.Fatalf("past the default max-age: %s", res.Source)
		}
	})
	t.Run("age", func(t *testing.T) {
		cs := newCardServer(t)
		r, b, clk := newResolver(t)
		cs.set(func(c *cardServer) { c.cacheControl = "public, max-age=100"; c.age = "40" })
		if _, err := r.Resolve(ctx, cs.URL); err != nil {
			t.Fatal(err)
		}
		if e, _ := stored(t, b, cs.URL); !e.FreshUntil.Equal(clk.now().Add(60 * time.Second)) {
			t.Fatalf("fresh until %v, want 60s from now", e.FreshUntil.Sub(clk.now()))
		}
	})
}

// A card found at the older path is revalidated there directly; when it
// moves, discovery from the base URL finds it again.
func TestResolverRevalidatesWhereTheCardWasFound(t *testing.T) {
	ctx := context.Background()
	cs := newCardServer(t)
	cs.set(func(c *cardServer) { c.path = discovery.WellKnownCardLegacy })
	r, b, clk := newResolver(t)
	if res, err := r.Resolve(ctx, cs.URL); err != nil || res.Entry.CardURL != cs.URL+discovery.WellKnownCardLegacy {
		t.Fatalf("legacy card: %+v %v", res, err)
	}
	if cs.hitsAt(discovery.WellKnownCard) != 1 || cs.hitsAt(discovery.WellKnownCardLegacy) != 1 {
		t.Fatalf("hits %v", cs.hits)
	}
	clk.advance(2 * time.Minute)
	if res, err := r.Resolve(ctx, cs.URL); err != nil || res.Source != discovery.Revalidated {
		t.Fatalf("revalidation: %+v %v", res, err)
	}
	if cs.hitsAt(discovery.WellKnownCard) != 1 || cs.hitsAt(discovery.WellKnownCardLegacy) != 2 {
		t.Fatalf("revalidation went through the well-known path: %v", cs.hits)
	}
	// The card moves to the well-known path.
	cs.set(func(c *cardServer) { c.path = discovery.WellKnownCard; c.version = "2" })
	clk.advance(2 * time.Minute)
	if res, err := r.Resolve(ctx, cs.URL); err != nil || res.Source != discovery.FromAgent || res.Card.Version != "2" {
		t.Fatalf("moved card: %+v %v", res, err)
	}
	if e, _ := stored(t, b, cs.URL); e.CardURL != cs.URL+discovery.WellKnownCard {
		t.Fatalf("moved card cached at %s", e.CardURL)
	}
}

// When the cache cannot be reached the resolver still gets the card from
// the agent.
func TestResolverWithoutTheCache(t *testing.T) {
	cs := newCardServer(t)
	r, b, _ := newResolver(t)
	bustest.Abort(b)
	if res, err := r.Resolve(context.Background(), cs.URL); err != nil || res.Source != discovery.FromAgent {
		t.Fatalf("cache down: %+v %v", res, err)
	}
}
