//go:build race

package interop

// raceEnabled says the race detector instruments this test binary; the
// a2abus binary the process tests build is then built with it too (see
// buildA2Abus).
const raceEnabled = true
