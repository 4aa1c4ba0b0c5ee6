package main

import (
	"os"
	"testing"
)

// scenario skips a cluster, fault or attack scenario unless
// A2ABUS_SCENARIOS is set. Those run whole topologies of processes for
// tens of seconds each (a node killed and restarted under audited load,
// workers killed, eviction by TTL, a cluster forming behind a listening
// edge), or flood a serve at the size the attacks were found at, scaled
// to CI (large and dense bodies from many addresses, the store filled,
// the backlog shared, subscribers and pooled connections by the hundred:
// every attackServe): about six minutes together on 2 cores. The README's test command leaves them out so that
// a developer's run stays short; .ci/run always sets A2ABUS_SCENARIOS=1,
// so nothing lands without them.
func scenario(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("processes")
	}
	if os.Getenv("A2ABUS_SCENARIOS") == "" {
		t.Skip("a cluster, fault or attack scenario: A2ABUS_SCENARIOS=1 runs it (.ci/run does)")
	}
}
