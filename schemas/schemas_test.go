package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Table tests of the vocabulary: the state machine, the error table, the
// ProtoJSON wire shapes, validation, the task record folds and the names.

var vtAllStates = []TaskState{
	TaskStateUnspecified, TaskStateSubmitted, TaskStateWorking, TaskStateCompleted, TaskStateFailed,
	TaskStateCanceled, TaskStateInputRequired, TaskStateRejected, TaskStateAuthRequired,
}

func TestVocabStateClasses(t *testing.T) {
	for _, c := range []struct {
		s                                     TaskState
		valid, terminal, interrupted, settled bool
	}{
		{TaskStateUnspecified, false, false, false, false},
		{TaskStateSubmitted, true, false, false, false},
		{TaskStateWorking, true, false, false, false},
		{TaskStateCompleted, true, true, false, true},
		{TaskStateFailed, true, true, false, true},
		{TaskStateCanceled, true, true, false, true},
		{TaskStateRejected, true, true, false, true},
		{TaskStateInputRequired, true, false, true, true},
		{TaskStateAuthRequired, true, false, true, true},
		{"", false, false, false, false},
		{"TASK_STATE_DONE", false, false, false, false},
		{"task_state_completed", false, false, false, false},
	} {
		t.Run(string(c.s), func(t *testing.T) {
			if got := c.s.Valid(); got != c.valid {
				t.Errorf("Valid = %v", got)
			}
			if got := c.s.Terminal(); got != c.terminal {
				t.Errorf("Terminal = %v", got)
			}
			if got := c.s.Interrupted(); got != c.interrupted {
				t.Errorf("Interrupted = %v", got)
			}
			if got := c.s.Settled(); got != c.settled {
				t.Errorf("Settled = %v", got)
			}
		})
	}
}

func TestVocabCanTransition(t *testing.T) {
	// The named rules first.
	for _, c := range []struct {
		name     string
		from, to TaskState
		ok       bool
	}{
		{"submitted starts working", TaskStateSubmitted, TaskStateWorking, true},
		{"submitted may end at once", TaskStateSubmitted, TaskStateRejected, true},
		{"submitted may be interrupted", TaskStateSubmitted, TaskStateInputRequired, true},
		{"working repeats (a new status message)", TaskStateWorking, TaskStateWorking, true},
		{"working completes", TaskStateWorking, TaskStateCompleted, true},
		{"working asks for input", TaskStateWorking, TaskStateInputRequired, true},
		{"working asks for auth", TaskStateWorking, TaskStateAuthRequired, true},
		{"working never goes back to the queue", TaskStateWorking, TaskStateSubmitted, false},
		{"input-required continues (edge re-queues)", TaskStateInputRequired, TaskStateSubmitted, true},
		{"input-required resumes", TaskStateInputRequired, TaskStateWorking, true},
		{"auth-required ends", TaskStateAuthRequired, TaskStateCanceled, true},
		{"completed absorbs", TaskStateCompleted, TaskStateWorking, false},
		{"canceled absorbs a late completion", TaskStateCanceled, TaskStateCompleted, false},
		{"failed absorbs a repeat", TaskStateFailed, TaskStateFailed, false},
		{"to unspecified", TaskStateWorking, TaskStateUnspecified, false},
		{"to empty", TaskStateSubmitted, "", false},
		{"to unknown", TaskStateWorking, "TASK_STATE_DONE", false},
		{"from unspecified", TaskStateUnspecified, TaskStateWorking, false},
		{"from unknown", "TASK_STATE_DONE", TaskStateWorking, false},
	} {
		if got := CanTransition(c.from, c.to); got != c.ok {
			t.Errorf("%s: CanTransition(%s, %s) = %v", c.name, c.from, c.to, got)
		}
	}
	// Then every pair of states.
	for _, from := range vtAllStates {
		for _, to := range append(vtAllStates, "", "TASK_STATE_DONE") {
			var want bool
			switch {
			case !to.Valid(), from.Terminal(), !from.Valid():
				want = false
			case from.Interrupted(), from == TaskStateSubmitted:
				want = true
			case from == TaskStateWorking:
				want = to != TaskStateSubmitted
			}
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %q) = %v, want %v", from, to, got, want)
			}
		}
	}
}

