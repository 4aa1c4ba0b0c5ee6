package edge

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/a2abus/a2abus/schemas"
)

// Member names in the proto's own spelling. A2A 1.0's JSON is ProtoJSON,
// whose parsers accept a field under its lowerCamelCase json_name
// (historyLength) and under the name the proto gives it (history_length);
// clients that print with protobuf's preserving_proto_field_name, the TCK
// among them, send the latter. Methods decode with encoding/json, which
// matches a name without regard to case but not to underscores, so a 1.0
// request's names are made the json_names once, as the front door decodes
// it (JSON-RPC params, HTTP+JSON bodies and query parameters), and nothing
// after — methods, peeks at single members, checks naming fields — meets
// the other spelling. The rewrite runs only when the body guard saw an
// underscore (or an escape) in some member name (call.oddKeys), so a
// request in json_names pays one comparison per name byte.
//
// A field given under both names is refused unless both carry the same
// JSON text (then it is kept once): which one was meant cannot be known,
// and a check that read one spelling must not be passed by the other.

// protoNames returns the params object with every member name written in
// the proto's spelling (lower case, digits and underscores, with an
// underscore) renamed to its json_name, except inside the values of the
// free-form members — metadata (google.protobuf.Struct) and a part's data
// (google.protobuf.Value) — whose keys are the client's own. params is
// valid JSON (the envelope and readParams checked it) nested no deeper
// than the body guard allows. It returns ErrInvalidParams naming a field
// given under both names with different values.
func protoNames(params []byte) ([]byte, error) {
	w := nameWriter{out: make([]byte, 0, len(params))}
	if c := w.value(params); c != nil {
		return nil, schemas.InvalidField(c.field, "is given as both %q and %q with different values; send it once", c.a, c.b)
	}
	return w.out, nil
}

// nameClash is a field given under both names with different values:
// its path (completed as the clash returns through the containers above
// it, so no path is built while nothing clashes) and the two names.
type nameClash struct{ field, a, b string }

// nameWriter writes a JSON value with its member names renamed. members
// is a stack the objects being written share: each one's members above
// those of the objects around it.
type nameWriter struct {
	out     []byte
	members []member
}

func (w *nameWriter) value(v []byte) *nameClash {
	v = bytes.TrimSpace(v)
	switch v[0] {
	case '{':
		return w.object(v)
	case '[':
		return w.array(v)
	}
	w.out = append(w.out, v...)
	return nil
}

func (w *nameWriter) array(arr []byte) *nameClash {
	w.out = append(w.out, '[')
	i, n := skipSpace(arr, 1), 0
	for i < len(arr) && arr[i] != ']' {
		end := valueEnd(arr, i)
		if n > 0 {
			w.out = append(w.out, ',')
		}
		if c := w.value(arr[i:end]); c != nil {
			c.field = "[" + strconv.Itoa(n) + "]" + c.field
			return c
		}
		n++
		i = skipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
	w.out = append(w.out, ']')
	return nil
}

// member is one member of an object being written: its name as written
// out, the name the client used (decoded, and as sent), and its value.
type member struct {
	name, sent string
	raw, val   []byte
}

func (w *nameWriter) object(obj []byte) *nameClash {
	base := len(w.members)
	defer func() { w.members = w.members[:base] }()
	renamed := false
	for i := skipSpace(obj, 1); i < len(obj) && obj[i] == '"'; {
		end := valueEnd(obj, i)
		raw := obj[i:end]
		key := string(raw[1 : len(raw)-1])
		if strings.IndexByte(key, '\\') >= 0 {
			_ = json.Unmarshal(raw, &key)
		}
		i = skipSpace(obj, skipSpace(obj, end)+1) // past ':'
		end = valueEnd(obj, i)
		name := jsonName(key)
		renamed = renamed || name != key
		w.members = append(w.members, member{name, key, raw, obj[i:end]})
		i = skipSpace(obj, end)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	// Nested objects push above ms and pop back to it; what ms holds
	// stays as it is.
	ms := w.members[base:]
	// first: where each name first occurs, when a member was renamed (only
	// then can two spellings meet); a small object is searched instead.
	var first map[string]int
	if renamed && len(ms) > 16 {
		first = make(map[string]int, len(ms))
	}
	w.out = append(w.out, '{')
	wrote := false
	for i, m := range ms {
		if renamed {
			j, seen := i, false
			if first != nil {
				if j, seen = first[m.name]; !seen {
					first[m.name] = i
				}
			} else {
				for k := range i {
					if ms[k].name == m.name {
						j, seen = k, true
						break
					}
				}
			}
			if o := ms[j]; seen && o.sent != m.sent {
				if !bytes.Equal(bytes.TrimSpace(o.val), bytes.TrimSpace(m.val)) {
					return &nameClash{field: m.name, a: o.sent, b: m.sent}
				}
				continue // the same field, the same value: kept once
			}
		}
		if wrote {
			w.out = append(w.out, ',')
		}
		wrote = true
		if m.name == m.sent {
			w.out = append(w.out, m.raw...) // as sent, byte for byte
		} else {
			w.out = append(append(append(w.out, '"'), m.name...), '"') // a json_name: letters and digits
		}
		w.out = append(w.out, ':')
		if m.name == "metadata" || m.name == "data" {
			w.out = append(w.out, bytes.TrimSpace(m.val)...)
			continue
		}
		if c := w.value(m.val); c != nil {
			if c.field[0] != '[' {
				c.field = "." + c.field
			}
			c.field = m.name + c.field
			return c
		}
	}
	w.out = append(w.out, '}')
	return nil
}

// jsonName is the json_name protoc gives a field named key, when key is
// spelt as proto field names are (lower case letters, digits and
// underscores, starting with a letter, with an underscore): each
// underscore dropped and the letter after it upper-cased
// (reference_task_ids → referenceTaskIds). Any other key is returned as
// it is.
func jsonName(key string) string {
	if key == "" || key[0] < 'a' || key[0] > 'z' || strings.IndexByte(key, '_') < 0 {
		return key
	}
	for i := 1; i < len(key); i++ {
		if c := key[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return key
		}
	}
	b := make([]byte, 0, len(key))
	up := false
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c == '_':
			up = true
		case up && c >= 'a' && c <= 'z':
			b = append(b, c-'a'+'A')
			up = false
		default:
			b = append(b, c)
			up = false
		}
	}
	return string(b)
}

// protoQuery is an HTTP+JSON request's query with its parameter names
// made json_names (page_size → pageSize), as protoNames does for bodies:
// the HTTP transcoding of the proto's methods takes a field's query
// parameter under either name. A parameter given under both names with
// different values is refused.
func protoQuery(q url.Values) (url.Values, error) {
	var out url.Values
	for k, vs := range q {
		name := jsonName(k)
		if name == k {
			continue
		}
		if out == nil {
			out = make(url.Values, len(q))
			for k2, v2 := range q {
				if jsonName(k2) == k2 {
					out[k2] = v2
				}
			}
		}
		if prev, ok := out[name]; ok && !slices.Equal(prev, vs) {
			return nil, schemas.InvalidField(name, "is given as both %q and %q with different values; send it once", name, k)
		}
		out[name] = vs
	}
	if out == nil {
		return q, nil
	}
	return out, nil
}
