package schemas

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// Tests of the older tasks/send dialect (legacy.go, legacy_params.go),
// against payloads shaped like a2aproject/A2A v0.1.0
// specification/json/a2a.json.

func TestLegacyTaskID(t *testing.T) {
	golden := map[string]string{
		// Pinned: changing the namespace would orphan every stored legacy task.
		"client-1":                   "3bd84d65-80be-5ae3-9dc5-21ed43aca10f",
		"task 42 / weird.subject.*>": "d8643264-2b46-52f7-ae13-ad5a95f49fd8",
	}
	for in, want := range golden {
		if got := LegacyTaskID(in); got != want {
			t.Errorf("LegacyTaskID(%q) = %s, want %s", in, got, want)
		}
	}
	seen := map[string]string{}
	for _, in := range []string{"a", "b", "A", "a ", "client-1", "client-2", strings.Repeat("x", 1000), "ünï", "0b6d7a3e7a8e4d0a9d330f4c2a1d5e11"} {
		id := LegacyTaskID(in)
		if id != LegacyTaskID(in) {
			t.Errorf("%q: not deterministic", in)
		}
		if !ValidTaskID(id) || id == in {
			t.Errorf("%q -> %q is not a fresh UUID", in, id)
		}
		if prev, dup := seen[id]; dup {
			t.Errorf("%q and %q share %s", prev, in, id)
		}
		seen[id] = in
	}
	for _, u := range []string{"0b6d7a3e-7a8e-4d0a-9d33-0f4c2a1d5e11", NewID()} {
		if got := LegacyTaskID(u); got != u {
			t.Errorf("a UUID client id must be kept: %s -> %s", u, got)
		}
	}
}

