package workers_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// submit submits a task for agent with text, as the edge does, and returns
// its id.
func submit(t *testing.T, b *bus.Bus, agent, text string) string {
	t.Helper()
	return submitID(t, b, agent, schemas.NewID(), text)
}

// submitID is submit with a chosen messageId (the conformance agents are
// steered by it).
func submitID(t *testing.T, b *bus.Bus, agent, messageID, text string) string {
	t.Helper()
	msg := &schemas.Message{MessageID: messageID, Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)}}
	rec, _, err := b.Submit(context.Background(), bus.Submission{Agent: agent, Message: msg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Task.ID
}

// waitSettled waits (bounded) until the task is terminal or interrupted.
func waitSettled(t *testing.T, b *bus.Bus, id string) *schemas.TaskRecord {
	t.Helper()
	tw := b.NewTaskWatcher()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go tw.Run(ctx)
	<-tw.Ready()
	rec, err := tw.Wait(ctx, id, func(r *schemas.TaskRecord) bool { return r.Task.Status.State.Settled() })
	if err != nil {
		t.Fatalf("waiting for task %s: %v (last state %v)", id, err, rec)
	}
	return rec
}

// startRunner runs def on b until the test ends.
func startRunner(t *testing.T, b *bus.Bus, def workers.Definition, opt workers.Options) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- workers.NewRunner(b, def, opt).Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runner: %v", err)
		}
	})
}

// artifactText is the text of an artifact's parts, joined.
func artifactText(a schemas.Artifact) string {
	var s string
	for _, p := range a.Parts {
		if p.Text != nil {
			s += *p.Text
		}
	}
	return s
}

func TestEchoCompletesWithChunkedArtifact(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, workers.EchoDefinition("echo"), workers.Options{})
	id := submit(t, b, "echo", "one two three four five six seven")
	rec := waitSettled(t, b, id)
	if rec.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("state = %s", rec.Task.Status.State)
	}
	if len(rec.Task.Artifacts) != 1 {
		t.Fatalf("artifacts = %+v", rec.Task.Artifacts)
	}
	got := artifactText(rec.Task.Artifacts[0])
	if got != "one two three four five six seven" || len(rec.Task.Artifacts[0].Parts) != 2 {
		t.Fatalf("artifact text %q in %d parts", got, len(rec.Task.Artifacts[0].Parts))
	}
}

// A long message of short words is echoed in at most MaxEchoChunks
// chunks: its cost follows its size, and what the edge accepts the demo
// agent can answer (a chunk per four words made 100 000 events of this
// message, and a record past the task bound: the task FAILED).
func TestEchoChunksByteSizeNotWordCount(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, workers.EchoDefinition("echo"), workers.Options{})
	text := strings.Repeat("ab ", 100_000) // 300 KB
	rec := waitSettled(t, b, submit(t, b, "echo", text))
	if rec.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("state = %s: %s", rec.Task.Status.State, rec.Task.Status.Message.Text())
	}
	a := rec.Task.Artifacts[0]
	if got := artifactText(a); got != text {
		t.Fatalf("echoed %d bytes, sent %d", len(got), len(text))
	}
	if n := len(a.Parts); n > workers.MaxEchoChunks || n < workers.MaxEchoChunks/2 {
		t.Fatalf("%d chunks, want about %d", n, workers.MaxEchoChunks)
	}
}

// A task that runs for several times the AckWait is kept alive by the
// runner's heartbeats: its work is never handed to another delivery, so
// the agent runs once and the task completes once.
func TestHeartbeatsKeepALongTaskWithItsWorker(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{Config: bus.Config{AckWait: 1500 * time.Millisecond}})
	var runs atomic.Int32
	long := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		runs.Add(1)
		select {
		case <-time.After(5 * time.Second): // more than three AckWaits of work
		case <-ctx.Done():
			return ctx.Err()
		}
		return out.CompleteWith(ctx, schemas.Artifact{ArtifactID: "a", Parts: []schemas.Part{schemas.TextPart("done")}}, false, "done")
	})
	startRunner(t, b, workers.Definition{Name: "long", Agent: long}, workers.Options{Concurrency: 4})
	rec := waitSettled(t, b, submit(t, b, "long", "x"))
	if rec.Task.Status.State != schemas.TaskStateCompleted || runs.Load() != 1 {
		t.Fatalf("state %s after %d runs of the agent, want COMPLETED after 1", rec.Task.Status.State, runs.Load())
	}
}

// replyingTaskMaker declares it answers with tasks only, then tries to
// answer with a message alone.
type replyingTaskMaker struct{}

func (replyingTaskMaker) Execute(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	if err := out.Reply(ctx, *workers.AgentMessage("a message alone")); err != nil {
		return out.Fail(ctx, err.Error())
	}
	return nil
}

func (replyingTaskMaker) MakesTasks() bool { return true }

// An agent that is a TaskMaker registers so (edges announce its streams
// with the task before it answers), and its Emitter holds it to it: a
// message alone is refused, and the task fails saying why, never a
// message where its stream already began with a task.
func TestTaskMakersRegisterSoAndCannotReply(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, workers.EchoDefinition("echo"), workers.Options{})
	startRunner(t, b, workers.Definition{Name: "liar", Agent: replyingTaskMaker{}}, workers.Options{})
	rec := waitSettled(t, b, submit(t, b, "liar", "hello"))
	if rec.Reply != nil || rec.Task.Status.State != schemas.TaskStateFailed || !strings.Contains(rec.Task.Status.Message.Text(), "TaskMaker") {
		t.Fatalf("a TaskMaker's reply: state %s, reply %v, status %v", rec.Task.Status.State, rec.Reply, rec.Task.Status.Message)
	}
	waitSettled(t, b, submit(t, b, "echo", "hello"))
	// A runner registers before it takes work: both registrations are in
	// the registry the directory reads before it is ready.
	dir := b.NewAgentDirectory()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = dir.Run(ctx) }()
	<-dir.Ready()
	for _, agent := range []string{"echo", "liar"} {
		if reg, ok := dir.Get(agent); !ok || !reg.MakesTasks {
			t.Errorf("%s's registration (found %v) does not say it makes tasks only", agent, ok)
		}
	}
}
