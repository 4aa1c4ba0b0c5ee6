package bus

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/a2abus/a2abus/schemas"
)

// encodeRecord is json.Marshal of a task record, byte for byte, without
// reflection: every write of a task encodes its whole record, and at the
// history bound (23 KB) encoding/json spent ~60 % of its time walking the
// types rather than writing the text. The record's own fields are
// written here in their declaration order with their tags' rules;
// metadata maps and a part's data, whose contents are open, go through
// encoding/json. TestEncodeRecordIsMarshal holds it equal to json.Marshal
// on records with every field set, empty or missing, and strings of every
// kind of character; a field added to a record type fails it until it is
// written here.
func encodeRecord(r *schemas.TaskRecord) ([]byte, error) {
	return encodeWith(func(e *recordEncoder) { e.record(r) })
}

// encodeData is json.Marshal of an event's data, by the record encoder
// for what every task writes — a status or artifact event, a reply, a
// work item — and by encoding/json for anything else. A task's events
// were ~3 % of a blocking task's CPU in encoding/json's type walk.
// TestEncodeDataIsMarshal holds it equal to json.Marshal.
func encodeData(v any) ([]byte, error) {
	switch d := v.(type) {
	case *schemas.TaskStatusUpdateEvent:
		if d != nil {
			return encodeWith(func(e *recordEncoder) { e.statusEvent(d) })
		}
	case *schemas.TaskArtifactUpdateEvent:
		if d != nil {
			return encodeWith(func(e *recordEncoder) { e.artifactEvent(d) })
		}
	case *schemas.Message:
		if d != nil {
			return encodeWith(func(e *recordEncoder) { e.message(d) })
		}
	case ownWorkItem:
		return encodeWith(func(e *recordEncoder) { e.workItem(d.WorkItem) })
	}
	return json.Marshal(v)
}

// ownWorkItem is a work item whose record, if any, encodeRecord wrote
// (queueSubmission's snapshot): json.Marshal would write it unchanged
// (compacted and HTML-escaped already), so it is appended as it is,
// where encoding/json would scan it again (~5 µs for a small task's
// record).
type ownWorkItem struct{ *schemas.WorkItem }

// encodeWith writes with a pooled encoder and copies the text out.
func encodeWith(write func(*recordEncoder)) ([]byte, error) {
	e := encoders.Get().(*recordEncoder)
	e.b, e.err = e.b[:0], nil
	write(e)
	out, err := bytes.Clone(e.b), e.err
	if cap(e.b) <= maxPooledEncoding {
		encoders.Put(e)
	}
	return out, err
}

// encoders keep their buffers between records, so a record is written
// once into a buffer already large enough and copied out at its size.
var encoders = sync.Pool{New: func() any { return &recordEncoder{b: make([]byte, 0, 4096)} }}

// maxPooledEncoding bounds the buffers kept: one the size of the largest
// record is not kept for the next small one.
const maxPooledEncoding = 256 << 10

type recordEncoder struct {
	b   []byte
	err error
}

func (e *recordEncoder) record(r *schemas.TaskRecord) {
	e.b = append(e.b, `{"task":`...)
	e.task(&r.Task)
	e.b = append(e.b, `,"agent":`...)
	e.b = appendJSONString(e.b, r.Agent)
	if r.Reply != nil {
		e.b = append(e.b, `,"reply":`...)
		e.message(r.Reply)
	}
	e.b = append(e.b, `,"createdAt":`...)
	e.b = r.CreatedAt.AppendJSON(e.b)
	e.str(`,"dialect":`, r.Dialect)
	e.str(`,"clientTaskId":`, r.ClientTaskID)
	e.str(`,"owner":`, r.Owner)
	e.str(`,"tenant":`, r.Tenant)
	e.str(`,"origin":`, r.Origin)
	e.str(`,"trust":`, r.Trust)
	e.str(`,"traceparent":`, r.Traceparent)
	e.str(`,"lastEventId":`, r.LastEventID)
	e.int(`,"lastEventIndex":`, int64(r.LastEventIndex))
	if r.Push {
		e.b = append(e.b, `,"push":true`...)
	}
	e.int(`,"generation":`, int64(r.Generation))
	if r.Deadline != nil {
		e.b = append(e.b, `,"deadline":`...)
		e.b = r.Deadline.AppendJSON(e.b)
	}
	if a := r.Approval; a != nil {
		e.b = append(e.b, `,"approval":{"reasons":`...)
		e.strings(a.Reasons)
		e.str(`,"approvers":`, a.Approvers)
		e.b = append(e.b, `,"requestedAt":`...)
		e.b = a.RequestedAt.AppendJSON(e.b)
		e.b = append(e.b, `,"expiresAt":`...)
		e.b = a.ExpiresAt.AppendJSON(e.b)
		e.str(`,"expiresFor":`, a.ExpiresFor)
		e.str(`,"decision":`, a.Decision)
		e.str(`,"decidedBy":`, a.DecidedBy)
		if a.DecidedAt != nil {
			e.b = append(e.b, `,"decidedAt":`...)
			e.b = a.DecidedAt.AppendJSON(e.b)
		}
		e.str(`,"reason":`, a.Reason)
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, '}')
}