func TestVocabErrorTableRows(t *testing.T) {
	// The table as spec v1.0.1 §3.3.2/§5.4/§9.5 has it (HTTP per v1.0.1).
	want := []struct {
		row    *Error
		code   int
		reason string
		http   int
		grpc   string
	}{
		{ErrParse, -32700, "PARSE_ERROR", 400, "INVALID_ARGUMENT"},
		{ErrInvalidRequest, -32600, "INVALID_REQUEST", 400, "INVALID_ARGUMENT"},
		{ErrMethodNotFound, -32601, "METHOD_NOT_FOUND", 404, "UNIMPLEMENTED"},
		{ErrInvalidParams, -32602, "INVALID_PARAMS", 400, "INVALID_ARGUMENT"},
		{ErrInternal, -32603, "INTERNAL_ERROR", 500, "INTERNAL"},
		{ErrTaskNotFound, -32001, "TASK_NOT_FOUND", 404, "NOT_FOUND"},
		{ErrTaskNotCancelable, -32002, "TASK_NOT_CANCELABLE", 400, "FAILED_PRECONDITION"},
		{ErrPushNotSupported, -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", 400, "FAILED_PRECONDITION"},
		{ErrUnsupportedOperation, -32004, "UNSUPPORTED_OPERATION", 400, "FAILED_PRECONDITION"},
		{ErrContentTypeNotSupported, -32005, "CONTENT_TYPE_NOT_SUPPORTED", 400, "INVALID_ARGUMENT"},
		{ErrInvalidAgentResponse, -32006, "INVALID_AGENT_RESPONSE", 500, "INTERNAL"},
		{ErrExtendedCardNotConfigured, -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", 400, "FAILED_PRECONDITION"},
		{ErrExtensionSupportRequired, -32008, "EXTENSION_SUPPORT_REQUIRED", 400, "FAILED_PRECONDITION"},
		{ErrVersionNotSupported, -32009, "VERSION_NOT_SUPPORTED", 400, "FAILED_PRECONDITION"},
		// A2A 1.1 (dev-1.1 §5.4).
		{ErrTaskGenerationMismatch, -32010, "TASK_GENERATION_MISMATCH", 409, "ABORTED"},
		{ErrUnavailable, -31503, "UNAVAILABLE", 503, "UNAVAILABLE"},
		{ErrRateLimited, -31429, "RATE_LIMITED", 429, "RESOURCE_EXHAUSTED"},
		// Authentication's, with the codes of the official Go SDK.
		{ErrUnauthenticated, -31401, "UNAUTHENTICATED", 401, "UNAUTHENTICATED"},
		{ErrPermissionDenied, -31403, "UNAUTHORIZED", 403, "PERMISSION_DENIED"},
		// a2abus's, for a decision another settled first (approvals).
		{ErrConflict, -31409, "CONFLICT", 409, "ABORTED"},
	}
	if len(ErrorTable) != len(want) {
		t.Errorf("ErrorTable has %d rows, want %d", len(ErrorTable), len(want))
	}
	for _, w := range want {
		t.Run(w.reason, func(t *testing.T) {
			r := w.row
			if r.Code != w.code || r.Reason != w.reason || r.HTTPStatus != w.http || r.GRPCStatus != w.grpc {
				t.Errorf("row = %d %s %d %s", r.Code, r.Reason, r.HTTPStatus, r.GRPCStatus)
			}
			if r.Message == "" || r.Metadata != nil || r.kind != nil {
				t.Errorf("row %+v: needs a message, no metadata, no kind", r)
			}
			found := false
			for _, e := range ErrorTable {
				found = found || e == r
			}
			if !found {
				t.Error("not in ErrorTable")
			}
			if ErrorByReason(w.reason) != r {
				t.Errorf("ErrorByReason(%s) = %v", w.reason, ErrorByReason(w.reason))
			}
		})
	}
	// Distinct (code, reason); distinct reasons; distinct codes but for
	// UNAVAILABLE, which shares the internal-error code.
	pairs, reasons, codes := map[[2]any]bool{}, map[string]bool{}, map[int]*Error{}
	for _, e := range ErrorTable {
		p := [2]any{e.Code, e.Reason}
		if pairs[p] || reasons[e.Reason] {
			t.Errorf("duplicate row %d %s", e.Code, e.Reason)
		}
		pairs[p], reasons[e.Reason] = true, true
		if prev, ok := codes[e.Code]; ok && !(prev == ErrInternal && e == ErrUnavailable) {
			t.Errorf("code %d shared by %s and %s", e.Code, prev.Reason, e.Reason)
		} else if !ok {
			codes[e.Code] = e
		}
	}
	for _, c := range []int{-32700, -32600, -32601, -32602, -32603, -32001, -32002, -32003, -32004, -32005, -32006, -32007, -32008, -32009} {
		if codes[c] == nil {
			t.Errorf("code %d missing", c)
		}
	}
	if ErrorByCode(-32603) != ErrInternal {
		t.Error("a shared code must resolve to the standard row")
	}
	if ErrorByCode(-32099) != nil || ErrorByReason("NOPE") != nil {
		t.Error("unknown codes and reasons have no row")
	}
	if ErrorDomain != "a2a-protocol.org" {
		t.Errorf("ErrorDomain %q", ErrorDomain)
	}
}

func TestVocabErrorOccurrences(t *testing.T) {
	e := Errorf(ErrTaskNotFound, "task %s not found", "t-1")
	if !errors.Is(e, ErrTaskNotFound) || e.Message != "task t-1 not found" || e.Error() != e.Message {
		t.Fatalf("Errorf = %+v", e)
	}
	for _, other := range ErrorTable {
		if other != ErrTaskNotFound && errors.Is(e, other) {
			t.Errorf("occurrence of TASK_NOT_FOUND also is %s", other.Reason)
		}
	}
	if e.Code != ErrTaskNotFound.Code || e.HTTPStatus != 404 || ErrTaskNotFound.Message != "task not found" {
		t.Fatalf("Errorf must copy the row and leave it alone: %+v / %+v", e, ErrTaskNotFound)
	}
	if !errors.Is(fmt.Errorf("bus: get: %w", e), ErrTaskNotFound) {
		t.Error("errors.Is through a wrap")
	}
	if errors.Is(Errorf(ErrInternal, "x"), ErrUnavailable) || errors.Is(Errorf(ErrUnavailable, "x"), ErrInternal) {
		t.Error("rows sharing a code are still different errors")
	}

	// With adds metadata on a copy: the row, and an occurrence it is
	// called on, keep theirs.
	w := ErrTaskNotFound.With("taskId", "t-1")
	if !errors.Is(w, ErrTaskNotFound) || w.Metadata["taskId"] != "t-1" || ErrTaskNotFound.Metadata != nil {
		t.Fatalf("row.With = %+v, row %+v", w, ErrTaskNotFound)
	}
	w2 := w.With("extra", "x")
	if len(w.Metadata) != 1 || len(w2.Metadata) != 2 || !errors.Is(w2, ErrTaskNotFound) {
		t.Fatalf("With on an occurrence changed it: %v / %v", w.Metadata, w2.Metadata)
	}
	e2 := e.With("taskId", "t-1")
	if e.Metadata != nil || e2.Message != e.Message || !errors.Is(e2, ErrTaskNotFound) {
		t.Fatalf("occurrence.With = %+v (was %+v)", e2, e)
	}

	// AsError: protocol errors pass through, anything else is internal
	// without leaking the cause.
	if got := AsError(errors.New("db password wrong")); !errors.Is(got, ErrInternal) || strings.Contains(got.Message, "password") || got.Code != -32603 {
		t.Errorf("AsError(plain) = %+v", got)
	}
	if got := AsError(fmt.Errorf("wrapped: %w", e2)); got != e2 {
		t.Errorf("AsError(wrapped occurrence) = %+v", got)
	}
	if got := AsError(ErrUnsupportedOperation); got != ErrUnsupportedOperation {
		t.Errorf("AsError(row) = %+v", got)
	}
}

func TestVocabWireShapes(t *testing.T) {
	ts := &Timestamp{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	msg := Message{
		MessageID: "m-1", ContextID: "c-1", TaskID: "t-1", Role: RoleUser,
		Parts: []Part{
			TextPart("hi"),
			FilePart([]byte{0, 1, 0xfe, 0xff}, "a.bin", "application/octet-stream"),
			URLPart("https://x.example/f", "f", "text/plain"),
			DataPart(map[string]int{"k": 1}),
		},
		Metadata: map[string]any{"b": 2, "a": "1"}, Extensions: []string{"urn:x"}, ReferenceTaskIDs: []string{"t-0"},
	}
	task := Task{
		ID: "t-1", ContextID: "c-1",
		Status:    TaskStatus{State: TaskStateWorking, Message: &Message{MessageID: "m-2", Role: RoleAgent, Parts: []Part{TextPart("…")}}, Timestamp: ts},
		Artifacts: []Artifact{{ArtifactID: "a-1", Name: "n", Parts: []Part{TextPart("x")}}},
		History:   []Message{msg},
		Metadata:  map[string]any{"k": true},
	}
	const want = `{"id":"t-1","contextId":"c-1",` +
		`"status":{"state":"TASK_STATE_WORKING","message":{"messageId":"m-2","role":"ROLE_AGENT","parts":[{"text":"…"}]},"timestamp":"2026-01-02T03:04:05.000Z"},` +
		`"artifacts":[{"artifactId":"a-1","name":"n","parts":[{"text":"x"}]}],` +
		`"history":[{"messageId":"m-1","contextId":"c-1","taskId":"t-1","role":"ROLE_USER","parts":[` +
		`{"text":"hi"},` +
		`{"raw":"AAH+/w==","filename":"a.bin","mediaType":"application/octet-stream"},` +
		`{"url":"https://x.example/f","filename":"f","mediaType":"text/plain"},` +
		`{"data":{"k":1},"mediaType":"application/json"}],` +
		`"metadata":{"a":"1","b":2},"extensions":["urn:x"],"referenceTaskIds":["t-0"]}],` +
		`"metadata":{"k":true}}`
	b, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Fatalf("Task JSON\n got %s\nwant %s", b, want)
	}
	var back Task
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if b2, _ := json.Marshal(back); string(b2) != want {
		t.Fatalf("round trip\n got %s\nwant %s", b2, want)
	}
	if !back.Status.Timestamp.Equal(ts.Time) || back.Status.Timestamp.Location() != time.UTC {
		t.Errorf("timestamp %v", back.Status.Timestamp)
	}
	if p := back.History[0].Parts[1]; string(p.Raw) != "\x00\x01\xfe\xff" || p.Text != nil || p.URL != nil || p.Data != nil {
		t.Errorf("raw part decoded as %+v", p)
	}

	// Unset optionals are left out; required scalars are always written.
	for _, c := range []struct {
		v    any
		want string
	}{
		{Message{MessageID: "m", Role: RoleUser, Parts: []Part{TextPart("x")}}, `{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}`},
		{Task{ID: "t", Status: TaskStatus{State: TaskStateSubmitted}}, `{"id":"t","status":{"state":"TASK_STATE_SUBMITTED"}}`},
		{TaskStatusUpdateEvent{TaskID: "t", ContextID: "c", Status: TaskStatus{State: TaskStateCompleted}}, `{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}`},
		{TaskArtifactUpdateEvent{TaskID: "t", ContextID: "c", Artifact: Artifact{ArtifactID: "a", Parts: []Part{TextPart("")}}, Append: true, LastChunk: true}, `{"taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"text":""}]},"append":true,"lastChunk":true}`},
		{TextPart(""), `{"text":""}`},
		{Timestamp{time.Date(2026, 1, 2, 5, 4, 5, 123456789, time.FixedZone("x", 2*3600))}, `"2026-01-02T03:04:05.123Z"`},
		{WorkItem{TaskID: "t", ContextID: "c", Agent: "a", Message: Message{MessageID: "m", Role: RoleUser, Parts: []Part{TextPart("x")}}}, `{"taskId":"t","contextId":"c","agent":"a","message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}`},
		{CancelNotice{TaskID: "t", Agent: "a"}, `{"taskId":"t","agent":"a"}`},
	} {
		if b, _ := json.Marshal(c.v); string(b) != c.want {
			t.Errorf("%T\n got %s\nwant %s", c.v, b, c.want)
		}
	}
}

func TestVocabUnknownFieldsIgnored(t *testing.T) {
	for _, c := range []struct {
		json string
		v    any
		want string // re-encoded
	}{
		{`{"id":"t","status":{"state":"TASK_STATE_WORKING","x":1},"kind":"task","future":{"a":[1]}}`, &Task{}, `{"id":"t","status":{"state":"TASK_STATE_WORKING"}}`},
		{`{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x","kind":"text"}],"kind":"message"}`, &Message{}, `{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}`},
		{`{"text":"x","file":{"bytes":"AA=="}}`, &Part{}, `{"text":"x"}`},
		{`{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_FAILED"},"final":true}`, &TaskStatusUpdateEvent{}, `{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_FAILED"}}`},
		{`{"taskId":"t","contextId":"c","agent":"a","message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"priority":9}`, &WorkItem{}, `{"taskId":"t","contextId":"c","agent":"a","message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}`},
		{`{"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}},"agent":"a","createdAt":"2026-01-02T03:04:05Z","shard":"x"}`, &TaskRecord{}, `{"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"}},"agent":"a","createdAt":"2026-01-02T03:04:05.000Z"}`},
	} {
		if err := json.Unmarshal([]byte(c.json), c.v); err != nil {
			t.Errorf("%T: %v", c.v, err)
			continue
		}
		if b, _ := json.Marshal(c.v); string(b) != c.want {
			t.Errorf("%T\n got %s\nwant %s", c.v, b, c.want)
		}
	}
}

func TestVocabPartKinds(t *testing.T) {
	for _, c := range []struct {
		name, json string
		kind       string
	}{
		{"text", `{"text":"hi","mediaType":"text/plain"}`, "text"},
		{"empty text", `{"text":""}`, "text"},
		{"raw", `{"raw":"AAE=","filename":"a.bin"}`, "raw"},
		{"url", `{"url":"https://x.example/f"}`, "url"},
		{"data object", `{"data":{"k":[1,2]}}`, "data"},
		{"data array", `{"data":[1]}`, "data"},
		{"data scalar", `{"data":"s"}`, "data"},
		{"data false", `{"data":false}`, "data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p Part
			if err := json.Unmarshal([]byte(c.json), &p); err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{"text": p.Text != nil, "raw": p.Raw != nil, "url": p.URL != nil, "data": p.Data != nil}
			for k, set := range got {
				if set != (k == c.kind) {
					t.Errorf("%s set = %v", k, set)
				}
			}
			m := Message{MessageID: "m", Role: RoleUser, Parts: []Part{p}}
			if err := m.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			if b, _ := json.Marshal(p); string(b) != c.json {
				t.Errorf("re-encoded %s", b)
			}
		})
	}
	if p := DataPart([]int{1}); string(p.Data) != "[1]" || p.MediaType != "application/json" {
		t.Errorf("DataPart = %+v", p)
	}
}

func TestVocabValidation(t *testing.T) {
	text := TextPart("x")
	neg, zero := int32(-1), int32(0)
	for _, c := range []struct {
		name string
		err  error
		path string // in the message; "" = valid
	}{
		{"valid", (&Message{MessageID: "m", Role: RoleAgent, Parts: []Part{text}}).Validate(), ""},
		{"every kind", (&Message{MessageID: "m", Role: RoleUser, Parts: []Part{text, {Raw: []byte{1}}, {URL: new(string)}, {Data: json.RawMessage(`{}`)}}}).Validate(), ""},
		{"no messageId", (&Message{Role: RoleUser, Parts: []Part{text}}).Validate(), "message.messageId"},
		{"no role", (&Message{MessageID: "m", Parts: []Part{text}}).Validate(), "message.role"},
		{"unspecified role", (&Message{MessageID: "m", Role: RoleUnspecified, Parts: []Part{text}}).Validate(), "message.role"},
		{"unknown role", (&Message{MessageID: "m", Role: "user", Parts: []Part{text}}).Validate(), "message.role"},
		{"nil parts", (&Message{MessageID: "m", Role: RoleUser}).Validate(), "message.parts"},
		{"empty parts", (&Message{MessageID: "m", Role: RoleUser, Parts: []Part{}}).Validate(), "message.parts"},
		{"part with no content", (&Message{MessageID: "m", Role: RoleUser, Parts: []Part{text, {MediaType: "text/plain"}}}).Validate(), "message.parts[1]"},
		{"part with null data", (&Message{MessageID: "m", Role: RoleUser, Parts: []Part{{Data: json.RawMessage("null")}}}).Validate(), "message.parts[0]"},
		{"part with two contents", (&Message{MessageID: "m", Role: RoleUser, Parts: []Part{{Text: new(string), Raw: []byte{1}}}}).Validate(), "message.parts[0]"},
		{"part with four contents", (&Message{MessageID: "m", Role: RoleUser, Parts: []Part{{Text: new(string), Raw: []byte{1}, URL: new(string), Data: json.RawMessage(`1`)}}}).Validate(), "has 4"},
		{"part with invalid data", (&Message{MessageID: "m", Role: RoleUser, Parts: []Part{{Data: json.RawMessage(`{`)}}}).Validate(), "message.parts[0].data"},
		{"request without message", (&SendMessageRequest{}).Validate(), "message is required"},
		{"request with invalid message", (&SendMessageRequest{Message: &Message{Role: RoleUser, Parts: []Part{text}}}).Validate(), "message.messageId"},
		{"request negative historyLength", (&SendMessageRequest{Message: &Message{MessageID: "m", Role: RoleUser, Parts: []Part{text}}, Configuration: &SendMessageConfiguration{HistoryLength: &neg}}).Validate(), "configuration.historyLength"},
		{"request zero historyLength", (&SendMessageRequest{Message: &Message{MessageID: "m", Role: RoleUser, Parts: []Part{text}}, Configuration: &SendMessageConfiguration{HistoryLength: &zero}}).Validate(), ""},
		{"historyLength -1", ValidateHistoryLength(&neg), "historyLength"},
		{"historyLength 0", ValidateHistoryLength(&zero), ""},
		{"historyLength nil", ValidateHistoryLength(nil), ""},
		{"artifact", (&Artifact{ArtifactID: "a", Parts: []Part{text}}).Validate(), ""},
		{"artifact without id", (&Artifact{Parts: []Part{text}}).Validate(), "artifact.artifactId"},
		{"artifact without parts", (&Artifact{ArtifactID: "a"}).Validate(), "artifact.parts"},
		{"artifact with an empty part", (&Artifact{ArtifactID: "a", Parts: []Part{{}}}).Validate(), "artifact.parts[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.path == "" {
				if c.err != nil {
					t.Fatalf("refused: %v", c.err)
				}
				return
			}
			if !errors.Is(c.err, ErrInvalidParams) {
				t.Fatalf("err = %v, want INVALID_PARAMS", c.err)
			}
			if !strings.Contains(c.err.Error(), c.path) {
				t.Errorf("%q does not name %s", c.err, c.path)
			}
		})
	}
}

