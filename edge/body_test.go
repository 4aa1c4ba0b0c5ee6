package edge

import (
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/a2abus/a2abus/bus"
)

// stalledBody is a request body whose client stated its length and sends
// nothing until released: it says when it is first read, then blocks.
type stalledBody struct {
	once    sync.Once
	reading chan<- struct{}
	release <-chan struct{}
}

func (b *stalledBody) Read([]byte) (int, error) {
	b.once.Do(func() { b.reading <- struct{}{} })
	<-b.release
	return 0, io.EOF
}

// Requests that state a large body and then send nothing (until the
// listener's body deadline cuts them) make the edge hold memory only for
// the bytes that arrive, not for what they stated: 64 bodies stating
// 4 MiB each hold a first read's buffer each (bodyFirstRead), not
// 256 MiB. A body read meanwhile is read, and the budget is whole again
// once the stalled ones end.
func TestStatedBodyLengthsReserveWithinABudget(t *testing.T) {
	cfg := Config{}.withDefaults()
	s := &Server{cfg: cfg, bodies: newBodyBudget(cfg.MaxBodyBuffer, cfg.MaxBodyBufferPerAddr, bus.Gauge{})}
	const n, stated = 64, 4 << 20
	reading, release := make(chan struct{}, n), make(chan struct{})
	done := make(chan error, n)
	runtime.GC()
	var before, during runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		r := httptest.NewRequest("POST", "/", &stalledBody{reading: reading, release: release})
		r.ContentLength = stated
		r.Header.Set("Content-Type", "application/json")
		go func() {
			c := &call{bodyMax: s.cfg.MaxBodyBytes}
			_, err := s.readBody(httptest.NewRecorder(), r, c)
			s.bodies.release(&c.body) // as serve does once it has answered
			done <- err
		}()
	}
	for range n {
		<-reading
	}
	runtime.GC()
	runtime.ReadMemStats(&during)
	if held := int64(during.HeapAlloc) - int64(before.HeapAlloc); held > n*bodyFirstRead+16<<20 {
		t.Errorf("%d stalled bodies stating %d bytes hold %d MiB; their first reads take %d MiB", n, stated, held>>20, n*bodyFirstRead>>20)
	}
	r := httptest.NewRequest("POST", "/", strings.NewReader(`{"ok":true}`))
	c := &call{bodyMax: s.cfg.MaxBodyBytes}
	if body, err := s.readBody(httptest.NewRecorder(), r, c); err != nil || string(body) != `{"ok":true}` {
		t.Errorf("a body read while the stalled ones wait: %q %v", body, err)
	}
	s.bodies.release(&c.body)
	close(release)
	for range n {
		<-done
	}
	if got := s.bodies.held; got != 0 || len(s.bodies.byAddr) != 0 {
		t.Fatalf("%d bytes (%d sources) still held after every body ended", got, len(s.bodies.byAddr))
	}
}
