package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
)

// Receiving push notifications. An a2abus sender signs every notification
// (schemas.HeaderNotificationSignature; see auth's NotificationVerifier
// for the claims); a receiver checks the signature against the sender's
// JWKS, that the token was made for its own webhook URL and this body,
// and that the task is the one the token names. A repeat of an event (the
// sender delivers at least once) has the same id, which Receiver drops.

// Notification is one verified push notification.
type Notification struct {
	TaskID  string
	EventID string
	// Event is the notification of an A2A 1.0 config: exactly one of its
	// members is set. Nil for a 0.3-shaped one (Task03).
	Event *schemas.StreamResponse
	// Task03 is the task snapshot a config registered through A2A 0.3 is
	// sent.
	Task03 *schemas.V03Task
	// Token is the config's token as the sender sent it ("" if none).
	Token string
}

// NotificationVerifier verifies notifications with the sender's keys.
type NotificationVerifier struct {
	v *auth.NotificationVerifier
}

// NewNotificationVerifier verifies notifications signed by issuer (""
// accepts any issuer the keys vouch for) with the keys published at
// jwksURL (an a2abus edge's /.well-known/jwks.json), fetched through the
// outbound guard of policy.
func NewNotificationVerifier(ctx context.Context, jwksURL, issuer string, policy Policy) (*NotificationVerifier, error) {
	v, err := auth.NewNotificationVerifier(ctx, jwksURL, issuer, policy.Client(auth.DefaultFetchTimeout))
	if err != nil {
		return nil, err
	}
	return &NotificationVerifier{v: v}, nil
}

// ErrNotificationRefused is wrapped by every refusal of Verify.
var ErrNotificationRefused = auth.ErrNotificationRefused

// Verify checks a notification request whose body was read into body,
// received at webhookURL (the URL registered in the config, which the
// token's audience must be).
func (v *NotificationVerifier) Verify(r *http.Request, body []byte, webhookURL string) (*Notification, error) {
	token := r.Header.Get(schemas.HeaderNotificationSignature)
	if token == "" {
		token, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	c, err := v.v.Verify(r.Context(), token, body, webhookURL)
	if err != nil {
		return nil, err
	}
	n, err := ParseNotification(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotificationRefused, err)
	}
	if n.TaskID != c.TaskID {
		return nil, fmt.Errorf("%w: the body is of task %q, the token of task %q", ErrNotificationRefused, n.TaskID, c.TaskID)
	}
	n.EventID = c.EventID
	n.Token = schemas.NotificationToken(r.Header.Get)
	return n, nil
}

// ParseNotification reads a notification's body: a 1.0 StreamResponse
// or a 0.3 task (then also in Task03, as sent).
func ParseNotification(body []byte) (*Notification, error) {
	sr, taskID, err := schemas.ReadNotification(body)
	if err != nil {
		return nil, err
	}
	n := &Notification{TaskID: taskID, Event: sr}
	if sr.Task != nil {
		var t03 schemas.V03Task
		if json.Unmarshal(body, &t03) == nil && t03.Kind == "task" {
			n.Event, n.Task03 = nil, &t03
		}
	}
	return n, nil
}

// MaxNotificationBytes bounds a notification body a Receiver reads.
const MaxNotificationBytes = 8 << 20

// Receiver is an http.Handler for a webhook: it verifies each
// notification, drops repeats of an event it has handled (the last few
// thousand), and passes the rest to Handle. It answers 204 when Handle
// succeeds, 401 for a notification that does not verify (the sender
// retries, so a rotation's new key is learnt), 400 for a body that is not
// one, and 503 when Handle fails (the sender retries).
type Receiver struct {
	Verifier *NotificationVerifier
	// URL is the webhook's URL as registered in the config.
	URL string
	// Handle is given each verified notification once.
	Handle func(context.Context, *Notification) error

	mu   sync.Mutex
	seen map[string]bool // event id → handled (false: being handled)
	ring []string
}

// receiverSeen bounds the event ids a Receiver remembers.
const receiverSeen = 4096

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "notifications are POSTed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxNotificationBytes+1))
	if err != nil || len(body) > MaxNotificationBytes {
		http.Error(w, "the body could not be read, or is too large", http.StatusBadRequest)
		return
	}
	n, err := rc.Verifier.Verify(r, body, rc.URL)
	if err != nil {
		status := http.StatusUnauthorized
		if _, perr := ParseNotification(body); perr != nil {
			status = http.StatusBadRequest
		}
		http.Error(w, err.Error(), status)
		return
	}
	// An event is handed over once. A repeat of one being handled is told
	// to retry (if the first fails, the retry is handled); a repeat of one
	// handled is answered as done.
	switch rc.claim(n.EventID) {
	case claimDone:
		w.WriteHeader(http.StatusNoContent)
		return
	case claimBusy:
		http.Error(w, "this notification is being handled; retry", http.StatusServiceUnavailable)
		return
	}
	if err := rc.Handle(r.Context(), n); err != nil {
		rc.settle(n.EventID, false)
		// The receiver's own error stays with it: the sender is told only
		// to try again.
		http.Error(w, "the notification could not be handled now; retry", http.StatusServiceUnavailable)
		return
	}
	rc.settle(n.EventID, true)
	w.WriteHeader(http.StatusNoContent)
}

// What claim found of an event.
const (
	claimNew = iota
	claimBusy
	claimDone
)

// claim takes an event for handling, or says it is taken or handled.
func (rc *Receiver) claim(id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if done, ok := rc.seen[id]; ok {
		if done {
			return claimDone
		}
		return claimBusy
	}
	if rc.seen == nil {
		rc.seen = map[string]bool{}
	}
	rc.seen[id] = false
	return claimNew
}

// settle records how handling an event ended: handled, it is remembered
// (the last receiverSeen of them); failed, it is forgotten so its retry is
// handled.
func (rc *Receiver) settle(id string, handled bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !handled {
		delete(rc.seen, id)
		return
	}
	rc.seen[id] = true
	if len(rc.ring) == receiverSeen {
		delete(rc.seen, rc.ring[0])
		rc.ring = rc.ring[1:]
	}
	rc.ring = append(rc.ring, id)
}
