package edge

import (
	"context"
	"encoding/json"
	"net/url"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// The push-notification config methods of both versions. Every one goes
// through the bus's task lifecycle (bus.CreatePushConfig and the rest),
// which reads the task as the caller's first: another caller's task is not
// found. While the edge does not serve push (Config.Push), each answers
// that push notifications are not supported, as the specification asks.

func (s *Server) pushMethods(v1, v03 map[string]methodFunc) {
	if !s.cfg.Push {
		for _, m := range []string{"CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig"} {
			v1[m] = s.rpcPushNotSupported
		}
		for _, m := range []string{"set", "get", "list", "delete"} {
			v03["tasks/pushNotificationConfig/"+m] = s.rpcPushNotSupported
		}
		return
	}
	v1["CreateTaskPushNotificationConfig"] = s.rpcCreatePushConfig
	v1["GetTaskPushNotificationConfig"] = s.rpcGetPushConfig
	v1["ListTaskPushNotificationConfigs"] = s.rpcListPushConfigs
	v1["DeleteTaskPushNotificationConfig"] = s.rpcDeletePushConfig
	v03["tasks/pushNotificationConfig/set"] = s.v03SetPushConfig
	v03["tasks/pushNotificationConfig/get"] = s.v03GetPushConfig
	v03["tasks/pushNotificationConfig/list"] = s.v03ListPushConfigs
	v03["tasks/pushNotificationConfig/delete"] = s.v03DeletePushConfig
}

// createPushConfig stores a config after the outbound policy accepted its
// URL (a webhook is a request this system will make: no metadata or
// private address unless allowed, HTTPS unless allowed otherwise).
func (s *Server) createPushConfig(ctx context.Context, c *call, cfg schemas.TaskPushNotificationConfig, dialect string) (*schemas.PushConfigRecord, error) {
	if cfg.TaskID == "" {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "taskId is required")
	}
	if err := s.checkWebhookConfig(ctx, &cfg); err != nil {
		return nil, err
	}
	return s.b.CreatePushConfig(ctx, c.owner(), cfg, dialect)
}

// checkWebhookConfig checks a config's fields and its URL against the
// outbound policy.
func (s *Server) checkWebhookConfig(ctx context.Context, cfg *schemas.TaskPushNotificationConfig) error {
	if err := bus.CheckPushConfig(cfg); err != nil {
		return err
	}
	if s.cfg.CheckWebhook != nil {
		u, _ := url.Parse(cfg.URL) // parsed by CheckPushConfig
		if err := s.cfg.CheckWebhook(ctx, u); err != nil {
			return schemas.Errorf(schemas.ErrInvalidParams, "url: %v", err)
		}
	}
	return nil
}

func (s *Server) rpcCreatePushConfig(ctx context.Context, c *call) (any, error) {
	var cfg schemas.TaskPushNotificationConfig
	if err := decodeParams(c.params, &cfg); err != nil {
		return nil, err
	}
	pr, err := s.createPushConfig(ctx, c, cfg, schemas.ProtocolVersion)
	if err != nil {
		return nil, err
	}
	return viewOf(pr), nil
}

// configRef reads the params of a 1.0 get or delete: a task and one of its
// configs.
func configRef(c *call) (schemas.GetTaskPushNotificationConfigRequest, error) {
	var req schemas.GetTaskPushNotificationConfigRequest
	if err := decodeParams(c.params, &req); err != nil {
		return req, err
	}
	if req.TaskID == "" {
		return req, schemas.Errorf(schemas.ErrInvalidParams, "taskId is required")
	}
	return req, nil
}

func (s *Server) rpcGetPushConfig(ctx context.Context, c *call) (any, error) {
	req, err := configRef(c)
	if err != nil {
		return nil, err
	}
	pr, err := s.b.PushConfig(ctx, c.owner(), req.TaskID, req.ID)
	if err != nil {
		return nil, err
	}
	return viewOf(pr), nil
}

// pushConfigView is a config as every method answers it (create, get,
// list, in every binding): its secrets withheld (see shown), and, while
// its webhook fails or after it was disabled, how delivery stands. Both
// are under members of a2abus's own name, which clients that do not know
// them ignore.
type pushConfigView struct {
	schemas.TaskPushNotificationConfig
	Delivery *pushDelivery `json:"a2abusDelivery,omitempty"`
	Redacted []string      `json:"a2abusRedacted,omitempty"`
}

// pushConfigView03 is pushConfigView in 0.3's shape.
type pushConfigView03 struct {
	schemas.V03TaskPushNotificationConfig
	Delivery *pushDelivery `json:"a2abusDelivery,omitempty"`
	Redacted []string      `json:"a2abusRedacted,omitempty"`
}

// pushDelivery is a config's delivery state, when it is not simply well.
type pushDelivery struct {
	Failing  *schemas.PushFailure `json:"failing,omitempty"`
	Disabled string               `json:"disabled,omitempty"`
}

func deliveryOf(pr *schemas.PushConfigRecord) *pushDelivery {
	if pr.Failing == nil && pr.Disabled == "" {
		return nil
	}
	return &pushDelivery{Failing: pr.Failing, Disabled: pr.Disabled}
}