func TestVocabMessageText(t *testing.T) {
	for _, c := range []struct {
		m    *Message
		want string
	}{
		{nil, ""},
		{&Message{}, ""},
		{&Message{Parts: []Part{DataPart(1), {URL: new(string)}}}, ""},
		{&Message{Parts: []Part{TextPart("a")}}, "a"},
		{&Message{Parts: []Part{TextPart("a"), DataPart(1), TextPart("b"), {Raw: []byte("c")}}}, "a\nb"},
		{&Message{Parts: []Part{TextPart("line 1\nline 2"), TextPart("3")}}, "line 1\nline 2\n3"},
	} {
		if got := c.m.Text(); got != c.want {
			t.Errorf("Text() = %q, want %q", got, c.want)
		}
	}
}

func TestVocabWithHistoryLength(t *testing.T) {
	hist := []Message{{MessageID: "1"}, {MessageID: "2"}, {MessageID: "3"}}
	n := func(v int32) *int32 { return &v }
	for _, c := range []struct {
		name string
		n    *int32
		want []string
	}{
		{"nil keeps all", nil, []string{"1", "2", "3"}},
		{"0 keeps none", n(0), nil},
		{"1 keeps the newest", n(1), []string{"3"}},
		{"2", n(2), []string{"2", "3"}},
		{"len keeps all", n(3), []string{"1", "2", "3"}},
		{"more than len keeps all", n(100), []string{"1", "2", "3"}},
		{"max int32", n(math.MaxInt32), []string{"1", "2", "3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			task := Task{ID: "t", History: hist}
			got := task.WithHistoryLength(c.n)
			var ids []string
			for _, m := range got.History {
				ids = append(ids, m.MessageID)
			}
			if !reflect.DeepEqual(ids, c.want) {
				t.Errorf("history %v, want %v", ids, c.want)
			}
			if len(task.History) != 3 || got.ID != "t" {
				t.Error("the original task must not change")
			}
		})
	}
	if got := (Task{}).WithHistoryLength(new(int32)); got.History != nil {
		t.Error("empty history")
	}
}

