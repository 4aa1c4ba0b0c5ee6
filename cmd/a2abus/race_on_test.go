//go:build race

package main

// raceEnabled says the race detector instruments this test binary (and
// the a2abus processes it starts, which are this binary): it multiplies
// memory and slows every request, so memory bounds are not asserted.
const raceEnabled = true
