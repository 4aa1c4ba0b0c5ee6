package workers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// These tests pin the conformance agent to the conventions of the public
// A2A TCK (a2aproject/a2a-tck): branch 1.0-dev scenarios/core_operations.feature
// and scenarios/streaming.feature (messageId prefix → behaviour), its
// docs/SUT_REQUIREMENTS.md (test-resubscribe-message-id stays active for
// 2 × TCK_STREAMING_TIMEOUT, 2 s by default), and the 0.3.x suite, whose
// plain message/send tasks must stay cancelable for about a second.

// submitTCK submits a task for agent whose first message has the given
// messageId, as the edge does.
func submitTCK(t *testing.T, b *bus.Bus, agent, messageID string) string {
	t.Helper()
	return submitID(t, b, agent, messageID, "TCK test message")
}

// tckEvents reads the events of a task until one settles it (terminal or
// interrupted status, or a reply), describing each as a string.
func tckEvents(t *testing.T, b *bus.Bus, id string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := b.ReadEvents(ctx, id, 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for {
		select {
		case us, ok := <-r.C():
			if !ok {
				t.Fatalf("event reader ended (%v) after %q", r.Err(), got)
			}
			for _, u := range us {
				switch {
				case u.Reply != nil:
					return append(got, "reply:"+u.Reply.Text())
				case u.Artifact != nil:
					a := u.Artifact
					var parts []string
					for _, p := range a.Artifact.Parts {
						parts = append(parts, tckPart(p))
					}
					got = append(got, fmt.Sprintf("artifact:append=%t:last=%t:%s", a.Append, a.LastChunk, strings.Join(parts, "+")))
				case u.Status != nil:
					s := "status:" + string(u.Status.Status.State)
					if m := u.Status.Status.Message; m != nil {
						s += ":" + m.Text()
					}
					got = append(got, s)
					if u.Status.Status.State.Settled() {
						return got
					}
				}
			}
		case <-ctx.Done():
			t.Fatalf("no settling event; got %q", got)
		}
	}
}

// tckPart describes a part by kind and the fields the TCK asserts.
func tckPart(p schemas.Part) string {
	switch {
	case p.Text != nil:
		return "text(" + *p.Text + ")"
	case p.Raw != nil:
		return "raw(" + p.Filename + "," + p.MediaType + ")"
	case p.URL != nil:
		return "url(" + *p.URL + "," + p.Filename + "," + p.MediaType + ")"
	case p.Data != nil:
		return "data(" + string(p.Data) + ")"
	}
	return "?"
}

func TestTCKDefinitionCard(t *testing.T) {
	def := workers.TCKDefinition("tck")
	if def.Name != "tck" || def.Card.Name != "tck" || def.Agent == nil {
		t.Fatalf("definition %+v", def)
	}
	if !strings.HasPrefix(def.Card.Description, "A2A TCK conformance agent") {
		t.Fatalf("description %q", def.Card.Description)
	}
	if def.Card.Version == "" || len(def.Card.Skills) == 0 {
		t.Fatalf("card %+v", def.Card)
	}
	for _, s := range def.Card.Skills {
		if s.ID == "" || s.Name == "" || s.Description == "" {
			t.Fatalf("skill %+v", s)
		}
	}
}

// TestTCKEventSequences checks, event by event, what a streaming client of
// each scenario sees: the order of status updates and artifacts, part
// kinds, file names and media types, and the chunk flags.
func TestTCKEventSequences(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	def := workers.TCKDefinition("tck")
	def.Agent = workers.TCK{Hold: 20 * time.Millisecond, Linger: 20 * time.Millisecond}
	startRunner(t, b, def, workers.Options{})

	const (
		working   = "status:TASK_STATE_WORKING"
		completed = "status:TASK_STATE_COMPLETED"
		whole     = "artifact:append=false:last=true:"
	)
	cases := []struct {
		prefix string
		want   []string
	}{
		{"tck-complete-task", []string{completed + ":Hello from TCK"}},
		{"tck-artifact-text", []string{working, whole + "text(Generated text content)", completed}},
		{"tck-artifact-file", []string{working, whole + "raw(output.txt,text/plain)", completed}},
		{"tck-artifact-file-url", []string{working, whole + "url(https://example.com/output.txt,output.txt,text/plain)", completed}},
		{"tck-artifact-data", []string{working, whole + `data({"count":42,"key":"value"})`, completed}},
		{"tck-message-response", []string{"reply:Direct message response"}},
		{"tck-input-required", []string{"status:TASK_STATE_INPUT_REQUIRED:Input required"}},
		{"tck-reject-task", []string{"status:TASK_STATE_REJECTED:rejected"}},
		{"tck-stream-001", []string{working, whole + "text(Stream hello from TCK)", completed}},
		{"tck-stream-002", []string{completed}},
		{"tck-stream-003", []string{working, whole + "text(Stream task lifecycle)", completed}},
		{"tck-stream-ordering-001", []string{working, whole + "text(Ordered output)", completed}},
		{"tck-stream-artifact-text", []string{working, whole + "text(Streamed text content)", completed}},
		{"tck-stream-artifact-file", []string{working, whole + "raw(output.txt,text/plain)", completed}},
		{"tck-stream-artifact-chunked", []string{working,
			"artifact:append=false:last=false:text(chunk-1 )",
			"artifact:append=true:last=true:text(chunk-2)",
			completed}},
		{"test-resubscribe-message-id", []string{working, completed}},
		// The 0.3 suite's ids: "<prefix>-message-id-<uuid>"; no special behaviour.
		{"test", []string{working, completed + ":Hello from TCK"}},
	}
	for _, c := range cases {
		t.Run(c.prefix, func(t *testing.T) {
			t.Parallel()
			// The 1.0 suite's ids are tck-<name>-<session>; the 0.3 suite's
			// <prefix>-message-id-<uuid>.
			id := submitTCK(t, b, "tck", c.prefix+"-"+schemas.NewID()[:8])
			got := tckEvents(t, b, id)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("events\n  %q\nwant\n  %q", got, c.want)
			}
			if c.prefix == "tck-stream-artifact-chunked" {
				rec, _, err := b.GetTask(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				if len(rec.Task.Artifacts) != 1 || len(rec.Task.Artifacts[0].Parts) != 2 {
					t.Fatalf("chunks did not land in one artifact: %+v", rec.Task.Artifacts)
				}
			}
			if c.prefix == "tck-artifact-file" {
				rec, _, err := b.GetTask(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				if p := rec.Task.Artifacts[0].Parts[0]; len(p.Raw) == 0 || rec.Task.Artifacts[0].ArtifactID == "" {
					t.Fatalf("file artifact %+v", rec.Task.Artifacts[0])
				}
			}
		})
	}
}

// TestTCKResubscribeHoldsTaskWorking: the task stays WORKING for Hold, so a
// client can subscribe to it mid-task, then completes.
func TestTCKResubscribeHoldsTaskWorking(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	const hold = 300 * time.Millisecond
	def := workers.TCKDefinition("tck")
	def.Agent = workers.TCK{Hold: hold}
	startRunner(t, b, def, workers.Options{})

	start := time.Now()
	id := submitTCK(t, b, "tck", "test-resubscribe-message-id-"+schemas.NewID())
	rec := waitSettled(t, b, id)
	if elapsed := time.Since(start); elapsed < hold {
		t.Fatalf("completed after %v, before the hold of %v", elapsed, hold)
	}
	if rec.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("state %s", rec.Task.Status.State)
	}
}

// TestTCKPlainMessageLingersWorking: an unprefixed message (the 0.3
// suite's) keeps its task WORKING for Linger before completing.
func TestTCKPlainMessageLingersWorking(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	const linger = 300 * time.Millisecond
	def := workers.TCKDefinition("tck")
	def.Agent = workers.TCK{Linger: linger}
	startRunner(t, b, def, workers.Options{})

	start := time.Now()
	id := submitTCK(t, b, "tck", "test-message-id-"+schemas.NewID())
	rec := waitSettled(t, b, id)
	if elapsed := time.Since(start); elapsed < linger {
		t.Fatalf("completed after %v, before the linger of %v", elapsed, linger)
	}
	if rec.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("state %s", rec.Task.Status.State)
	}
}

