package workers

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// A delivery's logger writes its attributes as a child logger would, the
// runner's own and those added later included, and formats them only for
// a line it writes.
func TestDeliveryLoggerWritesItsAttributesWhenItLogs(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	base := slog.New(slog.NewTextHandler(lockedWriter{&buf, &mu}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "worker")
	log := deliveryLogger(base, slog.String("task_id", "t1"), slog.Uint64("attempt", 2))
	log.Debug("not written")
	if h := log.Handler().(*lazyAttrs); h.h != nil {
		t.Fatal("the attributes were formatted for a line below the level")
	}
	traced := log.With("trace_id", "abc")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { traced.Info("agent failed", "err", "boom") })
	}
	wg.Wait()
	log.Warn("plain")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines: %q", len(lines), buf.String())
	}
	for _, l := range lines[:4] {
		for _, want := range []string{"component=worker", "task_id=t1", "attempt=2", "trace_id=abc", "err=boom", `msg="agent failed"`} {
			if !strings.Contains(l, want) {
				t.Errorf("line %q lacks %s", l, want)
			}
		}
	}
	if l := lines[4]; !strings.Contains(l, "task_id=t1") || strings.Contains(l, "trace_id") {
		t.Errorf("the delivery's own logger: %q", l)
	}
	grouped := log.WithGroup("g")
	grouped.Info("in a group", "k", "v")
	if !strings.Contains(buf.String(), "g.k=v") || !strings.Contains(buf.String(), "attempt=2 g.k=v") {
		t.Errorf("grouped line: %q", buf.String())
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
