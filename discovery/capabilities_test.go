package discovery_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
)

// alephCard is a card that declares no skills: what the agent does is
// only in its answer to GET /capabilities (Aleph's discovery, seed 004).
const alephCard = `{"name":"aleph","description":"an Aleph agent","version":"1.0.0",
 "supportedInterfaces":[{"url":"%s","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],
 "capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[]}`

// alephServer is an agent speaking Aleph's shape on loopback: its card at
// the well-known path (ETag "v1", max-age 60) and, unless capabilities is
// "", that body at /capabilities with capsStatus. It counts requests by
// path.
type alephServer struct {
	*httptest.Server
	mu           sync.Mutex
	capabilities string
	capsStatus   int
	hits         map[string]int
}

func newAlephServer(t *testing.T, capabilities string) *alephServer {
	a := &alephServer{capabilities: capabilities, capsStatus: http.StatusOK, hits: map[string]int{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.hits[r.URL.Path]++
		switch {
		case r.URL.Path == discovery.WellKnownCard:
			w.Header().Set("ETag", `"v1"`)
			w.Header().Set("Cache-Control", "max-age=60")
			if r.Header.Get("If-None-Match") == `"v1"` {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(fmt.Sprintf(alephCard, a.URL)))
		case r.URL.Path == "/capabilities" && a.capabilities != "":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(a.capsStatus)
			_, _ = w.Write([]byte(a.capabilities))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *alephServer) hitsAt(path string) int { a.mu.Lock(); defer a.mu.Unlock(); return a.hits[path] }

var alephCaps = []schemas.Capability{
	{Name: "summarize", Description: "Summarizes a document"},
	{Name: "translate", Description: "Translates text", Tags: []string{"text"}},
}

const alephCapsJSON = `[{"name":"summarize","description":"Summarizes a document","input_schema":{"type":"object"}},
 {"name":"translate","description":"Translates text","tags":["text"]},{"description":"no name, left out"}]`

// Against an agent speaking Aleph's shape: a card without skills is
// resolved with the agent's /capabilities, kept in the cache entry, so a
// second resolution within the card's max-age asks for neither; the
// capabilities become the card's skills for whoever reads skills; a
// revalidation asks again, and keeps what it had when the agent cannot
// tell.
func TestResolverFetchesCapabilitiesOfACardWithoutSkills(t *testing.T) {
	ctx := context.Background()
	a := newAlephServer(t, alephCapsJSON)
	r, b, clk := newResolver(t)

	res, err := r.Resolve(ctx, a.URL)
	if err != nil || res.Source != discovery.FromAgent {
		t.Fatalf("first resolution: %+v %v", res, err)
	}
	if !reflect.DeepEqual(res.Entry.Capabilities, alephCaps) {
		t.Fatalf("capabilities = %+v, want %+v", res.Entry.Capabilities, alephCaps)
	}
	if e, _ := stored(t, b, a.URL); e == nil || !reflect.DeepEqual(e.Capabilities, alephCaps) {
		t.Fatalf("cache entry: %+v", e)
	}
	card := discovery.WithCapabilities(res.Card, res.Entry.Capabilities)
	if len(card.Skills) != 2 || card.Skills[0].ID != "summarize" || card.Skills[0].Name != "summarize" ||
		card.Skills[1].ID != "translate" || card.Skills[1].Description != "Translates text" || len(res.Card.Skills) != 0 {
		t.Fatalf("card with capabilities: skills %+v (resolved card's %+v)", card.Skills, res.Card.Skills)
	}

	clk.advance(30 * time.Second)
	res, err = r.Resolve(ctx, a.URL)
	if err != nil || res.Source != discovery.FromCache || !reflect.DeepEqual(res.Entry.Capabilities, alephCaps) {
		t.Fatalf("within the max-age: %+v %v", res, err)
	}
	if n, c := a.hitsAt("/capabilities"), a.hitsAt(discovery.WellKnownCard); n != 1 || c != 1 {
		t.Fatalf("within the max-age: /capabilities asked %d times, the card %d; want 1 and 1", n, c)
	}

	// Past it: the card is revalidated (304) and the capabilities asked
	// again; an agent that cannot answer them now leaves them as they were.
	clk.advance(time.Minute)
	a.mu.Lock()
	a.capsStatus = http.StatusServiceUnavailable
	a.mu.Unlock()
	res, err = r.Resolve(ctx, a.URL)
	if err != nil || res.Source != discovery.Revalidated || !reflect.DeepEqual(res.Entry.Capabilities, alephCaps) {
		t.Fatalf("revalidated while /capabilities fails: %+v %v", res, err)
	}
	if n := a.hitsAt("/capabilities"); n != 2 {
		t.Fatalf("revalidation: /capabilities asked %d times in all, want 2", n)
	}
}

// An agent without /capabilities (404), or answering something that is
// not Aleph's array there, resolves as before, without capabilities and
// without an error; a card with skills is not asked at all.
func TestResolverWithoutCapabilities(t *testing.T) {
	ctx := context.Background()
	for name, body := range map[string]string{"404": "", "HTML": "<html>hello</html>", "object": `{"capabilities":[]}`} {
		t.Run(name, func(t *testing.T) {
			a := newAlephServer(t, body)
			r, b, _ := newResolver(t)
			res, err := r.Resolve(ctx, a.URL)
			if err != nil || res.Source != discovery.FromAgent || res.Entry.Capabilities != nil || res.Card.Name != "aleph" {
				t.Fatalf("resolution: %+v %v", res, err)
			}
			if e, _ := stored(t, b, a.URL); e == nil || e.Capabilities != nil {
				t.Fatalf("cache entry: %+v", e)
			}
			if n := a.hitsAt("/capabilities"); n != 1 {
				t.Fatalf("/capabilities asked %d times, want 1", n)
			}
			if card := discovery.WithCapabilities(res.Card, res.Entry.Capabilities); len(card.Skills) != 0 {
				t.Fatalf("skills from no capabilities: %+v", card.Skills)
			}
		})
	}
	cs := newCardServer(t) // its card declares a skill
	r, _, _ := newResolver(t)
	if res, err := r.Resolve(ctx, cs.URL); err != nil || res.Entry.Capabilities != nil || cs.hitsAt("/capabilities") != 0 {
		t.Fatalf("a card with skills: %+v %v, /capabilities asked %d times", res, err, cs.hitsAt("/capabilities"))
	}
}

// Both ways: the client's capability discovery reads an a2abus edge's
// GET /capabilities (the default agent at the base URL) and
// /agents/{name}/capabilities (below a card's endpoint when given the
// card's URL): the capabilities of the card the edge serves.
func TestFetcherCapabilitiesFromA2Abus(t *testing.T) {
	ctx := context.Background()
	base := startA2AbusWith(t, edge.Config{DefaultAgent: "echo"})
	f := &discovery.Fetcher{Policy: discovery.Policy{AllowLoopback: true}}
	for _, at := range []string{base, base + "/agents/echo/.well-known/agent-card.json"} {
		fc, err := f.Fetch(ctx, at, "")
		if err != nil {
			t.Fatal(err)
		}
		caps, err := f.Capabilities(ctx, at, &fc.Card)
		if want := schemas.CardCapabilities(&fc.Card); err != nil || len(want) == 0 || !reflect.DeepEqual(caps, want) {
			t.Fatalf("capabilities at %s: %+v %v, want %+v", at, caps, err, want)
		}
	}
}
