package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/a2abus/a2abus/edge/grpcbinding/a2apb"
	"github.com/a2abus/a2abus/schemas"
)

// "serve --grpc-listen" serves A2A's gRPC binding: the agent's card
// declares it (the address and the tenant that names the agent), a client
// that dials what the card says gets its task done, a2abus's own client
// commands speak it with --binding grpc (the agent named by the URL's
// path, the default agent without one), and the process stops cleanly
// with it.
func TestServeGRPCBinding(t *testing.T) {
	dir := t.TempDir()
	addr, grpcAddr := freeAddr(t), freeAddr(t)
	base := "http://" + addr
	cfg := filepath.Join(dir, "a2abus.json")
	writeFile(t, cfg, `{"agents":[{"name":"echo"},{"name":"other","kind":"echo"}]}`)
	p := startProc(t, "serve", "--listen", addr, "--grpc-listen", grpcAddr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", "off", "--config", cfg)
	waitReady(t, p, base)

	resp, err := http.Get(base + "/agents/echo/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	var card schemas.AgentCard
	err = json.NewDecoder(resp.Body).Decode(&card)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var grpcIf *schemas.AgentInterface
	for i, in := range card.SupportedInterfaces {
		if in.ProtocolBinding == schemas.BindingGRPC {
			grpcIf = &card.SupportedInterfaces[i]
		}
	}
	if grpcIf == nil || grpcIf.URL != grpcAddr || grpcIf.Tenant != "agents/echo" || grpcIf.ProtocolVersion != schemas.ProtocolVersion {
		t.Fatalf("the card's gRPC interface: %+v (interfaces %+v)", grpcIf, card.SupportedInterfaces)
	}

	conn, err := grpc.NewClient(grpcIf.URL, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a2apb.NewA2AServiceClient(conn).SendMessage(ctx, &a2apb.SendMessageRequest{Tenant: grpcIf.Tenant,
		Message: &a2apb.Message{MessageId: "m-grpc", Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "over gRPC"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if task := res.GetTask(); task.GetStatus().GetState() != a2apb.TaskState_TASK_STATE_COMPLETED ||
		!strings.Contains(task.GetArtifacts()[0].GetParts()[0].GetText(), "over gRPC") {
		t.Fatalf("send over gRPC: %v", res)
	}

	// The client commands over gRPC.
	echo := "http://" + grpcAddr + "/agents/echo"
	out := mustCLI(t, "send", "--binding", "grpc", echo, "hello over gRPC")
	wantLines(t, out, "task ", "  context  ", "  status   echoed", "  artifact echo: hello over gRPC")
	done := cliJSON[schemas.SendMessageResponse](t, "send", "--binding", "grpc", grpcAddr, "the default agent, as the card writes the address")
	if done.Task == nil || done.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("send to %s: %+v", grpcAddr, done)
	}
	if got := cliJSON[schemas.Task](t, "get", "--binding", "grpc", grpcAddr, done.Task.ID); got.ID != done.Task.ID {
		t.Fatalf("get over gRPC: %+v", got)
	}
	// The path names the agent: another agent does not have echo's task.
	_, _, err = cli(t, "get", "--binding", "grpc", "http://"+grpcAddr+"/agents/other", done.Task.ID)
	wantCLIError(t, err, "TASK_NOT_FOUND")
	evs, err := cliEvents(t, "send", "--binding", "grpc", echo, "streamed over gRPC", "--stream")
	if err != nil || kinds(evs) == "" || !strings.HasSuffix(kinds(evs), "TASK_STATE_COMPLETED") || evs[0].Task == nil {
		t.Fatalf("send --stream over gRPC: %s (%v)", kinds(evs), err)
	}
	// A question: the hint to answer it keeps --binding grpc, and the
	// answer over gRPC completes the task.
	out = mustCLI(t, "send", "--binding", "grpc", echo, "/ask")
	id := strings.Fields(out)[1]
	if !strings.Contains(out, "  reply    a2abus send "+echo+" TEXT --task "+id+" --binding grpc") {
		t.Fatalf("send /ask over gRPC:\n%s", out)
	}
	if out := mustCLI(t, "send", "--binding", "grpc", echo, "the answer", "--task", id); !strings.Contains(out, "task "+id+"  TASK_STATE_COMPLETED") {
		t.Fatalf("the answer over gRPC:\n%s", out)
	}
	if list := cliJSON[schemas.ListTasksResponse](t, "tasks", "--binding", "grpc", echo); len(list.Tasks) < 3 {
		t.Fatalf("tasks over gRPC: %+v", list)
	}
	_, _, err = cli(t, "get", "--binding", "grpc", echo, schemas.NewID())
	wantCLIError(t, err, "TASK_NOT_FOUND")
	_, _, err = cli(t, "send", "--binding", "grpc", "ftp://"+grpcAddr, "hi")
	if err == nil || errors.As(err, new(*cliError)) {
		t.Fatalf("a URL that is no gRPC address: %v, want a usage error", err)
	}
	p.stop(t)
}
