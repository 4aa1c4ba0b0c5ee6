package edge

// A pool of connections (the listener's MaxConns) or of SSE streams (the
// edge's MaxStreams) is shared by the source addresses that hold it. Held
// as one pool, a few addresses that re-open as fast as they are cut keep
// it full and every other caller out (issue 29). fairShare is the one rule
// both pools follow: while the pool is less than half taken, an address
// takes what its static caps allow; past that high-water mark, an address
// may take one more only while it holds less than its fair share, the pool
// divided by the addresses holding at least shareFloor of it, never less
// than shareFloor. (Addresses holding fewer — a caller with a connection
// or two — take less than any share, so they do not shrink the share of
// the others: an edge with one heavy client and a few probes lets that
// client use the pool.) Places already held are not taken back by the rule: they
// end by their own bounds (timeouts, or the listener's eviction of idle
// connections, see connLimiter), and each is then taken back at most up to
// the share, so the addresses flooding a pool settle at a share each and
// leave room for one more.

// shareFloor is what every address may hold of a pool under pressure
// however many addresses share it, and what a listener whose pool is full
// lets an address below it take by closing an idle connection of the
// heaviest address: enough for a client's few connections, a browser's or
// an orchestrator's health probes.
const shareFloor = 4

// fairShare is the most one source address may hold of a pool of size
// places of which open are taken, heavy addresses holding at least
// shareFloor each; size when the pool is below its high-water mark. O(1).
func fairShare(size, open, heavy int) int {
	if open < size/2 || heavy <= 1 {
		return size
	}
	return max(shareFloor, size/heavy)
}
