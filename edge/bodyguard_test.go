package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/a2abus/a2abus/schemas"
)

// guardReference measures valid JSON the slow way, with encoding/json's
// tokenizer: its nesting depth, its longest string or key (decoded), its
// values, and the longest parts array of a message.
func guardReference(t *testing.T, body []byte) (depth, longest, values, parts int) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type open struct {
		object  bool
		key     string
		n       int
		wantKey bool
	}
	var stack []open
	member := func() { // a value begins in the container on top
		if n := len(stack); n > 0 && !stack[n-1].object {
			stack[n-1].n++
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("reference tokenizer on valid JSON: %v", err)
		}
		n := len(stack)
		isKey := n > 0 && stack[n-1].object && stack[n-1].wantKey
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				values++
				member()
				isParts := v == '[' && n >= 2 && stack[n-1].key == "parts" && stack[n-2].key == "message"
				stack = append(stack, open{object: v == '{', wantKey: v == '{', key: map[bool]string{true: "[parts]"}[isParts]})
				depth = max(depth, len(stack))
			default:
				if top := stack[n-1]; !top.object && top.key == "[parts]" {
					parts = max(parts, top.n)
				}
				stack = stack[:n-1]
				if n := len(stack); n > 0 && stack[n-1].object {
					stack[n-1].wantKey = true
				}
			}
			continue
		case string:
			longest = max(longest, len(v))
			if isKey {
				stack[n-1].key, stack[n-1].wantKey = v, false
				continue
			}
		}
		values++
		member()
		if n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
}

