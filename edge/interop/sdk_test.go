// Package interop proves that the official A2A Go SDK client
// (github.com/a2aproject/a2a-go/v2) talks to a real a2abus — in-process
// JetStream, real workers, the edge over real HTTP — on every binding
// a2abus declares: JSON-RPC 1.0, HTTP+JSON 1.0 and JSON-RPC 0.3 (through
// the SDK's 0.3 compat transport), and gRPC against the a2abus process
// (grpc_test.go). It is its own module so the SDK never
// enters the product's dependency list.
package interop

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/workers"
)

// slow reports WORKING and then waits until it is canceled.
var slow = workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	if err := out.Working(ctx, "waiting"); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
})

// startA2Abus runs a2abus in-process and returns its base URL.
func startA2Abus(t *testing.T) string {
	t.Helper()
	return startA2AbusWith(t, edge.Config{DefaultAgent: "echo"})
}

// startA2AbusWith is startA2Abus with an edge configuration (PublicURL is
// set to the test server's).
func startA2AbusWith(t *testing.T, ecfg edge.Config) string {
	t.Helper()
	base, _ := startA2AbusOn(t, ecfg)
	return base
}

// startA2AbusOn is startA2AbusWith that also returns the bus, for what a
// test runs beside the edge and the agents.
func startA2AbusOn(t *testing.T, ecfg edge.Config) (string, *bus.Bus) {
	t.Helper()
	_, b := bustest.New(t, bustest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var stops []chan error
	var runners []*workers.Runner
	for _, def := range []workers.Definition{workers.EchoDefinition("echo"), {Name: "slow", Agent: slow}} {
		r := workers.NewRunner(b, def, workers.Options{ShutdownGrace: time.Second})
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		stops = append(stops, done)
		runners = append(runners, r)
	}
	for _, r := range runners { // registered before the edge reads the registry
		select {
		case <-r.Ready():
		case <-time.After(20 * time.Second):
			t.Fatal("runner not ready")
		}
	}
	ts := httptest.NewUnstartedServer(nil)
	ecfg.PublicURL = "http://" + ts.Listener.Addr().String()
	e := edge.New(b, ecfg)
	ts.Config.Handler = e.Handler()
	ts.Start()
	edgeDone := make(chan error, 1)
	go func() { edgeDone <- e.Run(ctx) }()
	t.Cleanup(func() {
		ts.Close()
		cancel()
		<-edgeDone
		for _, s := range stops {
			<-s
		}
	})
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := e.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	return ts.URL, b
}

type transport struct {
	name    string
	binding a2a.TransportProtocol
	version a2a.ProtocolVersion
	opts    []a2aclient.FactoryOption
	canList bool
}

var transports = []transport{
	{name: "jsonrpc-1.0", binding: a2a.TransportProtocolJSONRPC, version: a2a.Version, canList: true},
	{name: "http+json-1.0", binding: a2a.TransportProtocolHTTPJSON, version: a2a.Version, canList: true},
	{name: "jsonrpc-0.3", binding: a2a.TransportProtocolJSONRPC, version: "0.3",
		opts: []a2aclient.FactoryOption{a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{})}},
}

