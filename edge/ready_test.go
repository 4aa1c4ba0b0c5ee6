package edge_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
)

// /readyz says not ready while the bus would store nothing the edge
// writes, and ready again as soon as it would — whatever keeps it from
// storing: a stream it writes lost while the connection and the
// followers carry on (only asking the streams tells), or a network that
// silently stops carrying anything (the client stays "connected" until
// its pings time out, minutes later). a2a_bus_writable says the same.
func TestReadyFollowsWhetherTheBusTakesWrites(t *testing.T) {
	srv := bustest.NewServer(t, bustest.Options{Listen: "127.0.0.1:0"})
	net := bustest.NewPartition(t, srv.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: net.URL(), MemoryStorage: true, Role: "edge", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	e := edge.New(b, edge.Config{OpenAdmin: true}) // it reads /metrics without credentials
	runEdge(t, e)
	ts := httptest.NewServer(e.Handler())
	t.Cleanup(ts.Close)

	ready := func(t *testing.T, want int, writable string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get(ts.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			m, err := http.Get(ts.URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			text, _ := io.ReadAll(m.Body)
			m.Body.Close()
			if resp.StatusCode == want && strings.Contains(string(text), "\na2a_bus_writable "+writable+"\n") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz = %d, want %d with a2a_bus_writable %s", resp.StatusCode, want, writable)
			}
			time.Sleep(20 * time.Millisecond) // polling the edge's view of the bus
		}
	}
	ready(t, http.StatusOK, "1")

	t.Run("a stream lost", func(t *testing.T) {
		bustest.DeleteStream(t, srv, schemas.StreamWork)
		ready(t, http.StatusServiceUnavailable, "0")
		if !b.Connected() {
			t.Fatal("the connection dropped; the stream check should be what tells")
		}
		// Any process that connects provisions the streams again.
		bustest.Connect(t, srv, bustest.Options{})
		ready(t, http.StatusOK, "1")
	})
	t.Run("a silent partition", func(t *testing.T) {
		net.Cut()
		ready(t, http.StatusServiceUnavailable, "0")
		if !b.Connected() {
			t.Fatal("the client noticed the cut by itself; the test wants a silent one")
		}
		net.Heal()
		ready(t, http.StatusOK, "1")
	})
}