func vtRecord(state TaskState) *TaskRecord {
	return &TaskRecord{Task: Task{ID: "t", ContextID: "c", Status: TaskStatus{State: state}}, Agent: "a", CreatedAt: Timestamp{time.Unix(0, 0).UTC()}}
}

func TestVocabApplyStatus(t *testing.T) {
	msg := &Message{MessageID: "s", Role: RoleAgent, Parts: []Part{TextPart("working on it")}}
	at := &Timestamp{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	for _, c := range []struct {
		name     string
		from, to TaskState
		msg      *Message
		ts       *Timestamp
		err      error
	}{
		{"start", TaskStateSubmitted, TaskStateWorking, nil, nil, nil},
		{"progress message", TaskStateWorking, TaskStateWorking, msg, at, nil},
		{"complete", TaskStateWorking, TaskStateCompleted, msg, nil, nil},
		{"ask", TaskStateWorking, TaskStateInputRequired, msg, nil, nil},
		{"resume", TaskStateInputRequired, TaskStateWorking, nil, nil, nil},
		{"back to the queue", TaskStateWorking, TaskStateSubmitted, nil, nil, ErrBadTransition},
		{"invalid target", TaskStateWorking, "TASK_STATE_DONE", nil, nil, ErrBadTransition},
		{"unspecified target", TaskStateSubmitted, TaskStateUnspecified, nil, nil, ErrBadTransition},
		{"terminal absorbs", TaskStateCompleted, TaskStateWorking, msg, nil, ErrTaskTerminal},
		{"terminal absorbs a repeat", TaskStateCanceled, TaskStateCanceled, nil, nil, ErrTaskTerminal},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := vtRecord(c.from)
			before, _ := json.Marshal(r)
			err := r.ApplyStatus(&TaskStatusUpdateEvent{TaskID: "t", ContextID: "c", Status: TaskStatus{State: c.to, Message: c.msg, Timestamp: c.ts}})
			if !errors.Is(err, c.err) || (c.err == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, c.err)
			}
			if c.err != nil {
				if after, _ := json.Marshal(r); string(after) != string(before) {
					t.Fatalf("a refused update changed the record:\n%s\n%s", before, after)
				}
				return
			}
			st := r.Task.Status
			if st.State != c.to || st.Timestamp == nil || (c.ts != nil && !st.Timestamp.Equal(c.ts.Time)) {
				t.Errorf("status %+v", st)
			}
			if c.msg != nil && (len(r.Task.History) != 1 || r.Task.History[0].MessageID != "s" || st.Message.MessageID != "s") {
				t.Errorf("a status message joins the history: %+v", r.Task.History)
			}
			if c.msg == nil && len(r.Task.History) != 0 {
				t.Errorf("history %+v", r.Task.History)
			}
		})
	}
}

