package bus

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/a2abus/a2abus/schemas"
)

// RawTask hands out the stored task's JSON only when it is exactly the
// answer: the record's first field, valid, and no message reply.
func TestRawTask(t *testing.T) {
	tricky := `}{"reply": 1} \"q\" \\ ] [ ü`
	rec := &schemas.TaskRecord{
		Task: schemas.Task{ID: schemas.NewID(), ContextID: "c", Status: schemas.TaskStatus{State: schemas.TaskStateCompleted, Timestamp: schemas.Now()},
			History:   []schemas.Message{{MessageID: "m", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(tricky)}}},
			Artifacts: []schemas.Artifact{{ArtifactID: "a", Parts: []schemas.Part{schemas.TextPart(tricky)}}},
			Metadata:  map[string]any{"reply": map[string]any{"x": "}"}}},
		Agent: "echo", CreatedAt: *schemas.Now(), LastEventID: "e",
	}
	val, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	raw, ok := RawTask(val)
	if !ok {
		t.Fatalf("no raw task in %s", val)
	}
	var got schemas.Task
	if err := json.Unmarshal(raw, &got); err != nil || !reflect.DeepEqual(got, rec.Task) {
		t.Fatalf("raw task %s (%v) is not the record's task", raw, err)
	}

	withReply := *rec
	withReply.Reply = &schemas.Message{MessageID: "r", Role: schemas.RoleAgent, Parts: []schemas.Part{schemas.TextPart("pong")}}
	val2, _ := json.Marshal(&withReply)
	for name, v := range map[string][]byte{
		"a message reply":          val2,
		"fields in another order":  []byte(`{"agent":"echo","task":{"id":"x"}}`),
		"a truncated record":       val[:len(val)/2],
		"invalid JSON in the task": []byte(`{"task":{"id":"x",,"y":1},"agent":"echo"}`),
		"not an object":            []byte(`{"task":["x"]}`),
		"empty":                    nil,
	} {
		if raw, ok := RawTask(v); ok {
			t.Errorf("%s: got raw task %s", name, raw)
		}
	}
}

// UntilStateRaw gives a watched update that ends the wait undecoded, and a
// record it already holds (or read) decoded.
func TestUntilStateRaw(t *testing.T) {
	b := newTestBus(t, Config{})
	ctx := testCtx(t)
	tw := runTaskWatcher(t, b)

	rec := &schemas.TaskRecord{Task: schemas.Task{ID: schemas.NewID(), ContextID: "c", Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted}}, Agent: "a"}
	rev, _, err := b.createTask(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	held := *rec // applyEvents changes the record it is given
	w := tw.Watch(rec.Task.ID, &held)
	defer w.Close()
	if _, _, err := b.applyEvents(ctx, rec.Task.ID, rec, rev, []TaskEvent{
		{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}},
		{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateCompleted}}},
	}); err != nil {
		t.Fatal(err)
	}
	got, raw, err := w.UntilStateRaw(ctx, schemas.TaskState.Terminal)
	if err != nil || got != nil || raw.Val == nil || raw.wellFormed {
		t.Fatalf("UntilStateRaw: record %v raw %q err %v; want the raw update only, unchecked", got, raw.Val, err)
	}
	dec, err := DecodeRecord(raw.Val)
	if err != nil || dec.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("raw update decodes to %+v, %v", dec, err)
	}
	// A wait whose record already satisfies it returns that record.
	w2 := tw.Watch(rec.Task.ID, dec)
	defer w2.Close()
	if got, raw, err := w2.UntilStateRaw(ctx, schemas.TaskState.Terminal); err != nil || got != dec || raw.Val != nil {
		t.Fatalf("settled wait: %v %q %v", got, raw.Val, err)
	}
}
