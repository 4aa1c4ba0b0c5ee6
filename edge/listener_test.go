package edge_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// listen serves h on a free loopback port with cfg until the test ends.
func listen(t *testing.T, h http.Handler, cfg edge.HTTPConfig) *edge.HTTPListener {
	t.Helper()
	l, err := edge.Listen("127.0.0.1:0", h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Stop(0) })
	return l
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })

// listenCounted serves okHandler as listener "a2a" with cfg's caps and
// returns its metrics and address.
func listenCounted(t *testing.T, cfg edge.HTTPConfig) (*bus.Metrics, string) {
	t.Helper()
	cfg.Name, cfg.Metrics = "a2a", bus.NewMetrics()
	return cfg.Metrics, listen(t, okHandler, cfg).Addr().String()
}

// hold opens n connections to addr from the local address from ("" for
// any) and sends nothing on them; they are closed when the test ends.
func hold(t *testing.T, addr, from string, n int) []net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	var conns []net.Conn
	for range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	return conns
}

// readToEnd reads c until the server ends it or within passes, and
// returns what it read and whether the server ended it (EOF or reset)
// rather than the wait running out.
func readToEnd(c net.Conn, within time.Duration) (got []byte, ended bool) {
	_ = c.SetReadDeadline(time.Now().Add(within))
	var buf bytes.Buffer
	_, err := io.Copy(&buf, c)
	var ne net.Error
	return buf.Bytes(), !(errors.As(err, &ne) && ne.Timeout())
}

// refused checks that a new connection from from to addr is ended by the
// server at once, with nothing or a 503 written on it.
func refused(t *testing.T, addr, from string) {
	t.Helper()
	c := hold(t, addr, from, 1)[0]
	_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	got, ended := readToEnd(c, 10*time.Second)
	if !ended {
		t.Fatal("a connection over the cap was kept open")
	}
	if len(got) > 0 && !bytes.HasPrefix(got, []byte("HTTP/1.1 503 ")) {
		t.Fatalf("a connection over the cap was answered %q", got)
	}
}

// getOK checks that url answers 200 on a new connection.
func getOK(t *testing.T, url string) {
	t.Helper()
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
}

// waitMetric polls m until its text holds the line want: the server
// counts a connection out when it reads the client's close.
func waitMetric(t *testing.T, m *bus.Metrics, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(metricsText(t, m), want+"\n") {
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed %q:\n%s", want, metricsText(t, m))
		}
		time.Sleep(5 * time.Millisecond) // polling the server's view of a close
	}
}

func metricsText(t *testing.T, m *bus.Metrics) string {
	t.Helper()
	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Connections over a listener's caps are closed as they are accepted,
// counted by cap, and accepting goes on: a place freed is taken by the
// next client. Accept order is the kernel's queue order, so the
// connection dialled after the cap is full is the one refused.
func TestConnectionCapsRefuseAtAccept(t *testing.T) {
	t.Run("in all", func(t *testing.T) {
		m, addr := listenCounted(t, edge.HTTPConfig{MaxConns: 4})
		held := hold(t, addr, "", 4)
		refused(t, addr, "")
		refused(t, addr, "")
		held[0].Close()
		waitMetric(t, m, `a2a_http_connections_open{listener="a2a"} 3`)
		getOK(t, "http://"+addr+"/")
		// The server counts that GET's connection out once it has closed
		// it, which may come after the client has read the answer.
		waitMetric(t, m, `a2a_http_connections_open{listener="a2a"} 3`)
		text := metricsText(t, m)
		for _, want := range []string{
			`a2a_http_connections_refused_total{listener="a2a",reason="max_connections"} 2` + "\n",
			`a2a_http_connections_max{listener="a2a"} 4` + "\n",
			`a2a_http_connections_open{listener="a2a"} 3` + "\n",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("metrics lack %q:\n%s", want, text)
			}
		}
	})
	t.Run("per address", func(t *testing.T) {
		m, addr := listenCounted(t, edge.HTTPConfig{MaxConnsPerAddr: 3})
		held := hold(t, addr, "127.0.0.1", 3)
		refused(t, addr, "127.0.0.1")
		// Another address is not held back by this one's cap (Linux
		// routes all of 127/8 to loopback; elsewhere only 127.0.0.1 may
		// exist).
		if probe, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).Dial("tcp", addr); err == nil {
			_, _ = io.WriteString(probe, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			got, _ := readToEnd(probe, 10*time.Second)
			probe.Close()
			if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 ")) {
				t.Fatalf("a client of another address was answered %q", got)
			}
		}
		for _, c := range held {
			c.Close()
		}
		waitMetric(t, m, `a2a_http_connections_open{listener="a2a"} 0`)
		getOK(t, "http://"+addr+"/")
		if want := `a2a_http_connections_refused_total{listener="a2a",reason="max_connections_per_addr"} 1` + "\n"; !strings.Contains(metricsText(t, m), want) {
			t.Errorf("metrics lack %q", want)
		}
	})
}

