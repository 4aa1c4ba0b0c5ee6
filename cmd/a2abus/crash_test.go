package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
)

// getTask reads a task through an edge.
func getTask(t *testing.T, base, agent, id string) schemas.Task {
	t.Helper()
	var task schemas.Task
	if err := json.Unmarshal(rpc(t, base+"/agents/"+agent, "GetTask", map[string]any{"id": id}), &task); err != nil {
		t.Fatal(err)
	}
	return task
}

// waitTask polls until the task satisfies done.
func waitTask(t *testing.T, base, agent, id string, within time.Duration, done func(schemas.Task) bool) schemas.Task {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		task := getTask(t, base, agent, id)
		if done(task) {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: condition not met within %s (state %s)", id, within, task.Status.State)
		}
		time.Sleep(50 * time.Millisecond) // polling other processes
	}
}

func sendNow(t *testing.T, base, agent, messageID, text string) schemas.Task {
	t.Helper()
	msg := schemas.Message{MessageID: messageID, Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)}}
	var res struct {
		Task schemas.Task `json:"task"`
	}
	raw := rpc(t, base+"/agents/"+agent, "SendMessage", map[string]any{"message": msg, "configuration": map[string]any{"returnImmediately": true}})
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	return res.Task
}

// A worker process killed with SIGKILL mid-task leaves its work
// unacknowledged; another worker process takes it after the ack wait and
// finishes it, and the task completes exactly once.
func TestKilledWorkerProcessTaskFinishesElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("processes")
	}
	dir := t.TempDir()
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	common := []string{"--ack-wait", "2s"}
	serve := startProc(t, append([]string{"serve", "--listen", httpAddr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", natsAddr, "--agent", "echo"}, common...)...)
	base := "http://" + httpAddr
	waitReady(t, serve, base)
	nats := "nats://" + natsAddr

	workerCreds := servedCreds(filepath.Join(dir, "data"), bus.RoleWorker)
	first := startProc(t, append([]string{"worker", "--nats", nats, "--nats-creds", workerCreds, "--agent", "tck"}, common...)...)
	waitAgentCard(t, base, "tck")
	// The conformance agent holds this task WORKING for 4s.
	task := sendNow(t, base, "tck", "test-resubscribe-message-id-crash", "x")
	waitTask(t, base, "tck", task.ID, 30*time.Second, func(t schemas.Task) bool { return t.Status.State == schemas.TaskStateWorking })
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.done
	first.done <- nil

	startProc(t, append([]string{"worker", "--nats", nats, "--nats-creds", workerCreds, "--agent", "tck"}, common...)...)
	done := waitTask(t, base, "tck", task.ID, 60*time.Second, func(t schemas.Task) bool { return t.Status.State.Terminal() })
	if done.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("state %s", done.Status.State)
	}
	// Exactly one completion is visible to a client replaying the task.
	events := subscribeAll(t, base, "tck", task.ID, "0")
	if n := strings.Count(events, "TASK_STATE_COMPLETED"); n != 1 {
		t.Fatalf("%d completions in the task's events:\n%s", n, events)
	}
	serve.stop(t)
}

// sseEvent is one SSE event: its id and data.
type sseEvent struct{ id, data string }

// readSSEEvent reads the rest of one event whose first line sc holds.
func readSSEEvent(sc *bufio.Scanner) (sseEvent, bool) {
	var ev sseEvent
	for {
		line := sc.Text()
		if line == "" {
			return ev, ev.data != ""
		}
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			ev.id = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			ev.data = v
		}
		if !sc.Scan() {
			return ev, ev.data != ""
		}
	}
}

// parseSSE splits a raw stream into its events that carry data.
func parseSSE(raw string) []sseEvent {
	var out []sseEvent
	sc := bufio.NewScanner(strings.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for ev, ok := nextSSEEvent(sc); ok; ev, ok = nextSSEEvent(sc) {
		out = append(out, ev)
	}
	return out
}

// nextSSEEvent reads the next event that carries data, past blank lines
// and comments; false at the end of the stream.
func nextSSEEvent(sc *bufio.Scanner) (sseEvent, bool) {
	for sc.Scan() {
		if sc.Text() == "" || strings.HasPrefix(sc.Text(), ":") {
			continue
		}
		if ev, ok := readSSEEvent(sc); ok {
			return ev, true
		}
	}
	return sseEvent{}, false
}

// subscribeAll replays a task's events from a cursor and returns the raw
// stream. A retryable refusal (503 with Retry-After: the edge could not
// open a reader, say while the cluster elects a leader for longer than the
// edge waits) is asked again after the wait it names, as a client must;
// any other answer than an SSE stream that ends cleanly fails the test,
// so a cut stream is never mistaken for a short event log.
func subscribeAll(t *testing.T, base, agent, id, cursor string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, retryAfter, raw, err := replayOnce(base, agent, id, cursor)
		switch {
		case err == nil && status == http.StatusOK:
			return raw
		case err == nil && status == http.StatusServiceUnavailable && retryAfter > 0 && time.Now().Before(deadline):
			t.Logf("replay of task %s refused for now (retry after %s): %s", id, retryAfter, raw)
			time.Sleep(min(retryAfter, 2*time.Second)) // the back-off the answer asks for
		default:
			t.Errorf("replay of task %s: HTTP %d, %v:\n%s", id, status, err, raw)
			return raw
		}
	}
}

