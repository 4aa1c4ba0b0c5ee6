package discovery

import (
	"context"
	"encoding/json"

	"github.com/a2abus/a2abus/schemas"
)

// jsonrpcWire speaks A2A 1.0 over JSON-RPC: 1.0's methods posted to the
// endpoint's URL with 1.0's requests as params, the endpoint's tenant
// filled into a request that names none.
type jsonrpcWire struct{ *conn }

func (w jsonrpcWire) sendMessage(ctx context.Context, req *schemas.SendMessageRequest) (*schemas.SendMessageResponse, error) {
	var res schemas.SendMessageResponse
	req = withTenant(w.ep.Tenant, req, (*schemas.SendMessageRequest).TenantField)
	if err := w.rpc(ctx, "SendMessage", req, &res); err != nil {
		return nil, err
	}
	return w.checkSend(&res)
}

func (w jsonrpcWire) sendStreamingMessage(ctx context.Context, req *schemas.SendMessageRequest) (*Stream, error) {
	req = withTenant(w.ep.Tenant, req, (*schemas.SendMessageRequest).TenantField)
	return w.rpcStream(ctx, "SendStreamingMessage", req, "", false, v1Event)
}

func (w jsonrpcWire) getTask(ctx context.Context, req *schemas.GetTaskRequest) (*schemas.Task, error) {
	return w.task(ctx, "GetTask", withTenant(w.ep.Tenant, req, (*schemas.GetTaskRequest).TenantField))
}

func (w jsonrpcWire) cancelTask(ctx context.Context, req *schemas.CancelTaskRequest) (*schemas.Task, error) {
	return w.task(ctx, "CancelTask", withTenant(w.ep.Tenant, req, (*schemas.CancelTaskRequest).TenantField))
}

func (w jsonrpcWire) listTasks(ctx context.Context, req *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error) {
	var res schemas.ListTasksResponse
	req = withTenant(w.ep.Tenant, req, (*schemas.ListTasksRequest).TenantField)
	if err := w.rpc(ctx, "ListTasks", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (w jsonrpcWire) subscribeToTask(ctx context.Context, req *schemas.SubscribeToTaskRequest, lastEventID string) (*Stream, error) {
	req = withTenant(w.ep.Tenant, req, (*schemas.SubscribeToTaskRequest).TenantField)
	return w.rpcStream(ctx, "SubscribeToTask", req, lastEventID, true, v1Event)
}

func (w jsonrpcWire) createPushConfig(ctx context.Context, cfg *schemas.TaskPushNotificationConfig) (*PushConfig, error) {
	var out PushConfig
	cfg = withTenant(w.ep.Tenant, cfg, (*schemas.TaskPushNotificationConfig).TenantField)
	if err := w.rpc(ctx, "CreateTaskPushNotificationConfig", cfg, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w jsonrpcWire) getPushConfig(ctx context.Context, req *schemas.GetTaskPushNotificationConfigRequest) (*PushConfig, error) {
	var out PushConfig
	req = withTenant(w.ep.Tenant, req, (*schemas.GetTaskPushNotificationConfigRequest).TenantField)
	if err := w.rpc(ctx, "GetTaskPushNotificationConfig", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w jsonrpcWire) listPushConfigs(ctx context.Context, req *schemas.ListTaskPushNotificationConfigsRequest) ([]PushConfig, error) {
	var list pushConfigList
	req = withTenant(w.ep.Tenant, req, (*schemas.ListTaskPushNotificationConfigsRequest).TenantField)
	if err := w.rpc(ctx, "ListTaskPushNotificationConfigs", req, &list); err != nil {
		return nil, err
	}
	return list.Configs, nil
}

func (w jsonrpcWire) deletePushConfig(ctx context.Context, req *schemas.GetTaskPushNotificationConfigRequest) error {
	var ignored json.RawMessage
	req = withTenant(w.ep.Tenant, req, (*schemas.GetTaskPushNotificationConfigRequest).TenantField)
	return w.rpc(ctx, "DeleteTaskPushNotificationConfig", req, &ignored)
}

// task calls a method that answers a task.
func (w jsonrpcWire) task(ctx context.Context, method string, params any) (*schemas.Task, error) {
	var t schemas.Task
	if err := w.rpc(ctx, method, params, &t); err != nil {
		return nil, err
	}
	return w.checkTask(method, &t)
}

// withTenant fills a tenant (the endpoint's) into a 1.0 JSON-RPC request
// that names none, on a copy: the caller's request is not changed. field
// picks the request's tenant field.
func withTenant[T any](tenant string, req *T, field func(*T) *string) *T {
	if tenant == "" || *field(req) != "" {
		return req
	}
	r := *req
	*field(&r) = tenant
	return &r
}
