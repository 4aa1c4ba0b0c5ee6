package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// The live agent registry: every worker group puts its AgentRegistration in
// the A2A_AGENTS bucket under the agent name and refreshes it well inside
// the bucket TTL. An agent whose workers are all gone expires and disappears
// from the edge's directory.

// RegisterAgent stores (or refreshes) the registration of an agent.
func (b *Bus) RegisterAgent(ctx context.Context, reg schemas.AgentRegistration) error {
	if !schemas.ValidAgentName(reg.Agent) {
		return fmt.Errorf("bus: register agent: invalid agent name %q", reg.Agent)
	}
	reg.UpdatedAt = *schemas.Now()
	val, err := json.Marshal(reg)
	if err != nil {
		return fmt.Errorf("bus: encode registration: %w", err)
	}
	if _, err := b.agents.Put(ctx, reg.Agent, val); err != nil {
		return errUnavailable("bus: register agent", err)
	}
	return nil
}

// AgentHeartbeat returns how often a registration should be refreshed.
func (b *Bus) AgentHeartbeat() time.Duration { return b.cfg.AgentTTL / 3 }

// AgentDirectory is a process-local, always-current view of the registry,
// kept by one KV watcher so that request paths never read KV for it.
type AgentDirectory struct {
	b     *Bus
	mu    sync.RWMutex
	regs  map[string]schemas.AgentRegistration
	ready chan struct{}
}

// NewAgentDirectory returns a directory; call Run to fill and follow it.
func (b *Bus) NewAgentDirectory() *AgentDirectory {
	return &AgentDirectory{b: b, regs: map[string]schemas.AgentRegistration{}, ready: make(chan struct{})}
}

// Ready is closed once the directory holds the registry's current content.
func (d *AgentDirectory) Ready() <-chan struct{} { return d.ready }

// Run follows the registry until ctx ends.
func (d *AgentDirectory) Run(ctx context.Context) error {
	w, err := d.b.agents.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("bus: watch agents: %w", err)
	}
	defer stopWatcher(w)
	readyOnce := sync.OnceFunc(func() { close(d.ready) })
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("bus: agent watcher closed")
			}
			if e == nil {
				readyOnce()
				continue
			}
			d.mu.Lock()
			if e.Operation() == jetstream.KeyValuePut {
				var reg schemas.AgentRegistration
				if err := json.Unmarshal(e.Value(), &reg); err == nil {
					d.regs[e.Key()] = reg
				}
			} else {
				delete(d.regs, e.Key())
			}
			d.mu.Unlock()
		}
	}
}

// Get returns the registration of an agent.
func (d *AgentDirectory) Get(name string) (schemas.AgentRegistration, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	r, ok := d.regs[name]
	return r, ok
}

// List returns all registrations sorted by agent name.
func (d *AgentDirectory) List() []schemas.AgentRegistration {
	d.mu.RLock()
	out := make([]schemas.AgentRegistration, 0, len(d.regs))
	for _, r := range d.regs {
		out = append(out, r)
	}
	d.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Agent < out[j].Agent })
	return out
}
