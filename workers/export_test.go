package workers

import "time"

// OnConnectionReleased has f called each time keepConnection has released
// a provider's connection, until the returned function is called.
func OnConnectionReleased(f func()) (restore func()) {
	connectionReleased.Store(&f)
	return func() { connectionReleased.Store(nil) }
}

// SetStreamTailWait sets how long keepConnection waits for the end of a
// provider's answer, until the returned function is called.
func SetStreamTailWait(d time.Duration) (restore func()) {
	old := streamTailWait
	streamTailWait = d
	return func() { streamTailWait = old }
}
