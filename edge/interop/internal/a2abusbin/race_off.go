//go:build !race

package a2abusbin

// raceEnabled: see race_on_test.go.
const raceEnabled = false
