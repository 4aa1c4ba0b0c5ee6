package main

import (
	"fmt"
	"strconv"
	"strings"
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
