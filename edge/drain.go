package edge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/a2abus/a2abus/schemas"
)

// The edge's part in a shutdown. Drain starts it: the edge reports not
// ready, and every SSE stream of a task that waits for its client
// (INPUT_REQUIRED, AUTH_REQUIRED) ends at once, as nothing would come on
// it for the whole grace but the client's own answer, which goes to
// another edge. The streams of tasks still in progress keep the grace to
// deliver their last events, and a stream whose task comes to wait for
// input during the grace ends then. HTTPListener.Stop ends what still runs
// when the grace is over. A stream ended either way gets, as its last
// event, a retryable error (ErrUnavailable, "resume with Last-Event-ID")
// in its binding's framing, so no client takes it for a finished one.
// drainState counts what the edge serves, so the process can say what a
// shutdown waits for (Drain) and what it cut (Cut).

// errGraceOver is the cause with which HTTPListener.Stop cancels the
// requests still running when a shutdown's grace is over.
var errGraceOver = errors.New("the shutdown grace is over")

// graceOver reports whether ctx, a request's context, was ended by the end
// of a shutdown's grace (not by its client leaving).
func graceOver(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errGraceOver) }

// drainState is what the edge knows of its own requests for a shutdown.
// The zero value is ready to use.
type drainState struct {
	once    sync.Once
	mu      sync.Mutex
	started chan struct{} // closed by Drain; see begun

	requests atomic.Int64 // requests being served, streams included
	streams  atomic.Int64 // SSE streams open; changed under streamsMu
	waiting  atomic.Int64 // open streams whose task waits for input, as each last saw it

	// streamsBy counts the open streams by source address, which
	// Config.MaxStreams shares out (fairshare.go).
	streamsMu    sync.Mutex
	streamsBy    map[netip.Addr]int
	streamsHeavy int // addresses holding at least shareFloor streams (fairShare)

	cutRequests atomic.Int64 // requests ended by the end of the grace, streams included
	cutStreams  atomic.Int64 // streams among them
}

// begun is closed once the edge drains.
func (d *drainState) begun() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started == nil {
		d.started = make(chan struct{})
	}
	return d.started
}

// draining reports whether Drain was called.
func (d *drainState) draining() bool {
	select {
	case <-d.begun():
		return true
	default:
		return false
	}
}

// InFlight counts requests an edge is serving.
type InFlight struct {
	// Streams are SSE streams.
	Streams int
	// Requests are the other requests: blocking calls among them.
	Requests int
}

