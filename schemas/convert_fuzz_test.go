package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Fuzzers of the converters between the 1.0 model and the 0.3 and older
// dialects, both ways: what a client sends (messages, tasks/send params)
// and what an agent answers (0.3 results, the older dialect's tasks and
// stream events). Each asserts that a refusal is an Error of the
// converter's row (naming its field at the start of its message when it
// names one), and that what converts is stable: converted back to its
// dialect and read again, it is the same. Seeds are below and in
// testdata/fuzz; `go test` runs them, .ci/run fuzzes each for a while.

// wantRow fails t unless err is an *Error of row whose "field" metadata,
// when set, starts its message.
func wantRow(t *testing.T, err error, row *Error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !errors.Is(e, row) {
		t.Fatalf("error %T %v is not a %s occurrence", err, err, row.Reason)
	}
	if f := e.Metadata["field"]; f != "" && !strings.HasPrefix(e.Message, f+" ") {
		t.Fatalf("error names field %q but its message does not start with it: %q", f, e.Message)
	}
}

// sameJSON fails t unless a and b encode alike.
func sameJSON(t *testing.T, what string, a, b any) {
	t.Helper()
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	if erra != nil || errb != nil {
		t.Fatalf("%s: encoding failed: %v, %v", what, erra, errb)
	}
	if !bytes.Equal(ja, jb) {
		t.Fatalf("%s changed in a round trip:\n%s\n%s", what, ja, jb)
	}
}

// reread encodes v and decodes it into a new T, failing t if either fails.
func reread[T any](t *testing.T, v any) T {
	t.Helper()
	var out T
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		t.Fatalf("re-reading %T: %v", v, err)
	}
	return out
}

// convertsStably checks one input of a fuzzer of the converter from a
// dialect's shape W to the 1.0 value V: b, if it decodes as W, converts or
// is refused as ErrInvalidParams; what converts, written back to W (back,
// which may read the input), encoded and read again, converts to a value
// that writes back the same.
func convertsStably[W, V any](t *testing.T, b []byte, from func(W) (V, error), back func(in W, v V) W) {
	t.Helper()
	var in W
	if json.Unmarshal(b, &in) != nil {
		return
	}
	v, err := from(in)
	if err != nil {
		wantRow(t, err, ErrInvalidParams)
		return
	}
	out := back(in, v)
	v2, err := from(reread[W](t, out))
	if err != nil {
		t.Fatalf("%T converted back to %T is refused: %v", v, out, err)
	}
	sameJSON(t, fmt.Sprintf("%T", out), out, back(in, v2))
}

var v03PartSeeds = []string{
	`{"kind":"text","text":"hi","metadata":{"a2abus/mediaType":"text/markdown","a2abus/filename":"n.md"}}`,
	`{"kind":"file","file":{"bytes":"aGk=","mimeType":"text/plain","name":"a.txt"}}`,
	`{"kind":"file","file":{"bytes":"_-8="}}`,
	`{"kind":"file","file":{"uri":"https://x.example/a"}}`,
	`{"kind":"data","data":{"value":[1]},"metadata":{"a2abus/wrapped":true,"a2abus/mediaType":"-"}}`,
	`{"kind":"data","data":{"k":1}}`,
	`{"kind":"file","file":{"bytes":"***"}}`,
}