// replayOnce makes one SubscribeToTask request with Last-Event-ID cursor
// and reads the answer to its end. err reports a stream that did not end
// cleanly (the connection was cut) or one that is not SSE; raw holds what
// was read either way.
func replayOnce(base, agent, id, cursor string) (status int, retryAfter time.Duration, raw string, err error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": map[string]any{"id": id}})
	req, _ := http.NewRequest("POST", base+"/agents/"+agent, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Last-Event-ID", cursor)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, "", err
	}
	defer resp.Body.Close()
	if s, convErr := strconv.Atoi(resp.Header.Get("Retry-After")); convErr == nil && s > 0 {
		retryAfter = time.Duration(s) * time.Second
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, retryAfter, string(b), fmt.Errorf("the stream was cut: %w", err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode == http.StatusOK && !strings.HasPrefix(ct, "text/event-stream") {
		return resp.StatusCode, retryAfter, string(b), fmt.Errorf("content type %q, want an SSE stream", ct)
	}
	return resp.StatusCode, retryAfter, string(b), nil
}

// An edge process killed mid-stream: the client resumes on another edge
// with its last cursor and gets every later event once, in order.
func TestKilledEdgeProcessStreamResumesOnAnother(t *testing.T) {
	if testing.Short() {
		t.Skip("processes")
	}
	dir := t.TempDir()
	httpAddr, natsAddr, edgeAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	serve := startProc(t, "serve", "--listen", httpAddr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", natsAddr, "--agent", "echo")
	waitReady(t, serve, "http://"+httpAddr)
	data := filepath.Join(dir, "data")
	doomed := startProc(t, "edge", "--nats", "nats://"+natsAddr, "--nats-creds", servedCreds(data, bus.RoleEdge), "--listen", edgeAddr, "--default-agent", "echo")
	waitReady(t, doomed, "http://"+edgeAddr)
	startProc(t, "worker", "--nats", "nats://"+natsAddr, "--nats-creds", servedCreds(data, bus.RoleWorker), "--agent", "tck")
	waitAgentCard(t, "http://"+edgeAddr, "tck")

	// Stream a task that stays WORKING for 4s through the doomed edge.
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": map[string]any{
		"message": schemas.Message{MessageID: "test-resubscribe-message-id-edge", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("x")}}}})
	resp, err := http.Post("http://"+edgeAddr+"/agents/tck", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Read through the task snapshot to the first logged event (WORKING),
	// then the edge dies under the client.
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var taskID string
	var before []sseEvent
	for len(before) == 0 && sc.Scan() {
		ev, ok := readSSEEvent(sc)
		if !ok {
			continue // a keep-alive comment
		}
		var env struct {
			Result schemas.StreamResponse `json:"result"`
		}
		_ = json.Unmarshal([]byte(ev.data), &env)
		if env.Result.Task != nil {
			taskID = env.Result.Task.ID // the snapshot: not an event of the log
			continue
		}
		before = append(before, ev)
	}
	if taskID == "" || len(before) == 0 {
		t.Fatal("no task and event before the edge died")
	}
	if err := doomed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-doomed.done
	doomed.done <- nil

	// Resume on the other edge from the last cursor; the events had then
	// equal the task's whole log, replayed from the start, in order.
	after := parseSSE(subscribeAll(t, "http://"+httpAddr, "tck", taskID, before[len(before)-1].id))
	full := parseSSE(subscribeAll(t, "http://"+httpAddr, "tck", taskID, "0"))
	got := append(before, after...)
	t.Logf("edge kill: events before the kill %d, after resuming %d, task log %d", len(before), len(after), len(full))
	if len(got) != len(full) {
		t.Fatalf("client has %d events, the task's log %d", len(got), len(full))
	}
	for i := range full {
		if got[i] != full[i] {
			t.Fatalf("event %d: client has %+v, log has %+v", i, got[i], full[i])
		}
	}
	if !strings.Contains(full[len(full)-1].data, "TASK_STATE_COMPLETED") {
		t.Fatalf("the log does not end COMPLETED: %+v", full[len(full)-1])
	}
	serve.stop(t)
}

