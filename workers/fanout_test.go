package workers_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// hang blocks until its task is canceled or released; it counts runs and
// tells when one started.
type hang struct {
	started chan string
	release chan struct{}
	runs    atomic.Int64
}

func newHang() *hang { return &hang{started: make(chan string, 16), release: make(chan struct{})} }

func (h *hang) Execute(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	h.runs.Add(1)
	if err := out.Working(ctx, "thinking"); err != nil {
		return err
	}
	h.started <- req.Task.ID
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-h.release:
		return out.Artifact(ctx, schemas.Artifact{ArtifactID: "late", Parts: []schemas.Part{schemas.TextPart("finally")}})
	}
}

func def(name string, a workers.Agent) workers.Definition {
	return workers.Definition{Name: name, Card: schemas.AgentCard{Name: name, Description: name, Version: "1.0.0"}, Agent: a}
}

var boom = workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	return errors.New("boom")
})

// cancelTask cancels a task submitted to agent as its client does through
// the edge (bus.Cancel: CANCELED stored, then the agent's workers told).
func cancelTask(t *testing.T, b *bus.Bus, agent, id string) {
	t.Helper()
	if _, err := b.Cancel(context.Background(), bus.Owner{Agent: agent}, id, nil); err != nil {
		t.Fatal(err)
	}
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func artifactByAgent(rec *schemas.TaskRecord, agent string) *schemas.Artifact {
	for i, a := range rec.Task.Artifacts {
		if a.Metadata[workers.MetaFanOutAgent] == agent {
			return &rec.Task.Artifacts[i]
		}
	}
	return nil
}

// One task to three agents, one answering, one failing, one too slow: the
// answer is an artifact of the parent, the failure and the timeout are
// named, the slow child is canceled, and the mode decides the parent's end.
func TestFanOutThreeAgentsOneSlowOneFailing(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	slow := newHang()
	startRunner(t, b, workers.EchoDefinition("ok"), workers.Options{})
	startRunner(t, b, def("bad", boom), workers.Options{})
	startRunner(t, b, def("slow", slow), workers.Options{})
	for _, mode := range []string{workers.FanOutAll, workers.FanOutPartial} {
		t.Run(mode, func(t *testing.T) {
			name := "fan-" + mode
			startRunner(t, b, def(name, workers.FanOut{Agents: []string{"ok", "bad", "slow"}, ChildTimeout: 3 * time.Second, Mode: mode}), workers.Options{})
			id := submit(t, b, name, "hello fan out")
			slowChild := recv(t, slow.started, "the slow child to start")
			rec := waitSettled(t, b, id)
			want := schemas.TaskStateFailed
			if mode == workers.FanOutPartial {
				want = schemas.TaskStateCompleted
			}
			summary := rec.Task.Status.Message.Text()
			if rec.Task.Status.State != want || !strings.Contains(summary, "1 of 3 agents answered") ||
				!strings.Contains(summary, "bad: failed: boom") || !strings.Contains(summary, "slow: timed out after 3s") {
				t.Fatalf("parent %s: %q", rec.Task.Status.State, summary)
			}
			a := artifactByAgent(rec, "ok")
			if a == nil || len(a.Parts) == 0 || *a.Parts[0].Text != "hello fan out" || a.Metadata[workers.MetaFanOutTaskID] == "" {
				t.Fatalf("the answering child's artifact: %+v", rec.Task.Artifacts)
			}
			if artifactByAgent(rec, "bad") != nil || artifactByAgent(rec, "slow") != nil {
				t.Fatalf("artifacts of children that gave no answer: %+v", rec.Task.Artifacts)
			}
			// The timed-out child was canceled, not left running.
			sc := waitSettled(t, b, slowChild)
			if sc.Task.Status.State != schemas.TaskStateCanceled || sc.Task.Metadata[workers.MetaFanOutParent] != id {
				t.Fatalf("slow child: %s, metadata %v", sc.Task.Status.State, sc.Task.Metadata)
			}
		})
	}
}

// Canceling the parent cancels every child still running.
func TestFanOutCancelCancelsChildren(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	h1, h2 := newHang(), newHang()
	startRunner(t, b, def("h1", h1), workers.Options{})
	startRunner(t, b, def("h2", h2), workers.Options{})
	startRunner(t, b, def("fan", workers.FanOut{Agents: []string{"h1", "h2"}}), workers.Options{})
	id := submit(t, b, "fan", "wait for it")
	c1 := recv(t, h1.started, "child 1")
	c2 := recv(t, h2.started, "child 2")
	cancelTask(t, b, "fan", id)
	for _, c := range []string{c1, c2} {
		if rec := waitSettled(t, b, c); rec.Task.Status.State != schemas.TaskStateCanceled {
			t.Fatalf("child %s: %s", c, rec.Task.Status.State)
		}
	}
	if rec := waitSettled(t, b, id); rec.Task.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("parent: %s", rec.Task.Status.State)
	}
}

