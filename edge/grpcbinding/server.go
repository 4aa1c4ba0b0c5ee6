// Package grpcbinding serves A2A 1.0's gRPC binding, the service
// lf.a2a.v1.A2AService (the specification's a2a.proto, generated into
// a2apb). It is an adapter of the edge's in-process door (edge.InProcess,
// declared here as Door) that only translates: protobuf messages to the
// schemas' types and back, the call's metadata and peer to what the
// request presented (schemas.Presented: credentials, address, the TLS
// state for mutual TLS), and the door's errors to google.rpc.Status with
// ErrorInfo. The conversions of messages and errors are pbwire's, which
// the A2A client's gRPC wire (discovery) reads them back with. Authentication, rate limits, tenants, isolation, admission
// and the task lifecycle are the door's, as for every binding.
//
// gRPC has no path to name an agent by: a request names it in its tenant
// field, which A2A defines as an opaque routing value a client copies
// from the interface it chose in the agent's card. An agent's card
// declares its gRPC interface with the tenant "agents/<agent>" (or
// "<tenant>/agents/<agent>" in a tenant); an empty tenant, or one
// without that suffix, is the edge's default agent
// (schemas.RouteTenant).
package grpcbinding

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/a2abus/a2abus/edge/grpcbinding/a2apb"
	"github.com/a2abus/a2abus/edge/grpcbinding/pbwire"
	"github.com/a2abus/a2abus/schemas"
)

// Door is what the binding needs of the edge: every A2A operation, for
// what a request presented, on an agent ("": the default agent). The
// edge's in-process door (edge.InProcess) is one.
type Door interface {
	SendMessage(ctx context.Context, who schemas.Presented, agent string, req *schemas.SendMessageRequest) (*schemas.SendMessageResponse, error)
	SendStreamingMessage(ctx context.Context, who schemas.Presented, agent string, req *schemas.SendMessageRequest, each func(id string, ev *schemas.StreamResponse) error) error
	GetTask(ctx context.Context, who schemas.Presented, agent string, req *schemas.GetTaskRequest) (*schemas.Task, error)
	ListTasks(ctx context.Context, who schemas.Presented, agent string, req *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error)
	CancelTask(ctx context.Context, who schemas.Presented, agent string, req *schemas.CancelTaskRequest) (*schemas.Task, error)
	SubscribeToTask(ctx context.Context, who schemas.Presented, agent string, req *schemas.SubscribeToTaskRequest, each func(id string, ev *schemas.StreamResponse) error) error
	CreateTaskPushNotificationConfig(ctx context.Context, who schemas.Presented, agent string, cfg *schemas.TaskPushNotificationConfig) (*schemas.TaskPushNotificationConfig, error)
	GetTaskPushNotificationConfig(ctx context.Context, who schemas.Presented, agent string, req *schemas.GetTaskPushNotificationConfigRequest) (*schemas.TaskPushNotificationConfig, error)
	ListTaskPushNotificationConfigs(ctx context.Context, who schemas.Presented, agent string, req *schemas.ListTaskPushNotificationConfigsRequest) ([]schemas.TaskPushNotificationConfig, error)
	DeleteTaskPushNotificationConfig(ctx context.Context, who schemas.Presented, agent string, req *schemas.GetTaskPushNotificationConfigRequest) error
	GetExtendedAgentCard(ctx context.Context, who schemas.Presented, agent, tenant string) (*schemas.AgentCard, error)
	// StreamWriteTimeout bounds how long one event waits for its client.
	StreamWriteTimeout() time.Duration
}

// Options configure the binding's server.
type Options struct {
	// MaxMessageBytes bounds a request message (the edge's
	// --max-body-bytes); default gRPC's 4 MiB.
	MaxMessageBytes int
	// TLS, when set, serves gRPC over TLS with it (client certificates
	// included, for mutual TLS); else cleartext HTTP/2.
	TLS *tls.Config
}

// Server is a gRPC server of a door's agents, the A2A service registered.
type Server struct{ g *grpc.Server }

// NewServer is a gRPC server of door's agents: Serve it on a listener.
func NewServer(door Door, o Options) *Server {
	var opts []grpc.ServerOption
	if o.MaxMessageBytes > 0 {
		opts = append(opts, grpc.MaxRecvMsgSize(o.MaxMessageBytes))
	}
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	srv := grpc.NewServer(opts...)
	a2apb.RegisterA2AServiceServer(srv, &service{door: door})
	return &Server{g: srv}
}

