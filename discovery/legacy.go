package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// The client side of the older tasks/send dialect, spoken by agents of the
// systems a2abus replaces (OpenFang, AgentOS): tasks/send, tasks/get,
// tasks/cancel and, when the card says the agent streams,
// tasks/sendSubscribe and tasks/resubscribe, mapped onto the client's
// 1.0 operations through the conversions in schemas.
//
// Agents of the dialect are reached in one of two ways, which their cards
// do not tell apart:
//
//   - JSON-RPC at the card's url, every method (AgentOS: url ".../a2a/rpc");
//   - REST routes below the card's url (OpenFang: url ".../a2a"): POST
//     {url}/tasks/send with the JSON-RPC request as its body, answered with
//     the bare task; GET {url}/tasks/{id}; POST {url}/tasks/{id}/cancel;
//     404 for a task it does not know. No streaming.
//
// The first call posts JSON-RPC to the url; an answer of 404 or 405 that
// is not JSON-RPC means there is nothing to post to there, and the REST
// routes are used from then on. What was found out is kept in the adapter
// (legacyWire), as is an agent's refusal to stream, so each is paid for
// once. Every request goes through the client's conn, with its SSRF
// guard, timeout and size bounds, like those of the other dialects.

// How an agent of the older dialect is reached (legacyWire.route).
const (
	routeUnknown int32 = iota // not called yet: try JSON-RPC at the url
	routeRPC                  // JSON-RPC at the url
	routeREST                 // OpenFang's REST routes below the url
)

// maxPollFailures bounds the polls in a row of an emulated stream that may
// fail for a reason worth retrying (the agent unreachable or overloaded)
// before the stream fails with the last such error.
const maxPollFailures = 5

// legacyWire speaks the older dialect. It keeps what calls taught it about
// the agent, for as long as the Client that holds it: concurrent first
// calls may each find out; they find the same.
type legacyWire struct {
	*conn
	route atomic.Int32
	// noSendSubscribe and noResubscribe are set when the agent answered
	// that method without a stream: it is polled instead from then on.
	noSendSubscribe, noResubscribe atomic.Bool
}

func (w *legacyWire) sendMessage(ctx context.Context, req *schemas.SendMessageRequest) (*schemas.SendMessageResponse, error) {
	t, err := w.sendTask(ctx, legacyParams(req))
	if err != nil {
		return nil, err
	}
	return &schemas.SendMessageResponse{Task: t}, nil
}

func (w *legacyWire) sendStreamingMessage(ctx context.Context, req *schemas.SendMessageRequest) (*Stream, error) {
	return w.stream(ctx, w.sendSubscribe(req))
}

func (w *legacyWire) getTask(ctx context.Context, req *schemas.GetTaskRequest) (*schemas.Task, error) {
	return w.get(ctx, req.ID, req.HistoryLength)
}

// cancelTask sends tasks/cancel. An agent whose REST route answers the
// cancel with something other than the task (the documents do not say
// what it answers) is asked for the task.
func (w *legacyWire) cancelTask(ctx context.Context, req *schemas.CancelTaskRequest) (*schemas.Task, error) {
	t, err := w.task(ctx, legacyOp{method: "tasks/cancel", params: schemas.LegacyTaskIDParams{ID: req.ID, Metadata: req.Metadata},
		httpMethod: http.MethodPost, path: "/tasks/" + url.PathEscape(req.ID) + "/cancel", taskID: req.ID})
	if errors.Is(err, schemas.ErrInvalidAgentResponse) && w.route.Load() == routeREST {
		return w.get(ctx, req.ID, nil)
	}
	return t, err
}

func (w *legacyWire) listTasks(context.Context, *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error) {
	return nil, schemas.Errorf(schemas.ErrUnsupportedOperation, "agents of the tasks/send dialect cannot list tasks")
}

func (w *legacyWire) subscribeToTask(ctx context.Context, req *schemas.SubscribeToTaskRequest, lastEventID string) (*Stream, error) {
	return w.stream(ctx, w.resubscribe(req.ID, lastEventID))
}

// The dialect has no push-notification configs.

func (w *legacyWire) createPushConfig(context.Context, *schemas.TaskPushNotificationConfig) (*PushConfig, error) {
	return nil, w.noPush()
}

func (w *legacyWire) getPushConfig(context.Context, *schemas.GetTaskPushNotificationConfigRequest) (*PushConfig, error) {
	return nil, w.noPush()
}

