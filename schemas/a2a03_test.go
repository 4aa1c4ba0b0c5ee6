package schemas

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestV03PartsRoundTrip(t *testing.T) {
	cases := map[string]Part{
		"text":          TextPart("hi"),
		"empty text":    TextPart(""),
		"raw":           FilePart([]byte{0, 1, 2, 250}, "a.bin", "application/octet-stream"),
		"empty raw":     {Raw: []byte{}, Filename: "empty"},
		"url":           URLPart("https://x.example/f.txt", "f.txt", "text/plain"),
		"data object":   {Data: json.RawMessage(`{"k":1}`), MediaType: "application/json"},
		"data array":    {Data: json.RawMessage(`[1,2]`), MediaType: "application/json"},
		"data scalar":   {Data: json.RawMessage(`"s"`), MediaType: "application/json", Metadata: map[string]any{"m": "v"}},
		"data own type": {Data: json.RawMessage(`{"a":true}`), MediaType: "application/vnd.x+json"},
		"metadata":      {Text: ptr("t"), Metadata: map[string]any{"k": "v"}},
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			v03 := PartToV03(p)
			b, _ := json.Marshal(v03)
			var back V03Part
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back.Kind == "data" && !strings.HasPrefix(string(back.Data), "{") {
				t.Fatalf("0.3 data must be an object: %s", b)
			}
			got, err := PartFromV03(back)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(norm(t, got), norm(t, p)) {
				t.Fatalf("round trip:\n got %s\nwant %s\n(0.3: %s)", norm(t, got), norm(t, p), b)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func norm(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestV03States(t *testing.T) {
	for s := range states03 {
		back, err := StateFromV03(StateToV03(s))
		if err != nil || back != s {
			t.Fatalf("%s -> %s -> %s (%v)", s, StateToV03(s), back, err)
		}
	}
	if StateToV03(TaskStateCanceled) != "canceled" || StateToV03(TaskStateInputRequired) != "input-required" {
		t.Fatal("names")
	}
	if _, err := StateFromV03("done"); !errors.Is(err, ErrInvalidParams) {
		t.Fatalf("bad state: %v", err)
	}
	if _, err := RoleFromV03("ROLE_USER"); !errors.Is(err, ErrInvalidParams) {
		t.Fatal("bad role accepted")
	}
}

func TestV03TaskAndEvents(t *testing.T) {
	ts := &Timestamp{time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)}
	task := Task{ID: "t", ContextID: "c", Status: TaskStatus{State: TaskStateWorking, Timestamp: ts, Message: &Message{MessageID: "s", Role: RoleAgent, Parts: []Part{TextPart("w")}}},
		History:   []Message{{MessageID: "m", Role: RoleUser, Parts: []Part{TextPart("q")}, ReferenceTaskIDs: []string{"o"}}},
		Artifacts: []Artifact{{ArtifactID: "a", Name: "n", Parts: []Part{URLPart("u", "", "")}}}}
	v03 := TaskToV03(task)
	b, _ := json.Marshal(v03)
	for _, want := range []string{`"kind":"task"`, `"state":"working"`, `"role":"user"`, `"timestamp":"2026-01-02T03:04:05.006Z"`, `"kind":"file"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("0.3 task lacks %s: %s", want, b)
		}
	}
	back, err := TaskFromV03(v03)
	if err != nil || norm(t, back) != norm(t, task) {
		t.Fatalf("task round trip: %v\n%s\n%s", err, norm(t, back), norm(t, task))
	}
	for state, final := range map[TaskState]bool{TaskStateWorking: false, TaskStateCompleted: true, TaskStateInputRequired: true, TaskStateCanceled: true} {
		u := StreamResponseToV03(StreamResponse{StatusUpdate: &TaskStatusUpdateEvent{TaskID: "t", Status: TaskStatus{State: state}}}).(*V03StatusUpdate)
		if u.Kind != "status-update" || u.Final != final {
			t.Fatalf("%s: final %v", state, u.Final)
		}
	}
	a := StreamResponseToV03(StreamResponse{ArtifactUpdate: &TaskArtifactUpdateEvent{Artifact: Artifact{ArtifactID: "a", Parts: []Part{TextPart("x")}}, Append: true}}).(*V03ArtifactUpdate)
	if a.Kind != "artifact-update" || !a.Append {
		t.Fatalf("artifact update %+v", a)
	}
	if m := StreamResponseToV03(StreamResponse{Message: &Message{MessageID: "m", Role: RoleAgent}}).(*V03Message); m.Kind != "message" || m.Role != "agent" {
		t.Fatalf("message %+v", m)
	}
}

func TestV03SendParams(t *testing.T) {
	f, tr := false, true
	n := int32(2)
	base := func() V03MessageSendParams {
		return V03MessageSendParams{Message: &V03Message{Kind: "message", MessageID: "m", Role: "user", Parts: []V03Part{{Kind: "text", Text: ptr("x")}}}}
	}
	p := base()
	req, err := p.ToV1()
	if err != nil || req.Configuration != nil || req.Message.Role != RoleUser {
		t.Fatalf("absent blocking: %+v %v", req, err)
	}
	p.Configuration = &V03SendConfiguration{Blocking: &f, HistoryLength: &n}
	if req, _ = p.ToV1(); !req.Configuration.ReturnImmediately || *req.Configuration.HistoryLength != 2 {
		t.Fatal("blocking false")
	}
	p.Configuration.Blocking = &tr
	if req, _ = p.ToV1(); req.Configuration.ReturnImmediately {
		t.Fatal("blocking true")
	}
	for name, mut := range map[string]func(*V03MessageSendParams){
		"no message": func(p *V03MessageSendParams) { p.Message = nil },
		"bad role":   func(p *V03MessageSendParams) { p.Message.Role = "robot" },
		"bad kind":   func(p *V03MessageSendParams) { p.Message.Parts[0].Kind = "video" },
		"no file":    func(p *V03MessageSendParams) { p.Message.Parts[0] = V03Part{Kind: "file"} },
		"bad bytes": func(p *V03MessageSendParams) {
			p.Message.Parts[0] = V03Part{Kind: "file", File: &V03File{Bytes: ptr("***")}}
		},
	} {
		p := base()
		mut(&p)
		if _, err := p.ToV1(); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestV03ErrorData(t *testing.T) {
	for _, row := range ErrorTable {
		d := V03ErrorData(Errorf(row, "x").With("taskId", "t1"))
		if d["reason"] != row.Reason || d["domain"] != ErrorDomain || d["taskId"] != "t1" {
			t.Fatalf("%s: %v", row.Reason, d)
		}
	}
}
