package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runLoadJSON runs `a2abus load ... -o json` in-process and decodes its
// result.
func runLoadJSON(t *testing.T, args ...string) (loadResult, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), append([]string{"load", "-o", "json"}, args...), &out, &errb, os.Getenv)
	var res loadResult
	if out.Len() > 0 {
		if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
			t.Fatalf("load printed no JSON result: %v\n%s\n%s", jerr, out.String(), errb.String())
		}
	}
	return res, err
}

// The load tool drives a real a2abus (a serve process) in each mode and
// reports what it measured; against nothing it fails with counts, not a
// hang or a zero-filled success.
func TestLoadToolAgainstServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	serve := startProc(t, "serve", "--listen", httpAddr, "--grpc-listen", grpcAddr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", freeAddr(t))
	base := "http://" + httpAddr
	waitReady(t, serve, base)

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"send-auto", []string{"--url", base}},
		{"send-rest", []string{"--url", base + "/agents/echo", "--binding", "rest"}},
		{"send-v03", []string{"--url", base + "/agents/echo", "--binding", "jsonrpc03"}},
		{"send-grpc", []string{"--url", "http://" + grpcAddr + "/agents/echo", "--binding", "grpc"}},
		{"stream", []string{"--url", base, "--mode", "stream"}},
		{"stream-grpc", []string{"--url", grpcAddr, "--binding", "grpc", "--mode", "stream"}},
		{"fanout", []string{"--url", base, "--url", base + "/agents/echo", "--mode", "fanout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 60
			res, err := runLoadJSON(t, append(tc.args, "--clients", "4", "--warmup", "0s", "--requests", "60", "--text", "load test words")...)
			if err != nil {
				t.Fatalf("load failed: %v (%+v)", err, res)
			}
			if res.Failed != 0 || res.OK < n {
				t.Fatalf("ok %d failed %d errors %v; want >= %d ok and none failed", res.OK, res.Failed, res.Errors, n)
			}
			l := res.Latency
			if !(l.P50 > 0 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max) || res.PerSecond <= 0 {
				t.Fatalf("percentiles out of order or empty: %+v, %.1f/s", l, res.PerSecond)
			}
			if strings.HasPrefix(tc.name, "stream") {
				if res.FirstEvent == nil || res.FirstEvent.P50 <= 0 || res.FirstEvent.P50 > l.P50 || res.Events < 2*res.OK {
					t.Fatalf("stream: first event %+v, %d events for %d streams", res.FirstEvent, res.Events, res.OK)
				}
			}
			t.Logf("%s: %d ok, %.0f/s, p50 %.2f ms, p99 %.2f ms", tc.name, res.OK, res.PerSecond, l.P50, l.P99)
		})
	}

	// A target that does not answer: every operation fails, counted by
	// cause, and the command exits non-zero.
	dead := "http://" + freeAddr(t)
	res, err := runLoadJSON(t, "--url", dead, "--binding", "jsonrpc", "--clients", "2", "--warmup", "0s", "--requests", "5")
	if err == nil || res.OK != 0 || res.Failed < 5 || len(res.Errors) == 0 {
		t.Fatalf("against %s: err %v, result %+v", dead, err, res)
	}
	for k := range res.Errors {
		if !strings.Contains(k, "connect") && !strings.Contains(k, "refused") {
			t.Errorf("error key %q does not say the agent cannot be reached", k)
		}
	}
	serve.stop(t)
}
