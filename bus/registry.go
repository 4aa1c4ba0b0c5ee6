package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// The live agent registry: every worker group puts its AgentRegistration in
// the A2A_AGENTS bucket under the agent name and refreshes it well inside
// the bucket TTL. An agent whose workers are all gone expires and disappears
// from the edge's directory.

// RegisterAgent stores (or refreshes) the registration of an agent. Its
// CardSince is the stored registration's when that holds the same card
// (whichever worker of the agent stored it), else now. The kept date is
// written only over the registration it was read from (a compare-and-swap
// on its revision): a card another worker stored meanwhile is replaced
// with a date of now, so the date never goes back while the card changes.
func (b *Bus) RegisterAgent(ctx context.Context, reg schemas.AgentRegistration) error {
	if !schemas.ValidAgentName(reg.Agent) {
		return fmt.Errorf("bus: register agent: invalid agent name %q", reg.Agent)
	}
	reg.UpdatedAt = *schemas.Now()
	reg.CardSince = &reg.UpdatedAt
	since, rev := b.cardSince(ctx, reg)
	if since != nil {
		reg.CardSince = since
		val, err := json.Marshal(reg)
		if err != nil {
			return fmt.Errorf("bus: encode registration: %w", err)
		}
		if _, err := b.agents.Update(ctx, reg.Agent, val, rev); err == nil {
			return nil
		}
		reg.CardSince = &reg.UpdatedAt // changed meanwhile, or the write failed: as a new card
	}
	val, err := json.Marshal(reg)
	if err != nil {
		return fmt.Errorf("bus: encode registration: %w", err)
	}
	if _, err := b.agents.Put(ctx, reg.Agent, val); err != nil {
		return errUnavailable("bus: register agent", err)
	}
	return nil
}

// cardSince is the CardSince of the stored registration of reg's agent,
// and that registration's revision, if it holds reg's card, else nil. A
// failed read is nil too: the card then reads as changed now, which costs
// clients a fetch, never a stale card.
func (b *Bus) cardSince(ctx context.Context, reg schemas.AgentRegistration) (*schemas.Timestamp, uint64) {
	e, err := b.agents.Get(ctx, reg.Agent)
	if err != nil {
		return nil, 0
	}
	var stored schemas.AgentRegistration
	if readJSON(e.Value(), &stored) != nil || stored.CardSince == nil {
		return nil, 0
	}
	was, err1 := json.Marshal(stored.Card)
	now, err2 := json.Marshal(reg.Card)
	if err1 != nil || err2 != nil || !bytes.Equal(was, now) {
		return nil, 0
	}
	return stored.CardSince, e.Revision()
}

// AgentHeartbeat returns how often a registration should be refreshed.
func (b *Bus) AgentHeartbeat() time.Duration { return b.cfg.AgentTTL / 3 }

// AgentDirectory is a process-local, always-current view of the registry,
// kept by one follower of the bucket so that request paths never read KV
// for it. The follower replaces a consumer lost with a node within a second
// or two, well inside AgentTTL, so a node loss does not make agents vanish.
//
// An agent whose workers are gone stops refreshing its registration. The
// bucket's TTL removes the stored value, but JetStream tells watchers
// nothing when a value ages out, so the directory expires entries itself:
// a registration not refreshed for AgentTTL (by this process's clock, which
// makes it immune to skew between machines) is no longer listed.
type AgentDirectory struct {
	b    *Bus
	f    *follower
	mu   sync.RWMutex
	regs map[string]dirEntry
	// maint is the maintenance reason of agents an admin took out of
	// service (BucketRegistry).
	maint map[string]string
	ready chan struct{}
	now   func() time.Time
}

type dirEntry struct {
	reg  schemas.AgentRegistration
	seen time.Time // when this process last saw it refreshed
	// instances are the workers (Runners, by their registration's
	// Instance) seen refreshing it, and when each last was: every
	// refresh passes through the follower, so those seen within AgentTTL
	// are the agent's live workers (Workers).
	instances map[string]time.Time
}

// NewAgentDirectory returns a directory; call Run to fill and follow it.
func (b *Bus) NewAgentDirectory() *AgentDirectory {
	return &AgentDirectory{
		b:    b,
		f:    b.newFollower("agents", kvStream(schemas.BucketAgents), jetstream.DeliverLastPerSubjectPolicy, kvPrefix(schemas.BucketAgents)+">"),
		regs: map[string]dirEntry{}, maint: map[string]string{}, ready: make(chan struct{}), now: time.Now,
	}
}

