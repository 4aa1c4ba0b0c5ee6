package main

// The HTTP listeners and the NATS server of one process share its limit on
// open files (RLIMIT_NOFILE): every connection, store file and pipe is a
// file descriptor. A flood of HTTP connections that took them all would
// leave the embedded server unable to accept its clients or open a store
// block, and a flood of NATS clients would leave the edge unable to
// accept. So at start-up the process raises its soft limit as far as it
// may, and splits it: HTTP connections get at most what is left beside
// --fd-reserve, the embedded server's clients at most half of what is
// left beside the HTTP caps, the rest stays for files.

// opsMaxConns caps the connections of the metrics and profiler listeners
// each: they serve a scraper or a person, not clients.
const opsMaxConns = 32

// connPlan is how the process's file descriptors are shared out.
type connPlan struct {
	// soft and hard are RLIMIT_NOFILE after start-up; 0 where unknown
	// (then the caps are the configured ones).
	soft, hard uint64
	// edge and perAddr cap the edge listener (0: none).
	edge, perAddr int
	// streams caps the edge's SSE streams (0: none): below edge by
	// streamReserve.
	streams int
	// nats caps the embedded server's clients (0: NATS's default).
	nats int
	// lowered says the file descriptors lowered --max-connections.
	lowered bool
}

// planConns shares soft file descriptors out (see the top of this file)
// for cfg's caps, the number of ops listeners (metrics, profiler) and,
// with embedded, the embedded NATS server.
func planConns(soft, hard uint64, cfg HTTPLimits, opsListeners int, embedded bool) connPlan {
	p := connPlan{soft: soft, hard: hard, edge: cfg.MaxConnections, perAddr: cfg.MaxConnectionsPerAddr}
	if soft > 0 {
		limit := int(min(soft, 1<<30))
		// What HTTP may take: everything beside the reserve, but never
		// less than half the limit, or a low limit would leave the edge
		// nothing.
		http := max(limit-cfg.FDReserve, limit/2) - opsListeners*opsMaxConns
		if p.edge == 0 || p.edge > http {
			p.lowered = p.edge != 0
			p.edge = max(http, 1)
		}
		if embedded {
			p.nats = max((limit-p.edge-opsListeners*opsMaxConns)/2, 1)
		}
	}
	if p.perAddr > 0 && p.edge > 0 {
		p.perAddr = min(p.perAddr, p.edge)
	}
	if p.edge > 0 {
		p.streams = p.edge - streamReserve(p.edge)
		if cfg.MaxStreams > 0 {
			p.streams = min(cfg.MaxStreams, p.streams)
		}
	}
	return p
}

// streamReserve is how many of an edge's conns connections are never SSE
// streams: a stream is held as long as its task runs and nothing cuts
// it, so a pool that streams could fill would turn away every other
// request, /healthz included, for as long as the streams last. An eighth
// of the pool, at most 64: enough for callers' requests and an
// orchestrator's probes while the rest is held, small enough that an
// edge sized for many subscribers keeps nearly all of it for them.
func streamReserve(conns int) int { return max(min(conns/8, 64), 1) }
