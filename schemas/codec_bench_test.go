package schemas

import (
	"encoding/json"
	"testing"
)

// benchRecord is the record of a short finished task as a worker stores it:
// the client's message, a status with a timestamp, one artifact.
func benchRecord() *TaskRecord {
	now := Now()
	msg := Message{MessageID: NewID(), Role: RoleUser, Parts: []Part{TextPart("hello there, echo this back please")}, TaskID: NewID(), ContextID: NewID()}
	return &TaskRecord{
		Task: Task{
			ID: msg.TaskID, ContextID: msg.ContextID,
			Status:    TaskStatus{State: TaskStateCompleted, Timestamp: now},
			History:   []Message{msg},
			Artifacts: []Artifact{{ArtifactID: NewID(), Name: "echo", Parts: []Part{TextPart("hello there, echo this back please")}}},
		},
		Agent: "echo", CreatedAt: *now, LastEventID: NewID(), LastEventIndex: 2,
	}
}

// The task record is decoded by every worker taking work and by the edge
// answering a blocking send; these measure that codec cost alone.
func BenchmarkDecodeTaskRecord(b *testing.B) {
	raw, err := json.Marshal(benchRecord())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		var r TaskRecord
		if err := json.Unmarshal(raw, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeTaskRecord(b *testing.B) {
	rec := benchRecord()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(rec); err != nil {
			b.Fatal(err)
		}
	}
}
