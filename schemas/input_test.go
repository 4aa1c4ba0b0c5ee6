package schemas

import (
	"errors"
	"strings"
	"testing"
)

// A file name is one name: "." and ".." (directories) and anything with a
// separator are refused, dots inside a name are not.
func TestCheckFilename(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{".", false},
		{"..", false},
		{"a/../b", false},
		{"../etc/passwd", false},
		{`..\x`, false},
		{"report..v2.pdf", true},
		{"...", true},
		{".profile", true},
		{"notes.", true},
		{"a..", true},
	} {
		why := checkFilename(c.name)
		if (why == "") != c.ok {
			t.Errorf("checkFilename(%q) = %q, want ok=%v", c.name, why, c.ok)
		}
		req := SendMessageRequest{Message: &Message{MessageID: "m", Role: RoleUser,
			Parts: []Part{{Raw: []byte("hi"), MediaType: "text/plain", Filename: c.name}}}}
		err := req.CheckInput(testLimits, FieldNamesV1)
		if (err == nil) != c.ok {
			t.Errorf("CheckInput with file name %q: %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalidParams) || AsError(err).Metadata["field"] != "message.parts[0].filename") {
			t.Errorf("CheckInput with file name %q: %v, want invalid params naming message.parts[0].filename", c.name, err)
		}
	}
}

var testLimits = PartLimits{MaxParts: 8, MaxPartBytes: 1 << 10, MaxMessageBytes: 4 << 10, MaxURLBytes: 1 << 10, MaxDataDepth: 8, URLSchemes: []string{"https"}}

// A client's ids are at most MaxIDBytes and printable; a refusal is
// invalid params naming the field and, for length, the bound.
func TestCheckInputIDs(t *testing.T) {
	longest := strings.Repeat("i", MaxIDBytes)
	tooLong := longest + "i"
	msg := func(set func(*Message)) *SendMessageRequest {
		m := &Message{MessageID: "m", Role: RoleUser, Parts: []Part{TextPart("hi")}}
		set(m)
		return &SendMessageRequest{Message: m}
	}
	for _, c := range []struct {
		name  string
		set   func(*Message)
		field string // "" when accepted
		says  string
	}{
		{"longest ids", func(m *Message) {
			m.MessageID, m.ContextID, m.TaskID, m.ReferenceTaskIDs = longest, longest, longest, []string{longest}
		}, "", ""},
		{"printable non-ASCII", func(m *Message) { m.ContextID = "Gespräch 1 · 会話" }, "", ""},
		{"long messageId", func(m *Message) { m.MessageID = tooLong }, "message.messageId", "more than the limit of 256"},
		{"long contextId", func(m *Message) { m.ContextID = tooLong }, "message.contextId", "more than the limit of 256"},
		{"long taskId", func(m *Message) { m.TaskID = tooLong }, "message.taskId", "more than the limit of 256"},
		{"long referenceTaskIds", func(m *Message) { m.ReferenceTaskIDs = []string{"a", tooLong} }, "message.referenceTaskIds[1]", "more than the limit of 256"},
		{"newline in messageId", func(m *Message) { m.MessageID = "m\n1" }, "message.messageId", "U+000A"},
		{"NUL in contextId", func(m *Message) { m.ContextID = "c\x00" }, "message.contextId", "U+0000"},
		{"C1 control in taskId", func(m *Message) { m.TaskID = "t\u0085" }, "message.taskId", "U+0085"},
		{"bidi override in contextId", func(m *Message) { m.ContextID = "abc\u202edef" }, "message.contextId", "U+202E"},
		{"line separator in contextId", func(m *Message) { m.ContextID = "a\u2028b" }, "message.contextId", "U+2028"},
		{"invalid UTF-8 in messageId", func(m *Message) { m.MessageID = "m\xff" }, "message.messageId", "UTF-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := msg(c.set).CheckInput(testLimits, FieldNamesV1)
			if c.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e := AsError(err)
			if !errors.Is(err, ErrInvalidParams) || e.Metadata["field"] != c.field ||
				!strings.HasPrefix(e.Message, c.field+" ") || !strings.Contains(e.Message, c.says) {
				t.Fatalf("%v; want invalid params naming %s and saying %q", err, c.field, c.says)
			}
		})
	}
}

// The older dialect's own ids, the task id and sessionId, meet the same
// bounds when its params become a 1.0 request.
func TestLegacySendParamsIDs(t *testing.T) {
	m := &LegacyMessage{Role: "user", Parts: []LegacyPart{{Type: "text", Text: ptr("hi")}}}
	longest := strings.Repeat("i", MaxIDBytes)
	for _, c := range []struct {
		name, id, session, field string
	}{
		{"longest", longest, longest, ""},
		{"long id", longest + "x", "", "id"},
		{"control in id", "task\t1", "", "id"},
		{"long sessionId", "t", longest + "x", "sessionId"},
		{"control in sessionId", "t", "s\x1b[31m", "sessionId"},
	} {
		p := LegacySendParams{ID: c.id, SessionID: c.session, Message: m}
		_, err := p.ToV1()
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidParams) || AsError(err).Metadata["field"] != c.field {
			t.Errorf("%s: %v; want invalid params naming %s", c.name, err, c.field)
		}
	}
}