// clientFor resolves the agent's card with the SDK's resolver and builds a
// client bound to the one interface of the transport under test.
func clientFor(t *testing.T, base, agent string, tr transport) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.NewResolver(nil).Resolve(ctx, base+"/agents/"+agent)
	if err != nil {
		t.Fatalf("resolving the card: %v", err)
	}
	var pick *a2a.AgentInterface
	for _, in := range card.SupportedInterfaces {
		if in.ProtocolBinding == tr.binding && in.ProtocolVersion == tr.version {
			pick = in
		}
	}
	if pick == nil {
		t.Skipf("the card declares no %s interface", tr.name)
	}
	c, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{pick}, tr.opts...)
	if err != nil {
		t.Fatalf("client for %s: %v", tr.name, err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// eventKinds reads a stream to its end: each event's kind ("task",
// "status:<state>", "artifact", or its type), failing on an error.
func eventKinds(t *testing.T, events iter.Seq2[a2a.Event, error]) []string {
	t.Helper()
	var kinds []string
	for ev, err := range events {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			kinds = append(kinds, "task")
		case *a2a.TaskStatusUpdateEvent:
			kinds = append(kinds, "status:"+string(e.Status.State))
		case *a2a.TaskArtifactUpdateEvent:
			kinds = append(kinds, "artifact")
		default:
			kinds = append(kinds, fmt.Sprintf("%T", ev))
		}
	}
	return kinds
}

func text(parts []*a2a.Part) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

func TestOfficialGoClient(t *testing.T) {
	base := startA2Abus(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			echo := clientFor(t, base, "echo", tr)

			// Blocking send: the task comes back completed with the echo.
			res, err := echo.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello from the Go SDK"))})
			if err != nil {
				t.Fatalf("SendMessage: %v", err)
			}
			task, ok := res.(*a2a.Task)
			if !ok || task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 || text(task.Artifacts[0].Parts) != "hello from the Go SDK" {
				t.Fatalf("blocking send: %#v", res)
			}

			// Non-blocking send, then GetTask until it completes.
			res, err = echo.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("later")),
				Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
			if err != nil {
				t.Fatalf("non-blocking SendMessage: %v", err)
			}
			id := res.(*a2a.Task).ID
			for {
				got, err := echo.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
				if err != nil {
					t.Fatalf("GetTask: %v", err)
				}
				if got.Status.State == a2a.TaskStateCompleted {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("task %s stuck in %s", id, got.Status.State)
				case <-time.After(20 * time.Millisecond): // polling the server
				}
			}

			// History length 1 keeps only the newest message.
			one := 1
			got, err := echo.GetTask(ctx, &a2a.GetTaskRequest{ID: id, HistoryLength: &one})
			if err != nil || len(got.History) != 1 {
				t.Fatalf("GetTask historyLength 1: %v, %d messages", err, len(got.History))
			}

			// Streaming: the task first, artifact chunks, completion last.
			kinds := eventKinds(t, echo.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("one two three four five six"))}))
			if len(kinds) < 4 || kinds[0] != "task" || kinds[len(kinds)-1] != "status:"+string(a2a.TaskStateCompleted) || !strings.Contains(strings.Join(kinds, " "), "artifact") {
				t.Fatalf("stream events: %v", kinds)
			}

			// Unknown task: the SDK's TaskNotFound error.
			if _, err := echo.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.NewTaskID()}); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Fatalf("unknown task: %v", err)
			}

			if tr.canList {
				list, err := echo.ListTasks(ctx, &a2a.ListTasksRequest{})
				if err != nil || len(list.Tasks) < 3 || list.TotalSize < 3 {
					t.Fatalf("ListTasks: %v %+v", err, list)
				}
			}

			// Cancel and subscribe on a running task of the slow agent.
			sl := clientFor(t, base, "slow", tr)
			res, err = sl.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("wait")),
				Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
			if err != nil {
				t.Fatalf("send to slow: %v", err)
			}
			id = res.(*a2a.Task).ID
			for {
				got, err := sl.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
				if err != nil {
					t.Fatal(err)
				}
				if got.Status.State == a2a.TaskStateWorking {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("slow task stuck in %s", got.Status.State)
				case <-time.After(20 * time.Millisecond): // polling the server
				}
			}
			events := make(chan string, 16)
			go func() {
				defer close(events)
				for ev, err := range sl.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}) {
					if err != nil {
						events <- "error: " + err.Error()
						return
					}
					switch e := ev.(type) {
					case *a2a.Task:
						events <- "task:" + string(e.Status.State)
					case *a2a.TaskStatusUpdateEvent:
						events <- "status:" + string(e.Status.State)
					}
				}
			}()
			if first := <-events; first != "task:"+string(a2a.TaskStateWorking) {
				t.Fatalf("subscribe: first event %s", first)
			}
			canceled, err := sl.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
			if err != nil || canceled.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("CancelTask: %v %+v", err, canceled)
			}
			var last string
			for ev := range events {
				last = ev
			}
			if last != "status:"+string(a2a.TaskStateCanceled) {
				t.Fatalf("subscription ended with %q", last)
			}
		})
	}
}
