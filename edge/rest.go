package edge

import (
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/a2abus/a2abus/schemas"
)

// HTTP+JSON binding of A2A 1.0 (spec §11): one route per method under an
// agent's URL (and under the root for the default agent), ProtoJSON bodies
// (application/a2a+json or application/json), query parameters for GET,
// errors as google.rpc.Status JSON with an ErrorInfo detail and the HTTP
// status of the v1.0.1 table, streams as SSE of bare StreamResponse.

const contentA2A = schemas.ContentTypeA2A

// httpJSON is the HTTP+JSON binding.
var httpJSON = &binding{
	name: "rest", agentOf: pathAgent, noAgent: schemas.ErrTaskNotFound,
	writeResult: func(w http.ResponseWriter, c *call, res any) {
		if pre, ok := res.(preEncoded); ok {
			pre.write(w, c.answerType, "", "")
			return
		}
		writeREST(w, c.answerType, res)
	},
	writeError: func(w http.ResponseWriter, _ *call, e *schemas.Error, status int) { writeStatus(w, e, status) },
}

// restRows are the HTTP+JSON binding's rows of the route table, under
// prefix ("" or "/agents/{agent}").
func restRows(prefix string) []routeDecl {
	route := func(pattern string, decode decodeFunc) routeDecl {
		return front(pattern, httpJSON, formStatus, func(s *Server, w http.ResponseWriter, r *http.Request, c *call) error {
			c.d, c.answerType = &s.v1, answerType(r)
			return decode(s, w, r, c)
		})
	}
	body := func(method string) decodeFunc {
		return func(s *Server, w http.ResponseWriter, r *http.Request, c *call) (err error) {
			c.method = method
			c.params, err = s.readParams(w, r, c)
			return err
		}
	}
	return []routeDecl{
		route("POST "+prefix+"/message:send", body("SendMessage")),
		route("POST "+prefix+"/message:stream", body("SendStreamingMessage")),
		readsNoBody(route("GET "+prefix+"/tasks", decodeRESTList)),
		readsNoBody(route("GET "+prefix+"/tasks/{task}", decodeRESTTask)),
		route("POST "+prefix+"/tasks/{task}", decodeRESTTask),
		route("GET "+prefix+"/extendedAgentCard", body("GetExtendedAgentCard")),
		route(prefix+"/tasks/{task}/pushNotificationConfigs", decodeRESTPush),
		route(prefix+"/tasks/{task}/pushNotificationConfigs/{config}", decodeRESTPush),
	}
}

// tenantKey carries, in a request's context, the tenant its HTTP+JSON path
// named; the front door's selectTenant applies it like the tenant field.
type tenantKey struct{}

// tenantPaths serves the HTTP+JSON routes under a tenant segment, the
// spec's multi-tenancy form that official clients send when a tenant is
// set: /{tenant}/message:send, /{tenant}/tasks/{id}, … for the default
// agent and /agents/{agent}/{tenant}/… for a named one. It strips the
// segment and serves the request through the edge's mux, so every tenant
// path enters the same front door as its plain form. It sits in front of
// the mux because ServeMux patterns cannot hold both forms (a wildcard
// first segment conflicts with /agents/{agent}/…). A path the mux routes
// as it is keeps its meaning (the older dialect's /a2a/tasks/{id}, a task
// named "tasks"); only paths shaped like a tenant route pay the extra
// lookup.
func (s *Server) tenantPaths() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r2 := stripTenant(r); r2 != nil {
			if _, pattern := s.mux.Handler(r); pattern == "" {
				r = r2
			}
		}
		s.mux.ServeHTTP(w, r)
	})
}

