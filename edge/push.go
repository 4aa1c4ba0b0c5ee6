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
		// Refused before the params are read, as the service would refuse
		// them (pushServed): the error a client gets does not depend on
		// what it sent.
		for _, m := range []string{opCreatePushConfig, opGetPushConfig, opListPushConfigs, opDeletePushConfig} {
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

func (s *Server) rpcPushNotSupported(_ context.Context, c *call) (any, error) {
	return nil, errPushNotSupported(c)
}

func errPushNotSupported(c *call) error {
	return schemas.Errorf(schemas.ErrPushNotSupported, "%s is not available: this agent does not support push notifications", c.method)
}

// pushServed refuses a push-config operation while the edge does not serve
// push (Config.Push), as the specification asks.
func (s *a2aService) pushServed(c *call) error {
	if !s.cfg.Push {
		return errPushNotSupported(c)
	}
	return nil
}

// CreateTaskPushNotificationConfig stores a config of the caller's task
// after the outbound policy accepted its URL (a webhook is a request this
// system will make: no metadata or private address unless allowed, HTTPS
// unless allowed otherwise). The config is recorded in the call's dialect,
// which its notifications are shaped in.
func (s *a2aService) CreateTaskPushNotificationConfig(ctx context.Context, c *call, cfg *schemas.TaskPushNotificationConfig) (*schemas.PushConfigRecord, error) {
	if err := s.pushServed(c); err != nil {
		return nil, err
	}
	if cfg.TaskID == "" {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "taskId is required")
	}
	if err := s.checkWebhookConfig(ctx, cfg); err != nil {
		return nil, err
	}
	return s.pushes.CreatePushConfig(ctx, c.owner(), *cfg, c.d.version)
}

// GetTaskPushNotificationConfig reads one config of the caller's task.
func (s *a2aService) GetTaskPushNotificationConfig(ctx context.Context, c *call, req *schemas.GetTaskPushNotificationConfigRequest) (*schemas.PushConfigRecord, error) {
	if err := s.pushServed(c); err != nil {
		return nil, err
	}
	if req.TaskID == "" {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "taskId is required")
	}
	return s.pushes.PushConfig(ctx, c.owner(), req.TaskID, req.ID)
}

// ListTaskPushNotificationConfigs reads every config of the caller's task:
// a task holds at most bus.MaxPushConfigsPerTask, so one page.
func (s *a2aService) ListTaskPushNotificationConfigs(ctx context.Context, c *call, req *schemas.ListTaskPushNotificationConfigsRequest) ([]schemas.PushConfigRecord, error) {
	if err := s.pushServed(c); err != nil {
		return nil, err
	}
	if req.TaskID == "" {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "taskId is required")
	}
	if req.PageSize < 0 {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "pageSize must not be negative")
	}
	return s.pushes.PushConfigs(ctx, c.owner(), req.TaskID)
}

// DeleteTaskPushNotificationConfig removes one config of the caller's
// task (the request names it as a get does).
func (s *a2aService) DeleteTaskPushNotificationConfig(ctx context.Context, c *call, req *schemas.GetTaskPushNotificationConfigRequest) error {
	if err := s.pushServed(c); err != nil {
		return err
	}
	if req.TaskID == "" {
		return schemas.Errorf(schemas.ErrInvalidParams, "taskId is required")
	}
	return s.pushes.DeletePushConfig(ctx, c.owner(), req.TaskID, req.ID)
}

// checkWebhookConfig checks a config's fields and its URL against the
// outbound policy.
func (s *a2aService) checkWebhookConfig(ctx context.Context, cfg *schemas.TaskPushNotificationConfig) error {
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
	pr, err := s.svc.CreateTaskPushNotificationConfig(ctx, c, &cfg)
	if err != nil {
		return nil, err
	}
	return viewOf(pr), nil
}

func (s *Server) rpcGetPushConfig(ctx context.Context, c *call) (any, error) {
	var req schemas.GetTaskPushNotificationConfigRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	pr, err := s.svc.GetTaskPushNotificationConfig(ctx, c, &req)
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

// rpcListPushConfigs answers every config of the task in one page.
func (s *Server) rpcListPushConfigs(ctx context.Context, c *call) (any, error) {
	var req schemas.ListTaskPushNotificationConfigsRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	prs, err := s.svc.ListTaskPushNotificationConfigs(ctx, c, &req)
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
	var req schemas.GetTaskPushNotificationConfigRequest
	if err := decodeParams(c.params, &req); err != nil {
		return nil, err
	}
	if err := s.svc.DeleteTaskPushNotificationConfig(ctx, c, &req); err != nil {
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
	pr, err := s.svc.CreateTaskPushNotificationConfig(ctx, c, cfg)
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
		pr, err := s.svc.GetTaskPushNotificationConfig(ctx, c, &schemas.GetTaskPushNotificationConfigRequest{TaskID: p.ID, ID: p.PushNotificationConfigID})
		if err != nil {
			return nil, err
		}
		return view03Of(pr), nil
	}
	prs, err := s.svc.ListTaskPushNotificationConfigs(ctx, c, &schemas.ListTaskPushNotificationConfigsRequest{TaskID: p.ID})
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
	prs, err := s.svc.ListTaskPushNotificationConfigs(ctx, c, &schemas.ListTaskPushNotificationConfigsRequest{TaskID: p.ID})
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
	if err := s.svc.DeleteTaskPushNotificationConfig(ctx, c, &schemas.GetTaskPushNotificationConfigRequest{TaskID: p.ID, ID: p.PushNotificationConfigID}); err != nil {
		return nil, err
	}
	return json.RawMessage("null"), nil // 0.3: "the result is null"
}
