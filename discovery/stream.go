package discovery

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// ErrStreamClosed is returned by Stream.Next once Close was called.
var ErrStreamClosed = errors.New("discovery: stream closed")

// Stream is an open stream of task events from an agent: Server-Sent
// Events, a gRPC server stream, or, for an agent of the older tasks/send
// dialect that cannot stream, the same events made by polling the task
// (see SendStreamingMessage). Next returns
// the events in order and io.EOF after the last one: the event that
// settles the task (a terminal or interrupted status, or a Task in such a
// state; for a subscription, a terminal one), a direct Message, an event
// marked final (0.3's, on a send's stream only; the older dialect's), or
// the agent ending the stream. An error event the agent sends comes back as its
// *schemas.Error. Close releases the connection; it is safe to call at any
// time, from any goroutine (a Next waiting for an event then returns
// ErrStreamClosed), and more than once. Next itself is for one goroutine.
type Stream struct {
	url     string
	body    io.ReadCloser // nil for a polled stream
	rd      *bufio.Reader
	max     int64
	decode  decodeFunc
	release sync.Once
	cancel  context.CancelFunc
	detach  func() // lets the request outlive the caller's context (finish); nil for a stream of no request
	closed  atomic.Bool
	// events, when set, makes the events instead of an SSE body: a gRPC
	// stream's (grpc.go), or the poller of an agent of the older dialect
	// that cannot stream (legacy.go).
	events eventSource
	// refused, when set, gives the poller to switch to when the agent
	// answers the stream's request with an error event saying it does not
	// know the method (an agent of the older dialect may, being asked for
	// text/event-stream); only before the first event.
	refused func() (*poller, error)

	// Owned by Next.
	lastID string
	done   bool // the last event was returned
	err    error
}

// eventSource makes a stream's events when they do not come as SSE: next
// returns the next event, its id to resume after ("" for none), and
// whether it is the last; io.EOF when the stream ended, or the error that
// broke it. Next calls it from one goroutine; Close ends it by canceling
// the stream's context.
type eventSource interface {
	next() (ev *schemas.StreamResponse, id string, final bool, err error)
}

// decodeFunc reads one SSE event's data: the event, and whether it is the
// last of the stream.
type decodeFunc func([]byte) (ev *schemas.StreamResponse, final bool, err error)

// endsStream reports whether ev is the last event of an A2A stream: the
// agent answered with a message, or the task settled (terminal or
// interrupted), after which A2A agents close the stream.
func endsStream(ev *schemas.StreamResponse) bool {
	switch {
	case ev.Message != nil:
		return true
	case ev.Task != nil:
		return ev.Task.Status.State.Settled()
	case ev.StatusUpdate != nil:
		return ev.StatusUpdate.Status.State.Settled()
	}
	return false
}

// endsSubscription reports whether ev is the last event of a
// subscription: a subscriber watches the task to its end, through any
// interrupted state (an a2abus edge keeps the stream open there; an agent
// that closes it ends the stream with io.EOF as usual).
func endsSubscription(ev *schemas.StreamResponse) bool {
	switch {
	case ev.Message != nil:
		return true
	case ev.Task != nil:
		return ev.Task.Status.State.Terminal()
	case ev.StatusUpdate != nil:
		return ev.StatusUpdate.Status.State.Terminal()
	}
	return false
}

// streamEnd is the end rule of a subscription, or of a send's stream.
func streamEnd(subscribe bool) func(*schemas.StreamResponse) bool {
	if subscribe {
		return endsSubscription
	}
	return endsStream
}

// v1Event reads a 1.0 stream event; the shape of 1.0's events marks none
// the last.
func v1Event(b []byte) (*schemas.StreamResponse, bool, error) {
	var ev schemas.StreamResponse
	if err := json.Unmarshal(b, &ev); err != nil {
		return nil, false, schemas.Errorf(schemas.ErrInvalidAgentResponse, "stream event does not decode: %v", err)
	}
	return &ev, false, nil
}

// streamRequest is a request for an event stream, made with a context of
// its own that sc ends (the Stream's Close, or whoever gives up on it
// before), and that the caller's ctx ends too until the stream's last
// event (see streamCancel); lastEventID, when set, asks to resume after
// that event.
func (c *conn) streamRequest(ctx context.Context, method, u string, body any, lastEventID string) (*http.Request, *streamCancel, error) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	sc := &streamCancel{cancel: cancel, stop: context.AfterFunc(ctx, cancel)}
	req, err := c.newRequest(rctx, method, u, body)
	if err != nil {
		sc.Cancel()
		return nil, nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	return req, sc, nil
}

