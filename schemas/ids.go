package schemas

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// The ids a client chooses — a message's messageId, contextId, taskId and
// referenceTaskIds, and the older dialect's task id and sessionId — are
// stored with the task, indexed, logged and echoed in every answer, so
// they are bounded: at most MaxIDBytes, printable. Every binding and
// dialect checks them in the one place its request becomes a 1.0 request
// (SendMessageRequest.CheckInput; LegacySendParams.ToV1 for what the older
// dialect has no 1.0 field for).

// MaxIDBytes bounds an id a client chooses, in bytes of UTF-8. Server-made
// ids (UUIDs, 36 bytes) are far below it; 256 leaves room for the
// structured ids clients build (a tenant, a user, a thread, a counter).
const MaxIDBytes = 256

// CheckID returns an ErrInvalidParams occurrence naming the field at path
// (see InvalidField) when id is longer than MaxIDBytes or not printable:
// not UTF-8, or holding a control character (C0, C1, DEL), an invisible
// format character (Unicode Cf, such as a bidirectional override) or a
// line or paragraph separator. An empty id passes: whether a field is
// required is the caller's rule.
func CheckID(path, id string) error {
	if len(id) > MaxIDBytes {
		return InvalidField(path, "is %d bytes long, more than the limit of %d", len(id), MaxIDBytes)
	}
	if !utf8.ValidString(id) {
		return InvalidField(path, "is not valid UTF-8")
	}
	for i, r := range id {
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			return InvalidField(path, "holds the unprintable character %U at byte %d; an id must be printable", r, i)
		}
	}
	return nil
}

// checkIDs checks the ids a client's message carries (see CheckID), the
// message being at path.
func (m *Message) checkIDs(path string) error {
	for _, f := range [...]struct{ name, id string }{{"messageId", m.MessageID}, {"contextId", m.ContextID}, {"taskId", m.TaskID}} {
		if err := CheckID(path+"."+f.name, f.id); err != nil {
			return err
		}
	}
	for i, id := range m.ReferenceTaskIDs {
		if err := CheckID(fmt.Sprintf("%s.referenceTaskIds[%d]", path, i), id); err != nil {
			return err
		}
	}
	return nil
}
