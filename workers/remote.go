package workers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/a2abus/a2abus/bus"
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
	// MetaRemotePushToken: see schemas.MetaRemotePushToken (the edge's
	// webhook reads it too).
	MetaRemotePushToken = schemas.MetaRemotePushToken
)

// RemoteClient is what the remote agent needs of an A2A client; cmd adapts
// the discovery client to it (workers must not depend on discovery).
type RemoteClient interface {
	SendStreamingMessage(ctx context.Context, req *schemas.SendMessageRequest) (RemoteStream, error)
	SubscribeToTask(ctx context.Context, req *schemas.SubscribeToTaskRequest) (RemoteStream, error)
	CancelTask(ctx context.Context, req *schemas.CancelTaskRequest) (*schemas.Task, error)
	// SendMessage and GetTask serve push mode (RemotePush).
	SendMessage(ctx context.Context, req *schemas.SendMessageRequest) (*schemas.SendMessageResponse, error)
	GetTask(ctx context.Context, req *schemas.GetTaskRequest) (*schemas.Task, error)
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
	// Push, when set, asks the external agent for push notifications to
	// the edge instead of holding a stream open (see RemotePush).
	Push *RemotePush
}

// RemotePush is a remote agent's push mode. The first message of a task
// goes to the external agent with a push config: the edge's webhook for the
// local task and a token made for it (its hash kept in the task's
// metadata). The edge checks each notification's token and hands it over
// the bus to the worker following the task, which relays it into the task
// as it relays streamed events and answers once it is stored. A worker
// that resumes the task (a redelivery after a restart) reads the external
// task first, and again every PollEvery while no notification comes, so a
// notification nobody could take is not missed: a long external task
// outlives the restart of every a2abus process, and no connection to the
// external agent is held while it works.
type RemotePush struct {
	// URL is the webhook of a local task, as the external agent reaches
	// the edge: <public URL>/a2a/remote/<agent>/tasks/<taskId>/push.
	URL func(taskID string) string
	// PollEvery is how often the external task is read while no
	// notification comes; default 1m.
	PollEvery time.Duration
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
	if r.Push != nil {
		return r.executePush(ctx, req, out, cl, extID, extCtx)
	}
	var stream RemoteStream
	if redelivered(req, extID) {
		// The external task was started by an earlier attempt. Follow it
		// rather than send the message twice.
		stream, err = cl.SubscribeToTask(ctx, &schemas.SubscribeToTaskRequest{ID: extID})
	} else {
		msg := outgoing(req, extID, extCtx)
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
// by its client or its deadline passed (not when this worker is merely
// shutting down: then the work is handed back and the next attempt
// follows the external task).
func (r Remote) forwardCancel(ctx context.Context, cl RemoteClient, extID string) {
	cause := context.Cause(ctx)
	if extID == "" || !errors.Is(cause, errCanceled) && !errors.Is(cause, ErrDeadlineExceeded) {
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
// they are seen. The write is queued, not waited for: it starts at once,
// before any later event of the task (one writer, in order), so a
// redelivery finds the ids exactly as soon as it would if the relay
// waited, while the external agent's next events, usually in the same
// read, join it in one write instead of costing one of their own.
func (l *relay) learn(ctx context.Context, id, contextID string) error {
	if id == "" || id == l.extID {
		return nil
	}
	l.extID, l.extCtx = id, contextID
	return l.out.annotateQueued(ctx, map[string]any{MetaRemoteTaskID: id, MetaRemoteContextID: contextID, MetaRemoteURL: l.r.URL})
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

// executePush is Execute in push mode (see RemotePush).
func (r Remote) executePush(ctx context.Context, req *Request, out *Emitter, cl RemoteClient, extID, extCtx string) error {
	type note struct {
		body []byte
		done chan error
	}
	notes := make(chan note)
	// quit ends the handler's wait once this run returns (ctx may outlive
	// it while the runtime stores the task's end).
	quit := make(chan struct{})
	stopping := fmt.Errorf("%w: the task's worker is stopping", bus.ErrNoRemoteListener)
	// Listening first: a notification may come before the send returns.
	stop, err := req.Delegation().ListenRemote(req.Task.ID, func(body []byte) error {
		n := note{body: body, done: make(chan error, 1)}
		select {
		case notes <- n:
		case <-ctx.Done():
			return stopping
		case <-quit:
			return stopping
		}
		select {
		case err := <-n.done:
			return err
		case <-ctx.Done():
			return stopping
		case <-quit:
			return stopping
		}
	})
	if err != nil {
		return err
	}
	defer stop()
	defer close(quit)
	rel := relay{r: r, out: out, extID: extID, extCtx: extCtx}
	seen := snapshotMark{}
	if redelivered(req, extID) {
		// The external task runs; what it did meanwhile is read, not
		// asked for again.
		if err := r.reconcile(ctx, cl, &rel, &seen); err != nil {
			return err
		}
	} else {
		msg := outgoing(req, extID, extCtx)
		send := &schemas.SendMessageRequest{Message: &msg, Configuration: &schemas.SendMessageConfiguration{ReturnImmediately: true}}
		if extID == "" {
			// The external task's config is made with its first message
			// and serves every later one.
			token := rand.Text()
			sum := sha256.Sum256([]byte(token))
			if err := out.Annotate(ctx, map[string]any{MetaRemotePushToken: hex.EncodeToString(sum[:])}); err != nil {
				return err
			}
			send.Configuration.TaskPushNotificationConfig = &schemas.TaskPushNotificationConfig{URL: r.Push.URL(req.Task.ID), Token: token}
		}
		res, err := cl.SendMessage(ctx, send)
		if err != nil {
			return r.callFailed(ctx, out, err)
		}
		switch {
		case res.Message != nil:
			return rel.event(ctx, &schemas.StreamResponse{Message: res.Message})
		case res.Task != nil:
			seen.take(res.Task)
			if err := rel.event(ctx, &schemas.StreamResponse{Task: res.Task}); err != nil {
				return err
			}
		}
	}
	every := r.Push.PollEvery
	if every <= 0 {
		every = time.Minute
	}
	poll := time.NewTicker(every)
	defer poll.Stop()
	for !rel.ended {
		select {
		case n := <-notes:
			sr, taskID, err := schemas.ReadNotification(n.body)
			if err == nil && rel.extID != "" && taskID != rel.extID {
				err = fmt.Errorf("the notification is of task %s, not of %s", taskID, rel.extID)
			}
			if err != nil {
				n.done <- err
				continue
			}
			if sr.Task != nil && !seen.take(sr.Task) {
				n.done <- nil // a task snapshot (0.3) with nothing new
				continue
			}
			// The external agent hears "taken" only once what it said is
			// stored: relayed chunks and annotations are queued, so the
			// answer waits for the queue.
			if err = rel.event(ctx, sr); err == nil {
				err = out.Flush(ctx)
			}
			if err != nil {
				n.done <- fmt.Errorf("%w: storing it failed", bus.ErrNoRemoteListener)
				return err
			}
			n.done <- nil
			poll.Reset(every)
		case <-poll.C:
			if err := r.reconcile(ctx, cl, &rel, &seen); err != nil {
				return err
			}
		case <-ctx.Done():
			r.forwardCancel(ctx, cl, rel.extID)
			return ctx.Err()
		}
	}
	return nil
}

// redelivered reports whether req is a redelivery of work whose external
// task an earlier attempt started (and is still running).
func redelivered(req *Request, extID string) bool {
	return extID != "" && req.Task.Status.State == schemas.TaskStateWorking
}

// outgoing is the message sent to the external agent for req: the
// client's, in the external task and context (when there are), with its
// messageId kept (the external agent may de-duplicate on it) and none of
// its metadata but the task's deadline, as an RFC 3339 time under
// schemas.MetaDeadline: A2A has no field for one, and another a2abus
// reads it there.
func outgoing(req *Request, extID, extCtx string) schemas.Message {
	msg := req.Message
	msg.TaskID, msg.ContextID = extID, extCtx
	msg.Role = schemas.RoleUser
	msg.Metadata = nil
	if !req.Deadline.IsZero() {
		msg.Metadata = map[string]any{schemas.MetaDeadline: req.Deadline.UTC().Format(time.RFC3339Nano)}
	}
	return msg
}

// reconcile reads the external task and relays what is new in it.
func (r Remote) reconcile(ctx context.Context, cl RemoteClient, rel *relay, seen *snapshotMark) error {
	t, err := cl.GetTask(ctx, &schemas.GetTaskRequest{ID: rel.extID})
	if err != nil {
		if ctx.Err() != nil {
			r.forwardCancel(ctx, cl, rel.extID)
			return ctx.Err()
		}
		if errors.Is(err, schemas.ErrTaskNotFound) {
			return r.callFailed(ctx, rel.out, err)
		}
		return nil // unreachable for now: the next poll or notification
	}
	if !seen.take(t) {
		return nil
	}
	return rel.event(ctx, &schemas.StreamResponse{Task: t})
}

// snapshotMark is what the last relayed snapshot of the external task
// showed, so an unchanged one is not relayed again.
type snapshotMark struct {
	state     schemas.TaskState
	at        string
	artifacts int
}

// take reports whether t shows something the last snapshot did not, and
// remembers it.
func (m *snapshotMark) take(t *schemas.Task) bool {
	next := snapshotMark{state: t.Status.State, artifacts: len(t.Artifacts)}
	if t.Status.Timestamp != nil {
		next.at = t.Status.Timestamp.String()
	}
	if next == *m {
		return false
	}
	*m = next
	return true
}
