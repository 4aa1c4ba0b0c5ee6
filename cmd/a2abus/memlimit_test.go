package main

import (
	"context"
	"io/fs"
	"testing"
	"time"
)

// The soft memory limit: as configured (0 is none); unset, three quarters
// of the container's limit (cgroup v2, else v1); no limit found (no
// cgroup files, v2 "max", v1's near-largest value), 512 MiB.
func TestMemoryLimitFromContainer(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(path string) ([]byte, error) {
			if v, ok := m[path]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	for name, tc := range map[string]struct {
		configured int64
		files      map[string]string
		want       int64
	}{
		"configured wins":    {configured: 1 << 30, files: map[string]string{cgroupV2MemoryMax: "536870912\n"}, want: 1 << 30},
		"configured none":    {configured: 0, files: map[string]string{cgroupV2MemoryMax: "536870912\n"}, want: 0},
		"cgroup v2":          {configured: autoMemoryLimit, files: map[string]string{cgroupV2MemoryMax: "536870912\n"}, want: 384 << 20},
		"cgroup v2 no limit": {configured: autoMemoryLimit, files: map[string]string{cgroupV2MemoryMax: "max\n"}, want: defaultMemoryLimit},
		"cgroup v1":          {configured: autoMemoryLimit, files: map[string]string{cgroupV1MemoryMax: "2147483648\n"}, want: 1536 << 20},
		"cgroup v1 no limit": {configured: autoMemoryLimit, files: map[string]string{cgroupV1MemoryMax: "9223372036854771712\n"}, want: defaultMemoryLimit},
		"no cgroup":          {configured: autoMemoryLimit, want: defaultMemoryLimit},
		"unreadable value":   {configured: autoMemoryLimit, files: map[string]string{cgroupV2MemoryMax: "lots"}, want: defaultMemoryLimit},
	} {
		got, why := memoryLimit(tc.configured, files(tc.files))
		if got != tc.want || why == "" {
			t.Errorf("%s: %d (%s), want %d", name, got, why, tc.want)
		}
	}
}

// The heap policy's limit follows the live heap times its factor, within
// its floor and the ceiling, and it gives the ceiling back when it stops.
func TestHeapPolicyFollowsTheLiveHeap(t *testing.T) {
	h := heapPolicy{factor: 2.5, floor: 96 << 20, ceiling: 512 << 20}
	for _, c := range []struct {
		live uint64
		want int64
	}{{10 << 20, 96 << 20}, {100 << 20, 250 << 20}, {300 << 20, 512 << 20}} {
		if got := h.limit(c.live); got != c.want {
			t.Errorf("live %d MiB: limit %d MiB, want %d MiB", c.live>>20, got>>20, c.want>>20)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	set := make(chan int64, 16)
	done := make(chan struct{})
	go func() {
		h.run(ctx, time.Hour, func(l int64) int64 { set <- l; return 0 })
		close(done)
	}()
	if l := <-set; l < h.floor || l > h.ceiling {
		t.Errorf("the first limit set is %d MiB, outside [%d, %d] MiB", l>>20, h.floor>>20, h.ceiling>>20)
	}
	cancel()
	<-done
	if l := <-set; l != h.ceiling {
		t.Errorf("after it stops the limit is %d MiB, want the ceiling", l>>20)
	}
}