// TestTCKLingeringTaskCancels: canceling a lingering task (the 0.3 suite's
// tasks/cancel test) ends it CANCELED and the agent returns promptly.
func TestTCKLingeringTaskCancels(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	returned := make(chan error, 1)
	tck := workers.TCK{Linger: time.Minute, Hold: time.Minute}
	def := workers.TCKDefinition("tck")
	def.Agent = workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		err := tck.Execute(ctx, req, out)
		returned <- err
		return err
	})
	startRunner(t, b, def, workers.Options{})

	for _, mid := range []string{"cancel-test-message-id-", "test-resubscribe-message-id-"} {
		t.Run(mid, func(t *testing.T) {
			id := submitTCK(t, b, "tck", mid+schemas.NewID())
			// Wait until the agent has the task WORKING.
			tw := b.NewTaskWatcher()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			go tw.Run(ctx)
			<-tw.Ready()
			if _, err := tw.Wait(ctx, id, func(r *schemas.TaskRecord) bool { return r.Task.Status.State == schemas.TaskStateWorking }); err != nil {
				t.Fatal(err)
			}
			cancelTask(t, b, "tck", id)
			select {
			case err := <-returned:
				if err == nil {
					t.Fatal("agent returned nil after its task was canceled")
				}
				if !errors.Is(err, context.Canceled) && !errors.Is(err, workers.ErrTaskEnded) {
					t.Fatalf("agent returned %v", err)
				}
			case <-ctx.Done():
				t.Fatal("agent did not return after cancel")
			}
			rec, _, err := b.GetTask(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Task.Status.State != schemas.TaskStateCanceled {
				t.Fatalf("state %s", rec.Task.Status.State)
			}
		})
	}
}

// TestTCKContinuationCompletes: a task that asked for input completes when
// the client answers on it with a message of no scenario prefix.
func TestTCKContinuationCompletes(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	def := workers.TCKDefinition("tck")
	def.Agent = workers.TCK{Linger: 20 * time.Millisecond}
	startRunner(t, b, def, workers.Options{})

	id := submitTCK(t, b, "tck", "tck-input-required-"+schemas.NewID()[:8])
	rec := waitSettled(t, b, id)
	if rec.Task.Status.State != schemas.TaskStateInputRequired {
		t.Fatalf("state %s", rec.Task.Status.State)
	}
	continueTask(t, b, "tck", id, "TCK follow-up")
	rec = waitSettled(t, b, id)
	if rec.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("state after the answer %s", rec.Task.Status.State)
	}
	if n := len(rec.Task.History); n < 3 {
		t.Fatalf("history has %d messages, want the question, the answer and more", n)
	}
}
