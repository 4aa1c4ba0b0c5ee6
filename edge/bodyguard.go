package edge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/a2abus/a2abus/schemas"
)

// bodyGuard follows a JSON request body while it is read and stops the
// read at the first byte past a bound the whole body would fail anyway:
//
//   - nesting deeper than MaxJSONDepth;
//   - one string longer than the largest part can be once encoded (its
//     decoded length counted, so escapes do not inflate it);
//   - strings longer in all than the largest message can be once encoded,
//     with room for its names, ids and metadata (strTotal), so a body
//     of several strings each within the bound above is refused at the
//     byte that makes it unacceptable, not buffered whole;
//   - more JSON values in all than MaxJSONValues;
//   - more parts in a message than the part limits allow.
//
// It owns these bounds for every body the edge reads, so a body built to
// cost memory is refused after the bytes that break the bound, not after
// all of it has been buffered and decoded. The value bound matters most:
// decoding turns each small value ("0," or "{},") into tens of bytes of
// maps, interfaces and structs, and a 4 MiB body of them cost ~40× its size
// before the limits on parts and metadata could see it. It is one pass with
// no allocation beyond its stack of open containers, and it remembers where
// a top-level "id" is, so a JSON-RPC refusal still answers the caller's id.
//
// The guard does not validate JSON: the body is checked whole after the
// read, and on invalid JSON the guard's counts are only bounds.
type bodyGuard struct {
	depth, str, values, parts int // the bounds
	strTotal                  int // the bound on every string's bytes together
	partBytes, messageBytes   int // the largest part and message, which str and strTotal allow for

	off    int // the offset of the byte being scanned
	frames []guardFrame
	seen   int // values begun

	inStr, esc, scalar, isKey bool
	hex                       int     // hex digits of a \u escape still to come
	strLen                    int     // decoded bytes of the current string so far (a lower bound)
	strSeen                   int     // decoded bytes of every string so far (a lower bound)
	key                       keyName // the key being read
	// oddKeys: some member name holds an underscore or an escape, so it
	// may be a proto field name to rename (see protoNames).
	oddKeys bool

	// idAt and idEnd are where the value of the top-level "id" member
	// lies in the body: idEnd is 0 until that value has ended.
	idAt, idEnd int

	err *schemas.Error
}

// guardFrame is one open container: an object and the member being read
// (its key), or an array and the element being read (its index).
type guardFrame struct {
	object, wantKey bool
	key             keyName
	index           int
	parts           bool // the array is a message's parts
}

// keyShown bounds how much of a key the guard keeps to name a field.
const keyShown = 64

// keyName is the start of a key, kept in place so reading a key costs no
// allocation.
type keyName struct {
	b [keyShown]byte
	n uint8
}

func (k *keyName) is(name string) bool { return string(k.b[:k.n]) == name }

func (k *keyName) String() string { return string(k.b[:k.n]) }

func (s *Server) newBodyGuard() *bodyGuard {
	l := s.cfg.partLimits()
	return &bodyGuard{
		depth:        s.cfg.MaxJSONDepth,
		str:          base64Len(l.MaxPartBytes),
		strTotal:     base64Len(l.MaxMessageBytes) + l.MaxMessageBytes/stringSlackShare,
		partBytes:    l.MaxPartBytes,
		messageBytes: l.MaxMessageBytes,
		values:       s.cfg.MaxJSONValues,
		parts:        l.MaxParts,
	}
}

// stringSlackShare sets the room strTotal leaves beside the message's
// parts, base64-encoded, for the strings a request holds besides them
// (ids, media types, file names, keys, metadata): an eighth of the
// message bound, 256 KiB by default. (The task record that stores the
// message is smaller still: 1 MiB by default.)
const stringSlackShare = 8

// base64Len is the length of n bytes in padded base64: the longest a raw
// part's string may be.
func base64Len(n int) int { return (n + 2) / 3 * 4 }

// Write scans the next bytes of the body: it returns the refusal at the
// first byte past a bound and keeps returning it.
func (g *bodyGuard) Write(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	for i, c := range p {
		if g.inStr {
			g.stringByte(c)
		} else {
			g.structByte(c)
		}
		g.off++
		if g.err != nil {
			return i + 1, g.err
		}
	}
	return len(p), nil
}

