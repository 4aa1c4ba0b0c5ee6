package bustest

import (
	"context"
	"errors"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/bus"
)

// Faults of the bus a process must survive, for tests of what it does
// meanwhile.

// Partition is a TCP proxy between bus connections and their server that
// can cut the network silently: while cut it passes nothing either way
// but keeps every connection open, as a network that drops packets does,
// so a client notices only by what it does not get back. Heal lets
// through what was held, in order; nothing is lost. It is closed when the
// test ends.
type Partition struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	cut    bool
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

// NewPartition proxies a loopback port to the server at serverURL
// (nats://host:port, as bus.Server.ClientURL returns it).
func NewPartition(t testing.TB, serverURL string) *Partition {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil || u.Host == "" {
		t.Fatalf("bustest: partition of %q: not a nats://host:port URL", serverURL)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("bustest: partition: %v", err)
	}
	p := &Partition{ln: ln, target: u.Host}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// URL is where bus connections reach the server through the partition.
func (p *Partition) URL() string { return "nats://" + p.ln.Addr().String() }

// Cut stops passing anything.
func (p *Partition) Cut() { p.set(true) }

// Heal passes everything again, what was held first.
func (p *Partition) Heal() { p.set(false) }

func (p *Partition) set(cut bool) {
	p.mu.Lock()
	p.cut = cut
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *Partition) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(s, c) })
		p.wg.Go(func() { p.pipe(c, s) })
	}
}

// pipe copies src to dst, holding each read while the network is cut;
// either side ending ends both.
func (p *Partition) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pass waits while the network is cut; false once the partition is
// closed.
func (p *Partition) pass() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.cut && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

func (p *Partition) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.mu.Unlock()
	p.cond.Broadcast()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

// DeleteStream deletes a stream of s, as an operator could by mistake or
// a cluster could lose it with its only replica. s must listen on the
// network (Options.Listen) without users.
func DeleteStream(t testing.TB, s *bus.Server, name string) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("bustest: delete stream: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("bustest: delete stream %s: %v", name, err)
	}
}
