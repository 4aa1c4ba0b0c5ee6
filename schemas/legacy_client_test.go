package schemas

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// Tests of the older dialect as the client meets it (legacy_client.go):
// the answers printed in the OpenFang and AgentOS documents, a2abus's own
// answers read back, and the variants agents in the field send.

func TestLegacySendParamsFromV1(t *testing.T) {
	// AgentOS's documented tasks/send: a client task id, a session, text
	// and metadata.
	req := &SendMessageRequest{
		Message:  &Message{MessageID: "m-1", ContextID: "session-abc-123", Role: RoleUser, Parts: []Part{TextPart("Analyze this data...")}},
		Metadata: map[string]any{},
	}
	got := norm(t, LegacySendParamsFromV1(req, "task-xyz-789"))
	want := `{"id":"task-xyz-789","sessionId":"session-abc-123","message":{"role":"user","parts":[{"type":"text","text":"Analyze this data..."}]}}`
	if got != want {
		t.Fatalf("params:\n got %s\nwant %s", got, want)
	}
	// Back through the server side's reading: the same request.
	var p LegacySendParams
	if err := json.Unmarshal([]byte(got), &p); err != nil {
		t.Fatal(err)
	}
	back, err := p.ToV1()
	if err != nil || back.Message.Text() != "Analyze this data..." || back.Message.ContextID != "session-abc-123" {
		t.Fatalf("read back: %s %v", norm(t, back), err)
	}

	// Configuration and metadata are carried over; no session, no sessionId.
	n := int32(3)
	req = &SendMessageRequest{
		Message:  &Message{MessageID: "m-2", Role: RoleUser, Parts: []Part{TextPart("hi")}, Metadata: map[string]any{"trace": "t"}},
		Metadata: map[string]any{"priority": "high"},
		Configuration: &SendMessageConfiguration{HistoryLength: &n, AcceptedOutputModes: []string{"text"},
			TaskPushNotificationConfig: &TaskPushNotificationConfig{URL: "https://hook.example/n", Token: "tok"}},
	}
	got = norm(t, LegacySendParamsFromV1(req, "t-2"))
	want = `{"id":"t-2","message":{"role":"user","parts":[{"type":"text","text":"hi"}],"metadata":{"trace":"t"}},` +
		`"acceptedOutputModes":["text"],"pushNotification":{"url":"https://hook.example/n","token":"tok"},"historyLength":3,"metadata":{"priority":"high"}}`
	if got != want {
		t.Fatalf("params:\n got %s\nwant %s", got, want)
	}
}

func TestLegacyStateToV1(t *testing.T) {
	for in, want := range map[string]TaskState{
		"submitted": TaskStateSubmitted, "working": TaskStateWorking, "Working": TaskStateWorking,
		"input-required": TaskStateInputRequired, "input_required": TaskStateInputRequired, "InputRequired": TaskStateInputRequired,
		"auth-required": TaskStateAuthRequired, "completed": TaskStateCompleted, "COMPLETED": TaskStateCompleted,
		"canceled": TaskStateCanceled, "cancelled": TaskStateCanceled, "Cancelled": TaskStateCanceled,
		"failed": TaskStateFailed, "rejected": TaskStateRejected, "unknown": TaskStateUnspecified,
	} {
		got, err := LegacyStateToV1(in)
		if err != nil || got != want {
			t.Errorf("%q: %s %v, want %s", in, got, err, want)
		}
	}
	// Every state reads back from its 0.3 name and the older dialect's.
	for _, st := range []TaskState{TaskStateUnspecified, TaskStateSubmitted, TaskStateWorking, TaskStateInputRequired, TaskStateAuthRequired,
		TaskStateCompleted, TaskStateCanceled, TaskStateFailed, TaskStateRejected} {
		if got, err := LegacyStateToV1(StateToV03(st)); err != nil || got != st {
			t.Errorf("%s as %q: %s %v", st, StateToV03(st), got, err)
		}
		if got, err := LegacyStateToV1(LegacyStateFromV1(st)); err != nil || got.Settled() != st.Settled() {
			t.Errorf("%s as %q: %s %v", st, LegacyStateFromV1(st), got, err)
		}
	}
	for _, bad := range []string{"", "done", "in progress"} {
		if _, err := LegacyStateToV1(bad); !errors.Is(err, ErrInvalidAgentResponse) {
			t.Errorf("%q: %v, want ErrInvalidAgentResponse", bad, err)
		}
	}
}

