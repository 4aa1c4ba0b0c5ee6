package main

import "testing"

// A process serving an edge is the same instance on the bus after a
// restart on the same address (so it takes back the sweep lease it held
// at once), and another edge on the host is another instance; a worker
// keeps a random name.
func TestEdgeInstanceIsStableAcrossRestarts(t *testing.T) {
	p := &process{cfg: Config{Listen: "127.0.0.1:8080"}}
	first := p.busConfig("serve", nil, clientAuth{}).Name
	if first == "" || first != p.busConfig("serve", nil, clientAuth{}).Name {
		t.Fatalf("serve on one address: names %q and %q", first, p.busConfig("serve", nil, clientAuth{}).Name)
	}
	other := &process{cfg: Config{Listen: "127.0.0.1:8081"}}
	if n := other.busConfig("serve", nil, clientAuth{}).Name; n == first || n == "" {
		t.Fatalf("another port: %q, first %q", n, first)
	}
	if n := p.busConfig("edge", nil, clientAuth{}).Name; n == first || n == "" {
		t.Fatalf("an edge on serve's address: %q", n)
	}
	if n := p.busConfig("worker", nil, clientAuth{}).Name; n != "" {
		t.Fatalf("a worker: %q, want a random name", n)
	}
	for _, listen := range []string{"127.0.0.1:0", "no-port"} {
		if n := (&process{cfg: Config{Listen: listen}}).busConfig("edge", nil, clientAuth{}).Name; n != "" {
			t.Fatalf("listen %q: %q, want a random name", listen, n)
		}
	}
}
