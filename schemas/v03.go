package schemas

// A2A 0.3 push-notification shapes (types/src/types.ts at v0.3.0) and their
// conversion to and from the 1.0 TaskPushNotificationConfig. The other 0.3
// shapes and conversions are in a2a03.go.
//
// 0.3 nests the webhook under pushNotificationConfig beside the taskId and
// lets authentication list several schemes; 1.0 flattens the config and
// keeps one scheme. Converting to 1.0 keeps the first scheme, the one the
// client prefers.

// V03PushNotificationAuthenticationInfo is 0.3
// PushNotificationAuthenticationInfo: the HTTP auth schemes a webhook
// accepts and optional credentials.
type V03PushNotificationAuthenticationInfo struct {
	Schemes     []string `json:"schemes"`
	Credentials string   `json:"credentials,omitempty"`
}

// V03PushNotificationConfig is a 0.3 webhook registration (also the shape of
// configuration.pushNotificationConfig in message/send).
type V03PushNotificationConfig struct {
	ID             string                                 `json:"id,omitempty"`
	URL            string                                 `json:"url"`
	Token          string                                 `json:"token,omitempty"`
	Authentication *V03PushNotificationAuthenticationInfo `json:"authentication,omitempty"`
}

// V03TaskPushNotificationConfig is the params and result of
// tasks/pushNotificationConfig/set and the result of get and list.
type V03TaskPushNotificationConfig struct {
	TaskID                 string                    `json:"taskId"`
	PushNotificationConfig V03PushNotificationConfig `json:"pushNotificationConfig"`
}

// ToV1 converts a 0.3 webhook registration for the task taskID ("" inside a
// message/send configuration). It returns an ErrInvalidParams occurrence
// naming the field when url is missing or authentication lists no scheme.
func (c *V03PushNotificationConfig) ToV1(taskID string) (*TaskPushNotificationConfig, error) {
	return c.toV1("pushNotificationConfig", taskID)
}

func (c *V03PushNotificationConfig) toV1(path, taskID string) (*TaskPushNotificationConfig, error) {
	if c.URL == "" {
		return nil, Errorf(ErrInvalidParams, "%s.url is required", path)
	}
	out := &TaskPushNotificationConfig{ID: c.ID, TaskID: taskID, URL: c.URL, Token: c.Token}
	if a := c.Authentication; a != nil {
		if len(a.Schemes) == 0 || a.Schemes[0] == "" {
			return nil, Errorf(ErrInvalidParams, "%s.authentication.schemes must name at least one scheme", path)
		}
		out.Authentication = &AuthenticationInfo{Scheme: a.Schemes[0], Credentials: a.Credentials}
	}
	return out, nil
}

// ToV1 converts tasks/pushNotificationConfig/set params. It returns an
// ErrInvalidParams occurrence naming the field when taskId or
// pushNotificationConfig.url is missing.
func (c *V03TaskPushNotificationConfig) ToV1() (*TaskPushNotificationConfig, error) {
	if c.TaskID == "" {
		return nil, Errorf(ErrInvalidParams, "taskId is required")
	}
	return c.PushNotificationConfig.toV1("pushNotificationConfig", c.TaskID)
}

// V03PushConfigParams is the params of tasks/pushNotificationConfig/get,
// list and delete: the task's id and, for get and delete, the config's
// (get may leave it out, as 0.3's deprecated TaskIdParams form does).
type V03PushConfigParams struct {
	ID                       string         `json:"id"`
	PushNotificationConfigID string         `json:"pushNotificationConfigId,omitempty"`
	Metadata                 map[string]any `json:"metadata,omitempty"`
}

// PushConfigToV03 converts a 1.0 webhook registration to its 0.3 shape. The
// tenant has no 0.3 counterpart and is dropped.
func PushConfigToV03(c TaskPushNotificationConfig) V03TaskPushNotificationConfig {
	out := V03TaskPushNotificationConfig{TaskID: c.TaskID,
		PushNotificationConfig: V03PushNotificationConfig{ID: c.ID, URL: c.URL, Token: c.Token}}
	if a := c.Authentication; a != nil {
		out.PushNotificationConfig.Authentication = &V03PushNotificationAuthenticationInfo{
			Schemes: []string{a.Scheme}, Credentials: a.Credentials}
	}
	return out
}
