// Command a2agoecho is the baseline for a2abus's load comparisons: the
// official A2A Go SDK server (a2a-go v2) with its default in-memory task
// store, serving an echo agent that does what a2abus's demo echo agent does
// for a short message (SUBMITTED task, WORKING, one text artifact
// "echo-<task id>", COMPLETED with a status message). It lives in the interop
// module so the product module never depends on the SDK.
//
//	go run ./cmd/a2agoecho --listen 127.0.0.1:9100 [--grpc-listen 127.0.0.1:9101]
//	a2abus load --url http://127.0.0.1:9100 --clients 64
//	a2abus load --binding grpc --url http://127.0.0.1:9101 --clients 64
//
// With --grpc-listen it also serves the SDK's own gRPC binding
// (a2agrpc/v1) on that address, with the same request handler, and its
// card declares it.
package main

import (
	"context"
	"flag"
	"fmt"
	"iter"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"
)

// echoExecutor answers every message with its own text as one artifact.
type echoExecutor struct{}

func (echoExecutor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		text := ""
		for _, p := range ec.Message.Parts {
			text += p.Text()
		}
		if ec.StoredTask == nil {
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		art := a2a.NewArtifactEvent(ec, a2a.NewTextPart(text))
		art.Artifact.ID = a2a.ArtifactID("echo-" + string(ec.TaskID))
		art.Artifact.Name = "echo"
		art.LastChunk = true
		if !yield(art, nil) {
			return
		}
		done := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(fmt.Sprintf("echoed %d characters in 1 chunk(s)", len(text))))
		if yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, done), nil) {
			completed.Add(1)
		}
	}
}

func (echoExecutor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// newHandler serves the card at the well-known path, the count of
// completed tasks at /debug/completed and JSON-RPC at "/";
// the card declares the gRPC binding at grpcAddr too, when set.
func newHandler(baseURL, grpcAddr string) http.Handler {
	interfaces := []*a2a.AgentInterface{a2a.NewAgentInterface(baseURL, a2a.TransportProtocolJSONRPC)}
	if grpcAddr != "" {
		interfaces = append(interfaces, a2a.NewAgentInterface(grpcAddr, a2a.TransportProtocolGRPC))
	}
	card := &a2a.AgentCard{
		Name:                "a2agoecho",
		Description:         "a2a-go v2 baseline echo agent",
		Version:             "1.0.0",
		SupportedInterfaces: interfaces,
		DefaultInputModes:   []string{"text/plain"},
		DefaultOutputModes:  []string{"text/plain"},
		Capabilities:        a2a.AgentCapabilities{Streaming: true},
		Skills:              []a2a.AgentSkill{{ID: "echo", Name: "Echo", Description: "Returns the text it is sent.", Tags: []string{"echo"}}},
	}
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("GET /debug/completed", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, completed.Load())
	}))
	mux.Handle("/", a2asrv.NewJSONRPCHandler(requests))
	return mux
}

// completed counts the tasks the executor completed since the process
// started, served at GET /debug/completed: edge/interop/proxy.sh reads it
// to check that the sends it made through a2abus's remote agent reached
// this server (the SDK's ListTasks wants an authenticated caller, which
// this server has none of).
var completed atomic.Int64

// requests is the one request handler both bindings serve.
var requests = a2asrv.NewHandler(echoExecutor{})

// newGRPCServer serves the SDK's gRPC binding of requests.
func newGRPCServer() *grpc.Server {
	s := grpc.NewServer()
	a2agrpc.NewHandler(requests).RegisterWith(s)
	return s
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9100", "address to listen on (loopback by default)")
	grpcListen := flag.String("grpc-listen", "", "also serve the gRPC binding on this address (default: off)")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	var gs *grpc.Server
	grpcAddr := ""
	if *grpcListen != "" {
		gl, err := net.Listen("tcp", *grpcListen)
		if err != nil {
			log.Fatal(err)
		}
		grpcAddr, gs = gl.Addr().String(), newGRPCServer()
		go func() {
			if err := gs.Serve(gl); err != nil {
				log.Fatal(err)
			}
		}()
	}
	srv := &http.Server{Handler: newHandler(base, grpcAddr)}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		if gs != nil {
			gs.Stop()
		}
		srv.Close()
	}()
	fmt.Printf("a2agoecho listening on %s\n", base)
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
