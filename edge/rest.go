package edge

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
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

func (s *Server) restRoutes(prefix string) {
	s.mux.HandleFunc("POST "+prefix+"/message:send", s.restHandler("SendMessage", s.restSend))
	s.mux.HandleFunc("POST "+prefix+"/message:stream", s.restHandler("SendStreamingMessage", s.restStream))
	s.mux.HandleFunc("GET "+prefix+"/tasks", s.restHandler("ListTasks", s.restList))
	s.mux.HandleFunc("GET "+prefix+"/tasks/{task}", s.restHandler("", s.restTaskGET))
	s.mux.HandleFunc("POST "+prefix+"/tasks/{task}", s.restHandler("", s.restTaskPOST))
	s.mux.HandleFunc("GET "+prefix+"/extendedAgentCard", s.restHandler("GetExtendedAgentCard", func(w http.ResponseWriter, r *http.Request, c *call) error {
		_, err := s.rpcGetExtendedAgentCard(r.Context(), c)
		return err
	}))
	push := s.restHandler("TaskPushNotificationConfig", func(w http.ResponseWriter, r *http.Request, c *call) error {
		return schemas.Errorf(schemas.ErrPushNotSupported, "push notifications are not supported by this agent")
	})
	s.mux.HandleFunc(prefix+"/tasks/{task}/pushNotificationConfigs", push)
	s.mux.HandleFunc(prefix+"/tasks/{task}/pushNotificationConfigs/{config}", push)
}

// restFunc runs one REST method; an error is written as google.rpc.Status.
type restFunc func(w http.ResponseWriter, r *http.Request, c *call) error

// restHandler runs the REST method named method (its A2A name, for
// metrics; "" when fn names it, as the task routes do through c.obs).
func (s *Server) restHandler(method string, fn restFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		o := s.observe("rest")
		if method != "" {
			o.method = method
		}
		defer o.done()
		agent, ok := s.resolveAgent(r)
		if !ok {
			e := schemas.Errorf(schemas.ErrTaskNotFound, "no agent %q is served here; GET /a2a/agents lists the agents", agent)
			o.failed(e)
			writeStatus(w, e, http.StatusNotFound)
			return
		}
		version := r.Header.Get("A2A-Version")
		if version == "" {
			version = r.URL.Query().Get("A2A-Version")
		}
		if !supportedVersion(version) {
			e := schemas.Errorf(schemas.ErrVersionNotSupported, "A2A-Version %q is not supported; this endpoint speaks %s", version, schemas.ProtocolVersion).
				With("requestedVersion", version).With("supportedVersions", schemas.ProtocolVersion)
			o.failed(e)
			writeStatus(w, e, 0)
			return
		}
		c := &call{agent: agent, method: method, version: version, trace: r.Header.Get("traceparent"), lastEventID: r.Header.Get("Last-Event-ID"), obs: o}
		if err := fn(w, r, c); err != nil {
			pe := schemas.AsError(err)
			o.failed(pe)
			if errors.Is(pe, schemas.ErrInternal) {
				s.log.Error("request failed", "path", r.URL.Path, "agent", agent, "err", err)
			}
			writeStatus(w, pe, 0)
		}
	}
}

