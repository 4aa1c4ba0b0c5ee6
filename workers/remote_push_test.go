package workers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// startPushExternal is an external a2abus that delivers push
// notifications (to loopback), retrying fast.
func startPushExternal(t *testing.T, defs ...workers.Definition) *external {
	t.Helper()
	ext := startExternalWith(t, edge.Config{Push: true}, defs...)
	startSender(t, ext.b, workers.PushOptions{MaxAttempts: 1000})
	return ext
}

// pushRemoteDef is a remote agent in push mode whose webhooks are on the
// local edge at base.
func pushRemoteDef(t *testing.T, name, url string, b *bus.Bus, base string, poll time.Duration) workers.Definition {
	d := remoteDef(t, name, url)
	r := d.Agent.(workers.Remote)
	r.Push = &workers.RemotePush{
		URL:       func(id string) string { return base + "/a2a/remote/" + name + "/tasks/" + id + "/push" },
		PollEvery: poll,
	}
	d.Agent = r
	return d
}

// A remote agent in push mode holds no stream: the external agent's
// notifications reach the local task through the edge's webhook, event by
// event; a notification without the task's token is refused.
func TestRemoteAgentInPushMode(t *testing.T) {
	ext := startPushExternal(t, workers.EchoDefinition("echo"))
	_, b := bustest.New(t, bustest.Options{})
	base := startEdge(t, b, edge.Config{})
	startRunner(t, b, pushRemoteDef(t, "far", ext.url+"/agents/echo", b, base, time.Hour), workers.Options{})

	text := "one two three four five six seven eight nine"
	id := submit(t, b, "far", text)
	rec := waitSettled(t, b, id)
	if rec.Task.Status.State != schemas.TaskStateCompleted || len(rec.Task.Artifacts) != 1 || artifactText(rec.Task.Artifacts[0]) != text {
		t.Fatalf("local task: %s %+v", rec.Task.Status.State, rec.Task.Artifacts)
	}
	if _, ok := rec.Task.Metadata[workers.MetaRemotePushToken].(string); !ok {
		t.Fatalf("no push token hash in %v", rec.Task.Metadata)
	}
	var kinds []string
	for _, u := range readAll(t, b, id) {
		switch {
		case u.Artifact != nil:
			kinds = append(kinds, "chunk")
		case u.Status != nil:
			kinds = append(kinds, string(u.Status.Status.State))
		}
	}
	// Two WORKING updates: the token's hash stored before the send, the
	// external task's ids after it.
	if got := strings.Join(kinds, ","); got != "TASK_STATE_WORKING,TASK_STATE_WORKING,chunk,chunk,chunk,TASK_STATE_COMPLETED" {
		t.Fatalf("local events: %s", got)
	}

	// The webhook wants the task's token: none, a wrong one, or another
	// task's id is not found; a finished task's is gone.
	for _, c := range []struct {
		path, token string
		status      int
	}{
		{"/a2a/remote/far/tasks/" + id + "/push", "", 404},
		{"/a2a/remote/far/tasks/" + id + "/push", "wrong", 404},
		{"/a2a/remote/other/tasks/" + id + "/push", "wrong", 404},
		{"/a2a/remote/far/tasks/" + schemas.NewID() + "/push", "wrong", 404},
	} {
		req, _ := http.NewRequest("POST", base+c.path, strings.NewReader(`{"statusUpdate":{"taskId":"x","status":{"state":"TASK_STATE_COMPLETED"}}}`))
		req.Header.Set("Content-Type", "application/json")
		if c.token != "" {
			req.Header.Set(schemas.HeaderNotificationToken, c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s with token %q: %d, want %d", c.path, c.token, resp.StatusCode, c.status)
		}
	}
}

// The local worker stops mid-task (its process restarts): notifications
// meanwhile are refused (503) and retried by the external sender; the
// next worker reads the external task and follows it to the end.
func TestRemoteAgentInPushModeSurvivesARestart(t *testing.T) {
	step := twoStep{release: make(chan struct{})}
	ext := startPushExternal(t, def("steps", step))
	_, b := bustest.New(t, bustest.Options{Config: bus.Config{AckWait: time.Second}})
	base := startEdge(t, b, edge.Config{})
	first := pushRemoteDef(t, "far", ext.url+"/agents/steps", b, base, time.Hour)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- workers.NewRunner(b, first, workers.Options{ShutdownGrace: time.Millisecond}).Run(ctx) }()

	id := submit(t, b, "far", "go")
	waitFor(t, b, id, "the first chunk through the webhook", func(r *schemas.TaskRecord) bool { return len(r.Task.Artifacts) == 1 })
	stop() // the worker goes away; its work is handed back
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(step.release) // the external task finishes while no worker follows it
	extID := waitFor(t, b, id, "the external id", func(r *schemas.TaskRecord) bool { return r.Task.Metadata[workers.MetaRemoteTaskID] != nil }).
		Task.Metadata[workers.MetaRemoteTaskID].(string)
	waitSettled(t, ext.b, extID)

	startRunner(t, b, pushRemoteDef(t, "far", ext.url+"/agents/steps", b, base, 200*time.Millisecond), workers.Options{})
	rec := waitSettled(t, b, id)
	if rec.Task.Status.State != schemas.TaskStateCompleted || len(rec.Task.Artifacts) != 1 || artifactText(rec.Task.Artifacts[0]) != "first second" {
		t.Fatalf("local task after the restart: %s %+v", rec.Task.Status.State, rec.Task.Artifacts)
	}
}