func TestVocabApplyArtifact(t *testing.T) {
	base := func() *TaskRecord {
		r := vtRecord(TaskStateWorking)
		r.Task.Artifacts = []Artifact{
			{ArtifactID: "a", Name: "first", Parts: []Part{TextPart("1")}, Metadata: map[string]any{"k": "v"}},
			{ArtifactID: "b", Parts: []Part{TextPart("b")}},
		}
		return r
	}
	texts := func(a Artifact) string {
		var s []string
		for _, p := range a.Parts {
			s = append(s, *p.Text)
		}
		return strings.Join(s, ",")
	}
	t.Run("new", func(t *testing.T) {
		r := base()
		if err := r.ApplyArtifact(&TaskArtifactUpdateEvent{Artifact: Artifact{ArtifactID: "c", Parts: []Part{TextPart("c")}}}); err != nil {
			t.Fatal(err)
		}
		if len(r.Task.Artifacts) != 3 || r.Task.Artifacts[2].ArtifactID != "c" {
			t.Fatalf("%+v", r.Task.Artifacts)
		}
	})
	t.Run("append", func(t *testing.T) {
		r := base()
		if err := r.ApplyArtifact(&TaskArtifactUpdateEvent{Append: true, LastChunk: true, Artifact: Artifact{
			ArtifactID: "a", Description: "d", Parts: []Part{TextPart("2"), TextPart("3")}, Metadata: map[string]any{"n": 1},
		}}); err != nil {
			t.Fatal(err)
		}
		a := r.Task.Artifacts[0]
		if len(r.Task.Artifacts) != 2 || texts(a) != "1,2,3" || a.Name != "first" || a.Description != "d" ||
			a.Metadata["k"] != "v" || a.Metadata["n"] != 1 {
			t.Fatalf("%+v", a)
		}
	})
	t.Run("append to an unknown artifact adds it", func(t *testing.T) {
		r := base()
		if err := r.ApplyArtifact(&TaskArtifactUpdateEvent{Append: true, Artifact: Artifact{ArtifactID: "z", Parts: []Part{TextPart("z")}}}); err != nil {
			t.Fatal(err)
		}
		if len(r.Task.Artifacts) != 3 || texts(r.Task.Artifacts[2]) != "z" {
			t.Fatalf("%+v", r.Task.Artifacts)
		}
	})
	t.Run("replace", func(t *testing.T) {
		r := base()
		if err := r.ApplyArtifact(&TaskArtifactUpdateEvent{Artifact: Artifact{ArtifactID: "a", Parts: []Part{TextPart("new")}}}); err != nil {
			t.Fatal(err)
		}
		a := r.Task.Artifacts[0]
		if len(r.Task.Artifacts) != 2 || texts(a) != "new" || a.Name != "" || a.Metadata != nil {
			t.Fatalf("%+v", a)
		}
	})
	t.Run("terminal absorbs", func(t *testing.T) {
		r := base()
		r.Task.Status.State = TaskStateFailed
		if err := r.ApplyArtifact(&TaskArtifactUpdateEvent{Artifact: Artifact{ArtifactID: "c"}}); !errors.Is(err, ErrTaskTerminal) || len(r.Task.Artifacts) != 2 {
			t.Fatalf("err = %v, artifacts %d", err, len(r.Task.Artifacts))
		}
	})
}