// readBody decodes a JSON request body into v after checking its content
// type and size. An empty body decodes as {}.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != contentA2A && mt != "application/json") {
			return schemas.Errorf(schemas.ErrContentTypeNotSupported, "Content-Type %q is not supported; send %s or application/json", ct, contentA2A)
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return schemas.Errorf(schemas.ErrInvalidRequest, "request body exceeds the limit of %d bytes", s.cfg.MaxBodyBytes)
		}
		return schemas.Errorf(schemas.ErrInvalidRequest, "reading request body: %v", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if !json.Valid(body) {
		return schemas.Errorf(schemas.ErrParse, "request body is not valid JSON")
	}
	if d := jsonDepth(body); d > s.cfg.MaxJSONDepth {
		return schemas.Errorf(schemas.ErrInvalidRequest, "JSON nesting depth %d exceeds the limit of %d", d, s.cfg.MaxJSONDepth)
	}
	return decodeParams(body, v)
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

func (s *Server) restSend(w http.ResponseWriter, r *http.Request, c *call) error {
	var req schemas.SendMessageRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	res, pre, err := s.send(r.Context(), c, &req, true)
	if err != nil {
		return err
	}
	if pre != nil {
		w.Header().Set("Content-Type", contentA2A)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(pre)
		return nil
	}
	writeREST(w, res)
	return nil
}

func (s *Server) restStream(w http.ResponseWriter, r *http.Request, c *call) error {
	var req schemas.SendMessageRequest
	if err := s.readBody(w, r, &req); err != nil {
		return err
	}
	defer s.streamOpen(c.obs)()
	out := &restStream{sseWriter: newSSEWriter(w, s.cfg.StreamWriteTimeout)}
	return s.finishStream(out, s.sendStreamingMessage(r.Context(), c, &req, out))
}

// finishStream reports an error of a stream: as the response before the
// stream started, as a last event after.
func (s *Server) finishStream(out sseStreamOut, err error) error {
	if err == nil || !out.isStarted() {
		return err
	}
	_ = out.fail(schemas.AsError(err))
	return nil
}

// restStream frames events as bare StreamResponse JSON.
type restStream struct{ *sseWriter }

func (r *restStream) send(cursor uint64, resp *schemas.StreamResponse) error {
	b, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	return r.event(strconv.FormatUint(cursor, 10), b)
}

func (r *restStream) fail(e *schemas.Error) error {
	b, err := json.Marshal(e.Status(0))
	if err != nil {
		return err
	}
	return r.event("", b)
}

func (s *sseWriter) isStarted() bool { return s.started }

// splitTaskAction splits the {task} segment "ID:action" (or "ID").
func splitTaskAction(seg string) (id, action string) {
	if i := strings.LastIndexByte(seg, ':'); i >= 0 {
		return seg[:i], seg[i+1:]
	}
	return seg, ""
}

func (s *Server) restTaskGET(w http.ResponseWriter, r *http.Request, c *call) error {
	id, action := splitTaskAction(r.PathValue("task"))
	switch action {
	case "":
		c.obs.method = "GetTask"
		hl, err := queryInt32(r, "historyLength")
		if err != nil {
			return err
		}
		res, err := s.getTask(r.Context(), c, &schemas.GetTaskRequest{ID: id, HistoryLength: hl})
		if err != nil {
			return err
		}
		writeREST(w, res)
		return nil
	case "subscribe":
		return s.restSubscribe(w, r, c, id)
	}
	return schemas.Errorf(schemas.ErrMethodNotFound, "GET /tasks/{id}:%s is not a method", action)
}

func (s *Server) restTaskPOST(w http.ResponseWriter, r *http.Request, c *call) error {
	id, action := splitTaskAction(r.PathValue("task"))
	switch action {
	case "cancel":
		c.obs.method = "CancelTask"
		var req schemas.CancelTaskRequest
		if err := s.readBody(w, r, &req); err != nil {
			return err
		}
		rec, err := s.cancelTask(r.Context(), c.agent, id)
		if err != nil {
			return err
		}
		writeREST(w, &rec.Task)
		return nil
	case "subscribe":
		return s.restSubscribe(w, r, c, id)
	}
	return schemas.Errorf(schemas.ErrMethodNotFound, "POST /tasks/{id}:%s is not a method", action)
}

func (s *Server) restSubscribe(w http.ResponseWriter, r *http.Request, c *call, id string) error {
	c.obs.method = "SubscribeToTask"
	defer s.streamOpen(c.obs)()
	out := &restStream{sseWriter: newSSEWriter(w, s.cfg.StreamWriteTimeout)}
	return s.finishStream(out, s.subscribe(r.Context(), c, id, out))
}

func (s *Server) restList(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	req := schemas.ListTasksRequest{ContextID: q.Get("contextId"), PageToken: q.Get("pageToken"), Status: schemas.TaskState(q.Get("status"))}
	var err error
	if req.PageSize, err = queryInt32(r, "pageSize"); err != nil {
		return err
	}
	if req.HistoryLength, err = queryInt32(r, "historyLength"); err != nil {
		return err
	}
	if v := q.Get("statusTimestampAfter"); v != "" {
		t, err := schemas.ParseTimestamp(v)
		if err != nil {
			return schemas.Errorf(schemas.ErrInvalidParams, "statusTimestampAfter %q is not an RFC 3339 time", v)
		}
		req.StatusTimestampAfter = &schemas.Timestamp{Time: t}
	}
	if v := q.Get("includeArtifacts"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return schemas.Errorf(schemas.ErrInvalidParams, "includeArtifacts must be true or false, got %q", v)
		}
		req.IncludeArtifacts = b
	}
	res, err := s.listTasks(r.Context(), c.agent, &req)
	if err != nil {
		return err
	}
	writeREST(w, res)
	return nil
}

func queryInt32(r *http.Request, name string) (*int32, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "%s must be an integer, got %q", name, v)
	}
	i := int32(n)
	return &i, nil
}
