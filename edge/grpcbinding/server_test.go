package grpcbinding_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/edge/grpcbinding"
	"github.com/a2abus/a2abus/edge/grpcbinding/a2apb"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

var _ grpcbinding.Door = (*edge.InProcess)(nil)

// serve runs an edge with echo agents "echo" (the default) and "second"
// on an in-process bus, its gRPC binding on a loopback port, and returns
// a client of it.
func serve(t *testing.T, cfg edge.Config) a2apb.A2AServiceClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	_, b := bustest.New(t, bustest.Options{})
	var runs []chan error
	for _, name := range []string{"echo", "second"} {
		r := workers.NewRunner(b, workers.EchoDefinition(name), workers.Options{ShutdownGrace: time.Second})
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		runs = append(runs, done)
		select {
		case <-r.Ready():
		case <-time.After(20 * time.Second):
			t.Fatalf("agent %s not ready", name)
		}
	}
	cfg.PublicURL, cfg.DefaultAgent = "http://127.0.0.1", "echo"
	e := edge.New(b, cfg)
	edgeDone := make(chan error, 1)
	go func() { edgeDone <- e.Run(ctx) }()
	if err := e.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		door := e.InProcess("grpc")
		list, _ := door.Agents(ctx, schemas.Presented{}, schemas.AgentQuery{})
		if len(list) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agents never registered")
		}
		time.Sleep(10 * time.Millisecond) // polling an external condition, not synchronising
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpcbinding.NewServer(e.InProcess("grpc"), grpcbinding.Options{MaxMessageBytes: 1 << 20})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop(time.Second)
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		cancel()
		<-edgeDone
		for _, done := range runs {
			<-done
		}
	})
	return a2apb.NewA2AServiceClient(conn)
}

func message(text string) *a2apb.Message {
	return &a2apb.Message{MessageId: "m-" + text + "-" + time.Now().Format("150405.000000000"), Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: text}}}}
}

// errorInfo is the ErrorInfo of a status, or nil.
func errorInfo(err error) (codes.Code, *errdetails.ErrorInfo) {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), info
		}
	}
	return st.Code(), nil
}

