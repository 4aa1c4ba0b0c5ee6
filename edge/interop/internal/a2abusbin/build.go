// Package a2abusbin gives the interop tests that run a2abus as a process
// its binary, built once per test binary that asks.
package a2abusbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Build returns the a2abus binary for process tests: the one run.sh built
// ($A2ABUS_INTEROP_BIN), else one built here as the test binary was (with
// the race detector if it has it; without cmd/a2abus's profile, which
// would make every package a variant of its own), so the build cache's
// packages serve it.
func Build(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("A2ABUS_INTEROP_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "a2abus")
	args := []string{"build", "-pgo=off", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	// Built in the product's own module (the directory this module's
	// replace names), with its go.sum: this module's lists only what the
	// interop tests import, not every dependency of the binary.
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/a2abus/a2abus").Output()
	if err != nil {
		t.Fatalf("finding the a2abus module: %v", err)
	}
	cmd := exec.Command("go", append(args, "./cmd/a2abus")...)
	cmd.Dir = strings.TrimSpace(string(root))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building a2abus: %v\n%s", err, out)
	}
	return bin
}

// Start starts an a2abus process (Build's binary) with args and env (nil:
// the test's own environment), kills it when the test ends, and logs what
// it wrote if the test failed.
func Start(t testing.TB, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(Build(t), args...)
	cmd.Env = env
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("a2abus %s output:\n%s", strings.Join(args, " "), out)
		}
	})
}