func (w *legacyWire) listPushConfigs(context.Context, *schemas.ListTaskPushNotificationConfigsRequest) ([]PushConfig, error) {
	return nil, w.noPush()
}

func (w *legacyWire) deletePushConfig(context.Context, *schemas.GetTaskPushNotificationConfigRequest) error {
	return w.noPush()
}

func (w *legacyWire) noPush() error {
	return schemas.Errorf(schemas.ErrPushNotSupported, "%s speaks the older tasks/send dialect, which has no push notification configs", redactRaw(w.ep.URL))
}

// legacyOp is one call of the older dialect, in both of its transports.
type legacyOp struct {
	method string // the JSON-RPC method
	params any
	// The REST route: the HTTP method and the path below the endpoint's
	// URL. Only tasks/send has a body there (the JSON-RPC request).
	httpMethod, path string
	query            url.Values
	body             bool
	// taskID names the task of get and cancel: a 404 from their REST route
	// is ErrTaskNotFound for it.
	taskID string
}

// task makes one call and returns the task the agent answers: by
// JSON-RPC at the endpoint's URL, or by the REST route once the URL was
// found to take no JSON-RPC.
func (w *legacyWire) task(ctx context.Context, op legacyOp) (*schemas.Task, error) {
	if w.route.Load() != routeREST {
		t, err := w.overRPC(ctx, op)
		if !errors.Is(err, errNoRPC) {
			return t, err
		}
		w.route.Store(routeREST)
	}
	return w.overREST(ctx, op)
}

// errNoRPC is returned by overRPC, while the route is unknown, when the
// endpoint's URL answers 404 or 405 without JSON-RPC: nothing takes
// JSON-RPC there, and the REST routes are tried.
var errNoRPC = errors.New("no JSON-RPC at the url")

func (w *legacyWire) overRPC(ctx context.Context, op legacyOp) (*schemas.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	req, res, body, err := w.exchange(ctx, http.MethodPost, w.ep.URL, w.rpcBody(op.method, op.params))
	if err != nil {
		return nil, err
	}
	if w.noRPC(res, body) {
		return nil, errNoRPC
	}
	t, err := w.answer(op.method, req, res, body)
	w.route.CompareAndSwap(routeUnknown, routeRPC)
	return t, err
}

// noRPC reports whether an answer to JSON-RPC posted to the endpoint's URL
// says, while the route is unknown, that nothing takes JSON-RPC there.
func (w *legacyWire) noRPC(res *http.Response, body []byte) bool {
	return w.route.Load() == routeUnknown &&
		(res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusMethodNotAllowed) && !isRPCAnswer(body)
}

// isRPCAnswer reports whether body is a JSON-RPC response.
func isRPCAnswer(body []byte) bool {
	var env map[string]json.RawMessage
	if json.Unmarshal(body, &env) != nil {
		return false
	}
	_, v := env["jsonrpc"]
	_, r := env["result"]
	_, e := env["error"]
	return v || r || e
}

func (w *legacyWire) overREST(ctx context.Context, op legacyOp) (*schemas.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	u := strings.TrimRight(w.ep.URL, "/") + op.path
	if len(op.query) > 0 {
		u += "?" + op.query.Encode()
	}
	var body any
	if op.body {
		body = w.rpcBody(op.method, op.params)
	}
	req, res, b, err := w.exchange(ctx, op.httpMethod, u, body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode == http.StatusNotFound && op.taskID != "" && !hasErrorObject(b) {
		return nil, schemas.Errorf(schemas.ErrTaskNotFound, "task %s not found at %s", op.taskID, redactRaw(w.ep.URL)).With("taskId", op.taskID)
	}
	return w.answer(op.method, req, res, b)
}

// hasErrorObject reports whether body carries an error object an agent
// wrote ({"error":{"code","message",...}}), which says more than its HTTP
// status.
func hasErrorObject(body []byte) bool {
	var st struct {
		Error *wireError `json:"error"`
	}
	return json.Unmarshal(body, &st) == nil && st.Error != nil && (st.Error.Message != "" || st.Error.Code != 0)
}

// answer reads an answer of the older dialect: a JSON-RPC response
// (AgentOS), whose error is decoded into the error table, or a bare task
// (OpenFang's REST routes); an answer that is neither is a
// TransportError, or for a task that does not read, an
// ErrInvalidAgentResponse occurrence.
func (w *legacyWire) answer(method string, req *http.Request, res *http.Response, body []byte) (*schemas.Task, error) {
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, w.notA2A(req, res, body)
	}
	if e := bytes.TrimSpace(env.Error); len(e) > 0 && string(e) != "null" {
		// An error object; a bare message ({"error":"..."}) has only its
		// HTTP status to be classified by, which a TransportError keeps.
		var we wireError
		if json.Unmarshal(e, &we) != nil {
			return nil, w.notA2A(req, res, body)
		}
		return nil, w.protocolError(&we, res)
	}
	if res.StatusCode/100 != 2 {
		return nil, w.notA2A(req, res, body)
	}
	raw := env.Result
	if len(raw) == 0 || string(raw) == "null" {
		raw = body // a bare task
	}
	t, err := taskAnswer(method, raw)
	if err != nil {
		return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "%s from %s: %s", method, redact(req.URL), err.Error())
	}
	return t, nil
}

