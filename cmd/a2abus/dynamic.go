package main

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// dynamicAgents runs the remote agents admins registered at run time (the
// bus's registry bucket) in a serve or worker process: each entry with a
// remote agent gets a worker group and a monitor of its external agent,
// replaced when the entry changes and stopped, its registration removed,
// when the entry goes. A name the process's configuration already uses is
// left to the configuration.
type dynamicAgents struct {
	p       *process
	static  map[string]bool
	mu      sync.Mutex
	running map[string]*dynAgent
}

type dynAgent struct {
	spec string // the entry's remote agent as JSON: what it runs
	stop context.CancelFunc
	done chan struct{}
}

// Run follows the registry until ctx ends, then stops every agent it
// started (their work is handed back, as at shutdown).
func (d *dynamicAgents) Run(ctx context.Context) {
	defer d.stopAll()
	_ = d.p.bus.WatchRegistry(ctx, func(e schemas.RegistryEntry, deleted bool) { d.apply(ctx, e, deleted) })
}

func (d *dynamicAgents) apply(ctx context.Context, e schemas.RegistryEntry, deleted bool) {
	if d.static[e.Agent] {
		if !deleted && e.Remote != nil {
			d.p.log.Warn("a registered remote agent has the name of a configured agent; the configuration's is run", "agent", e.Agent)
		}
		return
	}
	var spec string
	if !deleted && e.Remote != nil {
		b, _ := json.Marshal(e.Remote)
		spec = string(b)
	}
	d.mu.Lock()
	cur := d.running[e.Agent]
	d.mu.Unlock()
	if cur != nil && cur.spec == spec {
		return
	}
	if cur != nil {
		d.stop(e.Agent, cur)
	}
	if spec == "" {
		if cur != nil {
			// Removed for good: its registration goes now, not after
			// its TTL.
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = d.p.bus.UnregisterAgent(uctx, e.Agent)
			cancel()
			d.p.log.Info("registered remote agent removed", "agent", e.Agent)
		}
		return
	}
	if err := d.start(ctx, e.Agent, e.Remote, spec); err != nil {
		d.p.log.Warn("a registered remote agent cannot run", "agent", e.Agent, "err", err)
	}
}

func (d *dynamicAgents) start(ctx context.Context, name string, r *schemas.RemoteAgentSpec, spec string) error {
	// The edge that took the entry checked its variables, but the entry
	// may predate the rule or have come through an edge with another
	// list: this process reads only what its own operator allows.
	if err := r.CheckRemoteEnv(d.p.cfg.RemoteEnvAllow); err != nil {
		return err
	}
	a := remoteOptions{URL: r.URL, Binding: r.Binding, Push: r.Push, Headers: map[string]string{}}
	for k, v := range r.Headers {
		a.Headers[k] = v
	}
	for k, env := range r.HeadersFromEnv {
		if v, ok := os.LookupEnv(env); ok {
			a.Headers[k] = v
		}
	}
	if r.CheckEvery != "" {
		if every, err := time.ParseDuration(r.CheckEvery); err == nil {
			a.CheckEvery = Duration(every)
		}
	}
	def, m, err := d.p.buildRemote(name, a)
	if err != nil {
		return err
	}
	if len(r.Tags) > 0 {
		live := def.Live
		def.Live = func() (schemas.AgentCard, *schemas.RemoteAgentStatus) {
			c, st := live()
			c.Skills = append([]schemas.AgentSkill(nil), c.Skills...) // live's card is shared
			for i := range c.Skills {
				c.Skills[i].Tags = append(append([]string(nil), c.Skills[i].Tags...), r.Tags...)
			}
			if len(c.Skills) == 0 {
				c.Skills = []schemas.AgentSkill{{ID: name, Name: name, Description: c.Description, Tags: r.Tags}}
			}
			return c, st
		}
	}
	actx, stop := context.WithCancel(ctx)
	da := &dynAgent{spec: spec, stop: stop, done: make(chan struct{})}
	runner := workers.NewRunner(d.p.bus, def, workers.Options{ShutdownGrace: time.Duration(d.p.cfg.ShutdownGrace), Registry: d.p.registry(), Logger: d.p.log})
	var wg sync.WaitGroup
	wg.Go(func() { m.Run(actx) })
	wg.Go(func() {
		if err := runner.Run(actx); err != nil {
			d.p.log.Error("registered remote agent stopped", "agent", name, "err", err)
		}
	})
	go func() { wg.Wait(); close(da.done) }()
	d.mu.Lock()
	d.running[name] = da
	d.mu.Unlock()
	d.p.log.Info("registered remote agent running", "agent", name, "remote_url", m.shown)
	return nil
}

func (d *dynamicAgents) stop(name string, da *dynAgent) {
	da.stop()
	<-da.done
	d.mu.Lock()
	if d.running[name] == da {
		delete(d.running, name)
	}
	d.mu.Unlock()
}

func (d *dynamicAgents) stopAll() {
	d.mu.Lock()
	all := make(map[string]*dynAgent, len(d.running))
	for k, v := range d.running {
		all[k] = v
	}
	d.mu.Unlock()
	for name, da := range all {
		d.stop(name, da)
	}
}
