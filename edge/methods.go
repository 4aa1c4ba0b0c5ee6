package edge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// The A2A 1.0 methods, independent of the binding that carried them: each
// takes decoded params and returns a result or a *schemas.Error.

func (s *Server) rpcSendMessage(ctx context.Context, c *call) (any, error) {
	req, err := decodeSend(c.params)
	if err != nil {
		return nil, err
	}
	c.rawAnswer = !c.gen // a stored task has no generation in it
	res, err := s.svc.SendMessage(ctx, c, req)
	if err != nil {
		return nil, err
	}
	if res.raw != nil {
		return res.raw, nil
	}
	return res.resp, nil
}

// preEncoded is a blocking send's answer, {"task": …}, with the finished
// task exactly as stored (see bus.RawTask). The 1.0 bindings write it as
// is, which spares the edge a decode and an encode of the task record on
// the busiest call; it is written in pieces around the stored bytes, not
// copied into one answer.
type preEncoded []byte

// write answers with the task inside before and after (a binding's own
// wrapping).
func (p preEncoded) write(w http.ResponseWriter, contentType, before, after string) {
	head, tail := before+`{"task":`, `}`+after
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(head)+len(p)+len(tail)))
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, head)
	_, _ = w.Write(p)
	_, _ = io.WriteString(w, tail)
}

// checkSend validates a send of any dialect (see input.go) and returns the
// message and the historyLength asked for.
func (s *a2aService) checkSend(ctx context.Context, c *call, req *schemas.SendMessageRequest) (*schemas.Message, *int32, error) {
	limits := s.cfg.partLimits()
	if c.level != nil && c.level.lowered {
		limits = c.level.parts // the trust level's body bound
	}
	if err := req.CheckInput(limits, c.d.names); err != nil {
		return nil, nil, err
	}
	if req.Message.Role != schemas.RoleUser {
		return nil, nil, schemas.Errorf(schemas.ErrInvalidParams, "message.role must be ROLE_USER for a client message")
	}
	if req.Message.TaskID == "" {
		// A deadline is the new task's; a continuation keeps the one its
		// task was created with, so the metadata it repeats is not read.
		dl, err := req.DeadlineOf(time.Now())
		if err != nil {
			return nil, nil, err
		}
		c.deadline = schemas.EarlierDeadline(c.deadline, dl)
	}
	var histLen *int32
	if cfg := req.Configuration; cfg != nil {
		histLen = cfg.HistoryLength
		if req.Message.TaskID != "" {
			c.ifGeneration = cfg.IfGenerationMatch // ignored for a new task (dev-1.1 §3.2.2)
		}
		if pc := cfg.TaskPushNotificationConfig; pc != nil {
			if !s.cfg.Push {
				return nil, nil, schemas.Errorf(schemas.ErrPushNotSupported, "push notifications are not supported by this agent")
			}
			p := *pc
			if p.TaskID != "" && p.TaskID != req.Message.TaskID {
				return nil, nil, schemas.Errorf(schemas.ErrInvalidParams, "configuration.taskPushNotificationConfig.taskId must be empty: the config is for the message's task")
			}
			if err := s.checkWebhookConfig(ctx, &p); err != nil {
				return nil, nil, err
			}
			c.push = &p
		}
	}
	return req.Message, histLen, nil
}

// sendResult is SendMessage's answer: the response, or, for a call that
// takes one (call.rawAnswer), the stored task as is (preEncoded).
type sendResult struct {
	resp *schemas.SendMessageResponse
	raw  preEncoded
}

// SendMessage runs a send. For a call that takes one (call.rawAnswer), a
// blocking send answered by a task that needs no reshaping (no
// historyLength asked) comes back as the encoded task instead.
func (s *a2aService) SendMessage(ctx context.Context, c *call, req *schemas.SendMessageRequest) (*sendResult, error) {
	res, raw, err := s.send(ctx, c, req, c.rawAnswer)
	if err != nil {
		return nil, err
	}
	return &sendResult{resp: res, raw: raw}, nil
}

