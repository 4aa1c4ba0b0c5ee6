package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The per-caller request rate of an edge when none is configured
// (autoRate) is decided from the whole configuration, as serve and edge
// read it: flags, environment and file, then the edge's authentication.
// None on a loopback-only edge that authenticates no one; the default 500
// as soon as it authenticates or listens beyond loopback; a configured
// rate always as given.
func TestRateLimitDefault(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	rateFile := file("rate.json", `{"limits": {"rate": 11}}`)
	burstFile := file("burst.json", `{"limits": {"burst": 5, "principals": {"batch": {"rate": 2000, "burst": 4000}}}}`)
	keys := map[string]string{"A2ABUS_API_KEYS": "k-alice-0123456789abcdef=alice"}
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		rate  float64
		burst int
	}{
		{"default serve: loopback, no authentication", nil, nil, 0, 1000},
		{"localhost", []string{"--listen", "localhost:8080"}, nil, 0, 1000},
		{"IPv6 loopback", []string{"--listen", "[::1]:8080"}, nil, 0, 1000},
		{"flag on loopback", []string{"--rate-limit", "7"}, nil, 7, 1000},
		{"environment on loopback", nil, map[string]string{"A2ABUS_RATE_LIMIT": "9"}, 9, 1000},
		{"config file on loopback", []string{"--config", rateFile}, nil, 11, 1000},
		{"config file without a rate", []string{"--config", burstFile}, nil, 0, 5},
		{"API keys on loopback", nil, keys, defaultRate, 1000},
		{"API keys, flag 0", []string{"--rate-limit", "0"}, keys, 0, 1000},
		{"client certificates on loopback", []string{"--tls-cert", "edge.pem", "--tls-key", "edge.key", "--tls-client-ca", "ca.pem"}, nil, defaultRate, 1000},
		{"anonymous beyond loopback", []string{"--listen", "0.0.0.0:8080", "--allow-anonymous", "true"}, nil, defaultRate, 1000},
		{"anonymous beyond loopback, flag", []string{"--listen", "0.0.0.0:8080", "--allow-anonymous", "true", "--rate-limit", "3"}, nil, 3, 1000},
		{"anonymous gRPC beyond loopback", []string{"--grpc-listen", "0.0.0.0:9090", "--allow-anonymous", "true"}, nil, defaultRate, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), tc.args, func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			p := &process{cfg: cfg, log: slog.New(slog.DiscardHandler), out: io.Discard}
			if _, err := p.authenticator(context.Background()); err != nil {
				t.Fatal(err)
			}
			lim := p.edgeLimits()
			if got := lim.Default; got.Rate != tc.rate || got.Burst != tc.burst || got.MaxUnfinished != 1000 || got.MaxUnfinishedBytes != 32<<20 {
				t.Fatalf("edge limits %+v; want rate %g, burst %d and the unfinished-task quotas", got, tc.rate, tc.burst)
			}
			// A whole replacement is configured: it is applied as written.
			if b, ok := lim.Principals["batch"]; tc.args != nil && tc.args[0] == "--config" && tc.args[1] == burstFile && (!ok || b.Rate != 2000 || b.Burst != 4000) {
				t.Fatalf("principal limits %+v; want them as configured", lim.Principals)
			}
		})
	}

	// A negative rate in the file is a mistake, not the automatic default.
	bad := file("bad.json", `{"limits": {"rate": -2}}`)
	if _, err := loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), []string{"--config", bad}, func(string) string { return "" }); err == nil {
		t.Fatal("a negative limits.rate was accepted")
	}
}