func (d *AgentDirectory) live(e dirEntry) bool { return d.now().Sub(e.seen) < d.b.cfg.AgentTTL }

// prune forgets expired entries, so the map is bounded by the live agents.
func (d *AgentDirectory) prune() {
	d.mu.Lock()
	now := d.now()
	for k, e := range d.regs {
		if !d.live(e) {
			delete(d.regs, k)
			continue
		}
		for i, seen := range e.instances {
			if now.Sub(seen) >= d.b.cfg.AgentTTL {
				delete(e.instances, i)
			}
		}
	}
	d.mu.Unlock()
}

// Ready is closed once the directory holds the registry's current content.
func (d *AgentDirectory) Ready() <-chan struct{} { return d.ready }

// Following reports whether the directory currently has a live consumer:
// it is false from when the consumer is lost (a node died, the connection
// moved) until a replacement consumes. Entries age meanwhile; readiness
// should follow it.
func (d *AgentDirectory) Following() bool { return d.f.Following() }

// NotFollowingFor is how long ago the live consumer was lost: 0 while
// following. Readiness allows a moment of it (every reconnect replaces the
// consumer) but not a lost node.
func (d *AgentDirectory) NotFollowingFor() time.Duration { return d.f.NotFollowingFor() }

// Run follows the registry until ctx ends; it returns nil then. It keeps
// trying while the bus is unreachable.
func (d *AgentDirectory) Run(ctx context.Context) error {
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() {
		tick := time.NewTicker(d.b.cfg.AgentTTL)
		defer tick.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
				d.prune()
			}
		}
	})
	// Maintenance comes from the run-time registry.
	wg.Go(func() {
		_ = d.b.WatchRegistry(pctx, func(e schemas.RegistryEntry, deleted bool) {
			d.mu.Lock()
			defer d.mu.Unlock()
			if deleted || e.Maintenance == "" {
				delete(d.maint, e.Agent)
				return
			}
			d.maint[e.Agent] = e.Maintenance
		})
	})
	prefix := kvPrefix(schemas.BucketAgents)
	return d.f.run(ctx, func(m followMsg) {
		key := strings.TrimPrefix(m.Subject, prefix)
		d.mu.Lock()
		defer d.mu.Unlock()
		if m.Op != jetstream.KeyValuePut {
			delete(d.regs, key)
			return
		}
		var reg schemas.AgentRegistration
		if err := json.Unmarshal(m.Value, &reg); err != nil {
			return
		}
		// An initial value (the registry as it was when the directory
		// started) may be long stale: it starts out as old as the server
		// says it is. Later updates are fresh by definition, so clock skew
		// between machines cannot expire them.
		seen := d.now()
		if m.Initial {
			if age := time.Since(m.Stored); age > 0 {
				seen = seen.Add(-age)
			}
		}
		e := d.regs[key]
		if e.instances == nil {
			e.instances = map[string]time.Time{}
		}
		e.reg, e.seen = reg, seen
		e.instances[reg.Instance] = seen
		d.regs[key] = e
	}, func() { close(d.ready) })
}

// Get returns the registration of an agent.
func (d *AgentDirectory) Get(name string) (schemas.AgentRegistration, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	e, ok := d.regs[name]
	if !ok || !d.live(e) {
		return schemas.AgentRegistration{}, false
	}
	reg := e.reg
	reg.Maintenance = d.maint[name]
	return reg, true
}

// Workers returns how many workers of agent refreshed its registration
// within AgentTTL: distinct Instances, each Runner having its own. A
// directory that just started knows only the last writer's until every
// worker's next refresh (AgentHeartbeat).
func (d *AgentDirectory) Workers(agent string) int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	e, ok := d.regs[agent]
	if !ok || !d.live(e) {
		return 0
	}
	n, now := 0, d.now()
	for _, seen := range e.instances {
		if now.Sub(seen) < d.b.cfg.AgentTTL {
			n++
		}
	}
	return n
}

// List returns all registrations sorted by agent name.
func (d *AgentDirectory) List() []schemas.AgentRegistration {
	d.mu.RLock()
	out := make([]schemas.AgentRegistration, 0, len(d.regs))
	for _, e := range d.regs {
		if d.live(e) {
			reg := e.reg
			reg.Maintenance = d.maint[reg.Agent]
			out = append(out, reg)
		}
	}
	d.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Agent < out[j].Agent })
	return out
}