func (g *bodyGuard) stringByte(c byte) {
	switch {
	case g.hex > 0:
		g.hex--
		return
	case g.esc:
		g.esc = false
		if c == 'u' {
			g.hex = 4
		}
	case c == '\\':
		g.esc = true
		g.oddKeys = g.oddKeys || g.isKey
		return // the escape is counted at its next byte
	case c == '"':
		g.inStr = false
		if g.isKey {
			top := &g.frames[len(g.frames)-1]
			top.key, top.wantKey = g.key, false
		}
		return
	}
	// Every byte outside an escape and every escape decode to at least one
	// byte.
	g.strLen++
	g.strSeen++
	if g.isKey {
		if g.key.n < keyShown {
			g.key.b[g.key.n] = c
			g.key.n++
		}
		g.oddKeys = g.oddKeys || c == '_'
	}
	if g.strLen > g.str {
		what := "holds a string"
		if g.isKey {
			what = "has a key"
		}
		g.refuse(len(g.frames), "%s longer than %d bytes, more than the largest part (%d bytes) takes even base64-encoded", what, g.str, g.partBytes)
	} else if g.strSeen > g.strTotal {
		what := "holds a string that takes"
		if g.isKey {
			what = "has a key that takes"
		}
		g.refuse(len(g.frames), "%s the request's strings past %d bytes in all, more than the largest message (%d bytes) takes base64-encoded with its ids and metadata", what, g.strTotal, g.messageBytes)
	}
}

func (g *bodyGuard) structByte(c byte) {
	switch c {
	case ' ', '\t', '\r', '\n':
		g.scalar = false
	case '"':
		g.scalar = false
		g.inStr, g.strLen = true, 0
		n := len(g.frames)
		g.isKey = n > 0 && g.frames[n-1].object && g.frames[n-1].wantKey
		if g.isKey {
			g.key.n = 0
		} else {
			g.value()
		}
	case '{', '[':
		g.scalar = false
		g.value()
		n := len(g.frames)
		if n >= g.depth && g.err == nil {
			g.err = schemas.Errorf(schemas.ErrInvalidRequest, "JSON nesting depth exceeds the limit of %d", g.depth)
			return
		}
		f := guardFrame{object: c == '{', wantKey: c == '{'}
		// A message's parts: the array under "parts" of an object under
		// "message" (every dialect names them so).
		f.parts = c == '[' && n >= 2 && g.frames[n-1].key.is("parts") && g.frames[n-2].key.is("message")
		g.frames = append(g.frames, f)
	case '}', ']':
		g.scalar = false
		g.memberEnds()
		if n := len(g.frames); n > 0 {
			g.frames = g.frames[:n-1]
		}
	case ',':
		g.scalar = false
		g.memberEnds()
		if n := len(g.frames); n > 0 {
			top := &g.frames[n-1]
			if top.object {
				top.wantKey = true
			} else if top.index++; top.parts && top.index >= g.parts {
				g.refuse(n-1, "holds more than the limit of %d parts", g.parts)
			}
		}
	case ':':
		g.scalar = false
		if len(g.frames) == 1 && g.frames[0].key.is("id") {
			g.idAt, g.idEnd = g.off+1, 0
		}
	default:
		if !g.scalar { // a number or a literal begins
			g.scalar = true
			g.value()
		}
	}
}

// value counts a value that begins.
func (g *bodyGuard) value() {
	if g.seen++; g.seen > g.values && g.err == nil {
		// Named by the container the value is in, without its index.
		n := len(g.frames)
		if n > 0 && !g.frames[n-1].object {
			n--
		}
		g.refuse(n, "holds more than %d JSON values (numbers, strings, objects, arrays) in all, the limit of one request; send large data as a file part", g.values)
	}
}

// memberEnds notes the end of the top-level "id" member's value.
func (g *bodyGuard) memberEnds() {
	if len(g.frames) == 1 && g.frames[0].key.is("id") && g.idAt > 0 && g.idEnd == 0 {
		g.idEnd = g.off
	}
}

// refuse records the refusal for the field the first n open containers
// lead to: a JSON-RPC envelope's own members are the request's
// (InvalidRequest), anything else is params (InvalidParams, named as a
// field of params).
func (g *bodyGuard) refuse(n int, format string, args ...any) {
	var b strings.Builder
	for i, f := range g.frames[:n] {
		switch {
		case !f.object:
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		case f.key.n > 0 && !(i == 0 && f.key.is("params")):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key.String())
			if f.key.n == keyShown {
				b.WriteString("…")
			}
		}
	}
	field := b.String()
	if n > 0 {
		switch g.frames[0].key.String() {
		case "jsonrpc", "id", "method":
			g.err = schemas.Errorf(schemas.ErrInvalidRequest, "the request's %s %s", field, fmt.Sprintf(format, args...))
			return
		}
	}
	if field == "" {
		g.err = schemas.Errorf(schemas.ErrInvalidParams, "the request body %s", fmt.Sprintf(format, args...))
		return
	}
	g.err = schemas.InvalidField(field, format, args...)
}

// id returns the top-level "id" member's value once the guard has seen it
// whole, if it is a JSON-RPC id.
func (g *bodyGuard) id(body []byte) json.RawMessage {
	if g.idEnd == 0 || g.idEnd > len(body) {
		return nil
	}
	id := bytes.TrimSpace(body[g.idAt:g.idEnd])
	if len(id) == 0 || !json.Valid(id) || !validID(id) {
		return nil
	}
	return id
}
