package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// An approval outlives every process: a task held for it, its serve
// process killed (edge, worker and NATS server at once) and started again
// on the same data, is listed by "a2abus approvals", approved with
// "a2abus approvals approve", and runs to completion; a second decision
// is refused, saying who decided first. The config file is what makes
// the agent need approval.
func TestApprovalSurvivesARestartOfEveryProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("processes")
	}
	dir := t.TempDir()
	cfg := writeTemp(t, dir, `{"approvals": {"agents": ["echo"], "expireAfter": "1h"}}`)
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	args := []string{"serve", "--config", cfg, "--listen", httpAddr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", natsAddr,
		"--agent", "echo", "--open-admin", "true", "--sweep-every", "200ms"}
	serve := startProc(t, args...)
	base := "http://" + httpAddr
	waitReady(t, serve, base)

	task := sendNow(t, base, "echo", "held-1", "ship it")
	if task.Status.State != schemas.TaskStateAuthRequired {
		t.Fatalf("the task is %s, want AUTH_REQUIRED", task.Status.State)
	}
	sigkill(t, serve)
	serve = startProc(t, args...)
	waitReady(t, serve, base)

	if got := getTask(t, base, "echo", task.ID); got.Status.State != schemas.TaskStateAuthRequired {
		t.Fatalf("after the restart the task is %s", got.Status.State)
	}
	out, stderr, err := cli(t, "approvals", base)
	if err != nil || !strings.Contains(out, task.ID) || !strings.Contains(out, "agent echo") {
		t.Fatalf("a2abus approvals: %v\n%s%s", err, out, stderr)
	}
	if _, _, err := cli(t, "approvals", "deny", base, task.ID); err == nil {
		t.Error("a denial without --reason was sent")
	}
	out, stderr, err = cli(t, "approvals", "approve", base, task.ID, "--reason", "reviewed")
	if err != nil || !strings.Contains(out, "approved") {
		t.Fatalf("a2abus approvals approve: %v\n%s%s", err, out, stderr)
	}
	_, _, err = cli(t, "approvals", "deny", base, task.ID, "--reason", "second thoughts")
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "already approved") {
		t.Errorf("a second decision: %v", err)
	}
	done := waitTask(t, base, "echo", task.ID, 30*time.Second, func(task schemas.Task) bool { return task.Status.State.Terminal() })
	if done.Status.State != schemas.TaskStateCompleted || !strings.Contains(artifactText(done), "ship it") {
		t.Fatalf("the approved task ended %s with %q", done.Status.State, artifactText(done))
	}
	if out, _, _ := cli(t, "approvals", base); !strings.Contains(out, "no approvals pending") {
		t.Errorf("after the decision: %s", out)
	}
	serve.stop(t)
}

func TestApprovalsConfigSaysWhatIsWrong(t *testing.T) {
	_, err := ApprovalsConfig{Approvers: []string{" "}, Skills: map[string][]string{"ops": nil}}.policy()
	if err == nil || !strings.Contains(err.Error(), "approvals.approvers") || !strings.Contains(err.Error(), "approvals.skills.ops") {
		t.Fatalf("err = %v", err)
	}
	p, err := ApprovalsConfig{Agents: []string{"deploy"}, ExpireAfter: Duration(time.Hour)}.policy()
	if err != nil || p.ExpireAfter != time.Hour || p.Agents[0] != "deploy" {
		t.Fatalf("policy = %+v, %v", p, err)
	}
}