// stripTenant returns r without the tenant segment of its path and with
// the tenant in its context, or nil if the path names none.
func stripTenant(r *http.Request) *http.Request {
	segs := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	for _, at := range []int{2, 0} {
		if at == 2 && (len(segs) < 4 || segs[0] != "agents") {
			continue
		}
		tenant, err := url.PathUnescape(segs[at])
		if err != nil || !validTenant(tenant) || !restMethodPath(segs[at+1:]) {
			continue
		}
		esc := "/" + strings.Join(append(segs[:at:at], segs[at+1:]...), "/")
		path, err := url.PathUnescape(esc)
		if err != nil {
			return nil
		}
		u := *r.URL
		u.Path, u.RawPath = path, esc
		r2 := r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant))
		r2.URL = &u
		return r2
	}
	return nil
}

// restMethodPath reports whether segs, the path after an agent's URL,
// start one of the HTTP+JSON method routes.
func restMethodPath(segs []string) bool {
	return len(segs) > 0 && (strings.HasPrefix(segs[0], "message:") || segs[0] == "tasks" || segs[0] == "extendedAgentCard")
}

// validTenant bounds what a path may name as a tenant: a short label
// without separators or control characters.
func validTenant(t string) bool {
	if t == "" || len(t) > 128 || t == "." || t == ".." {
		return false
	}
	for _, r := range t {
		if r == '/' || r == '\\' || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// decodeRESTTask reads the routes of one task, /tasks/{id} and
// /tasks/{id}:{action}.
func decodeRESTTask(s *Server, w http.ResponseWriter, r *http.Request, c *call) error {
	id, action := splitTaskAction(r.PathValue("task"))
	p := map[string]any{"id": id}
	q, err := protoQuery(r.URL.Query())
	if err != nil {
		return err
	}
	switch {
	case action == "" && r.Method == http.MethodGet:
		c.method = "GetTask"
		if err := queryInt32(q, p, "historyLength"); err != nil {
			return err
		}
		if v := q.Get("currentGeneration"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return schemas.InvalidField("currentGeneration", "must be a generation (a non-negative integer), got %q", v)
			}
			p["currentGeneration"] = n
		}
	case action == "subscribe":
		c.method = "SubscribeToTask"
	case action == "cancel" && r.Method == http.MethodPost:
		c.method = "CancelTask"
		body, err := s.readParams(w, r, c)
		if err != nil {
			return err
		}
		var extra struct {
			Metadata map[string]any `json:"metadata"`
		}
		if err := decodeParams(body, &extra); err != nil {
			return err
		}
		if extra.Metadata != nil {
			p["metadata"] = extra.Metadata
		}
	default:
		c.method = r.Method + " /tasks/{id}:" + action
		return schemas.Errorf(schemas.ErrMethodNotFound, "%s /tasks/{id}:%s is not a method", r.Method, action)
	}
	if t := q.Get("tenant"); t != "" {
		p["tenant"] = t
	}
	c.params = paramsOf(p)
	return nil
}

// decodeRESTList reads ListTasks from the query.
func decodeRESTList(_ *Server, _ http.ResponseWriter, r *http.Request, c *call) error {
	c.method = "ListTasks"
	q, err := protoQuery(r.URL.Query())
	if err != nil {
		return err
	}
	p := map[string]any{}
	for _, k := range []string{"contextId", "pageToken", "status", "tenant"} {
		if v := q.Get(k); v != "" {
			p[k] = v
		}
	}
	for _, k := range []string{"pageSize", "historyLength"} {
		if err := queryInt32(q, p, k); err != nil {
			return err
		}
	}
	if v := q.Get("statusTimestampAfter"); v != "" {
		if _, err := schemas.ParseTimestamp(v); err != nil {
			return schemas.Errorf(schemas.ErrInvalidParams, "statusTimestampAfter %q is not an RFC 3339 time", v)
		}
		p["statusTimestampAfter"] = v
	}
	if v := q.Get("includeArtifacts"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return schemas.Errorf(schemas.ErrInvalidParams, "includeArtifacts must be true or false, got %q", v)
		}
		p["includeArtifacts"] = b
	}
	c.params = paramsOf(p)
	return nil
}

