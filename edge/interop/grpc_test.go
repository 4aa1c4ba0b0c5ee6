package interop

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/a2abus/a2abus/bus/bustest/freeaddr"
	"github.com/a2abus/a2abus/edge/interop/internal/a2abusbin"
)

// The official Go SDK's gRPC client against "a2abus serve --grpc-listen"
// (a real process: the SDK links its own copy of the lf.a2a.v1 messages,
// which cannot share a binary with a2abus's): it finds the gRPC interface
// in the card, and sends, streams, gets, lists, cancels and subscribes
// through it; A2A's errors come back as the SDK's errors.
func TestOfficialGoClientOverGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a2abus")
	}
	bin := a2abusbin.Build(t)
	addr, grpcAddr := freeaddr.Addr(t), freeaddr.Addr(t)
	base := "http://" + addr
	cmd := exec.Command(bin, "serve", "--listen", addr, "--grpc-listen", grpcAddr, "--nats-listen", "off",
		"--data-dir", filepath.Join(t.TempDir(), "data"))
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("a2abus output:\n%s", out)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var card *a2a.AgentCard
	for {
		var err error
		if card, err = agentcard.NewResolver(nil).Resolve(ctx, base+"/agents/echo"); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the card never came: %v", err)
		case <-time.After(50 * time.Millisecond): // waiting for the process to listen
		}
	}
	var pick *a2a.AgentInterface
	for _, in := range card.SupportedInterfaces {
		if in.ProtocolBinding == a2a.TransportProtocolGRPC {
			pick = in
		}
	}
	if pick == nil {
		t.Fatalf("the card declares no gRPC interface: %+v", card.SupportedInterfaces)
	}
	c, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{pick},
		a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()

	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello over gRPC"))})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 || text(task.Artifacts[0].Parts) != "hello over gRPC" {
		t.Fatalf("blocking send: %#v", res)
	}
	if got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("GetTask: %v %v", got, err)
	}

	kinds := eventKinds(t, c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("one two three"))}))
	if len(kinds) < 3 || kinds[0] != "task" || kinds[len(kinds)-1] != "status:"+string(a2a.TaskStateCompleted) {
		t.Fatalf("stream events: %v", kinds)
	}

	list, err := c.ListTasks(ctx, &a2a.ListTasksRequest{})
	if err != nil || len(list.Tasks) != 2 {
		t.Fatalf("ListTasks: %v (%v)", list, err)
	}

	// A task that waits for input: subscribed to, then canceled.
	res, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("/ask"))})
	if err != nil {
		t.Fatal(err)
	}
	asking := res.(*a2a.Task)
	if asking.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("/ask: %s", asking.Status.State)
	}
	seen := make(chan a2a.TaskState, 16)
	subDone := make(chan error, 1)
	subscribed := make(chan struct{})
	go func() {
		var once bool
		for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: asking.ID}) {
			if err != nil {
				subDone <- err
				return
			}
			if !once {
				once = true
				close(subscribed)
			}
			if u, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
				seen <- u.Status.State
			}
		}
		subDone <- nil
	}()
	select {
	case <-subscribed:
	case err := <-subDone:
		t.Fatalf("SubscribeToTask ended at once: %v", err)
	}
	if canceled, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: asking.ID}); err != nil || canceled.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask: %v %v", canceled, err)
	}
	// The subscription ends with the cancel: every state it saw is in
	// seen by then, CANCELED the last.
	select {
	case err := <-subDone:
		if err != nil {
			t.Fatalf("the subscription ended with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the subscription never ended")
	}
	close(seen)
	var last a2a.TaskState
	for st := range seen {
		last = st
	}
	if last != a2a.TaskStateCanceled {
		t.Fatalf("the subscription's last state is %q, want canceled", last)
	}

	if _, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.NewTaskID()}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("an unknown task: %v", err)
	}
	if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Fatalf("canceling a completed task: %v", err)
	}
}