func (s *a2aService) send(ctx context.Context, c *call, req *schemas.SendMessageRequest, allowRaw bool) (*schemas.SendMessageResponse, preEncoded, error) {
	msg, histLen, err := s.checkSend(ctx, c, req)
	if err != nil {
		return nil, nil, err
	}
	returnNow := req.Configuration != nil && req.Configuration.ReturnImmediately
	// A blocking call follows the task from before its work is queued, so
	// it needs no extra read and cannot miss a fast agent.
	var wait *bus.TaskWait
	follow := func(r *schemas.TaskRecord, _ uint64) {
		if !returnNow {
			wait = s.tasks.Watch(r.Task.ID, r)
		}
	}
	defer func() {
		if wait != nil {
			wait.Close()
		}
	}()
	var rec *schemas.TaskRecord
	if msg.TaskID != "" {
		rec, err = s.continueTask(ctx, c, msg, follow)
	} else {
		rec, err = s.createTask(ctx, c, msg, follow)
	}
	if err != nil {
		return nil, nil, err
	}
	if wait != nil {
		wctx, cancel := context.WithTimeout(ctx, s.cfg.BlockingTimeout)
		// Only an answer that is the stored task as is may skip the decode.
		var last *schemas.TaskRecord
		var raw bus.StoredRecord
		if allowRaw && histLen == nil {
			last, raw, err = wait.UntilStateRaw(wctx, schemas.TaskState.Settled)
		} else {
			last, err = wait.UntilState(wctx, schemas.TaskState.Settled)
		}
		cancel()
		if raw.Val != nil {
			if task, ok := raw.Task(); ok {
				return nil, preEncoded(task), nil
			}
			if last, err = bus.DecodeRecord(raw.Val); err != nil {
				return nil, nil, schemas.Errorf(schemas.ErrInternal, "task %s: %v", rec.Task.ID, err)
			}
		}
		switch {
		case err == nil:
			rec = last
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && last != nil:
			// Not settled within the blocking bound: answer with the task as
			// it is; the client polls GetTask or subscribes.
			rec = last
		default:
			return nil, nil, err
		}
	}
	if rec.Reply != nil {
		return &schemas.SendMessageResponse{Message: rec.Reply}, nil, nil
	}
	t := c.shapeTask(rec, histLen)
	return &schemas.SendMessageResponse{Task: &t}, nil, nil
}

// createTask submits a new task for the agent (see bus.Submit: a refused
// request leaves nothing behind); the interceptor admitNewTasks has
// admitted it.
func (s *a2aService) createTask(ctx context.Context, c *call, msg *schemas.Message, follow bus.Follow) (*schemas.TaskRecord, error) {
	rec, _, err := s.life.Submit(ctx, bus.Submission{
		Agent: c.agent, Owner: c.caller.principal, Tenant: c.caller.tenant, Origin: c.caller.origin, Trust: c.trust, Message: msg, TaskID: c.taskID,
		Dialect: c.dialect, ClientTaskID: c.clientTaskID, Publish: c.publish(), PushConfig: c.push, PushDialect: c.d.version,
		Deadline: c.deadline, Approval: s.approvalTimes(c),
	}, follow)
	if errors.Is(err, bus.ErrTaskExists) {
		// A client-chosen id whose task this caller does not own (one
		// created before the edge authenticated): not found, as everywhere.
		return nil, schemas.TaskNotFound(c.clientTaskID)
	}
	if err == nil {
		c.created = true
		traceTask(ctx, rec)
		c.madeTask = rec.Task.ID
	}
	return rec, err
}

