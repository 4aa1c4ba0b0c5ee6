package edge_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// storedDeadline reads the deadline the task record keeps.
func (h *harness) storedDeadline(id string) time.Time {
	h.t.Helper()
	rec, _, err := h.b.GetTask(context.Background(), id)
	if err != nil {
		h.t.Fatalf("task %s: %v", id, err)
	}
	if rec.Deadline == nil {
		return time.Time{}
	}
	return rec.Deadline.Time
}

// within fails unless got is want give or take slack (a duration counts
// from when the edge received the send).
func within(t *testing.T, got, want time.Time, slack time.Duration) {
	t.Helper()
	if got.IsZero() || got.Before(want.Add(-slack)) || got.After(want.Add(slack)) {
		t.Fatalf("deadline %v, want %v ± %v", got, want, slack)
	}
}

func TestDeadlineIsReadFromEveryForm(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)

	// JSON-RPC 1.0, an RFC 3339 time in the message's metadata.
	m := userMessage("hi")
	m.Metadata = map[string]any{schemas.MetaDeadline: at.Format(time.RFC3339)}
	task := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: &m})).Task
	within(t, h.storedDeadline(task.ID), at, 0)
	if task.Metadata[schemas.MetaDeadline] != nil {
		t.Fatalf("the message's metadata is the client's; the task's own is not changed: %v", task.Metadata)
	}

	// A duration in the send's own metadata, counted from receipt; the
	// earlier of it and the message's is kept.
	m = userMessage("hi")
	m.Metadata = map[string]any{schemas.MetaDeadline: at.Format(time.RFC3339)}
	sent := time.Now()
	task = mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: &m, Metadata: map[string]any{schemas.MetaDeadline: "10m"}})).Task
	within(t, h.storedDeadline(task.ID), sent.Add(10*time.Minute), 5*time.Second)

	// The older dialect's top-level deadline, epoch seconds (Aleph).
	p := legacyParams("aleph-1", "", "hi")
	p["deadline"] = at.Unix()
	if r := h.call03("echo", "tasks/send", p); r.Error != nil {
		t.Fatalf("tasks/send: %+v", r.Error)
	}
	within(t, h.storedDeadline(schemas.LegacyTaskID("aleph-1")), at, 0)

	// None given: none kept.
	task = mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", schemas.SendMessageRequest{Message: ptr(userMessage("hi"))})).Task
	if got := h.storedDeadline(task.ID); !got.IsZero() {
		t.Fatalf("deadline %v without one given", got)
	}
}

func TestDeadlineRefusals(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	withMeta := func(v any) schemas.SendMessageRequest {
		m := userMessage("hi")
		m.Metadata = map[string]any{schemas.MetaDeadline: v}
		return schemas.SendMessageRequest{Message: &m}
	}
	for name, tc := range map[string]struct {
		req  schemas.SendMessageRequest
		says string
	}{
		"not a deadline": {withMeta("tomorrow"), `"tomorrow" is not a deadline: an RFC 3339 time`},
		"not a string":   {withMeta(30), "must be a string"},
		"passed":         {withMeta(time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)), "has already passed"},
		"zero duration":  {withMeta("0s"), "is not a positive duration"},
	} {
		t.Run(name, func(t *testing.T) {
			r := mustError(t, h.call("echo", "SendMessage", tc.req), schemas.ErrInvalidParams)
			if !strings.Contains(r.Error.Message, tc.says) || !strings.Contains(r.Error.Message, schemas.MetaDeadline) {
				t.Fatalf("message %q does not say %q about %s", r.Error.Message, tc.says, schemas.MetaDeadline)
			}
		})
	}
	// The older dialect: a passed deadline, and one that is not a number.
	p := legacyParams("aleph-late", "", "hi")
	p["deadline"] = time.Now().Add(-time.Minute).Unix()
	r := h.call03("echo", "tasks/send", p)
	error03(t, r, schemas.ErrInvalidParams)
	if !strings.HasPrefix(r.Error.Message, "deadline ") || !strings.Contains(r.Error.Message, "has already passed") {
		t.Fatalf("message %q", r.Error.Message)
	}
	p["deadline"] = "soon"
	error03(t, h.call03("echo", "tasks/send", p), schemas.ErrInvalidParams)
	// HTTP+JSON: 400 with the same message.
	rr := h.rest("POST", "/agents/echo/message:send", "application/json",
		`{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"x"}]},"metadata":{"a2abus.deadline":"yesterday"}}`)
	restErr(t, rr, schemas.ErrInvalidParams)
	if rr.status != http.StatusBadRequest || !strings.Contains(string(rr.body), `\"yesterday\" is not a deadline`) {
		t.Fatalf("status %d body %s", rr.status, rr.body)
	}
}
