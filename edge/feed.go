package edge

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// The task feed (schemas.MethodWatchTasks): an a2abus extension method of
// the 1.0 JSON-RPC binding that streams a summary of every change of the
// tasks the caller may see — what the dashboard's live task list follows.
// It is an operation of the A2A service like the others, so it enters by
// the front door (authentication, the caller's rate, the stream limits),
// passes the interceptor chain, and sees what bus.Owner.Sees lets the
// call's owner see: its own tasks, or every task of its tenant for an
// admin. It is built on the edge's task watcher (no consumer of its own)
// and carries no message, artifact or metadata. It does not resume: a
// client whose feed ended lists the tasks again (ListTasks) and opens a
// new one first.

func (s *Server) rpcWatchTasks(ctx context.Context, c *call, out streamOut) error {
	var req schemas.WatchTasksRequest
	if len(c.params) > 0 {
		if err := decodeParams(c.params, &req); err != nil {
			return err
		}
	}
	return s.svc.WatchTasks(ctx, c, &req, out)
}

// WatchTasks streams the changes of the tasks the call's owner may see,
// of the called agent or, with AllAgents, of every agent, from the moment
// the stream opens: each is sent as it comes, the newest of each task
// when several wait. A client that falls StreamBuffer tasks behind loses
// its feed with a retryable error, as does every feed when the edge
// drains.
func (s *a2aService) WatchTasks(ctx context.Context, c *call, req *schemas.WatchTasksRequest, out streamOut) error {
	feed := s.tasks.Feed(c.owner(), req.AllAgents, s.cfg.StreamBuffer)
	defer feed.Close()
	if out.start() != nil {
		return nil
	}
	keep := time.NewTicker(s.cfg.KeepAlive)
	defer keep.Stop()
	drained := s.drain.begun()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-drained:
			_ = out.fail(schemas.Errorf(schemas.ErrUnavailable, "this edge is shutting down; list the tasks and watch them again on another edge"))
			return nil
		case <-keep.C:
			if out.keepAlive() != nil {
				return nil
			}
		case <-feed.Ready():
			changes, err := feed.Take()
			out.hold()
			for _, ch := range changes {
				e := ch.Entry
				if out.sendChange(strconv.FormatUint(ch.Revision, 10), &schemas.TaskChange{
					TaskID: ch.ID, ContextID: e.Context, Agent: e.Agent, State: e.State, Timestamp: time.Unix(0, e.At).UTC(),
				}) != nil {
					return nil
				}
			}
			if out.release() != nil {
				return nil
			}
			if err != nil {
				_ = out.fail(schemas.Errorf(schemas.ErrUnavailable, "this feed fell behind the task changes; list the tasks and watch them again"))
				return nil
			}
		}
	}
}

// sendChange writes one event of the task feed, framed as the stream's
// other events are.
func (o *sseStream) sendChange(id string, ch *schemas.TaskChange) error {
	var v any = schemas.TaskChangeEvent{TaskChange: ch}
	if o.rpcID != nil {
		v = rpcResponse{JSONRPC: "2.0", ID: o.rpcID, Result: v}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return o.event(id, b)
}

// sendChange: the in-process door's adapters (MCP, gRPC) carry A2A's
// operations only, not the feed.
func (f *funcStream) sendChange(string, *schemas.TaskChange) error {
	return schemas.Errorf(schemas.ErrUnsupportedOperation, "the task feed is served on the JSON-RPC binding only")
}
