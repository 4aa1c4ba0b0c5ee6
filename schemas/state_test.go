package schemas

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestStateClassesAndTransitions(t *testing.T) {
	terminal := []TaskState{TaskStateCompleted, TaskStateFailed, TaskStateCanceled, TaskStateRejected}
	interrupted := []TaskState{TaskStateInputRequired, TaskStateAuthRequired}
	all := append(append([]TaskState{TaskStateSubmitted, TaskStateWorking}, terminal...), interrupted...)
	for _, s := range terminal {
		if !s.Terminal() || s.Interrupted() || !s.Settled() {
			t.Errorf("%s classes", s)
		}
		for _, to := range all {
			if CanTransition(s, to) {
				t.Errorf("terminal %s must absorb, but may move to %s", s, to)
			}
		}
	}
	for _, s := range interrupted {
		if s.Terminal() || !s.Interrupted() || !s.Settled() {
			t.Errorf("%s classes", s)
		}
		for _, to := range all {
			if !CanTransition(s, to) {
				t.Errorf("interrupted %s must allow %s", s, to)
			}
		}
	}
	if CanTransition(TaskStateWorking, TaskStateSubmitted) || !CanTransition(TaskStateWorking, TaskStateWorking) || !CanTransition(TaskStateSubmitted, TaskStateCompleted) {
		t.Error("working/submitted moves")
	}
	if CanTransition(TaskStateWorking, "TASK_STATE_DONE") || CanTransition(TaskStateWorking, TaskStateUnspecified) {
		t.Error("invalid targets must be refused")
	}
}

func TestErrorTable(t *testing.T) {
	codes := map[int]string{}
	for _, e := range ErrorTable {
		if prev, ok := codes[e.Code]; ok && !(e == ErrUnavailable && prev == ErrInternal.Reason) {
			t.Errorf("code %d used by %s and %s", e.Code, prev, e.Reason)
		}
		if _, ok := codes[e.Code]; !ok {
			codes[e.Code] = e.Reason
		}
		if e.HTTPStatus == 0 || e.GRPCStatus == "" || e.Message == "" || strings.ToUpper(e.Reason) != e.Reason {
			t.Errorf("row %+v incomplete", e)
		}
	}
	for _, c := range []int{-32700, -32600, -32601, -32602, -32603, -32001, -32002, -32003, -32004, -32005, -32006, -32007, -32008, -32009} {
		if _, ok := codes[c]; !ok {
			t.Errorf("code %d missing", c)
		}
	}
	e := Errorf(ErrTaskNotFound, "task %s not found", "x").With("taskId", "x")
	if !errors.Is(e, ErrTaskNotFound) || errors.Is(e, ErrInternal) || e.Code != -32001 || e.Metadata["taskId"] != "x" {
		t.Fatalf("occurrence %+v", e)
	}
	if ErrTaskNotFound.Metadata != nil {
		t.Fatal("With must not change the table row")
	}
	if got := AsError(errors.New("boom")); !errors.Is(got, ErrInternal) || strings.Contains(got.Message, "boom") {
		t.Fatalf("AsError(plain) = %+v", got)
	}
	if ErrorByCode(-32004) != ErrUnsupportedOperation || ErrorByReason("TASK_NOT_CANCELABLE") != ErrTaskNotCancelable {
		t.Fatal("lookups")
	}
}

func TestWireShapes(t *testing.T) {
	raw := `{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING","timestamp":"2025-04-02T16:59:25.331844"},"unknown":1,
		"history":[{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a"},{"raw":"AAE="},{"url":"u"},{"data":[1]}],"future":true}]}`
	var task Task
	if err := json.Unmarshal([]byte(raw), &task); err != nil {
		t.Fatal(err)
	}
	if task.Status.Timestamp.Location().String() != "UTC" || task.History[0].Parts[1].Raw[1] != 1 {
		t.Fatalf("decoded %+v", task)
	}
	b, _ := json.Marshal(task)
	for _, want := range []string{`"contextId":"c"`, `"TASK_STATE_WORKING"`, `"ROLE_USER"`, `"raw":"AAE="`, `"timestamp":"2025-04-02T16:59:25.331Z"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("encoding lacks %s: %s", want, b)
		}
	}
	for name, m := range map[string]Message{
		"no id":     {Role: RoleUser, Parts: []Part{TextPart("x")}},
		"no role":   {MessageID: "m", Parts: []Part{TextPart("x")}},
		"no parts":  {MessageID: "m", Role: RoleUser},
		"two kinds": {MessageID: "m", Role: RoleUser, Parts: []Part{{Text: new(string), URL: new(string)}}},
		"empty":     {MessageID: "m", Role: RoleUser, Parts: []Part{{}}},
	} {
		if err := m.Validate(); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%s: %v", name, err)
		}
	}
	n := int32(1)
	if got := (Task{History: []Message{{MessageID: "a"}, {MessageID: "b"}}}).WithHistoryLength(&n); len(got.History) != 1 || got.History[0].MessageID != "b" {
		t.Fatalf("historyLength keeps the newest: %+v", got.History)
	}
}
