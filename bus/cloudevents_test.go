package bus

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/a2abus/a2abus/schemas"
)

// The NATS protocol binding draft: a header value percent-encodes space,
// '"', '%' and everything outside U+0021..U+007E, as uppercase hex of the
// UTF-8 bytes.
func TestPercentEncode(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain-ASCII_1.0", "plain-ASCII_1.0"},
		{"urn:a2abus:edge:x", "urn:a2abus:edge:x"},
		{"!#$&'()*+,/:;<=>?@[\\]^`{|}~", "!#$&'()*+,/:;<=>?@[\\]^`{|}~"},
		{"a b", "a%20b"},
		{`say "hi"`, "say%20%22hi%22"},
		{"100%", "100%25"},
		{"%20", "%2520"},
		{"café", "caf%C3%A9"},
		{"日本", "%E6%97%A5%E6%9C%AC"},
		{"😀", "%F0%9F%98%80"},
		{"tab\tnl\n", "tab%09nl%0A"},
		{"\x00\x7f", "%00%7F"},
	} {
		if got := percentEncode(tc.in); got != tc.want {
			t.Errorf("percentEncode(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPercentDecode(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"a%20b", "a b"},
		{"caf%C3%A9", "café"},
		{"caf%c3%a9", "café"},              // lowercase hex
		{"%e6%97%A5", "日"},                 // mixed case
		{`"quoted"`, "quoted"},             // double quotes unwrapped
		{`"a%20b"`, "a b"},                 // ... before decoding
		{`""`, ""},                         // empty quoted value
		{`"%22x%22"`, `"x"`},               // encoded quotes stay
		{"%2520", "%20"},                   // decoded once only
		{"already é raw", "already é raw"}, // raw UTF-8 is tolerated
	} {
		got, err := percentDecode(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("percentDecode(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestPercentDecodeRejects(t *testing.T) {
	for _, in := range []string{
		"%",        // truncated
		"%4",       // truncated
		"abc%",     // truncated at the end
		"abc%4",    // truncated at the end
		`"abc%4"`,  // truncated inside quotes
		"%zz",      // not hex
		"%4g",      // not hex
		"%-1",      // not hex
		"%C3",      // decodes to invalid UTF-8 (lone lead byte)
		"%FF%FE",   // invalid UTF-8
		"%C3%28",   // invalid continuation
		"\xff",     // raw invalid UTF-8
		"ok\xc3(x", // raw invalid UTF-8
	} {
		if got, err := percentDecode(in); err == nil {
			t.Errorf("percentDecode(%q) = %q, want an error", in, got)
		}
	}
}

// FuzzPercentRoundTrip checks that every valid UTF-8 string survives
// encoding and that the encoding is a legal header value.
func FuzzPercentRoundTrip(f *testing.F) {
	for _, s := range []string{"", "a b", `"quoted"`, "100%", "café", "日本語", "%41", "\x00\x7f", "~!", `"`, `""`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		enc := percentEncode(s)
		for i := 0; i < len(enc); i++ {
			if c := enc[i]; c < 0x21 || c > 0x7e || c == '"' {
				t.Fatalf("percentEncode(%q) = %q holds byte %#x", s, enc, c)
			}
		}
		dec, err := percentDecode(enc)
		if err != nil || dec != s {
			t.Fatalf("percentDecode(percentEncode(%q)) = %q, %v", s, dec, err)
		}
	})
}

// fullEvent returns an event with every core attribute and the extensions
// a2abus uses, with values that need percent-encoding.
func fullEvent(t *testing.T) cloudevents.Event {
	t.Helper()
	ev := cloudevents.New(cloudevents.CloudEventsVersionV1)
	ev.SetID("id with space/ünïcode")
	ev.SetSource("urn:a2abus:worker:w-1")
	ev.SetType(schemas.TypeTaskStatus)
	ev.SetSubject(`subject "quoted" 100%`)
	ev.SetTime(time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC))
	ev.SetDataSchema("https://a2abus.dev/schemas/status.json")
	ev.SetExtension(schemas.ExtSequence, schemas.SequenceString(42))
	ev.SetExtension(schemas.ExtTraceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ev.SetExtension(schemas.ExtA2AVersion, "1.0")
	if err := ev.SetData(contentJSON, map[string]any{"text": "héllo \"world\"", "n": 1}); err != nil {
		t.Fatal(err)
	}
	if err := ev.Validate(); err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestBinaryRoundTrip(t *testing.T) {
	ev := fullEvent(t)
	m := encodeMsg("a2a.events.x", ptr(outEventOf(&ev)))

	if m.Subject != "a2a.events.x" {
		t.Errorf("subject %q", m.Subject)
	}
	if got := m.Header.Get(nats.MsgIdHdr); got != ev.ID() {
		t.Errorf("Nats-Msg-Id = %q, want the ce id %q", got, ev.ID())
	}
	for h, want := range map[string]string{
		"ce-specversion":     "1.0",
		"ce-id":              "id%20with%20space/%C3%BCn%C3%AFcode",
		"ce-source":          "urn:a2abus:worker:w-1",
		"ce-type":            schemas.TypeTaskStatus,
		"ce-subject":         "subject%20%22quoted%22%20100%25",
		"ce-time":            "2030-01-02T03:04:05.123456789Z",
		"ce-datacontenttype": "application/json",
		"ce-dataschema":      "https://a2abus.dev/schemas/status.json",
		"ce-sequence":        "00000000000000000042",
		"ce-traceparent":     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"ce-a2aversion":      "1.0",
	} {
		if got := m.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	if m.Header.Get("Content-Type") != "" {
		t.Error("binary mode must not set a Content-Type header")
	}
	if !bytes.Equal(m.Data, ev.Data()) {
		t.Errorf("payload %s, want the event data %s", m.Data, ev.Data())
	}

	got, err := decodeMsg(m)
	if err != nil {
		t.Fatal(err)
	}
	if got.SpecVersion() != "1.0" || got.ID() != ev.ID() || got.Source() != ev.Source() || got.Type() != ev.Type() ||
		got.Subject() != ev.Subject() || !got.Time().Equal(ev.Time()) || got.DataContentType() != ev.DataContentType() ||
		got.DataSchema() != ev.DataSchema() {
		t.Errorf("round trip changed core attributes:\n got %s\nwant %s", got, ev)
	}
	for _, k := range []string{schemas.ExtSequence, schemas.ExtTraceparent, schemas.ExtA2AVersion} {
		if got.Extensions()[k] != ev.Extensions()[k] {
			t.Errorf("extension %s = %v, want %v", k, got.Extensions()[k], ev.Extensions()[k])
		}
	}
	if len(got.Extensions()) != len(ev.Extensions()) {
		t.Errorf("extensions %v, want %v", got.Extensions(), ev.Extensions())
	}
	var data map[string]any
	if err := decodeData(&got, &data); err != nil || data["text"] != "héllo \"world\"" {
		t.Errorf("data %v, %v", data, err)
	}
}

// newEvent is what every publisher uses: it stamps source, time and JSON
// data, drops empty extensions and refuses what CloudEvents does not allow.
// What it writes, in both modes, sdk-go reads back as a valid event with
// the same attributes.
func TestNewEvent(t *testing.T) {
	b := &Bus{source: schemas.Source("edge", "e-1")}
	item := schemas.WorkItem{TaskID: "t", Agent: "echo", Message: schemas.Message{MessageID: "m", Role: schemas.RoleUser,
		Parts: []schemas.Part{{Text: ptr("ctl \x01 \"q\" \\ <&> \u2028 ünï \n")}}}}
	ev, err := b.newEvent("e-id", schemas.TypeWorkExecute, "subj \"x\"", item,
		attr{schemas.ExtTraceparent, "00-aa-bb-01"}, attr{schemas.ExtA2AVersion, ""})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := encodeBatch("s", []outEvent{ev, ev})
	if err != nil {
		t.Fatal(err)
	}
	for mode, m := range map[string]*nats.Msg{"binary": encodeMsg("s", &ev), "structured": batch} {
		evs, err := decodeMsgs(m)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		got := evs[0]
		if got.Validate() != nil || got.Source() != "urn:a2abus:edge:e-1" || got.ID() != "e-id" || got.Subject() != "subj \"x\"" ||
			got.Type() != schemas.TypeWorkExecute || !got.Time().Equal(ev.time) || got.DataContentType() != "application/json" {
			t.Errorf("%s: event %s", mode, got)
		}
		if _, ok := got.Extensions()[schemas.ExtA2AVersion]; ok {
			t.Errorf("%s: empty extension was set", mode)
		}
		if got.Extensions()[schemas.ExtTraceparent] != "00-aa-bb-01" || len(got.Extensions()) != 1 {
			t.Errorf("%s: extensions %v", mode, got.Extensions())
		}
		var back schemas.WorkItem
		if err := decodeData(&got, &back); err != nil || !reflect.DeepEqual(back, item) {
			t.Errorf("%s: data %+v, %v", mode, back, err)
		}
	}
	if _, err := b.newEvent("x", schemas.TypeWorkExecute, "", make(chan int)); err == nil {
		t.Error("newEvent with unencodable data succeeded")
	}
	for name, bad := range map[string]func() (outEvent, error){
		"no id":     func() (outEvent, error) { return b.newEvent("", schemas.TypeWorkExecute, "", 1) },
		"no type":   func() (outEvent, error) { return b.newEvent("x", "", "", 1) },
		"no source": func() (outEvent, error) { return (&Bus{}).newEvent("x", schemas.TypeWorkExecute, "", 1) },
		"not UTF-8": func() (outEvent, error) { return b.newEvent("x\xff", schemas.TypeWorkExecute, "", 1) },
		"extension name": func() (outEvent, error) {
			return b.newEvent("x", schemas.TypeWorkExecute, "", 1, attr{"Trace-Parent", "v"})
		},
		"a core attribute": func() (outEvent, error) { return b.newEvent("x", schemas.TypeWorkExecute, "", 1, attr{"source", "v"}) },
		"extension text":   func() (outEvent, error) { return b.newEvent("x", schemas.TypeWorkExecute, "", 1, attr{"note", "\xff"}) },
	} {
		if _, err := bad(); err == nil {
			t.Errorf("%s: newEvent succeeded", name)
		}
	}
}

// outEventOf is ev as the writer takes it (tests write events read from
// elsewhere again): extension values as text, data as is.
func outEventOf(ev *cloudevents.Event) outEvent {
	e := outEvent{id: ev.ID(), source: ev.Source(), typ: ev.Type(), subject: ev.Subject(), time: ev.Time(),
		contentType: ev.DataContentType(), dataSchema: ev.DataSchema(), data: ev.Data()}
	e.jsonData = e.data != nil && jsonContent(e.contentType) && json.Valid(e.data)
	for _, k := range slices.Sorted(maps.Keys(ev.Extensions())) {
		e.ext = append(e.ext, attr{k, fmt.Sprint(ev.Extensions()[k])})
	}
	return e
}

// jsonContent reports whether ct says JSON (an event without one holds
// JSON in the JSON format).
func jsonContent(ct string) bool {
	mt, _, _ := strings.Cut(strings.ToLower(ct), ";")
	mt = strings.TrimSpace(mt)
	return mt == "" || mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json")
}

func ptr[T any](v T) *T { return &v }

// readHeaderFixture reads a file of "Name: value" lines (# comments) into
// NATS headers, values verbatim.
func readHeaderFixture(t *testing.T, name string) nats.Header {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "ce", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := nats.Header{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("%s: bad line %q", name, line)
		}
		h[k] = append(h[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return h
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ce", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A binary-mode event written by another implementation.
func TestDecodeBinaryFixture(t *testing.T) {
	m := &nats.Msg{Subject: "a2a.events.0b6f2a52-1c2d-4e5f-8a9b-0c1d2e3f4a5b", Header: readHeaderFixture(t, "binary.headers"), Data: readFixture(t, "binary.data.json")}
	ev, err := decodeMsg(m)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"id":      "9b2e4c1a-7d3f-4e8a-b6c5-1f2e3d4c5b6a",
		"source":  "urn:a2abus:worker:py-2",
		"type":    schemas.TypeTaskStatus,
		"subject": "0b6f2a52-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
	}
	got := map[string]string{"id": ev.ID(), "source": ev.Source(), "type": ev.Type(), "subject": ev.Subject()}
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("%s = %q, want %q", k, got[k], want[k])
		}
	}
	if !ev.Time().Equal(time.Date(2030, 1, 2, 3, 4, 5, 500_000_000, time.UTC)) {
		t.Errorf("time = %v", ev.Time())
	}
	if ev.Extensions()[schemas.ExtSequence] != schemas.SequenceString(7) {
		t.Errorf("sequence = %v", ev.Extensions()[schemas.ExtSequence])
	}
	if ev.Extensions()["note"] != `café "au lait" 100%` {
		t.Errorf("note = %q (lowercase escapes must decode)", ev.Extensions()["note"])
	}
	if ev.Extensions()[schemas.ExtTraceparent] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("traceparent = %v", ev.Extensions()[schemas.ExtTraceparent])
	}
	var st schemas.TaskStatusUpdateEvent
	if err := decodeData(&ev, &st); err != nil {
		t.Fatal(err)
	}
	if st.Status.State != schemas.TaskStateWorking || st.TaskID != ev.Subject() {
		t.Errorf("data = %+v", st)
	}

	// Re-encoding what was read gives the canonical form: uppercase
	// escapes, no quotes.
	re := encodeMsg(m.Subject, ptr(outEventOf(&ev)))
	if got := re.Header.Get("ce-note"); got != "caf%C3%A9%20%22au%20lait%22%20100%25" {
		t.Errorf("re-encoded note = %q", got)
	}
	if got := re.Header.Get("ce-source"); got != "urn:a2abus:worker:py-2" {
		t.Errorf("re-encoded source = %q", got)
	}
}

// A structured-mode event: the body is the JSON event format.
func TestDecodeStructuredFixture(t *testing.T) {
	body := readFixture(t, "structured.json")
	for _, ct := range []string{"application/cloudevents+json", "application/cloudevents+json; charset=utf-8", "Application/CloudEvents+JSON"} {
		t.Run(ct, func(t *testing.T) {
			// ce- headers next to a structured body are not read: the body
			// is the event.
			h := nats.Header{"Content-Type": []string{ct}, "ce-id": []string{"ignored"}}
			ev, err := decodeMsg(&nats.Msg{Subject: schemas.SubjectWork("echo"), Header: h, Data: body})
			if err != nil {
				t.Fatal(err)
			}
			if ev.ID() != "3f0c6b1e-8a8e-4b7e-9d0a-5b8d2f7c4e11" || ev.Source() != "urn:a2abus:edge:py-1" ||
				ev.Type() != schemas.TypeWorkExecute || ev.Subject() != "0b6f2a52-1c2d-4e5f-8a9b-0c1d2e3f4a5b" ||
				ev.DataContentType() != "application/json" || ev.DataSchema() != "https://a2abus.dev/schemas/work-item.json" {
				t.Errorf("attributes %s", ev)
			}
			if !ev.Time().Equal(time.Date(2030, 1, 2, 3, 4, 5, 123_000_000, time.UTC)) {
				t.Errorf("time %v", ev.Time())
			}
			ext := ev.Extensions()
			if ext[schemas.ExtSequence] != schemas.SequenceString(42) || ext[schemas.ExtA2AVersion] != "1.0" ||
				ext[schemas.ExtTraceparent] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
				t.Errorf("extensions %v", ext)
			}
			var item schemas.WorkItem
			if err := decodeData(&ev, &item); err != nil {
				t.Fatal(err)
			}
			if item.TaskID != ev.Subject() || item.Agent != "echo" || item.Message.Text() != `café "quoted" 100%` {
				t.Errorf("data %+v", item)
			}
		})
	}
}

// A structured event decodes to the same work as a binary one, end to end
// through a WorkConsumer: other implementations may publish either mode.
func TestStructuredWorkIsConsumed(t *testing.T) {
	b := newTestBus(t, Config{})
	wc := workConsumer(t, b, "echo")
	m := nats.NewMsg(schemas.SubjectWork("echo"))
	m.Header.Set("Content-Type", "application/cloudevents+json")
	m.Data = readFixture(t, "structured.json")
	if _, err := b.js.PublishMsg(testCtx(t), m); err != nil {
		t.Fatal(err)
	}
	w := fetchOne(t, wc)
	if w.Err != nil {
		t.Fatal(w.Err)
	}
	if w.EventID != "3f0c6b1e-8a8e-4b7e-9d0a-5b8d2f7c4e11" || w.Item.TaskID != "0b6f2a52-1c2d-4e5f-8a9b-0c1d2e3f4a5b" ||
		w.Traceparent != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("work %+v", w)
	}
	_ = w.Ack()
}

func TestDecodeRejectsMalformed(t *testing.T) {
	ev := fullEvent(t)
	good := encodeMsg("s", ptr(outEventOf(&ev)))
	with := func(mod func(h nats.Header)) *nats.Msg {
		h := nats.Header{}
		for k, v := range good.Header {
			h[k] = append([]string(nil), v...)
		}
		mod(h)
		return &nats.Msg{Subject: "s", Header: h, Data: good.Data}
	}
	structured := func(body string) *nats.Msg {
		return &nats.Msg{Subject: "s", Header: nats.Header{"Content-Type": []string{"application/cloudevents+json"}}, Data: []byte(body)}
	}
	for name, m := range map[string]*nats.Msg{
		"no headers":                   {Subject: "s", Data: []byte(`{"specversion":"1.0"}`)},
		"plain JSON content type":      {Subject: "s", Header: nats.Header{"Content-Type": []string{"application/json"}}, Data: []byte(`{"specversion":"1.0","id":"x","source":"s","type":"t"}`)},
		"no ce-specversion":            with(func(h nats.Header) { delete(h, "ce-specversion") }),
		"specversion 0.3":              with(func(h nats.Header) { h["ce-specversion"] = []string{"0.3"} }),
		"specversion 2.0":              with(func(h nats.Header) { h["ce-specversion"] = []string{"2.0"} }),
		"no id":                        with(func(h nats.Header) { delete(h, "ce-id") }),
		"no source":                    with(func(h nats.Header) { delete(h, "ce-source") }),
		"no type":                      with(func(h nats.Header) { delete(h, "ce-type") }),
		"bad time":                     with(func(h nats.Header) { h["ce-time"] = []string{"yesterday"} }),
		"truncated escape":             with(func(h nats.Header) { h["ce-subject"] = []string{"abc%2"} }),
		"bad escape":                   with(func(h nats.Header) { h["ce-id"] = []string{"%zz"} }),
		"invalid UTF-8":                with(func(h nats.Header) { h["ce-subject"] = []string{"%C3%28"} }),
		"bad extension name":           with(func(h nats.Header) { h["ce-not-alnum"] = []string{"x"} }),
		"structured, not JSON":         structured(`not json`),
		"structured, no id":            structured(`{"specversion":"1.0","source":"s","type":"t"}`),
		"structured, specversion 2.0":  structured(`{"specversion":"2.0","id":"x","source":"s","type":"t"}`),
		"structured, no specversion":   structured(`{"id":"x","source":"s","type":"t"}`),
		"structured batch is not mode": structured(`[{"specversion":"1.0","id":"x","source":"s","type":"t"}]`),
	} {
		t.Run(name, func(t *testing.T) {
			ev, err := decodeMsg(m)
			if err == nil {
				t.Fatalf("decoded %s", ev)
			}
			if !errors.Is(err, errMalformedEvent) {
				t.Fatalf("error %v does not wrap errMalformedEvent", err)
			}
		})
	}
}

func TestDecodeDataRejectsBadJSON(t *testing.T) {
	ev := cloudevents.New()
	ev.SetType(schemas.TypeWorkExecute)
	ev.DataEncoded = []byte("{not json")
	var item schemas.WorkItem
	if err := decodeData(&ev, &item); !errors.Is(err, errMalformedEvent) {
		t.Fatalf("decodeData: %v, want errMalformedEvent", err)
	}
	ev.DataEncoded = []byte(`{"taskId": 5}`)
	if err := decodeData(&ev, &item); !errors.Is(err, errMalformedEvent) {
		t.Fatalf("decodeData with a wrong field type: %v", err)
	}
	var v json.RawMessage
	ev.DataEncoded = []byte(`{"ok":true}`)
	if err := decodeData(&ev, &v); err != nil || string(v) != `{"ok":true}` {
		t.Fatalf("decodeData = %s, %v", v, err)
	}
}

// The events of one write travel as one JSON batch. A batch written by hand,
// as a worker in another language would write it (numbers where a2abus
// writes strings included), reads back as the write's events in order; a
// batch a2abus writes round-trips.
func TestEventBatch(t *testing.T) {
	fixture := `[
	 {"specversion":"1.0","id":"e1","source":"urn:other:worker","type":"` + schemas.TypeTaskStatus + `",
	  "subject":"t","datacontenttype":"application/json","sequence":"00000000000000000007",
	  "data":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}},
	 {"specversion":"1.0","id":"e2","source":"urn:other:worker","type":"` + schemas.TypeTaskArtifact + `",
	  "subject":"t","datacontenttype":"application/json","sequence":"00000000000000000007","sequenceindex":1,
	  "data":{"taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"text":"hi"}]}}}
	]`
	m := &nats.Msg{Subject: "a2a.events.t", Header: nats.Header{"Content-Type": {contentBatch}}, Data: []byte(fixture)}
	us, err := decodeUpdates(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 2 || us[0].Status == nil || us[1].Artifact == nil ||
		us[0].Cursor != EventCursor(7, 0) || us[1].Cursor != EventCursor(7, 1) || us[1].Artifact.Artifact.Parts[0].Text == nil {
		t.Fatalf("fixture batch read as %+v", us)
	}

	// The hub's direct reading of a batch and the general one (sdk-go's
	// events, then their data) agree.
	general, err := decodeMsgs(m)
	if err != nil || len(general) != 2 {
		t.Fatal(err)
	}
	for i := range general {
		u, err := decodeUpdate(&general[i])
		if err != nil || !reflect.DeepEqual(u, us[i]) {
			t.Fatalf("event %d: read directly %+v, generally %+v (%v)", i, us[i], u, err)
		}
	}

	b := &Bus{source: "urn:a2abus:test"}
	var evs []outEvent
	for i, data := range []any{us[0].Status, us[1].Artifact} {
		ext := []attr{{schemas.ExtSequence, schemas.SequenceString(9)}}
		if i > 0 {
			ext = append(ext, attr{schemas.ExtSequenceIndex, "1"})
		}
		typ := schemas.TypeTaskStatus
		if i > 0 {
			typ = schemas.TypeTaskArtifact
		}
		ev, err := b.newEvent(fmt.Sprint("id-", i), typ, "t", data, ext...)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	bm, err := encodeBatch("a2a.events.t", evs)
	if err != nil {
		t.Fatal(err)
	}
	if bm.Header.Get(nats.MsgIdHdr) != "id-1" {
		t.Errorf("Nats-Msg-Id %q, want the last event's id", bm.Header.Get(nats.MsgIdHdr))
	}
	back, err := decodeUpdates(bm)
	if err != nil || len(back) != 2 || back[0].Cursor != EventCursor(9, 0) || back[1].Cursor != EventCursor(9, 1) ||
		back[0].Status.Status.State != schemas.TaskStateWorking || back[1].Artifact.Artifact.ArtifactID != "a" {
		t.Fatalf("round trip: %+v, %v", back, err)
	}

	// A batch is refused whole when any part of it is wrong.
	for name, data := range map[string]string{
		"not json":        `[{"specversion":`,
		"not an array":    `{"specversion":"1.0","id":"x","source":"s","type":"` + schemas.TypeTaskStatus + `"}`,
		"empty":           `[]`,
		"old specversion": `[{"specversion":"0.3","id":"x","source":"s","type":"` + schemas.TypeTaskStatus + `","sequence":"1","data":{}}]`,
		"no id":           `[{"specversion":"1.0","source":"s","type":"` + schemas.TypeTaskStatus + `","sequence":"1","data":{}}]`,
		"wrong type":      `[{"specversion":"1.0","id":"x","source":"s","type":"` + schemas.TypeWorkExecute + `","sequence":"1","data":{}}]`,
		"bad index":       `[{"specversion":"1.0","id":"x","source":"s","type":"` + schemas.TypeTaskStatus + `","sequence":"1","sequenceindex":"4096","data":{}}]`,
	} {
		_, err := decodeUpdates(&nats.Msg{Subject: "a2a.events.t", Header: nats.Header{"Content-Type": {contentBatch}}, Data: []byte(data)})
		if !errors.Is(err, errMalformedEvent) {
			t.Errorf("%s: err %v, want a malformed-event error", name, err)
		}
	}
}

// A batch is written into the buffer sized for it: structuredSize is never
// short for events as a2abus writes them.
func TestStructuredSizeFits(t *testing.T) {
	b := &Bus{source: schemas.Source("worker", "w-1")}
	var evs []outEvent
	sized := 2
	for i, data := range []any{
		schemas.TaskStatusUpdateEvent{TaskID: schemas.NewID(), ContextID: schemas.NewID(), Status: schemas.TaskStatus{State: schemas.TaskStateWorking, Timestamp: schemas.Now()}},
		map[string]string{"k": "v"},
		nil,
	} {
		ev, err := b.newEvent(schemas.NewID(), schemas.TypeTaskArtifact, schemas.NewID(), data,
			attr{schemas.ExtSequence, schemas.SequenceString(1 << 40)}, attr{schemas.ExtSequenceIndex, strconv.Itoa(4095 - i)})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		sized += structuredSize(&ev)
		if got, want := len(appendStructured(nil, &ev)), structuredSize(&ev); got > want {
			t.Errorf("event %d: %d bytes written, %d estimated", i, got, want)
		}
	}
	m, err := encodeBatch("s", evs)
	if err != nil {
		t.Fatal(err)
	}
	if cap(m.Data) != sized {
		t.Errorf("batch of %d bytes in a buffer of %d, sized %d: it grew while written", len(m.Data), cap(m.Data), sized)
	}
}