// A listener shared with the edge's (the gRPC binding's) counts against
// the edge's caps: with the edge's own connection open, a source address
// at its cap has its next connection to the shared listener closed at
// accept, with nothing written, and the one before it kept.
func TestSharedListenerCountsAgainstTheEdgesCaps(t *testing.T) {
	m := bus.NewMetrics()
	l := listen(t, okHandler, edge.HTTPConfig{Name: "a2a", Metrics: m, MaxConnsPerAddr: 2})
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	shared := l.Share(raw)
	t.Cleanup(func() { shared.Close() })
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := shared.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			accepted <- c
		}
	}()
	hold(t, l.Addr().String(), "127.0.0.1", 1)
	waitMetric(t, m, `a2a_http_connections_open{listener="a2a"} 1`)
	kept := hold(t, raw.Addr().String(), "127.0.0.1", 1)[0]
	<-accepted
	over := hold(t, raw.Addr().String(), "127.0.0.1", 1)[0]
	if got, ended := readToEnd(over, 10*time.Second); !ended || len(got) > 0 {
		t.Fatalf("the connection over the cap: ended %v, read %q", ended, got)
	}
	if _, ended := readToEnd(kept, 100*time.Millisecond); ended {
		t.Fatal("the connection within the cap was closed")
	}
	waitMetric(t, m, `a2a_http_connections_refused_total{listener="a2a",reason="max_connections_per_addr"} 1`)
	waitMetric(t, m, `a2a_http_connections_open{listener="a2a"} 2`)
}

// The read bounds cut clients that send slowly — a head trickled byte by
// byte, a body that stops coming — and never a response: an SSE stream
// that lasts several times every bound is delivered whole (the server
// lifts the read deadline once a body has been read).
func TestSlowBodyCutLongStreamKept(t *testing.T) {
	const bound = 250 * time.Millisecond
	_, b := bustest.New(t, bustest.Options{})
	def := workers.EchoDefinition("echo")
	def.Agent = workers.Echo{Delay: 6 * bound}
	runAgent(t, b, def)
	e := edge.New(b, edge.Config{})
	runEdge(t, e)
	l := listen(t, e.Handler(), edge.HTTPConfig{ReadHeaderTimeout: bound, ReadBodyTimeout: bound, IdleTimeout: bound})
	base := "http://" + l.Addr().String()
	(&harness{t: t}).waitAgent(base, "echo")

	t.Run("stream outlives the bounds", func(t *testing.T) {
		begin := time.Now()
		s, rerr := openStream(t, base, "echo", "SendStreamingMessage", send(userMessage("slow and whole"), false), "")
		if rerr != nil {
			t.Fatalf("stream refused: %+v", rerr.Error)
		}
		_, rs := s.all()
		if len(rs) == 0 || kind(rs[len(rs)-1]) != "status:"+string(schemas.TaskStateCompleted) {
			t.Fatalf("stream ended before the task completed: %d events", len(rs))
		}
		if took := time.Since(begin); took < 3*bound {
			t.Fatalf("the stream took %v; the agent's delay should make it outlast the read bounds", took)
		}
	})
	t.Run("stalled body", func(t *testing.T) {
		c := hold(t, l.Addr().String(), "", 1)[0]
		_, _ = io.WriteString(c, "POST /agents/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":")
		got, ended := readToEnd(c, 10*time.Second)
		if !ended {
			t.Fatal("a request whose body stopped coming was kept open")
		}
		if bytes.Contains(got, []byte(`"result"`)) {
			t.Fatalf("a cut body was answered with a result: %q", got)
		}
	})
	t.Run("trickled head", func(t *testing.T) {
		// From before the dial: the server's clock starts at its accept,
		// which may come a moment before the dial returns here.
		begin := time.Now()
		c := hold(t, l.Addr().String(), "", 1)[0]
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nX-Slow: ")
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-time.After(bound / 5): // a slowloris client's pace
				case <-t.Context().Done():
					return
				}
				if _, err := io.WriteString(c, "x"); err != nil {
					return
				}
			}
		}()
		got, ended := readToEnd(c, 10*time.Second)
		took := time.Since(begin)
		c.Close()
		<-done
		if !ended || took < bound || bytes.HasPrefix(got, []byte("HTTP/1.1 200 ")) {
			t.Fatalf("a trickled head: ended %v after %v, answered %q; want it cut after %v", ended, took, got, bound)
		}
	})
}

