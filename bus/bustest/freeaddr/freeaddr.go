// Package freeaddr gives tests loopback ports that stay free until the
// test binds them, perhaps much later: a cluster member that is stopped and
// started again on its own ports, a child process told its address by a
// flag.
//
// A port the kernel hands out for 127.0.0.1:0 is from the ephemeral range,
// which every outgoing connection of every process on the machine draws
// from too. While the test packages run side by side, one of their many
// client connections can take such a port between the moment a test picks
// it and the moment its server binds it, and the server then fails to
// listen. The ports given here are below the ephemeral range, where only
// servers that name a port bind (other test binaries' picks among them: a
// collision needs one to pick the same port in the moment between
// another's check and bind), and never the same one twice in a test
// binary.
package freeaddr

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// floor is the lowest port given: below it are the ports of well-known
// services (databases, caches, development servers) a machine may run.
const floor = 15000

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Port returns a loopback TCP port nothing listens on, never given before
// by this process.
func Port(t testing.TB) int {
	t.Helper()
	low := ephemeralLow()
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		p := 0 // the kernel's choice, when there is no room below the range
		if low-floor >= 1000 {
			p = floor + rand.IntN(low-floor)
		}
		if p != 0 && given[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		p = l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !given[p] {
			given[p] = true
			return p
		}
	}
	t.Fatal("freeaddr: no free loopback port found in 1000 tries")
	return 0
}

// Addr returns "127.0.0.1:PORT" for a port of Port.
func Addr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", Port(t))
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux
// says it in /proc; elsewhere the IANA range's start is assumed).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 49152
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 49152
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 49152
	}
	return n
}
