package bus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// retryWithin is the bus's one retry loop: these hold what its callers
// rely on, the first attempt alone (the usual case) as well as the retries.
func TestRetryWithin(t *testing.T) {
	errBusy := errors.New("busy")
	t.Run("done at once", func(t *testing.T) {
		calls := 0
		err := retryWithin(context.Background(), time.Minute, func(ctx context.Context) (bool, error) {
			calls++
			if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > attemptLimit {
				t.Errorf("the attempt's deadline %v is not within attemptLimit", dl)
			}
			return true, nil
		})
		if err != nil || calls != 1 {
			t.Fatalf("err %v after %d calls; want nil after 1", err, calls)
		}
	})
	t.Run("done on the third attempt", func(t *testing.T) {
		calls := 0
		err := retryWithin(context.Background(), time.Minute, func(context.Context) (bool, error) {
			calls++
			if calls < 3 {
				return false, errBusy
			}
			return true, nil
		})
		if err != nil || calls != 3 {
			t.Fatalf("err %v after %d calls; want nil after 3", err, calls)
		}
	})
	t.Run("a refusal ends it with its error", func(t *testing.T) {
		errNo := errors.New("refused")
		calls := 0
		err := retryWithin(context.Background(), time.Minute, func(context.Context) (bool, error) {
			calls++
			return true, errNo
		})
		if !errors.Is(err, errNo) || calls != 1 {
			t.Fatalf("err %v after %d calls; want the refusal after 1", err, calls)
		}
	})
	t.Run("the window bounds every attempt and the whole", func(t *testing.T) {
		const window = 120 * time.Millisecond
		start := time.Now()
		calls := 0
		err := retryWithin(context.Background(), window, func(ctx context.Context) (bool, error) {
			calls++
			if dl, ok := ctx.Deadline(); !ok || dl.After(start.Add(window+50*time.Millisecond)) {
				t.Errorf("attempt %d's deadline %v is past the window", calls, dl)
			}
			return false, errBusy
		})
		if !errors.Is(err, errBusy) || calls < 2 {
			t.Fatalf("err %v after %d calls; want the last attempt's error after at least 2", err, calls)
		}
	})
	t.Run("a closed connection ends it at once", func(t *testing.T) {
		calls := 0
		err := retryWithin(context.Background(), time.Minute, func(context.Context) (bool, error) {
			calls++
			return false, nats.ErrConnectionClosed
		})
		if !errors.Is(err, nats.ErrConnectionClosed) || calls != 1 {
			t.Fatalf("err %v after %d calls; want the closed connection's after 1", err, calls)
		}
	})
	t.Run("the caller's end ends it", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := retryWithin(ctx, time.Minute, func(context.Context) (bool, error) {
			calls++
			cancel()
			return false, nil
		})
		if !errors.Is(err, context.Canceled) || calls != 1 {
			t.Fatalf("err %v after %d calls; want context.Canceled after 1", err, calls)
		}
	})
}
