//go:build unix

package workers_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

func startExec(t *testing.T, b *bus.Bus, name string, cfg workers.ExecConfig) {
	t.Helper()
	if cfg.BaseEnv == nil {
		cfg.BaseEnv = os.Environ() // as cmd gives it
	}
	def, err := workers.ExecDefinition(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	startRunner(t, b, def, workers.Options{ShutdownGrace: time.Second})
}

func shell(script string) workers.ExecConfig {
	return workers.ExecConfig{Command: "/bin/sh", Args: []string{"-c", script}, Timeout: schemas.Duration(30 * time.Second)}
}

func TestExecStreamsStdoutAndReadsStdin(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startExec(t, b, "lines", shell(`printf 'line1\nline2\nline3\n'`))
	startExec(t, b, "cat", workers.ExecConfig{Command: "cat"})
	rec := waitSettled(t, b, submit(t, b, "lines", "ignored"))
	if rec.Task.Status.State != schemas.TaskStateCompleted || len(rec.Task.Artifacts) != 1 {
		t.Fatalf("task %s, artifacts %+v", rec.Task.Status.State, rec.Task.Artifacts)
	}
	if got := artifactText(rec.Task.Artifacts[0]); got != "line1\nline2\nline3\n" {
		t.Fatalf("stdout artifact %q", got)
	}
	rec = waitSettled(t, b, submit(t, b, "cat", "from stdin"))
	if got := artifactText(rec.Task.Artifacts[0]); got != "from stdin" {
		t.Fatalf("cat echoed %q", got)
	}
}

// Output written over time arrives as several chunks, the last one marked.
func TestExecChunksCarryAppendAndLastChunk(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	// Print, wait until the test has seen the first chunk, print again.
	startExec(t, b, "slow", shell(`echo first; while [ ! -e `+gate+` ]; do sleep 0.02; done; echo second`))
	id := submit(t, b, "slow", "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := b.ReadEvents(ctx, id, 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var chunks []schemas.TaskArtifactUpdateEvent
	for u := range r.Events() {
		if u.Artifact != nil {
			chunks = append(chunks, *u.Artifact)
			if len(chunks) == 1 {
				if err := os.WriteFile(gate, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		if u.Status != nil && u.Status.Status.State.Terminal() {
			break
		}
	}
	// The first chunk streamed before the command went on; later ones
	// append; only the final one is marked last.
	if len(chunks) < 2 || chunks[0].Append || chunks[0].LastChunk || artifactText(chunks[0].Artifact) != "first\n" {
		t.Fatalf("chunks %+v", chunks)
	}
	text := ""
	for i, c := range chunks {
		if i > 0 && !c.Append || c.LastChunk != (i == len(chunks)-1) {
			t.Fatalf("chunk %d: append=%v last=%v", i, c.Append, c.LastChunk)
		}
		text += artifactText(c.Artifact)
	}
	if text != "first\nsecond\n" {
		t.Fatalf("chunk text %q", text)
	}
}

func TestExecNonZeroExitFailsWithStderrTail(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startExec(t, b, "bad", shell(`echo some output; echo 'oops: disk on fire' >&2; exit 3`))
	rec := waitSettled(t, b, submit(t, b, "bad", ""))
	msg := rec.Task.Status.Message.Text()
	if rec.Task.Status.State != schemas.TaskStateFailed || !strings.Contains(msg, "status 3") || !strings.Contains(msg, "oops: disk on fire") {
		t.Fatalf("%s: %q", rec.Task.Status.State, msg)
	}
	if len(rec.Task.Artifacts) != 1 || artifactText(rec.Task.Artifacts[0]) != "some output\n" {
		t.Fatalf("output before the failure is kept: %+v", rec.Task.Artifacts)
	}
}

func TestExecTimeout(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	cfg := shell(`echo partial; echo starting >&2; sleep 30`)
	cfg.Timeout = schemas.Duration(300 * time.Millisecond)
	startExec(t, b, "sleepy", cfg)
	rec := waitSettled(t, b, submit(t, b, "sleepy", ""))
	if msg := rec.Task.Status.Message.Text(); rec.Task.Status.State != schemas.TaskStateFailed || !strings.Contains(msg, "timed out") || !strings.Contains(msg, "starting") {
		t.Fatalf("%s: %q", rec.Task.Status.State, msg)
	}
	// What the command wrote before the timeout is kept.
	if len(rec.Task.Artifacts) != 1 || artifactText(rec.Task.Artifacts[0]) != "partial\n" {
		t.Fatalf("artifacts %+v", rec.Task.Artifacts)
	}
}

// Canceling a running exec task kills its whole process group: the shell
// and the child it started are gone afterwards.
func TestExecCancelKillsProcessGroup(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	dir := t.TempDir()
	shPID, childPID := filepath.Join(dir, "sh.pid"), filepath.Join(dir, "child.pid")
	startExec(t, b, "tree", shell(`echo $$ > `+shPID+`.tmp && mv `+shPID+`.tmp `+shPID+`; sleep 300 & echo $! > `+childPID+`.tmp && mv `+childPID+`.tmp `+childPID+`; wait`))
	id := submit(t, b, "tree", "")
	pids := make([]int, 0, 2)
	for _, f := range []string{shPID, childPID} {
		deadline := time.Now().Add(20 * time.Second)
		for {
			if raw, err := os.ReadFile(f); err == nil {
				pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, pid)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never written", f)
			}
			time.Sleep(10 * time.Millisecond) // polling the child's pid file
		}
	}
	cancelTask(t, b, "tree", id)
	ctx := context.Background()
	for _, pid := range pids {
		deadline := time.Now().Add(20 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still alive after cancel", pid)
			}
			time.Sleep(10 * time.Millisecond) // polling the OS
		}
	}
	if rec, _, _ := b.GetTask(ctx, id); rec.Task.Status.State != schemas.TaskStateCanceled {
		t.Fatalf("state %s", rec.Task.Status.State)
	}
}

// alive reports whether pid runs (a zombie counts as gone).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// JSON lines drive richer events; plain lines are still text.
func TestExecLineProtocol(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startExec(t, b, "rich", shell(`
echo '{"a2abus":"status","text":"halfway"}'
echo plain text
echo '{"a2abus":"artifact","artifactId":"report","name":"report","data":{"rows":3}}'
echo '{"a2abus":"input-required","text":"Which file?"}'
echo after the question is ignored`))
	rec := waitSettled(t, b, submit(t, b, "rich", ""))
	if rec.Task.Status.State != schemas.TaskStateInputRequired || rec.Task.Status.Message.Text() != "Which file?" {
		t.Fatalf("status %+v", rec.Task.Status)
	}
	var texts []string
	for _, m := range rec.Task.History {
		texts = append(texts, m.Text())
	}
	if !strings.Contains(strings.Join(texts, "|"), "halfway") {
		t.Fatalf("history %v", texts)
	}
	byID := map[string]schemas.Artifact{}
	for _, a := range rec.Task.Artifacts {
		byID[a.ArtifactID] = a
	}
	if string(byID["report"].Parts[0].Data) != `{"rows":3}` {
		t.Fatalf("data artifact %+v", byID["report"])
	}
	if got := artifactText(byID["stdout-"+rec.Task.ID]); got != "plain text\n" {
		t.Fatalf("stdout %q", got)
	}
}

func TestExecDefinitionValidates(t *testing.T) {
	if _, err := workers.ExecDefinition("x", workers.ExecConfig{}); err == nil {
		t.Fatal("empty command accepted")
	}
	if _, err := workers.ExecDefinition("x", workers.ExecConfig{Command: "/no/such/program"}); err == nil {
		t.Fatal("missing program accepted")
	}
}
