package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// limitsHarness authenticates alice and bob and serves echo and slow (an
// agent that works until canceled) under lim.
func limitsHarness(t *testing.T, lim edge.LimitsConfig) *harness {
	t.Helper()
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{
		{Key: aliceKey, Principal: "alice"}, {Key: bobKey, Principal: "bob"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return newHarness(t, harnessOptions{
		agents: []workers.Definition{workers.EchoDefinition("echo"), {Name: "slow", Agent: newBlocker()}},
		edge:   edge.Config{Auth: a, DefaultAgent: "echo", Limits: lim}})
}

func sendReq(id int, text string, immediately bool) string {
	p := map[string]any{"message": map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}}
	if immediately {
		p["configuration"] = map[string]any{"returnImmediately": true}
	}
	return rpcBody(id, "SendMessage", p)
}

// rateLimited checks an over-the-limit answer: 429 or −31429 with the
// seconds to wait, in the binding's form.
func rateLimited(t *testing.T, what string, status int, h http.Header, body []byte, rpc bool) {
	t.Helper()
	if rpc {
		var r struct {
			Error *struct {
				Code int `json:"code"`
				Data []struct {
					Metadata map[string]string `json:"metadata"`
				} `json:"data"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &r) != nil || r.Error == nil || r.Error.Code != -31429 || len(r.Error.Data) == 0 || r.Error.Data[0].Metadata[schemas.MetaRetryAfter] == "" {
			t.Fatalf("%s: %d %s, want −31429 with %s", what, status, body, schemas.MetaRetryAfter)
		}
		return
	}
	if n, err := strconv.Atoi(h.Get("Retry-After")); status != http.StatusTooManyRequests || err != nil || n < 1 {
		t.Fatalf("%s: %d Retry-After %q %s, want 429 with Retry-After", what, status, h.Get("Retry-After"), body)
	}
}

// A caller over its request rate is refused on every binding, with the
// time to wait; another caller is not affected, and the caller is served
// again once the wait has passed.
func TestRateLimitPerCaller(t *testing.T) {
	h := limitsHarness(t, edge.LimitsConfig{
		Default:    edge.Limits{Rate: 1, Burst: 3},
		Principals: map[string]edge.Limits{"bob": {}},
	})
	for i := range 3 {
		if _, _, b := as(t, aliceKey, "POST", h.url+"/agents/echo", "application/json", sendReq(i, "hi", false)); !bytes.Contains(b, []byte("TASK_STATE_COMPLETED")) {
			t.Fatalf("request %d within the burst: %s", i, b)
		}
	}
	status, hdr, b := as(t, aliceKey, "POST", h.url+"/agents/echo", "application/json", sendReq(4, "hi", false))
	rateLimited(t, "JSON-RPC", status, hdr, b, true)
	status, hdr, b = as(t, aliceKey, "GET", h.url+"/agents/echo/tasks", "", "")
	rateLimited(t, "HTTP+JSON", status, hdr, b, false)
	status, hdr, b = as(t, aliceKey, "POST", h.url+"/a2a/tasks/send", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","text":"hi"}]}}}`)
	rateLimited(t, "the older dialect's route", status, hdr, b, false)
	// Bob has no rate limit of his own.
	for i := range 10 {
		if _, _, b := as(t, bobKey, "POST", h.url+"/agents/echo", "application/json", sendReq(i, "hi", false)); !bytes.Contains(b, []byte("TASK_STATE_COMPLETED")) {
			t.Fatalf("bob's request %d: %s", i, b)
		}
	}
	// One request a second: alice is served again after the wait.
	wait, _ := strconv.Atoi(hdr.Get("Retry-After"))
	time.Sleep(time.Duration(wait) * time.Second) // the rate under test is a rate in time
	if _, _, b := as(t, aliceKey, "POST", h.url+"/agents/echo", "application/json", sendReq(9, "hi", false)); !bytes.Contains(b, []byte("TASK_STATE_COMPLETED")) {
		t.Fatalf("alice after the wait: %s", b)
	}
}

// A caller at its quota of unfinished tasks cannot start another (429 /
// −31429) while its accepted tasks and another caller's go on; when one of
// its tasks finishes it may start one again.
func TestUnfinishedTaskQuota(t *testing.T) {
	h := limitsHarness(t, edge.LimitsConfig{Default: edge.Limits{MaxUnfinished: 2}})
	var ids []string
	for i := range 2 {
		_, _, b := as(t, aliceKey, "POST", h.url+"/agents/slow", "application/json", sendReq(i, "hold", true))
		var r struct {
			Result schemas.SendMessageResponse `json:"result"`
		}
		if json.Unmarshal(b, &r) != nil || r.Result.Task == nil {
			t.Fatalf("task %d: %s", i, b)
		}
		ids = append(ids, r.Result.Task.ID)
	}
	refused := func() (bool, int, http.Header, []byte) {
		status, hdr, b := as(t, aliceKey, "POST", h.url+"/agents/echo/message:send", "application/json", `{"message":{"messageId":"q1","role":"ROLE_USER","parts":[{"text":"one more"}]}}`)
		return status == http.StatusTooManyRequests, status, hdr, b
	}
	// The edge's index follows the store within milliseconds of a write.
	deadline := time.Now().Add(10 * time.Second)
	ok, status, hdr, b := refused()
	for ; !ok && time.Now().Before(deadline); ok, status, hdr, b = refused() {
	}
	rateLimited(t, "a third unfinished task", status, hdr, b, false)
	if _, _, b := as(t, bobKey, "POST", h.url+"/agents/echo", "application/json", sendReq(1, "hi", false)); !bytes.Contains(b, []byte("TASK_STATE_COMPLETED")) {
		t.Fatalf("bob while alice is at her quota: %s", b)
	}
	for _, id := range ids {
		if _, _, b := as(t, aliceKey, "GET", h.url+"/agents/slow/tasks/"+id, "", ""); !bytes.Contains(b, []byte("TASK_STATE_WORKING")) && !bytes.Contains(b, []byte("TASK_STATE_SUBMITTED")) {
			t.Fatalf("an accepted task was affected: %s", b)
		}
	}
	if _, _, b := as(t, aliceKey, "POST", h.url+"/agents/slow/tasks/"+ids[0]+":cancel", "application/json", `{}`); !bytes.Contains(b, []byte("TASK_STATE_CANCELED")) {
		t.Fatalf("cancel: %s", b)
	}
	deadline = time.Now().Add(10 * time.Second)
	for ok, _, _, b = refused(); ok; ok, _, _, b = refused() {
		if time.Now().After(deadline) {
			t.Fatalf("still refused after a task finished: %s", b)
		}
	}
	if !bytes.Contains(b, []byte("TASK_STATE_COMPLETED")) {
		t.Fatalf("after a task finished: %s", b)
	}
}

// An echo of a message whose answer the task record cannot hold ends
// FAILED with the reason, at once: it is not retried, dead-lettered, or
// left WORKING.
func TestOversizedAnswerFailsTheTask(t *testing.T) {
	h := newHarness(t, harnessOptions{bus: bustest.Options{Config: bus.Config{TaskMaxValueSize: 128 << 10}},
		agents: []workers.Definition{workers.EchoDefinition("echo")}})
	big := strings.Repeat("e", 80<<10)
	status, _, b := as(t, "", "POST", h.url+"/agents/echo/message:send", "application/json",
		`{"message":{"messageId":"big-1","role":"ROLE_USER","parts":[{"text":"`+big+`"}]}}`)
	var task schemas.SendMessageResponse
	if status != 200 || json.Unmarshal(b, &task) != nil || task.Task == nil {
		t.Fatalf("%d %.300s", status, b)
	}
	if st := task.Task.Status; st.State != schemas.TaskStateFailed || st.Message == nil || !strings.Contains(st.Message.Text(), "cannot be stored") {
		t.Fatalf("the task: %+v", st)
	}
}

// An answer to a task waiting for input that the task record cannot hold
// is refused as a create is (400 / −32602, naming the size and the bound),
// and the task still waits for input: a smaller answer then completes it.
// (Before, the answer was taken and the task FAILED "the agent's result
// cannot be stored".) So is one that would fit but leave the agent no room
// to answer (the bus keeps 1/256 of TaskMaxValueSize for it).
func TestOversizedAnswerToAskIsRefused(t *testing.T) {
	h := newHarness(t, harnessOptions{bus: bustest.Options{Config: bus.Config{TaskMaxValueSize: 128 << 10}},
		agents: []workers.Definition{workers.EchoDefinition("echo")}})
	send := func(taskID, text string) (int, []byte) {
		t.Helper()
		m := map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
		if taskID != "" {
			m["taskId"] = taskID
		}
		body, _ := json.Marshal(map[string]any{"message": m})
		status, _, b := as(t, "", "POST", h.url+"/agents/echo/message:send", "application/json", string(body))
		return status, b
	}
	status, b := send("", workers.AskCommand+" "+strings.Repeat("q", 60<<10))
	var asked schemas.SendMessageResponse
	if status != 200 || json.Unmarshal(b, &asked) != nil || asked.Task == nil || asked.Task.Status.State != schemas.TaskStateInputRequired {
		t.Fatalf("the ask: %d %.300s", status, b)
	}
	id := asked.Task.ID
	room := 128<<10 - (128<<10)/256 // what a client's message may bring the record to
	refused := func(what string, status int, b []byte) (size int) {
		t.Helper()
		var e struct {
			Error struct {
				Code    int
				Message string
			}
		}
		if status != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error.Message, "more than the limit of "+strconv.Itoa(room)) {
			t.Fatalf("an answer %s: %d %.400s; want 400 naming the limit of %d", what, status, b, room)
		}
		if _, err := fmt.Sscanf(e.Error.Message, "the message would make the task record %d bytes", &size); err != nil {
			t.Fatalf("an answer %s: %q does not say the size", what, e.Error.Message)
		}
		status, _, b = as(t, "", "GET", h.url+"/agents/echo/tasks/"+id, "", "")
		var task schemas.Task
		if status != 200 || json.Unmarshal(b, &task) != nil || task.Status.State != schemas.TaskStateInputRequired {
			t.Fatalf("the task after an answer %s: %d %.300s; want it still INPUT_REQUIRED", what, status, b)
		}
		return size
	}
	const over = 70 << 10
	status, b = send(id, strings.Repeat("a", over))
	rest := refused("past the record bound", status, b) - over // the record but for the answer's text
	// One that fits the bound but would leave the agent less than the
	// room kept for its answer.
	status, b = send(id, strings.Repeat("a", room+256-rest))
	if size := refused("leaving no room to answer", status, b); size <= room || size > 128<<10 {
		t.Fatalf("the answer leaving no room made a record of %d bytes, want one between %d and %d", size, room, 128<<10)
	}
	status, b = send(id, "a short answer")
	var done schemas.SendMessageResponse
	if status != 200 || json.Unmarshal(b, &done) != nil || done.Task == nil || done.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("a short answer: %d %.300s", status, b)
	}
}

// Unfinished tasks cannot fill the store: a caller is held to its bytes
// quota (429), and past 90% of the task bucket every new task is refused
// (503, retryable) instead of accepted and never run.
func TestUnfinishedTasksCannotFillTheStore(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{{Key: aliceKey, Principal: "alice"}, {Key: bobKey, Principal: "bob"}}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{
		bus:    bustest.Options{Config: bus.Config{TaskMaxBytes: 2 << 20}},
		agents: []workers.Definition{{Name: "slow", Agent: newBlocker()}},
		edge: edge.Config{Auth: a, Limits: edge.LimitsConfig{Default: edge.Limits{MaxUnfinishedBytes: 150 << 10},
			Principals: map[string]edge.Limits{"bob": {}}}}})
	big := strings.Repeat("b", 50<<10)
	send := func(key string) (int, http.Header, []byte) {
		return as(t, key, "POST", h.url+"/agents/slow/message:send", "application/json",
			`{"message":{"messageId":"`+schemas.NewID()+`","role":"ROLE_USER","parts":[{"text":"`+big+`"}]},"configuration":{"returnImmediately":true}}`)
	}
	// until refused; the index follows the store within milliseconds
	fill := func(key string, want int) (http.Header, []byte) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			status, hdr, b := send(key)
			if status == want {
				return hdr, b
			}
			if status != http.StatusOK || time.Now().After(deadline) {
				t.Fatalf("want %d: got %d %.200s", want, status, b)
			}
		}
	}
	hdr, b := fill(aliceKey, http.StatusTooManyRequests)
	rateLimited(t, "alice over her bytes quota", http.StatusTooManyRequests, hdr, b, false)
	if !bytes.Contains(b, []byte("bytes")) {
		t.Fatalf("the refusal does not say why: %s", b)
	}
	hdr, b = fill(bobKey, http.StatusServiceUnavailable)
	if !bytes.Contains(b, []byte("task store is nearly full")) || hdr.Get("Retry-After") == "" {
		t.Fatalf("a full store: %s (Retry-After %q)", b, hdr.Get("Retry-After"))
	}
}