// legacyParams are the params of tasks/send for req: the task the message
// continues, else a new id of the client's choosing.
func legacyParams(req *schemas.SendMessageRequest) schemas.LegacySendParams {
	id := ""
	if req.Message != nil {
		id = req.Message.TaskID
	}
	if id == "" {
		id = schemas.NewID()
	}
	return schemas.LegacySendParamsFromV1(req, id)
}

// sendTask sends tasks/send. The session sent is the task's context
// when the agent's answer names none.
func (w *legacyWire) sendTask(ctx context.Context, p schemas.LegacySendParams) (*schemas.Task, error) {
	t, err := w.task(ctx, legacyOp{method: "tasks/send", params: p, httpMethod: http.MethodPost, path: "/tasks/send", body: true})
	if err != nil {
		return nil, err
	}
	if t.ContextID == "" {
		t.ContextID = p.SessionID
	}
	return t, nil
}

func (w *legacyWire) get(ctx context.Context, id string, historyLength *int32) (*schemas.Task, error) {
	q := url.Values{}
	if historyLength != nil {
		q.Set("historyLength", strconv.Itoa(int(*historyLength)))
	}
	return w.task(ctx, legacyOp{method: "tasks/get", params: schemas.LegacyTaskQueryParams{ID: id, HistoryLength: historyLength},
		httpMethod: http.MethodGet, path: "/tasks/" + url.PathEscape(id), query: q, taskID: id})
}

// streams reports whether to ask the agent for a stream with a method it
// has not refused (refused).
func (w *legacyWire) streams(refused *atomic.Bool) bool {
	return w.ep.Streaming && w.route.Load() != routeREST && !refused.Load()
}

// legacyStreamCall is one stream of the older dialect: the method that
// asks for it, and the unary call whose task is polled instead when the
// agent does not stream.
type legacyStreamCall struct {
	method    string // tasks/sendSubscribe or tasks/resubscribe
	params    any
	contextID string // the session sent, which the events do not repeat
	// lastEventID, when set, is sent as Last-Event-ID (the dialect has no
	// resumption of its own; an a2abus edge honours it).
	lastEventID string
	subscribe   bool         // the stream follows an existing task (see decode)
	refused     *atomic.Bool // set when the agent answers method without a stream
	task        func(context.Context) (*schemas.Task, error)
}

// sendSubscribe is the stream of a send: tasks/sendSubscribe, else
// tasks/send.
func (w *legacyWire) sendSubscribe(req *schemas.SendMessageRequest) legacyStreamCall {
	p := legacyParams(req)
	return legacyStreamCall{method: "tasks/sendSubscribe", params: p, contextID: p.SessionID, refused: &w.noSendSubscribe,
		task: func(ctx context.Context) (*schemas.Task, error) { return w.sendTask(ctx, p) }}
}

// resubscribe is the subscription of a task: tasks/resubscribe,
// else tasks/get.
func (w *legacyWire) resubscribe(id, lastEventID string) legacyStreamCall {
	return legacyStreamCall{method: "tasks/resubscribe", params: schemas.LegacyTaskQueryParams{ID: id}, lastEventID: lastEventID,
		subscribe: true, refused: &w.noResubscribe,
		task: func(ctx context.Context) (*schemas.Task, error) { return w.get(ctx, id, nil) }}
}

