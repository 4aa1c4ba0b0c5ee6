package pbwire

import (
	"encoding/json"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/a2abus/a2abus/edge/grpcbinding/a2apb"
	"github.com/a2abus/a2abus/schemas"
)

// schemasValues are the shapes the direct conversions cover, with every
// field they copy set somewhere, and some they must give up on.
func schemasValues() []any {
	text := func(s string) schemas.Part { return schemas.TextPart(s) }
	url := "https://127.0.0.1/f.png"
	msg := func(role schemas.Role) *schemas.Message {
		return &schemas.Message{MessageID: "m1", ContextID: "c", TaskID: "t", Role: role, Extensions: []string{"urn:x"}, ReferenceTaskIDs: []string{"t0"},
			Metadata: map[string]any{"n": 1.5, "s": "x", "b": true, "nil": nil, "list": []any{"a", 2.0}, "obj": map[string]any{"k": "v"}},
			Parts: []schemas.Part{text("hi"), {Raw: []byte{0, 1, 2}, Filename: "f.bin", MediaType: "application/octet-stream"},
				{URL: &url, MediaType: "image/png"}, {Data: json.RawMessage(`{"a": [1, 2, {"b": null}]}`), Metadata: map[string]any{"m": "d"}}}}
	}
	gen := schemas.Generation(4)
	hl := int32(3)
	now := &schemas.Timestamp{Time: time.Date(2026, 11, 27, 21, 0, 0, 123456789, time.FixedZone("x", 3600))}
	task := &schemas.Task{ID: "t", ContextID: "c", Generation: 7, Metadata: map[string]any{"k": "v"},
		Status:    schemas.TaskStatus{State: schemas.TaskStateInputRequired, Message: msg(schemas.RoleAgent), Timestamp: now},
		Artifacts: []schemas.Artifact{{ArtifactID: "a", Name: "n", Description: "d", Parts: []schemas.Part{text("x")}, Metadata: map[string]any{"z": 1.0}, Extensions: []string{"e"}}},
		History:   []schemas.Message{*msg(schemas.RoleUser), *msg(schemas.RoleAgent)}}
	two := schemas.TextPart("a")
	two.URL = &url
	return []any{
		task,
		&schemas.Task{ID: "bare", Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted}},
		&schemas.Task{ID: "bad state", Status: schemas.TaskStatus{State: "DONE"}},
		&schemas.Task{ID: "bad metadata", Status: schemas.TaskStatus{State: schemas.TaskStateWorking}, Metadata: map[string]any{"t": time.Now()}},
		&schemas.SendMessageResponse{Task: task},
		&schemas.SendMessageResponse{Message: msg(schemas.RoleAgent)},
		&schemas.SendMessageResponse{},
		&schemas.StreamResponse{Task: task},
		&schemas.StreamResponse{Message: msg(schemas.RoleAgent)},
		&schemas.StreamResponse{StatusUpdate: &schemas.TaskStatusUpdateEvent{TaskID: "t", ContextID: "c", Generation: 3, Metadata: map[string]any{"k": 2.0},
			Status: schemas.TaskStatus{State: schemas.TaskStateCompleted, Timestamp: now}}},
		&schemas.StreamResponse{ArtifactUpdate: &schemas.TaskArtifactUpdateEvent{TaskID: "t", ContextID: "c", Generation: 5, Append: true, LastChunk: true,
			Artifact: schemas.Artifact{ArtifactID: "a", Parts: []schemas.Part{text("chunk")}}}},
		&schemas.StreamResponse{Task: task, Message: msg(schemas.RoleAgent)},
		&schemas.SendMessageRequest{Tenant: "agents/echo", Message: msg(schemas.RoleUser), Metadata: map[string]any{"r": "q"},
			Configuration: &schemas.SendMessageConfiguration{AcceptedOutputModes: []string{"text/plain"}, HistoryLength: &hl, ReturnImmediately: true, IfGenerationMatch: &gen}},
		&schemas.SendMessageRequest{Message: &schemas.Message{MessageID: "m", Role: schemas.RoleUser, Parts: []schemas.Part{two}}},
		&schemas.SendMessageRequest{Message: &schemas.Message{MessageID: "m", Role: "robot", Parts: []schemas.Part{text("x")}}},
		&schemas.SendMessageRequest{Message: msg(schemas.RoleUser), Configuration: &schemas.SendMessageConfiguration{
			TaskPushNotificationConfig: &schemas.TaskPushNotificationConfig{URL: "https://127.0.0.1/hook"}}},
	}
}

