package main

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
	"github.com/a2abus/a2abus/schemas"
)

// The profiler and metrics listeners on loopback answer only requests
// whose Host is a loopback name, as the edge does: a browser page whose DNS
// name was rebound to 127.0.0.1 sends its own name and reads neither a
// goroutine dump nor the metrics.
func TestDebugListenersRefuseRebindingHosts(t *testing.T) {
	p := &process{cfg: defaultConfig(), log: slog.New(slog.DiscardHandler), metrics: bus.NewMetrics()}
	pprofAddr, metricsAddr := freeAddr(t), freeAddr(t)
	stopPprof, err := servePprof(pprofAddr, p.opsHTTP("pprof"), p.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopPprof)
	stopMetrics, err := serveMetrics(metricsAddr, p.metrics, p.opsHTTP("metrics"), p.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopMetrics)

	get := func(url, host string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct{ name, url, port string }{
		{"goroutine dump", "http://" + pprofAddr + "/debug/pprof/goroutine?debug=2", pprofAddr[strings.LastIndex(pprofAddr, ":"):]},
		{"profile index", "http://" + pprofAddr + "/debug/pprof/", pprofAddr[strings.LastIndex(pprofAddr, ":"):]},
		{"metrics", "http://" + metricsAddr + "/metrics", metricsAddr[strings.LastIndex(metricsAddr, ":"):]},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, host := range []string{"rebind.evil.example" + c.port, "rebind.evil.example", "192.0.2.1" + c.port} {
				if status, body := get(c.url, host); status != http.StatusForbidden || !strings.Contains(body, "loopback") {
					t.Errorf("Host %s: %d %.200s, want 403 with the reason", host, status, body)
				}
			}
			for _, host := range []string{"127.0.0.1" + c.port, "localhost" + c.port, "[::1]" + c.port} {
				if status, body := get(c.url, host); status != http.StatusOK {
					t.Errorf("Host %s: %d %.200s, want 200", host, status, body)
				}
			}
		})
	}
}

// A remote agent registered at run time is run only with the environment
// variables this process's operator allows: an entry naming another (it
// predates the rule, or came through an edge with another list) is not
// run, so its URL never receives the variable, while an allowed one is run
// and sent. The external agent is a real HTTP server that records what it
// is sent.
func TestRegisteredAgentNeverSendsAnUnlistedVariable(t *testing.T) {
	const leaked, allowed = "leaked-secret-0123456789", "allowed-value-0123456789"
	t.Setenv("A2ABUS_TEST_LEAKY_SECRET", leaked)
	t.Setenv(schemas.RemoteEnvPrefix+"TEST_OK", allowed)
	t.Setenv("A2ABUS_TEST_LISTED", "listed-value-0123456789")

	type seen struct{ path, header string }
	got := make(chan seen, 64)
	ext := startCapture(t, func(r *http.Request) {
		var all []string
		for k, vs := range r.Header {
			all = append(all, k+": "+strings.Join(vs, ","))
		}
		select {
		case got <- seen{r.URL.Path, strings.Join(all, "\n")}:
		default:
		}
	})

	_, b := bustest.New(t, bustest.Options{Config: bus.Config{Metrics: bus.NewMetrics()}})
	cfg := defaultConfig()
	cfg.Outbound.AllowLoopback = true
	cfg.RemoteEnvAllow = []string{"A2ABUS_TEST_LISTED"}
	p := &process{cfg: cfg, log: slog.New(slog.DiscardHandler), bus: b, metrics: b.Metrics()}
	d := &dynamicAgents{p: p, static: map[string]bool{}, running: map[string]*dynAgent{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	put := func(agent string, env map[string]string) {
		t.Helper()
		e := schemas.RegistryEntry{Agent: agent, Remote: &schemas.RemoteAgentSpec{URL: ext + "/" + agent, HeadersFromEnv: env, CheckEvery: "1h"}}
		if err := b.PutRegistryEntry(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// Written straight to the bucket, as an entry from before the rule.
	put("leaky", map[string]string{"X-Leak": "A2ABUS_TEST_LEAKY_SECRET", "X-Ok": schemas.RemoteEnvPrefix + "TEST_OK"})
	put("fine", map[string]string{"X-Ok": schemas.RemoteEnvPrefix + "TEST_OK", "X-Listed": "A2ABUS_TEST_LISTED"})

	// The registry is applied in order: once "fine" calls, "leaky" was
	// applied before it.
	deadline := time.After(20 * time.Second)
	for fine := false; !fine; {
		select {
		case s := <-got:
			if strings.Contains(s.header, leaked) {
				t.Fatalf("%s was sent the unlisted variable:\n%s", s.path, s.header)
			}
			fine = strings.HasPrefix(s.path, "/fine/") && strings.Contains(s.header, "X-Ok: "+allowed) && strings.Contains(s.header, "X-Listed: listed-value-0123456789")
		case <-deadline:
			t.Fatal("the allowed registered agent never called its external agent with its headers")
		}
	}
	d.mu.Lock()
	_, running := d.running["leaky"]
	d.mu.Unlock()
	if running {
		t.Fatal("the entry naming an unlisted variable runs")
	}
}

// startCapture serves 404 to every request on loopback after handing it
// to record, and returns its base URL.
func startCapture(t *testing.T, record func(*http.Request)) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(r)
		http.NotFound(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}