// streamCancel ends a stream's request. The caller's context ends it as
// well until Detach: the caller usually gives up its context as soon as
// it has the last event (a worker's run ends), and the end of the answer
// the stream then still reads (finish) must not be cut, or the connection
// goes with it.
type streamCancel struct {
	cancel context.CancelFunc
	stop   func() bool // of the caller's context ending the request
}

// Cancel ends the request.
func (c *streamCancel) Cancel() {
	c.stop()
	c.cancel()
}

// Detach lets the request outlive the caller's context.
func (c *streamCancel) Detach() { c.stop() }

// openStream sends req (made with a context that sc ends) and returns
// the stream of its answer. The agent has the client's Timeout to start
// answering; the stream then lasts as long as the task.
func (c *conn) openStream(req *http.Request, sc *streamCancel, decode decodeFunc) (*Stream, error) {
	res, sse, err := c.startStream(req, sc.Cancel)
	if err != nil {
		return nil, err
	}
	if !sse {
		// An error before the stream starts comes as an ordinary answer:
		// JSON-RPC (HTTP 200), google.rpc.Status, or something not A2A.
		defer sc.Cancel()
		defer drain(res.Body)
		body, err := c.readBody(req, res)
		if err != nil {
			return nil, err
		}
		if res.StatusCode/100 != 2 {
			return nil, c.statusError(req, res, body)
		}
		var r rpcResponse
		if err := json.Unmarshal(body, &r); err == nil && r.Error != nil {
			return nil, c.protocolError(r.Error, res)
		}
		return nil, c.notA2A(req, res, body)
	}
	return c.sseStream(req, res, sc, decode), nil
}