// The answers as the documents print them.
func TestLegacyAgentTaskFromDocuments(t *testing.T) {
	// OpenFang, POST /a2a/tasks/send: a bare task, the status a string,
	// the history under "messages", the answer only there.
	openfang := `{
  "id": "550e8400-e29b-41d4-a716-446655440000",
  "sessionId": "optional-session-id",
  "status": "completed",
  "messages": [
    {"role": "user", "parts": [{ "type": "text", "text": "Review this code for security issues" }]},
    {"role": "agent", "parts": [{ "type": "text", "text": "I found 2 potential issues..." }]}
  ],
  "artifacts": []
}`
	task, err := LegacyAgentTaskToV1([]byte(openfang))
	if err != nil {
		t.Fatal(err)
	}
	if task.ID != "550e8400-e29b-41d4-a716-446655440000" || task.ContextID != "optional-session-id" || task.Status.State != TaskStateCompleted ||
		len(task.History) != 2 || task.History[0].Role != RoleUser || task.History[0].Text() != "Review this code for security issues" ||
		task.History[1].Role != RoleAgent || task.Artifacts != nil || task.Status.Message.Text() != "I found 2 potential issues..." {
		t.Fatalf("OpenFang task: %s", norm(t, task))
	}
	for _, m := range task.History {
		if m.MessageID == "" {
			t.Fatal("a history message without an id")
		}
	}

	// AgentOS, tasks/send result: a status object, "history", metadata,
	// and fields a2abus does not know (createdAt).
	agentos := `{
  "id": "task-xyz-789",
  "sessionId": "session-abc-123",
  "status": { "state": "working", "timestamp": "2026-03-09T10:30:00Z" },
  "history": [
    { "role": "user", "parts": [{ "type": "text", "text": "Analyze the Q4..." }] }
  ],
  "artifacts": [],
  "metadata": { "priority": "high", "department": "sales" },
  "createdAt": 1709976600000
}`
	task, err = LegacyAgentTaskToV1([]byte(agentos))
	if err != nil {
		t.Fatal(err)
	}
	if task.ID != "task-xyz-789" || task.ContextID != "session-abc-123" || task.Status.State != TaskStateWorking ||
		task.Status.Timestamp == nil || !task.Status.Timestamp.Time.Equal(time.Date(2026, 3, 9, 10, 30, 0, 0, time.UTC)) ||
		task.Status.Message != nil || len(task.History) != 1 || task.Metadata["department"] != "sales" {
		t.Fatalf("AgentOS task: %s", norm(t, task))
	}
	// AgentOS, tasks/get of the finished task: the answer in the status.
	task, err = LegacyAgentTaskToV1([]byte(`{"id":"task-xyz-789","sessionId":"session-abc-123",
	  "status":{"state":"completed","message":{"role":"agent","parts":[{"type":"text","text":"Q4 is up"}]},"timestamp":"2026-03-09T10:32:15Z"},
	  "history":[{"role":"user","parts":[{"type":"text","text":"Analyze the Q4..."}]}],"artifacts":[]}`))
	if err != nil || task.Status.State != TaskStateCompleted || task.Status.Message.Text() != "Q4 is up" {
		t.Fatalf("AgentOS finished task: %s %v", norm(t, task), err)
	}
}

// a2abus's own answers (LegacyTaskFromV1) read back whole, the agent's id
// kept.
func TestLegacyAgentTaskRoundTrip(t *testing.T) {
	task := legacyTask()
	b, err := json.Marshal(LegacyTaskFromV1(task, "client-1"))
	if err != nil {
		t.Fatal(err)
	}
	back, err := LegacyAgentTaskToV1(b)
	if err != nil {
		t.Fatal(err)
	}
	task.ID = "client-1"
	if norm(t, dropMessageIDs(back)) != norm(t, dropMessageIDs(task)) {
		t.Fatalf("round trip:\n got %s\nwant %s", norm(t, dropMessageIDs(back)), norm(t, dropMessageIDs(task)))
	}
}