// Serve serves l until Stop; it returns nil once stopped.
func (s *Server) Serve(l net.Listener) error {
	if err := s.g.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Stop stops taking calls and waits up to grace for those under way
// (streams included), then ends what is left.
func (s *Server) Stop(grace time.Duration) {
	done := make(chan struct{})
	go func() { s.g.GracefulStop(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.g.Stop()
		<-done
	}
}

// fromPB reads a request message into the schemas' type v; a message that
// does not read is the client's error.
func fromPB(m proto.Message, v any) error {
	if err := pbwire.FromPB(m, v); err != nil {
		return statusOf(schemas.Errorf(schemas.ErrInvalidParams, "the request does not read as A2A: %v", err))
	}
	return nil
}

// toPB writes the schemas' value v into the answer message m.
func toPB(v any, m proto.Message) error {
	if err := pbwire.ToPB(v, m); err != nil {
		return statusOf(schemas.Errorf(schemas.ErrInternal, "the answer does not convert to protobuf: %v", err))
	}
	return nil
}

// statusOf is the gRPC status of what the door answered (nil for nil): an
// A2A error as pbwire.Status writes it. A status already (a stream's
// failed Send) passes as it is. The door classified everything else, a
// call ended before its answer among it (UNAVAILABLE: its client, if
// still there, retries).
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return pbwire.Status(schemas.AsError(err)).Err()
}

// service is lf.a2a.v1.A2AService over the door.
type service struct {
	a2apb.UnimplementedA2AServiceServer
	door Door
}

// presented is what a call's request presented: its metadata as a header
// (the credentials, A2A-Version, traceparent and Last-Event-ID among
// it), its peer's address and TLS state.
func presented(ctx context.Context) schemas.Presented {
	var who schemas.Presented
	md, _ := metadata.FromIncomingContext(ctx)
	who.Header = make(http.Header, len(md))
	for k, vs := range md {
		if strings.HasPrefix(k, ":") || strings.HasSuffix(k, "-bin") {
			continue // pseudo-headers and binary values are gRPC's own
		}
		who.Header[http.CanonicalHeaderKey(k)] = vs
	}
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			who.RemoteAddr = p.Addr.String()
		}
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			who.TLS = &ti.State
		}
	}
	return who
}

// unary runs one unary method: the request read into the schemas' Req,
// its tenant field routed (the field tenant points at: the agent it
// names, the tenant left in it), the door called, and its answer written
// into out.
func unary[Req, Res any, Out proto.Message](ctx context.Context, in proto.Message, tenant func(*Req) *string,
	door func(context.Context, schemas.Presented, string, *Req) (Res, error), out Out) (Out, error) {
	var req Req
	var zero Out
	if err := fromPB(in, &req); err != nil {
		return zero, err
	}
	t := tenant(&req)
	var agent string
	*t, agent = schemas.RouteTenant(*t)
	res, err := door(ctx, presented(ctx), agent, &req)
	if err != nil {
		return zero, statusOf(err)
	}
	return out, toPB(res, out)
}

// streaming runs one server-streaming method as unary runs a unary one,
// each event sent as a StreamResponse.
func streaming[Req any](stream grpc.ServerStreamingServer[a2apb.StreamResponse], timeout time.Duration, in proto.Message, tenant func(*Req) *string,
	door func(context.Context, schemas.Presented, string, *Req, func(string, *schemas.StreamResponse) error) error) error {
	var req Req
	if err := fromPB(in, &req); err != nil {
		return err
	}
	t := tenant(&req)
	var agent string
	*t, agent = schemas.RouteTenant(*t)
	ctx := stream.Context()
	send := sender(stream, timeout)
	defer send.close()
	return statusOf(door(ctx, presented(ctx), agent, &req, func(_ string, ev *schemas.StreamResponse) error {
		out := &a2apb.StreamResponse{}
		if err := toPB(ev, out); err != nil {
			return err
		}
		return send.send(out)
	}))
}

// errStalled ends a stream whose client took no event for the edge's
// stream write timeout: it is gone or stalled, and holds a stream of the
// edge's and of its address's share; it resumes with SubscribeToTask.
var errStalled = schemas.Errorf(schemas.ErrUnavailable, "this stream's client took no event for too long; resume it with SubscribeToTask")

// streamSender writes a stream's events from a goroutine of its own, so a
// write that gRPC's flow control holds (a client that stops reading) is
// given up after the timeout: the handler then returns, which resets the
// stream and frees the write.
type streamSender struct {
	stream  grpc.ServerStreamingServer[a2apb.StreamResponse]
	timeout time.Duration
	out     chan *a2apb.StreamResponse
	done    chan error
	// timer bounds each send; one for the stream, reset per event (a
	// timer's channel holds no stale fire after a Reset, Go 1.23).
	timer *time.Timer
}

func sender(stream grpc.ServerStreamingServer[a2apb.StreamResponse], timeout time.Duration) *streamSender {
	s := &streamSender{stream: stream, timeout: timeout, out: make(chan *a2apb.StreamResponse), done: make(chan error, 1)}
	if timeout > 0 {
		go func() {
			for m := range s.out {
				s.done <- stream.Send(m)
			}
		}()
	}
	return s
}

func (s *streamSender) send(m *a2apb.StreamResponse) error {
	if s.timeout <= 0 {
		return s.stream.Send(m)
	}
	s.out <- m
	if s.timer == nil {
		s.timer = time.NewTimer(s.timeout)
	} else {
		s.timer.Reset(s.timeout)
	}
	select {
	case err := <-s.done:
		return err
	case <-s.timer.C:
		return errStalled
	}
}