// shown is a config as the edge shows it, to its owner and to admins
// alike: a config's secrets — its token and its authentication's
// credentials — are write-only (as A2A#1681 proposes for Get and List),
// so they are left out, and redacted names those that are set (an
// authentication scheme shown without credentials would otherwise read as
// "Bearer with a2abus's signed token"). Only the push sender reads the
// stored record, to deliver.
func shown(c schemas.TaskPushNotificationConfig) (_ schemas.TaskPushNotificationConfig, redacted []string) {
	if c.Token != "" {
		c.Token, redacted = "", append(redacted, "token")
	}
	if a := c.Authentication; a != nil && a.Credentials != "" {
		c.Authentication, redacted = &schemas.AuthenticationInfo{Scheme: a.Scheme}, append(redacted, "authentication.credentials")
	}
	return c, redacted
}

func viewOf(pr *schemas.PushConfigRecord) pushConfigView {
	c, redacted := shown(pr.Config)
	return pushConfigView{c, deliveryOf(pr), redacted}
}

func view03Of(pr *schemas.PushConfigRecord) pushConfigView03 {
	c, redacted := shown(pr.Config)
	return pushConfigView03{schemas.PushConfigToV03(c), deliveryOf(pr), redacted}
}

// rpcListPushConfigs answers every config of the task in one page: a task
// holds at most bus.MaxPushConfigsPerTask.
func (s *Server) rpcListPushConfigs(ctx context.Context, c *call) (any, error) {
	var req schemas.ListTaskPushNotificationConfigsRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	if req.TaskID == "" {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "taskId is required")
	}
	if req.PageSize < 0 {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "pageSize must not be negative")
	}
	prs, err := s.b.PushConfigs(ctx, c.owner(), req.TaskID)
	if err != nil {
		return nil, err
	}
	out := struct {
		Configs       []pushConfigView `json:"configs"`
		NextPageToken string           `json:"nextPageToken"`
	}{Configs: make([]pushConfigView, len(prs))}
	for i := range prs {
		out.Configs[i] = viewOf(&prs[i])
	}
	return out, nil
}

func (s *Server) rpcDeletePushConfig(ctx context.Context, c *call) (any, error) {
	req, err := configRef(c)
	if err != nil {
		return nil, err
	}
	if err := s.b.DeletePushConfig(ctx, c.owner(), req.TaskID, req.ID); err != nil {
		return nil, err
	}
	return struct{}{}, nil // google.protobuf.Empty
}

func (s *Server) v03SetPushConfig(ctx context.Context, c *call) (any, error) {
	var p schemas.V03TaskPushNotificationConfig
	if err := decodeParams(c.params, &p); err != nil {
		return nil, err
	}
	cfg, err := p.ToV1()
	if err != nil {
		return nil, err
	}
	pr, err := s.createPushConfig(ctx, c, *cfg, schemas.ProtocolVersion03)
	if err != nil {
		return nil, err
	}
	return view03Of(pr), nil
}

// v03GetPushConfig reads the config named, or — as 0.3's deprecated form
// without pushNotificationConfigId asks — the task's only one.
func (s *Server) v03GetPushConfig(ctx context.Context, c *call) (any, error) {
	var p schemas.V03PushConfigParams
	if err := decodeParams(c.params, &p); err != nil {
		return nil, err
	}
	if p.ID == "" {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "id (the task's) is required")
	}
	if p.PushNotificationConfigID != "" {
		pr, err := s.b.PushConfig(ctx, c.owner(), p.ID, p.PushNotificationConfigID)
		if err != nil {
			return nil, err
		}
		return view03Of(pr), nil
	}
	prs, err := s.b.PushConfigs(ctx, c.owner(), p.ID)
	if err != nil {
		return nil, err
	}
	switch len(prs) {
	case 0:
		return nil, schemas.Errorf(schemas.ErrTaskNotFound, "task %s has no push notification config", p.ID).With("taskId", p.ID)
	case 1:
		return view03Of(&prs[0]), nil
	}
	return nil, schemas.Errorf(schemas.ErrInvalidParams, "task %s has %d push notification configs: name one with pushNotificationConfigId", p.ID, len(prs))
}

func (s *Server) v03ListPushConfigs(ctx context.Context, c *call) (any, error) {
	var p schemas.V03PushConfigParams
	if err := decodeParams(c.params, &p); err != nil {
		return nil, err
	}
	if p.ID == "" {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "id (the task's) is required")
	}
	prs, err := s.b.PushConfigs(ctx, c.owner(), p.ID)
	if err != nil {
		return nil, err
	}
	out := make([]pushConfigView03, len(prs))
	for i := range prs {
		out[i] = view03Of(&prs[i])
	}
	return out, nil
}

func (s *Server) v03DeletePushConfig(ctx context.Context, c *call) (any, error) {
	var p schemas.V03PushConfigParams
	if err := decodeParams(c.params, &p); err != nil {
		return nil, err
	}
	if p.ID == "" || p.PushNotificationConfigID == "" {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "id (the task's) and pushNotificationConfigId are required")
	}
	if err := s.b.DeletePushConfig(ctx, c.owner(), p.ID, p.PushNotificationConfigID); err != nil {
		return nil, err
	}
	return json.RawMessage("null"), nil // 0.3: "the result is null"
}
