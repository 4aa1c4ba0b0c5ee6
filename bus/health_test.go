package bus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// A standalone server takes writes until JetStream is disabled on it,
// which the server does itself when its store runs out of space or
// cannot be written: the connection stays up, and only asking the streams
// tells.
func TestCheckWritableStandalone(t *testing.T) {
	s := startServer(t, "")
	b := connect(t, s, Config{MemoryStorage: true})
	if err := b.checkWritable(testCtx(t)); err != nil {
		t.Fatalf("a fresh bus: %v", err)
	}
	if err := s.s.DisableJetStream(); err != nil {
		t.Fatal(err)
	}
	// A disabled JetStream answers nothing: the check's bound tells.
	ctx, cancel := context.WithTimeout(testCtx(t), probeTimeout)
	defer cancel()
	err := b.checkWritable(ctx)
	if !errors.Is(err, schemas.ErrUnavailable) {
		t.Fatalf("JetStream disabled: %v, want ErrUnavailable", err)
	}
	if !b.Connected() {
		t.Fatal("the connection dropped: the check should be what tells")
	}
}

// A cluster member cut off from the other two keeps its clients, but the
// streams it holds have no majority: nothing written there is stored.
func TestCheckWritableWithoutAMajority(t *testing.T) {
	scenario(t)
	c := startCluster(t, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b, err := Connect(ctx, Config{URL: c.urls[0], Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.checkWritable(ctx); err != nil {
		t.Fatalf("a whole cluster: %v", err)
	}
	c.stop(1)
	c.stop(2)
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		err := b.checkWritable(cctx)
		ccancel()
		if errors.Is(err, schemas.ErrUnavailable) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("still writable (%v) with two of three members gone", err)
		}
		time.Sleep(100 * time.Millisecond) // the lone member notices its peers are gone
	}
	if !b.Connected() {
		t.Fatal("the connection to the remaining member dropped")
	}
}

func TestQuorate(t *testing.T) {
	peer := func(offline bool) *jetstream.PeerInfo { return &jetstream.PeerInfo{Name: "p", Offline: offline} }
	for _, tc := range []struct {
		name string
		c    jetstream.ClusterInfo
		want bool
	}{
		{"R1 leader", jetstream.ClusterInfo{Leader: "a"}, true},
		{"no leader", jetstream.ClusterInfo{Replicas: []*jetstream.PeerInfo{peer(false), peer(false)}}, false},
		{"R3 whole", jetstream.ClusterInfo{Leader: "a", Replicas: []*jetstream.PeerInfo{peer(false), peer(false)}}, true},
		{"R3 one offline", jetstream.ClusterInfo{Leader: "a", Replicas: []*jetstream.PeerInfo{peer(true), peer(false)}}, true},
		{"R3 two offline", jetstream.ClusterInfo{Leader: "a", Replicas: []*jetstream.PeerInfo{peer(true), peer(true)}}, false},
		{"R5 two offline", jetstream.ClusterInfo{Leader: "a", Replicas: []*jetstream.PeerInfo{peer(true), peer(true), peer(false), peer(false)}}, true},
		{"R5 three offline", jetstream.ClusterInfo{Leader: "a", Replicas: []*jetstream.PeerInfo{peer(true), peer(true), peer(true), peer(false)}}, false},
	} {
		if got := quorate(&tc.c); got != tc.want {
			t.Errorf("%s: quorate = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The probe's state follows the checks: not ready before a check
// succeeded, then writable, then failing from the first failed check on.
func TestWriteProbe(t *testing.T) {
	s := startServer(t, "")
	b := connect(t, s, Config{MemoryStorage: true, Metrics: NewMetrics()})
	p := b.NewWriteProbe()
	p.every = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-p.Ready():
	case <-ctx.Done():
		t.Fatal("the probe never found the bus writable")
	}
	if d := p.NotWritableFor(); d != 0 {
		t.Fatalf("NotWritableFor = %v on a writable bus", d)
	}
	if err := s.s.DisableJetStream(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the probe to fail", func() bool { return p.NotWritableFor() > 0 })
}
