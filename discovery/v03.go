package discovery

import (
	"context"
	"encoding/json"

	"github.com/a2abus/a2abus/schemas"
)

// v03Wire speaks A2A 0.3 over JSON-RPC: message/send, message/stream,
// tasks/get, tasks/cancel, tasks/resubscribe and
// tasks/pushNotificationConfig/*, converted to and from 1.0 through
// schemas. 0.3 cannot list tasks. A card tells 0.3 from the older dialect
// only by what it leaves out, so this adapter and legacyWire stand in for
// each other (see inDialect).
type v03Wire struct{ *conn }

func (w v03Wire) sendMessage(ctx context.Context, req *schemas.SendMessageRequest) (*schemas.SendMessageResponse, error) {
	var raw json.RawMessage
	if err := w.rpc(ctx, "message/send", schemas.SendParamsToV03(req), &raw); err != nil {
		return nil, err
	}
	r, err := schemas.ResultFromV03(raw)
	if err != nil {
		return nil, err
	}
	if r.Task == nil && r.Message == nil {
		return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "message/send answered an event, not a task or message")
	}
	return &schemas.SendMessageResponse{Task: r.Task, Message: r.Message}, nil
}

func (w v03Wire) sendStreamingMessage(ctx context.Context, req *schemas.SendMessageRequest) (*Stream, error) {
	return w.rpcStream(ctx, "message/stream", schemas.SendParamsToV03(req), "", false, v03Event(false))
}

func (w v03Wire) getTask(ctx context.Context, req *schemas.GetTaskRequest) (*schemas.Task, error) {
	return w.task(ctx, "tasks/get", schemas.V03TaskQueryParams{ID: req.ID, HistoryLength: req.HistoryLength})
}

func (w v03Wire) cancelTask(ctx context.Context, req *schemas.CancelTaskRequest) (*schemas.Task, error) {
	return w.task(ctx, "tasks/cancel", schemas.V03TaskIDParams{ID: req.ID, Metadata: req.Metadata})
}

func (w v03Wire) listTasks(context.Context, *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error) {
	return nil, schemas.Errorf(schemas.ErrUnsupportedOperation, "A2A 0.3 agents cannot list tasks")
}

func (w v03Wire) subscribeToTask(ctx context.Context, req *schemas.SubscribeToTaskRequest, lastEventID string) (*Stream, error) {
	return w.rpcStream(ctx, "tasks/resubscribe", schemas.V03TaskIDParams{ID: req.ID}, lastEventID, true, v03Event(true))
}

func (w v03Wire) createPushConfig(ctx context.Context, cfg *schemas.TaskPushNotificationConfig) (*PushConfig, error) {
	var p pushConfig03
	if err := w.rpc(ctx, "tasks/pushNotificationConfig/set", schemas.PushConfigToV03(*cfg), &p); err != nil {
		return nil, err
	}
	return p.v1()
}

func (w v03Wire) getPushConfig(ctx context.Context, req *schemas.GetTaskPushNotificationConfigRequest) (*PushConfig, error) {
	var p pushConfig03
	if err := w.rpc(ctx, "tasks/pushNotificationConfig/get", schemas.V03PushConfigParams{ID: req.TaskID, PushNotificationConfigID: req.ID}, &p); err != nil {
		return nil, err
	}
	return p.v1()
}

func (w v03Wire) listPushConfigs(ctx context.Context, req *schemas.ListTaskPushNotificationConfigsRequest) ([]PushConfig, error) {
	var raw json.RawMessage
	if err := w.rpc(ctx, "tasks/pushNotificationConfig/list", schemas.V03PushConfigParams{ID: req.TaskID}, &raw); err != nil {
		return nil, err
	}
	var ps []pushConfig03
	if err := json.Unmarshal(raw, &ps); err != nil {
		return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "tasks/pushNotificationConfig/list answered something other than a list of configs")
	}
	out := make([]PushConfig, 0, len(ps))
	for _, p := range ps {
		c, err := p.v1()
		if err != nil {
			return nil, err
		}
		out = append(out, *c)
	}
	return out, nil
}

func (w v03Wire) deletePushConfig(ctx context.Context, req *schemas.GetTaskPushNotificationConfigRequest) error {
	var ignored json.RawMessage
	return w.rpc(ctx, "tasks/pushNotificationConfig/delete", schemas.V03PushConfigParams{ID: req.TaskID, PushNotificationConfigID: req.ID}, &ignored)
}

func (w v03Wire) task(ctx context.Context, method string, params any) (*schemas.Task, error) {
	var raw json.RawMessage
	if err := w.rpc(ctx, method, params, &raw); err != nil {
		return nil, err
	}
	return taskAnswer(method, raw)
}

// taskAnswer reads a task result of tasks/get or tasks/cancel, methods
// 0.3 shares with the older dialect: a 0.3 task (it has a "kind"), else a
// task of the older dialect, since the card's guess between the two may
// be wrong (see inDialect).
func taskAnswer(method string, raw json.RawMessage) (*schemas.Task, error) {
	var head struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(raw, &head) == nil && head.Kind == "" {
		t, err := schemas.LegacyAgentTaskToV1(raw)
		if err != nil {
			return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "%s: %s", method, err.Error())
		}
		return &t, nil
	}
	r, err := schemas.ResultFromV03(raw)
	if err != nil {
		return nil, err
	}
	if r.Task == nil {
		return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "%s answered something other than a task", method)
	}
	return r.Task, nil
}

// v03Event reads the events of a 0.3 stream (subscribe: of
// tasks/resubscribe). 0.3 marks the last status update final; the mark
// ends a send's stream, not a subscription, which goes on past an
// interrupted state's final mark while the agent keeps the stream open.
func v03Event(subscribe bool) func([]byte) (*schemas.StreamResponse, bool, error) {
	return func(raw []byte) (*schemas.StreamResponse, bool, error) {
		ev, err := schemas.ResultFromV03(raw)
		if err != nil {
			return nil, false, err
		}
		var mark struct {
			Final bool `json:"final"`
		}
		_ = json.Unmarshal(raw, &mark)
		return &ev, mark.Final && !subscribe, nil
	}
}

// pushConfig03 is a 0.3 config as an agent answers it.
type pushConfig03 struct {
	schemas.V03TaskPushNotificationConfig
	Delivery *PushDelivery `json:"a2abusDelivery,omitempty"`
	Redacted []string      `json:"a2abusRedacted,omitempty"`
}

func (p pushConfig03) v1() (*PushConfig, error) {
	c, err := p.ToV1()
	if err != nil {
		return nil, schemas.Errorf(schemas.ErrInvalidAgentResponse, "a push notification config: %v", err)
	}
	return &PushConfig{TaskPushNotificationConfig: *c, Delivery: p.Delivery, Redacted: p.Redacted}, nil
}