// The guard refuses exactly the valid JSON that breaks a bound, however
// the body is split as it arrives, and a refusal names the field or the
// request.
func FuzzBodyGuard(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"},{"data":{"a":[1,2,{"b":null}]}}]}}}`,
		`{"message":{"parts":[{},{},{},{}]}}`,
		`{"a":"\u00e9\n\"x","b":[true,false,null,-1.5e3]}`,
		`[[[[[[1]]]]]]`, `"abcdefghijklmnop"`, `{"k":{"k":{"k":{}}}}`, `12`,
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, body []byte, split uint8) {
		if !json.Valid(body) {
			return
		}
		depth, longest, values, parts := guardReference(t, body)
		const lim = 4
		g := &bodyGuard{depth: lim, str: 12, strTotal: math.MaxInt, values: 3 * lim, parts: lim} // the total of strings: TestBodyGuardStringTotal
		// Fed in pieces of a size the fuzzer picks.
		step := int(split%16) + 1
		var err error
		for i := 0; i < len(body) && err == nil; i += step {
			_, err = g.Write(body[i:min(i+step, len(body))])
		}
		breaks := depth > g.depth || values > g.values || parts > g.parts || longest > g.str
		// Escapes and invalid UTF-8 decode to more bytes than the guard
		// counts (at least one each): with them, a string the reference
		// finds too long may pass the guard, never the other way.
		exact := !bytes.Contains(body, []byte(`\`)) && utf8.Valid(body)
		switch {
		case err != nil && !breaks:
			t.Fatalf("refused within every bound (depth %d, longest %d, values %d, parts %d): %v", depth, longest, values, parts, err)
		case err == nil && (depth > g.depth || values > g.values || parts > g.parts || exact && longest > g.str):
			t.Fatalf("not refused: depth %d, longest string %d, values %d, parts %d", depth, longest, values, parts)
		case err != nil:
			wantRow(t, err, schemas.ErrInvalidRequest, schemas.ErrInvalidParams)
		}
	})
}

// The envelope scanner reads what encoding/json reads: the same id,
// method, jsonrpc and params for any JSON object with ASCII keys.
func FuzzEnvelopeMembers(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"a":[1,"}"]}}`,
		`{ "Method" : "x" , "ID":"a\"b", "params":null, "params" : [ 1 ] }`,
		`{"id":-1.5e3,"jsonrpc":"2.0","extra":{"id":2},"me\u0074hod":"m"}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		body = bytes.TrimSpace(body)
		if !json.Valid(body) || len(body) == 0 || body[0] != '{' {
			return
		}
		var want struct {
			JSONRPC, ID, Method, Params json.RawMessage
		}
		if json.Unmarshal(body, &want) != nil {
			return
		}
		var got struct{ JSONRPC, ID, Method, Params []byte }
		ascii := true
		eachMember(body, func(key string, val []byte) {
			for _, r := range key {
				ascii = ascii && r < utf8.RuneSelf
			}
			switch {
			case foldEqual(key, "jsonrpc"):
				got.JSONRPC = val
			case foldEqual(key, "id"):
				got.ID = val
			case foldEqual(key, "method"):
				got.Method = val
			case foldEqual(key, "params"):
				got.Params = val
			}
		})
		if !ascii {
			return // encoding/json folds some non-ASCII letters its own way
		}
		for _, p := range [][2][]byte{{got.JSONRPC, want.JSONRPC}, {got.ID, want.ID}, {got.Method, want.Method}, {got.Params, want.Params}} {
			if !bytes.Equal(p[0], p[1]) {
				t.Fatalf("member %q, encoding/json reads %q", p[0], p[1])
			}
		}
	})
}

// A body that a bound refuses is answered before the client has sent it
// all: the edge stops reading at the byte past the bound, names the field
// and answers the JSON-RPC id it saw, while the client still holds the
// rest of its 4 MiB.
func TestBodyRefusedBeforeItIsAllSent(t *testing.T) {
	s := fuzzServer()
	for _, c := range []struct {
		name, head, field string
		fill              string
	}{
		{"a string past any part", `{"jsonrpc":"2.0","id":"r1","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"`, "message.parts[0].text", "a"},
		{"small values past the limit", `{"jsonrpc":"2.0","id":"r1","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":{"k":[`, "message.metadata.k", "0,"},
		{"parts past the limit", `{"jsonrpc":"2.0","id":"r1","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[`, "message.parts", `{"text":"x"},`},
	} {
		t.Run(c.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			r := httptest.NewRequest("POST", "/", pr)
			r.ContentLength = 4 << 20
			sent := make(chan int, 1)
			go func() {
				n, _ := io.WriteString(pw, c.head)
				chunk := strings.Repeat(c.fill, 64<<10/len(c.fill))
				for n < 4<<20-len(chunk) {
					k, err := io.WriteString(pw, chunk)
					if n += k; err != nil {
						break
					}
				}
				sent <- n
			}()
			call := &call{bodyMax: s.cfg.MaxBodyBytes}
			_, err := s.readBody(httptest.NewRecorder(), r, call)
			pr.CloseWithError(errors.New("answered")) // the client's next write fails
			n := <-sent
			var pe *schemas.Error
			if !errors.As(err, &pe) || !errors.Is(pe, schemas.ErrInvalidParams) || pe.Metadata["field"] != c.field {
				t.Fatalf("refusal %v; want InvalidParams naming %s", err, c.field)
			}
			if string(call.id) != `"r1"` {
				t.Fatalf("refusal answers id %s, want \"r1\"", call.id)
			}
			if n > 2<<20 {
				t.Fatalf("the edge read %d bytes of a body it refused by its first %d", n, base64Len(1<<20))
			}
			t.Logf("%s after %d of 4 MiB: %s", c.field, n, pe.Message)
		})
	}
}

// Reading a body's keys costs the guard no allocation: a body of a
// thousand keys allocates only the guard's stack of open containers.
func TestBodyGuardKeysCostNoAllocation(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"params":{"metadata":{`)
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"key-` + strings.Repeat("k", i%80) + `":1`)
	}
	b.WriteString(`}}}`)
	body := []byte(b.String())
	s := fuzzServer()
	allocs := testing.AllocsPerRun(20, func() {
		g := s.newBodyGuard()
		if _, err := g.Write(body); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 4 {
		t.Fatalf("the guard allocated %.0f times for a body of 1000 keys", allocs)
	}
}

// Issue 29, defect 1: strings each within the largest part but together
// past what the largest message takes (base64-encoded, with room for its
// ids and metadata) are refused at the byte past that total, naming the
// field where it was passed, not buffered whole: three metadata strings
// of 1.3 MiB, a body of 4 MiB, are refused after about 2.9 MiB.
func TestBodyGuardStringTotal(t *testing.T) {
	s := fuzzServer()
	str := strings.Repeat("s", 1300<<10)
	body := `{"jsonrpc":"2.0","id":"r2","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],` +
		`"metadata":{"k0":"` + str + `","k1":"` + str + `","k2":"` + str + `"}}}}`
	pr, pw := io.Pipe()
	r := httptest.NewRequest("POST", "/", pr)
	r.ContentLength = int64(len(body))
	sent := make(chan int, 1)
	go func() {
		n := 0
		for n < len(body) {
			k, err := io.WriteString(pw, body[n:min(n+64<<10, len(body))])
			if n += k; err != nil {
				break
			}
		}
		pw.Close()
		sent <- n
	}()
	c := &call{bodyMax: s.cfg.MaxBodyBytes}
	_, err := s.readBody(httptest.NewRecorder(), r, c)
	s.bodies.release(&c.body)
	pr.CloseWithError(errors.New("answered"))
	n := <-sent
	var pe *schemas.Error
	if !errors.As(err, &pe) || !errors.Is(pe, schemas.ErrInvalidParams) || pe.Metadata["field"] != "message.metadata.k2" {
		t.Fatalf("refusal %v; want InvalidParams naming message.metadata.k2", err)
	}
	limits := s.cfg
	if total := base64Len(limits.MaxMessageBytes) + limits.MaxMessageBytes/stringSlackShare; n > total+256<<10 {
		t.Fatalf("the edge read %d of %d bytes, refusing strings past %d in all", n, len(body), total)
	}
	t.Logf("after %d of %d bytes: %s", n, len(body), pe.Message)
}