func (e *recordEncoder) task(t *schemas.Task) {
	e.b = append(e.b, `{"id":`...)
	e.b = appendJSONString(e.b, t.ID)
	e.str(`,"contextId":`, t.ContextID)
	e.b = append(e.b, `,"status":`...)
	e.status(&t.Status)
	list(e, `,"artifacts":`, t.Artifacts, e.artifact)
	list(e, `,"history":`, t.History, e.message)
	e.meta(`,"metadata":`, t.Metadata)
	e.int(`,"generation":`, int64(t.Generation))
	e.b = append(e.b, '}')
}

func (e *recordEncoder) status(s *schemas.TaskStatus) {
	e.b = append(e.b, `{"state":`...)
	e.b = appendJSONString(e.b, string(s.State))
	if s.Message != nil {
		e.b = append(e.b, `,"message":`...)
		e.message(s.Message)
	}
	if s.Timestamp != nil {
		e.b = append(e.b, `,"timestamp":`...)
		e.b = s.Timestamp.AppendJSON(e.b)
	}
	e.b = append(e.b, '}')
}

// taskIDs opens an object with the members every event and work item
// starts with.
func (e *recordEncoder) taskIDs(taskID, contextID string) {
	e.b = append(e.b, `{"taskId":`...)
	e.b = appendJSONString(e.b, taskID)
	e.b = append(e.b, `,"contextId":`...)
	e.b = appendJSONString(e.b, contextID)
}

// eventEnd closes an event with the members every event ends with.
func (e *recordEncoder) eventEnd(md map[string]any, gen schemas.Generation) {
	e.meta(`,"metadata":`, md)
	e.int(`,"generation":`, int64(gen))
	e.b = append(e.b, '}')
}

func (e *recordEncoder) statusEvent(ev *schemas.TaskStatusUpdateEvent) {
	e.taskIDs(ev.TaskID, ev.ContextID)
	e.b = append(e.b, `,"status":`...)
	e.status(&ev.Status)
	e.eventEnd(ev.Metadata, ev.Generation)
}

func (e *recordEncoder) artifactEvent(ev *schemas.TaskArtifactUpdateEvent) {
	e.taskIDs(ev.TaskID, ev.ContextID)
	e.b = append(e.b, `,"artifact":`...)
	e.artifact(&ev.Artifact)
	if ev.Append {
		e.b = append(e.b, `,"append":true`...)
	}
	if ev.LastChunk {
		e.b = append(e.b, `,"lastChunk":true`...)
	}
	e.eventEnd(ev.Metadata, ev.Generation)
}

// workItem writes a work item whose record encodeRecord wrote (see
// ownWorkItem).
func (e *recordEncoder) workItem(w *schemas.WorkItem) {
	e.taskIDs(w.TaskID, w.ContextID)
	e.b = append(e.b, `,"agent":`...)
	e.b = appendJSONString(e.b, w.Agent)
	e.b = append(e.b, `,"message":`...)
	e.message(&w.Message)
	if w.TaskRevision != 0 {
		e.b = append(e.b, `,"taskRevision":`...)
		e.b = strconv.AppendUint(e.b, w.TaskRevision, 10)
	}
	if len(w.Record) > 0 {
		e.b = append(e.b, `,"record":`...)
		e.b = append(e.b, w.Record...)
	}
	e.b = append(e.b, '}')
}

func (e *recordEncoder) message(m *schemas.Message) {
	e.b = append(e.b, `{"messageId":`...)
	e.b = appendJSONString(e.b, m.MessageID)
	e.str(`,"contextId":`, m.ContextID)
	e.str(`,"taskId":`, m.TaskID)
	e.b = append(e.b, `,"role":`...)
	e.b = appendJSONString(e.b, string(m.Role))
	e.b = append(e.b, `,"parts":`...)
	e.parts(m.Parts)
	e.meta(`,"metadata":`, m.Metadata)
	e.optStrings(`,"extensions":`, m.Extensions)
	e.optStrings(`,"referenceTaskIds":`, m.ReferenceTaskIDs)
	e.b = append(e.b, '}')
}

