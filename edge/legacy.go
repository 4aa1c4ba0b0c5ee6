package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// The older tasks/send dialect of the systems a2abus replaces: JSON-RPC
// methods tasks/send, tasks/sendSubscribe (and tasks/get, tasks/cancel,
// which it shares with 0.3: the task's recorded dialect picks the answer's
// shape), and OpenFang's REST routes under /a2a/. The client may choose
// task ids (AgentOS does); a2abus maps each to a UUID
// (schemas.LegacyTaskID) and echoes the client's id. A tasks/send without
// an id (OpenFang's client sends none) creates a task under a new id.

func (s *Server) legacyMethods(m map[string]methodFunc, st map[string]streamFunc) {
	m["tasks/send"] = s.legacySend
	st["tasks/sendSubscribe"] = s.legacySendSubscribe
}

// legacyCall prepares a tasks/send: the 1.0 request, and on c the task id
// to create (or the message aimed at the existing task) and the client's id
// answers carry.
func (s *Server) legacyCall(ctx context.Context, c *call) (*schemas.SendMessageRequest, error) {
	var p schemas.LegacySendParams
	if err := decodeParams(c.params, &p); err != nil {
		return nil, err
	}
	clientID := p.ID
	if clientID == "" {
		p.ID = schemas.NewID()
	}
	req, err := p.ToV1()
	if err != nil {
		return nil, err
	}
	c.clientTaskID = p.ID
	id := schemas.ScopedLegacyTaskID(c.scope(), p.ID)
	if clientID != "" {
		c.clientIDs = true
		rec, err := s.svc.GetTask(ctx, c, &schemas.GetTaskRequest{ID: p.ID})
		c.clientIDs = false
		switch {
		case err == nil:
			req.Message.TaskID = rec.Task.ID // a follow-up on the existing task
			return req, nil
		case !errors.Is(err, schemas.ErrTaskNotFound):
			return nil, err
		}
	}
	if p.Deadline != nil {
		// Read for a new task only, as checkSend reads the metadata's.
		if c.deadline, err = schemas.LegacyDeadline(*p.Deadline, time.Now()); err != nil {
			return nil, err
		}
	}
	c.taskID, c.dialect = id, schemas.DialectLegacy
	return req, nil
}

func (s *Server) legacySend(ctx context.Context, c *call) (any, error) {
	res, err := s.legacySendTask(ctx, c)
	if err != nil {
		return nil, err
	}
	return schemas.LegacyTaskFromV1(*res, c.clientTaskID), nil
}

// legacySendTask runs a tasks/send and returns the task it answers with.
// The older dialect has no message-only answers: a Message reply becomes a
// completed task holding it.
func (s *Server) legacySendTask(ctx context.Context, c *call) (*schemas.Task, error) {
	req, err := s.legacyCall(ctx, c)
	if err != nil {
		return nil, err
	}
	sent, err := s.svc.SendMessage(ctx, c, req)
	if err != nil {
		return nil, err
	}
	res := sent.resp
	if m := res.Message; m != nil {
		return &schemas.Task{ID: c.clientTaskID, ContextID: m.ContextID,
			Status: schemas.TaskStatus{State: schemas.TaskStateCompleted, Message: m, Timestamp: schemas.Now()}}, nil
	}
	return res.Task, nil
}

func (s *Server) legacySendSubscribe(ctx context.Context, c *call, out streamOut) error {
	req, err := s.legacyCall(ctx, c)
	if err != nil {
		return err
	}
	return s.svc.SendStreamingMessage(ctx, c, req, out)
}

// legacyEvents shapes the events of one tasks/sendSubscribe stream: each
// carries the client's task id, and artifacts are numbered in the order
// the stream first sees them.
func legacyEvents(c *call) func(*schemas.StreamResponse) any {
	var mu sync.Mutex
	index := map[string]int{}
	indexOf := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		i, ok := index[id]
		if !ok {
			i = len(index)
			index[id] = i
		}
		return i
	}
	return func(r *schemas.StreamResponse) any {
		if r.Task != nil {
			for _, a := range r.Task.Artifacts {
				indexOf(a.ArtifactID)
			}
		}
		return schemas.LegacyStreamEvent(*r, c.clientTaskID, indexOf)
	}
}

// taskByClientID finds the caller's task a 0.3 or older-dialect client
// names by id: a server-made id as is, else the id of the caller's own
// client-chosen task (schemas.ScopedLegacyTaskID).
func (s *a2aService) taskByClientID(ctx context.Context, c *call, id string) (*schemas.TaskRecord, uint64, error) {
	if id == "" {
		return nil, 0, schemas.Errorf(schemas.ErrInvalidParams, "id is required")
	}
	scoped := schemas.ScopedLegacyTaskID(c.scope(), id)
	if schemas.ValidTaskID(id) && scoped != id {
		rec, rev, err := s.life.Task(ctx, c.owner(), id)
		if !errors.Is(err, schemas.ErrTaskNotFound) {
			return rec, rev, err
		}
	}
	rec, rev, err := s.life.Task(ctx, c.owner(), scoped)
	if errors.Is(err, schemas.ErrTaskNotFound) {
		return nil, 0, schemas.TaskNotFound(id)
	}
	return rec, rev, err
}

// shapeTask answers a task in the dialect it was created in.
func shapeTask(rec *schemas.TaskRecord, historyLength *int32) any {
	t := rec.Task.WithHistoryLength(historyLength)
	if rec.Dialect == schemas.DialectLegacy {
		return schemas.LegacyTaskFromV1(t, rec.ClientTaskID)
	}
	return schemas.TaskToV03(t)
}

