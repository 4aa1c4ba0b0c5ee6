package discovery

// OnStreamReleased has f called with a stream's URL each time the stream
// has released its connection, until the returned function is called.
func OnStreamReleased(f func(url string)) (restore func()) {
	streamReleased.Store(&f)
	return func() { streamReleased.Store(nil) }
}
