package bus

import (
	"encoding/json"
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// peekState must read the same state a full decode reads, whatever the
// record carries in strings that precede or follow the status, and must
// refuse (ok=false) rather than guess when the document is not a record.
func TestPeekStateMatchesDecode(t *testing.T) {
	tricky := `x","state":"TASK_STATE_FAILED`
	recs := []schemas.TaskRecord{
		{Task: schemas.Task{ID: "t1", Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted}}},
		{Task: schemas.Task{ID: "t2", ContextID: tricky, Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}},
		{Task: schemas.Task{ID: "t3", ContextID: "c", Status: schemas.TaskStatus{State: schemas.TaskStateInputRequired,
			Message: &schemas.Message{MessageID: "m", Role: schemas.RoleAgent, Parts: []schemas.Part{schemas.TextPart(tricky)}}},
			History:  []schemas.Message{{MessageID: "h", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(`"state":"TASK_STATE_COMPLETED"`)}}},
			Metadata: map[string]any{"state": "TASK_STATE_CANCELED"}}},
		{Task: schemas.Task{ID: "t4", Status: schemas.TaskStatus{State: schemas.TaskStateCompleted}}, Agent: "echo"},
	}
	for _, r := range recs {
		val, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := peekState(val)
		if !ok || got != r.Task.Status.State {
			t.Errorf("%s: peekState = %q, %v; want %q", r.Task.ID, got, ok, r.Task.Status.State)
		}
	}
	for _, bad := range []string{``, `{}`, `{"task":{"status":{"state":"NOT_A_STATE"}}}`, `{"task":{"status":{"state":"TASK_STATE_\u0057ORKING"}}}`, `{"state":"`} {
		if st, ok := peekState([]byte(bad)); ok {
			t.Errorf("peekState(%q) = %q, true; want ok=false", bad, st)
		}
	}
}