// stream opens the stream of call: the agent's event stream when
// its card says it streams and it has not refused the method, else the
// stream of polling the task the unary call answers.
func (w *legacyWire) stream(ctx context.Context, call legacyStreamCall) (*Stream, error) {
	if w.streams(call.refused) {
		s, t, err := w.sse(ctx, call)
		switch {
		case err != nil:
			return nil, err
		case s != nil:
			return s, nil
		case t != nil: // answered as the unary call: the task exists
			return w.pollStream(ctx, t), nil
		}
	}
	t, err := call.task(ctx)
	if err != nil {
		return nil, err
	}
	return w.pollStream(ctx, t), nil
}

// sse asks for call's stream. It returns the stream; or, when the
// agent does not stream this way, nothing (call.refused is set; when the
// url takes no JSON-RPC, the REST route is set instead) or the task it answered
// instead (an agent that treats the method as tasks/send). The agent's
// errors are returned, method-not-found excepted. An agent that says it
// does not know the method in the stream itself is polled, by the stream,
// from the task call.task returns.
func (w *legacyWire) sse(ctx context.Context, call legacyStreamCall) (*Stream, *schemas.Task, error) {
	req, sc, err := w.streamRequest(ctx, http.MethodPost, w.ep.URL, w.rpcBody(call.method, call.params), call.lastEventID)
	if err != nil {
		return nil, nil, err
	}
	ctx = req.Context() // the stream's, which Close ends: the poller's too
	res, sse, err := w.startStream(req, sc.Cancel)
	if err != nil {
		return nil, nil, err
	}
	if sse {
		w.route.CompareAndSwap(routeUnknown, routeRPC)
		s := w.sseStream(req, res, sc, w.decode(call.contextID, call.subscribe))
		s.refused = func() (*poller, error) {
			call.refused.Store(true)
			t, err := call.task(ctx)
			if err != nil {
				return nil, err
			}
			return w.newPoller(ctx, t), nil
		}
		return s, nil, nil
	}
	defer sc.Cancel()
	defer drain(res.Body)
	body, err := w.readBody(req, res)
	if err != nil {
		return nil, nil, err
	}
	if w.noRPC(res, body) {
		w.route.Store(routeREST)
		return nil, nil, nil
	}
	t, err := w.answer(call.method, req, res, body)
	unknown := errors.Is(err, schemas.ErrMethodNotFound) || errors.Is(err, schemas.ErrUnsupportedOperation)
	if err != nil && !unknown {
		return nil, nil, err
	}
	w.route.CompareAndSwap(routeUnknown, routeRPC)
	call.refused.Store(true)
	if unknown {
		return nil, nil, nil
	}
	if t.ContextID == "" {
		t.ContextID = call.contextID
	}
	return nil, t, nil
}

// decode reads the events of tasks/sendSubscribe and (subscribe)
// tasks/resubscribe: JSON-RPC responses whose result is a status or
// artifact update (a bare update is read too). contextID is the session
// the client sent, which the events do not repeat. tasks/resubscribe is a
// method 0.3 shares, and an agent that speaks both may answer it in 0.3's
// events (they have a "kind"), which are read as such.
//
// The stream ends by the rule of a send's stream or a subscription's
// (streamEnd), as on the other dialects; besides, an agent's final mark
// ends a send's stream, and ends a subscription in the older dialect's
// events only: 0.3's final mark goes on an interrupted state that an
// a2abus edge keeps a subscription open through (see v03Event).
func (w *legacyWire) decode(contextID string, subscribe bool) decodeFunc {
	ends := streamEnd(subscribe)
	return func(data []byte) (*schemas.StreamResponse, bool, error) {
		result, err := w.rpcEvent(data)
		if err != nil {
			return nil, false, err
		}
		raw := []byte(result)
		if len(raw) == 0 || string(raw) == "null" {
			raw = data
		}
		var head struct {
			Kind  string `json:"kind"`
			Final bool   `json:"final"`
		}
		if json.Unmarshal(raw, &head) == nil && head.Kind != "" {
			ev, final, err := v03Event(subscribe)(raw)
			if err != nil {
				return nil, false, err
			}
			return ev, ends(ev) || final, nil
		}
		// (The final LegacyAgentEventToV1 reports also holds for a
		// settled task: a send's rule, which ends covers.)
		ev, _, err := schemas.LegacyAgentEventToV1(raw, contextID)
		if err != nil {
			return nil, false, err
		}
		return &ev, head.Final || ends(&ev), nil
	}
}

// --- streams made by polling ----------------------------------------------

