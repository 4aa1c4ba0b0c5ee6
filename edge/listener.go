package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2abus/a2abus/bus"
)

// An HTTP listener of an a2abus process — the edge's A2A port, the metrics
// listener, the profiler — is the one place a client on the network holds
// the process's resources before any handler decides anything: a
// connection is a file descriptor and a goroutine, a request head is
// memory, and a client that sends slowly keeps both. Listen owns those
// bounds for every listener alike, so none can be forgotten:
//
//   - how long a request head may take (ReadHeaderTimeout: a client that
//     trickles its headers, slowloris, is cut), how long a body may take
//     after it (ReadBodyTimeout), how long an idle keep-alive connection is
//     kept (IdleTimeout), how large a head may be (MaxHeaderBytes);
//   - how many connections may be open, in all and from one source address
//     (MaxConns, MaxConnsPerAddr), enforced at accept: a connection over a
//     cap is closed at once (plain HTTP first gets a canned 503) and accept
//     goes on, so the listener serves again the moment a flood stops;
//   - how the pool of MaxConns is shared when a flood fills it: each
//     address to its fair share (fairshare.go), and an address holding
//     fewer than shareFloor connections — another caller, an
//     orchestrator's /healthz and /readyz probe — is let in even into a
//     full pool, in the place of the oldest idle connection of the heaviest
//     address (connLimiter.evictable);
//   - a shutdown that cannot be held past its grace by streams or blocking
//     calls (Stop).
//
// Responses are not bounded here: a stream (SSE) or a blocking call lasts
// as long as its own bounds allow (Config.StreamWriteTimeout bounds each
// stream write, Config.BlockingTimeout a blocking call).

// HTTPConfig bounds one HTTP listener. Zero durations and sizes take the
// defaults documented on each field (applied in Listen); zero connection
// caps mean no cap (the process sizes them from its file descriptors).
type HTTPConfig struct {
	// Name labels the listener's metrics: "a2a", "metrics", "pprof".
	Name string
	// ReadHeaderTimeout bounds the time from the start of a request (a new
	// connection, or the end of the previous request) to the end of its
	// head; a client that has not sent it all by then is disconnected. It
	// also bounds a TLS handshake. Default 10s.
	ReadHeaderTimeout time.Duration
	// ReadBodyTimeout is the time a request body may take to arrive after
	// its head; a body not fully read by then is cut (the request fails
	// with a read error and the connection is closed). Reading ends with
	// the body, so it never cuts a response that lasts long. Default 30s.
	ReadBodyTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request. Default 120s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's head (request line and headers);
	// a larger one is answered 431. Default 64 KiB.
	MaxHeaderBytes int
	// MaxConns bounds the connections open at once; one more is refused at
	// accept. Once half of them are open, an address may open one more only
	// while it holds less than its fair share (MaxConns divided by the
	// addresses holding connections, at least 4); when all are open, an
	// address holding fewer than 4 still gets in, and the oldest idle
	// connection of the heaviest address over its share is closed for it.
	// 0: no cap.
	MaxConns int
	// MaxConnsPerAddr bounds the connections open at once from one source
	// address (an IPv6 client counts by its /64, which one host can fill
	// with addresses); one more from that address is refused at accept.
	// Behind a proxy every client has the proxy's address: set it to 0
	// there and bound clients at the proxy. 0: no cap.
	MaxConnsPerAddr int
	// TLS, when set, serves HTTPS. Connections are counted and refused
	// before their handshake, so a refusal costs no TLS work.
	TLS *tls.Config
	// Metrics receives the listener's connection counts; nil records
	// nothing.
	Metrics *bus.Metrics
	// Logger receives what the HTTP server reports (failed handshakes,
	// panics) at warn; default slog.Default().
	Logger *slog.Logger
}

func (c HTTPConfig) withDefaults() HTTPConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.ReadHeaderTimeout, 10*time.Second)
	def(&c.ReadBodyTimeout, 30*time.Second)
	def(&c.IdleTimeout, 120*time.Second)
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = 64 << 10
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// HTTPListener is one bound, serving HTTP listener (see Listen).
type HTTPListener struct {
	ln  net.Listener
	lim *connLimiter
	hs  *http.Server
	// endRequests cancels the context of every request with errGraceOver,
	// so streams and blocking calls end when a shutdown's grace is over
	// (and the edge tells them from requests whose client left).
	endRequests context.CancelCauseFunc
	done        chan error
	stopOnce    sync.Once
}