func TestVocabApplyReplyAndContinue(t *testing.T) {
	reply := &Message{MessageID: "r", Role: RoleAgent, Parts: []Part{TextPart("done")}}
	r := vtRecord(TaskStateSubmitted)
	if err := r.ApplyReply(reply); err != nil {
		t.Fatal(err)
	}
	if r.Reply != reply || r.Task.Status.State != TaskStateCompleted || r.Task.Status.Timestamp == nil ||
		len(r.Task.History) != 1 || r.Task.History[0].MessageID != "r" {
		t.Fatalf("after reply %+v", r)
	}
	if err := r.ApplyReply(reply); !errors.Is(err, ErrTaskTerminal) || len(r.Task.History) != 1 {
		t.Fatalf("second reply: %v", err)
	}

	answer := &Message{MessageID: "u", Role: RoleUser, Parts: []Part{TextPart("42")}}
	for _, c := range []struct {
		from TaskState
		err  error
	}{
		{TaskStateInputRequired, nil},
		{TaskStateAuthRequired, nil},
		{TaskStateWorking, ErrNotInterrupted},
		{TaskStateSubmitted, ErrNotInterrupted},
		{TaskStateCompleted, ErrTaskTerminal},
	} {
		r := vtRecord(c.from)
		err := r.ApplyContinue(answer)
		if !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("continue from %s: %v", c.from, err)
			continue
		}
		if c.err == nil && (r.Task.Status.State != TaskStateSubmitted || len(r.Task.History) != 1) {
			t.Errorf("continue from %s: %+v", c.from, r.Task)
		}
		if c.err != nil && (r.Task.Status.State != c.from || len(r.Task.History) != 0) {
			t.Errorf("refused continue from %s changed the record", c.from)
		}
	}
}