// rateRefusals sends n JSON-RPC calls from 16 concurrent loopback clients
// with no credentials, and counts the answers refused as rate-limited
// (HTTP 429 or −31429). The calls name an agent that is not served: the
// front door limits the rate of every call before it looks for the agent,
// and the cheapest answer lets the calls come faster than the old
// default rate.
func rateRefusals(t *testing.T, base string, n int) int {
	t.Helper()
	const workers = 16
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer c.CloseIdleConnections()
	body := `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"no-such-task"}}`
	var (
		mu       sync.Mutex
		refused  int
		firstErr error
		wg       sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				resp, err := c.Post(base+"/agents/not-served", "application/json", strings.NewReader(body))
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests || bytes.Contains(raw, []byte("-31429")) {
					mu.Lock()
					refused++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("POST %s/agents/not-served: %v", base, firstErr)
	}
	return refused
}

// rateServe starts a serve on a free loopback port, anonymous (its
// default), with extra flags, and returns it with its base URL.
func rateServe(t *testing.T, extra ...string) (*proc, string) {
	t.Helper()
	addr := freeAddr(t)
	serve := startProc(t, append([]string{"serve", "--listen", addr, "--data-dir", filepath.Join(t.TempDir(), "data"), "--nats-listen", "off"}, extra...)...)
	base := "http://" + addr
	waitReady(t, serve, base)
	return serve, base
}

// The default serve limits no loopback caller's request rate: more calls
// than the old default (500 a second after a burst of 1 000) allowed in
// any time they could take get no refusal, and the README's load example
// measures the server: every operation succeeds and load does not stop.
func TestDefaultServeNoRateOnLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	serve, base := rateServe(t)
	start := time.Now()
	if n := rateRefusals(t, base, 4000); n != 0 {
		t.Fatalf("the default serve refused %d of 4000 calls from loopback as over a rate", n)
	}
	took := time.Since(start)
	res, err := runLoadJSON(t, "--url", base, "--clients", "64", "--requests", "500", "--warmup", "0s")
	if err != nil || res.Failed != 0 || res.OK < 500 || res.StoppedLimited != nil {
		t.Fatalf("a2abus load against the default serve: err %v, ok %d, failed %d, errors %v, stopped %+v", err, res.OK, res.Failed, res.Errors, res.StoppedLimited)
	}
	// The old default would have refused some of the calls if they came
	// faster than it lets through (its burst and its rate for the time).
	t.Logf("default serve: 4000 calls in %v, none refused (the old default lets through at most %.0f in that time); load: %d ok, %.0f/s",
		took.Round(time.Millisecond), 1000+500*took.Seconds(), res.OK, res.PerSecond)
	serve.stop(t)
}

// A rate set explicitly applies on loopback too; a2abus load against it
// stops early on every binding it speaks, says on stderr that it measured
// the limiter and which server flag to raise, and exits non-zero.
func TestLoadStopsOnRateLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	serve, base := rateServe(t, "--rate-limit", "1", "--rate-burst", "5")
	if n := rateRefusals(t, base, 200); n == 0 {
		t.Fatal("a serve with --rate-limit 1 --rate-burst 5 refused none of 200 calls")
	}

	// Each run would last a minute if it did not stop.
	run := []string{"--clients", "8", "--warmup", "0s", "--duration", "60s"}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"send-auto", []string{"--url", base}},
		{"send-jsonrpc", []string{"--url", base + "/agents/echo", "--binding", "jsonrpc"}},
		{"send-rest", []string{"--url", base + "/agents/echo", "--binding", "rest"}},
		{"send-v03", []string{"--url", base + "/agents/echo", "--binding", "jsonrpc03"}},
		{"stream", []string{"--url", base, "--mode", "stream"}},
		{"fanout", []string{"--url", base, "--url", base + "/agents/echo", "--mode", "fanout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := runLoadJSON(t, append(tc.args, run...)...)
			var ce *cliError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "--rate-limit") || !strings.Contains(err.Error(), "rate limiter") {
				t.Fatalf("load against a rate-limited serve: err %v (%T); want a failure naming --rate-limit and the limiter", err, err)
			}
			st := res.StoppedLimited
			if st == nil || st.Answers < limitedMinAnswers || 2*st.RateLimited <= st.Answers {
				t.Fatalf("result %+v: not stopped on the limiter", res)
			}
		})
	}

	// As a process: the reason on stderr, exit status 1.
	cmd := exec.Command(os.Args[0], append([]string{"load", "--url", base}, run...)...)
	cmd.Env = append(os.Environ(), "A2ABUS_TEST_MAIN=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("a2abus load exited with %v; want status 1\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	for _, want := range []string{"stopped early", "RATE_LIMITED", "rate limiter", "--rate-limit"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
		}
	}
	if !strings.Contains(stdout.String(), "STOPPED EARLY") {
		t.Errorf("the printed result does not say it stopped:\n%s", stdout.String())
	}
	t.Logf("a2abus load: %s", strings.TrimSpace(stderr.String()))
	serve.stop(t)
}