// continueTask answers a task of the agent's that waits for input.
func (s *a2aService) continueTask(ctx context.Context, c *call, msg *schemas.Message, follow bus.Follow) (*schemas.TaskRecord, error) {
	// An inline config is stored before the message, so it is told of
	// everything the message starts; a message the task refuses takes a
	// config it added away again (one it replaced stays replaced).
	var added string
	if c.push != nil {
		p := *c.push
		p.TaskID = msg.TaskID
		existed := false
		if p.ID != "" {
			// Only a config known to be absent is taken away again: a
			// read that failed otherwise counts as one that was there.
			_, err := s.pushes.PushConfig(ctx, c.owner(), msg.TaskID, p.ID)
			existed = !errors.Is(err, schemas.ErrTaskNotFound)
		}
		pr, err := s.pushes.CreatePushConfig(ctx, c.owner(), p, c.d.version)
		if err != nil {
			return nil, err
		}
		if !existed {
			added = pr.Config.ID
		}
	}
	rec, _, err := s.life.Continue(ctx, c.owner(), bus.Answer{Message: msg, IfGeneration: c.ifGeneration, Publish: c.publish()}, follow)
	if added != "" && (errors.Is(err, schemas.ErrInvalidParams) || errors.Is(err, schemas.ErrUnsupportedOperation)) {
		// Refusals only: after any other error the message may have
		// been taken, and its notifications are owed.
		if derr := s.pushes.DeletePushConfig(context.WithoutCancel(ctx), c.owner(), msg.TaskID, added); derr != nil {
			s.log.Warn("removing the push config of a refused message failed", "task_id", msg.TaskID, "config_id", added, "err", derr)
		}
	}
	if err == nil {
		traceTask(ctx, rec)
	}
	return rec, err
}

// task reads a task of the agent's as the caller's (see bus.Task), by the
// id the call names it with (see call.clientIDs).
func (s *a2aService) task(ctx context.Context, c *call, id string) (*schemas.TaskRecord, uint64, error) {
	if c.clientIDs {
		return s.taskByClientID(ctx, c, id)
	}
	return s.life.Task(ctx, c.owner(), id)
}

// GetTask reads a task of the agent's as the caller's; the binding shapes
// it with the historyLength asked for (validated here). With
// currentGeneration (A2A 1.1) it is a long poll: the answer waits until
// the task's generation is greater, for at most the edge's
// BlockingTimeout, then gives the task as it is (the spec lets the server
// answer early on a timeout). A finished task never changes again, so it
// is answered at once.
func (s *a2aService) GetTask(ctx context.Context, c *call, req *schemas.GetTaskRequest) (*schemas.TaskRecord, error) {
	if err := schemas.ValidateHistoryLength(req.HistoryLength); err != nil {
		return nil, err
	}
	rec, _, err := s.task(ctx, c, req.ID)
	if err != nil || req.CurrentGeneration == nil {
		return rec, err
	}
	past := *req.CurrentGeneration
	changed := func(r *schemas.TaskRecord) bool { return r.Generation > past || r.Task.Status.State.Terminal() }
	if changed(rec) {
		return rec, nil
	}
	// The edge's task watcher already follows every task's record: the
	// wait costs no read of its own.
	wait := s.tasks.Watch(rec.Task.ID, rec)
	defer wait.Close()
	wctx, cancel := context.WithTimeout(ctx, s.cfg.BlockingTimeout)
	defer cancel()
	last, err := wait.Until(wctx, changed)
	switch {
	case err == nil:
		return last, nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && last != nil:
		return last, nil
	}
	return nil, err
}

func (s *Server) rpcGetTask(ctx context.Context, c *call) (any, error) {
	var req schemas.GetTaskRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	rec, err := s.svc.GetTask(ctx, c, &req)
	if err != nil {
		return nil, err
	}
	t := c.shapeTask(rec, req.HistoryLength)
	return &t, nil
}

func (s *Server) rpcCancelTask(ctx context.Context, c *call) (any, error) {
	var req schemas.CancelTaskRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	rec, err := s.svc.CancelTask(ctx, c, &req)
	if err != nil {
		return nil, err
	}
	t := c.shapeTask(rec, nil)
	return &t, nil
}

