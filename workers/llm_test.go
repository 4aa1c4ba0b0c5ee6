package workers_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// openAIFixture is a chat-completions stream as the OpenAI API reference
// prints its streaming example ("The chat completion chunk object":
// chunks with delta content, a finish_reason chunk, the usage-only chunk
// stream_options.include_usage adds, then [DONE]).
func openAIFixture(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/openai-chat-stream.txt")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeOpenAI is a chat-completions server: it checks what the agent sends
// and answers the fixture, streamed, or (stream false) one completion.
func fakeOpenAI(t *testing.T, check func(body map[string]any, h http.Header) (int, string)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		if status, msg := check(body, r.Header); status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error":{"message":"` + msg + `","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, part := range strings.SplitAfter(string(openAIFixture(t)), "\n\n") {
			_, _ = w.Write([]byte(part))
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// An OpenAI-compatible endpoint as an agent: the system prompt and the
// task's history go as the conversation, the streamed tokens become
// artifact chunks, the usage goes into the task's metadata; a refused key
// fails the task with the provider's message.
func TestLLMAgentStreamsAChatCompletion(t *testing.T) {
	var mu sync.Mutex
	var got map[string]any
	srv := fakeOpenAI(t, func(body map[string]any, h http.Header) (int, string) {
		if h.Get("Authorization") != "Bearer sk-test" {
			return http.StatusUnauthorized, "Incorrect API key provided"
		}
		mu.Lock()
		got = body
		mu.Unlock()
		return 0, ""
	})
	_, b := bustest.New(t, bustest.Options{})
	var key atomic.Value
	key.Store("sk-test")
	startRunner(t, b, def("chat", workers.LLM{BaseURL: srv.URL + "/v1", Model: "gpt-4o-mini", System: "You are terse.",
		APIKey: func() (string, error) { return key.Load().(string), nil }}), workers.Options{})
	rec := waitSettled(t, b, submit(t, b, "chat", "Hi there"))
	if rec.Task.Status.State != schemas.TaskStateCompleted || len(rec.Task.Artifacts) != 1 || artifactText(rec.Task.Artifacts[0]) != "Hello! How can I help?" {
		t.Fatalf("task: %s %+v", rec.Task.Status.State, rec.Task.Artifacts)
	}
	usage, _ := rec.Task.Metadata[workers.MetaLLMUsage].(map[string]any)
	if usage["total_tokens"] != float64(21) {
		t.Fatalf("usage in metadata: %v", rec.Task.Metadata)
	}
	mu.Lock()
	req := got
	mu.Unlock()
	msgs, _ := req["messages"].([]any)
	if req["model"] != "gpt-4o-mini" || req["stream"] != true || len(msgs) != 2 {
		t.Fatalf("request: %v", req)
	}
	if first := msgs[0].(map[string]any); first["role"] != "system" || first["content"] != "You are terse." {
		t.Fatalf("system message: %v", first)
	}
	if last := msgs[1].(map[string]any); last["role"] != "user" || last["content"] != "Hi there" {
		t.Fatalf("user message: %v", last)
	}
	// The chunks were stored one by one, as they came.
	chunks := 0
	for _, u := range readAll(t, b, rec.Task.ID) {
		if u.Artifact != nil {
			chunks++
		}
	}
	if chunks < 3 {
		t.Fatalf("%d artifact events: the answer was not streamed", chunks)
	}

	// A new task that refers to the last carries the conversation on:
	// each earlier message and answer, in order, before its own.
	second := waitSettled(t, b, submitAs(t, b, "chat", "", "And then?", rec.Task.ID))
	third := waitSettled(t, b, submitAs(t, b, "chat", "", "Last one", second.Task.ID))
	if third.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("third task: %s", third.Task.Status.State)
	}
	mu.Lock()
	req = got
	mu.Unlock()
	var turns []string
	for _, m := range req["messages"].([]any) {
		m := m.(map[string]any)
		turns = append(turns, m["role"].(string)+": "+m["content"].(string))
	}
	want := []string{"system: You are terse.", "user: Hi there", "assistant: Hello! How can I help?",
		"user: And then?", "assistant: Hello! How can I help?", "user: Last one"}
	if strings.Join(turns, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the third task's conversation:\n%s\nwant:\n%s", strings.Join(turns, "\n"), strings.Join(want, "\n"))
	}

	key.Store("sk-wrong")
	rec = waitSettled(t, b, submit(t, b, "chat", "Hi again"))
	if rec.Task.Status.State != schemas.TaskStateFailed || !strings.Contains(rec.Task.Status.Message.Text(), "Incorrect API key") || !strings.Contains(rec.Task.Status.Message.Text(), "401") {
		t.Fatalf("a refused key: %s %v", rec.Task.Status.State, rec.Task.Status.Message)
	}
}

// A provider that ends its answer a moment after [DONE] keeps its
// connection for the next completion: the agent reads that end after
// finishing the task, instead of closing the answer before it (which
// makes net/http drop the connection and the next call dial and shake
// hands again). Completions one after another then need at most two
// connections (net/http returns one to its pool a moment after the end
// was read), not one each.
func TestLLMAgentKeepsTheProviderConnection(t *testing.T) {
	released := make(chan struct{}, 8)
	defer workers.OnConnectionReleased(func() { released <- struct{}{} })()
	defer workers.SetStreamTailWait(time.Minute)() // the test ends each answer
	end := make(chan struct{})
	var dialed atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, part := range strings.SplitAfter(string(openAIFixture(t)), "\n\n") {
			_, _ = w.Write([]byte(part))
			w.(http.Flusher).Flush()
		}
		<-end
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, def("chat", workers.LLM{BaseURL: srv.URL + "/v1", Model: "gpt-4o-mini"}), workers.Options{})
	const tasks = 6
	for i := range tasks {
		// The task is answered before the provider's answer ends.
		rec := waitSettled(t, b, submit(t, b, "chat", "Hi there"))
		if rec.Task.Status.State != schemas.TaskStateCompleted || artifactText(rec.Task.Artifacts[0]) != "Hello! How can I help?" {
			t.Fatalf("task %d: %s %+v", i, rec.Task.Status.State, rec.Task.Artifacts)
		}
		end <- struct{}{}
		<-released
	}
	if n := dialed.Load(); n > 2 {
		t.Fatalf("%d connections for %d completions: the connection was not kept", n, tasks)
	}
}
