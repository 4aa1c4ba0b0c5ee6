package main

import (
	"io/fs"
	"testing"
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
