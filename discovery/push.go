package discovery

import (
	"context"

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

// pushConfigList is a list of configs as 1.0 answers it.
type pushConfigList struct {
	Configs []PushConfig `json:"configs"`
}

// CreatePushConfig registers a config for a task (cfg.TaskID) and returns
// it as stored, with its id.
func (c *Client) CreatePushConfig(ctx context.Context, cfg schemas.TaskPushNotificationConfig) (*PushConfig, error) {
	return c.wire().createPushConfig(ctx, &cfg)
}

// PushConfig reads one config of a task.
func (c *Client) PushConfig(ctx context.Context, taskID, id string) (*PushConfig, error) {
	return c.wire().getPushConfig(ctx, &schemas.GetTaskPushNotificationConfigRequest{TaskID: taskID, ID: id})
}

// PushConfigs lists the configs of a task.
func (c *Client) PushConfigs(ctx context.Context, taskID string) ([]PushConfig, error) {
	return c.wire().listPushConfigs(ctx, &schemas.ListTaskPushNotificationConfigsRequest{TaskID: taskID})
}

// DeletePushConfig deletes a config of a task (one that is not there is
// not an error: the specification makes delete idempotent).
func (c *Client) DeletePushConfig(ctx context.Context, taskID, id string) error {
	return c.wire().deletePushConfig(ctx, &schemas.GetTaskPushNotificationConfigRequest{TaskID: taskID, ID: id})
}
