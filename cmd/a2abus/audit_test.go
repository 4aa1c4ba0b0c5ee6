package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

const (
	auditOpsKey   = "ops-key-0123456789abcdef"
	auditAliceKey = "alice-key-0123456789abcdef"
	auditBobKey   = "bob-key-0123456789abcdef"
)

// auditedA2Abus serves an authenticating a2abus edge whose local level
// (loopback) is audited, with an echo agent, on an in-process bus.
func auditedA2Abus(t *testing.T) string {
	t.Helper()
	_, b := bustest.New(t, bustest.Options{})
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{
		{Key: auditOpsKey, Principal: "ops", Admin: true}, {Key: auditAliceKey, Principal: "alice"}, {Key: auditBobKey, Principal: "bob"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	audit := true
	policy, err := TrustConfig{Levels: map[string]TrustLevelConfig{edge.TrustLocal: {Audit: &audit}}}.policy()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := workers.NewRunner(b, workers.EchoDefinition("echo"), workers.Options{ShutdownGrace: time.Second})
	rdone := make(chan error, 1)
	go func() { rdone <- r.Run(ctx) }()
	<-r.Ready()
	ts := httptest.NewUnstartedServer(nil)
	e := edge.New(b, edge.Config{PublicURL: "http://" + ts.Listener.Addr().String(), Auth: a, Trust: policy})
	ts.Config.Handler = e.Handler()
	ts.Start()
	edone := make(chan error, 1)
	go func() { edone <- e.Run(ctx) }()
	t.Cleanup(func() {
		ts.Close()
		cancel()
		<-edone
		<-rdone
	})
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := e.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	return ts.URL
}

// "a2abus audit" reads the audit record through an edge as an admin,
// filtered by principal and by task, as JSON or a table; a non-admin is
// refused.
func TestAuditCommandFilters(t *testing.T) {
	base := auditedA2Abus(t)
	send := func(key, text string) schemas.Task {
		t.Helper()
		res := cliJSON[schemas.SendMessageResponse](t, "send", base, text, "--api-key", key)
		if res.Task == nil || res.Task.ID == "" {
			t.Fatalf("send %q: no task", text)
		}
		return *res.Task
	}
	alice1, _, bob := send(auditAliceKey, "one"), send(auditAliceKey, "two"), send(auditBobKey, "three")
	records := func(args ...string) []schemas.AuditRecord {
		t.Helper()
		out, stderr, err := cli(t, append([]string{"audit", base, "--api-key", auditOpsKey, "--json"}, args...)...)
		if err != nil {
			t.Fatalf("a2abus audit %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		var recs []schemas.AuditRecord
		if err := json.Unmarshal([]byte(out), &recs); err != nil {
			t.Fatalf("a2abus audit --json: %v\n%s", err, out)
		}
		return recs
	}
	alices := records("--principal", "alice", "--since", "1h")
	sends := map[string]int{}
	for _, r := range alices {
		if r.Principal != "alice" {
			t.Errorf("--principal alice listed %+v", r)
		}
		if r.Method == "SendMessage" && r.Outcome == schemas.AuditOK {
			sends[r.TaskID]++
		}
	}
	if len(sends) != 2 || sends[alice1.ID] != 1 || sends[bob.ID] != 0 {
		t.Errorf("alice's finished sends %v, want her two tasks (first %s)", sends, alice1.ID)
	}
	byTask := records("--task", bob.ID)
	if len(byTask) != 1 || byTask[0].Principal != "bob" || byTask[0].TaskID != bob.ID {
		t.Errorf("--task %s: %+v, want bob's send's outcome", bob.ID, byTask)
	}
	if got := records("--principal", "alice", "--limit", "1"); len(got) != 1 || got[0].Seq != alices[len(alices)-1].Seq {
		t.Errorf("--limit 1: %+v, want alice's newest record", got)
	}
	out, stderr, err := cli(t, "audit", base, "--api-key", auditOpsKey, "--task", bob.ID)
	if err != nil || !strings.HasPrefix(out, "TIME ") || !strings.Contains(out, bob.ID) || !strings.Contains(out, "bob") {
		t.Errorf("the table: %v %s\n%s", err, stderr, out)
	}
	if _, _, err := cli(t, "audit", base, "--api-key", auditAliceKey); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("alice read the audit record: %v", err)
	}
	if _, _, err := cli(t, "audit", base, "--since", "yesterday"); err == nil || !strings.Contains(err.Error(), "--since") {
		t.Errorf("a bad --since: %v", err)
	}
}
