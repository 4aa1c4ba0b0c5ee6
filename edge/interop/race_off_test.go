//go:build !race

package interop

// raceEnabled: see race_on_test.go.
const raceEnabled = false
