package schemas

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

// The client side of 0.3: ResultFromV03 reads what a 0.3 agent answers to
// message/send and sends on a stream, as peers write it (not only as a2abus
// writes it).
func TestResultFromV03PeerShapes(t *testing.T) {
	ts := Timestamp{time.Date(2026, 3, 4, 5, 6, 7, 8e6, time.UTC)}
	cases := []struct {
		name string
		raw  string
		want StreamResponse
	}{{
		name: "task",
		raw: `{"kind":"task","id":"t1","contextId":"c1","status":{"state":"input-required","timestamp":"2026-03-04T05:06:07.008Z",
			"message":{"kind":"message","messageId":"s1","role":"agent","parts":[{"kind":"text","text":"which city?"}]}},
			"history":[{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"weather"}]}],
			"artifacts":[{"artifactId":"a1","name":"map","parts":[{"kind":"file","file":{"name":"m.png","mimeType":"image/png","bytes":"AAEC"}}]}],
			"metadata":{"k":"v"}}`,
		want: StreamResponse{Task: &Task{ID: "t1", ContextID: "c1",
			Status: TaskStatus{State: TaskStateInputRequired, Timestamp: &ts,
				Message: &Message{MessageID: "s1", Role: RoleAgent, Parts: []Part{TextPart("which city?")}}},
			History:   []Message{{MessageID: "m1", Role: RoleUser, Parts: []Part{TextPart("weather")}}},
			Artifacts: []Artifact{{ArtifactID: "a1", Name: "map", Parts: []Part{FilePart([]byte{0, 1, 2}, "m.png", "image/png")}}},
			Metadata:  map[string]any{"k": "v"}}},
	}, {
		name: "message",
		raw:  `{"kind":"message","messageId":"r1","contextId":"c1","role":"agent","parts":[{"kind":"data","data":{"temp":21}}]}`,
		want: StreamResponse{Message: &Message{MessageID: "r1", ContextID: "c1", Role: RoleAgent,
			Parts: []Part{{Data: json.RawMessage(`{"temp":21}`), MediaType: "application/json"}}}},
	}, {
		name: "status-update (final, zone-less timestamp)",
		raw:  `{"kind":"status-update","taskId":"t1","contextId":"c1","status":{"state":"completed","timestamp":"2026-03-04T05:06:07.008"},"final":true}`,
		want: StreamResponse{StatusUpdate: &TaskStatusUpdateEvent{TaskID: "t1", ContextID: "c1",
			Status: TaskStatus{State: TaskStateCompleted, Timestamp: &ts}}},
	}, {
		name: "artifact-update",
		raw: `{"kind":"artifact-update","taskId":"t1","contextId":"c1","append":true,"lastChunk":true,
			"artifact":{"artifactId":"a1","parts":[{"kind":"file","file":{"uri":"https://x.example/f","mimeType":"text/csv"}}]}}`,
		want: StreamResponse{ArtifactUpdate: &TaskArtifactUpdateEvent{TaskID: "t1", ContextID: "c1", Append: true, LastChunk: true,
			Artifact: Artifact{ArtifactID: "a1", Parts: []Part{URLPart("https://x.example/f", "", "text/csv")}}}},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ResultFromV03(json.RawMessage(c.raw))
			if err != nil {
				t.Fatal(err)
			}
			if norm(t, got) != norm(t, c.want) {
				t.Fatalf("got  %s\nwant %s", norm(t, got), norm(t, c.want))
			}
		})
	}
}

// Whatever a2abus sends as 0.3 (StreamResponseToV03) reads back as the same
// 1.0 event.
func TestResultFromV03InvertsStreamResponseToV03(t *testing.T) {
	ts := &Timestamp{time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)}
	events := []StreamResponse{
		{Task: &Task{ID: "t", ContextID: "c", Status: TaskStatus{State: TaskStateWorking, Timestamp: ts},
			Artifacts: []Artifact{{ArtifactID: "a", Parts: []Part{TextPart("x"), DataPart([]int{1, 2})}}}}},
		{Message: &Message{MessageID: "m", Role: RoleAgent, Parts: []Part{FilePart([]byte("hi"), "h.txt", "text/plain")}}},
		{StatusUpdate: &TaskStatusUpdateEvent{TaskID: "t", ContextID: "c", Status: TaskStatus{State: TaskStateFailed,
			Message: &Message{MessageID: "s", Role: RoleAgent, Parts: []Part{TextPart("boom")}}}}},
		{ArtifactUpdate: &TaskArtifactUpdateEvent{TaskID: "t", ContextID: "c", Append: true,
			Artifact: Artifact{ArtifactID: "a", Name: "n", Parts: []Part{{Text: ptr("md"), MediaType: "text/markdown"}}}}},
	}
	for _, ev := range events {
		b, err := json.Marshal(StreamResponseToV03(ev))
		if err != nil {
			t.Fatal(err)
		}
		back, err := ResultFromV03(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if norm(t, back) != norm(t, ev) {
			t.Fatalf("round trip:\n got  %s\n want %s", norm(t, back), norm(t, ev))
		}
	}
}