// decodeRESTPush reads the push notification config routes: the task (and
// config) from the path; a create's body is the config, whose taskId, if
// it names one, must be the path's.
func decodeRESTPush(s *Server, w http.ResponseWriter, r *http.Request, c *call) error {
	config := r.PathValue("config")
	switch {
	case r.Method == http.MethodPost && config == "":
		c.method = "CreateTaskPushNotificationConfig"
		body, err := s.readParams(w, r, c)
		if err != nil {
			return err
		}
		fields := map[string]json.RawMessage{}
		if body != nil {
			if err := json.Unmarshal(body, &fields); err != nil {
				return schemas.Errorf(schemas.ErrInvalidParams, "the request body must be a push notification config object")
			}
		}
		task, _ := json.Marshal(r.PathValue("task"))
		if t, ok := fields["taskId"]; ok && string(t) != string(task) && string(t) != `""` {
			return schemas.Errorf(schemas.ErrInvalidParams, "taskId %s in the body is not the task of the path", t)
		}
		fields["taskId"] = task
		c.params, _ = json.Marshal(fields)
		return nil
	case r.Method == http.MethodGet && config == "":
		c.method = "ListTaskPushNotificationConfigs"
	case r.Method == http.MethodGet:
		c.method = "GetTaskPushNotificationConfig"
	case r.Method == http.MethodDelete:
		c.method = "DeleteTaskPushNotificationConfig"
	default:
		c.method = r.Method + " pushNotificationConfigs"
	}
	c.params = paramsOf(map[string]any{"taskId": r.PathValue("task"), "id": config})
	return nil
}

// answerType is the media type an HTTP+JSON answer is written in: of
// application/a2a+json and application/json, the one the request's
// Accept prefers; when it prefers neither (absent, */*, a tie), the
// request body's (application/json in, application/json out); else
// application/a2a+json, which the binding SHOULD use (spec §11.1).
func answerType(r *http.Request) string {
	if accept := r.Header.Get("Accept"); accept != "" {
		qa, qj := acceptQ(accept, contentA2A), acceptQ(accept, "application/json")
		switch {
		case qa > qj:
			return contentA2A
		case qj > qa:
			return "application/json"
		}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt == "application/json" {
		return mt
	}
	return contentA2A
}

// acceptQ is the quality an Accept header gives media type mt (type/subtype,
// lower case): that of its most specific range matching mt (RFC 9110
// §12.5.1), 0 when none does.
func acceptQ(accept, mt string) float64 {
	typ, _, _ := strings.Cut(mt, "/")
	best, q := 0, 0.0
	for _, part := range strings.Split(accept, ",") {
		rng, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		specific := 0
		switch {
		case rng == mt:
			specific = 3
		case rng == typ+"/*":
			specific = 2
		case rng == "*/*":
			specific = 1
		}
		if specific <= best {
			continue
		}
		best, q = specific, 1
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f <= 1 {
				q = f
			}
		}
	}
	return q
}

// writeREST writes v as an HTTP+JSON answer of media type contentType.
func writeREST(w http.ResponseWriter, contentType string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeStatus(w, schemas.Errorf(schemas.ErrInternal, "encoding the response failed"), 0)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// writeStatus writes an error as google.rpc.Status with the table's HTTP
// status (or httpStatus when non-zero).
func writeStatus(w http.ResponseWriter, e *schemas.Error, httpStatus int) {
	st := e.Status(httpStatus)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	b, _ := json.Marshal(st)
	// google.rpc.Status is plain JSON; clients (the official Go SDK among
	// them) read error bodies only as application/json.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st.Error.Code)
	_, _ = w.Write(b)
}

// splitTaskAction splits the {task} segment "ID:action" (or "ID").
func splitTaskAction(seg string) (id, action string) {
	if i := strings.LastIndexByte(seg, ':'); i >= 0 {
		return seg[:i], seg[i+1:]
	}
	return seg, ""
}
