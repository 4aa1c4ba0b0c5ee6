package edge_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// restReply is a decoded HTTP+JSON response.
type restReply struct {
	status int
	header http.Header
	body   []byte
}

func (h *harness) rest(method, path, contentType, body string) *restReply {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &restReply{status: resp.StatusCode, header: resp.Header, body: b}
}

func restOK[T any](t testing.TB, r *restReply) T {
	t.Helper()
	var v T
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	return v
}

// restErr checks a google.rpc.Status error with the row's HTTP status and
// ErrorInfo reason.
func restErr(t testing.TB, r *restReply, kind *schemas.Error) {
	t.Helper()
	restErrStatus(t, r, kind, kind.HTTPStatus)
}

// restErrStatus is restErr for an error of row kind answered with HTTP
// status status (a body's media type: 415).
func restErrStatus(t testing.TB, r *restReply, kind *schemas.Error, status int) {
	t.Helper()
	var st struct {
		Error struct {
			Code    int    `json:"code"`
			Status  string `json:"status"`
			Message string `json:"message"`
			Details []struct {
				Type   string `json:"@type"`
				Reason string `json:"reason"`
				Domain string `json:"domain"`
			} `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatalf("status %d, body not google.rpc.Status: %s", r.status, r.body)
	}
	if r.status != status || st.Error.Code != status {
		t.Fatalf("HTTP %d (code %d), want %d: %s", r.status, st.Error.Code, status, r.body)
	}
	if len(st.Error.Details) != 1 || st.Error.Details[0].Reason != kind.Reason || st.Error.Details[0].Type != "type.googleapis.com/google.rpc.ErrorInfo" || st.Error.Details[0].Domain != "a2a-protocol.org" {
		t.Fatalf("details: %s", r.body)
	}
	if st.Error.Message == "" || st.Error.Status == "" {
		t.Fatalf("status without message or status name: %s", r.body)
	}
}

func TestRESTRoutes(t *testing.T) {
	bl := newBlocker()
	h := newHarness(t, harnessOptions{
		agents: []workers.Definition{workers.EchoDefinition("echo"), {Name: "slow", Agent: bl}},
	})
	sendBody := `{"message":{"messageId":"r1","role":"ROLE_USER","parts":[{"text":"rest hello"}]}}`
	for _, base := range []string{"", "/agents/echo"} {
		for _, ct := range []string{"application/a2a+json", "application/json", "application/json; charset=utf-8"} {
			r := h.rest("POST", base+"/message:send", ct, sendBody)
			res := restOK[schemas.SendMessageResponse](t, r)
			if res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted {
				t.Fatalf("%s %s: %s", base, ct, r.body)
			}
			// Answered in the request's media type.
			want := "application/a2a+json"
			if strings.HasPrefix(ct, "application/json") {
				want = "application/json"
			}
			if got := r.header.Get("Content-Type"); got != want {
				t.Fatalf("response Content-Type %q to a request of %q, want %q", got, ct, want)
			}
		}
	}
	restErrStatus(t, h.rest("POST", "/agents/echo/message:send", "text/plain", sendBody), schemas.ErrContentTypeNotSupported, http.StatusUnsupportedMediaType)
	restErr(t, h.rest("POST", "/agents/echo/message:send", "application/json", `{"message":`), schemas.ErrParse)
	restErr(t, h.rest("POST", "/agents/echo/message:send", "application/json", `{}`), schemas.ErrInvalidParams)

	task := restOK[schemas.SendMessageResponse](t, h.rest("POST", "/agents/echo/message:send", "application/json", sendBody)).Task
	got := restOK[schemas.Task](t, h.rest("GET", "/agents/echo/tasks/"+task.ID+"?historyLength=1", "", ""))
	if got.ID != task.ID || len(got.History) != 1 {
		t.Fatalf("get: %+v", got)
	}
	restErr(t, h.rest("GET", "/agents/echo/tasks/"+schemas.NewID(), "", ""), schemas.ErrTaskNotFound)
	restErr(t, h.rest("GET", "/agents/echo/tasks/"+task.ID+"?historyLength=-1", "", ""), schemas.ErrInvalidParams)
	restErr(t, h.rest("GET", "/agents/echo/tasks/"+task.ID+"?historyLength=x", "", ""), schemas.ErrInvalidParams)

	list := restOK[schemas.ListTasksResponse](t, h.rest("GET", "/agents/echo/tasks?pageSize=2&includeArtifacts=true&status=TASK_STATE_COMPLETED&statusTimestampAfter=2000-01-01T00:00:00Z", "", ""))
	if len(list.Tasks) != 2 || list.NextPageToken == "" || list.Tasks[0].Artifacts == nil {
		t.Fatalf("list: %+v", list)
	}
	restErr(t, h.rest("GET", "/agents/echo/tasks?pageSize=500", "", ""), schemas.ErrInvalidParams)
	restErr(t, h.rest("GET", "/agents/echo/tasks?includeArtifacts=maybe", "", ""), schemas.ErrInvalidParams)

	// Cancel: terminal → 400 TASK_NOT_CANCELABLE; unknown → 404; running → CANCELED.
	restErr(t, h.rest("POST", "/agents/echo/tasks/"+task.ID+":cancel", "application/json", `{}`), schemas.ErrTaskNotCancelable)
	restErr(t, h.rest("POST", "/agents/echo/tasks/"+schemas.NewID()+":cancel", "application/json", `{}`), schemas.ErrTaskNotFound)
	running := restOK[schemas.SendMessageResponse](t, h.rest("POST", "/agents/slow/message:send", "application/json",
		`{"message":{"messageId":"r2","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"returnImmediately":true}}`)).Task
	recv(t, bl.started, "agent start")
	canceled := restOK[schemas.Task](t, h.rest("POST", "/agents/slow/tasks/"+running.ID+":cancel", "", ""))
	if canceled.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("cancel: %s", canceled.Status.State)
	}
	restErr(t, h.rest("POST", "/agents/slow/tasks/"+running.ID+":teleport", "application/json", `{}`), schemas.ErrMethodNotFound)

	restErr(t, h.rest("GET", "/agents/echo/extendedAgentCard", "", ""), schemas.ErrExtendedCardNotConfigured)
	for _, m := range []string{"GET", "POST"} {
		restErr(t, h.rest(m, "/agents/echo/tasks/"+task.ID+"/pushNotificationConfigs", "application/json", `{"url":"https://example.com/hook"}`), schemas.ErrPushNotSupported)
	}
	restErr(t, h.rest("DELETE", "/agents/echo/tasks/"+task.ID+"/pushNotificationConfigs/c1", "", ""), schemas.ErrPushNotSupported)

	// Version header.
	req, _ := http.NewRequest("GET", h.url+"/agents/echo/tasks/"+task.ID, nil)
	req.Header.Set("A2A-Version", "7.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	restErr(t, &restReply{status: resp.StatusCode, body: b}, schemas.ErrVersionNotSupported)
}

func TestRESTStreaming(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	req, _ := http.NewRequest("POST", h.url+"/agents/echo/message:stream", strings.NewReader(`{"message":{"messageId":"s","role":"ROLE_USER","parts":[{"text":"a b c d e"}]}}`))
	req.Header.Set("Content-Type", "application/a2a+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := &sseStream{t: t, resp: resp, r: bufio.NewReader(resp.Body)}
	var rs []schemas.StreamResponse
	for {
		ev, ok := s.next()
		if !ok {
			break
		}
		var r schemas.StreamResponse // bare StreamResponse: no JSON-RPC envelope
		if err := json.Unmarshal([]byte(ev.data), &r); err != nil || kind(r) == "empty" {
			t.Fatalf("event %q", ev.data)
		}
		rs = append(rs, r)
	}
	if got := kinds(rs); got != "task:TASK_STATE_SUBMITTED status:TASK_STATE_WORKING artifact(append=false,last=false) artifact(append=true,last=true) status:TASK_STATE_COMPLETED" {
		t.Fatalf("events: %s", got)
	}
	// Subscribing to the finished task is refused with a plain error, by
	// GET and by POST.
	for _, m := range []string{"GET", "POST"} {
		restErr(t, h.rest(m, "/agents/echo/tasks/"+rs[0].Task.ID+":subscribe", "", ""), schemas.ErrUnsupportedOperation)
	}
}

// The HTTP+JSON tenant path prefix (/{tenant}/…, /agents/{agent}/{tenant}/…)
// selects the tenant as the tenant field does; a path the routes serve as
// they are (the older dialect's /a2a/tasks/{id}, a task named "tasks")
// keeps its meaning.
func TestTenantPathPrefix(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	sendBody := `{"message":{"messageId":"tp1","role":"ROLE_USER","parts":[{"text":"tenant path"}]}}`
	for i, base := range []string{"/acme", "/agents/echo/acme"} {
		task := restOK[schemas.SendMessageResponse](t, h.rest("POST", base+"/message:send", "application/json", sendBody)).Task
		if task == nil {
			t.Fatalf("%s: no task", base)
		}
		for _, get := range []string{"/acme/tasks/", "/agents/echo/acme/tasks/", "/agents/echo/tasks/" + "?tenant=acme&x=", "/tasks/?tenant=acme&x="} {
			u := get + task.ID
			if strings.Contains(get, "?") {
				u = strings.Replace(get, "?", task.ID+"?", 1)
			}
			if got := restOK[schemas.Task](t, h.rest("GET", u, "", "")); got.ID != task.ID {
				t.Fatalf("GET %s: %+v", u, got)
			}
		}
		restErr(t, h.rest("GET", "/agents/echo/tasks/"+task.ID, "", ""), schemas.ErrTaskNotFound)
		restErr(t, h.rest("GET", "/other/tasks/"+task.ID, "", ""), schemas.ErrTaskNotFound)
		list := restOK[schemas.ListTasksResponse](t, h.rest("GET", base+"/tasks", "", ""))
		if len(list.Tasks) != i+1 {
			t.Fatalf("%s/tasks lists %d tasks", base, len(list.Tasks))
		}
	}
	restErr(t, h.rest("GET", "/acme/tasks/x?tenant=other", "", ""), schemas.ErrInvalidParams)
	if r := h.rest("DELETE", "/acme/tasks/x", "", ""); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE under a tenant: %d %s", r.status, r.body)
	}
	if r := h.rest("GET", "/acme/nothing", "", ""); r.status != http.StatusNotFound {
		t.Fatalf("an unknown path under a tenant: %d %s", r.status, r.body)
	}
	if r := h.rest("GET", "/agents/echo", "", ""); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("GET on the JSON-RPC endpoint: %d", r.status)
	}
	// A task named "tasks" in the default tenant is the plain route's.
	task := restOK[schemas.SendMessageResponse](t, h.rest("POST", "/message:send", "application/json", sendBody)).Task
	restErr(t, h.rest("GET", "/tasks/tasks", "", ""), schemas.ErrTaskNotFound)
	if got := restOK[schemas.Task](t, h.rest("GET", "/tasks/"+task.ID, "", "")); got.ID != task.ID {
		t.Fatalf("default tenant: %+v", got)
	}
}