// A stream's per-write deadline (Config.StreamWriteTimeout, set with
// http.ResponseController as the SSE writer does) reaches the connection
// through the listener's wrapping: a client that stops reading is dropped
// once the socket buffers are full and a write waits past its deadline.
func TestStreamWriteDeadlineThroughListener(t *testing.T) {
	const writeTimeout = 200 * time.Millisecond
	ended := make(chan error, 1)
	l := listen(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rc := http.NewResponseController(w)
		chunk := bytes.Repeat([]byte("data: x\n\n"), 8<<10)
		for {
			_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := w.Write(chunk); err != nil {
				ended <- err
				return
			}
			if err := rc.Flush(); err != nil {
				ended <- err
				return
			}
		}
	}), edge.HTTPConfig{MaxConns: 8})
	c := hold(t, l.Addr().String(), "", 1)[0]
	_, _ = io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	select {
	case err := <-ended:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the stalled stream ended with %v, want its write deadline", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a stream nobody reads was never dropped")
	}
}

// Stop ends what holds a listener open once its grace is over: a stream
// of a task that waits for input forever (on an edge that was not told to
// drain) ends for its client with a retryable error event, and Stop
// returns within the grace and the second it gives handlers to return.
func TestStopEndsStreamsAfterGrace(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	runAgent(t, b, workers.EchoDefinition("echo"))
	e := edge.New(b, edge.Config{})
	runEdge(t, e)
	l := listen(t, e.Handler(), edge.HTTPConfig{})
	base := "http://" + l.Addr().String()
	h := &harness{t: t, b: b, url: base}
	h.waitAgent(base, "echo")
	task := mustResult[struct {
		Task schemas.Task `json:"task"`
	}](t, h.call("echo", "SendMessage", send(userMessage(workers.AskCommand), false))).Task
	if task.Status.State != schemas.TaskStateInputRequired {
		t.Fatalf("task %s, want input-required", task.Status.State)
	}
	var streams []*sseStream
	for range 3 {
		s, rerr := openStream(t, base, "echo", "SubscribeToTask", map[string]any{"id": task.ID}, "")
		if rerr != nil {
			t.Fatalf("subscribe: %+v", rerr.Error)
		}
		streams = append(streams, s)
	}
	const grace = 300 * time.Millisecond
	begin := time.Now()
	l.Stop(grace)
	if took := time.Since(begin); took < grace || took > grace+5*time.Second {
		t.Fatalf("Stop took %v with a grace of %v", took, grace)
	}
	for _, s := range streams {
		// Ended at the end of the grace, not finished: the last event says
		// so (the test's deadline bounds the read).
		checkResumeError(t, "stream ended by Stop", lastEvent(t, s), true)
	}
}

// runAgent runs def on b until the test ends.
func runAgent(t *testing.T, b *bus.Bus, def workers.Definition) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- workers.NewRunner(b, def, workers.Options{ShutdownGrace: time.Second}).Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// runEdge follows the bus with e until the test ends, and waits until it
// is ready.
func runEdge(t *testing.T, e *edge.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer rcancel()
	if err := e.WaitReady(rctx); err != nil {
		t.Fatalf("edge not ready: %v", err)
	}
}