// Listen binds addr (HOST:PORT; port 0 picks a free one) and serves h on
// it within cfg's bounds until Stop. It returns an error only if addr
// cannot be bound.
func Listen(addr string, h http.Handler, cfg HTTPConfig) (*HTTPListener, error) {
	cfg = cfg.withDefaults()
	raw, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	limiter := newConnLimiter(raw, cfg)
	var ln net.Listener = limiter
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	base, endRequests := context.WithCancelCause(context.Background())
	l := &HTTPListener{ln: ln, lim: limiter, endRequests: endRequests, done: make(chan error, 1)}
	l.hs = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		// ReadTimeout runs from the start of a request, so the body gets
		// ReadBodyTimeout after the longest head. The server lifts the read
		// deadline once the body has been read (to watch for the client
		// going away), so a stream that lasts hours is not cut by it
		// (TestSlowBodyCutLongStreamKept).
		ReadTimeout:    cfg.ReadHeaderTimeout + cfg.ReadBodyTimeout,
		IdleTimeout:    cfg.IdleTimeout,
		MaxHeaderBytes: cfg.MaxHeaderBytes,
		// No WriteTimeout: blocking calls and streams legitimately last
		// long; each is bounded by its own timeout instead.
		BaseContext: func(net.Listener) context.Context { return base },
		ConnState:   limiter.connState,
		ErrorLog:    slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	go func() { l.done <- l.hs.Serve(ln) }()
	return l, nil
}

// Share bounds the connections of another listener of the edge that does
// not serve HTTP/1 — the gRPC binding's — within this one's caps: they
// count against MaxConns and MaxConnsPerAddr with the edge's own (one
// budget of file descriptors, one per-address share). A connection over a
// cap is closed at accept, without the HTTP refusal (its client speaks
// HTTP/2 from its first byte), and none is ever evicted to make room: the
// edge cannot tell one idle between calls from one whose streams are
// quiet.
func (l *HTTPListener) Share(ln net.Listener) net.Listener {
	return &sharedConns{Listener: ln, l: l.lim}
}

// sharedConns is a listener counted by another's connLimiter (Share).
type sharedConns struct {
	net.Listener
	l *connLimiter
}

func (s *sharedConns) Accept() (net.Conn, error) {
	return s.l.accept(s.Listener, true, func(c net.Conn) { _ = c.Close() })
}

// Addr is the bound address.
func (l *HTTPListener) Addr() net.Addr { return l.ln.Addr() }

// Done delivers what serving ended with: http.ErrServerClosed after Stop,
// another error if it ended by itself.
func (l *HTTPListener) Done() <-chan error { return l.done }

// stopCloseWait is how long requests whose context was canceled at the end
// of a grace get to return (a stream's handler notices at once) before
// their connections are closed under them.
const stopCloseWait = time.Second

// Stop stops accepting connections, closes idle ones and lets requests in
// flight finish for up to grace. Then it cancels the context of every
// request still running, with errGraceOver as the cause — streams end
// with a retryable error event, blocking calls return, and an edge's Cut
// counts them — and closes every connection after at most stopCloseWait
// more: nothing a client holds open keeps Stop past grace +
// stopCloseWait. Only the first call acts; later ones wait for it.
func (l *HTTPListener) Stop(grace time.Duration) {
	l.stopOnce.Do(func() {
		defer l.endRequests(errGraceOver)
		if grace > 0 && shutdownWithin(l.hs, grace) {
			return
		}
		l.endRequests(errGraceOver)
		if !shutdownWithin(l.hs, stopCloseWait) {
			_ = l.hs.Close()
		}
	})
}

// shutdownWithin runs hs.Shutdown for up to d and reports whether every
// request finished.
func shutdownWithin(hs *http.Server, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return hs.Shutdown(ctx) == nil
}

// connLimiter is a listener that holds at most MaxConns connections, at
// most MaxConnsPerAddr of them from one source address. A connection over
// a cap is closed as soon as it is accepted and Accept goes on to the
// next, so a flood costs an accept and a close per connection and nothing
// that outlives it. A refusal on plain HTTP first writes a canned 503 with
// a deadline short enough that it cannot stall accepting; a client that
// had already sent its request may see the connection reset instead.
type connLimiter struct {
	net.Listener
	name            string
	maxConns        int
	maxConnsPerAddr int
	refusal         []byte // written before closing a refused connection; nil with TLS

	mu     sync.Mutex
	open   int
	byAddr map[netip.Addr]*addrConns // only addresses with connections open
	// victim is the address evictable last took a connection of; it is
	// tried first next time, so a flood of evictions does not look over
	// every address each time. noVictim says the last look found none and
	// nothing was admitted since, so none can have appeared.
	victim   *addrConns
	noVictim bool
	heavy    int // addresses holding at least shareFloor connections (fairShare)

	gaugeOpen bus.Gauge   // a2a_http_connections_open{listener}
	refused   bus.Counter // a2a_http_connections_refused_total{listener,reason}
	evicted   bus.Counter // a2a_http_connections_evicted_total{listener}
}

