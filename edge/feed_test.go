package edge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// feedReader is one open task feed: the changes it streams, as they come.
type feedReader struct {
	// events are the raw events, to check what they hold.
	events  chan string
	changes chan schemas.TaskChange
	ended   chan string // the stream's end: "" when closed, else its error event
}

// watchTasks opens a task feed with key through the front door.
func watchTasks(t *testing.T, h *harness, key, agent string, params string) *feedReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	body := `{"jsonrpc":"2.0","id":3,"method":"` + schemas.MethodWatchTasks + `","params":` + params + `}`
	req, _ := http.NewRequestWithContext(ctx, "POST", h.url+"/agents/"+agent, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%s watching: HTTP %d %s", key, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	f := &feedReader{events: make(chan string, 256), changes: make(chan schemas.TaskChange, 64), ended: make(chan string, 1)}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			select {
			case f.events <- data:
			default:
			}
			var ev struct {
				Result *schemas.TaskChangeEvent `json:"result"`
				Error  json.RawMessage          `json:"error"`
			}
			if json.Unmarshal([]byte(data), &ev) != nil || ev.Result == nil || ev.Result.TaskChange == nil {
				f.ended <- data
				return
			}
			f.changes <- *ev.Result.TaskChange
		}
		f.ended <- ""
	}()
	return f
}

// until reads changes until one of task last has state, and returns every
// task seen with its newest state.
func (f *feedReader) until(t *testing.T, who, last string, state schemas.TaskState) map[string]schemas.TaskChange {
	t.Helper()
	seen := map[string]schemas.TaskChange{}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case c := <-f.changes:
			seen[c.TaskID] = c
			if c.TaskID == last && c.State == state {
				return seen
			}
		case end := <-f.ended:
			t.Fatalf("%s: the feed ended (%s) before task %s was %s; saw %v", who, end, last, state, seen)
		case <-deadline:
			t.Fatalf("%s: task %s never %s on the feed; saw %v", who, last, state, seen)
		}
	}
}

// The task feed carries what its caller may read: its own tasks, every
// task of its tenant for an admin, none of another principal's and none
// of another tenant's; a summary (id, context, agent, state, time), never
// a message. It enters by the front door: without credentials it is
// refused.
func TestTaskFeedShowsEachCallerWhatItMaySee(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{
		{Key: aliceKey, Principal: "alice", Tenants: []string{"t1", "t2"}},
		{Key: bobKey, Principal: "bob", Tenants: []string{"t1"}},
		{Key: opsKey, Principal: "ops", Admin: true, Tenants: []string{"t1"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, edge: edge.Config{Auth: a, DefaultAgent: "echo"}})

	if r := h.post(h.url, "/agents/echo", `{"jsonrpc":"2.0","id":1,"method":"`+schemas.MethodWatchTasks+`","params":{}}`, nil); r.Error == nil || r.Error.Code != schemas.ErrUnauthenticated.Code {
		t.Fatalf("watching without credentials: %+v", r)
	}
	alice := watchTasks(t, h, aliceKey, "echo", `{"allAgents":true}`)
	bob := watchTasks(t, h, bobKey, "echo", `{}`)
	ops := watchTasks(t, h, opsKey, "echo", `{}`)

	send := func(key, text, tenant string) string {
		t.Helper()
		params := map[string]any{"message": userMessage(text)}
		if tenant != "" {
			params["tenant"] = tenant
		}
		r := h.post(h.url, "/agents/echo", rpcBody(1, "SendMessage", params), map[string]string{"X-API-Key": key, "A2A-Version": "1.0"})
		return mustResult[schemas.SendMessageResponse](t, r).Task.ID
	}
	aliceT1 := send(aliceKey, "secret words of alice", "t1")
	bobT1 := send(bobKey, "bob's", "")
	aliceT2 := send(aliceKey, "alice in t2", "t2")
	opsT1 := send(opsKey, "the admin's own", "")

	seen := ops.until(t, "the admin", opsT1, schemas.TaskStateCompleted)
	for _, id := range []string{aliceT1, bobT1} {
		if seen[id].State != schemas.TaskStateCompleted || seen[id].Agent != "echo" || seen[id].ContextID == "" || seen[id].Timestamp.IsZero() {
			t.Errorf("the admin's feed: task %s as %+v, want it COMPLETED with its agent, context and time", id, seen[id])
		}
	}
	if _, ok := seen[aliceT2]; ok {
		t.Errorf("the admin of t1 saw alice's task of t2")
	}
	for len(ops.events) > 0 {
		if ev := <-ops.events; strings.Contains(ev, "secret") || strings.Contains(ev, "alice") {
			t.Errorf("a feed event carries a message or an owner: %s", ev)
		}
	}
	// Each caller's own last task ends what it is shown: its feed has
	// had everything before.
	bobLast := send(bobKey, "bob again", "")
	seen = bob.until(t, "bob", bobLast, schemas.TaskStateCompleted)
	for _, id := range []string{aliceT1, aliceT2, opsT1} {
		if _, ok := seen[id]; ok {
			t.Errorf("bob saw task %s, not his", id)
		}
	}
	if _, ok := seen[bobT1]; !ok {
		t.Errorf("bob did not see his own task")
	}
	aliceLast := send(aliceKey, "alice again", "t1")
	seen = alice.until(t, "alice", aliceLast, schemas.TaskStateCompleted)
	if _, ok := seen[aliceT1]; !ok {
		t.Errorf("alice did not see her task")
	}
	for _, id := range []string{bobT1, opsT1, aliceT2, bobLast} {
		if _, ok := seen[id]; ok {
			t.Errorf("alice, watching in t1, saw task %s", id)
		}
	}
}
