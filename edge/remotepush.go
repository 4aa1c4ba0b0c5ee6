package edge

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"net/http"

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
// A2A request, so it does not pass serve: its row in routeTable
// (PolicyWebhookToken, limited by address as anonymous callers are, its
// body bounded as the edge's are) has handle refuse a request without a
// token, or over the rate, before this handler runs.

func (s *Server) handleRemotePush(w http.ResponseWriter, r *http.Request) {
	agent, taskID, token := r.PathValue("agent"), r.PathValue("task"), webhookToken(r)
	if !schemas.ValidTaskID(taskID) {
		refuseWebhook(w)
		return
	}
	rec, _, err := s.inbox.GetTask(r.Context(), taskID)
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
		refuseWebhook(w)
		return
	}
	if rec.Task.Status.State.Terminal() {
		// The sender may stop: nothing more will be taken for this task.
		writePlain(w, http.StatusGone, "the task is finished")
		return
	}
	body, err := io.ReadAll(r.Body)
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
	switch err := s.inbox.ForwardRemote(r.Context(), taskID, body); {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, bus.ErrNoRemoteListener), errors.Is(err, schemas.ErrUnavailable):
		w.Header().Set("Retry-After", "5")
		writePlain(w, http.StatusServiceUnavailable, "the task's worker cannot take the notification now; retry")
	default:
		writePlain(w, http.StatusBadRequest, "the notification was refused: "+err.Error())
	}
}
