package workers_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// submitBy submits a task for agent with a deadline, as the edge does
// once it has read the caller's.
func submitBy(t *testing.T, b *bus.Bus, agent, text string, deadline time.Time) string {
	t.Helper()
	msg := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)}}
	rec, _, err := b.Submit(context.Background(), bus.Submission{Agent: agent, Message: msg, Deadline: deadline}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Task.ID
}

// failedByDeadline fails unless rec ended FAILED with "deadline exceeded".
func failedByDeadline(t *testing.T, rec *schemas.TaskRecord) {
	t.Helper()
	st := rec.Task.Status
	if st.State != schemas.TaskStateFailed || st.Message == nil || st.Message.Text() != schemas.DeadlineExceeded {
		t.Fatalf("task %s: %s %q, want FAILED %q", rec.Task.ID, st.State, st.Message.Text(), schemas.DeadlineExceeded)
	}
}

// Work whose deadline passed while it waited is not run: the task fails
// and the work is done with.
func TestDeadlinePassedBeforeStart(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	var runs atomic.Int64
	counted := workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		runs.Add(1)
		return nil
	})
	// The deadline passes before any worker takes the work (the edge
	// refuses a passed one; a queue can make one pass).
	id := submitBy(t, b, "late", "too late", time.Now().Add(-time.Second))
	startRunner(t, b, def("late", counted), workers.Options{})
	failedByDeadline(t, waitSettled(t, b, id))
	// The same runner runs the next task: the late one's work was acked,
	// not left to be redelivered.
	if rec := waitSettled(t, b, submit(t, b, "late", "on time")); rec.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("next task: %s", rec.Task.Status.State)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the agent ran %d times, want once (the task on time only)", n)
	}
}

// An exec agent still running at the deadline is stopped: its process is
// killed and the task fails with "deadline exceeded", not as a timeout.
func TestDeadlineReachedWhileExecRuns(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	pidFile := filepath.Join(t.TempDir(), "pid")
	startExec(t, b, "sleeper", shell(`echo $$ > `+pidFile+`.tmp && mv `+pidFile+`.tmp `+pidFile+`; exec sleep 30`))
	deadline := time.Now().Add(3 * time.Second)
	id := submitBy(t, b, "sleeper", "", deadline)
	var pid int
	for until := time.Now().Add(20 * time.Second); pid == 0; {
		if raw, err := os.ReadFile(pidFile); err == nil {
			if pid, err = strconv.Atoi(strings.TrimSpace(string(raw))); err != nil {
				t.Fatal(err)
			}
			break
		}
		if rec, _, _ := b.GetTask(context.Background(), id); rec != nil && rec.Task.Status.State.Terminal() {
			t.Fatalf("the task ended (%s) before its process started", rec.Task.Status.State)
		}
		if time.Now().After(until) {
			t.Fatal("the process never started")
		}
		time.Sleep(10 * time.Millisecond) // polling the process's pid file
	}
	rec := waitSettled(t, b, id)
	failedByDeadline(t, rec)
	if rec.Task.Status.Timestamp.Before(deadline.Truncate(time.Millisecond)) {
		t.Fatalf("failed at %v, before the deadline %v", rec.Task.Status.Timestamp, deadline)
	}
	// The exec agent reaps its process before the turn ends.
	if alive(pid) {
		t.Fatalf("process %d still alive after the deadline", pid)
	}
}

// A fan-out's children get their parent's deadline; at it, children and
// parent all fail with "deadline exceeded".
func TestDeadlineInheritedByFanOutChildren(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	h1, h2 := newHang(), newHang()
	startRunner(t, b, def("h1", h1), workers.Options{})
	startRunner(t, b, def("h2", h2), workers.Options{})
	startRunner(t, b, def("fan", workers.FanOut{Agents: []string{"h1", "h2"}}), workers.Options{})
	deadline := time.Now().Add(3 * time.Second).UTC().Truncate(time.Millisecond)
	id := submitBy(t, b, "fan", "wait for it", deadline)
	children := []string{recv(t, h1.started, "child 1"), recv(t, h2.started, "child 2")}
	for _, c := range children {
		rec, _, err := b.GetTask(context.Background(), c)
		if err != nil || rec.Deadline == nil || !rec.Deadline.Equal(deadline) {
			t.Fatalf("child %s: deadline %v (%v), want the parent's %v", c, rec.Deadline, err, deadline)
		}
	}
	for _, c := range children {
		failedByDeadline(t, waitSettled(t, b, c))
	}
	failedByDeadline(t, waitSettled(t, b, id))
}

// The remote kind forwards the deadline as metadata; the external a2abus
// reads it as its own task's deadline.
func TestDeadlineForwardedToRemoteAgent(t *testing.T) {
	ext := startExternal(t, workers.EchoDefinition("echo"))
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, remoteDef(t, "far-echo", ext.url+"/agents/echo"), workers.Options{})
	deadline := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	rec := waitSettled(t, b, submitBy(t, b, "far-echo", "hello", deadline))
	if rec.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("local task: %s", rec.Task.Status.State)
	}
	extID, _ := rec.Task.Metadata[workers.MetaRemoteTaskID].(string)
	extRec, _, err := ext.b.GetTask(context.Background(), extID)
	if err != nil || extRec.Deadline == nil || !extRec.Deadline.Equal(deadline) {
		t.Fatalf("external task %q: deadline %v (%v), want %v", extID, extRec.Deadline, err, deadline)
	}
}