// close ends the writer goroutine (after a stalled write, once the
// stream's reset frees it).
func (s *streamSender) close() {
	if s.timeout > 0 {
		close(s.out)
	}
	if s.timer != nil {
		s.timer.Stop()
	}
}

func (s *service) SendMessage(ctx context.Context, in *a2apb.SendMessageRequest) (*a2apb.SendMessageResponse, error) {
	return unary(ctx, in, (*schemas.SendMessageRequest).TenantField, s.door.SendMessage, &a2apb.SendMessageResponse{})
}

func (s *service) SendStreamingMessage(in *a2apb.SendMessageRequest, stream grpc.ServerStreamingServer[a2apb.StreamResponse]) error {
	return streaming(stream, s.door.StreamWriteTimeout(), in, (*schemas.SendMessageRequest).TenantField, s.door.SendStreamingMessage)
}

func (s *service) SubscribeToTask(in *a2apb.SubscribeToTaskRequest, stream grpc.ServerStreamingServer[a2apb.StreamResponse]) error {
	return streaming(stream, s.door.StreamWriteTimeout(), in, (*schemas.SubscribeToTaskRequest).TenantField, s.door.SubscribeToTask)
}

func (s *service) GetTask(ctx context.Context, in *a2apb.GetTaskRequest) (*a2apb.Task, error) {
	return unary(ctx, in, (*schemas.GetTaskRequest).TenantField, s.door.GetTask, &a2apb.Task{})
}

func (s *service) ListTasks(ctx context.Context, in *a2apb.ListTasksRequest) (*a2apb.ListTasksResponse, error) {
	if in.PageSize != nil && *in.PageSize == 0 {
		// The official SDK's gRPC client sets page_size 0 when its caller
		// set none; A2A reads an unset size as the default, and 0 is
		// below its minimum, so 0 here is read as unset.
		in.PageSize = nil
	}
	return unary(ctx, in, (*schemas.ListTasksRequest).TenantField, s.door.ListTasks, &a2apb.ListTasksResponse{})
}

func (s *service) CancelTask(ctx context.Context, in *a2apb.CancelTaskRequest) (*a2apb.Task, error) {
	return unary(ctx, in, (*schemas.CancelTaskRequest).TenantField, s.door.CancelTask, &a2apb.Task{})
}

func (s *service) CreateTaskPushNotificationConfig(ctx context.Context, in *a2apb.TaskPushNotificationConfig) (*a2apb.TaskPushNotificationConfig, error) {
	return unary(ctx, in, (*schemas.TaskPushNotificationConfig).TenantField, s.door.CreateTaskPushNotificationConfig, &a2apb.TaskPushNotificationConfig{})
}

func (s *service) GetTaskPushNotificationConfig(ctx context.Context, in *a2apb.GetTaskPushNotificationConfigRequest) (*a2apb.TaskPushNotificationConfig, error) {
	return unary(ctx, in, (*schemas.GetTaskPushNotificationConfigRequest).TenantField, s.door.GetTaskPushNotificationConfig, &a2apb.TaskPushNotificationConfig{})
}

// configList is ListTaskPushNotificationConfigsResponse's JSON form.
type configList struct {
	Configs []schemas.TaskPushNotificationConfig `json:"configs"`
}

func (s *service) ListTaskPushNotificationConfigs(ctx context.Context, in *a2apb.ListTaskPushNotificationConfigsRequest) (*a2apb.ListTaskPushNotificationConfigsResponse, error) {
	list := func(ctx context.Context, who schemas.Presented, agent string, req *schemas.ListTaskPushNotificationConfigsRequest) (configList, error) {
		cfgs, err := s.door.ListTaskPushNotificationConfigs(ctx, who, agent, req)
		return configList{cfgs}, err
	}
	return unary(ctx, in, (*schemas.ListTaskPushNotificationConfigsRequest).TenantField, list, &a2apb.ListTaskPushNotificationConfigsResponse{})
}

func (s *service) DeleteTaskPushNotificationConfig(ctx context.Context, in *a2apb.DeleteTaskPushNotificationConfigRequest) (*emptypb.Empty, error) {
	del := func(ctx context.Context, who schemas.Presented, agent string, req *schemas.GetTaskPushNotificationConfigRequest) (struct{}, error) {
		return struct{}{}, s.door.DeleteTaskPushNotificationConfig(ctx, who, agent, req)
	}
	return unary(ctx, in, (*schemas.GetTaskPushNotificationConfigRequest).TenantField, del, &emptypb.Empty{})
}

func (s *service) GetExtendedAgentCard(ctx context.Context, in *a2apb.GetExtendedAgentCardRequest) (*a2apb.AgentCard, error) {
	tenant, agent := schemas.RouteTenant(in.GetTenant())
	card, err := s.door.GetExtendedAgentCard(ctx, presented(ctx), agent, tenant)
	if err != nil {
		return nil, statusOf(err)
	}
	out := &a2apb.AgentCard{}
	return out, toPB(card, out)
}
