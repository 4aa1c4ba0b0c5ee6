package pbwire

import "github.com/a2abus/a2abus/schemas"

// The tenant field of each request type: a gRPC call has no path, so the
// tenant is where it names its agent (schemas.AgentTenant), which the
// server reads and the client fills from the endpoint's interface.

func SendTenant(r *schemas.SendMessageRequest) *string                         { return &r.Tenant }
func GetTenant(r *schemas.GetTaskRequest) *string                              { return &r.Tenant }
func ListTenant(r *schemas.ListTasksRequest) *string                           { return &r.Tenant }
func CancelTenant(r *schemas.CancelTaskRequest) *string                        { return &r.Tenant }
func SubscribeTenant(r *schemas.SubscribeToTaskRequest) *string                { return &r.Tenant }
func PushTenant(r *schemas.TaskPushNotificationConfig) *string                 { return &r.Tenant }
func PushGetTenant(r *schemas.GetTaskPushNotificationConfigRequest) *string    { return &r.Tenant }
func PushListTenant(r *schemas.ListTaskPushNotificationConfigsRequest) *string { return &r.Tenant }