// a2abus's answers on OpenFang's routes (OpenFangTaskFromV1: a string
// status, the answer appended to "messages") read back: the answer is the
// status message again.
func TestLegacyAgentTaskFromOpenFangShape(t *testing.T) {
	task := Task{ID: NewID(), ContextID: "s-1",
		Status:  TaskStatus{State: TaskStateCanceled, Message: &Message{MessageID: "m-2", Role: RoleAgent, Parts: []Part{TextPart("stopped")}}},
		History: []Message{{MessageID: "m-1", Role: RoleUser, Parts: []Part{TextPart("go")}}}}
	b, err := json.Marshal(OpenFangTaskFromV1(task, "client-7"))
	if err != nil {
		t.Fatal(err)
	}
	back, err := LegacyAgentTaskToV1(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != "client-7" || back.ContextID != "s-1" || back.Status.State != TaskStateCanceled || back.Status.Message.Text() != "stopped" ||
		len(back.History) != 2 || back.History[0].Text() != "go" {
		t.Fatalf("read back %s from %s", norm(t, back), b)
	}
}

// What agents in the field vary in: flat file and data parts (OpenFang's
// A2aPart), data that is not an object, artifacts without an index, a
// timestamp that does not parse; and what is refused.
func TestLegacyAgentTaskVariants(t *testing.T) {
	task, err := LegacyAgentTaskToV1([]byte(`{"id":"t","status":"input_required","messages":[
	  {"role":"agent","parts":[{"type":"file","name":"a.txt","mime_type":"text/plain","data":"aGk="},
	    {"type":"data","mime_type":"application/json","data":[1,2]},{"type":"data","data":{"k":"v"}},{"text":"untyped"}]}],
	  "artifacts":[{"name":"one","parts":[{"type":"text","text":"1"}]},{"name":"two","parts":[{"type":"text","text":"2"}]},
	    {"name":"five","index":5,"parts":[{"type":"text","text":"5"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ps := task.History[0].Parts
	if task.Status.State != TaskStateInputRequired || len(ps) != 4 || string(ps[0].Raw) != "hi" || ps[0].Filename != "a.txt" || ps[0].MediaType != "text/plain" ||
		string(ps[1].Data) != "[1,2]" || string(ps[2].Data) != `{"k":"v"}` || *ps[3].Text != "untyped" {
		t.Fatalf("parts: %s", norm(t, ps))
	}
	if task.Status.Message == nil || len(task.Status.Message.Parts) != 4 {
		t.Fatalf("the agent's question is not the status message: %s", norm(t, task.Status))
	}
	if ids := []string{task.Artifacts[0].ArtifactID, task.Artifacts[1].ArtifactID, task.Artifacts[2].ArtifactID}; ids[0] != "artifact-0" || ids[1] != "artifact-1" || ids[2] != "artifact-5" {
		t.Fatalf("artifact ids %v", ids)
	}
	task, err = LegacyAgentTaskToV1([]byte(`{"id":"t","status":{"state":"working","timestamp":"yesterday"}}`))
	if err != nil || task.Status.Timestamp != nil {
		t.Fatalf("a bad timestamp is dropped: %s %v", norm(t, task), err)
	}
	// The user's last word is not promoted to the status.
	task, err = LegacyAgentTaskToV1([]byte(`{"id":"t","status":"working","messages":[{"role":"user","parts":[{"type":"text","text":"q"}]}]}`))
	if err != nil || task.Status.Message != nil {
		t.Fatalf("user message promoted: %s %v", norm(t, task), err)
	}

	for name, bad := range map[string]string{
		"not an object": `[1]`,
		"no id":         `{"status":"completed"}`,
		"no status":     `{"id":"t"}`,
		"bad state":     `{"id":"t","status":"done"}`,
		"bad role":      `{"id":"t","status":"completed","messages":[{"role":"system","parts":[]}]}`,
		"bad part type": `{"id":"t","status":"completed","messages":[{"role":"agent","parts":[{"type":"image"}]}]}`,
		"bad base64":    `{"id":"t","status":"completed","messages":[{"role":"agent","parts":[{"type":"file","data":"%%"}]}]}`,
		"empty data":    `{"id":"t","status":"completed","artifacts":[{"parts":[{"type":"data"}]}]}`,
		"text w/o text": `{"id":"t","status":{"state":"completed","message":{"role":"agent","parts":[{"type":"text"}]}}}`,
	} {
		if _, err := LegacyAgentTaskToV1([]byte(bad)); !errors.Is(err, ErrInvalidAgentResponse) {
			t.Errorf("%s: %v, want ErrInvalidAgentResponse", name, err)
		}
	}
}

// tasks/sendSubscribe events, as a2abus's own edge writes them
// (LegacyStreamEvent) and as the first schema prints them.
func TestLegacyAgentEvents(t *testing.T) {
	working := `{"id":"t-1","status":{"state":"working","message":{"role":"agent","parts":[{"type":"text","text":"on it"}]}},"final":false}`
	ev, final, err := LegacyAgentEventToV1([]byte(working), "s-1")
	if err != nil || final || ev.StatusUpdate == nil || ev.StatusUpdate.TaskID != "t-1" || ev.StatusUpdate.ContextID != "s-1" ||
		ev.StatusUpdate.Status.State != TaskStateWorking || ev.StatusUpdate.Status.Message.Text() != "on it" {
		t.Fatalf("status update: %s %v %v", norm(t, ev), final, err)
	}
	art := `{"id":"t-1","artifact":{"name":"out","parts":[{"type":"text","text":"chunk"}],"index":2,"append":true,"lastChunk":true}}`
	ev, final, err = LegacyAgentEventToV1([]byte(art), "s-1")
	if err != nil || final || ev.ArtifactUpdate == nil || ev.ArtifactUpdate.TaskID != "t-1" || ev.ArtifactUpdate.Artifact.ArtifactID != "artifact-2" ||
		!ev.ArtifactUpdate.Append || !ev.ArtifactUpdate.LastChunk || *ev.ArtifactUpdate.Artifact.Parts[0].Text != "chunk" {
		t.Fatalf("artifact update: %s %v %v", norm(t, ev), final, err)
	}
	// final marks the end; so does a settled state without it.
	for _, s := range []string{`{"id":"t-1","status":{"state":"completed"},"final":true}`, `{"id":"t-1","status":{"state":"input-required"}}`} {
		if ev, final, err := LegacyAgentEventToV1([]byte(s), ""); err != nil || !final || ev.StatusUpdate == nil {
			t.Fatalf("%s: %s %v %v", s, norm(t, ev), final, err)
		}
	}
	// A task snapshot.
	ev, final, err = LegacyAgentEventToV1([]byte(`{"id":"t-1","sessionId":"s-9","status":"working","artifacts":[]}`), "s-1")
	if err != nil || final || ev.Task == nil || ev.Task.ContextID != "s-9" || ev.Task.Status.State != TaskStateWorking {
		t.Fatalf("snapshot: %s %v %v", norm(t, ev), final, err)
	}

	// a2abus's own events read back.
	task := legacyTask()
	index := func(string) int { return 0 }
	for _, r := range []StreamResponse{
		{StatusUpdate: &TaskStatusUpdateEvent{TaskID: task.ID, ContextID: "sess-9", Status: task.Status}},
		{ArtifactUpdate: &TaskArtifactUpdateEvent{TaskID: task.ID, ContextID: "sess-9", Artifact: task.Artifacts[0], LastChunk: true}},
	} {
		b, err := json.Marshal(LegacyStreamEvent(r, "client-1", index))
		if err != nil {
			t.Fatal(err)
		}
		ev, _, err := LegacyAgentEventToV1(b, "sess-9")
		if err != nil {
			t.Fatal(err)
		}
		want := r
		switch {
		case r.StatusUpdate != nil:
			u := *r.StatusUpdate
			u.TaskID = "client-1"
			want.StatusUpdate = &u
			ev.StatusUpdate.Status.Message.MessageID, u.Status.Message = "", &Message{Role: RoleAgent, Parts: u.Status.Message.Parts}
		case r.ArtifactUpdate != nil:
			u := *r.ArtifactUpdate
			u.TaskID = "client-1"
			want.ArtifactUpdate = &u
		}
		if norm(t, ev) != norm(t, want) {
			t.Fatalf("read back:\n got %s\nwant %s", norm(t, ev), norm(t, want))
		}
	}

	for name, bad := range map[string]string{
		"not an object": `"x"`,
		"neither":       `{"id":"t"}`,
		"bad artifact":  `{"id":"t","artifact":{"parts":[{"type":"image"}]}}`,
		"bad state":     `{"id":"t","status":{"state":"later"}}`,
	} {
		if _, _, err := LegacyAgentEventToV1([]byte(bad), ""); !errors.Is(err, ErrInvalidAgentResponse) {
			t.Errorf("%s: %v, want ErrInvalidAgentResponse", name, err)
		}
	}
}