// A parent whose worker stops mid-way is redelivered; the next worker
// re-attaches to the children already started instead of starting them
// again.
func TestFanOutRedeliveryStartsNoDuplicateChildren(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	slow := newHang()
	startRunner(t, b, workers.EchoDefinition("ok"), workers.Options{})
	startRunner(t, b, def("slow", slow), workers.Options{})
	fan := def("fan", workers.FanOut{Agents: []string{"ok", "slow"}})

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- workers.NewRunner(b, fan, workers.Options{ShutdownGrace: 10 * time.Millisecond}).Run(ctx)
	}()
	id := submit(t, b, "fan", "only once")
	child := recv(t, slow.started, "the slow child")
	stop() // the fan-out's worker goes away; its work is handed back
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	startRunner(t, b, fan, workers.Options{})
	close(slow.release)
	rec := waitSettled(t, b, id)
	if rec.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("parent: %s %q", rec.Task.Status.State, rec.Task.Status.Message.Text())
	}
	if n := slow.runs.Load(); n != 1 {
		t.Fatalf("the slow agent ran %d times, want 1", n)
	}
	idx := b.NewTaskIndex()
	ictx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = idx.Run(ictx) }()
	<-idx.Ready()
	page, err := idx.List(ictx, bus.ListQuery{Owner: bus.Owner{Agent: "slow", Admin: true}, Limit: 10})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].Task.ID != child {
		t.Fatalf("slow agent's tasks: %d (%v)", len(page.Tasks), err)
	}
	if a := artifactByAgent(rec, "slow"); a == nil || *a.Parts[0].Text != "finally" {
		t.Fatalf("re-attached child's answer: %+v", rec.Task.Artifacts)
	}
}

// Each child's answer is added to the parent when that child finishes, not
// when the last one does; a child that answers with a message (no task)
// counts too; every child is an ordinary task naming its parent.
func TestFanOutAddsEachAnswerAsItArrives(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	slow := newHang()
	replier := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		return out.Reply(ctx, schemas.Message{Parts: []schemas.Part{schemas.TextPart("hi from replier")}})
	})
	startRunner(t, b, workers.EchoDefinition("ok"), workers.Options{})
	startRunner(t, b, def("replier", replier), workers.Options{})
	startRunner(t, b, def("slow", slow), workers.Options{})
	startRunner(t, b, def("fan", workers.FanOut{Agents: []string{"ok", "replier", "slow"}}), workers.Options{})

	id := submit(t, b, "fan", "as they come")
	slowChild := recv(t, slow.started, "the slow child")
	rec := waitFor(t, b, id, "the two quick answers", func(r *schemas.TaskRecord) bool {
		return artifactByAgent(r, "ok") != nil && artifactByAgent(r, "replier") != nil
	})
	if rec.Task.Status.State != schemas.TaskStateWorking || artifactByAgent(rec, "slow") != nil {
		t.Fatalf("parent before the slow child answered: %s %+v", rec.Task.Status.State, rec.Task.Artifacts)
	}
	for _, agent := range []string{"ok", "replier"} {
		a := artifactByAgent(rec, agent)
		child, _, err := b.GetTask(context.Background(), a.Metadata[workers.MetaFanOutTaskID].(string))
		if err != nil || child.Agent != agent || child.Task.Metadata[workers.MetaFanOutParent] != id || child.Task.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("%s's child: %+v %v", agent, child, err)
		}
	}
	if a := artifactByAgent(rec, "replier"); *a.Parts[0].Text != "hi from replier" {
		t.Fatalf("reply artifact: %+v", a)
	}
	close(slow.release)
	rec = waitSettled(t, b, id)
	if rec.Task.Status.State != schemas.TaskStateCompleted || len(rec.Task.Artifacts) != 3 || !strings.Contains(rec.Task.Status.Message.Text(), "3 of 3 agents answered") {
		t.Fatalf("parent: %s %q %+v", rec.Task.Status.State, rec.Task.Status.Message.Text(), rec.Task.Artifacts)
	}
	if a := artifactByAgent(rec, "slow"); a == nil || a.Metadata[workers.MetaFanOutTaskID] != slowChild || *a.Parts[0].Text != "finally" {
		t.Fatalf("slow child's answer: %+v", a)
	}
}

// In partial mode a fan-out where no child answered still fails.
func TestFanOutPartialWithNoAnswerFails(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, def("bad", boom), workers.Options{})
	startRunner(t, b, def("fan", workers.FanOut{Agents: []string{"bad"}, Mode: workers.FanOutPartial}), workers.Options{})
	rec := waitSettled(t, b, submit(t, b, "fan", "x"))
	if msg := rec.Task.Status.Message.Text(); rec.Task.Status.State != schemas.TaskStateFailed || !strings.Contains(msg, "0 of 1 agents answered; bad: failed: boom") {
		t.Fatalf("parent: %s %q", rec.Task.Status.State, msg)
	}
}

func TestFanOutValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    workers.FanOut
		ok   bool
	}{
		{"ok", workers.FanOut{Agents: []string{"a", "b"}}, true},
		{"partial", workers.FanOut{Agents: []string{"a"}, Mode: workers.FanOutPartial}, true},
		{"no agents", workers.FanOut{}, false},
		{"twice", workers.FanOut{Agents: []string{"a", "a"}}, false},
		{"bad name", workers.FanOut{Agents: []string{"a.b c"}}, false},
		{"bad mode", workers.FanOut{Agents: []string{"a"}, Mode: "some"}, false},
	} {
		if err := tc.f.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// A child that answers only in its completing status message (as agents of
// the older tasks/send dialect do) has that answer added to the parent.
func TestFanOutTakesAnAnswerInTheStatusMessage(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, def("says", workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		return out.Complete(ctx, "said: "+req.Message.Text())
	})), workers.Options{})
	startRunner(t, b, def("fan", workers.FanOut{Agents: []string{"says"}}), workers.Options{})
	rec := waitSettled(t, b, submit(t, b, "fan", "hi"))
	a := artifactByAgent(rec, "says")
	if rec.Task.Status.State != schemas.TaskStateCompleted || a == nil || len(a.Parts) == 0 || a.Parts[0].Text == nil || *a.Parts[0].Text != "said: hi" {
		t.Fatalf("parent %s, artifacts %+v", rec.Task.Status.State, rec.Task.Artifacts)
	}
}
