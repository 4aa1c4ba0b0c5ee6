package edge_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// HTTP+JSON answers in the media type the client speaks: the one its
// Accept prefers of application/a2a+json and application/json, else its
// body's, else application/a2a+json (spec §11.1); errors stay
// application/json; a body of another media type is 415 Unsupported
// Media Type, with the binding's error body.
func TestRESTAnswersInTheRequestsMediaType(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	task := mustResult[schemas.SendMessageResponse](t, h.call("echo", "SendMessage", send(userMessage("hi"), false))).Task
	const (
		a2a   = schemas.ContentTypeA2A
		plain = "application/json"
	)
	sendBody := `{"message":{"messageId":"` + schemas.NewID() + `","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
	for _, c := range []struct {
		name, method, path, contentType, accept string
		want                                    string // the answer's media type
	}{
		{"send as JSON", "POST", "/message:send", plain, "", plain},
		{"send as JSON with parameters", "POST", "/message:send", "application/json; charset=utf-8", "", plain},
		{"send as A2A JSON", "POST", "/message:send", a2a, "", a2a},
		{"send as JSON, any answer", "POST", "/message:send", plain, "*/*", plain},
		{"send as A2A JSON, JSON asked", "POST", "/message:send", a2a, plain, plain},
		{"get", "GET", "/tasks/" + task.ID, "", "", a2a},
		{"get, JSON asked", "GET", "/tasks/" + task.ID, "", plain, plain},
		{"get, A2A JSON asked", "GET", "/tasks/" + task.ID, "", a2a, a2a},
		{"get, any", "GET", "/tasks/" + task.ID, "", "*/*", a2a},
		{"get, application/*", "GET", "/tasks/" + task.ID, "", "application/*", a2a},
		{"get, JSON preferred", "GET", "/tasks/" + task.ID, "", a2a + ";q=0.5, " + plain, plain},
		{"get, A2A JSON preferred", "GET", "/tasks/" + task.ID, "", plain + ";q=0.9, " + a2a, a2a},
		{"get, JSON over any", "GET", "/tasks/" + task.ID, "", "*/*;q=0.1, " + plain, plain},
		{"list, JSON asked", "GET", "/tasks", "", plain, plain},
		// google.rpc.Status is plain JSON: official clients read error
		// bodies only as application/json.
		{"an error", "POST", "/tasks/" + task.ID + ":cancel", a2a, a2a, plain},
	} {
		t.Run(c.name, func(t *testing.T) {
			header := map[string]string{}
			if c.contentType != "" {
				header["Content-Type"] = c.contentType
			}
			if c.accept != "" {
				header["Accept"] = c.accept
			}
			body := ""
			if c.path == "/message:send" {
				body = sendBody
			}
			resp, raw := h.do(c.method, "/agents/echo"+c.path, body, header)
			if got := resp.Header.Get("Content-Type"); got != c.want {
				t.Fatalf("answered %d as %q, want %q: %s", resp.StatusCode, got, c.want, raw)
			}
		})
	}

	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/xml"} {
		t.Run("body as "+ct, func(t *testing.T) {
			resp, raw := h.do("POST", "/agents/echo/message:send", sendBody, map[string]string{"Content-Type": ct})
			if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(raw), `"reason":"CONTENT_TYPE_NOT_SUPPORTED"`) ||
				!strings.Contains(string(raw), `"status":"INVALID_ARGUMENT"`) {
				t.Fatalf("%d %s, want 415 with the binding's error body", resp.StatusCode, raw)
			}
		})
	}
}
