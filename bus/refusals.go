package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// ErrNotPermitted is returned by an operation the NATS server refused
// because the connection's user lacks the permission (its role, see
// Role): retrying cannot help, other credentials can. The bus returns it
// for a change of the run-time registry by a user without RoleAdminEdge
// or RoleAdmin (PutRegistryEntry, DeleteRegistryEntry), classified as
// schemas.ErrPermissionDenied.
var ErrNotPermitted = errors.New("bus: not permitted for this NATS user")

// publishRefused starts the server's -ERR for a publish its permissions
// deny; the subject follows, quoted.
const publishRefused = `Permissions Violation for Publish to "`

// refusals hands the server's refusals of publishes to the operations
// waiting for their answers. The server does not answer a publish it
// denies: it reports the violation to the connection, which nats.go hands
// to the connection's error handler, not to the publisher; a JetStream
// publish (a KV put or delete) would wait for its acknowledgement until
// its deadline and look like a bus that cannot be reached. An operation
// watches the subject it publishes to, and the error handler (refused)
// ends its context with ErrNotPermitted as the cause.
type refusals struct {
	mu      sync.Mutex
	next    uint64
	waiting map[string]map[uint64]context.CancelCauseFunc
}

// watch returns a context derived from ctx that ends, with a cause
// wrapping ErrNotPermitted, when the server refuses a publish of this
// connection to subject; stop releases it. Watch before publishing.
func (r *refusals) watch(ctx context.Context, subject string) (wctx context.Context, stop func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	r.mu.Lock()
	if r.waiting == nil {
		r.waiting = map[string]map[uint64]context.CancelCauseFunc{}
	}
	r.next++
	id := r.next
	if r.waiting[subject] == nil {
		r.waiting[subject] = map[uint64]context.CancelCauseFunc{}
	}
	r.waiting[subject][id] = cancel
	r.mu.Unlock()
	return wctx, func() {
		r.mu.Lock()
		delete(r.waiting[subject], id)
		if len(r.waiting[subject]) == 0 {
			delete(r.waiting, subject)
		}
		r.mu.Unlock()
		cancel(nil)
	}
}

// refused takes an asynchronous error of the connection: a refused
// publish ends the operations watching its subject (every publish to it
// by this connection is refused alike). It reports whether any did: they
// return the refusal, so the connection need not log it.
func (r *refusals) refused(err error) bool {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return false
	}
	_, rest, ok := strings.Cut(err.Error(), publishRefused)
	if !ok {
		return false
	}
	subject, _, ok := strings.Cut(rest, `"`)
	if !ok {
		return false
	}
	cause := fmt.Errorf("%w: %w", ErrNotPermitted, err)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cancel := range r.waiting[subject] {
		cancel(cause)
	}
	return len(r.waiting[subject]) > 0
}

// refusedCause is the refusal that ended wctx (a context of watch), or
// nil.
func refusedCause(wctx context.Context) error {
	if cause := context.Cause(wctx); errors.Is(cause, ErrNotPermitted) {
		return cause
	}
	return nil
}
