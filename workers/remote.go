package workers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// The remote agent kind: a local agent name whose work is done by an
// external A2A agent. Each local task is one external task; its events are
// relayed as they arrive, so local clients stream from the external agent
// through the bus as if it were local. The external task's id and context
// are kept in the local task's metadata, which is what lets an answer to an
// input-required task reach the same external task, a redelivered task
// resume (subscribe) instead of sending twice, and a cancel be forwarded.

// Metadata keys a remote agent sets on its local tasks.
const (
	MetaRemoteTaskID    = "a2abus.remote.taskId"
	MetaRemoteContextID = "a2abus.remote.contextId"
	MetaRemoteURL       = "a2abus.remote.url"
)

// RemoteClient is what the remote agent needs of an A2A client; cmd adapts
// the discovery client to it (workers must not depend on discovery).
type RemoteClient interface {
	SendStreamingMessage(ctx context.Context, req *schemas.SendMessageRequest) (RemoteStream, error)
	SubscribeToTask(ctx context.Context, req *schemas.SubscribeToTaskRequest) (RemoteStream, error)
	CancelTask(ctx context.Context, req *schemas.CancelTaskRequest) (*schemas.Task, error)
}

// RemoteStream is a stream of events from the external agent; Next returns
// io.EOF after the last one.
type RemoteStream interface {
	Next() (*schemas.StreamResponse, error)
	Close() error
}

// Remote proxies tasks to one external A2A agent.
type Remote struct {
	// URL names the external agent in messages and metadata.
	URL string
	// Client returns the client of the external agent. An error means the
	// agent cannot be reached now: the task fails with that reason.
	Client func(ctx context.Context) (RemoteClient, error)
	// CancelTimeout bounds forwarding a cancel; default 10s.
	CancelTimeout time.Duration
}

// Execute sends the task's new message to the external agent (or, on a
// redelivery of a task already started there, subscribes to it) and relays
// every event.
func (r Remote) Execute(ctx context.Context, req *Request, out *Emitter) error {
	cl, err := r.Client(ctx)
	if err != nil {
		return fmt.Errorf("remote agent at %s is unreachable: %w", r.URL, err)
	}
	extID, _ := req.Task.Metadata[MetaRemoteTaskID].(string)
	extCtx, _ := req.Task.Metadata[MetaRemoteContextID].(string)
	var stream RemoteStream
	if extID != "" && req.Task.Status.State == schemas.TaskStateWorking {
		// A redelivery: the external task was started by an earlier
		// attempt. Follow it rather than send the message twice.
		stream, err = cl.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: extID})
	} else {
		msg := req.Message // its messageId is kept: the external agent may de-duplicate on it
		msg.TaskID, msg.ContextID = extID, extCtx
		msg.Role = schemas.RoleUser
		msg.Metadata = nil
		stream, err = cl.SendStreamingMessage(ctx, &schemas.SendMessageRequest{Message: &msg})
	}
	if err != nil {
		return r.callFailed(ctx, out, err)
	}
	rel := relay{r: r, out: out, extID: extID, extCtx: extCtx}
	resumes := 0
	for {
		ev, err := stream.Next()
		if err == nil {
			if err := rel.event(ctx, ev); err != nil {
				stream.Close()
				if ctx.Err() != nil {
					r.forwardCancel(ctx, cl, rel.extID)
				}
				return err
			}
			if rel.ended {
				stream.Close()
				return nil
			}
			continue
		}
		stream.Close()
		if ctx.Err() != nil {
			r.forwardCancel(ctx, cl, rel.extID)
			return ctx.Err()
		}
		// The stream broke (or ended early) while the external task runs
		// on: follow it again rather than fail work that is still being
		// done, a bounded number of times. An error the agent sent in the
		// stream is its answer, not a break: the task fails with it
		// (unless the agent says it is unavailable for now).
		var pe *schemas.Error
		answered := errors.As(err, &pe) && !errors.Is(err, schemas.ErrUnavailable)
		if rel.extID == "" || resumes >= maxResumes || answered {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("the remote agent at %s ended the stream before the task finished", r.URL)
			}
			return r.callFailed(ctx, out, err)
		}
		resumes++
		select {
		case <-time.After(time.Duration(resumes*resumes) * 100 * time.Millisecond):
		case <-ctx.Done():
			r.forwardCancel(ctx, cl, rel.extID)
			return ctx.Err()
		}
		if stream, err = cl.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: rel.extID}); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return r.callFailed(ctx, out, fmt.Errorf("following task %s again after the stream broke: %w", rel.extID, err))
		}
	}
}

