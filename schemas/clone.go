package schemas

import (
	"encoding/json"
	"maps"
	"slices"
)

// Clone returns a copy of r that shares nothing with r a writer could
// change: every slice, map and pointer of the record, its task, messages,
// parts, artifacts and approval is copied (strings, being immutable, are
// shared). It is how one process hands a record it just wrote to another
// of its parts without encoding and decoding it (the bus's record
// hand-over): each side then owns its copy and may fold events into it,
// trim it or pass it to an agent. Metadata values come out as decoding the
// record's JSON gives them — objects, arrays, strings, float64 numbers,
// booleans — so a value an agent wrote as a Go type of its own (an int, a
// struct) reads the same from a handed record as from the store. What
// else JSON would change is left as written: a string that is not valid
// UTF-8, a part's data not compacted, an empty list where a decode has
// none. TestCloneSharesNothing holds Clone to every field of the record.
func (r *TaskRecord) Clone() *TaskRecord {
	if r == nil {
		return nil
	}
	c := *r
	c.Task = r.Task.clone()
	c.Reply = cloneMessagePtr(r.Reply)
	c.Deadline = cloneTimestamp(r.Deadline)
	if r.Approval != nil {
		a := *r.Approval
		a.Reasons = slices.Clone(a.Reasons)
		a.DecidedAt = cloneTimestamp(a.DecidedAt)
		c.Approval = &a
	}
	return &c
}

func (t Task) clone() Task {
	t.Status.Message = cloneMessagePtr(t.Status.Message)
	t.Status.Timestamp = cloneTimestamp(t.Status.Timestamp)
	if t.Artifacts != nil {
		as := make([]Artifact, len(t.Artifacts))
		for i, a := range t.Artifacts {
			a.Parts = cloneParts(a.Parts)
			a.Metadata = cloneMeta(a.Metadata)
			a.Extensions = slices.Clone(a.Extensions)
			as[i] = a
		}
		t.Artifacts = as
	}
	if t.History != nil {
		h := make([]Message, len(t.History))
		for i := range t.History {
			h[i] = t.History[i].clone()
		}
		t.History = h
	}
	t.Metadata = cloneMeta(t.Metadata)
	return t
}

func (m Message) clone() Message {
	m.Parts = cloneParts(m.Parts)
	m.Metadata = cloneMeta(m.Metadata)
	m.Extensions = slices.Clone(m.Extensions)
	m.ReferenceTaskIDs = slices.Clone(m.ReferenceTaskIDs)
	return m
}

func cloneMessagePtr(m *Message) *Message {
	if m == nil {
		return nil
	}
	c := m.clone()
	return &c
}

func cloneParts(ps []Part) []Part {
	if ps == nil {
		return nil
	}
	out := make([]Part, len(ps))
	for i, p := range ps {
		p.Text = clonePtr(p.Text)
		p.URL = clonePtr(p.URL)
		p.Raw = slices.Clone(p.Raw)
		p.Data = slices.Clone(p.Data)
		p.Metadata = cloneMeta(p.Metadata)
		out[i] = p
	}
	return out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneTimestamp(t *Timestamp) *Timestamp { return clonePtr(t) }

func cloneMeta(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := maps.Clone(m)
	for k, v := range out {
		out[k] = cloneJSONValue(v)
	}
	return out
}

// cloneJSONValue copies a metadata value as decoding its JSON gives it:
// objects and arrays copied, JSON's scalars as they are, anything else
// encoded and decoded.
func cloneJSONValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return cloneMeta(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneJSONValue(e)
		}
		return out
	case nil, string, float64, bool:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v // the record cannot be stored either
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}
