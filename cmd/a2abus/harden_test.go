package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// metricValue reads one series of the process's metrics at url, -1 if
// it is not there.
func metricValue(t *testing.T, url, series string) int {
	t.Helper()
	_, _, text := get(t, url)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\d+)$`).FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// waitMetric polls the series at url until it is want.
func waitMetric(t *testing.T, url, series string, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for got := metricValue(t, url, series); got != want; got = metricValue(t, url, series) {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d, want %d", series, got, want)
		}
		time.Sleep(20 * time.Millisecond) // polling another process
	}
}

// slowConns is how many slow clients the slowloris test opens: 300,
// fewer where this process may not open that many files.
func slowConns(t *testing.T) int {
	n := 300
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(2*n+256) {
		n = max(int(lim.Cur)/2-128, 20)
		t.Logf("open file limit %d: %d slow clients", lim.Cur, n)
	}
	return n
}

// Hundreds of clients that send a request head one byte every second
// (slowloris) hold connections of a real serve, yet normal requests keep
// being answered while they are there, and the server cuts each of them
// when --read-header-timeout runs out, not later.
func TestSlowClientsDoNotExhaustTheEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const timeout = 5 * time.Second
	n := slowConns(t)
	addr := freeAddr(t)
	base := "http://" + addr
	serve := startProc(t, "serve", "--listen", addr, "--data-dir", t.TempDir(), "--nats-listen", "off",
		"--read-header-timeout", timeout.String(), "--max-connections-per-addr", strconv.Itoa(2*n))
	waitReady(t, serve, base)

	type cut struct {
		after time.Duration
		err   error
	}
	cuts := make(chan cut, n)
	var wg sync.WaitGroup
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("slow client: %v", err)
		}
		begin := time.Now()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer c.Close()
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Second): // the slow client's pace
					}
					if _, err := io.WriteString(c, "x"); err != nil {
						return
					}
				}
			}()
			_ = c.SetReadDeadline(time.Now().Add(timeout + 30*time.Second))
			_, err := io.Copy(io.Discard, c)
			cuts <- cut{time.Since(begin), err}
		})
	}
	t.Cleanup(wg.Wait)

	// While they are all held, the edge serves.
	if open := metricValue(t, base+"/metrics", `a2a_http_connections_open{listener="a2a"}`); open < n {
		t.Fatalf("%d connections open while %d slow clients hold theirs", open, n)
	}
	if status, _, body := get(t, base+"/readyz"); status != http.StatusOK {
		t.Fatalf("readyz among slow clients: %d %s", status, body)
	}
	if status, _, raw := sendMessage(t, base+"/", "slowloris", "still served"); status != http.StatusOK || !bytes.Contains(raw, []byte(schemas.TaskStateCompleted)) {
		t.Fatalf("a message among slow clients: %d %s", status, raw)
	}

	wg.Wait()
	close(cuts)
	var latest time.Duration
	for c := range cuts {
		var ne net.Error
		if errors.As(c.err, &ne) && ne.Timeout() {
			t.Fatalf("a slow client was never cut (waited %v)", c.after)
		}
		// The server's clock starts at its accept, which may come a moment
		// before the client's dial returns; a client cut well before the
		// timeout was refused, not timed out.
		if c.after < timeout-500*time.Millisecond {
			t.Fatalf("a slow client was cut after %v, before --read-header-timeout %v", c.after, timeout)
		}
		latest = max(latest, c.after)
	}
	// Generous: the point is that the server cuts them, under the race
	// detector on a shared machine.
	if latest > timeout+10*time.Second {
		t.Fatalf("the last slow client was cut after %v; --read-header-timeout is %v", latest, timeout)
	}
	t.Logf("%d slow clients cut %v after they connected at the latest (--read-header-timeout %v)", n, latest.Round(time.Millisecond), timeout)
	serve.stop(t)
}

// More connections from one address than --max-connections-per-addr:
// the extra ones are closed as they are accepted (and counted), a client
// of that address is refused while the others hold theirs, and served
// the moment they let go.
func TestConnectionsPerAddressCapped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const limit = 20
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	base, metrics := "http://"+addr, "http://"+metricsAddr+"/metrics"
	serve := startProc(t, "serve", "--listen", addr, "--data-dir", t.TempDir(), "--nats-listen", "off",
		"--max-connections-per-addr", strconv.Itoa(limit), "--metrics-listen", metricsAddr)
	waitReady(t, serve, base)
	waitMetric(t, metrics, `a2a_http_connections_open{listener="a2a"}`, 0)
	if !regexp.MustCompile(`connection limits.*max_connections_per_addr=20 `).MatchString(serve.output()) {
		t.Fatalf("serve did not log its connection limits:\n%s", serve.output())
	}

	var held []net.Conn
	for range limit {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		t.Cleanup(func() { c.Close() })
	}
	waitMetric(t, metrics, `a2a_http_connections_open{listener="a2a"}`, limit)
	const extra = 5
	for range extra {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(bufio.NewReader(c))
		c.Close()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("a connection over the per-address cap was kept open")
		}
		if len(got) > 0 && !bytes.HasPrefix(got, []byte("HTTP/1.1 503 ")) {
			t.Fatalf("a connection over the per-address cap was answered %q", got)
		}
	}
	if resp, err := http.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("a request from the capped address was served while the cap was full")
		}
	}
	if got := metricValue(t, metrics, `a2a_http_connections_refused_total{listener="a2a",reason="max_connections_per_addr"}`); got < extra {
		t.Fatalf("%d refusals counted, want at least %d", got, extra)
	}

	for _, c := range held {
		c.Close()
	}
	waitMetric(t, metrics, `a2a_http_connections_open{listener="a2a"}`, 0)
	if status, _, raw := sendMessage(t, base+"/", "after-the-flood", "served again"); status != http.StatusOK || !bytes.Contains(raw, []byte(schemas.TaskStateCompleted)) {
		t.Fatalf("a message after the flood: %d %s", status, raw)
	}
	serve.stop(t)
}

// SIGTERM ends a serve within --shutdown-grace even while clients hold
// streams of a task that waits for input forever, a stream and blocking
// calls of tasks whose agent would take ten minutes: at the end of the
// grace their requests are ended and the work handed back, and the
// process exits cleanly. (Wall time is asserted only as a generous upper
// bound: the point is that nothing holds the process.)
func TestShutdownBoundedByGrace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const grace = 2 * time.Second
	dir := t.TempDir()
	cfg := filepath.Join(dir, "a2abus.json")
	writeFile(t, cfg, `{"agents":[{"name":"echo"},{"name":"slow","kind":"echo","delay":"10m"}]}`)
	addr := freeAddr(t)
	base := "http://" + addr
	serve := startProc(t, "serve", "--listen", addr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", "off",
		"--config", cfg, "--shutdown-grace", grace.String())
	waitReady(t, serve, base)
	waitAgentCard(t, base, "slow")

	var asked struct {
		Task schemas.Task `json:"task"`
	}
	msg := schemas.Message{MessageID: "ask", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(workers.AskCommand)}}
	if err := json.Unmarshal(rpc(t, base+"/", "SendMessage", map[string]any{"message": msg}), &asked); err != nil || asked.Task.Status.State != schemas.TaskStateInputRequired {
		t.Fatalf("a task waiting for input: %+v %v", asked.Task.Status, err)
	}

	// Every client's request ends, one way or another, once the process
	// has gone.
	var clients sync.WaitGroup
	t.Cleanup(clients.Wait)
	open := func(agent, method string, params any, stream bool) {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		req, _ := http.NewRequest(http.MethodPost, base+"/agents/"+agent, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if stream {
			req.Header.Set("Accept", "text/event-stream")
			// Open once its headers are in (a stream of a task whose agent
			// has not answered yet has no event to send).
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("%s: %v %v", method, err, resp.Header)
			}
			clients.Go(func() { _, _ = io.Copy(io.Discard, resp.Body); resp.Body.Close() })
			return
		}
		clients.Go(func() {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	for range 3 {
		open("echo", "SubscribeToTask", map[string]any{"id": asked.Task.ID}, true)
	}
	slow := func(id string) map[string]any {
		return map[string]any{"message": schemas.Message{MessageID: id, Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("take your time")}}}
	}
	open("slow", "SendStreamingMessage", slow("slow-stream"), true)
	open("slow", "SendMessage", slow("slow-blocking-1"), false)
	open("slow", "SendMessage", slow("slow-blocking-2"), false)
	// The blocking calls are in flight once their tasks exist.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var list schemas.ListTasksResponse
		if _, err := tryRPC(base+"/agents/slow", "ListTasks", map[string]any{}, &list); err == nil && list.TotalSize == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow agent's tasks were never all created")
		}
		time.Sleep(20 * time.Millisecond) // polling another process
	}

	begin := time.Now()
	_ = serve.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-serve.done:
		serve.done <- err
		took := time.Since(begin)
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM:\n%s", err, serve.output())
		}
		t.Logf("serve exited %v after SIGTERM with --shutdown-grace %v", took.Round(time.Millisecond), grace)
	case <-time.After(grace + 10*time.Second):
		t.Fatalf("serve still running %v after SIGTERM with --shutdown-grace %v:\n%s", grace+10*time.Second, grace, serve.output())
	}
	// The log says what the shutdown waits for (the streams of the task
	// waiting for input end at once, so not those), and what the end of
	// the grace cut.
	for _, want := range []string{
		`msg="shutting down" waiting_for="1 stream and 2 requests" up_to=2s ended_at_once="3 streams of tasks waiting for input"`,
		`msg="edge drained" cut_at_grace_end="1 stream and 2 requests"`,
	} {
		if !strings.Contains(serve.output(), want) {
			t.Errorf("the log does not say %s:\n%s", want, serve.output())
		}
	}
}

// The file descriptors are shared out as fds.go describes: HTTP gets
// what the reserve leaves (at least half the limit), the configured cap
// wins below that, the embedded server half of the rest.
func TestPlanConns(t *testing.T) {
	def := defaultConfig().HTTP
	for _, tc := range []struct {
		name               string
		soft               uint64
		cfg                HTTPLimits
		ops                int
		embedded           bool
		edge, perAddr, nat int
		lowered            bool
	}{
		{"plenty", 1 << 20, def, 0, true, 4096, 256, (1<<20 - 4096) / 2, false},
		{"unknown limit", 0, def, 0, true, 4096, 256, 0, false},
		{"edge only", 1 << 20, def, 0, false, 4096, 256, 0, false},
		{"low limit", 4095, def, 0, true, 4095 - 1024, 256, 512, true},
		{"ops listeners", 4095, def, 2, false, 4095 - 1024 - 64, 256, 0, true},
		{"tiny limit", 1024, def, 0, true, 512, 256, 256, true},
		{"no configured cap", 1 << 16, HTTPLimits{MaxConnections: 0, MaxConnectionsPerAddr: 0, FDReserve: 1024}, 0, false, 1<<16 - 1024, 0, 0, false},
		{"per address above the cap", 1 << 20, HTTPLimits{MaxConnections: 100, MaxConnectionsPerAddr: 256, FDReserve: 1024}, 0, false, 100, 100, 0, false},
	} {
		p := planConns(tc.soft, tc.soft, tc.cfg, tc.ops, tc.embedded)
		if p.edge != tc.edge || p.perAddr != tc.perAddr || p.nats != tc.nat || p.lowered != tc.lowered {
			t.Errorf("%s: edge %d per address %d nats %d lowered %v; want %d %d %d %v", tc.name, p.edge, p.perAddr, p.nats, p.lowered, tc.edge, tc.perAddr, tc.nat, tc.lowered)
		}
	}
}

// The HTTP bounds come from the defaults, the file's "http" object and
// flags, and nonsense is refused.
func TestHTTPLimitsConfig(t *testing.T) {
	none := func(string) string { return "" }
	cfg, err := loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), nil, none)
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.HTTP; time.Duration(h.ReadHeaderTimeout) != 10*time.Second || time.Duration(h.ReadBodyTimeout) != 30*time.Second ||
		time.Duration(h.IdleTimeout) != 120*time.Second || h.MaxHeaderBytes != 64<<10 || h.MaxConnections != 4096 ||
		h.MaxConnectionsPerAddr != 256 || h.FDReserve != 1024 {
		t.Fatalf("defaults = %+v", h)
	}
	file := writeTemp(t, t.TempDir(), `{"http":{"readBodyTimeout":"5s","maxConnections":100}}`)
	cfg, err = loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), []string{"--config", file, "--read-header-timeout", "2s",
		"--idle-timeout", "1m", "--max-header-bytes", "16KiB", "--max-connections-per-addr", "0", "--fd-reserve", "2048"}, none)
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.HTTP; time.Duration(h.ReadHeaderTimeout) != 2*time.Second || time.Duration(h.ReadBodyTimeout) != 5*time.Second ||
		time.Duration(h.IdleTimeout) != time.Minute || h.MaxHeaderBytes != 16<<10 || h.MaxConnections != 100 ||
		h.MaxConnectionsPerAddr != 0 || h.FDReserve != 2048 {
		t.Fatalf("configured = %+v", h)
	}
	for _, args := range [][]string{
		{"--read-header-timeout", "0s"}, {"--read-body-timeout", "-1s"}, {"--max-header-bytes", "0"},
		{"--max-connections", "-1"}, {"--max-connections-per-addr", "-5"}, {"--fd-reserve", "-1"},
	} {
		if _, err := loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), args, none); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