func TestVocabTrimHistory(t *testing.T) {
	mk := func(n int) *TaskRecord {
		r := vtRecord(TaskStateWorking)
		for i := range n {
			r.Task.History = append(r.Task.History, Message{MessageID: fmt.Sprint(i)})
		}
		return r
	}
	for _, c := range []struct {
		n, max, wantLen int
		first           string
	}{
		{5, 0, 5, "0"},
		{5, -1, 5, "0"},
		{5, 5, 5, "0"},
		{5, 10, 5, "0"},
		{5, 2, 2, "3"},
		{5, 1, 1, "4"},
		{0, 3, 0, ""},
	} {
		r := mk(c.n)
		old := r.Task.History
		r.TrimHistory(c.max)
		if len(r.Task.History) != c.wantLen || (c.wantLen > 0 && r.Task.History[0].MessageID != c.first) {
			t.Errorf("TrimHistory(%d) of %d: %+v", c.max, c.n, r.Task.History)
		}
		if c.wantLen < c.n && len(r.Task.History) > 0 && &r.Task.History[0] == &old[c.n-c.wantLen] {
			t.Errorf("TrimHistory(%d) keeps the old backing array alive", c.max)
		}
	}
	r := vtRecord(TaskStateWorking)
	if !r.StatusTime().Equal(r.CreatedAt.Time) {
		t.Error("StatusTime falls back to createdAt")
	}
	r.Task.Status.Timestamp = &Timestamp{time.Unix(100, 0)}
	if !r.StatusTime().Equal(time.Unix(100, 0)) {
		t.Error("StatusTime is the status timestamp")
	}
}

func TestVocabNames(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"echo", true}, {"a", true}, {"9lives", true}, {"a-b_c9", true}, {"x" + strings.Repeat("y", 62), true},
		{"x" + strings.Repeat("y", 63), false}, {"", false}, {"Echo", false}, {"-a", false}, {"_a", false},
		{"a.b", false}, {"a*", false}, {"a>", false}, {"a b", false}, {"é", false}, {"a/b", false}, {"a\n", false},
	} {
		if got := ValidAgentName(c.name); got != c.ok {
			t.Errorf("ValidAgentName(%q) = %v", c.name, got)
		}
	}
	id := NewID()
	for _, c := range []struct {
		id string
		ok bool
	}{
		{id, true},
		{"6ba7b810-9dad-11d1-80b4-00c04fd430c8", true},
		{"", false},
		{"t-1", false},
		{"6ba7b8109dad11d180b400c04fd430c8", false},
		{"urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8", false},
		{"{6ba7b810-9dad-11d1-80b4-00c04fd430c8}", false},
		{"6ba7b810-9dad-11d1-80b4-00c04fd430cg", false},
		{"6ba7b810.9dad.11d1.80b4.00c04fd430c8", false},
		{"a2a.events.>", false},
	} {
		if got := ValidTaskID(c.id); got != c.ok {
			t.Errorf("ValidTaskID(%q) = %v", c.id, got)
		}
	}
	if NewID() == id {
		t.Error("NewID repeats")
	}
	for _, c := range []struct {
		subject, id string
		ok          bool
	}{
		{SubjectEvents(id), id, true},
		{"a2a.events.x", "x", true},
		{"a2a.events.", "", false},
		{"a2a.events", "", false},
		{"a2a.eventsx", "", false},
		{"a2a.work.echo", "", false},
		{"A2A.events.x", "", false},
		{"", "", false},
	} {
		got, ok := TaskIDFromEventSubject(c.subject)
		if got != c.id || ok != c.ok {
			t.Errorf("TaskIDFromEventSubject(%q) = %q, %v", c.subject, got, ok)
		}
	}
	for got, want := range map[string]string{
		SubjectWork("echo"):            "a2a.work.echo",
		SubjectEvents("t"):             "a2a.events.t",
		SubjectCancel("echo"):          "a2a.cancel.echo",
		SubjectDLQ("echo"):             "a2a.dlq.echo",
		ConsumerWork("echo"):           "work-echo",
		SubjectWorkAll:                 "a2a.work.>",
		SubjectEventsAll:               "a2a.events.>",
		SubjectCancelAll:               "a2a.cancel.>",
		SubjectDLQAll:                  "a2a.dlq.>",
		SubjectIntakeAll:               "a2a.intake.>",
		SubjectIntakeAgent("echo"):     "a2a.intake.echo.>",
		SubjectIntakeTask("echo", "t"): "a2a.intake.echo.*.t",
		ConsumerIntake("echo"):         "intake-echo",
		CallerKey("", "", ""):          "96a296d224f285c6",
		Source("worker", "e-1"):        "urn:a2abus:worker:e-1",
		SequenceString(0):              "00000000000000000000",
		SequenceString(42):             "00000000000000000042",
		SequenceString(math.MaxUint64): "18446744073709551615",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
	taskID := NewID()
	subject := SubjectIntake("echo", CallerKey("t1", "alice", ""), taskID)
	if agent, caller, task, ok := ParseIntakeSubject(subject); !ok || agent != "echo" || caller != CallerKey("t1", "alice", "") || task != taskID {
		t.Errorf("ParseIntakeSubject(%q) = %q %q %q %v", subject, agent, caller, task, ok)
	}
	for _, bad := range []string{"a2a.intake.echo." + taskID, "a2a.intake.Echo.k." + taskID, "a2a.intake.echo.k.not-a-uuid", "a2a.work.echo.k." + taskID, "a2a.intake.echo.k." + taskID + ".x"} {
		if _, _, _, ok := ParseIntakeSubject(bad); ok {
			t.Errorf("ParseIntakeSubject(%q) accepted", bad)
		}
	}
	// Callers differ by tenant, owner and origin, however the strings split.
	if CallerKey("t", "ab", "") == CallerKey("t", "a", "b") || CallerKey("t", "a", "") == CallerKey("", "a", "") {
		t.Error("two callers share a key")
	}
	if agent, ok := AgentFromConsumerWork(ConsumerWork("echo")); !ok || agent != "echo" {
		t.Errorf("AgentFromConsumerWork = %q %v", agent, ok)
	}
	if _, ok := AgentFromConsumerWork("intake-echo"); ok {
		t.Error("AgentFromConsumerWork accepted another consumer")
	}
	// The sequence sorts as a string the way revisions sort as numbers.
	if !(SequenceString(9) < SequenceString(10) && SequenceString(99999) < SequenceString(100000)) {
		t.Error("sequence strings do not sort")
	}
}

