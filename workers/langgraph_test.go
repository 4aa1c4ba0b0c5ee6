package workers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// fakeLangGraph is a LangGraph Platform deployment as its API reference
// and streaming guides print it: POST /threads answers a thread
// ({"thread_id", "created_at", "metadata", "status": "idle", ...}); POST
// /threads/{id}/runs/stream answers SSE with event "metadata" ({"run_id"}),
// "messages" ([AIMessageChunk, metadata] with stream_mode messages-tuple)
// and "values" (the state); a graph that interrupts puts __interrupt__ in
// the state, and a run with command.resume continues it.
type fakeLangGraph struct {
	mu     sync.Mutex
	runs   []map[string]any
	thread int
	copied []string // the threads copied (POST /threads/{id}/copy)
}

func (f *fakeLangGraph) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Api-Key") != "lg-key" {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"detail":"Invalid API key"}`))
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	switch {
	case r.URL.Path == "/threads" || strings.HasSuffix(r.URL.Path, "/copy"):
		f.mu.Lock()
		if from, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/threads/"), "/copy"); ok {
			f.copied = append(f.copied, from)
		}
		f.thread++
		id := fmt.Sprintf("e1431c95-e241-4d1d-a252-27eceb1e5c%02d", f.thread)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"thread_id":%q,"created_at":"2024-06-21T15:48:59.808924+00:00","updated_at":"2024-06-21T15:48:59.808924+00:00","metadata":{},"status":"idle","config":{},"values":null}`, id)
	case strings.HasSuffix(r.URL.Path, "/runs/stream"):
		body["path"] = r.URL.Path
		f.mu.Lock()
		f.runs = append(f.runs, body)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(name, data string) {
			_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
			w.(http.Flusher).Flush()
		}
		ev("metadata", `{"run_id":"1ef301a5-b867-67de-9e9e-a32e53c5b1f8","attempt":1}`)
		input, _ := body["input"].(map[string]any)
		msgs, _ := input["messages"].([]any)
		question := ""
		if len(msgs) > 0 {
			question, _ = msgs[0].(map[string]any)["content"].(string)
		}
		if question == "book a flight" {
			ev("values", `{"messages":[{"content":"book a flight","type":"human","id":"1"}],"__interrupt__":[{"value":"Which city?","id":"i1"}]}`)
			return
		}
		reply := "The weather in SF is sunny."
		if cmd, ok := body["command"].(map[string]any); ok {
			reply = fmt.Sprintf("Booked a flight to %v.", cmd["resume"])
		}
		for _, tok := range strings.SplitAfter(reply, " ") {
			b, _ := json.Marshal([]any{map[string]any{"content": tok, "additional_kwargs": map[string]any{}, "type": "AIMessageChunk", "id": "run-abc"},
				map[string]any{"langgraph_step": 1, "langgraph_node": "agent"}})
			ev("messages", string(b))
		}
		ev("values", `{"messages":[{"content":"q","type":"human","id":"1"},{"content":`+fmt.Sprintf("%q", reply)+`,"type":"ai","id":"run-abc"}]}`)
	case strings.HasSuffix(r.URL.Path, "/runs/wait"):
		f.mu.Lock()
		f.runs = append(f.runs, body)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"messages":[{"content":"q","type":"human","id":"1"},{"content":"Waited for it.","type":"ai","id":"run-w"}]}`))
	default:
		http.NotFound(w, r)
	}
}

// A LangGraph assistant as an agent: a thread per task, the AI tokens
// streamed in as artifact chunks; an interrupt asks for input, and the
// answer resumes the same thread.
func TestLangGraphAgentStreamsAndResumes(t *testing.T) {
	fake := &fakeLangGraph{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, def("graph", workers.LangGraph{URL: srv.URL, Assistant: "agent",
		Header: func() (http.Header, error) { return http.Header{"X-Api-Key": {"lg-key"}}, nil }}), workers.Options{})

	rec := waitSettled(t, b, submit(t, b, "graph", "what's the weather in sf"))
	if rec.Task.Status.State != schemas.TaskStateCompleted || artifactText(rec.Task.Artifacts[0]) != "The weather in SF is sunny." {
		t.Fatalf("task: %s %+v", rec.Task.Status.State, rec.Task.Artifacts)
	}
	if rec.Task.Metadata[workers.MetaLangGraphThread] == nil {
		t.Fatalf("no thread in %v", rec.Task.Metadata)
	}
	chunks := 0
	for _, u := range readAll(t, b, rec.Task.ID) {
		if u.Artifact != nil {
			chunks++
		}
	}
	if chunks < 3 {
		t.Fatalf("%d artifact events: the answer was not streamed", chunks)
	}

	id := submit(t, b, "graph", "book a flight")
	rec = waitSettled(t, b, id)
	if rec.Task.Status.State != schemas.TaskStateInputRequired || rec.Task.Status.Message.Text() != "Which city?" {
		t.Fatalf("interrupt: %s %v", rec.Task.Status.State, rec.Task.Status.Message)
	}
	thread := rec.Task.Metadata[workers.MetaLangGraphThread]
	continueTask(t, b, "graph", id, "Paris")
	rec = waitSettled(t, b, id)
	if rec.Task.Status.State != schemas.TaskStateCompleted || artifactText(rec.Task.Artifacts[0]) != "Booked a flight to Paris." || rec.Task.Metadata[workers.MetaLangGraphThread] != thread {
		t.Fatalf("resumed: %s %q %v", rec.Task.Status.State, artifactText(rec.Task.Artifacts[0]), rec.Task.Metadata)
	}
	fake.mu.Lock()
	last := fake.runs[len(fake.runs)-1]
	fake.mu.Unlock()
	if last["assistant_id"] != "agent" || last["command"] == nil {
		t.Fatalf("the resuming run: %v", last)
	}

	// A new task referring to that one runs on a copy of its thread.
	rec = waitSettled(t, b, submitAs(t, b, "graph", "", "what's the weather in paris", id))
	own := rec.Task.Metadata[workers.MetaLangGraphThread]
	if rec.Task.Status.State != schemas.TaskStateCompleted || own == nil || own == thread {
		t.Fatalf("referring task: %s, thread %v (the referred task's is %v)", rec.Task.Status.State, own, thread)
	}
	fake.mu.Lock()
	last, copied := fake.runs[len(fake.runs)-1], slices.Clone(fake.copied)
	fake.mu.Unlock()
	if !slices.Equal(copied, []string{thread.(string)}) || last["path"] != "/threads/"+own.(string)+"/runs/stream" || last["command"] != nil {
		t.Fatalf("the referring task copied %v and ran %v", copied, last)
	}
}

// With Wait the run is one POST /threads/{id}/runs/wait: the final
// state's last AI message is the answer.
func TestLangGraphAgentWaits(t *testing.T) {
	fake := &fakeLangGraph{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, def("graph", workers.LangGraph{URL: srv.URL, Assistant: "agent", Wait: true,
		Header: func() (http.Header, error) { return http.Header{"X-Api-Key": {"lg-key"}}, nil }}), workers.Options{})
	rec := waitSettled(t, b, submit(t, b, "graph", "hello"))
	if rec.Task.Status.State != schemas.TaskStateCompleted || artifactText(rec.Task.Artifacts[0]) != "Waited for it." {
		t.Fatalf("task: %s %+v", rec.Task.Status.State, rec.Task.Artifacts)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.runs) != 1 || fake.runs[0]["stream_mode"] != nil {
		t.Fatalf("runs: %v", fake.runs)
	}
}