// String says it as a person would: "1 stream and 2 requests".
func (n InFlight) String() string {
	return fmt.Sprintf("%d %s and %d %s", n.Streams, plural(n.Streams, "stream"), n.Requests, plural(n.Requests, "request"))
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// Draining is what an edge had in flight when it began to drain.
type Draining struct {
	// WaitFor is what the shutdown waits for, up to its grace.
	WaitFor InFlight
	// EndedNow is the number of streams ended at once: their tasks wait
	// for input.
	EndedNow int
}

// Drain marks the edge not ready, so load balancers stop sending it new
// requests before the HTTP server shuts down (first step of shutdown), and
// ends at once every SSE stream whose task waits for input: its client
// resumes on another edge with Last-Event-ID. It returns what it leaves in
// flight and what it ends. Only the first call acts; later ones report
// what is in flight then.
func (s *Server) Drain() Draining {
	d := &s.drain
	d.begun() // made
	// Counted before the streams are told: told first, a stream that
	// waits for input could end (and leave the counts) before they are
	// read, and the report would say it is waited for.
	waiting := d.waiting.Load()
	streams := d.streams.Load()
	requests := d.requests.Load()
	d.once.Do(func() { close(d.started) })
	return Draining{
		WaitFor:  InFlight{Streams: int(max(streams-waiting, 0)), Requests: int(max(requests-streams, 0))},
		EndedNow: int(waiting),
	}
}

// Cut is what the end of a shutdown's grace ended (see HTTPListener.Stop):
// the streams and requests still running then. Call it once Stop returned.
func (s *Server) Cut() InFlight {
	streams := s.drain.cutStreams.Load()
	return InFlight{Streams: int(streams), Requests: int(max(s.drain.cutRequests.Load()-streams, 0))}
}

// counted counts the requests next serves, for Drain and Cut.
func (s *Server) counted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.drain.requests.Add(1)
		defer func() {
			s.drain.requests.Add(-1)
			if graceOver(r.Context()) {
				s.drain.cutRequests.Add(1)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// streamRetry is the Retry-After of a stream refused by MaxStreams: the
// time for a few streams to end.
const streamRetry = 5

// streamOpen counts an SSE stream of a request with ctx from src as open
// until the returned func is called. With limit > 0 it refuses a stream
// past src's fair share of limit (ErrRateLimited) or past limit itself
// (ErrUnavailable), both with a Retry-After.
func (d *drainState) streamOpen(ctx context.Context, src netip.Addr, limit int) (func(), *schemas.Error) {
	d.streamsMu.Lock()
	n, open := d.streamsBy[src], int(d.streams.Load())
	var refused *schemas.Error
	switch {
	case limit <= 0:
	case open >= limit:
		refused = schemas.Errorf(schemas.ErrUnavailable, "this edge holds as many streams as it may (%d); retry later", limit)
	case n >= fairShare(limit, open, d.streamsHeavy):
		refused = schemas.Errorf(schemas.ErrRateLimited, "this address holds its share of the edge's streams (%d of %d open); close one or retry later", n, open)
	}
	if refused != nil {
		d.streamsMu.Unlock()
		refused.RetryAfter = streamRetry
		return nil, refused
	}
	if d.streamsBy == nil {
		d.streamsBy = map[netip.Addr]int{}
	}
	if d.streamsBy[src]++; d.streamsBy[src] == shareFloor {
		d.streamsHeavy++
	}
	d.streams.Add(1)
	d.streamsMu.Unlock()
	return func() {
		d.streamsMu.Lock()
		if d.streamsBy[src] == shareFloor {
			d.streamsHeavy--
		}
		if d.streamsBy[src]--; d.streamsBy[src] <= 0 {
			delete(d.streamsBy, src) // only addresses with streams open
		}
		d.streams.Add(-1)
		d.streamsMu.Unlock()
		if graceOver(ctx) {
			d.cutStreams.Add(1)
		}
	}, nil
}

// streamTask is the state of one stream's task as the stream last saw it,
// which tells Drain whether the stream waits only for input. A stream
// registers it (watchTask) before its first event, so Drain counts every
// stream a client holds open; only the stream's goroutine sets it.
type streamTask struct {
	d     *drainState
	state schemas.TaskState
}

// watchTask registers a stream of a task in state.
func (d *drainState) watchTask(state schemas.TaskState) *streamTask {
	st := &streamTask{d: d}
	st.set(state)
	return st
}

// set notes the task's state.
func (st *streamTask) set(state schemas.TaskState) {
	if was, now := st.state.Interrupted(), state.Interrupted(); was != now {
		if now {
			st.d.waiting.Add(1)
		} else {
			st.d.waiting.Add(-1)
		}
	}
	st.state = state
}

// close unregisters the stream.
func (st *streamTask) close() { st.set(schemas.TaskStateUnspecified) }

// waitsForInput reports whether the task waits for its client, as the
// stream last saw it.
func (st *streamTask) waitsForInput() bool { return st.state.Interrupted() }

// errResumeElsewhere is the last event of a stream the edge's shutdown
// ends: retryable, so the client resumes with SubscribeToTask and its
// Last-Event-ID on another edge rather than taking the stream as finished.
func errResumeElsewhere() *schemas.Error {
	return schemas.Errorf(schemas.ErrUnavailable, "this edge is shutting down; resume the stream with Last-Event-ID on another edge")
}
