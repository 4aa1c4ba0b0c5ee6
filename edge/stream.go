package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// Streaming (SendStreamingMessage, SubscribeToTask) over Server-Sent Events.
//
// Every SSE event carries an id a client resumes by: `<revision>.<index>`,
// the event's cursor (the task revision its write produced and its place
// in the write; for a Task snapshot, the snapshot's), or, for a call that
// takes A2A 1.1 generations (call.gen), the event's generation — 1, 2, 3…
// per task, the same number the event carries. A client that reconnects
// with Last-Event-ID gets every later event once, in order, from any edge:
// the reader replays the task's events from the stream and passes on only
// those newer than the cursor or generation (see bus.ReadEvents). Each
// client has its own reader with a bounded buffer; a client that does not
// keep up loses its stream (it resumes from its cursor) and never slows the
// worker or other clients.

// streamOut writes one stream in the framing of a binding.
type streamOut interface {
	// start commits the response as an SSE stream (headers, status 200).
	start() error
	// send writes one StreamResponse with its id (call.eventID).
	send(id string, r *schemas.StreamResponse) error
	// sendChange writes one event of the task feed (feed.go).
	sendChange(id string, ch *schemas.TaskChange) error
	// fail writes a protocol error as the last event of the stream.
	fail(e *schemas.Error) error
	// keepAlive writes an SSE comment so proxies keep the connection.
	keepAlive() error
	// hold keeps what is written buffered until release, which flushes
	// it: the events that are ready at once leave in one write.
	hold()
	release() error
}

// sseWriter is the SSE framing shared by the bindings.
type sseWriter struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	writeTimeout time.Duration
	started      bool
	held         bool
}

func newSSEWriter(w http.ResponseWriter, writeTimeout time.Duration) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w), writeTimeout: writeTimeout}
}

// write sends b and flushes it. Each write has its own deadline: a stream
// may last for hours, but a client that takes no data for writeTimeout is
// gone or stalled, and its connection is dropped (it resumes by cursor).
func (s *sseWriter) write(b []byte) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	if s.held {
		return nil
	}
	return s.rc.Flush()
}

func (s *sseWriter) hold() { s.held = true }

func (s *sseWriter) release() error {
	s.held = false
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
	return s.rc.Flush()
}

