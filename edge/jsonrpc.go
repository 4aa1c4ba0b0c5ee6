package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

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

// jsonRPC is the JSON-RPC 2.0 binding of A2A 1.0 and 0.3 (and of the older
// tasks/send dialect): one POST per call to an agent's URL; the method's
// grammar tells the dialects apart ("message/send" vs "SendMessage").
var jsonRPC = &binding{
	name: "jsonrpc", agentOf: pathAgent, noAgent: schemas.ErrMethodNotFound, rpc: true,
	writeResult: func(w http.ResponseWriter, c *call, res any) {
		if pre, ok := res.(preEncoded); ok {
			// The id was checked by parseEnvelope (a string, number or null).
			pre.write(w, "application/json", `{"jsonrpc":"2.0","id":`+string(c.rpcID())+`,"result":`, `}`)
			return
		}
		writeJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: c.rpcID(), Result: res})
	},
	writeError: func(w http.ResponseWriter, c *call, e *schemas.Error, status int) {
		if status != 0 {
			writeRPCErrorStatus(w, status, c.rpcID(), e)
			return
		}
		writeRPCError(w, c.rpcID(), e)
	},
}

// decodeJSONRPC reads a JSON-RPC request: a JSON body, the envelope, and
// the dialect its method belongs to.
func decodeJSONRPC(s *Server, w http.ResponseWriter, r *http.Request, c *call) error {
	c.d = &s.v1
	body, err := s.readBody(w, r, c)
	if err != nil {
		return err
	}
	req, perr := parseEnvelope(body)
	if req != nil && req.ID != nil {
		c.id = req.ID
	}
	if perr != nil {
		return perr
	}
	c.method = *req.Method
	if isV03Method(c.method) {
		c.d = &s.v03
	}
	c.params, err = s.protoParams(c, req.Params)
	return err
}

func (s *Server) dialects() (v1, v03 dialect) {
	v1 = dialect{
		version: schemas.ProtocolVersion, methods: s.methods(), streams: s.streamMethods(),
		versionOK: supportedVersion, versions: "1.0, 1.1",
		event: func(*call) func(*schemas.StreamResponse) any { return func(r *schemas.StreamResponse) any { return r } },
	}
	v03 = dialect{
		version: schemas.ProtocolVersion03, methods: s.v03Methods(), streams: s.v03StreamMethods(),
		versionOK: supportedVersion03, names: schemas.FieldNamesV03,
		// A stream of the older dialect (tasks/sendSubscribe, or a
		// tasks/resubscribe of a task created through it, which the method
		// learns once it has read the task) has its own event shapes.
		event: func(c *call) func(*schemas.StreamResponse) any {
			var legacy func(*schemas.StreamResponse) any
			return func(r *schemas.StreamResponse) any {
				if c.method == "tasks/sendSubscribe" || c.dialect == schemas.DialectLegacy {
					if legacy == nil {
						legacy = legacyEvents(c)
					}
					return legacy(r)
				}
				return schemas.StreamResponseToV03(*r)
			}
		},
	}
	s.pushMethods(v1.methods, v03.methods)
	// The older dialect shares the 0.3 grammar (and tasks/get, tasks/cancel).
	s.legacyMethods(v03.methods, v03.streams)
	for _, d := range []dialect{v1, v03} {
		s.gatewayMethods(d.methods)
	}
	return v1, v03
}

func (s *Server) methods() map[string]methodFunc {
	return map[string]methodFunc{
		"SendMessage":          s.rpcSendMessage,
		"GetTask":              s.rpcGetTask,
		"CancelTask":           s.rpcCancelTask,
		"ListTasks":            s.rpcListTasks,
		"GetExtendedAgentCard": s.rpcGetExtendedAgentCard,
	}
}

func (s *Server) streamMethods() map[string]streamFunc {
	return map[string]streamFunc{
		"SendStreamingMessage": s.rpcSendStreamingMessage,
		"SubscribeToTask":      s.rpcSubscribeToTask,
		// a2abus's own extension method (feed.go): its name is in
		// neither dialect's grammar, so no A2A method can take it.
		schemas.MethodWatchTasks: s.rpcWatchTasks,
	}
}

// supportedVersion reports whether an A2A-Version value is served by the
// 1.0 methods: absent (many clients omit it; see a2a-spec.md §1.5), 1.0,
// or 1.1 (whose generations they serve, asksGenerations), compared on
// major.minor only.
func supportedVersion(v string) bool {
	v = strings.TrimSpace(v)
	if v == "" {
		return true
	}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	return parts[0] == "1" && (parts[1] == "0" || parts[1] == "1")
}