// addrConns is the connections open from one source address, oldest
// first.
type addrConns struct {
	n           int
	first, last *limitedConn
}

// Reasons a connection is refused, as the refused counter labels them.
const (
	refusedTotal   = "max_connections"
	refusedPerAddr = "max_connections_per_addr"
)

// refusal503 is the answer of a refused plain-HTTP connection.
var refusal503 = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 21\r\n\r\ntoo many connections\n")

// refusalWriteTimeout bounds the write of refusal503 to a new connection,
// whose empty send buffer takes it at once.
const refusalWriteTimeout = 50 * time.Millisecond

func newConnLimiter(ln net.Listener, cfg HTTPConfig) *connLimiter {
	m := cfg.Metrics
	l := &connLimiter{
		Listener: ln, name: cfg.Name, maxConns: cfg.MaxConns, maxConnsPerAddr: cfg.MaxConnsPerAddr,
		byAddr:    map[netip.Addr]*addrConns{},
		gaugeOpen: m.Gauge("a2a_http_connections_open", "HTTP connections open, by listener.", "listener"),
		refused:   m.Counter("a2a_http_connections_refused_total", "HTTP connections closed at accept because a cap was reached, by listener and cap (max_connections, max_connections_per_addr).", "listener", "reason"),
		evicted:   m.Counter("a2a_http_connections_evicted_total", "Idle HTTP connections closed to let an address below its fair share into a full pool, by listener.", "listener"),
	}
	if cfg.TLS == nil {
		l.refusal = refusal503
	}
	m.Gauge("a2a_http_connections_max", "The cap on open HTTP connections of a listener (0: none).", "listener").Set(int64(cfg.MaxConns), cfg.Name)
	l.gaugeOpen.Add(0, cfg.Name) // listed from the start
	return l
}

// Accept returns the next connection within the caps, closing the ones
// over them. It returns an error only when the listener's Accept does.
func (l *connLimiter) Accept() (net.Conn, error) {
	return l.accept(l.Listener, false, l.refuse)
}

// accept takes the next connection of ln within the caps, refusing those
// over them with refuse; a pinned connection is never evicted (Share).
func (l *connLimiter) accept(ln net.Listener, pinned bool, refuse func(net.Conn)) (net.Conn, error) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l, src: sourceOf(c.RemoteAddr())}
		lc.busy.Store(pinned)
		reason, victim := l.admit(lc)
		if reason != "" {
			l.refused.Inc(l.name, reason)
			refuse(c)
			continue
		}
		if victim != nil {
			// Counted out already; its server goroutine sees the close and
			// ends (Close again is a no-op for the count).
			l.evicted.Inc(l.name)
			_ = victim.Conn.Close()
		} else {
			l.gaugeOpen.Add(1, l.name)
		}
		return lc, nil
	}
}

// admit counts c in, or says which cap refuses it. When the pool is full
// and c's address holds fewer than shareFloor connections, it counts out
// the idle connection evictable picks and returns it, for the caller to
// close. O(1) but for that eviction (see evictable).
func (l *connLimiter) admit(c *limitedConn) (refusedBy string, victim *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.byAddr[c.src]
	n := 0
	if a != nil {
		n = a.n
	}
	if l.maxConnsPerAddr > 0 && n >= l.maxConnsPerAddr {
		return refusedPerAddr, nil
	}
	if l.maxConns > 0 {
		// Refusals for the fair share are the total cap's: it is the pool
		// being nearly full that shares it out.
		share := fairShare(l.maxConns, l.open, l.heavy)
		if n >= share {
			return refusedTotal, nil
		}
		if l.open >= l.maxConns {
			if n >= shareFloor {
				return refusedTotal, nil
			}
			if victim = l.evictable(); victim == nil {
				return refusedTotal, nil
			}
			l.countOut(victim)
		}
	}
	if a == nil {
		a = &addrConns{}
		l.byAddr[c.src] = a
	}
	if a.n++; a.n == shareFloor {
		l.heavy++
	}
	l.open++
	c.addr, c.prev = a, a.last
	if a.last != nil {
		a.last.next = c
	} else {
		a.first = c
	}
	a.last = c
	l.noVictim = false
	return "", victim
}

