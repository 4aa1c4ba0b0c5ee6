package edge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
)

// Shutdown starts by reporting not ready (so load balancers stop routing
// here) while requests still get answers; Run returns when its ctx ends.
func TestDrainReportsNotReadyAndRunStops(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	e := edge.New(b, edge.Config{})
	ts := httptest.NewServer(e.Handler())
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := e.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	status := func(path string) int {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("/readyz"); got != 200 {
		t.Fatalf("readyz before drain = %d", got)
	}
	e.Drain()
	if got := status("/readyz"); got != http.StatusServiceUnavailable {
		t.Fatalf("readyz after drain = %d", got)
	}
	if got := status("/healthz"); got != 200 {
		t.Fatalf("healthz after drain = %d", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