// flood keeps per connections open to addr from each of the addresses
// froms, sending nothing, and opens a new one for each the server closes
// (refused, cut or evicted), as fast as it can, until the test ends.
func flood(t *testing.T, addr string, froms []string, per int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, from := range froms {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		for range per {
			wg.Go(func() {
				for ctx.Err() == nil {
					c, err := d.DialContext(ctx, "tcp", addr)
					if err != nil {
						continue
					}
					stop := context.AfterFunc(ctx, func() { c.Close() })
					_, _ = io.Copy(io.Discard, c) // until the server ends it
					stop()
					c.Close()
				}
			})
		}
	}
}

// A pool split evenly among a few flooding addresses holds each at exactly
// its fair share (here 4 addresses × 16 of 64); a newcomer still gets in,
// in the place of an idle connection of one of them. (Evicting only above
// the share let exactly 16 addresses × 256 lock a 4096 pool, as the issue
// found, whenever the flood happened to land evenly.)
func TestEvenlySplitPoolStillAdmitsNewcomers(t *testing.T) {
	_, addr := floodedPool(t, "127.0.3", 4, 16, 64)
	for i := range 5 {
		getFrom(t, "http://"+addr+"/healthz", fmt.Sprintf("127.0.4.%d", 2+i))
	}
}

// floodedPool listens with a pool of pool connections, per per address,
// and fills it from addrs addresses of subnet (subnet.2, subnet.3, …),
// each re-opening its connections as soon as they are cut.
func floodedPool(t *testing.T, subnet string, addrs, per, pool int) (*bus.Metrics, string) {
	t.Helper()
	canSendFrom(t, subnet+".2")
	m, addr := listenCounted(t, edge.HTTPConfig{MaxConns: pool, MaxConnsPerAddr: per})
	var froms []string
	for i := range addrs {
		froms = append(froms, fmt.Sprintf("%s.%d", subnet, 2+i))
	}
	flood(t, addr, froms, per)
	waitMetric(t, m, fmt.Sprintf(`a2a_http_connections_open{listener="a2a"} %d`, pool))
	return m, addr
}

// getFrom checks that url answers 200 to a new connection from from.
func getFrom(t *testing.T, url, from string) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s from %s: %v", url, from, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s from %s: %d", url, from, resp.StatusCode)
	}
}

// canSendFrom skips the test where the loopback has only 127.0.0.1.
func canSendFrom(t *testing.T, ip string) {
	t.Helper()
	c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).Dial("tcp", "127.0.0.1:1")
	if err != nil && strings.Contains(err.Error(), "assign requested address") {
		t.Skipf("cannot send from %s here: %v", ip, err)
	}
	if c != nil {
		c.Close()
	}
}

// Issue 29: 25 addresses each holding as many connections as the
// per-address cap allows, and re-opening every one the server closes,
// more than the pool holds together. Before, the first addresses filled
// the pool and kept it (every place freed was taken again by the flood)
// and every other caller was refused, /healthz included. Now the pool is
// shared: each flooding address is held to its fair share, and a caller
// holding fewer than 4 connections gets in at once, in the place of an
// idle connection of the heaviest address. (The same at the sizes it was
// found at, against a real serve: TestAttackSharedPool.)
func TestFloodingAddressesLeaveOthersServed(t *testing.T) {
	m, addr := floodedPool(t, "127.0.1", 25, 16, 256)

	// Other callers, each from its own address, as a client and an
	// orchestrator's probes are: every request is served.
	for i := range 10 {
		from := fmt.Sprintf("127.0.2.%d", 2+i)
		getFrom(t, "http://"+addr+"/healthz", from)
		getFrom(t, "http://"+addr+"/readyz", from)
		getFrom(t, "http://"+addr+"/", from)
	}
	text := metricsText(t, m)
	if !strings.Contains(text, `a2a_http_connections_evicted_total{listener="a2a"}`) {
		t.Errorf("no evictions counted:\n%s", text)
	}
}
