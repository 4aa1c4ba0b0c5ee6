package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
)

// cli runs one client command in-process and returns its stdout, stderr
// and error.
func cli(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb, os.Getenv)
	return out.String(), errb.String(), err
}

// cliJSON runs a command with -o json and decodes its one-line output.
func cliJSON[T any](t *testing.T, args ...string) T {
	t.Helper()
	out, stderr, err := cli(t, append(args, "-o", "json")...)
	if err != nil {
		t.Fatalf("a2abus %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("a2abus %s -o json printed %q: %v", strings.Join(args, " "), out, err)
	}
	return v
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := cli(t, args...)
	if err != nil {
		t.Fatalf("a2abus %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

func wantCLIError(t *testing.T, err error, contains string) {
	t.Helper()
	var ce *cliError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), contains) {
		t.Fatalf("error %v, want a client error (exit 1) saying %q", err, contains)
	}
}

// Every client command against a real a2abus (a serve process), with text
// and JSON output, progress while streaming, continuation of an
// input-required task, cancel and subscribe, and the errors a person sees
// when a task does not exist or nothing answers.
func TestCLIAgainstServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := filepath.Join(dir, "a2abus.json")
	writeFile(t, cfg, `{"agents":[{"name":"echo"},{"name":"sleepy","kind":"exec","exec":{"command":"sleep","args":["60"],"timeout":"120s"}}]}`)
	serve := startProc(t, "serve", "--listen", addr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", "off", "--config", cfg)
	base := "http://" + addr
	waitReady(t, serve, base)

	t.Run("card", func(t *testing.T) {
		out := mustCLI(t, "card", base)
		if !strings.Contains(out, "echo 1.0.0") || !strings.Contains(out, "JSONRPC 1.0 "+base+"/agents/echo") || !strings.Contains(out, "skill      echo") {
			t.Fatalf("card text:\n%s", out)
		}
		card := cliJSON[schemas.AgentCard](t, "card", base+"/agents/sleepy")
		if card.Name != "sleepy" || len(card.SupportedInterfaces) == 0 {
			t.Fatalf("card json: %+v", card)
		}
	})

	var taskID, contextID string
	t.Run("send", func(t *testing.T) {
		out := mustCLI(t, "send", base, "hello from the cli")
		if !strings.Contains(out, "TASK_STATE_COMPLETED") || !strings.Contains(out, "artifact echo: hello from the cli") {
			t.Fatalf("send text:\n%s", out)
		}
		task := cliJSON[schemas.Task](t, "send", base, "json please")
		if task.Status.State != schemas.TaskStateCompleted || artifactText(task) != "json please" {
			t.Fatalf("send json: %+v", task)
		}
		taskID, contextID = task.ID, task.ContextID
		// Flags before the arguments work as well as after them.
		if task := cliJSON[schemas.Task](t, "send", "--context", contextID, base, "same context"); task.ContextID != contextID {
			t.Fatalf("--context: %s, want %s", task.ContextID, contextID)
		}
	})

	t.Run("stream", func(t *testing.T) {
		out := mustCLI(t, "send", base, "one two three four five six", "--stream")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		want := []string{"task ", "status TASK_STATE_WORKING", "artifact echo: one two three four", "  + echo: five six", "status TASK_STATE_COMPLETED"}
		if len(lines) != len(want) {
			t.Fatalf("stream text:\n%s", out)
		}
		for i, w := range want {
			if !strings.HasPrefix(lines[i], w) {
				t.Fatalf("stream line %d = %q, want %q…\n%s", i, lines[i], w, out)
			}
		}
		if alias := mustCLI(t, "stream", base, "one two three four five six"); strings.Count(alias, "\n") != len(want) {
			t.Fatalf("a2abus stream (alias of send --stream):\n%s", alias)
		}
		jout := mustCLI(t, "send", base, "one two three four five six", "--stream", "-o", "json")
		var kinds []string
		for _, l := range strings.Split(strings.TrimSpace(jout), "\n") {
			var ev schemas.StreamResponse
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("stream json line %q: %v", l, err)
			}
			switch {
			case ev.Task != nil:
				kinds = append(kinds, "task")
			case ev.StatusUpdate != nil:
				kinds = append(kinds, string(ev.StatusUpdate.Status.State))
			case ev.ArtifactUpdate != nil:
				kinds = append(kinds, "artifact")
			}
		}
		if strings.Join(kinds, ",") != "task,TASK_STATE_WORKING,artifact,artifact,TASK_STATE_COMPLETED" {
			t.Fatalf("stream json events: %v", kinds)
		}
	})

	t.Run("input-required", func(t *testing.T) {
		asked := cliJSON[schemas.Task](t, "send", base, "/ask")
		if asked.Status.State != schemas.TaskStateInputRequired {
			t.Fatalf("/ask: %s", asked.Status.State)
		}
		out := mustCLI(t, "send", base, "my answer", "--task", asked.ID)
		if !strings.Contains(out, "task "+asked.ID+"  TASK_STATE_COMPLETED") || !strings.Contains(out, "my answer") {
			t.Fatalf("--task continuation:\n%s", out)
		}
	})

	t.Run("get-and-tasks", func(t *testing.T) {
		out := mustCLI(t, "get", base, taskID, "--history", "1")
		if !strings.Contains(out, "task "+taskID+"  TASK_STATE_COMPLETED") {
			t.Fatalf("get text:\n%s", out)
		}
		if got := cliJSON[schemas.Task](t, "get", base, taskID); got.ID != taskID {
			t.Fatalf("get json: %+v", got)
		}
		out = mustCLI(t, "tasks", base, "--context", contextID, "--state", "completed")
		if !strings.Contains(out, taskID) || !strings.Contains(out, "2 task(s)") {
			t.Fatalf("tasks text:\n%s", out)
		}
		page := cliJSON[schemas.ListTasksResponse](t, "tasks", base, "--page-size", "1")
		if len(page.Tasks) != 1 || page.NextPageToken == "" {
			t.Fatalf("tasks json page: %+v", page)
		}
		if out := mustCLI(t, "tasks", base, "--page-size", "1"); !strings.Contains(out, "more: --page-token ") {
			t.Fatalf("tasks text does not say how to read on:\n%s", out)
		}
	})

	t.Run("no-wait-subscribe-cancel", func(t *testing.T) {
		sleepy := base + "/agents/sleepy"
		task := cliJSON[schemas.Task](t, "send", sleepy, "zzz", "--no-wait")
		if task.Status.State.Terminal() {
			t.Fatalf("--no-wait returned a finished task: %s", task.Status.State)
		}
		// subscribe prints events as they come; cancel once it is following.
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			var errb bytes.Buffer
			err := run(context.Background(), []string{"subscribe", sleepy, task.ID}, pw, &errb, os.Getenv)
			pw.Close()
			done <- err
		}()
		lines := bufio.NewScanner(pr)
		if !lines.Scan() || !strings.HasPrefix(lines.Text(), "task "+task.ID) {
			t.Fatalf("subscribe's first line: %q", lines.Text())
		}
		out := mustCLI(t, "cancel", sleepy, task.ID)
		if !strings.Contains(out, "TASK_STATE_CANCELED") {
			t.Fatalf("cancel:\n%s", out)
		}
		var rest []string
		for lines.Scan() {
			rest = append(rest, lines.Text())
		}
		if len(rest) == 0 || !strings.HasPrefix(rest[len(rest)-1], "status TASK_STATE_CANCELED") {
			t.Fatalf("subscribe did not follow the task to its end: %q", rest)
		}
		wantCLIError(t, <-done, "ended TASK_STATE_CANCELED")
		_, _, err := cli(t, "cancel", sleepy, task.ID, "-o", "json")
		if err != nil {
			t.Fatalf("canceling a canceled task again: %v", err)
		}
	})

	t.Run("agents", func(t *testing.T) {
		out := mustCLI(t, "agents", base)
		if !strings.Contains(out, "echo (local)") || !strings.Contains(out, "sleepy (local)") {
			t.Fatalf("agents text:\n%s", out)
		}
		list := cliJSON[edge.AgentList](t, "agents", base, "--skill", "echo")
		if len(list.Agents) != 1 || list.Agents[0].Name != "echo" {
			t.Fatalf("agents json --skill echo: %+v", list)
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, _, err := cli(t, "get", base, schemas.NewID())
		wantCLIError(t, err, "not found (TASK_NOT_FOUND, code -32001)")
		_, _, err = cli(t, "send", "http://"+freeAddr(t), "anyone?")
		wantCLIError(t, err, "is the agent running")
		_, _, err = cli(t, "agents", base+"/agents/echo/.well-known/agent-card.json")
		wantCLIError(t, err, "did not answer with an a2abus agent registry")
		_, _, err = cli(t, "get", base)
		var ce *cliError
		if err == nil || errors.As(err, &ce) {
			t.Fatalf("a usage error must not look like an agent failure: %v", err)
		}
		_, _, err = cli(t, "send", "http://169.254.169.254", "metadata?")
		wantCLIError(t, err, "refused")
	})
	serve.stop(t)
}
