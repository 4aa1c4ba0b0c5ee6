package main

import (
	"context"
	"fmt"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// The soft memory limit a process sets when --memory-limit is not given.
// It is the room the collector has: too little and, once the retained
// tasks' working set fills it (hundreds of MB at the default retention
// under sustained load), the collector runs without end and throughput
// falls by half; too much in a container and the kernel kills the process
// before the collector acts. So inside a container with a memory limit it
// is three quarters of that limit (the rest: stacks, the embedded
// server's off-heap use, the runtime), and outside one it is
// defaultMemoryLimit, sized for a small node.
const (
	// autoMemoryLimit marks the limit as not configured (Config default).
	autoMemoryLimit    = -1
	defaultMemoryLimit = 512 << 20
	// Files that hold the container's memory limit: cgroup v2, then v1.
	cgroupV2MemoryMax = "/sys/fs/cgroup/memory.max"
	cgroupV1MemoryMax = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
)

// memoryLimit resolves the configured limit: as configured when it was
// (0: none), else from the container's limit read with readFile, else
// defaultMemoryLimit. why says where it came from, for the start-up log.
func memoryLimit(configured int64, readFile func(string) ([]byte, error)) (limit int64, why string) {
	if configured >= 0 {
		return configured, "configured"
	}
	for _, path := range []string{cgroupV2MemoryMax, cgroupV1MemoryMax} {
		b, err := readFile(path)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(v, 10, 64)
		// "max" (v2) or a value near the largest int64 (v1) is no limit.
		if err != nil || n <= 0 || n >= 1<<60 {
			break
		}
		return n / 4 * 3, fmt.Sprintf("three quarters of the container's %d MiB (%s)", n>>20, path)
	}
	return defaultMemoryLimit, "default (no container memory limit found)"
}

// heapPolicy keeps the process's heap near its live set: a soft memory
// limit that follows the live heap (what the last collection kept) times
// factor, at least floor and at most ceiling (the limit memoryLimit
// resolved). Under it the high GC target (Config.GCPercent) still spares
// the collector while the live set is small, and once the live set grows
// the heap stays a small multiple of it instead of filling the whole
// ceiling, which it did with a fixed limit: after a burst of load a2abus
// held its whole 512 MiB while a fraction of it was live.
type heapPolicy struct {
	factor         float64
	floor, ceiling int64
}

// heapPolicyFloor is the least limit the policy sets: room for the
// embedded server's block buffers and a burst's garbage at an idle live
// set.
const heapPolicyFloor = 96 << 20

// limit is the soft memory limit for a live heap of live bytes.
func (h heapPolicy) limit(live uint64) int64 {
	l := max(int64(float64(live)*h.factor), h.floor)
	if h.ceiling > 0 {
		l = min(l, h.ceiling)
	}
	return l
}

// run sets the limit from the live heap every interval until ctx ends,
// then restores the ceiling.
func (h heapPolicy) run(ctx context.Context, every time.Duration, set func(int64) int64) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(every)
	defer t.Stop()
	defer set(h.ceiling)
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			set(h.limit(sample[0].Value.Uint64()))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
