package bus

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// Whether the bus takes writes. A process can be connected to NATS, and
// its followers can go on consuming, while nothing it writes would be
// stored: JetStream disabled on its server (the server does that itself
// when its store runs out of space or cannot be written), a stream whose
// cluster lost its leader or a majority of its replicas (the process's
// node cut off from the others), a connection that carries nothing any
// more but has not noticed yet. Every request would then wait out its
// retries and fail; readiness must say so before a request has to.

// checkWritable asks the leader of each stream an edge writes whether it
// is there to store a write: it returns nil if every one answers and, in
// a cluster, has a majority of its replicas (the leader included) online.
// Otherwise it returns an error matching schemas.ErrUnavailable naming
// the first stream that cannot, or one wrapping ctx's error. It asks, it
// does not write: one stream-info request per stream.
func (b *Bus) checkWritable(ctx context.Context) error {
	for _, name := range writableStreams {
		s, err := b.js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("%w: %w", schemas.Errorf(schemas.ErrUnavailable, "the bus cannot store writes to %s", name), err)
		}
		if c := s.CachedInfo().Cluster; c != nil && !quorate(c) {
			return schemas.Errorf(schemas.ErrUnavailable, "the bus cannot store writes to %s: no leader with a majority of its %d replicas (leader %q)", name, len(c.Replicas)+1, c.Leader)
		}
	}
	return nil
}

// quorate reports whether a replicated stream has a leader and a majority
// of its replicas, the leader included, online.
func quorate(c *jetstream.ClusterInfo) bool {
	if c.Leader == "" {
		return false
	}
	online := 1
	for _, p := range c.Replicas {
		if p != nil && !p.Offline {
			online++
		}
	}
	return online > (len(c.Replicas)+1)/2
}

// WriteProbe asks checkWritable every probeEvery, so readiness follows
// whether the bus takes writes without a request having to find out. It
// records a2a_bus_writable (1 or 0) and logs each change.
type WriteProbe struct {
	b       *Bus
	every   time.Duration
	timeout time.Duration
	ready   chan struct{}
	once    sync.Once
	// failingSince is the unix nanoseconds of the first failed probe after
	// the last good one; 0 while the last probe succeeded.
	failingSince atomic.Int64
	gauge        Gauge
}

// Probe timing: asked every second, each round bounded by two (a stalled
// connection answers nothing, so the bound is what detects it).
const (
	probeEvery   = time.Second
	probeTimeout = 2 * time.Second
)

// NewWriteProbe returns a probe of b; call Run.
func (b *Bus) NewWriteProbe() *WriteProbe {
	return &WriteProbe{
		b: b, every: probeEvery, timeout: probeTimeout, ready: make(chan struct{}),
		gauge: b.cfg.Metrics.Gauge("a2a_bus_writable", "1 while the streams this process writes have a leader that can store writes, 0 while they do not."),
	}
}

// Run probes until ctx ends; it returns nil then.
func (p *WriteProbe) Run(ctx context.Context) error {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		p.probe(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (p *WriteProbe) probe(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, p.timeout)
	err := p.b.checkWritable(pctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		if at := p.failingSince.Swap(0); at != 0 {
			p.b.log.Info("the bus takes writes again", "after", time.Since(time.Unix(0, at)).Round(time.Millisecond).String())
		}
		p.gauge.Set(1)
		p.once.Do(func() { close(p.ready) })
		return
	}
	if p.failingSince.CompareAndSwap(0, time.Now().UnixNano()) {
		p.b.log.Warn("the bus does not take writes", "err", err)
	}
	p.gauge.Set(0)
}

// Ready is closed after the first probe that found the bus writable.
func (p *WriteProbe) Ready() <-chan struct{} { return p.ready }

// NotWritableFor is how long the probes have been failing: 0 while the
// last one succeeded (or before the first one failed). A stalled probe
// counts as failed only when its bound runs out.
func (p *WriteProbe) NotWritableFor() time.Duration {
	if at := p.failingSince.Load(); at != 0 {
		return time.Since(time.Unix(0, at))
	}
	return 0
}
