package schemas

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Table tests of the 0.3 conversions in a2a03.go and v03.go: every Part
// kind, state and role both ways, whole tasks, stream events, send params,
// push configs and error data.

func TestV03PartTable(t *testing.T) {
	cases := []struct {
		name string
		v1   Part
		v03  string // JSON of the 0.3 part
	}{
		{"text", TextPart("hi"), `{"kind":"text","text":"hi"}`},
		{"empty text", TextPart(""), `{"kind":"text","text":""}`},
		{"text metadata", Part{Text: ptr("t"), Metadata: map[string]any{"k": "v"}}, `{"kind":"text","text":"t","metadata":{"k":"v"}}`},
		{"bytes", FilePart([]byte{0, 1, 2, 250}, "a.bin", "application/octet-stream"),
			`{"kind":"file","file":{"name":"a.bin","mimeType":"application/octet-stream","bytes":"AAEC+g=="}}`},
		{"empty bytes", Part{Raw: []byte{}, Filename: "empty"}, `{"kind":"file","file":{"name":"empty","bytes":""}}`},
		{"bytes metadata", Part{Raw: []byte("x"), Metadata: map[string]any{"n": 1.0}}, `{"kind":"file","file":{"bytes":"eA=="},"metadata":{"n":1}}`},
		{"url", URLPart("https://x.example/f.txt", "f.txt", "text/plain"),
			`{"kind":"file","file":{"name":"f.txt","mimeType":"text/plain","uri":"https://x.example/f.txt"}}`},
		{"bare url", Part{URL: ptr("https://x.example/")}, `{"kind":"file","file":{"uri":"https://x.example/"}}`},
		{"data object", DataPart(map[string]any{"k": 1}), `{"kind":"data","data":{"k":1}}`},
		{"data object metadata", Part{Data: json.RawMessage(`{"k":[1]}`), MediaType: "application/json", Metadata: map[string]any{"m": "v"}},
			`{"kind":"data","data":{"k":[1]},"metadata":{"m":"v"}}`},
		{"data array", DataPart([]int{1, 2}), `{"kind":"data","data":{"value":[1,2]},"metadata":{"a2abus/wrapped":true}}`},
		{"data string", DataPart("s"), `{"kind":"data","data":{"value":"s"},"metadata":{"a2abus/wrapped":true}}`},
		{"data number", DataPart(4.5), `{"kind":"data","data":{"value":4.5},"metadata":{"a2abus/wrapped":true}}`},
		{"data bool", DataPart(false), `{"kind":"data","data":{"value":false},"metadata":{"a2abus/wrapped":true}}`},
		{"data null", Part{Data: json.RawMessage(`null`), MediaType: "application/json"}, `{"kind":"data","data":{"value":null},"metadata":{"a2abus/wrapped":true}}`},
		{"data wrapped metadata", Part{Data: json.RawMessage(`[true]`), MediaType: "application/json", Metadata: map[string]any{"m": "v"}},
			`{"kind":"data","data":{"value":[true]},"metadata":{"a2abus/wrapped":true,"m":"v"}}`},
		{"data own media type", Part{Data: json.RawMessage(`{"a":true}`), MediaType: "application/vnd.x+json"},
			`{"kind":"data","data":{"a":true},"metadata":{"a2abus/mediaType":"application/vnd.x+json"}}`},
		{"text media type and filename", Part{Text: ptr("# t"), MediaType: "text/markdown", Filename: "t.md", Metadata: map[string]any{"k": "v"}},
			`{"kind":"text","text":"# t","metadata":{"a2abus/filename":"t.md","a2abus/mediaType":"text/markdown","k":"v"}}`},
		{"data without media type", Part{Data: json.RawMessage(`{"a":1}`)}, `{"kind":"data","data":{"a":1},"metadata":{"a2abus/mediaType":"-"}}`},
		{"data filename", Part{Data: json.RawMessage(`{"a":1}`), MediaType: "application/json", Filename: "d.json"},
			`{"kind":"data","data":{"a":1},"metadata":{"a2abus/filename":"d.json"}}`},
		{"data user metadata like ours", Part{Data: json.RawMessage(`{"a":1}`), MediaType: "application/json", Metadata: map[string]any{"a2abus/wrapped": true, "mediaType": "x"}},
			`{"kind":"data","data":{"a":1},"metadata":{"a2abus/wrapped":true,"mediaType":"x"}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// 1.0 -> 0.3
			b, err := json.Marshal(PartToV03(c.v1))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != c.v03 {
				t.Fatalf("to 0.3:\n got %s\nwant %s", b, c.v03)
			}
			// 0.3 (as a peer sends it) -> 1.0
			var in V03Part
			if err := json.Unmarshal([]byte(c.v03), &in); err != nil {
				t.Fatal(err)
			}
			got, err := PartFromV03(in)
			if err != nil {
				t.Fatal(err)
			}
			if norm(t, got) != norm(t, c.v1) {
				t.Fatalf("from 0.3:\n got %s\nwant %s", norm(t, got), norm(t, c.v1))
			}
			if c.v1.Raw != nil && !reflect.DeepEqual(got.Raw, c.v1.Raw) {
				t.Fatalf("bytes %v, want %v", got.Raw, c.v1.Raw)
			}
		})
	}
}

func TestV03PartFromPeer(t *testing.T) {
	ok := []struct {
		name string
		v03  string
		v1   Part
	}{
		{"url-safe base64", `{"kind":"file","file":{"bytes":"_-8="}}`, Part{Raw: []byte{0xff, 0xef}}},
		{"file name only with uri", `{"kind":"file","file":{"name":"n","uri":"u"}}`, Part{URL: ptr("u"), Filename: "n"}},
		{"data", `{"kind":"data","data":{"a":{"b":null}}}`, Part{Data: json.RawMessage(`{"a":{"b":null}}`), MediaType: "application/json"}},
	}
	for _, c := range ok {
		var in V03Part
		if err := json.Unmarshal([]byte(c.v03), &in); err != nil {
			t.Fatal(err)
		}
		got, err := PartFromV03(in)
		if err != nil || norm(t, got) != norm(t, c.v1) {
			t.Errorf("%s: got %s (%v), want %s", c.name, norm(t, got), err, norm(t, c.v1))
		}
	}
	bad := map[string]string{
		"unknown kind":      `{"kind":"video","text":"x"}`,
		"1.0 shape":         `{"kind":"TEXT","text":"x"}`,
		"text without text": `{"kind":"text"}`,
		"file without file": `{"kind":"file"}`,
		"file without body": `{"kind":"file","file":{"name":"n"}}`,
		"bytes not base64":  `{"kind":"file","file":{"bytes":"***"}}`,
		"data without data": `{"kind":"data"}`,
	}
	for name, s := range bad {
		var in V03Part
		if err := json.Unmarshal([]byte(s), &in); err != nil {
			t.Fatal(err)
		}
		if _, err := PartFromV03(in); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%s: %v, want ErrInvalidParams", name, err)
		}
	}
}

func TestV03StateTable(t *testing.T) {
	want := map[TaskState]string{
		TaskStateUnspecified:   "unknown",
		TaskStateSubmitted:     "submitted",
		TaskStateWorking:       "working",
		TaskStateCompleted:     "completed",
		TaskStateFailed:        "failed",
		TaskStateCanceled:      "canceled",
		TaskStateInputRequired: "input-required",
		TaskStateRejected:      "rejected",
		TaskStateAuthRequired:  "auth-required",
	}
	for s, name := range want {
		if got := StateToV03(s); got != name {
			t.Errorf("StateToV03(%s) = %q, want %q", s, got, name)
		}
		back, err := StateFromV03(name)
		if err != nil || back != s {
			t.Errorf("StateFromV03(%q) = %s, %v; want %s", name, back, err, s)
		}
	}
	for _, bad := range []string{"", "cancelled", "Canceled", "TASK_STATE_WORKING", "input_required", "done"} {
		if _, err := StateFromV03(bad); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("StateFromV03(%q): %v, want ErrInvalidParams", bad, err)
		}
	}
}

func TestV03RoleTable(t *testing.T) {
	for r, name := range map[Role]string{RoleUser: "user", RoleAgent: "agent"} {
		if got := RoleToV03(r); got != name {
			t.Errorf("RoleToV03(%s) = %q", r, got)
		}
		if back, err := RoleFromV03(name); err != nil || back != r {
			t.Errorf("RoleFromV03(%q) = %s, %v", name, back, err)
		}
	}
	for _, bad := range []string{"", "ROLE_USER", "User", "system"} {
		if _, err := RoleFromV03(bad); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("RoleFromV03(%q): %v, want ErrInvalidParams", bad, err)
		}
	}
}

// fullTask has every field set that 0.3 can carry.
func fullTask() Task {
	ts := &Timestamp{time.Date(2026, 3, 4, 5, 6, 7, 890e6, time.UTC)}
	return Task{
		ID: "0b6d7a3e-7a8e-4d0a-9d33-0f4c2a1d5e11", ContextID: "ctx-1",
		Status: TaskStatus{State: TaskStateInputRequired, Timestamp: ts,
			Message: &Message{MessageID: "s1", ContextID: "ctx-1", TaskID: "0b6d7a3e-7a8e-4d0a-9d33-0f4c2a1d5e11", Role: RoleAgent, Parts: []Part{TextPart("which one?")}}},
		History: []Message{
			{MessageID: "m1", ContextID: "ctx-1", Role: RoleUser, Parts: []Part{
				TextPart("q"), FilePart([]byte("pdf"), "a.pdf", "application/pdf"), URLPart("https://x.example/b", "b", "image/png"),
				DataPart(map[string]any{"k": "v"}), DataPart([]any{1.0, "two"}),
			}, Metadata: map[string]any{"trace": "t"}, Extensions: []string{"urn:x"}, ReferenceTaskIDs: []string{"old"}},
			{MessageID: "s1", ContextID: "ctx-1", TaskID: "0b6d7a3e-7a8e-4d0a-9d33-0f4c2a1d5e11", Role: RoleAgent, Parts: []Part{TextPart("which one?")}},
		},
		Artifacts: []Artifact{
			{ArtifactID: "a1", Name: "report", Description: "the report", Parts: []Part{TextPart("r"), DataPart(7.0)},
				Metadata: map[string]any{"pages": 3.0}, Extensions: []string{"urn:y"}},
			{ArtifactID: "a2", Parts: []Part{{Raw: []byte{}, Filename: "z"}}},
		},
		Metadata: map[string]any{"tenant": "acme", "nested": map[string]any{"a": []any{true}}},
	}
}

func TestV03TaskRoundTripFull(t *testing.T) {
	task := fullTask()
	b, err := json.Marshal(TaskToV03(task))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"kind":"task"`, `"kind":"message"`, `"kind":"text"`, `"kind":"file"`, `"kind":"data"`,
		`"state":"input-required"`, `"role":"user"`, `"role":"agent"`, `"timestamp":"2026-03-04T05:06:07.890Z"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("0.3 task lacks %s: %s", want, b)
		}
	}
	for _, not := range []string{"TASK_STATE_", "ROLE_", `"raw"`, `"url"`, `"mediaType"`, `"filename"`} {
		if strings.Contains(string(b), not) {
			t.Errorf("0.3 task has 1.0 spelling %s: %s", not, b)
		}
	}
	var v V03Task
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	back, err := TaskFromV03(v)
	if err != nil {
		t.Fatal(err)
	}
	if norm(t, back) != norm(t, task) {
		t.Fatalf("round trip:\n got %s\nwant %s", norm(t, back), norm(t, task))
	}
}

func TestV03TimestampsLenientIn(t *testing.T) {
	want := time.Date(2025, 4, 2, 16, 59, 25, 331e6, time.UTC)
	for _, in := range []string{"2025-04-02T16:59:25.331Z", "2025-04-02T16:59:25.331844", "2025-04-02T18:59:25.331+02:00", "2025-04-02T16:59:25.331844+00:00"} {
		got, err := TaskFromV03(V03Task{Kind: "task", ID: "t", ContextID: "c", Status: V03TaskStatus{State: "working", Timestamp: in}})
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if !got.Status.Timestamp.Equal(want) {
			t.Errorf("%s read as %s", in, got.Status.Timestamp.Time)
		}
		if out := TaskToV03(got).Status.Timestamp; out != "2025-04-02T16:59:25.331Z" {
			t.Errorf("%s written as %s", in, out)
		}
	}
	if _, err := TaskFromV03(V03Task{ID: "t", Status: V03TaskStatus{State: "working", Timestamp: "yesterday"}}); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("bad timestamp: %v", err)
	}
	if _, err := TaskFromV03(V03Task{ID: "t", Status: V03TaskStatus{State: "finished"}}); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("bad state: %v", err)
	}
	if _, err := TaskFromV03(V03Task{ID: "t", Status: V03TaskStatus{State: "working"}, History: []V03Message{{Role: "bot"}}}); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("bad history role: %v", err)
	}
	if _, err := ArtifactFromV03(V03Artifact{ArtifactID: "a", Parts: []V03Part{{Kind: "image"}}}); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("bad artifact part: %v", err)
	}
}

func TestV03MessageAndArtifactRoundTrip(t *testing.T) {
	task := fullTask()
	for _, m := range task.History {
		back, err := MessageFromV03(MessageToV03(m))
		if err != nil || norm(t, back) != norm(t, m) {
			t.Errorf("message %s: %v\n got %s\nwant %s", m.MessageID, err, norm(t, back), norm(t, m))
		}
	}
	for _, a := range task.Artifacts {
		back, err := ArtifactFromV03(ArtifactToV03(a))
		if err != nil || norm(t, back) != norm(t, a) {
			t.Errorf("artifact %s: %v\n got %s\nwant %s", a.ArtifactID, err, norm(t, back), norm(t, a))
		}
	}
}

func TestV03StreamResponses(t *testing.T) {
	task := fullTask()
	if v, ok := StreamResponseToV03(StreamResponse{Task: &task}).(*V03Task); !ok || v.Kind != "task" || v.ID != task.ID {
		t.Errorf("task event: %#v", v)
	}
	msg := task.History[0]
	if v, ok := StreamResponseToV03(StreamResponse{Message: &msg}).(*V03Message); !ok || v.Kind != "message" || v.MessageID != "m1" {
		t.Errorf("message event: %#v", v)
	}
	final := map[TaskState]bool{
		TaskStateSubmitted: false, TaskStateWorking: false,
		TaskStateInputRequired: true, TaskStateAuthRequired: true,
		TaskStateCompleted: true, TaskStateFailed: true, TaskStateCanceled: true, TaskStateRejected: true,
	}
	for state, want := range final {
		ev := &TaskStatusUpdateEvent{TaskID: "t", ContextID: "c", Status: TaskStatus{State: state}, Metadata: map[string]any{"k": "v"}}
		v, ok := StreamResponseToV03(StreamResponse{StatusUpdate: ev}).(*V03StatusUpdate)
		if !ok || v.Kind != "status-update" || v.Final != want || v.TaskID != "t" || v.ContextID != "c" ||
			v.Status.State != StateToV03(state) || v.Metadata["k"] != "v" {
			t.Errorf("%s: %#v (final want %v)", state, v, want)
		}
		b, _ := json.Marshal(v)
		if !strings.Contains(string(b), `"final":`) {
			t.Errorf("%s: final must always be present: %s", state, b)
		}
	}
	au := &TaskArtifactUpdateEvent{TaskID: "t", ContextID: "c", Artifact: task.Artifacts[0], Append: true, LastChunk: true, Metadata: map[string]any{"k": "v"}}
	v, ok := StreamResponseToV03(StreamResponse{ArtifactUpdate: au}).(*V03ArtifactUpdate)
	if !ok || v.Kind != "artifact-update" || !v.Append || !v.LastChunk || v.TaskID != "t" || v.ContextID != "c" || v.Artifact.ArtifactID != "a1" {
		t.Fatalf("artifact event: %#v", v)
	}
	if back, err := ArtifactFromV03(v.Artifact); err != nil || norm(t, back) != norm(t, au.Artifact) {
		t.Errorf("artifact event artifact: %v %s", err, norm(t, back))
	}
	if v := StreamResponseToV03(StreamResponse{}); v != nil {
		t.Errorf("empty event: %#v", v)
	}
}

func TestV03JSONDiscriminators(t *testing.T) {
	task := fullTask()
	events := map[string]StreamResponse{
		`"kind":"task"`:            {Task: &task},
		`"kind":"message"`:         {Message: &task.History[0]},
		`"kind":"status-update"`:   {StatusUpdate: &TaskStatusUpdateEvent{TaskID: "t", ContextID: "c", Status: TaskStatus{State: TaskStateAuthRequired}}},
		`"kind":"artifact-update"`: {ArtifactUpdate: &TaskArtifactUpdateEvent{TaskID: "t", ContextID: "c", Artifact: task.Artifacts[0]}},
	}
	for want, r := range events {
		b, err := json.Marshal(StreamResponseToV03(r))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "{"+want) {
			t.Errorf("%s should lead: %s", want, b)
		}
		if strings.Contains(string(b), "TASK_STATE_") || strings.Contains(string(b), "ROLE_") {
			t.Errorf("1.0 enum in 0.3 JSON: %s", b)
		}
	}
	b, _ := json.Marshal(StreamResponseToV03(events[`"kind":"status-update"`]))
	if !strings.Contains(string(b), `"state":"auth-required"`) || !strings.Contains(string(b), `"final":true`) {
		t.Errorf("status-update: %s", b)
	}
}

func TestV03SendParamsToV1(t *testing.T) {
	const body = `{"message":{"kind":"message","messageId":"m","contextId":"c","role":"user",
		"parts":[{"kind":"text","text":"hi"},{"kind":"data","data":{"a":1}},{"kind":"file","file":{"uri":"https://x.example/f","mimeType":"text/plain"}}],
		"referenceTaskIds":["r"],"extensions":["urn:e"]},
		"configuration":CONFIG,"metadata":{"k":"v"}}`
	n0, n3 := int32(0), int32(3)
	cases := []struct {
		config      string
		noConfig    bool
		returnNow   bool
		histLen     *int32
		modes       []string
		pushWebhook bool
	}{
		{config: `null`, noConfig: true},
		{config: `{}`},
		{config: `{"blocking":true}`},
		{config: `{"blocking":false}`, returnNow: true},
		{config: `{"historyLength":3,"acceptedOutputModes":["text/plain","application/json"]}`, histLen: &n3, modes: []string{"text/plain", "application/json"}},
		{config: `{"historyLength":0,"blocking":false}`, histLen: &n0, returnNow: true},
		{config: `{"pushNotificationConfig":{"url":"https://hook.example/"}}`, pushWebhook: true},
	}
	for _, c := range cases {
		var p V03MessageSendParams
		if err := json.Unmarshal([]byte(strings.Replace(body, "CONFIG", c.config, 1)), &p); err != nil {
			t.Fatal(err)
		}
		req, err := p.ToV1()
		if err != nil {
			t.Fatalf("%s: %v", c.config, err)
		}
		if err := req.Validate(); err != nil {
			t.Errorf("%s: converted request does not validate: %v", c.config, err)
		}
		m := req.Message
		if m.MessageID != "m" || m.ContextID != "c" || m.Role != RoleUser || len(m.Parts) != 3 || *m.Parts[0].Text != "hi" ||
			string(m.Parts[1].Data) != `{"a":1}` || *m.Parts[2].URL != "https://x.example/f" || m.Parts[2].MediaType != "text/plain" ||
			!reflect.DeepEqual(m.ReferenceTaskIDs, []string{"r"}) || !reflect.DeepEqual(m.Extensions, []string{"urn:e"}) || req.Metadata["k"] != "v" {
			t.Errorf("%s: message %s", c.config, norm(t, req))
		}
		cfg := req.Configuration
		if c.noConfig {
			if cfg != nil {
				t.Errorf("%s: configuration %s", c.config, norm(t, cfg))
			}
			continue
		}
		if cfg == nil {
			t.Fatalf("%s: no configuration", c.config)
		}
		if cfg.ReturnImmediately != c.returnNow || !reflect.DeepEqual(cfg.HistoryLength, c.histLen) ||
			!reflect.DeepEqual(cfg.AcceptedOutputModes, c.modes) || (cfg.TaskPushNotificationConfig != nil) != c.pushWebhook {
			t.Errorf("%s: configuration %s", c.config, norm(t, cfg))
		}
	}

	good := func() V03MessageSendParams {
		return V03MessageSendParams{Message: &V03Message{Kind: "message", MessageID: "m", Role: "user", Parts: []V03Part{{Kind: "text", Text: ptr("x")}}}}
	}
	bad := map[string]func(*V03MessageSendParams){
		"no message":   func(p *V03MessageSendParams) { p.Message = nil },
		"1.0 role":     func(p *V03MessageSendParams) { p.Message.Role = "ROLE_USER" },
		"no role":      func(p *V03MessageSendParams) { p.Message.Role = "" },
		"part kind":    func(p *V03MessageSendParams) { p.Message.Parts[0].Kind = "image" },
		"text no text": func(p *V03MessageSendParams) { p.Message.Parts[0].Text = nil },
		"data no data": func(p *V03MessageSendParams) { p.Message.Parts[0] = V03Part{Kind: "data"} },
		"file no body": func(p *V03MessageSendParams) { p.Message.Parts[0] = V03Part{Kind: "file", File: &V03File{Name: "n"}} },
		"bytes garbage": func(p *V03MessageSendParams) {
			p.Message.Parts[0] = V03Part{Kind: "file", File: &V03File{Bytes: ptr("%%")}}
		},
	}
	for name, mut := range bad {
		p := good()
		mut(&p)
		if _, err := p.ToV1(); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%s: %v, want ErrInvalidParams", name, err)
		}
	}
}

func TestV03ErrorDataShape(t *testing.T) {
	for _, row := range ErrorTable {
		b, err := json.Marshal(V03ErrorData(Errorf(row, "x").With("taskId", "t1")))
		if err != nil {
			t.Fatal(err)
		}
		want := `{"domain":"a2a-protocol.org","reason":"` + row.Reason + `","taskId":"t1"}`
		if string(b) != want {
			t.Errorf("%s: %s, want %s", row.Reason, b, want)
		}
		b, _ = json.Marshal(V03ErrorData(row))
		if want := `{"domain":"a2a-protocol.org","reason":"` + row.Reason + `"}`; string(b) != want {
			t.Errorf("%s without metadata: %s, want %s", row.Reason, b, want)
		}
	}
}

func TestV03PushConfig(t *testing.T) {
	const set = `{"taskId":"t1","pushNotificationConfig":{"id":"c1","url":"https://hook.example/a2a","token":"tok",
		"authentication":{"schemes":["Bearer","Basic"],"credentials":"secret"}}}`
	var p V03TaskPushNotificationConfig
	if err := json.Unmarshal([]byte(set), &p); err != nil {
		t.Fatal(err)
	}
	got, err := p.ToV1()
	if err != nil {
		t.Fatal(err)
	}
	want := TaskPushNotificationConfig{ID: "c1", TaskID: "t1", URL: "https://hook.example/a2a", Token: "tok",
		Authentication: &AuthenticationInfo{Scheme: "Bearer", Credentials: "secret"}}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("ToV1 = %s", norm(t, got))
	}
	b, _ := json.Marshal(PushConfigToV03(want))
	if w := `{"taskId":"t1","pushNotificationConfig":{"id":"c1","url":"https://hook.example/a2a","token":"tok","authentication":{"schemes":["Bearer"],"credentials":"secret"}}}`; string(b) != w {
		t.Fatalf("PushConfigToV03:\n got %s\nwant %s", b, w)
	}
	var rt V03TaskPushNotificationConfig
	if err := json.Unmarshal(b, &rt); err != nil {
		t.Fatal(err)
	}
	if back, err := rt.ToV1(); err != nil || !reflect.DeepEqual(*back, want) {
		t.Fatalf("round trip: %s %v", norm(t, back), err)
	}
	inline := V03PushNotificationConfig{URL: "https://hook.example/"}
	if c, err := inline.ToV1(""); err != nil || c.URL != inline.URL || c.TaskID != "" || c.Authentication != nil {
		t.Fatalf("inline: %s %v", norm(t, c), err)
	}
	for name, c := range map[string]V03TaskPushNotificationConfig{
		"no task":    {PushNotificationConfig: V03PushNotificationConfig{URL: "u"}},
		"no url":     {TaskID: "t"},
		"no schemes": {TaskID: "t", PushNotificationConfig: V03PushNotificationConfig{URL: "u", Authentication: &V03PushNotificationAuthenticationInfo{}}},
	} {
		if _, err := c.ToV1(); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%s: %v, want ErrInvalidParams", name, err)
		}
	}
}

func TestV03QueryParamsDecode(t *testing.T) {
	var q V03TaskQueryParams
	if err := json.Unmarshal([]byte(`{"id":"t","historyLength":2,"metadata":{"k":"v"}}`), &q); err != nil ||
		q.ID != "t" || q.HistoryLength == nil || *q.HistoryLength != 2 || q.Metadata["k"] != "v" {
		t.Fatalf("query params %+v %v", q, err)
	}
	var id V03TaskIDParams
	if err := json.Unmarshal([]byte(`{"id":"t","metadata":{"k":"v"}}`), &id); err != nil || id.ID != "t" || id.Metadata["k"] != "v" {
		t.Fatalf("id params %+v %v", id, err)
	}
}