func TestVocabTimestamps(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"2025-04-02T16:59:25.331844", time.Date(2025, 4, 2, 16, 59, 25, 331844000, time.UTC), true},
		{"2025-04-02T16:59:25", time.Date(2025, 4, 2, 16, 59, 25, 0, time.UTC), true},
		{"2026-01-02T03:04:05.000Z", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), true},
		{"2026-01-02T03:04:05Z", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), true},
		{"2026-01-02T05:04:05.5+02:00", time.Date(2026, 1, 2, 3, 4, 5, 5e8, time.UTC), true},
		{"2026-01-02T03:04:05.123456789+00:00", time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC), true},
		{"", time.Time{}, false},
		{"yesterday", time.Time{}, false},
		{"2026-01-02", time.Time{}, false},
		{"2026-01-02 03:04:05Z", time.Time{}, false},
		{"2026-13-02T03:04:05Z", time.Time{}, false},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseTimestamp(c.in)
			if (err == nil) != c.ok {
				t.Fatalf("err = %v", err)
			}
			if !c.ok {
				return
			}
			if !got.Equal(c.want) || got.Location() != time.UTC {
				t.Errorf("got %v, want %v in UTC", got, c.want)
			}
			var ts Timestamp
			if err := json.Unmarshal([]byte(`"`+c.in+`"`), &ts); err != nil || !ts.Equal(c.want) || ts.Location() != time.UTC {
				t.Errorf("UnmarshalJSON: %v, %v", ts, err)
			}
		})
	}
	var ts Timestamp
	if err := json.Unmarshal([]byte(`1712345678`), &ts); err == nil {
		t.Error("a number is not a timestamp")
	}
	if b, _ := json.Marshal(Timestamp{time.Date(2025, 4, 2, 16, 59, 25, 331844000, time.UTC)}); string(b) != `"2025-04-02T16:59:25.331Z"` {
		t.Errorf("marshal %s", b)
	}
	now := Now()
	if now.Location() != time.UTC || now.Nanosecond()%int(time.Millisecond) != 0 || time.Since(now.Time) > time.Minute {
		t.Errorf("Now() = %v", now)
	}
}

// A generation reads as ProtoJSON writes an int64 (a string) and as the
// JSON examples write it (a number), and writes as a number; anything else
// is refused saying what a generation is.
func TestGenerationReadsNumbersAndStrings(t *testing.T) {
	var req GetTaskRequest
	for _, in := range []string{`{"id":"t","currentGeneration":5}`, `{"id":"t","currentGeneration":"5"}`} {
		req = GetTaskRequest{}
		if err := json.Unmarshal([]byte(in), &req); err != nil || req.CurrentGeneration == nil || *req.CurrentGeneration != 5 {
			t.Errorf("%s: %v, %v", in, err, req.CurrentGeneration)
		}
	}
	for _, in := range []string{`{"currentGeneration":-1}`, `{"currentGeneration":"x"}`, `{"currentGeneration":1.5}`, `{"currentGeneration":true}`} {
		if err := json.Unmarshal([]byte(in), &req); err == nil || !strings.Contains(err.Error(), "non-negative integer") {
			t.Errorf("%s: %v", in, err)
		}
	}
	b, _ := json.Marshal(Task{ID: "t", Generation: 7})
	if !strings.Contains(string(b), `"generation":7`) {
		t.Errorf("task = %s", b)
	}
	if b, _ := json.Marshal(Task{ID: "t"}); strings.Contains(string(b), "generation") {
		t.Errorf("a task without a generation writes one: %s", b)
	}
}
