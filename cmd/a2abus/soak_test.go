package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A soak of one `serve` with its default settings: A2ABUS_SOAK_SERVE tasks
// (e.g. 200000) go through it from `a2abus load` in four equal parts, and
// the process's resident memory is read after each. After the first part
// the store holds tens of thousands of tasks and the retention bound
// (--max-finished-tasks, lowered only by A2ABUS_SOAK_FINISHED) takes over,
// so memory must stay flat from there: the last reading at most 1.2 times
// the first, and below the process's memory limit. Off unless set:
//
//	A2ABUS_SOAK_SERVE=200000 go test -run SoakServe -v -timeout 60m ./cmd/a2abus/
func TestSoakServeMemoryStaysFlat(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("A2ABUS_SOAK_SERVE"))
	if n == 0 {
		t.Skip("set A2ABUS_SOAK_SERVE=<tasks> to run")
	}
	dir := t.TempDir()
	httpAddr := freeAddr(t)
	args := []string{"serve", "--listen", httpAddr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", freeAddr(t), "--rate-limit", "0",
		"--memory-limit", "512MiB"}
	if f := os.Getenv("A2ABUS_SOAK_FINISHED"); f != "" {
		args = append(args, "--max-finished-tasks", f)
	}
	serve := startProc(t, args...)
	base := "http://" + httpAddr
	waitReady(t, serve, base)
	var rss []int64
	for part := range 4 {
		res, err := runLoadJSON(t, "--url", base+"/agents/echo", "--clients", "32", "--requests", strconv.Itoa(n/4), "--warmup", "0s")
		if err != nil {
			t.Fatalf("part %d: %v (%+v)", part, err, res)
		}
		kib := residentKiB(t, serve.cmd.Process.Pid)
		rss = append(rss, kib)
		t.Logf("after %d tasks: RSS %d MiB (%.0f tasks/s, %d failed)", (part+1)*n/4, kib>>10, res.PerSecond, res.Failed)
	}
	if float64(rss[3]) > 1.2*float64(rss[0]) {
		t.Fatalf("RSS grew from %d to %d MiB", rss[0]>>10, rss[3]>>10)
	}
	if rss[3] > 512<<10 {
		t.Fatalf("RSS %d MiB is past the memory limit of 512 MiB", rss[3]>>10)
	}
}

// residentKiB reads a process's resident set size (Linux).
func residentKiB(t *testing.T, pid int) int64 {
	t.Helper()
	return statusKiB(t, pid, "VmRSS")
}

// statusKiB reads one memory figure of /proc/<pid>/status: VmRSS, or
// VmHWM (the resident peak).
func statusKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatalf("no %s", field)
	return 0
}
