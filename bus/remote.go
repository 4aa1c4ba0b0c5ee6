package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/a2abus/a2abus/schemas"
)

// Notifications for remote agents. A remote agent in push mode registers a
// webhook on the edge with the external agent instead of holding a stream;
// the edge that receives a notification checks it and hands it, as a core
// NATS request on a2a.remote.<taskId>, to the worker following the task,
// which relays it into the task and replies once it is stored. Nothing is
// kept on the bus: a notification nobody takes (the worker is restarting)
// is refused, the external sender retries, and the worker reads the
// external task again when it resumes.

// ErrNoRemoteListener is ForwardRemote's error when no worker follows the
// task now, or the one that does cannot take the notification now (it is
// stopping, or could not store it): the sender should retry.
var ErrNoRemoteListener = errors.New("no worker can take the notification now")

// ForwardRemote hands a notification body for a task to its worker and
// waits until the worker stored it (or refused it, with its reason).
func (b *Bus) ForwardRemote(ctx context.Context, taskID string, body []byte) error {
	if !schemas.ValidTaskID(taskID) {
		return fmt.Errorf("bus: forward notification: invalid task id %q", taskID)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	resp, err := b.nc.RequestWithContext(ctx, schemas.SubjectRemote(taskID), body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return ErrNoRemoteListener
	case err != nil:
		return errUnavailable("bus: forward notification", err)
	case resp.Header.Get(schemas.HeaderRetry) != "":
		return fmt.Errorf("%w: %s", ErrNoRemoteListener, resp.Data)
	case len(resp.Data) > 0:
		return errors.New(string(resp.Data))
	}
	return nil
}

// ListenRemote calls fn with each notification an edge forwards for the
// task, one at a time, until stop is called; fn's error is the refusal
// the edge answers, one to retry when it wraps ErrNoRemoteListener.
func (b *Bus) ListenRemote(taskID string, fn func(body []byte) error) (stop func(), err error) {
	sub, err := b.nc.Subscribe(schemas.SubjectRemote(taskID), func(m *nats.Msg) {
		reply := nats.NewMsg(m.Reply)
		if err := fn(m.Data); err != nil {
			reply.Data = []byte(err.Error())
			if len(reply.Data) == 0 {
				reply.Data = []byte("refused")
			}
			if errors.Is(err, ErrNoRemoteListener) {
				reply.Header.Set(schemas.HeaderRetry, "true")
			}
		}
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		return nil, fmt.Errorf("bus: listen for notifications of %s: %w", taskID, err)
	}
	if err := b.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("bus: listen for notifications of %s: %w", taskID, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
