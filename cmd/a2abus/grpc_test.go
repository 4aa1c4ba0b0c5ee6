package main

import (
	"context"
	"encoding/json"
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
// that dials what the card says gets its task done, and the process stops
// cleanly with it.
func TestServeGRPCBinding(t *testing.T) {
	dir := t.TempDir()
	addr, grpcAddr := freeAddr(t), freeAddr(t)
	base := "http://" + addr
	p := startProc(t, "serve", "--listen", addr, "--grpc-listen", grpcAddr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", "off")
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
	p.stop(t)
}