// pollStream is the stream of a task of an agent that does not stream:
// first the task as given, then what polling tasks/get finds changed.
func (w *legacyWire) pollStream(ctx context.Context, first *schemas.Task) *Stream {
	ctx, cancel := context.WithCancel(ctx)
	return &Stream{url: redactRaw(w.ep.URL), events: w.newPoller(ctx, first), cancel: cancel}
}

// newPoller returns the poller of a task, polling until ctx ends.
func (w *legacyWire) newPoller(ctx context.Context, first *schemas.Task) *poller {
	snapshot := *first
	return &poller{w: w, ctx: ctx, last: first, wait: w.opts.PollInterval, done: first.Status.State.Settled(),
		queue: []*schemas.StreamResponse{{Task: &snapshot}}}
}

// poller makes a task's events by polling it: it waits PollInterval, then
// twice as long each time nothing changed, up to MaxPollInterval (back to
// PollInterval after a change), and turns each change into the events a
// stream would have sent. It stops at a settled state: terminal, or
// interrupted (input-required, auth-required), as streams do. Owned by
// the Stream's Next.
type poller struct {
	w     *legacyWire
	ctx   context.Context // ends when the stream is closed
	last  *schemas.Task
	queue []*schemas.StreamResponse
	wait  time.Duration
	fails int  // polls failed in a row
	done  bool // the task settled: the queue holds the last events
}

// next returns the next event and whether it is the last.
func (p *poller) next() (*schemas.StreamResponse, string, bool, error) {
	for len(p.queue) == 0 {
		if p.done {
			return nil, "", false, io.EOF
		}
		if err := p.poll(); err != nil {
			return nil, "", false, err
		}
	}
	ev := p.queue[0]
	p.queue = p.queue[1:]
	return ev, "", p.done && len(p.queue) == 0, nil
}

// poll waits, reads the task once and queues what changed.
func (p *poller) poll() error {
	t := time.NewTimer(p.wait)
	select {
	case <-p.ctx.Done():
		t.Stop()
		return p.ctx.Err()
	case <-t.C:
	}
	task, err := p.w.get(p.ctx, p.last.ID, nil)
	if err != nil {
		if p.ctx.Err() == nil && IsRetryable(err) && p.fails < maxPollFailures {
			p.fails++
			p.backOff()
			return nil
		}
		return err
	}
	p.fails = 0
	if task.ContextID == "" {
		task.ContextID = p.last.ContextID
	}
	evs := taskChanges(p.last, task)
	if len(evs) == 0 {
		p.backOff()
	} else {
		p.wait = p.w.opts.PollInterval
	}
	p.queue = append(p.queue, evs...)
	p.last = task
	p.done = task.Status.State.Settled()
	return nil
}

func (p *poller) backOff() { p.wait = min(2*p.wait, p.w.opts.MaxPollInterval) }

// taskChanges lists the events that take a task from prev to cur: an
// artifact update for each artifact that is new or changed (replacing it
// whole), then a status update if the state or the status message
// changed.
func taskChanges(prev, cur *schemas.Task) []*schemas.StreamResponse {
	var out []*schemas.StreamResponse
	had := make(map[string]string, len(prev.Artifacts))
	for _, a := range prev.Artifacts {
		had[a.ArtifactID] = jsonString(a)
	}
	for _, a := range cur.Artifacts {
		if j, ok := had[a.ArtifactID]; ok && j == jsonString(a) {
			continue
		}
		out = append(out, &schemas.StreamResponse{ArtifactUpdate: &schemas.TaskArtifactUpdateEvent{
			TaskID: cur.ID, ContextID: cur.ContextID, Artifact: a, LastChunk: true}})
	}
	if prev.Status.State != cur.Status.State || messageContent(prev.Status.Message) != messageContent(cur.Status.Message) {
		out = append(out, &schemas.StreamResponse{StatusUpdate: &schemas.TaskStatusUpdateEvent{
			TaskID: cur.ID, ContextID: cur.ContextID, Status: cur.Status}})
	}
	return out
}

// messageContent is what a message says, without its id (which the older
// dialect does not have: each read of the task gives new ones).
func messageContent(m *schemas.Message) string {
	if m == nil {
		return ""
	}
	return jsonString(struct {
		Role     schemas.Role   `json:"role"`
		Parts    []schemas.Part `json:"parts"`
		Metadata map[string]any `json:"metadata"`
	}{m.Role, m.Parts, m.Metadata})
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
