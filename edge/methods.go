package edge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
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
	res, raw, err := s.send(ctx, c, req, true)
	if raw != nil {
		return raw, err
	}
	return res, err
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
func (s *Server) checkSend(ctx context.Context, c *call, req *schemas.SendMessageRequest) (*schemas.Message, *int32, error) {
	if err := req.CheckInput(s.cfg.partLimits(), c.d.names); err != nil {
		return nil, nil, err
	}
	if req.Message.Role != schemas.RoleUser {
		return nil, nil, schemas.Errorf(schemas.ErrInvalidParams, "message.role must be ROLE_USER for a client message")
	}
	var histLen *int32
	if cfg := req.Configuration; cfg != nil {
		histLen = cfg.HistoryLength
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

func (s *Server) sendMessage(ctx context.Context, c *call, req *schemas.SendMessageRequest) (*schemas.SendMessageResponse, error) {
	res, _, err := s.send(ctx, c, req, false)
	return res, err
}

// send runs SendMessage. With allowRaw, a blocking send answered by a task
// that needs no reshaping (no historyLength asked) comes back as the
// encoded response instead.
func (s *Server) send(ctx context.Context, c *call, req *schemas.SendMessageRequest, allowRaw bool) (*schemas.SendMessageResponse, preEncoded, error) {
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
		var raw []byte
		if allowRaw && histLen == nil {
			last, raw, err = wait.UntilStateRaw(wctx, schemas.TaskState.Settled)
		} else {
			last, err = wait.UntilState(wctx, schemas.TaskState.Settled)
		}
		cancel()
		if raw != nil {
			if task, ok := bus.RawTask(raw); ok {
				return nil, preEncoded(task), nil
			}
			if last, err = bus.DecodeRecord(raw); err != nil {
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
	t := rec.Task.WithHistoryLength(histLen)
	return &schemas.SendMessageResponse{Task: &t}, nil, nil
}

// createTask admits a new task for the agent and submits it (see
// bus.Submit: a refused request leaves nothing behind).
func (s *Server) createTask(ctx context.Context, c *call, msg *schemas.Message, follow bus.Follow) (*schemas.TaskRecord, error) {
	if err := s.limitUnfinished(c); err != nil {
		return nil, err
	}
	if err := s.admit(ctx, c); err != nil {
		return nil, err
	}
	if reg, ok := s.agents.Get(c.agent); ok && reg.Maintenance != "" {
		e := schemas.Errorf(schemas.ErrUnavailable, "agent %s is in maintenance (%s); it takes no new tasks until an admin ends it", c.agent, reg.Maintenance)
		e.RetryAfter = 60
		return nil, e
	}
	rec, _, err := s.b.Submit(ctx, bus.Submission{
		Agent: c.agent, Owner: c.caller.principal, Tenant: c.caller.tenant, Origin: c.caller.origin, Message: msg, TaskID: c.taskID,
		Dialect: c.dialect, ClientTaskID: c.clientTaskID, Publish: c.publish(), PushConfig: c.push, PushDialect: c.d.version,
	}, follow)
	if errors.Is(err, bus.ErrTaskExists) {
		// A client-chosen id whose task this caller does not own (one
		// created before the edge authenticated): not found, as everywhere.
		return nil, schemas.Errorf(schemas.ErrTaskNotFound, "task %s not found", c.clientTaskID).With("taskId", c.clientTaskID)
	}
	return rec, err
}

// continueTask answers a task of the agent's that waits for input.
func (s *Server) continueTask(ctx context.Context, c *call, msg *schemas.Message, follow bus.Follow) (*schemas.TaskRecord, error) {
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
			_, err := s.b.PushConfig(ctx, c.owner(), msg.TaskID, p.ID)
			existed = !errors.Is(err, schemas.ErrTaskNotFound)
		}
		pr, err := s.b.CreatePushConfig(ctx, c.owner(), p, c.d.version)
		if err != nil {
			return nil, err
		}
		if !existed {
			added = pr.Config.ID
		}
	}
	rec, _, err := s.b.Continue(ctx, c.owner(), msg, c.publish(), follow)
	if added != "" && (errors.Is(err, schemas.ErrInvalidParams) || errors.Is(err, schemas.ErrUnsupportedOperation)) {
		// Refusals only: after any other error the message may have
		// been taken, and its notifications are owed.
		if derr := s.b.DeletePushConfig(context.WithoutCancel(ctx), c.owner(), msg.TaskID, added); derr != nil {
			s.log.Warn("removing the push config of a refused message failed", "task_id", msg.TaskID, "config_id", added, "err", derr)
		}
	}
	return rec, err
}

// visibleTask reads a task of the agent's (see bus.Task).
func (s *Server) visibleTask(ctx context.Context, c *call, id string) (*schemas.TaskRecord, error) {
	rec, _, err := s.b.Task(ctx, c.owner(), id)
	return rec, err
}

func (s *Server) rpcGetTask(ctx context.Context, c *call) (any, error) {
	var req schemas.GetTaskRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	return s.getTask(ctx, c, &req)
}

func (s *Server) getTask(ctx context.Context, c *call, req *schemas.GetTaskRequest) (*schemas.Task, error) {
	if err := schemas.ValidateHistoryLength(req.HistoryLength); err != nil {
		return nil, err
	}
	rec, err := s.visibleTask(ctx, c, req.ID)
	if err != nil {
		return nil, err
	}
	t := rec.Task.WithHistoryLength(req.HistoryLength)
	return &t, nil
}

func (s *Server) rpcCancelTask(ctx context.Context, c *call) (any, error) {
	var req schemas.CancelTaskRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	rec, err := s.cancelTask(ctx, c, req.ID)
	if err != nil {
		return nil, err
	}
	return &rec.Task, nil
}

// cancelTask cancels a task of the agent's (see bus.Cancel).
func (s *Server) cancelTask(ctx context.Context, c *call, id string) (*schemas.TaskRecord, error) {
	return s.b.Cancel(ctx, c.owner(), id, nil)
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
	return s.listTasks(ctx, c, &req)
}

func (s *Server) listTasks(ctx context.Context, c *call, req *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error) {
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
		t := r.Task.WithHistoryLength(req.HistoryLength)
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

func (s *Server) rpcGetExtendedAgentCard(_ context.Context, c *call) (any, error) {
	card, err := s.extendedCard(c)
	if err != nil {
		return nil, err
	}
	return card, nil
}

func (s *Server) rpcPushNotSupported(_ context.Context, c *call) (any, error) {
	return nil, schemas.Errorf(schemas.ErrPushNotSupported, "%s is not available: this agent does not support push notifications", c.method)
}

// backlogStaleFor is how old a backlog reading may be and still admit
// tasks while the bus cannot give a new one.
const backlogStaleFor = 30 * time.Second

// backlogCache remembers each agent's backlog for a moment, so admission
// costs one bus read per agent per interval, not one per request.
type backlogCache struct {
	mu   sync.Mutex
	seen map[string]backlogEntry
}

// backlogEntry is the last reading of an agent's backlog (n, plus the
// tasks this edge admitted since) and what its pace is measured from: the
// work done at two earlier readings about paceWindow apart, so the pace is
// always measured over one to two windows once the edge has watched that
// long.
type backlogEntry struct {
	n         uint64
	at        time.Time
	from, mid doneMark
	done      uint64 // at the last reading
}

// doneMark is an agent's count of work done (bus.AgentLoad.Done) when read.
type doneMark struct {
	done uint64
	at   time.Time
}

// paceWindow is the shortest span an agent's pace is measured over.
const paceWindow = 10 * time.Second

// read folds a new reading of the agent's load, taken at now, into e.
func (e *backlogEntry) read(l bus.AgentLoad, now time.Time) {
	switch {
	case e.from.at.IsZero() || l.Done < e.mid.done: // first, or the consumer was made anew
		e.from = doneMark{l.Done, now}
		e.mid = e.from
	case now.Sub(e.mid.at) >= paceWindow:
		e.from, e.mid = e.mid, doneMark{l.Done, now}
	}
	e.n, e.at, e.done = l.Backlog, now, l.Done
}

// drainRetry is the Retry-After of a refusal by the agent's backlog.
func (e *backlogEntry) drainRetry() int {
	return drainRetry(e.n, e.done-e.from.done, e.at.Sub(e.from.at))
}

// Bounds of the wait a refusal by an agent's backlog tells (drainRetry).
const (
	minDrainRetry     = 1
	maxDrainRetry     = 300
	unknownDrainRetry = 5 // the edge has not watched the agent long enough to tell
)

// drainRetry is how long an agent takes to work through backlog items at
// the pace it kept recently (done items over span), in whole seconds
// within minDrainRetry..maxDrainRetry: the wait a refused caller is told.
// An agent seen doing nothing for a whole paceWindow gets the most; one
// watched for less than a second, unknownDrainRetry.
func drainRetry(backlog, done uint64, span time.Duration) int {
	switch {
	case span < time.Second:
		return unknownDrainRetry
	case done == 0:
		if span >= paceWindow {
			return maxDrainRetry
		}
		return unknownDrainRetry
	}
	secs := math.Ceil(float64(backlog) * span.Seconds() / float64(done))
	return int(min(max(secs, minDrainRetry), maxDrainRetry))
}

// backlogShare is the share of an agent's backlog bound
// (MaxBacklogPerAgent) one caller may hold queued or running: 1/32, so a
// few callers cannot fill an agent's queue for everyone (32 would have
// to), but never fewer than minBacklogShare tasks, so a small bound still
// lets a caller queue some work ahead (a bound below 32 × 16 = 512 is
// that much easier to fill).
const (
	backlogShare    = 32
	minBacklogShare = 16
)

// admit refuses a new task when the agent's backlog is at its bound, or
// the caller already holds its share of that bound (backlogShare, counted
// by the task index per caller and agent). The backlog is read from the
// bus at most every 500ms; the tasks this edge admits in between are added
// to that reading, so a burst cannot pass the bound in the gap (other
// edges' admissions show at the next reading). A refusal tells the time
// the agent's recent pace takes to work through its backlog.
func (s *Server) admit(ctx context.Context, c *call) error {
	bound, agent := s.cfg.MaxBacklogPerAgent, c.agent
	if bound == 0 {
		return nil
	}
	bc := &s.backlog
	bc.mu.Lock()
	e, ok := bc.seen[agent]
	bc.mu.Unlock()
	if !ok || time.Since(e.at) > 500*time.Millisecond {
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if ok {
			// Holding a reading, don't let a leaderless consumer hold up
			// every request for the bus's whole request timeout.
			rctx, cancel = context.WithTimeout(ctx, time.Second)
		}
		l, err := s.b.AgentLoad(rctx, agent)
		cancel()
		switch {
		case err == nil:
			bc.mu.Lock()
			if bc.seen == nil {
				bc.seen = map[string]backlogEntry{}
			}
			e := bc.seen[agent]
			e.read(l, time.Now())
			bc.seen[agent] = e
			bc.mu.Unlock()
		case !ok || time.Since(e.at) > backlogStaleFor:
			return err
		}
		// Otherwise a new consumer leader is being elected (a node was
		// lost): the last reading, a few seconds old, still bounds the
		// backlog, and creating the task needs the bus anyway.
	}
	share := max(bound/backlogShare, minBacklogShare)
	held := uint64(s.index.Queued(c.caller.principal, c.caller.tenant, c.caller.origin, agent))
	bc.mu.Lock()
	defer bc.mu.Unlock()
	e = bc.seen[agent]
	switch {
	case e.n >= bound:
		wait := e.drainRetry()
		err := schemas.Errorf(schemas.ErrUnavailable, "agent %s has %d tasks queued or running, its limit; at its recent pace it works through them in about %d s: retry after that", agent, e.n, wait)
		err.RetryAfter = wait
		return err
	case held >= share:
		err := schemas.Errorf(schemas.ErrRateLimited, "this caller has %d tasks queued or running at agent %s, its share of the agent's backlog (at most %d of %d); wait for some to finish, or cancel some, before starting another", held, agent, share, bound)
		err.RetryAfter = e.drainRetry()
		return err
	}
	e.n++
	bc.seen[agent] = e
	return nil
}