// Every operation of lf.a2a.v1.A2AService over gRPC, through the edge's
// door: a blocking send, a stream, get, list, cancel, subscribe, the push
// configs, and A2A's errors as statuses with ErrorInfo.
func TestEveryOperationOverGRPC(t *testing.T) {
	c := serve(t, edge.Config{Push: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	res, err := c.SendMessage(ctx, &a2apb.SendMessageRequest{Message: message("hello")})
	if err != nil {
		t.Fatal(err)
	}
	task := res.GetTask()
	if task.GetStatus().GetState() != a2apb.TaskState_TASK_STATE_COMPLETED || len(task.GetArtifacts()) == 0 ||
		!strings.Contains(task.GetArtifacts()[0].GetParts()[0].GetText(), "hello") {
		t.Fatalf("send: %v", res)
	}
	got, err := c.GetTask(ctx, &a2apb.GetTaskRequest{Id: task.GetId()})
	if err != nil || got.GetId() != task.GetId() || got.GetStatus().GetState() != a2apb.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("get: %v %v", got, err)
	}

	// The second agent, named by the tenant its card declares.
	res, err = c.SendMessage(ctx, &a2apb.SendMessageRequest{Tenant: schemas.AgentTenant("", "second"), Message: message("other")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTask(ctx, &a2apb.GetTaskRequest{Id: res.GetTask().GetId()}); status.Code(err) != codes.NotFound {
		t.Fatalf("the second agent's task read as the default agent's: %v", err)
	}
	if _, err := c.GetTask(ctx, &a2apb.GetTaskRequest{Tenant: "agents/second", Id: res.GetTask().GetId()}); err != nil {
		t.Fatalf("the second agent's task: %v", err)
	}

	// A stream: the task, then its updates to COMPLETED.
	stream, err := c.SendStreamingMessage(ctx, &a2apb.SendMessageRequest{Message: message("streamed")})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var streamed string
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.GetTask() != nil:
			kinds, streamed = append(kinds, "task"), ev.GetTask().GetId()
		case ev.GetStatusUpdate() != nil:
			kinds = append(kinds, ev.GetStatusUpdate().GetStatus().GetState().String())
		case ev.GetArtifactUpdate() != nil:
			kinds = append(kinds, "artifact")
		}
	}
	if len(kinds) < 3 || kinds[0] != "task" || kinds[len(kinds)-1] != "TASK_STATE_COMPLETED" {
		t.Fatalf("stream events %v", kinds)
	}
	if _, err := c.GetTask(ctx, &a2apb.GetTaskRequest{Id: streamed}); err != nil {
		t.Fatalf("the streamed task: %v", err)
	}

	list, err := c.ListTasks(ctx, &a2apb.ListTasksRequest{})
	if err != nil || len(list.GetTasks()) != 2 {
		t.Fatalf("list: %d tasks, %v", len(list.GetTasks()), err)
	}

	// A task that waits for input: subscribe sees it, cancel ends it.
	res, err = c.SendMessage(ctx, &a2apb.SendMessageRequest{Message: message(workers.AskCommand)})
	if err != nil || res.GetTask().GetStatus().GetState() != a2apb.TaskState_TASK_STATE_INPUT_REQUIRED {
		t.Fatalf("ask: %v %v", res, err)
	}
	asking := res.GetTask().GetId()
	sub, err := c.SubscribeToTask(ctx, &a2apb.SubscribeToTaskRequest{Id: asking})
	if err != nil {
		t.Fatal(err)
	}
	first, err := sub.Recv()
	if err != nil || first.GetTask().GetId() != asking {
		t.Fatalf("subscribe: first event %v %v", first, err)
	}
	canceled, err := c.CancelTask(ctx, &a2apb.CancelTaskRequest{Id: asking})
	if err != nil || canceled.GetStatus().GetState() != a2apb.TaskState_TASK_STATE_CANCELED {
		t.Fatalf("cancel: %v %v", canceled, err)
	}
	for {
		ev, err := sub.Recv()
		if err != nil {
			t.Fatalf("the subscription ended before the cancel: %v", err)
		}
		if ev.GetStatusUpdate().GetStatus().GetState() == a2apb.TaskState_TASK_STATE_CANCELED {
			break
		}
	}

	// Push configs: create, get, list, delete.
	cfg, err := c.CreateTaskPushNotificationConfig(ctx, &a2apb.TaskPushNotificationConfig{TaskId: task.GetId(), Id: "hook", Url: "https://127.0.0.1/hook"})
	if err != nil || cfg.GetId() != "hook" || cfg.GetUrl() != "https://127.0.0.1/hook" {
		t.Fatalf("create push config: %v %v", cfg, err)
	}
	if got, err := c.GetTaskPushNotificationConfig(ctx, &a2apb.GetTaskPushNotificationConfigRequest{TaskId: task.GetId(), Id: "hook"}); err != nil || got.GetId() != "hook" {
		t.Fatalf("get push config: %v %v", got, err)
	}
	if l, err := c.ListTaskPushNotificationConfigs(ctx, &a2apb.ListTaskPushNotificationConfigsRequest{TaskId: task.GetId()}); err != nil || len(l.GetConfigs()) != 1 {
		t.Fatalf("list push configs: %v %v", l, err)
	}
	if _, err := c.DeleteTaskPushNotificationConfig(ctx, &a2apb.DeleteTaskPushNotificationConfigRequest{TaskId: task.GetId(), Id: "hook"}); err != nil {
		t.Fatalf("delete push config: %v", err)
	}

	// A2A's errors: the code of their row, ErrorInfo with the reason.
	for _, tc := range []struct {
		name   string
		err    error
		code   codes.Code
		reason string
	}{
		{"unknown task", second(c.GetTask(ctx, &a2apb.GetTaskRequest{Id: "nope"})), codes.NotFound, "TASK_NOT_FOUND"},
		{"finished task canceled", second(c.CancelTask(ctx, &a2apb.CancelTaskRequest{Id: task.GetId()})), codes.FailedPrecondition, "TASK_NOT_CANCELABLE"},
		{"unknown agent", second(c.GetTask(ctx, &a2apb.GetTaskRequest{Tenant: "agents/nobody", Id: task.GetId()})), codes.Unimplemented, "METHOD_NOT_FOUND"},
		{"no extended card", second(c.GetExtendedAgentCard(ctx, &a2apb.GetExtendedAgentCardRequest{Tenant: "agents/second"})), codes.FailedPrecondition, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"},
		{"empty message", second(c.SendMessage(ctx, &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m", Role: a2apb.Role_ROLE_USER}})), codes.InvalidArgument, "INVALID_PARAMS"},
	} {
		code, info := errorInfo(tc.err)
		if code != tc.code || info == nil || info.GetReason() != tc.reason || info.GetDomain() != "a2a-protocol.org" {
			t.Errorf("%s: %v (code %v, info %v), want %v with reason %s", tc.name, tc.err, code, info, tc.code, tc.reason)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// Over gRPC a caller is who its metadata's credentials say, as over every
// binding: without them a call is refused UNAUTHENTICATED, another
// principal's task is not found, and a caller over its rate is told when
// to retry (RESOURCE_EXHAUSTED with RetryInfo).
func TestGRPCCallersAreTheDoorsCallers(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{
		{Key: "grpc-alice-key-0123456789", Principal: "alice"}, {Key: "grpc-bob-key-0123456789", Principal: "bob"}}})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, edge.Config{Auth: a, Limits: edge.LimitsConfig{Default: edge.Limits{Rate: 0.001, Burst: 3}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	as := func(key string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
	}
	if _, err := c.SendMessage(ctx, &a2apb.SendMessageRequest{Message: message("hi")}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without credentials: %v", err)
	}
	res, err := c.SendMessage(as("grpc-alice-key-0123456789"), &a2apb.SendMessageRequest{Message: message("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTask(as("grpc-bob-key-0123456789"), &a2apb.GetTaskRequest{Id: res.GetTask().GetId()}); status.Code(err) != codes.NotFound {
		t.Fatalf("bob reading alice's task: %v", err)
	}
	for range 2 {
		if _, err := c.GetTask(as("grpc-alice-key-0123456789"), &a2apb.GetTaskRequest{Id: res.GetTask().GetId()}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.GetTask(as("grpc-alice-key-0123456789"), &a2apb.GetTaskRequest{Id: res.GetTask().GetId()})
	st, _ := status.FromError(err)
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	if st.Code() != codes.ResourceExhausted || retry == nil || retry.GetRetryDelay().AsDuration() <= 0 {
		t.Fatalf("alice over her rate: %v (retry %v)", err, retry)
	}
}

// A2A 1.1 generations over gRPC, whose messages carry them for every
// client (a 1.0 client's protobuf reader skips a field it does not know):
// tasks and events are numbered 1, 2, 3…; a subscription resumed with the
// last generation it saw (metadata last-event-id) gets exactly the later
// events; of two continuations guarded by the same if_generation_match
// one is taken and the other refused ABORTED with
// TASK_GENERATION_MISMATCH.
func TestGenerationsOverGRPC(t *testing.T) {
	c := serve(t, edge.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	stream, err := c.SendStreamingMessage(ctx, &a2apb.SendMessageRequest{Message: message("one two three")})
	if err != nil {
		t.Fatal(err)
	}
	var gens []int64
	var id string
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.GetTask() != nil:
			id = ev.GetTask().GetId()
			gens = append(gens, ev.GetTask().GetGeneration())
		case ev.GetStatusUpdate() != nil:
			gens = append(gens, ev.GetStatusUpdate().GetGeneration())
		case ev.GetArtifactUpdate() != nil:
			gens = append(gens, ev.GetArtifactUpdate().GetGeneration())
		}
	}
	if len(gens) < 3 {
		t.Fatalf("stream generations %v", gens)
	}
	for i, g := range gens {
		if g != int64(i+1) {
			t.Fatalf("stream generations %v, want 1, 2, 3…", gens)
		}
	}
	last := gens[len(gens)-1]
	if got, err := c.GetTask(ctx, &a2apb.GetTaskRequest{Id: id}); err != nil || got.GetGeneration() != last {
		t.Fatalf("get: generation %d (%v), want %d", got.GetGeneration(), err, last)
	}
	// currentGeneration behind the task answers at once.
	behind := last - 1
	if got, err := c.GetTask(ctx, &a2apb.GetTaskRequest{Id: id, CurrentGeneration: &behind}); err != nil || got.GetGeneration() != last {
		t.Fatalf("long poll behind: %d (%v)", got.GetGeneration(), err)
	}

	sub, err := c.SubscribeToTask(metadata.AppendToOutgoingContext(ctx, "last-event-id", "2"), &a2apb.SubscribeToTaskRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	var resumed []int64
	for {
		ev, err := sub.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetTask() != nil {
			t.Fatal("a resumed subscription began with a snapshot")
		}
		resumed = append(resumed, ev.GetStatusUpdate().GetGeneration()+ev.GetArtifactUpdate().GetGeneration())
	}
	if want := gens[2:]; !slices.Equal(resumed, want) {
		t.Fatalf("resumed after generation 2: %v, want %v", resumed, want)
	}

	asked, err := c.SendMessage(ctx, &a2apb.SendMessageRequest{Message: message(workers.AskCommand)})
	if err != nil {
		t.Fatal(err)
	}
	g := asked.GetTask().GetGeneration()
	results := make(chan error, 2)
	for range 2 {
		go func() {
			m := message("answer")
			m.TaskId = asked.GetTask().GetId()
			_, err := c.SendMessage(ctx, &a2apb.SendMessageRequest{Message: m, Configuration: &a2apb.SendMessageConfiguration{ReturnImmediately: true, IfGenerationMatch: &g}})
			results <- err
		}()
	}
	taken, refused := 0, 0
	for range 2 {
		err := <-results
		code, info := errorInfo(err)
		switch {
		case err == nil:
			taken++
		case code == codes.Aborted && info.GetReason() == "TASK_GENERATION_MISMATCH" && info.GetMetadata()["expectedGeneration"] == strconv.FormatInt(g, 10):
			refused++
		default:
			t.Errorf("neither taken nor a mismatch: %v %v", err, info)
		}
	}
	if taken != 1 || refused != 1 {
		t.Fatalf("%d taken, %d refused; want one each", taken, refused)
	}
}

// The extended card over gRPC is the card the edge serves over HTTP, so
// it carries the edge's signature (Config.CardKeys) too.
func TestGRPCExtendedCardCarriesTheEdgesSignature(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{{Key: "grpc-alice-key-0123456789", Principal: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	file, err := auth.RotateSigningKeys(nil, "EdDSA", 1)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := auth.ParseSigningKeys(file, "a2abus")
	if err != nil {
		t.Fatal(err)
	}
	secret := schemas.AgentSkill{ID: "internal", Name: "Internal", Description: "for callers we know", Tags: []string{"internal"}}
	c := serve(t, edge.Config{Auth: a, ExtendedSkills: map[string][]schemas.AgentSkill{"echo": {secret}},
		CardKeys: func() *auth.SigningKeys { return keys }})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer grpc-alice-key-0123456789")
	card, err := c.GetExtendedAgentCard(ctx, &a2apb.GetExtendedAgentCardRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sigs := card.GetSignatures()
	if len(sigs) != 1 || sigs[0].GetSignature() == "" {
		t.Fatalf("signatures %v", sigs)
	}
	hdr, err := base64.RawURLEncoding.DecodeString(sigs[0].GetProtected())
	var h struct{ Kid, Typ string }
	if err != nil || json.Unmarshal(hdr, &h) != nil || h.Kid != keys.KeyID() || h.Typ != "JOSE" {
		t.Fatalf("protected header %s (%v), want kid %s", hdr, err, keys.KeyID())
	}
}
