package edge

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// The webhook of remote agents in push mode: an external agent posts its
// notifications for a local task to /a2a/remote/{agent}/tasks/{task}/push.
// The caller is not an A2A client and has no principal here: the token the
// remote agent gave it with the task's push config is its credential,
// checked against the hash kept in the task's metadata before anything
// else. A good notification is handed over the bus to the worker following
// the task; the answer (204) comes once the worker stored it. It is not an
// A2A request, so it does not pass serve; what serve applies to every
// request that fits it here — a rate limit (by address, as for anonymous
// callers) and the body bound — is applied first.

func (s *Server) handleRemotePush(w http.ResponseWriter, r *http.Request) {
	agent, taskID := r.PathValue("agent"), r.PathValue("task")
	token := schemas.NotificationToken(r.Header.Get)
	if token == "" {
		token, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	// One answer for every refusal of the credential: an unknown task,
	// another agent's, one not in push mode, a wrong token.
	refuse := func() { writePlain(w, http.StatusNotFound, "no such webhook, or not this token") }
	// The senders are limited like anonymous callers, by address, before
	// anything is read.
	if !s.allowAddress(w, r, "webhook") {
		return
	}
	if !schemas.ValidTaskID(taskID) || token == "" {
		refuse()
		return
	}
	rec, _, err := s.b.GetTask(r.Context(), taskID)
	if err != nil && !errors.Is(err, schemas.ErrTaskNotFound) {
		w.Header().Set("Retry-After", "5")
		writePlain(w, http.StatusServiceUnavailable, "the task cannot be read now; retry")
		return
	}
	want, _ := func() (string, bool) {
		if rec == nil {
			return "", false
		}
		v, ok := rec.Task.Metadata[schemas.MetaRemotePushToken].(string)
		return v, ok
	}()
	sum := sha256.Sum256([]byte(token))
	if rec == nil || rec.Agent != agent || want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(hex.EncodeToString(sum[:]))) != 1 {
		refuse()
		return
	}
	if rec.Task.Status.State.Terminal() {
		// The sender may stop: nothing more will be taken for this task.
		writePlain(w, http.StatusGone, "the task is finished")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		writePlain(w, http.StatusRequestEntityTooLarge, "the notification is larger than this edge takes")
		return
	}
	if err != nil {
		writePlain(w, http.StatusBadRequest, "the notification's body could not be read")
		return
	}
	if _, _, err := schemas.ReadNotification(body); err != nil {
		writePlain(w, http.StatusBadRequest, err.Error())
		return
	}
	switch err := s.b.ForwardRemote(r.Context(), taskID, body); {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, bus.ErrNoRemoteListener), errors.Is(err, schemas.ErrUnavailable):
		w.Header().Set("Retry-After", "5")
		writePlain(w, http.StatusServiceUnavailable, "the task's worker cannot take the notification now; retry")
	default:
		writePlain(w, http.StatusBadRequest, "the notification was refused: "+err.Error())
	}
}

// allowAddress applies the default rate limit, by source address, to a
// request that is not an A2A call (it has no principal yet): the remote
// agents' webhook, MCP. Over it: 429 with Retry-After, and false.
func (s *Server) allowAddress(w http.ResponseWriter, r *http.Request, route string) bool {
	l := s.cfg.Limits.Default
	if l.Rate <= 0 {
		return true
	}
	ok, wait := s.rate.allow("\x02"+route+" "+origin(r), l, time.Now())
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		writePlain(w, http.StatusTooManyRequests, "too many requests from this address; retry after the time given")
	}
	return ok
}