func FuzzV03Message(f *testing.F) {
	for _, p := range v03PartSeeds {
		f.Add([]byte(`{"kind":"message","messageId":"m","contextId":"c","taskId":"t","role":"user","parts":[` + p + `],"metadata":{"k":1},"referenceTaskIds":["r"]}`))
	}
	f.Add([]byte(`{"kind":"message","messageId":"m","role":"robot","parts":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		convertsStably(t, b, MessageFromV03, func(_ V03Message, m Message) V03Message { return MessageToV03(m) })
	})
}

func FuzzV03Result(f *testing.F) {
	for _, s := range []string{
		`{"kind":"task","id":"t","contextId":"c","status":{"state":"completed","timestamp":"2025-04-02T16:59:25.331844","message":{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"done"}]}},"artifacts":[{"artifactId":"a","parts":[{"kind":"file","file":{"uri":"https://x.example/f","mimeType":"text/csv"}}]}],"history":[{"kind":"message","messageId":"u","role":"user","parts":[{"kind":"data","data":{"k":[1]}}]}]}`,
		`{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"hi"}]}`,
		`{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"input-required","timestamp":"9999-12-31T23:00:00-05:00"},"final":true}`,
		`{"kind":"artifact-update","taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"kind":"file","file":{"bytes":""}}]},"append":true,"lastChunk":true}`,
		`{"kind":"status-update","status":{"state":"working","timestamp":"0000-01-01T00:30:00+01:00"}}`,
		`{"kind":"task","status":{"state":"bogus"}}`, `{"kind":"video"}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ResultFromV03(b)
		if err != nil {
			wantRow(t, err, ErrInvalidAgentResponse)
			return
		}
		back, err := json.Marshal(StreamResponseToV03(r))
		if err != nil {
			t.Fatalf("encoding the result as 0.3: %v", err)
		}
		r2, err := ResultFromV03(back)
		if err != nil {
			t.Fatalf("the result converted back to 0.3, %s, is refused: %v", back, err)
		}
		sameJSON(t, "the result", r, r2)
	})
}

var legacyPartSeeds = []string{
	`{"type":"text","text":"hi"}`,
	`{"type":"file","file":{"bytes":"aGk=","mimeType":"text/plain","name":"a.txt"}}`,
	`{"type":"file","file":{"uri":"https://x.example/a","name":"a"}}`,
	`{"type":"data","data":{"k":[1,{"j":null}]}}`,
	`{"type":"data","data":{}}`,
	`{"type":"data","data":"x"}`,
}

func FuzzLegacyMessage(f *testing.F) {
	for _, p := range legacyPartSeeds {
		f.Add([]byte(`{"role":"user","parts":[` + p + `],"metadata":{"k":"v"}}`))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Compared in the dialect's shape, which has no message ids (each
		// reading makes one).
		convertsStably(t, b, LegacyMessageToV1, func(_ LegacyMessage, m Message) LegacyMessage { return LegacyMessageFromV1(m) })
	})
}

func FuzzLegacyTask(f *testing.F) {
	for _, p := range legacyPartSeeds {
		f.Add([]byte(`{"id":"t1","sessionId":"s","status":{"state":"completed","timestamp":"2025-04-02T16:59:25Z","message":{"role":"agent","parts":[` + p + `]}},"artifacts":[{"index":3,"parts":[` + p + `],"lastChunk":true}],"history":[{"role":"user","parts":[` + p + `]}]}`))
	}
	f.Add([]byte(`{"id":"t","status":{"state":"rejected","timestamp":"9999-12-31T23:59:59-01:00"}}`))
	f.Add([]byte(`{"status":{"state":"working"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		// The dialect has fewer states (REJECTED is "failed") and no
		// message ids: compared in its shape, from the first answer on,
		// under the client's own task id.
		convertsStably(t, b, LegacyTaskToV1, func(in LegacyTask, task Task) LegacyTask { return LegacyTaskFromV1(task, in.ID) })
	})
}

func FuzzLegacyAgentAnswer(f *testing.F) {
	for _, s := range []string{
		`{"id":"t","sessionId":"s","status":"completed","messages":[{"role":"user","parts":[{"type":"text","text":"q"}]},{"role":"agent","parts":[{"type":"text","text":"a"}]}],"artifacts":[]}`,
		`{"id":"t","status":{"state":"input_required","message":{"role":"Agent","parts":[{"kind":"text","text":"?"}]},"timestamp":"bad"},"history":[]}`,
		`{"id":"t","status":{"state":"Cancelled"},"artifacts":[{"parts":[{"type":"file","name":"a.bin","mime_type":"application/octet-stream","data":"AAE="},{"type":"data","data":[1,2]},{"type":"data","mimeType":"application/x","data":{"k":1}}]}]}`,
		`{"id":"t","artifact":{"index":2,"append":true,"parts":[{"text":"chunk"}]},"final":false}`,
		`{"id":"t","status":{"state":"working","timestamp":"9999-12-31T23:00:00-05:00"},"final":false}`,
		`{"id":"t","status":"unknown"}`, `{"status":7}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if task, err := LegacyAgentTaskToV1(b); err != nil {
			wantRow(t, err, ErrInvalidAgentResponse)
		} else {
			out := LegacyTaskFromV1(task, task.ID)
			back, _ := json.Marshal(out)
			task2, err := LegacyAgentTaskToV1(back)
			if err != nil {
				t.Fatalf("the task as a2abus answers it in the dialect, %s, is refused: %v", back, err)
			}
			sameJSON(t, "the task", out, LegacyTaskFromV1(task2, task2.ID))
		}
		ev, _, err := LegacyAgentEventToV1(b, "ctx")
		if err != nil {
			wantRow(t, err, ErrInvalidAgentResponse)
			return
		}
		index := func(string) int { return 0 }
		out := LegacyStreamEvent(ev, "t", index)
		back, _ := json.Marshal(out)
		ev2, _, err := LegacyAgentEventToV1(back, "ctx")
		if err != nil {
			t.Fatalf("the event as a2abus streams it in the dialect, %s, is refused: %v", back, err)
		}
		sameJSON(t, "the event", out, LegacyStreamEvent(ev2, "t", index))
	})
}
