package edge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

func listAgents(t *testing.T, base, query string) (int, schemas.AgentList) {
	t.Helper()
	resp, err := http.Get(base + "/a2a/agents" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var l schemas.AgentList
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatalf("GET /a2a/agents%s: %v\n%s", query, err, body)
		}
	}
	return resp.StatusCode, l
}

func names(l schemas.AgentList) []string {
	var out []string
	for _, a := range l.Agents {
		out = append(out, a.Agent)
	}
	return out
}

// waitList polls the listing (an external, TTL-driven condition) until
// cond holds.
func waitList(t *testing.T, base, query, what string, cond func(schemas.AgentList) bool) schemas.AgentList {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, l := listAgents(t, base, query)
		if cond(l) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened; last listing %v", what, names(l))
		}
		time.Sleep(20 * time.Millisecond) // polling an external condition, not synchronising
	}
}

// remoteLike is a definition that describes itself the way a remote agent
// does: its card and health come from Live and change while it runs.
type remoteLike struct {
	mu      sync.Mutex
	health  string
	changed chan struct{}
}

func (r *remoteLike) set(h string) {
	r.mu.Lock()
	r.health = h
	r.mu.Unlock()
	r.changed <- struct{}{}
}

func (r *remoteLike) def() workers.Definition {
	return workers.Definition{
		Name:  "weather",
		Agent: workers.Echo{},
		Live: func() (schemas.AgentCard, *schemas.RemoteAgentStatus) {
			r.mu.Lock()
			defer r.mu.Unlock()
			return schemas.AgentCard{Name: "weather", Description: "forecasts", Version: "2.0.0",
					Skills: []schemas.AgentSkill{{ID: "forecast", Name: "Forecast", Description: "weather forecasts", Tags: []string{"weather", "geo"}}}},
				&schemas.RemoteAgentStatus{URL: "http://127.0.0.1:1/", Health: r.health, CheckedAt: schemas.Now()}
		},
		Changed: r.changed,
	}
}

// The registry lists local and remote agents with the remote one's health,
// answers queries by skill and tag, follows a remote agent's health as it
// changes, counts each agent's workers, and forgets a worker group once
// its heartbeats stop.
func TestAgentRegistryListingQueryAndExpiry(t *testing.T) {
	rl := &remoteLike{health: schemas.HealthOnline, changed: make(chan struct{})}
	h := newHarness(t, harnessOptions{
		bus:    bustest.Options{Config: bus.Config{AgentTTL: 2 * time.Second}},
		agents: []workers.Definition{workers.EchoDefinition("echo"), rl.def()},
		edge:   edge.Config{OpenAdmin: true}, // every caller sees the remote agent's status
	})

	st, all := listAgents(t, h.url, "")
	if st != 200 || len(all.Agents) != 2 {
		t.Fatalf("listing: %d %v", st, names(all))
	}
	echo, weather := all.Agents[0], all.Agents[1]
	if echo.Kind != "local" || echo.Remote != nil || weather.Kind != "remote" || weather.Remote == nil ||
		weather.Remote.Health != schemas.HealthOnline || weather.Version != "2.0.0" {
		t.Fatalf("entries: %+v / %+v", echo, weather)
	}
	// One Runner each: one worker, a remote agent's counted as a local one's.
	if echo.Workers != 1 || weather.Workers != 1 {
		t.Fatalf("workers: echo %d, weather %d; want 1 each", echo.Workers, weather.Workers)
	}
	if weather.SupportedInterfaces[0].URL != h.url+"/agents/weather" {
		t.Fatalf("a remote agent is served through this edge, got %s", weather.SupportedInterfaces[0].URL)
	}

	for _, c := range []struct {
		query string
		want  []string
	}{
		{"?skill=echo", []string{"echo"}},
		{"?skill=forecast", []string{"weather"}},
		{"?tag=demo", []string{"echo"}},
		{"?tag=geo", []string{"weather"}},
		{"?tag=geo&skill=forecast", []string{"weather"}},
		{"?tag=geo&skill=echo", nil},
		{"?skill=nothing", nil},
		{"?kind=remote", []string{"weather"}},
		{"?kind=local", []string{"echo"}},
		{"?health=online", []string{"echo", "weather"}}, // a live local agent is online (issue 30)
	} {
		st, l := listAgents(t, h.url, c.query)
		if got := names(l); st != 200 || len(got) != len(c.want) || (len(got) > 0 && got[0] != c.want[0]) {
			t.Errorf("%s: %d %v, want %v", c.query, st, got, c.want)
		}
		if l.Agents == nil {
			t.Errorf("%s: agents must be an empty list, not null", c.query)
		}
	}
	if st, _ := listAgents(t, h.url, "?skil=echo"); st != http.StatusBadRequest {
		t.Errorf("misspelt query parameter: %d, want 400", st)
	}

	// Health news is registered at once, not at the next heartbeat.
	rl.set(schemas.HealthDegraded)
	waitList(t, h.url, "?health=degraded", "weather degraded", func(l schemas.AgentList) bool { return len(l.Agents) == 1 })

	// Two Runners of an agent are two workers; one that stops is no longer
	// counted once its refreshes are older than the TTL, and the agent
	// disappears once the last one's registration expires.
	workersOf := func(l schemas.AgentList, agent string) int {
		for _, a := range l.Agents {
			if a.Agent == agent {
				return a.Workers
			}
		}
		return -1
	}
	var stops [2]func()
	for i := range stops {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- workers.NewRunner(h.b, workers.EchoDefinition("temp"), workers.Options{ShutdownGrace: time.Second}).Run(ctx)
		}()
		stops[i] = sync.OnceFunc(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
		t.Cleanup(stops[i]) // a failed wait still stops it
	}
	waitList(t, h.url, "", "temp's two workers", func(l schemas.AgentList) bool { return workersOf(l, "temp") == 2 })
	stops[0]()
	waitList(t, h.url, "", "temp down to one worker", func(l schemas.AgentList) bool { return workersOf(l, "temp") == 1 })
	stops[1]()
	l := waitList(t, h.url, "", "temp expired", func(l schemas.AgentList) bool { return len(l.Agents) == 2 })
	if got := names(l); got[0] != "echo" || got[1] != "weather" {
		t.Fatalf("after expiry: %v", got)
	}
	if resp, _ := http.Get(h.url + "/agents/temp/.well-known/agent-card.json"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("expired agent's card: %d", resp.StatusCode)
	}
}