// evictable is the connection a full pool closes to let in an address
// below shareFloor: the oldest idle one (waiting for a request head, or
// kept alive between requests; never one serving a request or a stream)
// of the heaviest address holding more than shareFloor; nil if there is
// none. Not only of one holding more than its fair share: a pool split
// evenly among a few flooding addresses holds each at exactly its share,
// and a newcomer must still get in (the share counted without it).
// The heaviest is looked for over every address only when the one found
// last has no connection left to give, and not again until something is
// admitted, so a flood of newcomers into a pool with nothing to evict
// costs O(1) each.
func (l *connLimiter) evictable() *limitedConn {
	if v := l.victim; v != nil && v.n > shareFloor {
		if c := v.oldestIdle(); c != nil {
			return c
		}
	}
	if l.noVictim {
		return nil
	}
	var best *limitedConn
	bestN := shareFloor
	for _, a := range l.byAddr {
		if a.n > bestN {
			if c := a.oldestIdle(); c != nil {
				best, bestN, l.victim = c, a.n, a
			}
		}
	}
	l.noVictim = best == nil
	return best
}

// oldestIdle is the first of a's connections not serving a request.
func (a *addrConns) oldestIdle() *limitedConn {
	for c := a.first; c != nil; c = c.next {
		if !c.busy.Load() {
			return c
		}
	}
	return nil
}

// countOut removes c from the counts, once; l.mu is held.
func (l *connLimiter) countOut(c *limitedConn) bool {
	a := c.addr
	if a == nil {
		return false
	}
	c.addr = nil
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		a.first = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		a.last = c.prev
	}
	c.prev, c.next = nil, nil
	l.open--
	if a.n == shareFloor {
		l.heavy--
	}
	if a.n--; a.n <= 0 {
		delete(l.byAddr, c.src) // the map holds only addresses with connections open
	}
	return true
}

// release counts a closed connection out, unless an eviction did.
func (l *connLimiter) release(c *limitedConn) {
	l.mu.Lock()
	out := l.countOut(c)
	l.mu.Unlock()
	if out {
		l.gaugeOpen.Add(-1, l.name)
	}
}

// connState follows the HTTP server's view of each connection: one
// serving a request (or hijacked) is busy and never evicted. An atomic
// store, so a request pays no lock for it.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	switch st {
	case http.StateActive, http.StateHijacked:
		lc.busy.Store(true)
	case http.StateIdle:
		lc.busy.Store(false)
	}
}

func (l *connLimiter) refuse(c net.Conn) {
	if l.refusal != nil {
		_ = c.SetWriteDeadline(time.Now().Add(refusalWriteTimeout))
		_, _ = c.Write(l.refusal)
	}
	_ = c.Close()
}

// sourceOf is the address a connection is counted under: the client's
// IPv4 address, or its IPv6 /64.
func sourceOf(a net.Addr) netip.Addr {
	var ip netip.Addr
	if ta, ok := a.(*net.TCPAddr); ok {
		ip = ta.AddrPort().Addr()
	} else if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		ip = ap.Addr()
	}
	return source(ip)
}

// origin is the source a request comes from (see source), as an anonymous
// caller's rate and quota of unfinished tasks are counted: the peer of its
// connection (a proxy in front of the edge is one origin).
func origin(r *http.Request) string {
	if a := requestSource(r); a.IsValid() {
		return a.String()
	}
	return r.RemoteAddr
}

// requestSource is the source address r came from (see source); the zero
// address if its peer is not an IP address.
func requestSource(r *http.Request) netip.Addr {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return source(ap.Addr())
	}
	return netip.Addr{}
}

// source is the source an address counts as for every per-address limit
// (connections here, the anonymous request rate and quota in limits.go): an IPv4
// address, or the /64 an IPv6 address is in, as one host holds a whole
// /64 and could otherwise step around a limit.
func source(ip netip.Addr) netip.Addr {
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return ip
}

// limitedConn is an admitted connection; closing it frees its place.
type limitedConn struct {
	net.Conn
	l   *connLimiter
	src netip.Addr
	// busy: the server is serving a request on it (see connState).
	busy atomic.Bool

	// Guarded by l.mu: its address's counts (nil once counted out) and
	// its place in the address's list.
	addr       *addrConns
	prev, next *limitedConn
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.l.release(c)
	return err
}

// CloseWrite half-closes the connection, as the HTTP server does before
// closing one it answered with an error, so the client reads the answer
// rather than a reset.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
