package discovery

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/a2abus/a2abus/schemas"
)

// Push-notification configs of an agent's tasks, on every binding the
// client speaks: A2A 1.0 JSON-RPC and HTTP+JSON, and 0.3's
// tasks/pushNotificationConfig/*. The older tasks/send dialect has none.

// PushConfig is a config as an agent answers it; Delivery is a2abus's
// report of how delivery to it stands (nil from other servers, and while
// all is well). a2abus never answers a config's secrets: Redacted names
// those set but withheld ("token", "authentication.credentials").
type PushConfig struct {
	schemas.TaskPushNotificationConfig
	Delivery *PushDelivery `json:"a2abusDelivery,omitempty"`
	Redacted []string      `json:"a2abusRedacted,omitempty"`
}

// PushDelivery is a failing or disabled config's state, as a2abus reports
// it.
type PushDelivery struct {
	Failing  *schemas.PushFailure `json:"failing,omitempty"`
	Disabled string               `json:"disabled,omitempty"`
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

func (c *Client) noPush() error {
	return schemas.Errorf(schemas.ErrPushNotSupported, "%s speaks the older tasks/send dialect, which has no push notification configs", redactRaw(c.ep.URL))
}

// CreatePushConfig registers a config for a task (cfg.TaskID) and returns
// it as stored, with its id.
func (c *Client) CreatePushConfig(ctx context.Context, cfg schemas.TaskPushNotificationConfig) (*PushConfig, error) {
	var out PushConfig
	switch {
	case c.dialect() == dialectLegacy:
		return nil, c.noPush()
	case c.rest():
		if err := c.restCall(ctx, http.MethodPost, cfg.Tenant, "/tasks/"+url.PathEscape(cfg.TaskID)+"/pushNotificationConfigs", nil, cfg, &out); err != nil {
			return nil, err
		}
	case c.v03():
		var p pushConfig03
		if err := c.rpc(ctx, "tasks/pushNotificationConfig/set", schemas.PushConfigToV03(cfg), &p); err != nil {
			return nil, err
		}
		return p.v1()
	default:
		cfg = *withTenant(c.ep.Tenant, &cfg, func(r *schemas.TaskPushNotificationConfig) *string { return &r.Tenant })
		if err := c.rpc(ctx, "CreateTaskPushNotificationConfig", cfg, &out); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// PushConfig reads one config of a task.
func (c *Client) PushConfig(ctx context.Context, taskID, id string) (*PushConfig, error) {
	var out PushConfig
	switch {
	case c.dialect() == dialectLegacy:
		return nil, c.noPush()
	case c.rest():
		if err := c.restCall(ctx, http.MethodGet, c.ep.Tenant, "/tasks/"+url.PathEscape(taskID)+"/pushNotificationConfigs/"+url.PathEscape(id), nil, nil, &out); err != nil {
			return nil, err
		}
	case c.v03():
		var p pushConfig03
		if err := c.rpc(ctx, "tasks/pushNotificationConfig/get", schemas.V03PushConfigParams{ID: taskID, PushNotificationConfigID: id}, &p); err != nil {
			return nil, err
		}
		return p.v1()
	default:
		req := schemas.GetTaskPushNotificationConfigRequest{Tenant: c.ep.Tenant, TaskID: taskID, ID: id}
		if err := c.rpc(ctx, "GetTaskPushNotificationConfig", req, &out); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// PushConfigs lists the configs of a task.
func (c *Client) PushConfigs(ctx context.Context, taskID string) ([]PushConfig, error) {
	var list struct {
		Configs []PushConfig `json:"configs"`
	}
	switch {
	case c.dialect() == dialectLegacy:
		return nil, c.noPush()
	case c.rest():
		if err := c.restCall(ctx, http.MethodGet, c.ep.Tenant, "/tasks/"+url.PathEscape(taskID)+"/pushNotificationConfigs", nil, nil, &list); err != nil {
			return nil, err
		}
	case c.v03():
		var raw json.RawMessage
		if err := c.rpc(ctx, "tasks/pushNotificationConfig/list", schemas.V03PushConfigParams{ID: taskID}, &raw); err != nil {
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
	default:
		req := schemas.ListTaskPushNotificationConfigsRequest{Tenant: c.ep.Tenant, TaskID: taskID}
		if err := c.rpc(ctx, "ListTaskPushNotificationConfigs", req, &list); err != nil {
			return nil, err
		}
	}
	return list.Configs, nil
}

// DeletePushConfig deletes a config of a task (one that is not there is
// not an error: the specification makes delete idempotent).
func (c *Client) DeletePushConfig(ctx context.Context, taskID, id string) error {
	var ignored json.RawMessage
	switch {
	case c.dialect() == dialectLegacy:
		return c.noPush()
	case c.rest():
		return c.restCall(ctx, http.MethodDelete, c.ep.Tenant, "/tasks/"+url.PathEscape(taskID)+"/pushNotificationConfigs/"+url.PathEscape(id), nil, nil, &ignored)
	case c.v03():
		return c.rpc(ctx, "tasks/pushNotificationConfig/delete", schemas.V03PushConfigParams{ID: taskID, PushNotificationConfigID: id}, &ignored)
	default:
		req := schemas.GetTaskPushNotificationConfigRequest{Tenant: c.ep.Tenant, TaskID: taskID, ID: id}
		return c.rpc(ctx, "DeleteTaskPushNotificationConfig", req, &ignored)
	}
}
