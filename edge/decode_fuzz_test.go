package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// Fuzzers of the edge's request decoders: the JSON-RPC envelope, the send
// params of every dialect as the edge checks them, OpenFang's send route
// and the Last-Event-ID cursor. Each asserts that a refusal is a protocol
// error of the decoder's rows (and names the field it blames at the start
// of its message), and that what is accepted survives an encode and a
// decode unchanged. Seeds are below and in testdata/fuzz; `go test` runs
// them, .ci/run fuzzes each for a few seconds.

// fuzzServer is a Server with the default Config and no bus: enough for
// the decoders, which read only their limits.
func fuzzServer() *Server {
	cfg := Config{}.withDefaults()
	return &Server{cfg: cfg, bodies: newBodyBudget(cfg.MaxBodyBuffer, cfg.MaxBodyBufferPerAddr, bus.Gauge{})}
}

// wantRow fails t unless err is a *schemas.Error of one of rows whose
// "field" metadata, when set, starts its message.
func wantRow(t *testing.T, err error, rows ...*schemas.Error) {
	t.Helper()
	var pe *schemas.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %T %v is not a *schemas.Error", err, err)
	}
	for _, row := range rows {
		if errors.Is(pe, row) {
			if f := pe.Metadata["field"]; f != "" && !strings.HasPrefix(pe.Message, f+" ") {
				t.Fatalf("error names field %q but its message does not start with it: %q", f, pe.Message)
			}
			return
		}
	}
	t.Fatalf("error %d %s (%q) is none of the decoder's rows", pe.Code, pe.Reason, pe.Message)
}

// mustJSON encodes v, failing t if it cannot.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding %T: %v", v, err)
	}
	return b
}

func FuzzParseEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"message/send","params":{}}`,
		`{"jsonrpc":"2.0","id":null,"method":"tasks/get"}`,
		`{"jsonrpc":"2.0","id":-1.5e3,"method":"GetTask","params":null}`,
		`{"jsonrpc":"1.0","id":3,"method":"GetTask"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"GetTask"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]`,
		`"hello"`, ``, `{`, ` {"jsonrpc":"2.0","method":"x"} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, perr := parseEnvelope(body)
		if perr != nil {
			wantRow(t, perr, schemas.ErrParse, schemas.ErrInvalidRequest)
			if req != nil && !validID(req.ID) {
				t.Fatalf("a refused envelope echoes the id %s, which is not a JSON-RPC id", req.ID)
			}
			return
		}
		if *req.JSONRPC != "2.0" || *req.Method == "" || !validID(req.ID) {
			t.Fatalf("accepted an envelope with jsonrpc %q, method %q, id %s", *req.JSONRPC, *req.Method, req.ID)
		}
		// Encoding the envelope and reading it back is stable after one
		// round (encoding compacts the id and params).
		once := mustJSON(t, req)
		req2, perr := parseEnvelope(once)
		if perr != nil {
			t.Fatalf("the re-encoded envelope %s is refused: %v", once, perr)
		}
		if twice := mustJSON(t, req2); !bytes.Equal(once, twice) || *req2.Method != *req.Method {
			t.Fatalf("round trip changed the envelope:\n%s\n%s", once, twice)
		}
	})
}

// sendSeeds are params of SendMessage in 1.0 shape: one of each part kind
// and a few that must be refused.
var sendSeeds = []string{
	`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}`,
	`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"aGk=","mediaType":"text/plain","filename":"a.txt"},{"url":"https://x.example/a","mediaType":"application/pdf"},{"data":{"k":[1,2]}}]},"configuration":{"historyLength":2,"returnImmediately":true},"metadata":{"k":"v"}}`,
	`{"message":{"messageId":"m","role":"ROLE_USER","contextId":"c","taskId":"t","parts":[{"url":"data:,x"}],"referenceTaskIds":["r"],"extensions":["e"]}}`,
	`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"!!","mediaType":"a/b"}]}}`,
	`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"aGk=","filename":"../x"}]}}`,
	`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"url":"file:///etc/passwd"}]}}`,
	`{"message":{"messageId":5}}`, `{}`, `null`, `[]`,
}