// shapeTask is a task as the call's answer holds it: its history cut to
// histLen (nil: all), and, for a call that takes them (call.gen), its
// generation.
func (c *call) shapeTask(rec *schemas.TaskRecord, histLen *int32) schemas.Task {
	t := rec.Task.WithHistoryLength(histLen)
	if c.gen {
		t.Generation = rec.Generation
	}
	return t
}

// CancelTask cancels a task of the agent's as the caller's (see
// bus.Cancel), named as the call names tasks (see call.clientIDs).
func (s *a2aService) CancelTask(ctx context.Context, c *call, req *schemas.CancelTaskRequest) (*schemas.TaskRecord, error) {
	id := req.ID
	if c.clientIDs {
		rec, _, err := s.taskByClientID(ctx, c, id)
		if err != nil {
			return nil, err
		}
		id = rec.Task.ID
	}
	return s.life.Cancel(ctx, c.owner(), id, nil)
}

const (
	defaultPageSize = 50
	maxPageSize     = 100
)

// pageCursor is the position after the last task of a page, in the list
// order (status time descending, then id descending). A cursor of a
// position rather than an offset keeps pages stable while tasks are added.
type pageCursor struct {
	T  int64  `json:"t"`
	ID string `json:"i"`
}

func encodeCursor(c *bus.ListCursor) string {
	b, _ := json.Marshal(pageCursor{T: c.At, ID: c.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(tok string) (*bus.ListCursor, error) {
	var c pageCursor
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.ID == "" {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "pageToken is not a token this server issued")
	}
	return &bus.ListCursor{At: c.T, ID: c.ID}, nil
}

func (s *Server) rpcListTasks(ctx context.Context, c *call) (any, error) {
	var req schemas.ListTasksRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	return s.svc.ListTasks(ctx, c, &req)
}

// ListTasks lists the caller's tasks of the agent, a page at a time.
func (s *a2aService) ListTasks(ctx context.Context, c *call, req *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error) {
	size := int32(defaultPageSize)
	if req.PageSize != nil {
		size = *req.PageSize
		if size < 1 || size > maxPageSize {
			return nil, schemas.Errorf(schemas.ErrInvalidParams, "pageSize must be between 1 and %d, got %d", maxPageSize, size)
		}
	}
	if err := schemas.ValidateHistoryLength(req.HistoryLength); err != nil {
		return nil, err
	}
	if req.Status != "" && !req.Status.Valid() {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "status %q is not a task state", req.Status)
	}
	q := bus.ListQuery{Owner: c.owner(), ContextID: req.ContextID, State: req.Status, Limit: int(size)}
	if req.PageToken != "" {
		cur, err := decodeCursor(req.PageToken)
		if err != nil {
			return nil, err
		}
		q.After = cur
	}
	if req.StatusTimestampAfter != nil {
		q.StatusAfter = req.StatusTimestampAfter.Time
	}
	page, err := s.index.List(ctx, q)
	if err != nil {
		return nil, err
	}
	resp := &schemas.ListTasksResponse{Tasks: make([]schemas.Task, 0, len(page.Tasks)), PageSize: size, TotalSize: int32(page.Total)}
	for _, r := range page.Tasks {
		t := c.shapeTask(r, req.HistoryLength)
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		resp.Tasks = append(resp.Tasks, t)
	}
	if page.Next != nil {
		resp.NextPageToken = encodeCursor(page.Next)
	}
	return resp, nil
}

func (s *Server) rpcGetExtendedAgentCard(ctx context.Context, c *call) (any, error) {
	return s.svc.GetExtendedAgentCard(ctx, c)
}

// GetExtendedAgentCard is the called agent's card for an authenticated
// caller (see Server.extendedCard).
func (s *a2aService) GetExtendedAgentCard(_ context.Context, c *call) (*schemas.AgentCard, error) {
	card, err := s.extendedCard(c)
	if err != nil {
		return nil, err
	}
	return &card, nil
}
