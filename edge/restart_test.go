package edge_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// Tasks live in JetStream's file store: an embedded server restarted on the
// same data directory serves every task it had, through a fresh edge.
func TestRestartOnSameDataDirKeepsTasks(t *testing.T) {
	dir := t.TempDir()
	type node struct {
		srv  *bus.Server
		b    *bus.Bus
		url  string
		stop func()
	}
	start := func() *node {
		srv, err := bus.StartServer(bus.ServerConfig{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		b, err := bus.Connect(ctx, bus.Config{Server: srv})
		if err != nil {
			t.Fatal(err)
		}
		runDone := make(chan error, 1)
		go func() { runDone <- workers.NewRunner(b, workers.EchoDefinition("echo"), workers.Options{}).Run(ctx) }()
		e := edge.New(b, edge.Config{})
		edgeDone := make(chan error, 1)
		go func() { edgeDone <- e.Run(ctx) }()
		ts := httptest.NewServer(e.Handler())
		n := &node{srv: srv, b: b, url: ts.URL}
		n.stop = func() {
			ts.Close()
			cancel()
			<-runDone
			<-edgeDone
			_ = b.Close()
			srv.Shutdown()
		}
		return n
	}
	h := &harness{t: t}

	n1 := start()
	h.waitAgent(n1.url, "echo")
	task := mustResult[schemas.SendMessageResponse](t, h.callAt(n1.url, "echo", "SendMessage", schemas.SendMessageRequest{Message: ptr(userMessage("persist me"))})).Task
	if task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("state = %s", task.Status.State)
	}
	n1.stop()

	n2 := start()
	defer n2.stop()
	h.waitAgent(n2.url, "echo")
	got := mustResult[schemas.Task](t, h.callAt(n2.url, "echo", "GetTask", map[string]any{"id": task.ID}))
	if got.Status.State != schemas.TaskStateCompleted || len(got.Artifacts) != 1 || len(got.History) != len(task.History) {
		t.Fatalf("after restart: %+v", got)
	}
	// And the restarted system takes new work.
	again := mustResult[schemas.SendMessageResponse](t, h.callAt(n2.url, "echo", "SendMessage", schemas.SendMessageRequest{Message: ptr(userMessage("again"))})).Task
	if again.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("new task after restart: %s", again.Status.State)
	}
}