func (e *recordEncoder) artifact(a *schemas.Artifact) {
	e.b = append(e.b, `{"artifactId":`...)
	e.b = appendJSONString(e.b, a.ArtifactID)
	e.str(`,"name":`, a.Name)
	e.str(`,"description":`, a.Description)
	e.b = append(e.b, `,"parts":`...)
	e.parts(a.Parts)
	e.meta(`,"metadata":`, a.Metadata)
	e.optStrings(`,"extensions":`, a.Extensions)
	e.b = append(e.b, '}')
}

// list writes an omitempty list member, each element by write.
func list[T any](e *recordEncoder, key string, xs []T, write func(*T)) {
	if len(xs) > 0 {
		e.b = append(e.b, key...)
		elements(e, xs, write)
	}
}

// elements writes xs as a JSON array, each element by write.
func elements[T any](e *recordEncoder, xs []T, write func(*T)) {
	e.b = append(e.b, '[')
	for i := range xs {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		write(&xs[i])
	}
	e.b = append(e.b, ']')
}

// parts writes a list of parts; nil is null, as encoding/json writes a
// nil slice without omitempty.
func (e *recordEncoder) parts(ps []schemas.Part) {
	if ps == nil {
		e.b = append(e.b, "null"...)
		return
	}
	elements(e, ps, e.part)
}

func (e *recordEncoder) part(p *schemas.Part) {
	start := len(e.b)
	e.b = append(e.b, '{')
	if p.Text != nil {
		e.b = append(e.b, `,"text":`...)
		e.b = appendJSONString(e.b, *p.Text)
	}
	if p.Raw != nil {
		e.b = append(e.b, `,"raw":"`...)
		e.b = base64.StdEncoding.AppendEncode(e.b, p.Raw)
		e.b = append(e.b, '"')
	}
	if p.URL != nil {
		e.b = append(e.b, `,"url":`...)
		e.b = appendJSONString(e.b, *p.URL)
	}
	if len(p.Data) > 0 {
		e.b = append(e.b, `,"data":`...)
		e.marshal(json.RawMessage(p.Data))
	}
	e.meta(`,"metadata":`, p.Metadata)
	e.str(`,"filename":`, p.Filename)
	e.str(`,"mediaType":`, p.MediaType)
	if len(e.b) > start+1 {
		e.b = append(e.b[:start+1], e.b[start+2:]...) // the first member's comma
	}
	e.b = append(e.b, '}')
}

// str writes an omitempty string member (key carries its comma).
func (e *recordEncoder) str(key, s string) {
	if s != "" {
		e.b = append(e.b, key...)
		e.b = appendJSONString(e.b, s)
	}
}

// int writes an omitempty integer member.
func (e *recordEncoder) int(key string, n int64) {
	if n != 0 {
		e.b = append(e.b, key...)
		e.b = strconv.AppendInt(e.b, n, 10)
	}
}

// optStrings writes an omitempty list of strings.
func (e *recordEncoder) optStrings(key string, ss []string) {
	if len(ss) > 0 {
		e.b = append(e.b, key...)
		e.strings(ss)
	}
}

// strings writes a list of strings; nil is null.
func (e *recordEncoder) strings(ss []string) {
	if ss == nil {
		e.b = append(e.b, "null"...)
		return
	}
	e.b = append(e.b, '[')
	for i, s := range ss {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = appendJSONString(e.b, s)
	}
	e.b = append(e.b, ']')
}

// meta writes an omitempty metadata member through encoding/json.
func (e *recordEncoder) meta(key string, m map[string]any) {
	if len(m) > 0 {
		e.b = append(e.b, key...)
		e.marshal(m)
	}
}

func (e *recordEncoder) marshal(v any) {
	j, err := json.Marshal(v)
	if err != nil {
		if e.err == nil {
			e.err = err
		}
		return
	}
	e.b = append(e.b, j...)
}

// appendJSONString writes s as encoding/json writes a string (every JSON
// string a2abus writes by hand: records, CloudEvents, index entries): the
// characters JSON requires escaped, control characters as \b, \f, \n,
// \r, \t or \u00XX, <, > and & as \u003c, \u003e and \u0026, the line and
// paragraph separators escaped, and invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// jsonSafe are the ASCII bytes a JSON string in encoding/json's HTML-safe
// form holds as they are.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()
