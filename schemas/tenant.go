package schemas

// TenantField is where a request names its tenant: the one field every
// binding's adapter reads (a gRPC call has no path, so its agent too, see
// AgentTenant) and a client fills from the endpoint's interface. As a
// method expression ((*GetTaskRequest).TenantField) it is the accessor
// generic code over the requests takes.

func (r *SendMessageRequest) TenantField() *string                     { return &r.Tenant }
func (r *GetTaskRequest) TenantField() *string                         { return &r.Tenant }
func (r *ListTasksRequest) TenantField() *string                       { return &r.Tenant }
func (r *CancelTaskRequest) TenantField() *string                      { return &r.Tenant }
func (r *SubscribeToTaskRequest) TenantField() *string                 { return &r.Tenant }
func (r *TaskPushNotificationConfig) TenantField() *string             { return &r.Tenant }
func (r *GetTaskPushNotificationConfigRequest) TenantField() *string   { return &r.Tenant }
func (r *ListTaskPushNotificationConfigsRequest) TenantField() *string { return &r.Tenant }