// pushOnlyAgent is an external agent that takes a message, answers with
// its task WORKING, and leaves the rest to the test, which plays its push
// sender with the config it was given.
type pushOnlyAgent struct {
	configs chan schemas.TaskPushNotificationConfig
}

func (p *pushOnlyAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := readRPCCall(w, r)
	if !ok {
		return
	}
	task := schemas.Task{ID: "ext-1", ContextID: "ctx-1", Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}
	var result any = task
	switch req.Method {
	case "SendMessage":
		var sm schemas.SendMessageRequest
		if err := json.Unmarshal(req.Params, &sm); err != nil || sm.Configuration == nil || sm.Configuration.TaskPushNotificationConfig == nil {
			http.Error(w, "no push config", http.StatusBadRequest)
			return
		}
		p.configs <- *sm.Configuration.TaskPushNotificationConfig
		result = schemas.SendMessageResponse{Task: &task}
	case "GetTask":
	case "CancelTask":
		task.Status.State = schemas.TaskStateCanceled
		result = task
	default:
		http.Error(w, "unexpected "+req.Method, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
}

// A notification is answered as taken only once what it says is in the
// local task: the external sender forgets what it delivered, so a chunk
// acknowledged before it was stored would be lost with the worker.
func TestRemotePushNotificationIsTakenOnceStored(t *testing.T) {
	agent := &pushOnlyAgent{configs: make(chan schemas.TaskPushNotificationConfig, 1)}
	ts := httptest.NewServer(agent)
	t.Cleanup(ts.Close)
	_, b := bustest.New(t, bustest.Options{})
	base := startEdge(t, b, edge.Config{})
	startRunner(t, b, pushRemoteDef(t, "far", ts.URL, b, base, time.Hour), workers.Options{})

	id := submit(t, b, "far", "hello")
	cfg := recv(t, agent.configs, "the push config")
	notify := func(body string) {
		t.Helper()
		req, _ := http.NewRequest("POST", cfg.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(schemas.HeaderNotificationToken, cfg.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("notification answered %d", resp.StatusCode)
		}
	}
	const chunks = 20
	for i := range chunks {
		notify(fmt.Sprintf(`{"artifactUpdate":{"taskId":"ext-1","contextId":"ctx-1","artifact":{"artifactId":"out","parts":[{"text":"c%d"}]},"append":%t,"lastChunk":%t}}`, i, i > 0, i == chunks-1))
		rec, _, err := b.GetTask(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Task.Artifacts) != 1 || len(rec.Task.Artifacts[0].Parts) != i+1 {
			t.Fatalf("chunk %d was taken before it was stored: artifacts %+v", i, rec.Task.Artifacts)
		}
		if rec.Task.Metadata[workers.MetaRemoteTaskID] != "ext-1" {
			t.Fatalf("the external task's id is not stored: %v", rec.Task.Metadata)
		}
	}
	notify(`{"statusUpdate":{"taskId":"ext-1","contextId":"ctx-1","status":{"state":"TASK_STATE_COMPLETED"}}}`)
	rec, _, err := b.GetTask(context.Background(), id)
	if err != nil || rec.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("after the last notification: %v %v", rec.Task.Status.State, err)
	}
}
