package discovery

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// restWire speaks A2A 1.0 over HTTP+JSON: each operation a route below the
// endpoint's URL and tenant (the request's, else the endpoint's), 1.0's
// requests as bodies or query parameters, and an agent's errors as
// google.rpc.Status bodies of non-2xx answers.
type restWire struct{ *conn }

func (w restWire) sendMessage(ctx context.Context, req *schemas.SendMessageRequest) (*schemas.SendMessageResponse, error) {
	var res schemas.SendMessageResponse
	if err := w.call(ctx, http.MethodPost, req.Tenant, "/message:send", nil, req, &res); err != nil {
		return nil, err
	}
	return w.checkSend(&res)
}

func (w restWire) sendStreamingMessage(ctx context.Context, req *schemas.SendMessageRequest) (*Stream, error) {
	return w.stream(ctx, http.MethodPost, req.Tenant, "/message:stream", req, "", false)
}

func (w restWire) getTask(ctx context.Context, req *schemas.GetTaskRequest) (*schemas.Task, error) {
	var t schemas.Task
	q := url.Values{}
	if req.HistoryLength != nil {
		q.Set("historyLength", strconv.Itoa(int(*req.HistoryLength)))
	}
	if err := w.call(ctx, http.MethodGet, req.Tenant, "/tasks/"+url.PathEscape(req.ID), q, nil, &t); err != nil {
		return nil, err
	}
	return w.checkTask("GetTask", &t)
}

func (w restWire) cancelTask(ctx context.Context, req *schemas.CancelTaskRequest) (*schemas.Task, error) {
	var t schemas.Task
	if err := w.call(ctx, http.MethodPost, req.Tenant, "/tasks/"+url.PathEscape(req.ID)+":cancel", nil, req, &t); err != nil {
		return nil, err
	}
	return w.checkTask("CancelTask", &t)
}

func (w restWire) listTasks(ctx context.Context, req *schemas.ListTasksRequest) (*schemas.ListTasksResponse, error) {
	var res schemas.ListTasksResponse
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("contextId", req.ContextID)
	set("status", string(req.Status))
	set("pageToken", req.PageToken)
	if req.PageSize != nil {
		set("pageSize", strconv.Itoa(int(*req.PageSize)))
	}
	if req.HistoryLength != nil {
		set("historyLength", strconv.Itoa(int(*req.HistoryLength)))
	}
	if req.StatusTimestampAfter != nil {
		set("statusTimestampAfter", req.StatusTimestampAfter.UTC().Format(time.RFC3339Nano))
	}
	if req.IncludeArtifacts {
		set("includeArtifacts", "true")
	}
	if err := w.call(ctx, http.MethodGet, req.Tenant, "/tasks", q, nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (w restWire) subscribeToTask(ctx context.Context, req *schemas.SubscribeToTaskRequest, lastEventID string) (*Stream, error) {
	return w.stream(ctx, http.MethodGet, req.Tenant, "/tasks/"+url.PathEscape(req.ID)+":subscribe", nil, lastEventID, true)
}

func (w restWire) createPushConfig(ctx context.Context, cfg *schemas.TaskPushNotificationConfig) (*PushConfig, error) {
	var out PushConfig
	if err := w.call(ctx, http.MethodPost, cfg.Tenant, pushConfigsPath(cfg.TaskID), nil, cfg, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w restWire) getPushConfig(ctx context.Context, req *schemas.GetTaskPushNotificationConfigRequest) (*PushConfig, error) {
	var out PushConfig
	if err := w.call(ctx, http.MethodGet, req.Tenant, pushConfigsPath(req.TaskID)+"/"+url.PathEscape(req.ID), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (w restWire) listPushConfigs(ctx context.Context, req *schemas.ListTaskPushNotificationConfigsRequest) ([]PushConfig, error) {
	var list pushConfigList
	if err := w.call(ctx, http.MethodGet, req.Tenant, pushConfigsPath(req.TaskID), nil, nil, &list); err != nil {
		return nil, err
	}
	return list.Configs, nil
}

func (w restWire) deletePushConfig(ctx context.Context, req *schemas.GetTaskPushNotificationConfigRequest) error {
	var ignored json.RawMessage
	return w.call(ctx, http.MethodDelete, req.Tenant, pushConfigsPath(req.TaskID)+"/"+url.PathEscape(req.ID), nil, nil, &ignored)
}

// pushConfigsPath is the route of a task's push-notification configs.
func pushConfigsPath(taskID string) string {
	return "/tasks/" + url.PathEscape(taskID) + "/pushNotificationConfigs"
}

// address is the URL of an HTTP+JSON method: the endpoint, the tenant
// (the request's, else the endpoint's), the path and the query.
func (w restWire) address(tenant, path string, q url.Values) string {
	u := strings.TrimRight(w.ep.URL, "/")
	if tenant = cmp.Or(tenant, w.ep.Tenant); tenant != "" {
		u += "/" + url.PathEscape(tenant)
	}
	u += path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// call makes one unary call and decodes a 2xx answer into out.
func (w restWire) call(ctx context.Context, method, tenant, path string, q url.Values, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	req, res, b, err := w.exchange(ctx, method, w.address(tenant, path, q), body)
	if err != nil {
		return err
	}
	if res.StatusCode/100 != 2 {
		return w.statusError(req, res, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return schemas.Errorf(schemas.ErrInvalidAgentResponse, "%s %s: answer does not decode: %v", method, redact(req.URL), err)
	}
	return nil
}

// stream opens a stream whose events are 1.0's, bare; an event holding an
// error object is the agent's error.
func (w restWire) stream(ctx context.Context, method, tenant, path string, body any, lastEventID string, subscribe bool) (*Stream, error) {
	ends := streamEnd(subscribe)
	req, sc, err := w.streamRequest(ctx, method, w.address(tenant, path, nil), body, lastEventID)
	if err != nil {
		return nil, err
	}
	decode := func(data []byte) (*schemas.StreamResponse, bool, error) {
		var probe struct {
			Error *wireError `json:"error"`
		}
		if json.Unmarshal(data, &probe) == nil && probe.Error != nil {
			return nil, false, w.protocolError(probe.Error, nil)
		}
		ev, _, err := v1Event(data)
		if err != nil {
			return nil, false, err
		}
		return ev, ends(ev), nil
	}
	return w.openStream(req, sc, decode)
}
