// Package bustest starts real in-process JetStream servers for tests, so no
// test of a2abus mocks the bus.
package bustest

import (
	"context"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
)

// Options adjusts a test bus.
type Options struct {
	// Config is the bus configuration; MemoryStorage is forced on unless
	// FileStorage is set.
	Config bus.Config
	// FileStorage keeps streams on disk (restart tests).
	FileStorage bool
	// Listen makes the server accept network clients on this address
	// (e.g. "127.0.0.1:0"), for tests that use real processes.
	Listen string
	// DataDir reuses a store directory; default t.TempDir().
	DataDir string
}

// NewServer starts an embedded JetStream server that is shut down when the
// test ends.
func NewServer(t testing.TB, o Options) *bus.Server {
	t.Helper()
	dir := o.DataDir
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := bus.StartServer(bus.ServerConfig{DataDir: dir, Listen: o.Listen})
	if err != nil {
		t.Fatalf("bustest: start server: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// Connect connects a new Bus to s; it is closed when the test ends.
func Connect(t testing.TB, s *bus.Server, o Options) *bus.Bus {
	t.Helper()
	cfg := o.Config
	cfg.Server = s
	cfg.MemoryStorage = !o.FileStorage
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("bustest: connect: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// New starts a server and connects one Bus to it.
func New(t testing.TB, o Options) (*bus.Server, *bus.Bus) {
	t.Helper()
	s := NewServer(t, o)
	return s, Connect(t, s, o)
}
