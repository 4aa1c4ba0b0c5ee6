package edge_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// The part rules hold on every binding and dialect that carries a client's
// message: each malformed part is refused as invalid params (−32602, HTTP
// 400 on REST) by a message and ErrorInfo metadata "field" naming the field
// as that dialect spells it, and a well-formed part of every kind passes.

// partsEdge is the edge config of these tests: small bounds, so the
// bodies that pass them stay small.
var partsEdge = edge.Config{MaxParts: 8, MaxPartBytes: 16 << 10, MaxMessageBytes: 40 << 10}

// partDialect is one way a client sends a message: how it wraps parts
// into a request, how it spells a part, and how its refusals read.
type partDialect struct {
	name string
	// v1 says the parts are 1.0 parts; otherwise 0.3 ones (with "type"
	// for "kind" in the older dialect, see legacyParts).
	v1 bool
	// send posts a message of parts to the edge at base and returns the
	// refusal, or nil when the message was accepted.
	send func(t *testing.T, base string, parts []any) *refusal
}

// refusal is an error answer as the test reads it on any binding.
type refusal struct {
	status  int    // HTTP status
	code    int    // JSON-RPC code; 0 on HTTP+JSON, which has none
	reason  string // ErrorInfo reason
	message string
	field   string // ErrorInfo metadata "field"
}

