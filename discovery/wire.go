package discovery

import (
	"context"
	"errors"

	"github.com/a2abus/a2abus/schemas"
)

// wire is one wire form of A2A, a binding and a protocol version or
// dialect, as an adapter of its own file: jsonrpc.go (1.0 JSON-RPC),
// rest.go (1.0 HTTP+JSON), grpc.go (1.0 gRPC), v03.go (0.3 JSON-RPC) and
// legacy.go (the older tasks/send dialect). It takes 1.0's typed requests and answers 1.0's
// responses and streams, or errors of the table (*schemas.Error), an
// *AuthError or a *TransportError, whatever its form says on the wire; an
// operation its form lacks is an error of the table too. Client's exported
// methods are these operations, each run by the wire in force.
type wire interface {
	sendMessage(context.Context, *schemas.SendMessageRequest) (*schemas.SendMessageResponse, error)
	sendStreamingMessage(context.Context, *schemas.SendMessageRequest) (*Stream, error)
	getTask(context.Context, *schemas.GetTaskRequest) (*schemas.Task, error)
	cancelTask(context.Context, *schemas.CancelTaskRequest) (*schemas.Task, error)
	listTasks(context.Context, *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error)
	subscribeToTask(ctx context.Context, req *schemas.SubscribeToTaskRequest, lastEventID string) (*Stream, error)
	createPushConfig(context.Context, *schemas.TaskPushNotificationConfig) (*PushConfig, error)
	getPushConfig(context.Context, *schemas.GetTaskPushNotificationConfigRequest) (*PushConfig, error)
	listPushConfigs(context.Context, *schemas.ListTaskPushNotificationConfigsRequest) ([]PushConfig, error)
	deletePushConfig(context.Context, *schemas.GetTaskPushNotificationConfigRequest) error
}

// wiresFor are the wire forms an endpoint NewClient accepted may be spoken
// in, the one it names first. A card tells 0.3 from the older dialect only
// by what it leaves out (see ParseCard), which A2A 0.2 cards leave out too,
// and an agent may publish a 0.3 card while speaking only tasks/send: each
// of the two comes with the other, which inDialect falls back to.
func wiresFor(c *conn) []wire {
	switch {
	case isLegacy(c.ep.Version):
		return []wire{&legacyWire{conn: c}, v03Wire{c}}
	case isV03(c.ep.Version):
		return []wire{v03Wire{c}, &legacyWire{conn: c}}
	case c.ep.Binding == schemas.BindingHTTPJSON:
		return []wire{restWire{c}}
	case c.ep.Binding == schemas.BindingGRPC:
		return []wire{grpcWire{c}}
	}
	return []wire{jsonrpcWire{c}}
}

// inForce is the index in c.wires of the wire form the client speaks: the
// one an answer confirmed, else the one the endpoint names.
func (c *Client) inForce() int {
	if s := c.spoken.Load(); s != 0 {
		return int(s - 1)
	}
	return 0
}

// wire is the wire form the client speaks.
func (c *Client) wire() wire { return c.wires[c.inForce()] }

// inDialect runs a send in the wire form the client speaks and, while no
// answer has confirmed that form, once more in the other one the endpoint
// may be spoken in (see wiresFor) when the agent says the method does not
// exist (-32601). The form that answers is kept, so later calls go
// straight to it. When neither knows the method, the first answer is
// returned.
func inDialect[T any](c *Client, call func(wire) (T, error)) (T, error) {
	i := c.inForce()
	out, err := call(c.wires[i])
	if c.spoken.Load() != 0 || len(c.wires) == 1 || !errors.Is(err, schemas.ErrMethodNotFound) {
		c.confirm(i, err)
		return out, err
	}
	other := 1 - i
	out2, err2 := call(c.wires[other])
	if errors.Is(err2, schemas.ErrMethodNotFound) {
		return out, err
	}
	c.confirm(other, err2)
	return out2, err2
}

// confirm keeps c.wires[i] as the form spoken when the agent's answer
// shows it knew the method: a result, or an error of its own other than
// method-not-found (not a failure to reach it, nor an answer a2abus could
// not read).
func (c *Client) confirm(i int, err error) {
	var pe *schemas.Error
	var ae *AuthError
	if err == nil || (errors.As(err, &pe) && !errors.As(err, &ae) && !errors.Is(err, schemas.ErrMethodNotFound) && !errors.Is(err, schemas.ErrInvalidAgentResponse)) {
		c.spoken.CompareAndSwap(0, int32(i+1))
	}
}

// checkSend refuses a 1.0 send answer holding neither a task nor a
// message.
func (c *conn) checkSend(res *schemas.SendMessageResponse) (*schemas.SendMessageResponse, error) {
	if res.Task == nil && res.Message == nil {
		return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "SendMessage from %s answered neither a task nor a message", redactRaw(c.ep.URL))
	}
	return res, nil
}

// checkTask refuses a 1.0 task answer without an id (a null or empty
// result).
func (c *conn) checkTask(method string, t *schemas.Task) (*schemas.Task, error) {
	if t.ID == "" {
		return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "%s from %s answered a task without an id", method, redactRaw(c.ep.URL))
	}
	return t, nil
}
