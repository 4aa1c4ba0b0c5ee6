package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The baseline must do the work a2abus's echo does, or the comparison
// flatters one side: a stored task, COMPLETED, with the text echoed as the
// artifact "echo-<task id>".
func TestBaselineEchoCompletesATask(t *testing.T) {
	srv := httptest.NewServer(nil)
	srv.Config.Handler = newHandler(srv.URL, "")
	defer srv.Close()

	send := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"hello baseline"}]}}}`
	var out struct {
		Result struct {
			Task struct {
				ID        string                 `json:"id"`
				Status    struct{ State string } `json:"status"`
				Artifacts []struct {
					ArtifactID string                  `json:"artifactId"`
					Parts      []struct{ Text string } `json:"parts"`
				} `json:"artifacts"`
			} `json:"task"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	before := completed.Load()
	post(t, srv.URL, send, &out)
	task := out.Result.Task
	if out.Error != nil || task.Status.State != "TASK_STATE_COMPLETED" || len(task.Artifacts) != 1 ||
		task.Artifacts[0].ArtifactID != "echo-"+task.ID || task.Artifacts[0].Parts[0].Text != "hello baseline" {
		t.Fatalf("SendMessage answered %+v (error %s)", out.Result, out.Error)
	}
	// The task is stored: GetTask finds it.
	var got struct {
		Result struct{ ID string } `json:"result"`
	}
	post(t, srv.URL, `{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"`+task.ID+`"}}`, &got)
	if got.Result.ID != task.ID {
		t.Fatalf("GetTask %s: %+v", task.ID, got)
	}
	res, err := http.Get(srv.URL + "/.well-known/agent-card.json")
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("card: %v %v", res, err)
	}
	res.Body.Close()
	// The task is counted where proxy.sh reads how many reached it.
	res, err = http.Get(srv.URL + "/debug/completed")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var n int64
	if _, err := fmt.Fscan(res.Body, &n); err != nil || n != before+1 {
		t.Fatalf("/debug/completed: %d (%v), want %d", n, err, before+1)
	}
}

func post(t *testing.T, url, body string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// Its gRPC binding serves the same handler: the SDK's own gRPC client
// gets a completed echo task, as a2abus's gRPC row of the comparison does.
func TestBaselineServesGRPC(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := newGRPCServer()
	go func() { _ = gs.Serve(l) }()
	defer gs.Stop()
	ctx := context.Background()
	c, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{a2a.NewAgentInterface(l.Addr().String(), a2a.TransportProtocolGRPC)},
		a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("over gRPC"))})
	task, ok := res.(*a2a.Task)
	if err != nil || !ok || task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 || task.Artifacts[0].Parts[0].Text() != "over gRPC" {
		t.Fatalf("SendMessage over gRPC: %+v %v", res, err)
	}
}