// OpenFang's REST routes. The agent is the ?agent= query parameter, or the
// default agent. Answers are bare tasks in OpenFang's shape; errors are
// {"error":{"code","message","data"}} with the table's HTTP status (404
// for an unknown or evicted task, as OpenFang's document says).

var openFangREST = &binding{
	name: "openfang",
	agentOf: func(s *Server, r *http.Request) (string, bool) {
		agent := r.URL.Query().Get("agent")
		if agent == "" {
			agent, _ = s.resolveAgent(r)
		}
		if !schemas.ValidAgentName(agent) {
			return agent, false
		}
		_, ok := s.agents.Get(agent)
		return agent, ok
	},
	noAgent:     schemas.ErrTaskNotFound,
	writeResult: func(w http.ResponseWriter, _ *call, res any) { writeJSON(w, http.StatusOK, res) },
	writeError:  func(w http.ResponseWriter, _ *call, e *schemas.Error, status int) { writeLegacyError(w, e, status) },
}

func (s *Server) openFangDialect() dialect {
	return dialect{
		// OpenFang's routes predate A2A-Version; whatever a client sends
		// there, the routes answer the same.
		version: "tasks/send", versionOK: func(string) bool { return true }, names: schemas.FieldNamesV03,
		methods: map[string]methodFunc{
			"tasks/send":   s.openFangSend,
			"tasks/get":    s.openFangGet,
			"tasks/cancel": s.openFangCancel,
		},
		event: func(*call) func(*schemas.StreamResponse) any { return nil },
	}
}

// legacyRows are the rows of the route table of OpenFang's REST routes.
func legacyRows() []routeDecl {
	route := func(pattern string, decode decodeFunc) routeDecl {
		return front(pattern, openFangREST, formLegacy, func(s *Server, w http.ResponseWriter, r *http.Request, c *call) error {
			c.d = &s.openFang
			return decode(s, w, r, c)
		})
	}
	return []routeDecl{
		route("POST /a2a/tasks/send", decodeOpenFangSend),
		readsNoBody(route("GET /a2a/tasks/{task}", func(_ *Server, _ http.ResponseWriter, r *http.Request, c *call) error {
			c.method = "tasks/get"
			p := map[string]any{"id": r.PathValue("task")}
			err := queryInt32(r.URL.Query(), p, "historyLength")
			c.params = paramsOf(p)
			return err
		})),
		readsNoBody(route("POST /a2a/tasks/{task}/cancel", func(_ *Server, _ http.ResponseWriter, r *http.Request, c *call) error {
			c.method = "tasks/cancel"
			c.params = paramsOf(map[string]any{"id": r.PathValue("task")})
			return nil
		})),
	}
}

// decodeOpenFangSend reads POST /a2a/tasks/send: its body is the JSON-RPC
// request OpenFang documents, or (as a2abus took before) its params alone.
func decodeOpenFangSend(s *Server, w http.ResponseWriter, r *http.Request, c *call) error {
	c.method = "tasks/send"
	body, err := s.readParams(w, r, c)
	if err != nil || !isEnvelope(body) {
		c.params = body
		return err
	}
	req, perr := parseEnvelope(body)
	if perr != nil {
		return perr
	}
	c.method, c.params = *req.Method, req.Params
	if c.method != "tasks/send" {
		return schemas.Errorf(schemas.ErrMethodNotFound, "POST /a2a/tasks/send takes the method tasks/send, not %q", c.method).With("method", c.method)
	}
	return nil
}

// isEnvelope reports whether a JSON object body is a JSON-RPC request
// rather than bare params.
func isEnvelope(body []byte) bool {
	var probe struct {
		JSONRPC json.RawMessage `json:"jsonrpc"`
	}
	return len(body) > 0 && json.Unmarshal(body, &probe) == nil && len(bytes.TrimSpace(probe.JSONRPC)) > 0
}

func (s *Server) openFangSend(ctx context.Context, c *call) (any, error) {
	t, err := s.legacySendTask(ctx, c)
	if err != nil {
		return nil, err
	}
	return schemas.OpenFangTaskFromV1(*t, c.clientTaskID), nil
}

func (s *Server) openFangGet(ctx context.Context, c *call) (any, error) {
	rec, p, err := s.queryTask(ctx, c)
	if err != nil {
		return nil, err
	}
	return schemas.OpenFangTaskFromV1(rec.Task.WithHistoryLength(p.HistoryLength), clientID(rec, p.ID)), nil
}

func (s *Server) openFangCancel(ctx context.Context, c *call) (any, error) {
	rec, asked, err := s.cancelByParams(ctx, c)
	if err != nil {
		return nil, err
	}
	return schemas.OpenFangTaskFromV1(rec.Task, clientID(rec, asked)), nil
}

// clientID is the id a client named a task by: the one it chose, if the
// task was created through the older dialect, else the one it asked with.
func clientID(rec *schemas.TaskRecord, asked string) string {
	if rec.ClientTaskID != "" {
		return rec.ClientTaskID
	}
	return asked
}

// writeLegacyError writes {"error":{"code","message","data"}} with the
// table's HTTP status (or status when non-zero).
func writeLegacyError(w http.ResponseWriter, e *schemas.Error, status int) {
	if status == 0 {
		status = e.HTTPStatus
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, status, map[string]any{"error": e.RPCLegacy()})
}
