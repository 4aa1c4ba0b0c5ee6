package workers_test

import (
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

func partKind(p schemas.Part) string {
	switch {
	case p.Text != nil:
		return "text:" + *p.Text
	case p.Raw != nil:
		return "raw:" + string(p.Raw) + ":" + p.Filename + ":" + p.MediaType
	case p.URL != nil:
		return "url:" + *p.URL + ":" + p.Filename
	case p.Data != nil:
		return "data:" + string(p.Data)
	}
	return "?"
}

func TestConformanceAgentScenarios(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	def := workers.TCKDefinition("tck")
	def.Agent = workers.TCK{Hold: 50 * time.Millisecond, Linger: 20 * time.Millisecond}
	startRunner(t, b, def, workers.Options{})
	cases := []struct {
		prefix  string
		state   schemas.TaskState
		message string   // status message text
		parts   []string // artifact parts, in order
	}{
		{"tck-complete-task", schemas.TaskStateCompleted, "Hello from TCK", nil},
		{"tck-artifact-text", schemas.TaskStateCompleted, "", []string{"text:Generated text content"}},
		{"tck-artifact-file-url", schemas.TaskStateCompleted, "", []string{"url:https://example.com/output.txt:output.txt"}},
		{"tck-artifact-file", schemas.TaskStateCompleted, "", []string{"raw:file output:output.txt:text/plain"}},
		{"tck-artifact-data", schemas.TaskStateCompleted, "", []string{`data:{"count":42,"key":"value"}`}},
		{"tck-input-required", schemas.TaskStateInputRequired, "Input required", nil},
		{"tck-reject-task", schemas.TaskStateRejected, "rejected", nil},
		{"tck-stream-001", schemas.TaskStateCompleted, "", []string{"text:Stream hello from TCK"}},
		{"tck-stream-002", schemas.TaskStateCompleted, "", nil},
		{"tck-stream-003", schemas.TaskStateCompleted, "", []string{"text:Stream task lifecycle"}},
		{"tck-stream-ordering-001", schemas.TaskStateCompleted, "", []string{"text:Ordered output"}},
		{"tck-stream-artifact-text", schemas.TaskStateCompleted, "", []string{"text:Streamed text content"}},
		{"tck-stream-artifact-file", schemas.TaskStateCompleted, "", []string{"raw:file output:output.txt:text/plain"}},
		{"tck-stream-artifact-chunked", schemas.TaskStateCompleted, "", []string{"text:chunk-1 ", "text:chunk-2"}},
		{"test-resubscribe-message-id", schemas.TaskStateCompleted, "", nil},
		{"plain-message", schemas.TaskStateCompleted, "Hello from TCK", nil},
	}
	for _, c := range cases {
		t.Run(c.prefix, func(t *testing.T) {
			rec := waitSettled(t, b, submitID(t, b, "tck", c.prefix+"-"+schemas.NewID()[:8], "hi"))
			if rec.Task.Status.State != c.state {
				t.Fatalf("state %s, want %s", rec.Task.Status.State, c.state)
			}
			if got := rec.Task.Status.Message.Text(); got != c.message {
				t.Fatalf("status message %q, want %q", got, c.message)
			}
			var parts []string
			for _, a := range rec.Task.Artifacts {
				for _, p := range a.Parts {
					parts = append(parts, partKind(p))
				}
			}
			if len(parts) != len(c.parts) {
				t.Fatalf("parts %v, want %v", parts, c.parts)
			}
			for i := range parts {
				if parts[i] != c.parts[i] {
					t.Fatalf("parts %v, want %v", parts, c.parts)
				}
			}
		})
	}
	rec := waitSettled(t, b, submitID(t, b, "tck", "tck-message-response-1", "hi"))
	if rec.Reply == nil || rec.Reply.Text() != "Direct message response" {
		t.Fatalf("reply %+v", rec.Reply)
	}
}
