package edge

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/a2abus/a2abus/schemas"
)

// HTTP+JSON binding of A2A 1.0 (spec §11): one route per method under an
// agent's URL (and under the root for the default agent), ProtoJSON bodies
// (application/a2a+json or application/json), query parameters for GET,
// errors as google.rpc.Status JSON with an ErrorInfo detail and the HTTP
// status of the v1.0.1 table, streams as SSE of bare StreamResponse.

const contentA2A = "application/a2a+json"

// httpJSON is the HTTP+JSON binding.
var httpJSON = &binding{
	name: "rest", agentOf: pathAgent, noAgent: schemas.ErrTaskNotFound,
	writeResult: func(w http.ResponseWriter, _ *call, res any) {
		if pre, ok := res.(preEncoded); ok {
			w.Header().Set("Content-Type", contentA2A)
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(pre)
			return
		}
		writeREST(w, res)
	},
	writeError: func(w http.ResponseWriter, _ *call, e *schemas.Error, status int) { writeStatus(w, e, status) },
}

func (s *Server) restRoutes(prefix string) {
	route := func(pattern string, decode decodeFunc) {
		s.mux.HandleFunc(pattern, s.serve(httpJSON, func(s *Server, w http.ResponseWriter, r *http.Request, c *call) error {
			c.d = &s.v1
			return decode(s, w, r, c)
		}))
	}
	body := func(method string) decodeFunc {
		return func(s *Server, w http.ResponseWriter, r *http.Request, c *call) (err error) {
			c.method = method
			c.params, err = s.readParams(w, r)
			return err
		}
	}
	route("POST "+prefix+"/message:send", body("SendMessage"))
	route("POST "+prefix+"/message:stream", body("SendStreamingMessage"))
	route("GET "+prefix+"/tasks", decodeRESTList)
	route("GET "+prefix+"/tasks/{task}", decodeRESTTask)
	route("POST "+prefix+"/tasks/{task}", decodeRESTTask)
	route("GET "+prefix+"/extendedAgentCard", body("GetExtendedAgentCard"))
	route(prefix+"/tasks/{task}/pushNotificationConfigs", decodeRESTPush)
	route(prefix+"/tasks/{task}/pushNotificationConfigs/{config}", decodeRESTPush)
}

// decodeRESTTask reads the routes of one task, /tasks/{id} and
// /tasks/{id}:{action}.
func decodeRESTTask(s *Server, w http.ResponseWriter, r *http.Request, c *call) error {
	id, action := splitTaskAction(r.PathValue("task"))
	p := map[string]any{"id": id}
	switch {
	case action == "" && r.Method == http.MethodGet:
		c.method = "GetTask"
		if err := queryInt32(r, p, "historyLength"); err != nil {
			return err
		}
	case action == "subscribe":
		c.method = "SubscribeToTask"
	case action == "cancel" && r.Method == http.MethodPost:
		c.method = "CancelTask"
		body, err := s.readParams(w, r)
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
	if t := r.URL.Query().Get("tenant"); t != "" {
		p["tenant"] = t
	}
	c.params = paramsOf(p)
	return nil
}

// decodeRESTList reads ListTasks from the query.
func decodeRESTList(_ *Server, _ http.ResponseWriter, r *http.Request, c *call) error {
	c.method = "ListTasks"
	q := r.URL.Query()
	p := map[string]any{}
	for _, k := range []string{"contextId", "pageToken", "status", "tenant"} {
		if v := q.Get(k); v != "" {
			p[k] = v
		}
	}
	for _, k := range []string{"pageSize", "historyLength"} {
		if err := queryInt32(r, p, k); err != nil {
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

// decodeRESTPush reads the push notification config routes.
func decodeRESTPush(_ *Server, _ http.ResponseWriter, r *http.Request, c *call) error {
	config := r.PathValue("config")
	switch {
	case r.Method == http.MethodPost && config == "":
		c.method = "CreateTaskPushNotificationConfig"
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

func writeREST(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeStatus(w, schemas.Errorf(schemas.ErrInternal, "encoding the response failed"), 0)
		return
	}
	w.Header().Set("Content-Type", contentA2A)
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