func FuzzSendParamsV1(f *testing.F) {
	for _, s := range sendSeeds {
		f.Add([]byte(s))
	}
	limits := fuzzServer().cfg.partLimits()
	check := func(params []byte) (*schemas.SendMessageRequest, error) {
		req, err := decodeSend(params)
		if err == nil {
			err = req.CheckInput(limits, schemas.FieldNamesV1)
		}
		return req, err
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		if !json.Valid(params) {
			return // the envelope or body reader refuses it first
		}
		req, err := check(params)
		if err != nil {
			wantRow(t, err, schemas.ErrInvalidParams)
			return
		}
		once := mustJSON(t, req)
		req2, err := check(once)
		if err != nil {
			t.Fatalf("the re-encoded request %s is refused: %v", once, err)
		}
		if twice := mustJSON(t, req2); !bytes.Equal(once, twice) {
			t.Fatalf("round trip changed the request:\n%s\n%s", once, twice)
		}
	})
}

func FuzzSendParamsV03(f *testing.F) {
	for _, s := range []string{
		`{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}`,
		`{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"file","file":{"bytes":"aGk=","mimeType":"text/plain","name":"a.txt"}},{"kind":"file","file":{"uri":"https://x.example/a"}},{"kind":"data","data":{"k":1}}]},"configuration":{"blocking":false,"historyLength":1,"acceptedOutputModes":["text/plain"]}}`,
		`{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"t","metadata":{"a2abus/mediaType":"text/markdown","a2abus/filename":"n.md"}},{"kind":"data","data":{"value":[1]},"metadata":{"a2abus/wrapped":true}}]}}`,
		`{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"file","file":{"bytes":"_-8=","mimeType":"a/b"}}]}}`,
		`{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"file","file":{"bytes":"***"}}]}}`,
		`{"message":{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"video"}]}}`,
		`{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]},"configuration":{"pushNotificationConfig":{"url":"https://h.example/w","authentication":{"schemes":["Bearer"]}}}}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	s := fuzzServer()
	limits := s.cfg.partLimits()
	check := func(params []byte) (*schemas.SendMessageRequest, error) {
		req, err := s.v03SendParams(&call{params: params})
		if err == nil {
			err = req.CheckInput(limits, schemas.FieldNamesV03)
		}
		return req, err
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		if !json.Valid(params) {
			return
		}
		req, err := check(params)
		if err != nil {
			wantRow(t, err, schemas.ErrInvalidParams)
			return
		}
		// What 0.3 params say in 1.0 they say again after a trip back to
		// 0.3 (SendParamsToV03, the client's converter) and forth.
		back := mustJSON(t, schemas.SendParamsToV03(req))
		req2, err := check(back)
		if err != nil {
			t.Fatalf("the request converted back to 0.3, %s, is refused: %v", back, err)
		}
		if req.Configuration == nil {
			req2.Configuration = nil // the way back always states blocking
		}
		if a, b := mustJSON(t, req), mustJSON(t, req2); !bytes.Equal(a, b) {
			t.Fatalf("0.3 round trip changed the request:\n%s\n%s", a, b)
		}
	})
}

// legacySendSeeds are params of tasks/send, also bodies of OpenFang's
// POST /a2a/tasks/send.
var legacySendSeeds = []string{
	`{"id":"t1","sessionId":"s","message":{"role":"user","parts":[{"type":"text","text":"hi"}]}}`,
	`{"message":{"role":"user","parts":[{"type":"file","file":{"bytes":"aGk=","mimeType":"text/plain","name":"a.txt"}},{"type":"file","file":{"uri":"https://x.example/a"}},{"type":"data","data":{"k":[1]}}]},"historyLength":3,"acceptedOutputModes":["text/plain"]}`,
	`{"id":"t","message":{"role":"user","parts":[{"type":"file","file":{"uri":"ftp://x"}}]},"pushNotification":{"url":"https://h.example"}}`,
	`{"id":"t","message":{"role":"user","parts":[{"type":"data","data":"not an object"}]}}`,
	`{"id":"t","message":{"role":"robot","parts":[]}}`,
	`{}`,
}

// checkLegacySend checks the params of a tasks/send as the edge reads them
// (legacyCall, checkSend): a refusal is invalid params naming its field;
// an accepted request says the same after a trip back to the dialect
// (LegacySendParamsFromV1, the client's converter) and forth, but for the
// new message id each trip gives.
func checkLegacySend(t *testing.T, params []byte, limits schemas.PartLimits) {
	t.Helper()
	check := func(params []byte) (*schemas.SendMessageRequest, error) {
		var p schemas.LegacySendParams
		if err := decodeParams(params, &p); err != nil {
			return nil, err
		}
		if p.ID == "" {
			p.ID = "fuzz" // as legacyCall gives one
		}
		req, err := p.ToV1()
		if err == nil {
			err = req.CheckInput(limits, schemas.FieldNamesV03)
		}
		return req, err
	}
	req, err := check(params)
	if err != nil {
		wantRow(t, err, schemas.ErrInvalidParams)
		return
	}
	back := mustJSON(t, schemas.LegacySendParamsFromV1(req, "fuzz"))
	req2, err := check(back)
	if err != nil {
		t.Fatalf("the request converted back to tasks/send, %s, is refused: %v", back, err)
	}
	req2.Message.MessageID = req.Message.MessageID
	if a, b := mustJSON(t, req), mustJSON(t, req2); !bytes.Equal(a, b) {
		t.Fatalf("tasks/send round trip changed the request:\n%s\n%s", a, b)
	}
}

func FuzzSendParamsLegacy(f *testing.F) {
	for _, s := range legacySendSeeds {
		f.Add([]byte(s))
	}
	limits := fuzzServer().cfg.partLimits()
	f.Fuzz(func(t *testing.T, params []byte) {
		if !json.Valid(params) {
			return
		}
		checkLegacySend(t, params, limits)
	})
}

func FuzzOpenFangSend(f *testing.F) {
	for _, s := range legacySendSeeds {
		f.Add([]byte(s))
		f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":` + s + `}`))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`))
	f.Add([]byte(`{"jsonrpc":"1.0","method":"tasks/send"}`))
	f.Add([]byte(`not json`))
	s := fuzzServer()
	limits := s.cfg.partLimits()
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/a2a/tasks/send", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		c := &call{bodyMax: s.cfg.MaxBodyBytes}
		if err := decodeOpenFangSend(s, httptest.NewRecorder(), r, c); err != nil {
			wantRow(t, err, schemas.ErrParse, schemas.ErrInvalidRequest, schemas.ErrInvalidParams, schemas.ErrMethodNotFound)
			return
		}
		if c.method != "tasks/send" {
			t.Fatalf("the route took method %q", c.method)
		}
		if p := bytes.TrimSpace(c.params); len(p) > 0 && p[0] != '{' && string(p) != "null" {
			t.Fatalf("the route passed on params that are not an object: %s", p)
		}
		checkLegacySend(t, c.params, limits)
	})
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"0", "31", "7.2", "7.4095", "7.4096", "4503599627370495.0", "4503599627370496.0", "18446744073709551615", "18446744073709551616", "-1", "+1", " 1", "007", "1e3", "1.", ".1", "1.2.3", "", strings.Repeat("9", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		n, err := parseCursor(id)
		if err != nil {
			wantRow(t, err, schemas.ErrInvalidParams)
			// At most 64 bytes of the header are quoted, each as at most
			// four characters: the refusal's length does not grow with it.
			if m := err.(*schemas.Error).Message; len(m) > 400 {
				t.Fatalf("the refusal is %d bytes long: a client's header is quoted unbounded", len(m))
			}
			return
		}
		// The id the edge writes for n reads back as n.
		canon := formatCursor(n)
		if m, err := parseCursor(canon); err != nil || m != n {
			t.Fatalf("the edge's own cursor %s reads as %d, %v", canon, m, err)
		}
		rev, index := bus.SplitCursor(n)
		if revText, indexText, ok := strings.Cut(id, "."); ok {
			// "<revision>.<index>", each decimal but for leading zeros.
			if r, _ := strconv.ParseUint(revText, 10, 64); r != rev {
				t.Fatalf("%q was read as revision %d", id, rev)
			}
			if i, _ := strconv.Atoi(indexText); i != index {
				t.Fatalf("%q was read as index %d", id, index)
			}
			return
		}
		// An earlier release's id: one decimal number, revision<<4 | index.
		old, perr := strconv.ParseUint(id, 10, 64)
		if perr != nil || old>>4 != rev || int(old&15) != index {
			t.Fatalf("%q was read as revision %d index %d", id, rev, index)
		}
	})
}
