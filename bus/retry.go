package bus

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
)

// retryWithin is the one retry loop of the bus: for a step that must ride
// out a cluster electing new leaders (a few seconds after losing a node)
// rather than fail the caller. It calls attempt at once and again after
// pauses growing from 50ms to 1s, until attempt reports done, window
// passes or ctx ends, and returns the last attempt's error (ctx's, if no
// attempt finished). Each attempt gets at most attemptLimit, so a request
// to a dead node cannot take the whole window. A connection that is
// closed (Close, abort, or reconnecting given up) never comes back, so its
// error ends the loop at once: a caller learns in a moment that this
// process can no longer reach the bus.
func retryWithin(ctx context.Context, window time.Duration, attempt func(context.Context) (done bool, err error)) error {
	// Nearly every step is done at its first attempt, which so gets one
	// context of its own and no second one for the window: a blocking task
	// takes several steps, and each context is a timer and an entry in its
	// parent's children.
	end := time.Now().Add(window)
	try := func(ctx context.Context, limit time.Duration) (bool, error) {
		actx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		return attempt(actx)
	}
	done, err := try(ctx, min(attemptLimit, window))
	if done {
		return err
	}
	ctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	wait := 50 * time.Millisecond
	var last error
	for {
		if err != nil {
			last = err
			if errors.Is(err, nats.ErrConnectionClosed) {
				return err
			}
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return last
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
		if done, err = try(ctx, attemptLimit); done {
			return err
		}
	}
}

// attemptLimit bounds one attempt of a retried step (see retryWithin).
const attemptLimit = 5 * time.Second