// maxResumes bounds how often one run re-subscribes to the external task
// after its stream broke.
const maxResumes = 5

// callFailed turns a failed call into the local task's end: a protocol
// error is the external agent's answer (FAILED with its message, naming
// the agent), anything else says the agent could not be reached (the
// runtime fails the task with the returned error, which names the URL).
func (r Remote) callFailed(ctx context.Context, out *Emitter, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var pe *schemas.Error
	if errors.As(err, &pe) {
		return out.Fail(ctx, fmt.Sprintf("the remote agent at %s answered with an error: %v", r.URL, err))
	}
	return fmt.Errorf("remote agent at %s: %w", r.URL, err)
}

// forwardCancel cancels the external task when the local one was canceled
// by its client (not when this worker is merely shutting down: then the
// work is handed back and the next attempt follows the external task).
func (r Remote) forwardCancel(ctx context.Context, cl RemoteClient, extID string) {
	if extID == "" || !errors.Is(context.Cause(ctx), errCanceled) {
		return
	}
	d := r.CancelTimeout
	if d <= 0 {
		d = 10 * time.Second
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	_, _ = cl.CancelTask(cctx, &schemas.CancelTaskRequest{ID: extID})
}

// relay maps external events onto the local task.
type relay struct {
	r             Remote
	out           *Emitter
	extID, extCtx string
	ended         bool // the external task ended or was interrupted
}

func (l *relay) event(ctx context.Context, ev *schemas.StreamResponse) error {
	switch {
	case ev.Message != nil:
		l.ended = true
		return l.out.Reply(ctx, agentCopy(*ev.Message))
	case ev.Task != nil:
		if err := l.learn(ctx, ev.Task.ID, ev.Task.ContextID); err != nil {
			return err
		}
		// A snapshot (first event of a stream, or of a subscription): take
		// over what it already holds.
		for _, a := range ev.Task.Artifacts {
			if err := l.out.Artifact(ctx, a); err != nil {
				return err
			}
		}
		return l.status(ctx, ev.Task.Status)
	case ev.StatusUpdate != nil:
		if err := l.learn(ctx, ev.StatusUpdate.TaskID, ev.StatusUpdate.ContextID); err != nil {
			return err
		}
		return l.status(ctx, ev.StatusUpdate.Status)
	case ev.ArtifactUpdate != nil:
		if err := l.learn(ctx, ev.ArtifactUpdate.TaskID, ev.ArtifactUpdate.ContextID); err != nil {
			return err
		}
		u := ev.ArtifactUpdate
		return l.out.ArtifactChunk(ctx, u.Artifact, u.Append, u.LastChunk)
	}
	return nil
}

// learn records the external task's ids in the local task the first time
// they are seen.
func (l *relay) learn(ctx context.Context, id, contextID string) error {
	if id == "" || id == l.extID {
		return nil
	}
	l.extID, l.extCtx = id, contextID
	return l.out.Annotate(ctx, map[string]any{MetaRemoteTaskID: id, MetaRemoteContextID: contextID, MetaRemoteURL: l.r.URL})
}

func (l *relay) status(ctx context.Context, st schemas.TaskStatus) error {
	var msg *schemas.Message
	if st.Message != nil {
		m := agentCopy(*st.Message)
		msg = &m
	}
	switch st.State {
	case schemas.TaskStateSubmitted:
		return nil // queued over there; nothing to tell
	case schemas.TaskStateWorking:
		if msg == nil {
			return nil // the local task is WORKING already (Annotate)
		}
		return l.out.Status(ctx, schemas.TaskStateWorking, msg)
	case schemas.TaskStateFailed, schemas.TaskStateRejected:
		l.ended = true
		text := "the remote agent at " + l.r.URL + " reports " + string(st.State)
		if msg != nil && msg.Text() != "" {
			text += ": " + msg.Text()
		}
		return l.out.Status(ctx, st.State, AgentMessage(text))
	default:
		if st.State.Settled() {
			l.ended = true
		}
		return l.out.Status(ctx, st.State, msg)
	}
}

// agentCopy re-homes an external agent message in the local task: a new
// id (the external one may collide with local messages) and no external
// task/context ids.
func agentCopy(m schemas.Message) schemas.Message {
	m.MessageID = schemas.NewID()
	m.Role = schemas.RoleAgent
	m.TaskID, m.ContextID = "", ""
	return m
}
