package edge_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// idDialect is one way a client sends a message with ids of its choosing:
// the id fields it sets, as the dialect spells them, and a send with some
// of them set (the others left out or made by the test).
type idDialect struct {
	name string
	// fields are the ids the client chooses, as refusals must name them;
	// accepted are those a new task may carry at any value (taskId names
	// an existing task).
	fields, accepted []string
	send             func(t *testing.T, base string, ids map[string]string) *refusal
}

// messageWithIDs is a 1.0 message, or a 0.3 one (kind set), carrying
// ids; its messageId is a new one unless ids names it.
func messageWithIDs(ids map[string]string, kind string) map[string]any {
	role := "ROLE_USER"
	if kind != "" {
		role = "user"
	}
	m := map[string]any{"messageId": schemas.NewID(), "role": role, "parts": []any{map[string]any{"text": "hi"}}}
	if kind != "" {
		m["kind"] = kind
		m["parts"] = []any{text03("hi")}
	}
	for _, f := range []string{"messageId", "contextId", "taskId"} {
		if v, ok := ids["message."+f]; ok {
			m[f] = v
		}
	}
	return m
}

// legacyWithIDs is tasks/send params carrying ids; the task id is a new
// one unless ids names it.
func legacyWithIDs(ids map[string]string) map[string]any {
	p := map[string]any{"id": schemas.NewID(), "message": map[string]any{"role": "user", "parts": []any{map[string]any{"type": "text", "text": "hi"}}}}
	for _, f := range []string{"id", "sessionId"} {
		if v, ok := ids[f]; ok {
			p[f] = v
		}
	}
	return p
}

var idDialects = []idDialect{
	{name: "1.0 JSON-RPC", fields: []string{"message.messageId", "message.contextId", "message.taskId"}, accepted: []string{"message.messageId", "message.contextId"},
		send: func(t *testing.T, base string, ids map[string]string) *refusal {
			return postParts(t, base, "/agents/echo", map[string]string{"A2A-Version": "1.0"}, map[string]any{
				"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{"message": messageWithIDs(ids, "")}}, "rpc")
		}},
	{name: "1.0 HTTP+JSON", fields: []string{"message.messageId", "message.contextId", "message.taskId"}, accepted: []string{"message.messageId", "message.contextId"},
		send: func(t *testing.T, base string, ids map[string]string) *refusal {
			return postParts(t, base, "/agents/echo/message:send", map[string]string{"A2A-Version": "1.0"},
				map[string]any{"message": messageWithIDs(ids, "")}, "rest")
		}},
	{name: "0.3 message/send", fields: []string{"message.messageId", "message.contextId", "message.taskId"}, accepted: []string{"message.messageId", "message.contextId"},
		send: func(t *testing.T, base string, ids map[string]string) *refusal {
			return postParts(t, base, "/agents/echo", nil, map[string]any{
				"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": messageWithIDs(ids, "message")}}, "rpc")
		}},
	{name: "tasks/send", fields: []string{"id", "sessionId"}, accepted: []string{"id", "sessionId"},
		send: func(t *testing.T, base string, ids map[string]string) *refusal {
			return postParts(t, base, "/agents/echo", nil, map[string]any{
				"jsonrpc": "2.0", "id": 1, "method": "tasks/send", "params": legacyWithIDs(ids)}, "rpc")
		}},
	{name: "OpenFang REST", fields: []string{"id", "sessionId"}, accepted: []string{"id", "sessionId"},
		send: func(t *testing.T, base string, ids map[string]string) *refusal {
			return postParts(t, base, "/a2a/tasks/send?agent=echo", nil, legacyWithIDs(ids), "legacy")
		}},
}

// The ids a client chooses are bounded on every binding and dialect: one
// longer than 256 bytes, or holding a control character, is refused as
// invalid params (−32602, HTTP 400 on HTTP+JSON) naming the field (and
// the bound); ids of exactly 256 bytes are taken.
func TestClientIDsBounded(t *testing.T) {
	const maxID = 256 // the documented bound
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}})
	for _, d := range idDialects {
		for _, f := range d.fields {
			for _, bad := range []struct{ what, id, says string }{
				{"257 bytes", strings.Repeat("x", 257), "more than the limit of 256"},
				{"a control character", "conversation\x1b[2J1", "U+001B"},
			} {
				t.Run(d.name+"/"+f+" with "+bad.what, func(t *testing.T) {
					r := d.send(t, h.url, map[string]string{f: bad.id})
					if r == nil {
						t.Fatalf("accepted; want a refusal naming %s", f)
					}
					switch {
					case r.reason != schemas.ErrInvalidParams.Reason:
						t.Fatalf("reason %s (%s), want %s", r.reason, r.message, schemas.ErrInvalidParams.Reason)
					case r.code != 0 && r.code != schemas.ErrInvalidParams.Code:
						t.Fatalf("code %d (%s), want %d", r.code, r.message, schemas.ErrInvalidParams.Code)
					case r.code == 0 && r.status != http.StatusBadRequest:
						t.Fatalf("HTTP %d (%s), want 400", r.status, r.message)
					}
					if r.field != f || !strings.HasPrefix(r.message, f+" ") || !strings.Contains(r.message, bad.says) {
						t.Fatalf("field %q, message %q; want both to name %s, the message saying %q", r.field, r.message, f, bad.says)
					}
				})
			}
		}
		t.Run(d.name+"/256-byte ids", func(t *testing.T) {
			ids := map[string]string{}
			for _, f := range d.accepted {
				id := schemas.NewID() + "/" + f + "/"
				ids[f] = id + strings.Repeat("é", (maxID-len(id))/2) + strings.Repeat("x", (maxID-len(id))%2)
				if len(ids[f]) != maxID {
					t.Fatalf("test id of %d bytes", len(ids[f]))
				}
			}
			if r := d.send(t, h.url, ids); r != nil {
				t.Fatalf("refused: %d %s (field %s)", r.code, r.message, r.field)
			}
		})
	}
}
