package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/a2abus/a2abus/schemas"
)

// The older tasks/send dialect of the systems a2abus replaces: JSON-RPC
// methods tasks/send, tasks/sendSubscribe (and tasks/get, tasks/cancel,
// which it shares with 0.3: the task's recorded dialect picks the answer's
// shape), and REST routes under /a2a/. The client chooses task ids; a2abus
// maps each to a UUID (schemas.LegacyTaskID) and echoes the client's id.

func (s *Server) legacyMethods(m map[string]methodFunc, st map[string]streamFunc) {
	m["tasks/send"] = s.legacySend
	st["tasks/sendSubscribe"] = s.legacySendSubscribe
}

// legacyCall prepares a tasks/send: the 1.0 request, and the call carrying
// the task id to create (or the message aimed at the existing task).
func (s *Server) legacyCall(ctx context.Context, c *call, params json.RawMessage) (*call, *schemas.SendMessageRequest, string, error) {
	var p schemas.LegacySendParams
	if err := decodeParams(params, &p); err != nil {
		return nil, nil, "", err
	}
	req, err := p.ToV1()
	if err != nil {
		return nil, nil, "", err
	}
	id := schemas.LegacyTaskID(p.ID)
	cc := *c
	if rec, _, err := s.b.GetTask(ctx, id); err == nil {
		if rec.Agent != c.agent {
			return nil, nil, "", schemas.Errorf(schemas.ErrTaskNotFound, "task %s not found", p.ID).With("taskId", p.ID)
		}
		req.Message.TaskID = id // a follow-up on the existing task
	} else if errors.Is(err, schemas.ErrTaskNotFound) {
		cc.taskID, cc.clientTaskID, cc.dialect = id, p.ID, schemas.DialectLegacy
	} else {
		return nil, nil, "", err
	}
	return &cc, req, p.ID, nil
}

func (s *Server) legacySend(ctx context.Context, c *call) (any, error) {
	cc, req, clientID, err := s.legacyCall(ctx, c, c.params)
	if err != nil {
		return nil, err
	}
	res, err := s.sendMessage(ctx, cc, req)
	if err != nil {
		return nil, err
	}
	return legacyResult(res, clientID), nil
}

// legacyResult shapes a send result for the older dialect, which has no
// message-only answers: a Message reply becomes a completed task.
func legacyResult(res *schemas.SendMessageResponse, clientID string) schemas.LegacyTask {
	if res.Message != nil {
		m := schemas.LegacyMessageFromV1(*res.Message)
		return schemas.LegacyTask{ID: clientID, SessionID: res.Message.ContextID, Status: schemas.LegacyTaskStatus{State: "completed", Message: &m}}
	}
	return schemas.LegacyTaskFromV1(*res.Task, clientID)
}

func (s *Server) legacySendSubscribe(ctx context.Context, c *call, out streamOut) error {
	cc, req, clientID, err := s.legacyCall(ctx, c, c.params)
	if err != nil {
		return err
	}
	if ls, ok := out.(*legacyRPCStream); ok {
		ls.clientID = clientID
	}
	return s.sendStreamingMessage(ctx, cc, req, out)
}

// legacyTask reads a task by a 0.3 or legacy id and tells its dialect.
func (s *Server) legacyTask(ctx context.Context, agent, id string) (*schemas.TaskRecord, error) {
	if id == "" {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "id is required")
	}
	rec, _, err := s.visibleTaskRev(ctx, agent, schemas.LegacyTaskID(id))
	if errors.Is(err, schemas.ErrTaskNotFound) {
		return nil, schemas.Errorf(schemas.ErrTaskNotFound, "task %s not found", id).With("taskId", id)
	}
	return rec, err
}

// shapeTask answers a task in the dialect it was created in.
func shapeTask(rec *schemas.TaskRecord, historyLength *int32) any {
	t := rec.Task.WithHistoryLength(historyLength)
	if rec.Dialect == schemas.DialectLegacy {
		return schemas.LegacyTaskFromV1(t, rec.ClientTaskID)
	}
	return schemas.TaskToV03(t)
}

