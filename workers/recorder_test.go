//go:build unix

package workers_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// The tests of this file are agents' unit tests as an agent author writes
// them: the agent runs on a workers.Recorder, in memory, with no NATS
// server and no bus. The Runner's own tests (runner_test.go and the
// others) keep running agents on a real JetStream.

func userText(text string) schemas.Message {
	return schemas.Message{Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)}}
}

func recorderCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The echo agent streams the message back in chunks and completes; asked
// first, it waits for input and echoes the answer; with no text it
// rejects. The events are what a subscriber would see, in order.
func TestEchoOnARecorder(t *testing.T) {
	ctx := recorderCtx(t)
	rc := workers.NewRecorder()
	echo := workers.Echo{WordsPerChunk: 2}
	text := "one two three four five"
	rec, err := rc.Start(ctx, "echo", echo, userText(text))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Task.Status.State != schemas.TaskStateCompleted || len(rec.Task.Artifacts) != 1 || artifactText(rec.Task.Artifacts[0]) != text {
		t.Fatalf("task %s, artifacts %+v", rec.Task.Status.State, rec.Task.Artifacts)
	}
	evs := rc.Events(rec.Task.ID)
	if len(evs) != 5 || evs[0].Status == nil || evs[0].Status.Status.State != schemas.TaskStateWorking || evs[4].Status == nil || evs[4].Status.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("events %+v", evs)
	}
	var chunks []string
	for i, ev := range evs[1:4] {
		a := ev.Artifact
		if a == nil || a.Append != (i > 0) || a.LastChunk != (i == 2) {
			t.Fatalf("event %d: %+v", i+1, ev)
		}
		chunks = append(chunks, artifactText(a.Artifact))
	}
	if strings.Join(chunks, "") != text || len(chunks[0]) == len(text) {
		t.Fatalf("chunks %q", chunks)
	}

	asked, err := rc.Start(ctx, "echo", echo, userText(workers.AskCommand))
	if err != nil || asked.Task.Status.State != schemas.TaskStateInputRequired || asked.Task.Status.Message.Text() != "What should I echo?" {
		t.Fatalf("/ask: %+v %v", asked, err)
	}
	answered, err := rc.Continue(ctx, asked.Task.ID, echo, userText("the answer"))
	if err != nil || answered.Task.Status.State != schemas.TaskStateCompleted || artifactText(answered.Task.Artifacts[0]) != "the answer" || len(answered.Task.History) < 2 {
		t.Fatalf("answered: %+v %v", answered, err)
	}

	empty, err := rc.Start(ctx, "echo", echo, schemas.Message{Role: schemas.RoleUser, Parts: []schemas.Part{}})
	if err != nil || empty.Task.Status.State != schemas.TaskStateRejected {
		t.Fatalf("no text: %+v %v", empty, err)
	}
}

// The exec agent runs its command per turn, the message on stdin and its
// stdout as the artifact; a command that fails fails the task with its
// stderr.
func TestExecOnARecorder(t *testing.T) {
	ctx := recorderCtx(t)
	rc := workers.NewRecorder()
	def, err := workers.ExecDefinition("upper", shell(`tr a-z A-Z`))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := rc.Start(ctx, "upper", def.Agent, userText("shout this"))
	if err != nil || rec.Task.Status.State != schemas.TaskStateCompleted || artifactText(rec.Task.Artifacts[0]) != "SHOUT THIS" {
		t.Fatalf("%+v %v", rec, err)
	}
	def, err = workers.ExecDefinition("broken", shell(`echo the disk is gone >&2; exit 3`))
	if err != nil {
		t.Fatal(err)
	}
	rec, err = rc.Start(ctx, "broken", def.Agent, userText("x"))
	if err != nil || rec.Task.Status.State != schemas.TaskStateFailed || !strings.Contains(rec.Task.Status.Message.Text(), "the disk is gone") {
		t.Fatalf("%+v %v", rec, err)
	}
}