func (s *sseWriter) start() error {
	if s.started {
		return nil
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
	s.w.WriteHeader(http.StatusOK)
	if s.held {
		return nil // they leave with what release flushes
	}
	return s.rc.Flush()
}

func (s *sseWriter) event(id string, data []byte) error {
	if err := s.start(); err != nil {
		return err
	}
	b := make([]byte, 0, len(id)+len(data)+16)
	if id != "" {
		b = append(append(append(b, "id: "...), id...), '\n')
	}
	b = append(append(append(b, "data: "...), data...), "\n\n"...) // JSON from encoding/json holds no raw newlines
	return s.write(b)
}

func (s *sseWriter) keepAlive() error {
	if err := s.start(); err != nil {
		return err
	}
	return s.write([]byte(": keep-alive\n\n"))
}

// sseStream is the one stream framer of every binding and dialect: each
// event is the dialect's shape of a 1.0 StreamResponse, wrapped as a
// JSON-RPC response to the request's id on the JSON-RPC binding and bare
// on HTTP+JSON; a protocol error is the stream's last event, in the same
// framing (a JSON-RPC error object, or google.rpc.Status).
type sseStream struct {
	*sseWriter
	rpcID json.RawMessage // JSON-RPC binding: the request id; nil: bare events
	shape func(*schemas.StreamResponse) any
}

func (o *sseStream) send(id string, resp *schemas.StreamResponse) error {
	var v any = o.shape(resp)
	if o.rpcID != nil {
		v = rpcResponse{JSONRPC: "2.0", ID: o.rpcID, Result: v}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return o.event(id, b)
}

func (o *sseStream) fail(e *schemas.Error) error {
	var v any = e.Status(0)
	if o.rpcID != nil {
		v = rpcResponse{JSONRPC: "2.0", ID: o.rpcID, Error: e.RPC()}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return o.event("", b)
}

func (s *sseWriter) isStarted() bool { return s.started }

func (s *Server) rpcSendStreamingMessage(ctx context.Context, c *call, out streamOut) error {
	req, err := decodeSend(c.params)
	if err != nil {
		return err
	}
	return s.svc.SendStreamingMessage(ctx, c, req, out)
}

// streamHeadersWait is how long a new stream's response headers wait for
// the agent's first event to leave with it: one write and one packet
// instead of two for nearly every stream (the first event takes a few
// milliseconds), and no visible delay when the agent is slow.
const streamHeadersWait = 50 * time.Millisecond

// SendStreamingMessage runs a send whose answer is a stream of the task's
// events (or its one reply).
func (s *a2aService) SendStreamingMessage(ctx context.Context, c *call, req *schemas.SendMessageRequest, out streamOut) error {
	msg, histLen, err := s.checkSend(ctx, c, req)
	if err != nil {
		return err
	}
	// The reader opens between storing the task and queueing its work:
	// nothing the worker publishes can be missed (a2a-go #74/#340).
	var reader *bus.EventReader
	var snap *schemas.TaskRecord
	var snapRev uint64 // the snapshot's cursor
	var openErr error
	// A new task has no stored events to look for (ReadNewTaskEvents).
	follow := func(read func(context.Context, string, uint64, int) (*bus.EventReader, error)) bus.Follow {
		return func(r *schemas.TaskRecord, rev uint64) {
			snap, snapRev = r, bus.SnapshotCursor(rev)
			reader, openErr = read(ctx, r.Task.ID, snapRev, s.cfg.StreamBuffer)
		}
	}
	defer func() {
		if reader != nil {
			reader.Close()
		}
	}()
	if msg.TaskID != "" {
		_, err = s.continueTask(ctx, c, msg, follow(s.life.ReadEvents))
	} else {
		_, err = s.createTask(ctx, c, msg, follow(s.life.ReadNewTaskEvents))
	}
	if err != nil {
		return err
	}
	if openErr != nil {
		// The task is accepted and its work queued, so a refusal now would
		// hide a task the client cannot see (and a retry would start a
		// second one). It gets the task, and the stream ends there: the
		// client follows it with SubscribeToTask, as after any cut stream.
		s.log.Warn("could not follow a streamed task's events; answering with the task only", "task_id", snap.Task.ID, "err", openErr)
		sendSnapshot(out, c, snap, snapRev, histLen)
		return nil
	}
	// The agent's first event decides the shape: a Reply is a message-only
	// exchange; anything else makes it a task, announced by its snapshot.
	// An agent that answers with tasks only has its task announced at
	// once: the client sees it accepted while the agent works. Otherwise
	// the response's headers leave with the first events, in one write,
	// unless the agent takes longer than streamHeadersWait to say
	// anything: then they leave alone, so the client knows the stream is
	// open.
	announced := false
	announce := func() error {
		if announced {
			return nil
		}
		announced = true
		return sendSnapshot(out, c, snap, snapRev, histLen)
	}
	if s.makesTasks(c.agent) && announce() != nil {
		return nil
	}
	headers := time.NewTimer(streamHeadersWait)
	defer headers.Stop()
	keep := time.NewTicker(s.cfg.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			if graceOver(ctx) {
				// Cut by shutdown before the agent said anything: the
				// client gets the task, to resume it by, and the error.
				if announce() == nil {
					_ = out.fail(errResumeElsewhere())
				}
			}
			return nil
		case <-headers.C:
			if out.start() != nil {
				return nil
			}
		case <-keep.C:
			if out.keepAlive() != nil {
				return nil
			}
		case us, ok := <-reader.C():
			if !ok {
				// The client gets the task, to resume it by, and why.
				if announce() == nil {
					readerBroke(out, reader)
				}
				return nil
			}
			if u := us[0]; u.Reply != nil && !announced {
				out.hold()
				_ = out.send(c.eventID(u.Cursor, u.Generation), &schemas.StreamResponse{Message: u.Reply})
				_ = out.release()
				return nil
			}
			out.hold()
			if announce() != nil {
				return nil
			}
			last, end := s.sendReady(out, c, us, reader, schemas.TaskState.Settled)
			if end {
				return nil
			}
			s.relay(ctx, c, snap.Task.ID, last, reader, out, keep, nil, schemas.TaskState.Settled)
			return nil
		}
	}
}

func (s *Server) rpcSubscribeToTask(ctx context.Context, c *call, out streamOut) error {
	var req schemas.SubscribeToTaskRequest
	if err := decodeParams(c.params, &req); err != nil {
		return err
	}
	return s.svc.SubscribeToTask(ctx, c, &req, out)
}

// subscribe streams a task: without a cursor, its current snapshot and then
// every newer event; with a cursor (Last-Event-ID), every event after it.
// A subscription follows the task until it is terminal: an interrupted
// state (INPUT_REQUIRED, AUTH_REQUIRED) ends a send's stream, whose client
// must answer, but a watcher stays to see the task resume and finish.
func (s *a2aService) SubscribeToTask(ctx context.Context, c *call, req *schemas.SubscribeToTaskRequest, out streamOut) error {
	if req.ID == "" {
		return schemas.Errorf(schemas.ErrInvalidParams, "id is required")
	}
	rec, rev, err := s.task(ctx, c, req.ID)
	if err != nil {
		return err
	}
	id := rec.Task.ID
	state := rec.Task.Status.State
	from := resumePoint{cursor: bus.SnapshotCursor(rev)}
	resume := c.lastEventID != ""
	if resume {
		if from, err = c.resumePoint(); err != nil {
			return err
		}
		if state.Terminal() && !from.before(rec, rev) {
			// Nothing newer will come: the client already has the end.
			_ = out.start()
			return nil
		}
	} else if state.Terminal() {
		return schemas.Errorf(schemas.ErrUnsupportedOperation, "task %s is already %s; there is nothing to subscribe to (GetTask returns it)", id, state).With("taskId", id)
	}
	var reader *bus.EventReader
	if from.byGeneration {
		reader, err = s.life.ReadEventsAfterGeneration(ctx, id, from.gen, s.cfg.StreamBuffer)
	} else {
		reader, err = s.life.ReadEvents(ctx, id, from.cursor, s.cfg.StreamBuffer)
	}
	if err != nil {
		return err
	}
	defer reader.Close()
	task := s.drain.watchTask(state) // before the client sees the stream open
	defer task.close()
	after := from.cursor
	if !resume {
		if sendSnapshot(out, c, rec, after, nil) != nil {
			return nil
		}
	} else if err := out.start(); err != nil {
		return nil
	}
	keep := time.NewTicker(s.cfg.KeepAlive)
	defer keep.Stop()
	s.relay(ctx, c, id, after, reader, out, keep, task, schemas.TaskState.Terminal)
	return nil
}

// sendSnapshot writes a task's snapshot, from rec, as the event at cursor.
func sendSnapshot(out streamOut, c *call, rec *schemas.TaskRecord, cursor uint64, histLen *int32) error {
	t := c.shapeTask(rec, histLen)
	return out.send(c.eventID(cursor, rec.Generation), &schemas.StreamResponse{Task: &t})
}

// eventID is the id of the event at cursor with generation gen (0:
// unknown): for a call that takes generations its generation, else its
// cursor (formatCursor). Either resumes the stream (call.resumePoint).
func (c *call) eventID(cursor uint64, gen schemas.Generation) string {
	if c.gen && gen > 0 {
		return strconv.FormatInt(int64(gen), 10)
	}
	return formatCursor(cursor)
}

// resumePoint is where a resumed stream starts: after an event cursor, or,
// byGeneration, after an event generation.
type resumePoint struct {
	cursor       uint64
	gen          schemas.Generation
	byGeneration bool
}

// before reports whether the task, read as rec at revision rev, has
// events after the point.
func (p resumePoint) before(rec *schemas.TaskRecord, rev uint64) bool {
	if p.byGeneration {
		return rec.Generation > p.gen
	}
	return bus.RecordCursor(rec, rev) > p.cursor
}

// resumePoint reads the call's Last-Event-ID: a cursor (parseCursor), or,
// for a call that takes generations, a bare number, which is the
// generation its ids were (eventID).
func (c *call) resumePoint() (resumePoint, error) {
	if c.gen && !strings.Contains(c.lastEventID, ".") {
		if n, err := strconv.ParseInt(c.lastEventID, 10, 64); err == nil && n >= 0 {
			return resumePoint{gen: schemas.Generation(n), byGeneration: true}, nil
		}
	}
	cursor, err := parseCursor(c.lastEventID)
	return resumePoint{cursor: cursor}, err
}

// formatCursor is the SSE id of a bus event cursor: "<revision>.<index>"
// (see bus.EventCursor). The dot names the form: ids of releases before
// it were the cursor as one decimal number with 4 bits of index, and a
// client may still hold one across an upgrade.
func formatCursor(c uint64) string {
	rev, index := bus.SplitCursor(c)
	b := make([]byte, 0, 24)
	b = strconv.AppendUint(b, rev, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(index), 10)
	return string(b)
}

// parseCursor reads a Last-Event-ID: a cursor this edge issued
// (formatCursor), or one an earlier release issued (one decimal number,
// revision<<4 | index). Anything else is an ErrInvalidParams occurrence
// quoting at most its first 64 bytes.
func parseCursor(id string) (uint64, error) {
	if revText, indexText, ok := strings.Cut(id, "."); ok {
		rev, err := strconv.ParseUint(revText, 10, 64)
		index, err2 := strconv.ParseUint(indexText, 10, 16)
		if err == nil && err2 == nil && rev <= bus.MaxRevision && index <= bus.MaxEventsPerWrite {
			return bus.EventCursor(rev, int(index)), nil
		}
	} else if n, err := strconv.ParseUint(id, 10, 64); err == nil {
		if c, ok := bus.EarlierCursor(n); ok {
			return c, nil
		}
	}
	const show = 64
	quoted := id
	if len(quoted) > show {
		quoted = quoted[:show] + "…"
	}
	return 0, schemas.InvalidField("Last-Event-ID", "%q is not a cursor this server issued", quoted)
}

// relay passes a task's events to the client until the task reaches a
// state that ends the stream (ends), the client leaves, or the reader
// overflows. On each keep-alive tick it also checks the task in KV: a task
// that ended without its last event reaching the stream (a writer crashed
// between storing and publishing) is closed with a final Task snapshot
// instead of hanging.
//
// A stream that can stay open while its task waits for input (task, nil
// for one that ends there) notes each state it passes on. Once the edge
// drains, it ends as soon as its task waits for input: at once when it
// already does (see Drain), or with the event that says so. The end of a
// shutdown's grace ends any stream. Either way the last event is
// errResumeElsewhere.
func (s *a2aService) relay(ctx context.Context, c *call, id string, last uint64, reader *bus.EventReader, out streamOut, keep *time.Ticker, task *streamTask, ends func(schemas.TaskState) bool) {
	stops := ends
	var drained <-chan struct{}
	if task != nil {
		drained = s.drain.begun()
		stops = func(st schemas.TaskState) bool {
			task.set(st)
			return ends(st) || (st.Interrupted() && s.drain.draining())
		}
	}
	quiet := false // no event since the last tick
	for {
		select {
		case <-ctx.Done():
			if graceOver(ctx) {
				_ = out.fail(errResumeElsewhere())
			}
			return
		case <-drained:
			drained = nil
			if task.waitsForInput() {
				_ = out.fail(errResumeElsewhere())
				return
			}
		case <-keep.C:
			if out.keepAlive() != nil {
				return
			}
			if quiet {
				rec, rev, err := s.life.Task(ctx, c.owner(), id)
				if err != nil {
					var pe *schemas.Error
					if errors.As(err, &pe) && errors.Is(pe, schemas.ErrTaskNotFound) {
						_ = out.fail(pe)
						return
					}
					continue
				}
				if ends(rec.Task.Status.State) && bus.RecordCursor(rec, rev) > last {
					_ = sendSnapshot(out, c, rec, bus.SnapshotCursor(rev), nil)
					return
				}
			}
			quiet = true
		case us, ok := <-reader.C():
			if !ok {
				readerBroke(out, reader)
				return
			}
			quiet = false
			var end bool
			if last, end = s.sendReady(out, c, us, reader, stops); end {
				if task != nil && task.waitsForInput() && s.drain.draining() {
					_ = out.fail(errResumeElsewhere())
				}
				return
			}
		}
	}
}

// readerBroke ends a stream whose event reader stopped on its own — the
// stream fell behind (bus.ErrReaderOverflow), or what the task stored
// could not be read (the bus's consumers ran out, its leader moved) — with
// a retryable error event: official clients take a stream's end for the
// task's, so a stream never ends like a finished one when it is not.
func readerBroke(out streamOut, reader *bus.EventReader) {
	err := reader.Err()
	if err == nil {
		return // closed by this stream
	}
	why := "this stream fell behind the task's events"
	if !errors.Is(err, bus.ErrReaderOverflow) {
		why = "the task's stored events cannot be read now"
	}
	_ = out.fail(schemas.Errorf(schemas.ErrUnavailable, "%s; resume it with SubscribeToTask and Last-Event-ID", why))
}

// sendReady writes us and every group of updates the reader has ready
// behind it, flushed together (one write for a worker's write: WORKING,
// its artifacts, COMPLETED, and whatever the caller wrote under a hold of
// its own before). It returns the last cursor written and whether the
// stream should end.
func (s *a2aService) sendReady(out streamOut, c *call, us []bus.TaskUpdate, reader *bus.EventReader, ends func(schemas.TaskState) bool) (last uint64, end bool) {
	out.hold()
	defer func() {
		if out.release() != nil {
			end = true
		}
	}()
	for {
		for _, u := range us {
			last = u.Cursor
			if sendUpdate(out, c, u, ends) {
				return last, true
			}
		}
		var ok bool
		select {
		case us, ok = <-reader.C():
			if !ok {
				readerBroke(out, reader)
				return last, true
			}
		default:
			return last, false
		}
	}
}

// sendUpdate writes one event and reports whether the stream should end
// (the write failed, a reply came, or the task reached a state that ends).
// The update is shared with the other readers of the task (see
// bus.EventReader.C): the generation a call takes goes on a copy.
func sendUpdate(out streamOut, c *call, u bus.TaskUpdate, ends func(schemas.TaskState) bool) (end bool) {
	var r schemas.StreamResponse
	withGen := c.gen && u.Generation > 0
	switch {
	case u.Status != nil && withGen:
		ev := *u.Status
		ev.Generation = u.Generation
		r.StatusUpdate = &ev
	case u.Status != nil:
		r.StatusUpdate = u.Status
	case u.Artifact != nil && withGen:
		ev := *u.Artifact
		ev.Generation = u.Generation
		r.ArtifactUpdate = &ev
	case u.Artifact != nil:
		r.ArtifactUpdate = u.Artifact
	case u.Reply != nil:
		r.Message = u.Reply
	}
	if err := out.send(c.eventID(u.Cursor, u.Generation), &r); err != nil {
		return true
	}
	return u.Reply != nil || (u.Status != nil && ends(u.Status.Status.State))
}