// pbFor is an empty message of the protobuf type v converts to.
func pbFor(v any) proto.Message {
	switch v.(type) {
	case *schemas.Task:
		return &a2apb.Task{}
	case *schemas.SendMessageResponse:
		return &a2apb.SendMessageResponse{}
	case *schemas.StreamResponse:
		return &a2apb.StreamResponse{}
	case *schemas.SendMessageRequest:
		return &a2apb.SendMessageRequest{}
	}
	panic("no message for a value")
}

// Every shape the direct conversions cover converts as the canonical JSON
// path converts it, both ways; what they give up on goes through JSON and
// ends the same (a value or the same refusal).
func TestDirectConversionsMatchJSON(t *testing.T) {
	direct := 0
	for i, v := range schemasValues() {
		want, got := pbFor(v), pbFor(v)
		werr := toPBViaJSON(v, want)
		err := ToPB(v, got)
		if toPBDirect(v, pbFor(v)) {
			direct++
		}
		if (err == nil) != (werr == nil) || (err == nil && !proto.Equal(got, want)) {
			t.Errorf("value %d to protobuf:\n direct %v (%v)\n   JSON %v (%v)", i, got, err, want, werr)
			continue
		}
		if werr != nil {
			continue
		}
		// And back: the message read into the schemas' type.
		back := map[string]func() any{
			"task": func() any { return new(schemas.Task) }, "send": func() any { return new(schemas.SendMessageResponse) },
			"stream": func() any { return new(schemas.StreamResponse) }, "request": func() any { return new(schemas.SendMessageRequest) },
		}
		var kind string
		switch want.(type) {
		case *a2apb.Task:
			kind = "task"
		case *a2apb.SendMessageResponse:
			kind = "send"
		case *a2apb.StreamResponse:
			kind = "stream"
		case *a2apb.SendMessageRequest:
			kind = "request"
		}
		wv, gv := back[kind](), back[kind]()
		werr = fromPBViaJSON(want, wv)
		err = FromPB(want, gv)
		wj, _ := json.Marshal(wv)
		gj, _ := json.Marshal(gv)
		if (err == nil) != (werr == nil) || string(wj) != string(gj) {
			t.Errorf("value %d back from protobuf:\n direct %s (%v)\n   JSON %s (%v)", i, gj, err, wj, werr)
		}
	}
	if direct < 8 {
		t.Errorf("only %d of the values converted directly: the direct path gives up too often", direct)
	}
}

// Protobuf messages no schemas value produces: an unnamed enum number, a
// negative generation, an invalid timestamp, an empty raw part. Each
// reads as the JSON path reads it (or is refused as it refuses it).
func TestDirectReadingOfOddMessagesMatchesJSON(t *testing.T) {
	neg := int64(-1)
	msgs := []proto.Message{
		&a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m", Role: a2apb.Role(42), Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "x"}}}}},
		&a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m", Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Content: &a2apb.Part_Raw{Raw: []byte{}}}}}},
		&a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m", Role: a2apb.Role_ROLE_USER}, Configuration: &a2apb.SendMessageConfiguration{IfGenerationMatch: &neg}},
		&a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m", Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Metadata: &structpb.Struct{}}}}},
		&a2apb.StreamResponse{Payload: &a2apb.StreamResponse_StatusUpdate{StatusUpdate: &a2apb.TaskStatusUpdateEvent{TaskId: "t",
			Status: &a2apb.TaskStatus{State: a2apb.TaskState_TASK_STATE_WORKING, Timestamp: &timestamppb.Timestamp{Seconds: -1 << 40}}}}},
		&a2apb.StreamResponse{Payload: &a2apb.StreamResponse_Task{Task: &a2apb.Task{Id: "t", Status: &a2apb.TaskStatus{State: a2apb.TaskState(99)}}}},
		&a2apb.StreamResponse{},
		&a2apb.Task{Id: "t"},
	}
	for i, m := range msgs {
		var wv, gv any
		switch m.(type) {
		case *a2apb.SendMessageRequest:
			wv, gv = new(schemas.SendMessageRequest), new(schemas.SendMessageRequest)
		case *a2apb.StreamResponse:
			wv, gv = new(schemas.StreamResponse), new(schemas.StreamResponse)
		case *a2apb.Task:
			wv, gv = new(schemas.Task), new(schemas.Task)
		}
		werr := fromPBViaJSON(m, wv)
		err := FromPB(m, gv)
		wj, _ := json.Marshal(wv)
		gj, _ := json.Marshal(gv)
		if (err == nil) != (werr == nil) || (err == nil && string(wj) != string(gj)) {
			t.Errorf("message %d:\n direct %s (%v)\n   JSON %s (%v)", i, gj, err, wj, werr)
		}
	}
}
