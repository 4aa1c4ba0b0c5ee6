package mcpbridge

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// countedEdge counts the reads of the registry of the edge it wraps, and
// fails them while failing is set.
type countedEdge struct {
	Edge
	reads   atomic.Int64
	failing atomic.Bool
}

func (c *countedEdge) Agents(ctx context.Context, who schemas.Presented, q schemas.AgentQuery) ([]schemas.AgentEntry, error) {
	c.reads.Add(1)
	if c.failing.Load() {
		return nil, errors.New("not now")
	}
	return c.Edge.Agents(ctx, who, q)
}

// The bridge reads the registry until a read succeeds, then while MCP
// clients are connected and not while none is (an idle edge does not call
// itself every few seconds); a client that comes after a quiet time lists
// the agents as they are now, and the read is not repeated for every call
// within Refresh.
func TestRegistryReadWhileSomeoneListens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, b := bustest.New(t, bustest.Options{})
	run := func(name string) {
		r := workers.NewRunner(b, workers.EchoDefinition(name), workers.Options{ShutdownGrace: time.Second})
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		select {
		case <-r.Ready():
		case <-time.After(20 * time.Second):
			t.Fatalf("agent %s not ready", name)
		}
	}
	run("echo")
	const base = "http://a2abus.test"
	e := edge.New(b, edge.Config{PublicURL: base, DefaultAgent: "echo"})
	edgeDone := make(chan error, 1)
	go func() { edgeDone <- e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-edgeDone })
	if err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	counted := &countedEdge{Edge: e.InProcess("mcp")}
	br := New(Options{Edge: counted, Refresh: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	reads, failing := &counted.reads, &counted.failing
	want := func(n int64, when string) {
		t.Helper()
		if got := reads.Load(); got != n {
			t.Fatalf("%s: the registry was read %d times, want %d", when, got, n)
		}
	}

	// Run's turns read until a read succeeds; later turns without
	// sessions do not.
	failing.Store(true)
	if err := br.tick(ctx); err == nil {
		t.Fatal("a read the registry refused succeeded")
	}
	want(1, "first turn")
	failing.Store(false)
	if err := br.tick(ctx); err != nil {
		t.Fatal(err)
	}
	want(2, "a turn after a failed read")
	select {
	case <-br.Ready():
	default:
		t.Fatal("not ready after a successful read")
	}
	if err := br.tick(ctx); err != nil {
		t.Fatal(err)
	}
	want(2, "a turn without sessions")

	// An agent joins while nobody listens.
	run("second")
	for {
		rec := httptest.NewRecorder()
		e.Handler().ServeHTTP(rec, httptest.NewRequest("GET", base+"/a2a/agents", nil))
		if strings.Contains(rec.Body.String(), `"agent":"second"`) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(10 * time.Millisecond): // the edge follows the registry
		}
	}

	// A client comes; its tools are older than Refresh (made so: an
	// hour cannot pass here), so its first list reads the registry.
	st, ct := sdk.NewInMemoryTransports()
	ss, err := br.srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	br.tried.Store(0)
	listed := func() map[string]bool {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, tool := range res.Tools {
			names[tool.Name] = true
		}
		return names
	}
	if tools := listed(); !tools["a2a_second"] || !tools["a2a_echo"] {
		t.Fatalf("the new client lists %v, want a2a_echo and a2a_second", tools)
	}
	want(3, "a stale list")
	listed()
	want(3, "a list within Refresh")

	// With a session open, Run's turns read again.
	if err := br.tick(ctx); err != nil {
		t.Fatal(err)
	}
	want(4, "a turn with a session")
}