// A Recorder settles a turn as a Runner does and refuses what the store
// refuses: an error or a panic fails the task with its text, a write after
// the task ended returns ErrTaskEnded to the agent, and a cancel ends the
// turn's ctx with the task CANCELED.
func TestRecorderKeepsTheRunnersContract(t *testing.T) {
	ctx := recorderCtx(t)
	rc := workers.NewRecorder()
	failing := workers.AgentFunc(func(context.Context, *workers.Request, *workers.Emitter) error {
		return errors.New("no model configured")
	})
	rec, err := rc.Start(ctx, "a", failing, userText("x"))
	if err != nil || rec.Task.Status.State != schemas.TaskStateFailed || rec.Task.Status.Message.Text() != "no model configured" {
		t.Fatalf("failing: %+v %v", rec, err)
	}
	panicking := workers.AgentFunc(func(context.Context, *workers.Request, *workers.Emitter) error { panic("index out of range") })
	rec, err = rc.Start(ctx, "a", panicking, userText("x"))
	if err != nil || rec.Task.Status.State != schemas.TaskStateFailed || !strings.Contains(rec.Task.Status.Message.Text(), "agent crashed") {
		t.Fatalf("panicking: %+v %v", rec, err)
	}
	var late error
	twice := workers.AgentFunc(func(ctx context.Context, _ *workers.Request, out *workers.Emitter) error {
		if err := out.Complete(ctx, "done"); err != nil {
			return err
		}
		late = out.Fail(ctx, "too late")
		return nil
	})
	rec, err = rc.Start(ctx, "a", twice, userText("x"))
	if err != nil || rec.Task.Status.State != schemas.TaskStateCompleted || !errors.Is(late, workers.ErrTaskEnded) {
		t.Fatalf("a write after the end: %+v %v, the agent got %v", rec, err, late)
	}

	started := make(chan string, 1)
	waiting := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		if err := out.Working(ctx, "thinking"); err != nil {
			return err
		}
		started <- req.Task.ID
		<-ctx.Done()
		return ctx.Err()
	})
	done := make(chan *schemas.TaskRecord, 1)
	go func() {
		rec, _ := rc.Start(ctx, "a", waiting, userText("x"))
		done <- rec
	}()
	id := <-started
	if _, err := rc.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if rec := <-done; rec == nil || rec.Task.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("canceled: %+v", rec)
	}
	if _, err := rc.Cancel(ctx, id); !errors.Is(err, schemas.ErrTaskTerminal) {
		t.Fatalf("canceling a canceled task: %v", err)
	}
}

// A fan-out on a Recorder: each target gets a child task of the same
// owner, run by the agent added for it; the answers come back as the
// parent's artifacts, a failing child fails the whole (all) or not
// (partial), a child past its time is canceled, and a redelivered parent
// (the same task id) finds its children instead of starting them again.
func TestFanOutOnARecorder(t *testing.T) {
	ctx := recorderCtx(t)
	rc := workers.NewRecorder()
	slow := newHang()
	var okRuns atomic.Int64
	rc.Add(def("ok", workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		okRuns.Add(1)
		return out.CompleteWith(ctx, schemas.Artifact{ArtifactID: "a", Parts: []schemas.Part{schemas.TextPart("ok: " + req.Message.Text())}}, false, "done")
	})))
	rc.Add(def("bad", boom))
	rc.Add(def("slow", slow))

	owned := func(text string) schemas.Message {
		m := userText(text)
		return m
	}
	for _, mode := range []string{workers.FanOutAll, workers.FanOutPartial} {
		fan := workers.FanOut{Agents: []string{"ok", "bad", "slow"}, ChildTimeout: 2 * time.Second, Mode: mode}
		rec, err := rc.Start(ctx, "fan", fan, owned("question"))
		if err != nil {
			t.Fatal(err)
		}
		want := schemas.TaskStateFailed
		if mode == workers.FanOutPartial {
			want = schemas.TaskStateCompleted
		}
		st := rec.Task.Status
		if st.State != want || !strings.Contains(st.Message.Text(), "1 of 3 agents answered") || !strings.Contains(st.Message.Text(), "bad: failed: boom") || !strings.Contains(st.Message.Text(), "slow: timed out") {
			t.Fatalf("%s: %s %q", mode, st.State, st.Message.Text())
		}
		a := artifactByAgent(rec, "ok")
		if a == nil || artifactText(*a) != "ok: question" {
			t.Fatalf("%s: artifacts %+v", mode, rec.Task.Artifacts)
		}
		slowChild, _ := rc.Task(a.Metadata[workers.MetaFanOutTaskID].(string))
		if slowChild == nil || slowChild.Task.Metadata[workers.MetaFanOutParent] != rec.Task.ID {
			t.Fatalf("%s: the child %+v does not name its parent", mode, slowChild)
		}
		recv(t, slow.started, "the slow child to start")
	}
	for _, id := range rc.TaskIDs("slow") {
		if rec, _ := rc.Task(id); rec.Task.Status.State != schemas.TaskStateCanceled {
			t.Fatalf("a slow child past its time is %s", rec.Task.Status.State)
		}
	}

	// The worker running a parent stops mid-turn (its children run on);
	// the redelivered parent finds them instead of starting them again,
	// and answers once the slow one does.
	before := okRuns.Load()
	fan := workers.FanOut{Agents: []string{"ok", "slow"}}
	stopped := make(chan *schemas.TaskRecord, 1)
	go func() {
		rec, _ := rc.Start(ctx, "fan", fan, owned("again"))
		stopped <- rec
	}()
	slowID := recv(t, slow.started, "the slow child to start")
	child, _ := rc.Task(slowID)
	parentID, _ := child.Task.Metadata[workers.MetaFanOutParent].(string)
	rc.Stop(parentID)
	if rec := recv(t, stopped, "the stopped turn to return"); rec == nil || rec.Task.Status.State.Terminal() {
		t.Fatalf("a stopped parent is %+v", rec)
	}
	redelivered := make(chan *schemas.TaskRecord, 1)
	go func() {
		rec, err := rc.Redeliver(ctx, parentID, fan)
		if err != nil {
			t.Error(err)
		}
		redelivered <- rec
	}()
	close(slow.release)
	again := recv(t, redelivered, "the redelivered parent")
	if again == nil || again.Task.Status.State != schemas.TaskStateCompleted || artifactByAgent(again, "ok") == nil || artifactByAgent(again, "slow") == nil {
		t.Fatalf("redelivered: %+v", again)
	}
	if n := okRuns.Load() - before; n != 1 || slow.runs.Load() != 3 {
		t.Fatalf("children ran again: ok %d times, slow %d in all", n, slow.runs.Load())
	}
	if rec, _ := rc.Task(slowID); rec.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("the slow child is %s", rec.Task.Status.State)
	}
}