// legacyRPCStream frames tasks/sendSubscribe events.
type legacyRPCStream struct {
	*sseWriter
	id       json.RawMessage
	clientID string
	mu       sync.Mutex
	index    map[string]int
}

func (r *legacyRPCStream) artifactIndex(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.index == nil {
		r.index = map[string]int{}
	}
	i, ok := r.index[id]
	if !ok {
		i = len(r.index)
		r.index[id] = i
	}
	return i
}

func (r *legacyRPCStream) send(cursor uint64, resp *schemas.StreamResponse) error {
	if resp.Task != nil {
		for _, a := range resp.Task.Artifacts {
			r.artifactIndex(a.ArtifactID)
		}
	}
	b, err := json.Marshal(rpcResponse{JSONRPC: "2.0", ID: r.id, Result: schemas.LegacyStreamEvent(*resp, r.clientID, r.artifactIndex)})
	if err != nil {
		return err
	}
	return r.event(strconv.FormatUint(cursor, 10), b)
}

func (r *legacyRPCStream) fail(e *schemas.Error) error {
	b, err := json.Marshal(rpcResponse{JSONRPC: "2.0", ID: r.id, Error: e.RPC()})
	if err != nil {
		return err
	}
	return r.event("", b)
}

// REST routes of the older dialect. The agent is the ?agent= query
// parameter, or the default agent.

func (s *Server) legacyRoutes() {
	s.mux.HandleFunc("POST /a2a/tasks/send", s.legacyREST(func(w http.ResponseWriter, r *http.Request, c *call) error {
		body, err := s.readRaw(w, r)
		if err != nil {
			return err
		}
		c.params = body
		res, err := s.legacySend(r.Context(), c)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, res)
		return nil
	}))
	s.mux.HandleFunc("GET /a2a/tasks/{task}", s.legacyREST(func(w http.ResponseWriter, r *http.Request, c *call) error {
		hl, err := queryInt32(r, "historyLength")
		if err == nil {
			err = schemas.ValidateHistoryLength(hl)
		}
		if err != nil {
			return err
		}
		rec, err := s.legacyTask(r.Context(), c.agent, r.PathValue("task"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, shapeTask(rec, hl))
		return nil
	}))
	s.mux.HandleFunc("POST /a2a/tasks/{task}/cancel", s.legacyREST(func(w http.ResponseWriter, r *http.Request, c *call) error {
		rec, err := s.legacyTask(r.Context(), c.agent, r.PathValue("task"))
		if err != nil {
			return err
		}
		rec, err = s.cancelTask(r.Context(), c.agent, rec.Task.ID)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, shapeTask(rec, nil))
		return nil
	}))
}

func (s *Server) legacyREST(fn restFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		agent := r.URL.Query().Get("agent")
		if agent == "" {
			agent, _ = s.resolveAgent(r)
		}
		if _, ok := s.agents.Get(agent); !ok {
			writeLegacyError(w, schemas.Errorf(schemas.ErrTaskNotFound, "no agent %q is served here; GET /a2a/agents lists the agents", agent), http.StatusNotFound)
			return
		}
		c := &call{agent: agent, trace: r.Header.Get("traceparent")}
		if err := fn(w, r, c); err != nil {
			pe := schemas.AsError(err)
			if errors.Is(pe, schemas.ErrInternal) {
				s.log.Error("request failed", "path", r.URL.Path, "agent", agent, "err", err)
			}
			writeLegacyError(w, pe, 0)
		}
	}
}

// writeLegacyError writes {"error":{"code","message","data"}} with the
// table's HTTP status (404 for an unknown or evicted task).
func writeLegacyError(w http.ResponseWriter, e *schemas.Error, status int) {
	if status == 0 {
		status = e.HTTPStatus
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, status, map[string]any{"error": e.RPCLegacy()})
}

// readRaw reads a JSON body within the limits, without decoding it.
func (s *Server) readRaw(w http.ResponseWriter, r *http.Request) (json.RawMessage, error) {
	var raw json.RawMessage
	if err := s.readBody(w, r, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}
