package freeaddr

import (
	"net"
	"testing"
)

// Ports are bindable, below the ephemeral range (when there is room under
// it) and never repeated.
func TestPortsAreFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 200 {
		p := Port(t)
		if seen[p] {
			t.Fatalf("port %d given twice", p)
		}
		seen[p] = true
		if low-floor >= 1000 && (p < floor || p >= low) {
			t.Fatalf("port %d is outside [%d, %d)", p, floor, low)
		}
	}
	l, err := net.Listen("tcp", Addr(t))
	if err != nil {
		t.Fatalf("a given address cannot be bound: %v", err)
	}
	l.Close()
}