// A result that is not one of the four kinds, or a kind whose content is
// not valid 0.3, is the agent's fault: ErrInvalidAgentResponse.
func TestResultFromV03Rejects(t *testing.T) {
	for name, raw := range map[string]string{
		"not JSON":         `{`,
		"not an object":    `[1]`,
		"null":             `null`,
		"no kind":          `{"id":"t","status":{"state":"working"}}`,
		"unknown kind":     `{"kind":"thought"}`,
		"bad state":        `{"kind":"task","id":"t","contextId":"c","status":{"state":"pondering"}}`,
		"bad role":         `{"kind":"message","messageId":"m","role":"robot","parts":[]}`,
		"bad part":         `{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"video"}]}`,
		"bad timestamp":    `{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"working","timestamp":"yesterday"}}`,
		"bad artifact":     `{"kind":"artifact-update","taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"kind":"file"}]}}`,
		"wrong field type": `{"kind":"task","id":7}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ResultFromV03(json.RawMessage(raw)); !errors.Is(err, ErrInvalidAgentResponse) {
				t.Fatalf("err = %v, want ErrInvalidAgentResponse", err)
			}
		})
	}
}

// SendParamsToV03 writes what a 0.3 agent expects: blocking spelled out
// (absent configuration = blocking), the message in the kind shape, and the
// settings carried over; a 0.3 server (ToV1) reads back the same request.
func TestSendParamsToV03(t *testing.T) {
	msg := &Message{MessageID: "m", ContextID: "c", TaskID: "t", Role: RoleUser,
		Parts: []Part{TextPart("hi"), URLPart("https://x.example/f", "f.pdf", "application/pdf")}, ReferenceTaskIDs: []string{"o"}}
	n := int32(3)
	cases := []struct {
		name     string
		req      SendMessageRequest
		blocking bool
		wantBack SendMessageRequest
	}{{
		name:     "no configuration blocks",
		req:      SendMessageRequest{Message: msg},
		blocking: true,
		wantBack: SendMessageRequest{Message: msg, Configuration: &SendMessageConfiguration{}},
	}, {
		name: "return immediately",
		req: SendMessageRequest{Tenant: "dropped", Message: msg, Metadata: map[string]any{"k": "v"},
			Configuration: &SendMessageConfiguration{ReturnImmediately: true, HistoryLength: &n, AcceptedOutputModes: []string{"text/plain"}}},
		blocking: false,
		wantBack: SendMessageRequest{Message: msg, Metadata: map[string]any{"k": "v"},
			Configuration: &SendMessageConfiguration{ReturnImmediately: true, HistoryLength: &n, AcceptedOutputModes: []string{"text/plain"}}},
	}, {
		name: "push config",
		req: SendMessageRequest{Message: msg, Configuration: &SendMessageConfiguration{
			TaskPushNotificationConfig: &TaskPushNotificationConfig{ID: "p", URL: "https://hook.example/", Token: "tok",
				Authentication: &AuthenticationInfo{Scheme: "Bearer", Credentials: "secret"}}}},
		blocking: true,
		wantBack: SendMessageRequest{Message: msg, Configuration: &SendMessageConfiguration{
			TaskPushNotificationConfig: &TaskPushNotificationConfig{ID: "p", URL: "https://hook.example/", Token: "tok",
				Authentication: &AuthenticationInfo{Scheme: "Bearer", Credentials: "secret"}}}},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := SendParamsToV03(&c.req)
			if p.Configuration == nil || p.Configuration.Blocking == nil || *p.Configuration.Blocking != c.blocking {
				t.Fatalf("blocking: %+v", p.Configuration)
			}
			if p.Message == nil || p.Message.Kind != "message" || p.Message.Role != "user" ||
				p.Message.Parts[0].Kind != "text" || p.Message.Parts[1].Kind != "file" || *p.Message.Parts[1].File.URI != "https://x.example/f" {
				t.Fatalf("message: %+v", p.Message)
			}
			// On the wire, as a 0.3 server decodes it.
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var wire V03MessageSendParams
			if err := json.Unmarshal(b, &wire); err != nil {
				t.Fatal(err)
			}
			back, err := wire.ToV1()
			if err != nil {
				t.Fatal(err)
			}
			if norm(t, back) != norm(t, c.wantBack) {
				t.Fatalf("read back:\n got  %s\n want %s", norm(t, back), norm(t, c.wantBack))
			}
		})
	}
	// The caller's request is not changed.
	req := SendMessageRequest{Message: msg, Metadata: map[string]any{"k": "v"}}
	before := norm(t, req)
	_ = SendParamsToV03(&req)
	if norm(t, req) != before || !reflect.DeepEqual(req.Metadata, map[string]any{"k": "v"}) {
		t.Fatal("SendParamsToV03 changed its argument")
	}
	// Without a message the params say so (a 0.3 server refuses them).
	if p := SendParamsToV03(&SendMessageRequest{}); p.Message != nil {
		t.Fatalf("no message: %+v", p.Message)
	}
}
