package pbwire

import (
	"testing"

	"github.com/a2abus/a2abus/edge/grpcbinding/a2apb"
	"github.com/a2abus/a2abus/schemas"
)

// benchTask is a finished echo task as a blocking send answers it: its
// two-message history, one artifact, the status with a timestamp.
func benchTask() *schemas.Task {
	msg := func(role schemas.Role, text string) schemas.Message {
		return schemas.Message{MessageID: schemas.NewID(), Role: role, TaskID: "t", ContextID: "c", Parts: []schemas.Part{schemas.TextPart(text)}}
	}
	return &schemas.Task{ID: "0198f2c4-6a1e-7c1a-9d2e-6f1b2a3c4d5e", ContextID: "0198f2c4-6a1e-7c1a-9d2e-6f1b2a3c4d5f",
		Status:    schemas.TaskStatus{State: schemas.TaskStateCompleted, Timestamp: schemas.Now()},
		History:   []schemas.Message{msg(schemas.RoleUser, "hello from the benchmark"), msg(schemas.RoleAgent, "hello from the benchmark")},
		Artifacts: []schemas.Artifact{{ArtifactID: "a", Parts: []schemas.Part{schemas.TextPart("hello from the benchmark")}}}}
}

// The cost of the binding's conversions per answer and per request, as
// the binding makes them (the direct copies of direct.go, which fall back
// to canonical JSON).
func BenchmarkConvertTaskToPB(b *testing.B) {
	t := benchTask()
	b.ReportAllocs()
	for b.Loop() {
		if err := ToPB(t, &a2apb.Task{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConvertSendRequestFromPB(b *testing.B) {
	in := &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m", Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hello from the benchmark"}}}}}
	b.ReportAllocs()
	for b.Loop() {
		var req schemas.SendMessageRequest
		if err := FromPB(in, &req); err != nil {
			b.Fatal(err)
		}
	}
}
