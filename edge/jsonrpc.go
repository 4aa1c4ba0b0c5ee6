package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// JSON-RPC 2.0 binding of A2A 1.0 (spec §9): one POST per call, errors as
// JSON-RPC error objects with HTTP 200 (503 + Retry-After for overload), and
// error.data as an array of typed details carrying google.rpc.ErrorInfo.

// rpcRequest is the envelope as received. ID stays raw so it is echoed
// byte for byte.
type rpcRequest struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type rpcResponse struct {
	JSONRPC string            `json:"jsonrpc"`
	ID      json.RawMessage   `json:"id"`
	Result  any               `json:"result,omitempty"`
	Error   *schemas.RPCError `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// call is one decoded JSON-RPC call on its way to a method.
type call struct {
	agent       string
	method      string
	params      json.RawMessage
	version     string // A2A-Version as sent ("" if absent)
	trace       string // traceparent header
	lastEventID string // Last-Event-ID header: a stream resume cursor

	// For tasks created through the older dialect: the id to create the
	// task under, the client's own id for it, and the dialect to record.
	taskID, clientTaskID, dialect string

	// obs measures the request (REST: a task route names its method here).
	obs *observation
}

// owner is whom the call acts for in the task lifecycle.
func (c *call) owner() bus.Owner { return bus.Owner{Agent: c.agent} }

// publish is what the call passes on to the work it queues.
func (c *call) publish() bus.PublishOptions {
	return bus.PublishOptions{Traceparent: c.trace, A2AVersion: c.version}
}

// dialect is one JSON-RPC grammar served on the endpoint: its methods, the
// A2A-Version values it accepts, and how its errors and streams are framed.
type dialect struct {
	version   string
	methods   map[string]methodFunc
	streams   map[string]streamFunc
	versionOK func(string) bool
	writeErr  func(http.ResponseWriter, json.RawMessage, *schemas.Error)
	stream    func(w *sseWriter, id json.RawMessage, method string) sseStreamOut
}

// sseStreamOut is a streamOut that knows whether it has started.
type sseStreamOut interface {
	streamOut
	isStarted() bool
}

func (s *Server) dialects() (v1, v03 dialect) {
	v1 = dialect{
		version: schemas.ProtocolVersion, methods: s.methods(), streams: s.streamMethods(),
		versionOK: supportedVersion, writeErr: writeRPCError,
		stream: func(w *sseWriter, id json.RawMessage, _ string) sseStreamOut { return &rpcStream{sseWriter: w, id: id} },
	}
	v03 = dialect{
		version: schemas.ProtocolVersion03, methods: s.v03Methods(), streams: s.v03StreamMethods(),
		versionOK: supportedVersion03, writeErr: writeV03Error,
		stream: func(w *sseWriter, id json.RawMessage, method string) sseStreamOut {
			if method == "tasks/sendSubscribe" {
				return &legacyRPCStream{sseWriter: w, id: id}
			}
			return &v03RPCStream{sseWriter: w, id: id}
		},
	}
	// The older dialect shares the 0.3 grammar (and tasks/get, tasks/cancel).
	s.legacyMethods(v03.methods, v03.streams)
	return v1, v03
}

// methodFunc runs one A2A method and returns its result.
type methodFunc func(ctx context.Context, c *call) (any, error)

func (s *Server) methods() map[string]methodFunc {
	return map[string]methodFunc{
		"SendMessage":                      s.rpcSendMessage,
		"GetTask":                          s.rpcGetTask,
		"CancelTask":                       s.rpcCancelTask,
		"ListTasks":                        s.rpcListTasks,
		"GetExtendedAgentCard":             s.rpcGetExtendedAgentCard,
		"CreateTaskPushNotificationConfig": s.rpcPushNotSupported,
		"GetTaskPushNotificationConfig":    s.rpcPushNotSupported,
		"ListTaskPushNotificationConfigs":  s.rpcPushNotSupported,
		"DeleteTaskPushNotificationConfig": s.rpcPushNotSupported,
	}
}

func (s *Server) streamMethods() map[string]streamFunc {
	return map[string]streamFunc{
		"SendStreamingMessage": s.rpcSendStreamingMessage,
		"SubscribeToTask":      s.rpcSubscribeToTask,
	}
}

func (s *Server) handleJSONRPC(w http.ResponseWriter, r *http.Request) {
	o := s.observe("jsonrpc")
	defer o.done()
	agent, ok := s.resolveAgent(r)
	if !ok {
		// A URL that names no agent is a missing resource: 404, with a
		// JSON-RPC body so JSON-RPC clients can still read why.
		e := schemas.Errorf(schemas.ErrMethodNotFound, "no agent %q is served here; GET /a2a/agents lists the agents", agent)
		o.failed(e)
		writeRPCErrorStatus(w, http.StatusNotFound, nullID, e)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		e := schemas.Errorf(schemas.ErrInvalidRequest, "reading request body: %v", err)
		if errors.As(err, &tooBig) {
			e = schemas.Errorf(schemas.ErrInvalidRequest, "request body exceeds the limit of %d bytes", s.cfg.MaxBodyBytes)
		}
		o.failed(e)
		writeRPCError(w, nullID, e)
		return
	}
	req, rpcErr := s.parseEnvelope(body)
	if rpcErr != nil {
		o.failed(rpcErr)
		id := nullID
		if req != nil && req.ID != nil {
			id = req.ID
		}
		writeRPCError(w, id, rpcErr)
		return
	}
	id := req.ID
	if id == nil {
		id = nullID
	}
	d := s.v1
	if isV03Method(*req.Method) {
		d = s.v03
	}
	fn, known := d.methods[*req.Method]
	sfn, streaming := d.streams[*req.Method]
	if !known && !streaming {
		o.method = "unknown"
		e := schemas.Errorf(schemas.ErrMethodNotFound, "method %q is not an A2A %s method", *req.Method, d.version).With("method", *req.Method)
		o.failed(e)
		d.writeErr(w, id, e)
		return
	}
	o.method = *req.Method
	version := r.Header.Get("A2A-Version")
	if version == "" {
		version = r.URL.Query().Get("A2A-Version")
	}
	if !d.versionOK(version) {
		e := schemas.Errorf(schemas.ErrVersionNotSupported, "A2A-Version %q is not supported by %s; it is an A2A %s method", version, *req.Method, d.version).
			With("requestedVersion", version).With("supportedVersions", d.version)
		o.failed(e)
		d.writeErr(w, id, e)
		return
	}
	c := &call{agent: agent, method: *req.Method, params: req.Params, version: version,
		trace: r.Header.Get("traceparent"), lastEventID: r.Header.Get("Last-Event-ID")}
	fail := func(err error) {
		pe := schemas.AsError(err)
		if errors.Is(pe, schemas.ErrInternal) {
			s.log.Error("request failed", "method", c.method, "agent", agent, "err", err)
		}
		o.failed(pe)
		d.writeErr(w, id, pe)
	}
	if streaming {
		defer s.streamOpen(o)()
		out := d.stream(newSSEWriter(w, s.cfg.StreamWriteTimeout), id, *req.Method)
		if err := s.finishStream(out, sfn(r.Context(), c, out)); err != nil {
			fail(err)
		}
		return
	}
	res, err := fn(r.Context(), c)
	if err != nil {
		fail(err)
		return
	}
	if pre, ok := res.(preEncoded); ok {
		// id was checked by parseEnvelope (a string, number or null).
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(slices.Concat([]byte(`{"jsonrpc":"2.0","id":`), []byte(id), []byte(`,"result":`), []byte(pre), []byte(`}`)))
		return
	}
	writeJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: id, Result: res})
}

// supportedVersion reports whether an A2A-Version value is served by the
// 1.0 methods: absent (many clients omit it; see a2a-spec.md §1.5) or 1.0,
// compared on major.minor only.
func supportedVersion(v string) bool {
	v = strings.TrimSpace(v)
	if v == "" {
		return true
	}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	return parts[0] == "1" && parts[1] == "0"
}

// parseEnvelope checks the JSON-RPC envelope: valid JSON (−32700), an
// object within the nesting limit with jsonrpc "2.0", a string/number/null
// id and a method (−32600).
func (s *Server) parseEnvelope(body []byte) (*rpcRequest, *schemas.Error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, schemas.Errorf(schemas.ErrParse, "empty request body; send a JSON-RPC 2.0 request object")
	}
	if !json.Valid(trimmed) {
		return nil, schemas.Errorf(schemas.ErrParse, "request body is not valid JSON")
	}
	if d := jsonDepth(trimmed); d > s.cfg.MaxJSONDepth {
		return nil, schemas.Errorf(schemas.ErrInvalidRequest, "JSON nesting depth %d exceeds the limit of %d", d, s.cfg.MaxJSONDepth)
	}
	if trimmed[0] == '[' {
		return nil, schemas.Errorf(schemas.ErrInvalidRequest, "batch requests are not supported; send one request object per call")
	}
	if trimmed[0] != '{' {
		return nil, schemas.Errorf(schemas.ErrInvalidRequest, "a JSON-RPC request must be a JSON object")
	}
	var req rpcRequest
	if err := json.Unmarshal(trimmed, &req); err != nil {
		return nil, schemas.Errorf(schemas.ErrInvalidRequest, "malformed JSON-RPC envelope: %v", err)
	}
	if !validID(req.ID) {
		req.ID = nil
		return &req, schemas.Errorf(schemas.ErrInvalidRequest, "id must be a string, a number or null")
	}
	if req.JSONRPC == nil || *req.JSONRPC != "2.0" {
		return &req, schemas.Errorf(schemas.ErrInvalidRequest, `"jsonrpc" must be "2.0"`)
	}
	if req.Method == nil || *req.Method == "" {
		return &req, schemas.Errorf(schemas.ErrInvalidRequest, `"method" is required`)
	}
	return &req, nil
}

func validID(id json.RawMessage) bool {
	if id == nil {
		return true
	}
	switch t := bytes.TrimSpace(id); {
	case len(t) == 0:
		return false
	case t[0] == '"', string(t) == "null":
		return true
	case t[0] == '-' || (t[0] >= '0' && t[0] <= '9'):
		_, err := strconv.ParseFloat(string(t), 64)
		return err == nil
	}
	return false
}

// jsonDepth returns the maximum nesting depth of valid JSON.
func jsonDepth(b []byte) int {
	depth, max := 0, 0
	inStr, esc := false, false
	for _, c := range b {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
			if depth > max {
				max = depth
			}
		case '}', ']':
			depth--
		}
	}
	return max
}

// decodeParams decodes params into v; absent params decode as {}.
func decodeParams(params json.RawMessage, v any) error {
	if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
		return nil
	}
	if t := bytes.TrimSpace(params); t[0] != '{' {
		return schemas.Errorf(schemas.ErrInvalidParams, "params must be a JSON object")
	}
	if err := json.Unmarshal(params, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return schemas.Errorf(schemas.ErrInvalidParams, "params.%s: expected %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return schemas.Errorf(schemas.ErrInvalidParams, "invalid params: %v", err)
	}
	return nil
}

// writeRPCError writes a JSON-RPC error response: HTTP 200 as the binding
// asks, except for retryable overload errors, which get their HTTP status
// (503) and Retry-After so proxies and clients back off.
func writeRPCError(w http.ResponseWriter, id json.RawMessage, e *schemas.Error) {
	status := http.StatusOK
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
		status = e.HTTPStatus
	}
	writeRPCErrorStatus(w, status, id, e)
}

func writeRPCErrorStatus(w http.ResponseWriter, status int, id json.RawMessage, e *schemas.Error) {
	writeJSON(w, status, rpcResponse{JSONRPC: "2.0", ID: id, Error: e.RPC()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"encoding the response failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