func TestLegacyPartTable(t *testing.T) {
	cases := []struct {
		name   string
		v1     Part
		legacy string
	}{
		{"text", TextPart("hi"), `{"type":"text","text":"hi"}`},
		{"text metadata", Part{Text: ptr("t"), Metadata: map[string]any{"k": "v"}}, `{"type":"text","text":"t","metadata":{"k":"v"}}`},
		{"bytes", FilePart([]byte{0, 1, 2, 250}, "a.bin", "application/octet-stream"),
			`{"type":"file","file":{"name":"a.bin","mimeType":"application/octet-stream","bytes":"AAEC+g=="}}`},
		{"url", URLPart("https://x.example/f", "f", "text/plain"), `{"type":"file","file":{"name":"f","mimeType":"text/plain","uri":"https://x.example/f"}}`},
		{"data object", DataPart(map[string]any{"k": 1}), `{"type":"data","data":{"k":1}}`},
		{"data array", DataPart([]int{1}), `{"type":"data","data":{"value":[1]},"metadata":{"a2abus/wrapped":true}}`},
		{"data scalar metadata", Part{Data: json.RawMessage(`"s"`), MediaType: "application/json", Metadata: map[string]any{"m": "v"}},
			`{"type":"data","data":{"value":"s"},"metadata":{"a2abus/wrapped":true,"m":"v"}}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(LegacyPartFromV1(c.v1))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.legacy {
			t.Errorf("%s to legacy:\n got %s\nwant %s", c.name, b, c.legacy)
		}
		var in LegacyPart
		if err := json.Unmarshal([]byte(c.legacy), &in); err != nil {
			t.Fatal(err)
		}
		got, err := LegacyPartToV1(in)
		if err != nil || norm(t, got) != norm(t, c.v1) {
			t.Errorf("%s from legacy: %v\n got %s\nwant %s", c.name, err, norm(t, got), norm(t, c.v1))
		}
	}
	for name, s := range map[string]string{
		"kind not type": `{"kind":"video"}`,
		"unknown type":  `{"type":"video","text":"x"}`,
		"file no body":  `{"type":"file","file":{}}`,
		"data no data":  `{"type":"data"}`,
	} {
		var in LegacyPart
		if err := json.Unmarshal([]byte(s), &in); err != nil {
			t.Fatal(err)
		}
		if _, err := LegacyPartToV1(in); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%s: %v, want ErrInvalidParams", name, err)
		}
	}
}

func TestLegacyStates(t *testing.T) {
	// The older enum: submitted, working, input-required, completed,
	// canceled, failed, unknown.
	want := map[TaskState]string{
		TaskStateUnspecified: "unknown", TaskStateSubmitted: "submitted", TaskStateWorking: "working",
		TaskStateInputRequired: "input-required", TaskStateCompleted: "completed", TaskStateCanceled: "canceled",
		TaskStateFailed: "failed", TaskStateRejected: "failed", TaskStateAuthRequired: "input-required",
	}
	for s, name := range want {
		if got := LegacyStateFromV1(s); got != name {
			t.Errorf("LegacyStateFromV1(%s) = %q, want %q", s, got, name)
		}
		back, err := LegacyStatusToV1(LegacyTaskStatus{State: name})
		if err != nil || back.State.Settled() != s.Settled() || back.State.Terminal() != s.Terminal() {
			t.Errorf("%q read back as %s (%v), class differs from %s", name, back.State, err, s)
		}
	}
	if _, err := LegacyStatusToV1(LegacyTaskStatus{State: "done"}); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("unknown state: %v", err)
	}
}

func TestLegacySendParamsToV1(t *testing.T) {
	const body = `{"id":"client-1","sessionId":"sess-9","acceptedOutputModes":["text"],
		"message":{"role":"user","parts":[{"type":"text","text":"hi"},{"type":"file","file":{"name":"a.txt","mimeType":"text/plain","bytes":"aGk="}},{"type":"data","data":{"a":1}}],"metadata":{"m":1}},
		"historyLength":2,"metadata":{"k":"v"}}`
	var p LegacySendParams
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	req, err := p.ToV1()
	if err != nil {
		t.Fatal(err)
	}
	if err := req.Validate(); err != nil {
		t.Fatalf("converted request does not validate: %v", err)
	}
	m := req.Message
	if m.MessageID == "" || m.ContextID != "sess-9" || m.TaskID != "" || m.Role != RoleUser || len(m.Parts) != 3 ||
		*m.Parts[0].Text != "hi" || string(m.Parts[1].Raw) != "hi" || m.Parts[1].Filename != "a.txt" || string(m.Parts[2].Data) != `{"a":1}` ||
		m.Metadata["m"] != 1.0 || req.Metadata["k"] != "v" {
		t.Fatalf("message %s", norm(t, req))
	}
	if req.Configuration == nil || req.Configuration.HistoryLength == nil || *req.Configuration.HistoryLength != 2 || req.Configuration.ReturnImmediately {
		t.Fatalf("configuration %s", norm(t, req.Configuration))
	}
	if again, _ := p.ToV1(); again.Message.MessageID == m.MessageID {
		t.Error("each send must get its own message id")
	}

	good := func() LegacySendParams {
		return LegacySendParams{ID: "c", Message: &LegacyMessage{Role: "user", Parts: []LegacyPart{{Type: "text", Text: ptr("x")}}}}
	}
	for name, mut := range map[string]func(*LegacySendParams){
		"no id":      func(p *LegacySendParams) { p.ID = "" },
		"no message": func(p *LegacySendParams) { p.Message = nil },
		"bad role":   func(p *LegacySendParams) { p.Message.Role = "ROLE_USER" },
		"bad part":   func(p *LegacySendParams) { p.Message.Parts[0].Type = "kind" },
		"no text":    func(p *LegacySendParams) { p.Message.Parts[0].Text = nil },
	} {
		p := good()
		mut(&p)
		if _, err := p.ToV1(); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%s: %v, want ErrInvalidParams", name, err)
		}
	}
}

// legacyTask is a 1.0 task that the older dialect can carry in full:
// artifact ids follow LegacyArtifactID and states are in its enum.
func legacyTask() Task {
	ts := &Timestamp{time.Date(2026, 3, 4, 5, 6, 7, 890e6, time.UTC)}
	return Task{
		ID: LegacyTaskID("client-1"), ContextID: "sess-9",
		Status: TaskStatus{State: TaskStateCompleted, Timestamp: ts, Message: &Message{Role: RoleAgent, Parts: []Part{TextPart("done")}}},
		History: []Message{
			{Role: RoleUser, Parts: []Part{TextPart("q"), FilePart([]byte("pdf"), "a.pdf", "application/pdf"), URLPart("https://x.example/b", "b", "image/png")},
				Metadata: map[string]any{"trace": "t"}},
			{Role: RoleAgent, Parts: []Part{DataPart(map[string]any{"k": "v"}), DataPart([]any{1.0})}},
		},
		Artifacts: []Artifact{
			{ArtifactID: LegacyArtifactID(0), Name: "report", Description: "the report", Parts: []Part{TextPart("r")}, Metadata: map[string]any{"pages": 3.0}},
			{ArtifactID: LegacyArtifactID(1), Parts: []Part{DataPart("x")}},
		},
		Metadata: map[string]any{"k": "v"},
	}
}

// dropMessageIDs clears what the older dialect cannot carry: message ids.
func dropMessageIDs(t Task) Task {
	t.History = append([]Message(nil), t.History...)
	for i := range t.History {
		t.History[i].MessageID = ""
	}
	if t.Status.Message != nil {
		m := *t.Status.Message
		m.MessageID = ""
		t.Status.Message = &m
	}
	return t
}

func TestLegacyTaskRoundTrip(t *testing.T) {
	task := legacyTask()
	lt := LegacyTaskFromV1(task, "client-1")
	b, err := json.Marshal(lt)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"id":"client-1"`, `"sessionId":"sess-9"`, `"state":"completed"`, `"role":"user"`, `"role":"agent"`,
		`"type":"text"`, `"type":"file"`, `"type":"data"`, `"index":0`, `"index":1`, `"timestamp":"2026-03-04T05:06:07.890Z"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("legacy task lacks %s: %s", want, b)
		}
	}
	for _, not := range []string{`"kind"`, `"messageId"`, `"artifactId"`, `"contextId"`, "TASK_STATE_", "ROLE_"} {
		if strings.Contains(string(b), not) {
			t.Errorf("legacy task has %s: %s", not, b)
		}
	}
	var in LegacyTask
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	back, err := LegacyTaskToV1(in)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != task.ID {
		t.Errorf("id %s, want %s", back.ID, task.ID)
	}
	for _, m := range back.History {
		if m.MessageID == "" {
			t.Error("converted history message without id")
		}
	}
	if norm(t, dropMessageIDs(back)) != norm(t, dropMessageIDs(task)) {
		t.Fatalf("round trip:\n got %s\nwant %s", norm(t, dropMessageIDs(back)), norm(t, dropMessageIDs(task)))
	}
	if LegacyTaskFromV1(task, "").ID != task.ID {
		t.Error("without a client id the task id is used")
	}
}

func TestLegacyFromPeer(t *testing.T) {
	// A task as the v0.1.0 Python sample server wrote it: naive isoformat
	// timestamp, index defaulted, append/lastChunk null.
	const body = `{"id":"client-1","sessionId":"s","status":{"state":"input-required","timestamp":"2025-04-02T16:59:25.331844",
		"message":{"role":"agent","parts":[{"type":"text","text":"which?","metadata":null}],"metadata":null}},
		"artifacts":[{"name":null,"parts":[{"type":"text","text":"a"}],"index":0,"append":null,"lastChunk":null}],"history":null,"metadata":null}`
	var in LegacyTask
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		t.Fatal(err)
	}
	task, err := LegacyTaskToV1(in)
	if err != nil {
		t.Fatal(err)
	}
	if task.ID != LegacyTaskID("client-1") || task.Status.State != TaskStateInputRequired || task.Status.Message.Text() != "which?" ||
		!task.Status.Timestamp.Equal(time.Date(2025, 4, 2, 16, 59, 25, 331e6, time.UTC)) || task.Artifacts[0].ArtifactID != LegacyArtifactID(0) {
		t.Fatalf("task %s", norm(t, task))
	}
	for name, lt := range map[string]LegacyTask{
		"no id":         {Status: LegacyTaskStatus{State: "working"}},
		"bad state":     {ID: "c", Status: LegacyTaskStatus{State: "TASK_STATE_WORKING"}},
		"bad time":      {ID: "c", Status: LegacyTaskStatus{State: "working", Timestamp: "now"}},
		"bad status":    {ID: "c", Status: LegacyTaskStatus{State: "working", Message: &LegacyMessage{Role: "bot"}}},
		"bad history":   {ID: "c", Status: LegacyTaskStatus{State: "working"}, History: []LegacyMessage{{Role: "user", Parts: []LegacyPart{{Type: "x"}}}}},
		"bad artifacts": {ID: "c", Status: LegacyTaskStatus{State: "working"}, Artifacts: []LegacyArtifact{{Parts: []LegacyPart{{Type: "file"}}}}},
	} {
		if _, err := LegacyTaskToV1(lt); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%s: %v, want ErrInvalidParams", name, err)
		}
	}
}

func TestLegacyStreamEvents(t *testing.T) {
	index := func(id string) int {
		if id == "a2" {
			return 1
		}
		return 0
	}
	final := map[TaskState]bool{
		TaskStateSubmitted: false, TaskStateWorking: false, TaskStateInputRequired: true, TaskStateAuthRequired: true,
		TaskStateCompleted: true, TaskStateFailed: true, TaskStateCanceled: true, TaskStateRejected: true,
	}
	for state, want := range final {
		ev := StreamResponse{StatusUpdate: &TaskStatusUpdateEvent{TaskID: "t", ContextID: "c", Status: TaskStatus{State: state}, Metadata: map[string]any{"k": "v"}}}
		u, ok := LegacyStreamEvent(ev, "client-1", index).(*LegacyStatusUpdate)
		if !ok || u.ID != "client-1" || u.Final != want || u.Metadata["k"] != "v" {
			t.Errorf("%s: %#v, final want %v", state, u, want)
		}
		b, _ := json.Marshal(u)
		if !strings.Contains(string(b), `"final":`) || strings.Contains(string(b), `"kind"`) || strings.Contains(string(b), `"taskId"`) {
			t.Errorf("%s: %s", state, b)
		}
		task := Task{ID: "t", Status: TaskStatus{State: state}}
		if u, ok := LegacyStreamEvent(StreamResponse{Task: &task}, "client-1", index).(*LegacyStatusUpdate); !ok || u.Final != want || u.ID != "client-1" {
			t.Errorf("%s task snapshot: %#v", state, u)
		}
	}
	au := StreamResponse{ArtifactUpdate: &TaskArtifactUpdateEvent{TaskID: "t", ContextID: "c", Append: true, LastChunk: true,
		Artifact: Artifact{ArtifactID: "a2", Name: "n", Parts: []Part{TextPart("x")}}}}
	a, ok := LegacyStreamEvent(au, "client-1", index).(*LegacyArtifactUpdate)
	if !ok || a.ID != "client-1" || a.Artifact.Index != 1 || !a.Artifact.Append || !a.Artifact.LastChunk || a.Artifact.Name != "n" {
		t.Fatalf("artifact update %#v", a)
	}
	b, _ := json.Marshal(a)
	if !strings.Contains(string(b), `"index":1`) || !strings.Contains(string(b), `"type":"text"`) {
		t.Errorf("artifact update JSON %s", b)
	}
	msg := Message{MessageID: "m", Role: RoleAgent, Parts: []Part{TextPart("hello")}}
	u, ok := LegacyStreamEvent(StreamResponse{Message: &msg}, "client-1", index).(*LegacyStatusUpdate)
	if !ok || !u.Final || u.Status.State != "completed" || u.Status.Message == nil || u.Status.Message.Role != "agent" {
		t.Fatalf("message reply %#v", u)
	}
	if _, err := ParseTimestamp(u.Status.Timestamp); err != nil || !strings.HasSuffix(u.Status.Timestamp, "Z") {
		t.Errorf("timestamp %q: %v", u.Status.Timestamp, err)
	}
	if v := LegacyStreamEvent(StreamResponse{}, "client-1", index); v != nil {
		t.Errorf("empty event: %#v", v)
	}
}

func TestLegacyParamsDecode(t *testing.T) {
	var q LegacyTaskQueryParams
	if err := json.Unmarshal([]byte(`{"id":"client-1","historyLength":0,"metadata":{"k":"v"}}`), &q); err != nil ||
		q.ID != "client-1" || q.HistoryLength == nil || *q.HistoryLength != 0 || q.Metadata["k"] != "v" {
		t.Fatalf("query params %+v %v", q, err)
	}
	var id LegacyTaskIDParams
	if err := json.Unmarshal([]byte(`{"id":"client-1"}`), &id); err != nil || id.ID != "client-1" {
		t.Fatalf("id params %+v %v", id, err)
	}
	b, _ := json.Marshal(LegacyTaskQueryParams{ID: "c"})
	if string(b) != `{"id":"c"}` {
		t.Errorf("query params JSON %s", b)
	}
}