// A router on a Recorder routes by the skill a message names, or by its
// words, to the least loaded of the best matches, and rejects what no
// agent offers.
func TestRouterOnARecorder(t *testing.T) {
	ctx := recorderCtx(t)
	rc := workers.NewRecorder()
	answer := func(who string) workers.Agent {
		return workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
			return out.CompleteWith(ctx, schemas.Artifact{ArtifactID: "a", Parts: []schemas.Part{schemas.TextPart(who)}}, false, "")
		})
	}
	skill := func(id, desc string) []schemas.AgentSkill {
		return []schemas.AgentSkill{{ID: id, Name: id, Description: desc}}
	}
	rc.Add(workers.Definition{Name: "translator", Card: schemas.AgentCard{Name: "translator", Skills: skill("translate", "translates text between languages")}, Agent: answer("translator")})
	rc.Add(workers.Definition{Name: "summarizer", Card: schemas.AgentCard{Name: "summarizer", Skills: skill("summarize", "summarizes long documents")}, Agent: answer("summarizer")})
	router := workers.Router{Name: "route"}

	named := userText("anything at all")
	named.Metadata = map[string]any{workers.MetaRouterSkill: "summarize"}
	rec, err := rc.Start(ctx, "route", router, named)
	if err != nil || rec.Task.Status.State != schemas.TaskStateCompleted || artifactByAgent(rec, "summarizer") == nil || rec.Task.Metadata[workers.MetaRouterAgent] != "summarizer" {
		t.Fatalf("by skill: %+v %v", rec, err)
	}
	rec, err = rc.Start(ctx, "route", router, userText("please translate this text into French"))
	if err != nil || artifactByAgent(rec, "translator") == nil {
		t.Fatalf("by words: %+v %v", rec, err)
	}
	rec, err = rc.Start(ctx, "route", router, userText("xyzzy"))
	if err != nil || rec.Task.Status.State != schemas.TaskStateRejected {
		t.Fatalf("no match: %+v %v", rec, err)
	}
}

// An agent that waits for an external agent's notifications (a remote
// agent in push mode) gets them through its Delegation on a Recorder as
// on the bus: what Notify hands it, while it listens, and a refusal to
// retry when nothing listens.
func TestRecorderHandsNotificationsToTheListeningAgent(t *testing.T) {
	ctx := recorderCtx(t)
	rc := workers.NewRecorder()
	listening := make(chan string, 1)
	waiter := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		got := make(chan []byte, 1)
		stop, err := req.Delegation().ListenRemote(req.Task.ID, func(body []byte) error { got <- body; return nil })
		if err != nil {
			return err
		}
		defer stop()
		listening <- req.Task.ID
		select {
		case body := <-got:
			return out.Complete(ctx, "notified: "+string(body))
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	done := make(chan *schemas.TaskRecord, 1)
	go func() {
		rec, _ := rc.Start(ctx, "waiter", waiter, userText("x"))
		done <- rec
	}()
	id := recv(t, listening, "the agent to listen")
	if err := rc.Notify(id, []byte("the external task completed")); err != nil {
		t.Fatal(err)
	}
	if rec := recv(t, done, "the turn"); rec.Task.Status.State != schemas.TaskStateCompleted || rec.Task.Status.Message.Text() != "notified: the external task completed" {
		t.Fatalf("%+v", rec)
	}
	if err := rc.Notify(id, []byte("late")); !errors.Is(err, bus.ErrNoRemoteListener) {
		t.Fatalf("a notification nobody listens for: %v", err)
	}
}