// asksGenerations reports whether an A2A-Version (one supportedVersion
// takes) is 1.1, whose answers carry task generations: a 1.0 client
// never sees a field its schema does not know. The requests' generation
// fields (currentGeneration, ifGenerationMatch) are honoured whatever the
// version: only a client that knows them sends them, and ignoring a
// precondition would lose the update it guards.
func asksGenerations(v string) bool {
	v = strings.TrimSpace(v)
	return v == "1.1" || strings.HasPrefix(v, "1.1.")
}

// parseEnvelope checks the JSON-RPC envelope: valid JSON (−32700), an
// object with jsonrpc "2.0", a string/number/null id and a method
// (−32600). Nesting and size were bounded as the body was read
// (bodyGuard).
func parseEnvelope(body []byte) (*rpcRequest, *schemas.Error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, schemas.Errorf(schemas.ErrParse, "empty request body; send a JSON-RPC 2.0 request object")
	}
	if !json.Valid(trimmed) {
		return nil, schemas.Errorf(schemas.ErrParse, "request body is not valid JSON")
	}
	if trimmed[0] == '[' {
		return nil, schemas.Errorf(schemas.ErrInvalidRequest, "batch requests are not supported; send one request object per call")
	}
	if trimmed[0] != '{' {
		return nil, schemas.Errorf(schemas.ErrInvalidRequest, "a JSON-RPC request must be a JSON object")
	}
	var req rpcRequest
	var jsonrpc, method []byte
	eachMember(trimmed, func(key string, val []byte) {
		// Names match as encoding/json matches them (exactly, else without
		// regard to case), and a repeated member wins.
		switch {
		case foldEqual(key, "jsonrpc"):
			jsonrpc = val
		case foldEqual(key, "id"):
			req.ID = val
		case foldEqual(key, "method"):
			method = val
		case foldEqual(key, "params"):
			req.Params = val
		}
	})
	if !validID(req.ID) {
		req.ID = nil
		return &req, schemas.Errorf(schemas.ErrInvalidRequest, "id must be a string, a number or null")
	}
	if err := stringMember(jsonrpc, &req.JSONRPC); err != nil {
		return &req, schemas.Errorf(schemas.ErrInvalidRequest, `"jsonrpc" must be the string "2.0"`)
	}
	if err := stringMember(method, &req.Method); err != nil {
		return &req, schemas.Errorf(schemas.ErrInvalidRequest, `"method" must be a string`)
	}
	if req.JSONRPC == nil || *req.JSONRPC != "2.0" {
		return &req, schemas.Errorf(schemas.ErrInvalidRequest, `"jsonrpc" must be "2.0"`)
	}
	if req.Method == nil || *req.Method == "" {
		return &req, schemas.Errorf(schemas.ErrInvalidRequest, `"method" is required`)
	}
	return &req, nil
}

// stringMember decodes a member's value that must be a string or null;
// an absent member (nil) leaves *dst nil.
func stringMember(val []byte, dst **string) error {
	if val == nil {
		return nil
	}
	return json.Unmarshal(val, dst)
}

func foldEqual(key, name string) bool { return key == name || strings.EqualFold(key, name) }

// eachMember calls f with each member of the valid JSON object obj: its
// key, decoded, and its value as a slice of obj, so the envelope's params
// are not copied out of the body (for a large message, one copy less).
func eachMember(obj []byte, f func(key string, val []byte)) {
	i := 1 // past '{'
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return // '}'
		}
		end := valueEnd(obj, i)
		key := string(obj[i+1 : end-1])
		if strings.IndexByte(key, '\\') >= 0 {
			_ = json.Unmarshal(obj[i:end], &key)
		}
		i = skipSpace(obj, end) + 1 // past ':'
		i = skipSpace(obj, i)
		end = valueEnd(obj, i)
		f(key, obj[i:end])
		i = skipSpace(obj, end) + 1 // past ',' or '}'
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// valueEnd returns the offset just past the JSON value that starts at
// b[i], in valid JSON.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
	case '{', '[':
		depth, inStr := 0, false
		for j := i; j < len(b); j++ {
			c := b[j]
			switch {
			case inStr && c == '\\':
				j++
			case c == '"':
				inStr = !inStr
			case inStr:
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
	default: // a number or a literal
		j := i
		for j < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[j])) {
			j++
		}
		return j
	}
	return len(b)
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
			return schemas.InvalidField(te.Field, "has the wrong type: expected %s, got JSON %s", te.Type, te.Value)
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