// postParts posts body to path and reads the answer: nil for a success,
// else the refusal in the binding's form (rpc: a JSON-RPC error; legacy:
// {"error":{code,message,data object}}; else google.rpc.Status). A stream
// is a success when none of its events is an error.
func postParts(t *testing.T, base, path string, header map[string]string, body any, form string) *refusal {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(raw), "\n") {
			if data, ok := strings.CutPrefix(line, "data:"); ok && strings.Contains(data, `"error"`) {
				t.Fatalf("POST %s: the stream carries an error: %s", path, data)
			}
		}
		return nil
	}
	var out struct {
		Error *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
			Details json.RawMessage `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST %s: status %d, undecodable body %q", path, resp.StatusCode, raw)
	}
	if out.Error == nil {
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: status %d without an error: %s", path, resp.StatusCode, raw)
		}
		return nil
	}
	r := &refusal{status: resp.StatusCode, message: out.Error.Message}
	type info struct {
		Reason   string            `json:"reason"`
		Metadata map[string]string `json:"metadata"`
	}
	var details []info
	switch form {
	case "rpc":
		r.code = out.Error.Code
		_ = json.Unmarshal(out.Error.Data, &details)
	case "legacy":
		r.code = out.Error.Code
		var d map[string]string
		_ = json.Unmarshal(out.Error.Data, &d)
		details = []info{{Reason: d["reason"], Metadata: map[string]string{"field": d["field"]}}}
	default:
		_ = json.Unmarshal(out.Error.Details, &details)
	}
	if len(details) != 1 {
		t.Fatalf("POST %s: error without one ErrorInfo: %s", path, raw)
	}
	r.reason, r.field = details[0].Reason, details[0].Metadata["field"]
	return r
}

// legacyParts spells 0.3 parts as the older dialect does: "type" for "kind".
func legacyParts(parts []any) []any {
	out := make([]any, len(parts))
	for i, p := range parts {
		m := map[string]any{}
		for k, v := range p.(map[string]any) {
			if k == "kind" {
				k = "type"
			}
			m[k] = v
		}
		out[i] = m
	}
	return out
}

var partDialects = []partDialect{
	{name: "1.0 JSON-RPC", v1: true, send: func(t *testing.T, base string, parts []any) *refusal {
		return postParts(t, base, "/agents/echo", map[string]string{"A2A-Version": "1.0"}, map[string]any{
			"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
			"params": map[string]any{"message": map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": parts}},
		}, "rpc")
	}},
	{name: "1.0 JSON-RPC stream", v1: true, send: func(t *testing.T, base string, parts []any) *refusal {
		return postParts(t, base, "/agents/echo", map[string]string{"A2A-Version": "1.0"}, map[string]any{
			"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
			"params": map[string]any{"message": map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": parts}},
		}, "rpc")
	}},
	{name: "1.0 HTTP+JSON", v1: true, send: func(t *testing.T, base string, parts []any) *refusal {
		return postParts(t, base, "/agents/echo/message:send", map[string]string{"A2A-Version": "1.0"},
			map[string]any{"message": map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": parts}}, "rest")
	}},
	{name: "0.3 message/send", send: func(t *testing.T, base string, parts []any) *refusal {
		return postParts(t, base, "/agents/echo", nil, map[string]any{
			"jsonrpc": "2.0", "id": 1, "method": "message/send",
			"params": map[string]any{"message": map[string]any{"kind": "message", "messageId": schemas.NewID(), "role": "user", "parts": parts}},
		}, "rpc")
	}},
	{name: "0.3 message/stream", send: func(t *testing.T, base string, parts []any) *refusal {
		return postParts(t, base, "/agents/echo", nil, map[string]any{
			"jsonrpc": "2.0", "id": 1, "method": "message/stream",
			"params": map[string]any{"message": map[string]any{"kind": "message", "messageId": schemas.NewID(), "role": "user", "parts": parts}},
		}, "rpc")
	}},
	{name: "tasks/send", send: func(t *testing.T, base string, parts []any) *refusal {
		return postParts(t, base, "/agents/echo", nil, map[string]any{
			"jsonrpc": "2.0", "id": 1, "method": "tasks/send",
			"params": map[string]any{"id": schemas.NewID(), "message": map[string]any{"role": "user", "parts": legacyParts(parts)}},
		}, "rpc")
	}},
	{name: "OpenFang REST", send: func(t *testing.T, base string, parts []any) *refusal {
		return postParts(t, base, "/a2a/tasks/send?agent=echo", nil,
			map[string]any{"message": map[string]any{"role": "user", "parts": legacyParts(parts)}}, "legacy")
	}},
}

// partCase is one part (or message) class, in 1.0 and 0.3 spelling, with
// the field each refusal must name ("" for a part that must pass).
type partCase struct {
	name    string
	v1, v03 []any // the parts; a bad one goes third, after two good ones
	field1  string
	field03 string
}

func text(s string) map[string]any   { return map[string]any{"text": s} }
func text03(s string) map[string]any { return map[string]any{"kind": "text", "text": s} }
func file03(f map[string]any) any    { return map[string]any{"kind": "file", "file": f} }
func withGood(p any) []any           { return []any{text("a"), text("b"), p} }
func withGood03(p any) []any         { return []any{text03("a"), text03("b"), p} }
func nested(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth))
}

func partCases() []partCase {
	big := strings.Repeat("x", 17<<10)
	bigRaw := []byte(big) // encodes as base64 in the JSON
	long := strings.Repeat("n", 256)
	bad := func(name string, v1, v03 any, f1, f03 string) partCase {
		return partCase{name: name, v1: withGood(v1), v03: withGood03(v03), field1: "message.parts[2]." + f1, field03: "message.parts[2]." + f03}
	}
	filename := func(name, fn string) partCase {
		return bad(name,
			map[string]any{"raw": "aGk=", "mediaType": "text/plain", "filename": fn},
			file03(map[string]any{"bytes": "aGk=", "mimeType": "text/plain", "name": fn}), "filename", "file.name")
	}
	url := func(name, u string) partCase {
		return bad(name, map[string]any{"url": u}, file03(map[string]any{"uri": u}), "url", "file.uri")
	}
	many1, many03 := []any{}, []any{}
	for range 9 {
		many1, many03 = append(many1, text("p")), append(many03, text03("p"))
	}
	third := strings.Repeat("y", 15<<10)
	return []partCase{
		bad("raw without media type", map[string]any{"raw": "aGk=", "filename": "a.txt"},
			file03(map[string]any{"bytes": "aGk=", "name": "a.txt"}), "mediaType", "file.mimeType"),
		bad("media type without subtype", map[string]any{"raw": "aGk=", "mediaType": "text"},
			file03(map[string]any{"bytes": "aGk=", "mimeType": "text"}), "mediaType", "file.mimeType"),
		bad("media type with a bad parameter", map[string]any{"url": "https://x.example/a", "mediaType": "text/plain;;"},
			file03(map[string]any{"uri": "https://x.example/a", "mimeType": "text/plain;;"}), "mediaType", "file.mimeType"),
		bad("text part with a bad media type", map[string]any{"text": "t", "mediaType": "plain"},
			map[string]any{"kind": "text", "text": "t", "metadata": map[string]any{"a2abus/mediaType": "plain"}}, "mediaType", "metadata.a2abus/mediaType"),
		filename("file name with a slash", "../etc/passwd"),
		filename("file name with a backslash", `dir\a.txt`),
		filename("file name ..", ".."),
		filename("file name .", "."),
		filename("file name through ..", "a/../b"),
		filename("file name with NUL", "a\x00b"),
		filename("file name with a control character", "a\x07b"),
		filename("file name too long", long),
		bad("raw not base64", map[string]any{"raw": "not base64!", "mediaType": "text/plain"},
			file03(map[string]any{"bytes": "not base64!", "mimeType": "text/plain"}), "raw", "file.bytes"),
		url("file URL", "file:///etc/passwd"),
		url("ftp URL", "ftp://x.example/a"),
		url("relative URL", "just/a/path"),
		url("http URL without host", "http:///a"),
		url("data URL without comma", "data:text/plain"),
		url("URL not parsable", "http://x.example/%zz"),
		url("URL too long", "https://x.example/"+strings.Repeat("a", 8<<10)),
		bad("data too deep", map[string]any{"data": nested(33)},
			map[string]any{"kind": "data", "data": nested(33)}, "data", "data"),
		bad("data too big", map[string]any{"data": map[string]any{"s": big}},
			map[string]any{"kind": "data", "data": map[string]any{"s": big}}, "data", "data"),
		bad("text too big", text(big), text03(big), "text", "text"),
		bad("raw too big", map[string]any{"raw": bigRaw, "mediaType": "application/octet-stream"},
			file03(map[string]any{"bytes": bigRaw, "mimeType": "application/octet-stream"}), "raw", "file.bytes"),
		{name: "message too big", v1: []any{text(third), text(third), text(third)}, v03: []any{text03(third), text03(third), text03(third)},
			field1: "message.parts", field03: "message.parts"},
		{name: "too many parts", v1: many1, v03: many03, field1: "message.parts", field03: "message.parts"},
	}
}

func TestPartRules(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, edge: partsEdge})
	for _, c := range partCases() {
		for _, d := range partDialects {
			t.Run(c.name+"/"+d.name, func(t *testing.T) {
				parts, field := c.v03, c.field03
				if d.v1 {
					parts, field = c.v1, c.field1
				}
				r := d.send(t, h.url, parts)
				if r == nil {
					t.Fatalf("accepted; want a refusal naming %s", field)
				}
				if r.reason != schemas.ErrInvalidParams.Reason {
					t.Fatalf("reason %s (%s), want %s", r.reason, r.message, schemas.ErrInvalidParams.Reason)
				}
				switch {
				case r.code != 0 && r.code != schemas.ErrInvalidParams.Code:
					t.Fatalf("code %d, want %d", r.code, schemas.ErrInvalidParams.Code)
				case r.code == 0 && r.status != http.StatusBadRequest:
					t.Fatalf("HTTP %d, want 400", r.status)
				}
				if r.field != field || !strings.HasPrefix(r.message, field+" ") {
					t.Fatalf("field %q, message %q; want both to name %s", r.field, r.message, field)
				}
			})
		}
	}
}

// Dots inside a file name are the name's own: only "." and ".." as whole
// names (and separators) are refused.
func TestFileNamesWithDotsAccepted(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, edge: partsEdge})
	for _, name := range []string{"report..v2.pdf", "...", ".profile"} {
		v1 := []any{map[string]any{"raw": "aGk=", "mediaType": "application/pdf", "filename": name}}
		v03 := []any{file03(map[string]any{"bytes": "aGk=", "mimeType": "application/pdf", "name": name})}
		for _, d := range partDialects {
			parts := v03
			if d.v1 {
				parts = v1
			}
			t.Run(name+"/"+d.name, func(t *testing.T) {
				if r := d.send(t, h.url, parts); r != nil {
					t.Fatalf("refused: %d %s (field %s)", r.code, r.message, r.field)
				}
			})
		}
	}
}

func TestWellFormedPartsAccepted(t *testing.T) {
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, edge: partsEdge})
	v1 := []any{
		text("hello"),
		map[string]any{"text": "# notes", "mediaType": "text/markdown", "filename": "notes.md"},
		map[string]any{"raw": "aGk=", "mediaType": "text/plain; charset=utf-8", "filename": "hi.txt"},
		map[string]any{"url": "https://x.example/a.pdf?v=1", "mediaType": "application/pdf", "filename": "a.pdf"},
		map[string]any{"url": "http://x.example/b"},
		map[string]any{"url": "data:text/plain;base64,aGk="},
		map[string]any{"data": nested(32)},
		map[string]any{"data": []any{1, "two", nil}},
	}
	v03 := []any{
		text03("hello"),
		file03(map[string]any{"bytes": "aGk=", "mimeType": "text/plain", "name": "hi.txt"}),
		file03(map[string]any{"bytes": "_-8=", "mimeType": "application/octet-stream"}), // URL-safe, as 0.3 peers send it
		file03(map[string]any{"uri": "https://x.example/a.pdf", "mimeType": "application/pdf", "name": "a.pdf"}),
		file03(map[string]any{"uri": "data:,hi"}),
		map[string]any{"kind": "data", "data": map[string]any{"k": nested(31)}},
	}
	for _, d := range partDialects {
		parts := v03
		if d.v1 {
			parts = v1
		}
		t.Run(d.name, func(t *testing.T) {
			if r := d.send(t, h.url, parts); r != nil {
				t.Fatalf("refused: %d %s (field %s)", r.code, r.message, r.field)
			}
		})
	}
}
