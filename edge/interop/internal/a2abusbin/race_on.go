//go:build race

package a2abusbin

// raceEnabled says the race detector instruments the test binary; the
// a2abus binary Build makes is then built with it too.
const raceEnabled = true