// Work that kills its worker every time (here: an exec agent whose command
// SIGKILLs the worker process) does not loop forever: after MaxDeliver
// deliveries it goes to the dead-letter stream and the task fails saying why.
func TestPoisonWorkEndsFailed(t *testing.T) {
	if testing.Short() {
		t.Skip("processes")
	}
	dir := t.TempDir()
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	cfg := filepath.Join(dir, "poison.json")
	writeFile(t, cfg, `{"agents":[{"name":"poison","kind":"exec","exec":{"command":"/bin/sh","args":["-c","kill -9 $PPID; sleep 5"]}}]}`)
	common := []string{"--ack-wait", "1s", "--max-deliver", "2"}
	serve := startProc(t, append([]string{"serve", "--listen", httpAddr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", natsAddr, "--agent", "echo"}, common...)...)
	base := "http://" + httpAddr
	waitReady(t, serve, base)
	nats := "nats://" + natsAddr

	workerCreds := servedCreds(filepath.Join(dir, "data"), bus.RoleWorker)
	w := startProc(t, append([]string{"worker", "--nats", nats, "--nats-creds", workerCreds, "--config", cfg}, common...)...)
	waitAgentCard(t, base, "poison")
	task := sendNow(t, base, "poison", "p1", "x")
	// Each worker dies on the work; a supervisor would restart it, so do we.
	crashes := 0
	deadline := time.Now().Add(90 * time.Second)
	for {
		cur := getTask(t, base, "poison", task.ID)
		if cur.Status.State == schemas.TaskStateFailed {
			if msg := cur.Status.Message.Text(); !strings.Contains(msg, "deliveries") {
				t.Fatalf("failure message %q should say why", msg)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("poison task still %s", cur.Status.State)
		}
		select {
		case err := <-w.done:
			w.done <- err
			crashes++
			w = startProc(t, append([]string{"worker", "--nats", nats, "--nats-creds", workerCreds, "--config", cfg}, common...)...)
		case <-time.After(100 * time.Millisecond): // polling the task
		}
	}
	// The work is kept in the dead-letter stream for inspection.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: nats, Credentials: adminCreds(t, filepath.Join(dir, "data", credentialsDir))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if dls := bustest.DeadLetters(t, b, "poison"); len(dls) != 1 || dls[0].TaskID != task.ID || !strings.Contains(dls[0].Reason, "deliveries") {
		t.Fatalf("dead letters: %+v", dls)
	}
	t.Logf("poison: accepted 1, worker crashes %d, failed 1 (%q), dead letters 1", crashes, getTask(t, base, "poison", task.ID).Status.Message.Text())
	serve.stop(t)
}

// A task stored without its work (the edge was killed between the two
// steps, or a crash lost the unflushed work message) is found by the
// sweep and run, also after the whole system was killed and restarted.
func TestOrphanedTaskIsQueuedAfterAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("processes")
	}
	dir := t.TempDir()
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	args := []string{"serve", "--listen", httpAddr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", natsAddr,
		"--agent", "echo", "--orphan-after", "1s", "--sweep-every", "300ms"}
	serve := startProc(t, args...)
	base := "http://" + httpAddr
	waitReady(t, serve, base)

	// What an edge killed after its create and before its publish leaves.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Config{URL: "nats://" + natsAddr, Credentials: adminCreds(t, filepath.Join(dir, "data", credentialsDir))})
	if err != nil {
		t.Fatal(err)
	}
	id, ctxID := schemas.NewID(), schemas.NewID()
	msg := schemas.Message{MessageID: "orphan-1", Role: schemas.RoleUser, TaskID: id, ContextID: ctxID, Parts: []schemas.Part{schemas.TextPart("left behind")}}
	rec := &schemas.TaskRecord{Agent: "echo", CreatedAt: *schemas.Now(), Task: schemas.Task{ID: id, ContextID: ctxID,
		Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted, Timestamp: schemas.Now()}, History: []schemas.Message{msg}}}
	bustest.CreateTask(t, b, rec)
	_ = b.Close()

	sigkill(t, serve)
	serve = startProc(t, args...)
	waitReady(t, serve, base)
	task := waitTask(t, base, "echo", id, 30*time.Second, func(task schemas.Task) bool { return task.Status.State.Terminal() })
	if task.Status.State != schemas.TaskStateCompleted || !strings.Contains(artifactText(task), "left behind") {
		t.Fatalf("orphaned task ended %s with %q", task.Status.State, artifactText(task))
	}
	if !strings.Contains(serve.output(), "requeued the work of a task left without it") {
		t.Fatalf("the requeue was not logged:\n%s", serve.output())
	}
	serve.stop(t)
}