// startStream sends req (made with a context that cancel ends) and waits
// the client's Timeout for the answer to start. sse says whether it is an
// event stream (a 2xx text/event-stream); when it is not, the caller
// reads, drains and cancels it. On an error cancel has been called.
func (c *conn) startStream(req *http.Request, cancel context.CancelFunc) (res *http.Response, sse bool, err error) {
	timer := time.AfterFunc(c.opts.Timeout, cancel)
	res, err = c.do(req)
	timedOut := !timer.Stop()
	if timedOut {
		if err == nil {
			drain(res.Body)
		}
		cancel()
		return nil, false, &TransportError{URL: redact(req.URL), Err: fmt.Errorf("no answer within %s", c.opts.Timeout)}
	}
	if err != nil {
		cancel()
		return nil, false, err
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	return res, res.StatusCode/100 == 2 && mt == "text/event-stream", nil
}

// sseStream is the Stream of an event-stream answer.
func (c *conn) sseStream(req *http.Request, res *http.Response, sc *streamCancel, decode decodeFunc) *Stream {
	return &Stream{url: redact(req.URL), body: res.Body, rd: bufio.NewReaderSize(res.Body, 16<<10), max: c.opts.MaxResponseBytes,
		decode: decode, cancel: sc.Cancel, detach: sc.Detach}
}

// Next returns the next event, io.EOF after the last one, ErrStreamClosed
// after Close, or the error that broke the stream (every later call
// returns it again).
func (s *Stream) Next() (*schemas.StreamResponse, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.closed.Load() {
		return nil, s.fail(ErrStreamClosed)
	}
	if s.done {
		return nil, s.fail(io.EOF)
	}
	if s.events != nil {
		ev, id, final, err := s.events.next()
		if err != nil {
			if s.closed.Load() {
				err = ErrStreamClosed
			}
			return nil, s.fail(err)
		}
		if id != "" {
			s.lastID = id
		}
		if final {
			s.done = true
			s.close()
		}
		return ev, nil
	}
	for {
		data, id, hasID, err := s.readEvent()
		if err != nil {
			if s.closed.Load() {
				err = ErrStreamClosed
			}
			return nil, s.fail(err)
		}
		if hasID {
			s.lastID = id
		}
		if data == nil {
			continue // a comment, keep-alive or id only
		}
		ev, final, err := s.decode(data)
		if err != nil && s.refused != nil && (errors.Is(err, schemas.ErrMethodNotFound) || errors.Is(err, schemas.ErrUnsupportedOperation)) {
			// Poll instead. The body goes now; the context stays, for the
			// poller, until Close.
			_ = s.body.Close()
			p, err := s.refused()
			s.refused = nil
			if err != nil {
				if s.closed.Load() {
					err = ErrStreamClosed
				}
				return nil, s.fail(err)
			}
			s.events = p
			return s.Next()
		}
		s.refused = nil
		if err != nil {
			return nil, s.fail(err)
		}
		if final {
			s.done = true
			s.finish()
		}
		return ev, nil
	}
}

// After an SSE stream's last event the agent still ends its answer (the
// chunked body's last chunk, perhaps a comment); net/http reuses the
// connection only for a body read to its end, and closes one closed
// before. finish reads that end in the background, at most
// streamTailBytes for at most streamTailWait, so the next call to the
// agent finds the connection idle instead of dialing (and, over TLS,
// shaking hands) again; an agent that keeps the stream open past the wait
// has it closed.
const streamTailBytes = 4 << 10

var streamTailWait = 250 * time.Millisecond // a variable for tests

// finish releases an SSE stream whose last event was read (see
// streamTailBytes); the caller has its event at once.
func (s *Stream) finish() {
	s.release.Do(func() {
		if s.detach != nil {
			s.detach()
		}
		stop := time.AfterFunc(streamTailWait, s.cancel)
		go func() {
			_, _ = io.Copy(io.Discard, io.LimitReader(s.rd, streamTailBytes))
			_ = s.body.Close()
			stop.Stop()
			s.cancel()
			s.released()
		}()
	})
}

// streamReleased, when set (tests), is called with a stream's URL each
// time the stream has released its connection.
var streamReleased atomic.Pointer[func(url string)]

func (s *Stream) released() {
	if f := streamReleased.Load(); f != nil {
		(*f)(s.url)
	}
}

// fail ends the stream with err, releasing the connection.
func (s *Stream) fail(err error) error {
	s.err = err
	s.close()
	return err
}

// LastEventID is the id of the last event read: pass it to
// SubscribeToTask to resume after it. Over SSE it is the event's SSE id;
// over gRPC, whose messages have no place for an id, it is the task
// generation the event carries (A2A 1.1, which an a2abus edge's gRPC
// binding always sends and resumes by: metadata last-event-id). A polled
// stream, or a gRPC server that sends no generations, has none.
func (s *Stream) LastEventID() string { return s.lastID }

// Close ends the stream and releases its connection.
func (s *Stream) Close() error {
	s.closed.Store(true)
	s.close()
	return nil
}

func (s *Stream) close() {
	s.release.Do(func() {
		if s.body != nil {
			_ = s.body.Close()
		}
		s.cancel()
		s.released()
	})
}

// readEvent reads one SSE event (lines up to a blank line): its joined
// data lines (nil for an event with none) and its id, if it has one.
func (s *Stream) readEvent() (data []byte, id string, hasID bool, err error) {
	var buf bytes.Buffer
	hasData := false
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && (hasData || hasID) {
				break // the last event, unterminated
			}
			return nil, "", false, err
		}
		if len(line) == 0 {
			if hasData || hasID {
				break
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				buf.WriteByte('\n')
			}
			hasData = true
			buf.Write(value)
			if int64(buf.Len()) > s.max {
				return nil, "", false, schemas.Errorf(schemas.ErrInvalidAgentResponse, "stream event larger than %d bytes", s.max)
			}
		case "id":
			// An id holding NUL is ignored, as SSE says.
			if bytes.IndexByte(value, 0) < 0 {
				id, hasID = string(value), true
			}
		}
	}
	if !hasData {
		return nil, id, hasID, nil
	}
	return buf.Bytes(), id, hasID, nil
}

// readLine reads a line without its end (LF or CRLF), bounded.
func (s *Stream) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := s.rd.ReadSlice('\n')
		line = append(line, chunk...)
		if int64(len(line)) > s.max {
			return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "stream line larger than %d bytes", s.max)
		}
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			break
		}
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		// The connection broke mid-stream: SubscribeToTask resumes.
		return nil, &TransportError{URL: s.url, Err: fmt.Errorf("reading the stream: %w", err)}
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}
