package mcpbridge

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2abus/a2abus/schemas"
)

// A task's stream folds into the task a client would read: artifacts
// replaced or appended by id, the status as it last was.
func TestFoldFollowsTheStream(t *testing.T) {
	task := &schemas.Task{ID: "t", Status: schemas.TaskStatus{State: schemas.TaskStateSubmitted}}
	evs := []*schemas.StreamResponse{
		{Task: task},
		{StatusUpdate: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateWorking}}},
		{ArtifactUpdate: &schemas.TaskArtifactUpdateEvent{Artifact: schemas.Artifact{ArtifactID: "a", Parts: []schemas.Part{schemas.TextPart("one ")}}}},
		{ArtifactUpdate: &schemas.TaskArtifactUpdateEvent{Append: true, Artifact: schemas.Artifact{ArtifactID: "a", Parts: []schemas.Part{schemas.TextPart("two")}}}},
		{StatusUpdate: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateCompleted}}},
	}
	var got *schemas.Task
	for _, ev := range evs {
		got, _ = fold(got, ev)
	}
	if got.Status.State != schemas.TaskStateCompleted || len(got.Artifacts) != 1 || len(got.Artifacts[0].Parts) != 2 {
		t.Fatalf("folded %+v", got)
	}
}

// How a task reads as a tool result: its parts as content, a question
// with how to answer it, a failure as an error result.
func TestTaskResults(t *testing.T) {
	data := json.RawMessage(`{"k":1}`)
	url := "https://files.example/r.pdf"
	done := &schemas.Task{ID: "t1", Status: schemas.TaskStatus{State: schemas.TaskStateCompleted}, Artifacts: []schemas.Artifact{{ArtifactID: "a", Parts: []schemas.Part{
		schemas.TextPart("hello"), {Data: data}, {URL: &url, Filename: "r.pdf", MediaType: "application/pdf"}, {Raw: []byte{1, 2}, MediaType: "image/png"}}}}}
	res, out := taskResult("echo", done)
	if res.IsError || out.State != "COMPLETED" || len(res.Content) != 4 {
		t.Fatalf("completed: %+v %+v", res, out)
	}
	if _, ok := res.Content[2].(*sdk.ResourceLink); !ok {
		t.Errorf("a file by URL is %T", res.Content[2])
	}
	if _, ok := res.Content[3].(*sdk.ImageContent); !ok {
		t.Errorf("an image is %T", res.Content[3])
	}
	msg := &schemas.Message{Parts: []schemas.Part{schemas.TextPart("Which city?")}}
	res, out = taskResult("echo", &schemas.Task{ID: "t2", Status: schemas.TaskStatus{State: schemas.TaskStateInputRequired, Message: msg}})
	if res.IsError || out.Question != "Which city?" || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, `taskId "t2"`) {
		t.Fatalf("input required: %+v %+v", res, out)
	}
	fail := &schemas.Message{Parts: []schemas.Part{schemas.TextPart("no luck")}}
	res, _ = taskResult("echo", &schemas.Task{ID: "t3", Status: schemas.TaskStatus{State: schemas.TaskStateFailed, Message: fail}})
	if !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "no luck") {
		t.Fatalf("failed: %+v", res)
	}
	if ToolName("Not Valid") != "" || ToolName("echo") != "a2a_echo" {
		t.Error("tool names")
	}
}

// A server that cannot be reached is said so without its URL's secrets:
// the error goes to the registry, logs and tasks' status.
func TestDialErrorKeepsTheURLsSecrets(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Dial(ctx, ServerConfig{URL: "http://" + addr + "/mcp?api_key=SECRET", HTTP: &http.Client{}}, "test")
	if err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("dial error %v", err)
	}
}
