package edge

import (
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
)

// The wait a refusal by an agent's backlog tells is the backlog over the
// pace the agent kept, measured over one to two paceWindows of readings,
// within 1..300 s: computed from the readings' numbers and times, never
// from a clock.
func TestDrainRetryFollowsThePace(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var e backlogEntry
	for _, r := range []struct {
		what          string
		after         time.Duration
		backlog, done uint64
		want          int
	}{
		{"first reading: no pace yet", 0, 1000, 0, unknownDrainRetry},
		{"half a second later: too short to tell", 500 * time.Millisecond, 1000, 5, unknownDrainRetry},
		{"10 s, 100 done: 10 a second, 1000 to go", 10 * time.Second, 1000, 100, 100},
		{"15 s, 150 done since the start: 900 to go", 15 * time.Second, 900, 150, 90},
		{"20 s: the pace is now measured from 10 s (100 done since)", 20 * time.Second, 900, 200, 90},
		{"25 s: 300 done since 10 s, 20 a second, 40 to go", 25 * time.Second, 40, 400, 2},
		{"30 s: measured from 20 s, 200 done since", 30 * time.Second, 40, 400, 2},
		{"40 s: nothing done since 30 s, a backlog left", 40 * time.Second, 40, 400, maxDrainRetry},
		{"the consumer was made anew: its count restarts", 41 * time.Second, 40, 3, unknownDrainRetry},
	} {
		e.read(bus.AgentLoad{Backlog: r.backlog, Done: r.done}, t0.Add(r.after))
		if got := e.drainRetry(); got != r.want {
			t.Errorf("%s: Retry-After %d, want %d", r.what, got, r.want)
		}
	}
	for _, c := range []struct {
		backlog, done uint64
		span          time.Duration
		want          int
	}{
		{10000, 1, 10 * time.Second, maxDrainRetry},   // 100 000 s, bounded
		{1, 1000, 10 * time.Second, minDrainRetry},    // 10 ms
		{10000, 100, 10 * time.Second, maxDrainRetry}, // 1000 s, bounded
		{600, 200, 20 * time.Second, 60},
	} {
		if got := drainRetry(c.backlog, c.done, c.span); got != c.want {
			t.Errorf("drainRetry(%d, %d, %s) = %d, want %d", c.backlog, c.done, c.span, got, c.want)
		}
	}
}
