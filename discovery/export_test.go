package discovery

import "time"

// OnStreamReleased has f called with a stream's URL each time the stream
// has released its connection, until the returned function is called.
func OnStreamReleased(f func(url string)) (restore func()) {
	streamReleased.Store(&f)
	return func() { streamReleased.Store(nil) }
}

// SetStreamTailWait sets how long a stream waits for the end of the
// agent's answer after its last event, until the returned function is
// called.
func SetStreamTailWait(d time.Duration) (restore func()) {
	old := streamTailWait
	streamTailWait = d
	return func() { streamTailWait = old }
}
