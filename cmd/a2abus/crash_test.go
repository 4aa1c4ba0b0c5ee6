package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

	first := startProc(t, append([]string{"worker", "--nats", nats, "--agent", "tck"}, common...)...)
	waitAgentCard(t, base, "tck")
	// The conformance agent holds this task WORKING for 4s.
	task := sendNow(t, base, "tck", "test-resubscribe-message-id-crash", "x")
	waitTask(t, base, "tck", task.ID, 30*time.Second, func(t schemas.Task) bool { return t.Status.State == schemas.TaskStateWorking })
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.done
	first.done <- nil

	startProc(t, append([]string{"worker", "--nats", nats, "--agent", "tck"}, common...)...)
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

// subscribeAll replays a task's events from a cursor and returns the raw
// stream.
func subscribeAll(t *testing.T, base, agent, id, cursor string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": map[string]any{"id": id}})
	req, _ := http.NewRequest("POST", base+"/agents/"+agent, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Last-Event-ID", cursor)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return b.String()
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
	doomed := startProc(t, "edge", "--nats", "nats://"+natsAddr, "--listen", edgeAddr, "--default-agent", "echo")
	waitReady(t, doomed, "http://"+edgeAddr)
	startProc(t, "worker", "--nats", "nats://"+natsAddr, "--agent", "tck")
	waitAgentCard(t, "http://"+edgeAddr, "tck")

	// Stream a task that stays WORKING for 4s through the doomed edge.
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": map[string]any{
		"message": schemas.Message{MessageID: "test-resubscribe-message-id-edge", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("x")}}}})
	resp, err := http.Post("http://"+edgeAddr+"/agents/tck", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var lastID, taskID string
	for (taskID == "" || lastID == "") && sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "id: ") {
			lastID = line[4:]
		}
		if strings.HasPrefix(line, "data: ") && taskID == "" {
			var env struct {
				Result schemas.StreamResponse `json:"result"`
			}
			if err := json.Unmarshal([]byte(line[6:]), &env); err == nil && env.Result.Task != nil {
				taskID = env.Result.Task.ID
			}
		}
	}
	if taskID == "" {
		t.Fatal("no task event before the edge died")
	}
	if err := doomed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-doomed.done
	doomed.done <- nil

	rest := subscribeAll(t, "http://"+httpAddr, "tck", taskID, lastID)
	if strings.Count(rest, "TASK_STATE_COMPLETED") != 1 || strings.Contains(rest, `"task":{`) {
		t.Fatalf("resumed stream:\n%s", rest)
	}
	// Cursors keep increasing past the one the client had.
	prev := lastID
	for _, line := range strings.Split(rest, "\n") {
		if strings.HasPrefix(line, "id: ") {
			if len(line[4:]) < len(prev) || (len(line[4:]) == len(prev) && line[4:] <= prev) {
				t.Fatalf("cursor %s after %s", line[4:], prev)
			}
			prev = line[4:]
		}
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

	w := startProc(t, append([]string{"worker", "--nats", nats, "--config", cfg}, common...)...)
	waitAgentCard(t, base, "poison")
	task := sendNow(t, base, "poison", "p1", "x")
	// Each worker dies on the work; a supervisor would restart it, so do we.
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
			w = startProc(t, append([]string{"worker", "--nats", nats, "--config", cfg}, common...)...)
		case <-time.After(100 * time.Millisecond): // polling the task
		}
	}
	serve.stop(t)
}
