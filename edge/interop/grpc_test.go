package interop

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	addr, grpcAddr := freeaddr.Addr(t), freeaddr.Addr(t)
	base := "http://" + addr
	a2abusbin.Start(t, nil, "serve", "--listen", addr, "--grpc-listen", grpcAddr, "--nats-listen", "off",
		"--data-dir", filepath.Join(t.TempDir(), "data"))
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

// The official Go SDK's gRPC client authenticates to a2abus over gRPC as
// its AuthInterceptor does over HTTP (an API key for alice, a JWT bearer
// token for bob, in metadata), is isolated there as everywhere, and
// resumes a stream cut mid-way on a second edge: it sends metadata
// last-event-id with the generation of the last event it got (the
// snapshot is generation 1 and each event one more, A2A 1.1), and the
// events before the cut and after the resume are the task's log, none
// lost and none twice.
func TestOfficialGoClientOverGRPCAuthenticatesAndResumesElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a2abus twice")
	}
	const apiKey = "interop-grpc-api-key-0123456789"
	jwksURL, token := jwtIssuer(t, "bob")

	data := filepath.Join(t.TempDir(), "data")
	// The JWKS server is on loopback, which a2abus reaches only when told.
	config := filepath.Join(t.TempDir(), "a2abus.json")
	if err := os.WriteFile(config, []byte(`{"outbound": {"allowLoopback": true}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The SDK's resolver reads an authenticating card only in the form
	// a2a-go v2.4.0 knows (a2a-go#430; TestOfficialGoClientAuthenticates).
	authFlags := []string{"--config", config, "--jwt-jwks-url", jwksURL, "--jwt-issuer", "interop-issuer", "--jwt-audience", "a2abus", "--card-scopes-as-arrays", "true"}
	env := append(os.Environ(), "A2ABUS_API_KEYS="+apiKey+"=alice")
	start := func(args ...string) { a2abusbin.Start(t, env, append(args, authFlags...)...) }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ready := func(base string) {
		for {
			resp, err := http.Get(base + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s never became ready", base)
			case <-time.After(50 * time.Millisecond): // waiting for another process
			}
		}
	}
	httpA, grpcA, natsAddr := freeaddr.Addr(t), freeaddr.Addr(t), freeaddr.Addr(t)
	start("serve", "--listen", httpA, "--grpc-listen", grpcA, "--nats-listen", natsAddr, "--data-dir", data)
	ready("http://" + httpA)
	httpB, grpcB := freeaddr.Addr(t), freeaddr.Addr(t)
	start("edge", "--nats", "nats://"+natsAddr, "--nats-creds", filepath.Join(data, "nats-credentials", "edge"),
		"--listen", httpB, "--grpc-listen", grpcB, "--default-agent", "echo")
	ready("http://" + httpB)

	store := a2aclient.NewInMemoryCredentialsStore()
	store.Set("alice", "apiKey", a2aclient.AuthCredential(apiKey))
	store.Set("bob", "bearer", a2aclient.AuthCredential(token))
	// clientOf is a gRPC-only client of the edge at base, from its card.
	clientOf := func(base string) *a2aclient.Client {
		card, err := agentcard.NewResolver(nil).Resolve(ctx, base+"/agents/echo")
		if err != nil {
			t.Fatalf("the SDK's resolver at %s: %v", base, err)
		}
		one := *card
		one.SupportedInterfaces = nil
		for _, in := range card.SupportedInterfaces {
			if in.ProtocolBinding == a2a.TransportProtocolGRPC {
				one.SupportedInterfaces = append(one.SupportedInterfaces, in)
			}
		}
		if len(one.SupportedInterfaces) != 1 {
			t.Fatalf("%s: gRPC interfaces %+v", base, card.SupportedInterfaces)
		}
		c, err := a2aclient.NewFromCard(ctx, &one, a2aclient.WithCallInterceptors(&a2aclient.AuthInterceptor{Service: store}),
			a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Destroy() })
		return c
	}
	onA, onB := clientOf("http://"+httpA), clientOf("http://"+httpB)
	asAlice, asBob := a2aclient.AttachSessionID(ctx, "alice"), a2aclient.AttachSessionID(ctx, "bob")
	say := func(s string) *a2a.SendMessageRequest {
		return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(s))}
	}

	if _, err := onA.SendMessage(ctx, say("anonymous")); !errors.Is(err, a2a.ErrUnauthenticated) {
		t.Fatalf("without credentials: %v, want ErrUnauthenticated", err)
	}
	if res, err := onB.SendMessage(asBob, say("bob's")); err != nil || res.(*a2a.Task).Status.State != a2a.TaskStateCompleted {
		t.Fatalf("bob with his JWT: %v %v", res, err)
	}

	// Alice's stream on edge A, cut after the snapshot and two events.
	var before []string
	var id string
	for ev, err := range onA.SendStreamingMessage(asAlice, say("one two three four five six seven eight")) {
		if err != nil {
			t.Fatalf("stream on A: %v", err)
		}
		if task, ok := ev.(*a2a.Task); ok && id == "" {
			id = string(task.ID)
			continue
		}
		before = append(before, describe(ev))
		if len(before) == 2 {
			break // the client lets the stream go
		}
	}
	if id == "" || len(before) != 2 {
		t.Fatalf("stream on A: task %q, events %v", id, before)
	}
	resumeAfter := func(gen int) context.Context {
		return a2aclient.AttachServiceParams(asAlice, a2aclient.ServiceParams{"last-event-id": {strconv.Itoa(gen)}})
	}
	var after []string
	for ev, err := range onB.SubscribeToTask(resumeAfter(1+len(before)), &a2a.SubscribeToTaskRequest{ID: a2a.TaskID(id)}) {
		if err != nil {
			t.Fatalf("resuming on B: %v", err)
		}
		after = append(after, describe(ev))
	}
	var log []string
	for ev, err := range onB.SubscribeToTask(resumeAfter(0), &a2a.SubscribeToTaskRequest{ID: a2a.TaskID(id)}) {
		if err != nil {
			t.Fatalf("the task's whole log on B: %v", err)
		}
		log = append(log, describe(ev))
	}
	if got := append(before, after...); !slices.Equal(got, log) || !strings.HasPrefix(log[len(log)-1], "status:"+string(a2a.TaskStateCompleted)) {
		t.Fatalf("before the cut %v\nafter resuming %v\nthe task's log %v", before, after, log)
	}

	// Bob cannot see, follow or list alice's task, on either edge.
	if _, err := onB.GetTask(asBob, &a2a.GetTaskRequest{ID: a2a.TaskID(id)}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob reading alice's task: %v", err)
	}
	for _, err := range onA.SubscribeToTask(a2aclient.AttachServiceParams(asBob, a2aclient.ServiceParams{"last-event-id": {"0"}}), &a2a.SubscribeToTaskRequest{ID: a2a.TaskID(id)}) {
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("bob following alice's task: %v", err)
		}
		break
	}
	if list, err := onA.ListTasks(asBob, &a2a.ListTasksRequest{}); err != nil || len(list.Tasks) != 1 {
		t.Fatalf("bob's list: %v (%v)", list, err)
	}
	if got, err := onA.GetTask(asAlice, &a2a.GetTaskRequest{ID: a2a.TaskID(id)}); err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("alice reading her task: %v %v", got, err)
	}
	if _, err := onB.CancelTask(asAlice, &a2a.CancelTaskRequest{ID: a2a.TaskID(id)}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Fatalf("alice canceling her finished task: %v", err)
	}
}

// describe is an event as a test compares it: its kind and what it says.
func describe(ev a2a.Event) string {
	switch e := ev.(type) {
	case *a2a.Task:
		return "task:" + string(e.Status.State)
	case *a2a.TaskStatusUpdateEvent:
		return "status:" + string(e.Status.State)
	case *a2a.TaskArtifactUpdateEvent:
		return fmt.Sprintf("artifact:%s append=%v last=%v %q", e.Artifact.ID, e.Append, e.LastChunk, text(e.Artifact.Parts))
	}
	return fmt.Sprintf("%T", ev)
}
