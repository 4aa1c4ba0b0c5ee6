package edge_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// A context the server made for a caller's first task is that caller's
// from the start: another caller who learns its id and names it first is
// refused (−32602, the message saying whose it is not), and its owner
// goes on in it.
func TestServerMadeContextsStayWithTheirCaller(t *testing.T) {
	h := authHarness(t)
	type answer struct {
		Result *schemas.SendMessageResponse `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	send := func(key, contextID string) answer {
		t.Helper()
		msg := map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hi"}}}
		if contextID != "" {
			msg["contextId"] = contextID
		}
		_, _, b := as(t, key, "POST", h.url+"/agents/echo", "application/json", rpcBody(1, "SendMessage", map[string]any{"message": msg}))
		var a answer
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("undecodable answer: %s", b)
		}
		return a
	}
	first := send(aliceKey, "")
	if first.Error != nil || first.Result == nil || first.Result.Task == nil || first.Result.Task.ContextID == "" {
		t.Fatalf("alice's first task: %+v", first)
	}
	made := first.Result.Task.ContextID
	bob := send(bobKey, made)
	if bob.Error == nil || bob.Error.Code != schemas.ErrInvalidParams.Code || !strings.Contains(bob.Error.Message, "belongs to another caller") {
		t.Fatalf("bob naming alice's server-made context: %+v", bob)
	}
	again := send(aliceKey, made)
	if again.Error != nil || again.Result == nil || again.Result.Task == nil || again.Result.Task.ContextID != made {
		t.Fatalf("alice in her own context after bob: %+v (error %+v)", again.Result, again.Error)
	}
}
