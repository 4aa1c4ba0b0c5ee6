package edge

import (
	"net/netip"
	"sync"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// bodyBudget owns the memory the edge holds in request bodies: every byte
// of a request buffer (readBody), counted as the buffer grows with the
// bytes that arrive and given back when the front door has answered the
// request (or refused it). It bounds that memory per edge and per source
// address (source: an IPv4 address or an IPv6 /64, whoever the caller
// authenticated as, since memory is held per connection), so a client that
// sends bodies slowly, or never ends them, holds at most its address's
// share until the listener's body deadline cuts them; past a bound a body
// is refused retryably instead of buffered.
type bodyBudget struct {
	total, perAddr int64     // the bounds
	gauge          bus.Gauge // a2a_http_body_bytes: held (none in some tests)

	mu     sync.Mutex
	held   int64                // bytes held by every request
	byAddr map[netip.Addr]int64 // bytes held by each source holding any
}

// bodyHold is what one request holds of the budget (call.body): its
// source, and the bytes its buffer has taken.
type bodyHold struct {
	src netip.Addr
	n   int64
}

func newBodyBudget(total, perAddr int64, gauge bus.Gauge) *bodyBudget {
	return &bodyBudget{total: total, perAddr: perAddr, gauge: gauge, byAddr: map[netip.Addr]int64{}}
}

// newBodyGauge registers the gauge of the bytes request bodies hold
// (bodyBudget).
func newBodyGauge(m *bus.Metrics) bus.Gauge {
	return m.Gauge("a2a_http_body_bytes", "Bytes the request bodies being read or served hold on this edge (bounded by --max-body-buffer).")
}

// take adds n bytes to h, or returns ErrUnavailable naming the bound that
// n more bytes would pass (and leaves h as it was).
func (b *bodyBudget) take(h *bodyHold, n int64) *schemas.Error {
	b.mu.Lock()
	defer b.mu.Unlock()
	addr := b.byAddr[h.src]
	switch {
	case addr+n > b.perAddr:
		return schemas.Errorf(schemas.ErrUnavailable, "request bodies from %s hold %d bytes on this edge, and %d more would pass the limit of %d bytes for one source address; retry once they have been answered", h.src, addr, n, b.perAddr)
	case b.held+n > b.total:
		return schemas.Errorf(schemas.ErrUnavailable, "this edge holds %d bytes of request bodies, and %d more would pass its limit of %d bytes; retry shortly, or on another edge", b.held, n, b.total)
	}
	b.held += n
	b.byAddr[h.src] = addr + n
	b.gauge.Set(b.held)
	h.n += n
	return nil
}

// release gives back everything h holds. It is called once the request's
// answer has been written, when nothing reads its body any more.
func (b *bodyBudget) release(h *bodyHold) {
	if h.n == 0 {
		return
	}
	b.mu.Lock()
	b.held -= h.n
	if left := b.byAddr[h.src] - h.n; left > 0 {
		b.byAddr[h.src] = left
	} else {
		delete(b.byAddr, h.src)
	}
	b.gauge.Set(b.held)
	b.mu.Unlock()
	h.n = 0
}
