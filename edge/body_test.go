package edge

import (
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
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
// listener's body deadline cuts them) make the edge hold memory for what
// they stated only within one budget for all of them: 64 bodies stating
// 4 MiB each hold about bodyReserveBudget, not 256 MiB. A body read
// meanwhile is read as it arrives, and the budget is whole again once
// the stalled ones end.
func TestStatedBodyLengthsReserveWithinABudget(t *testing.T) {
	s := &Server{cfg: Config{}.withDefaults()}
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
		go func() { _, err := s.readBody(httptest.NewRecorder(), r, &call{}); done <- err }()
	}
	for range n {
		<-reading
	}
	runtime.GC()
	runtime.ReadMemStats(&during)
	if held := int64(during.HeapAlloc) - int64(before.HeapAlloc); held > bodyReserveBudget+16<<20 {
		t.Errorf("%d stalled bodies stating %d bytes hold %d MiB; the budget is %d MiB", n, stated, held>>20, bodyReserveBudget>>20)
	}
	r := httptest.NewRequest("POST", "/", strings.NewReader(`{"ok":true}`))
	if body, err := s.readBody(httptest.NewRecorder(), r, &call{}); err != nil || string(body) != `{"ok":true}` {
		t.Errorf("a body read while the budget is taken: %q %v", body, err)
	}
	close(release)
	for range n {
		<-done
	}
	if got := s.bodyReserved.Load(); got != 0 {
		t.Fatalf("%d bytes still reserved after every body ended", got)
	}
}
