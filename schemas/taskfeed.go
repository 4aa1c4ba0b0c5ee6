package schemas

import "time"

// The a2abus task feed: an extension method of the 1.0 JSON-RPC binding
// that streams a summary of every change of the tasks a caller may see
// (the live dashboard's task list follows it). It carries who, where and
// what state, never a message, an artifact or metadata.

// MethodWatchTasks is the feed's JSON-RPC method. Its name is not in
// A2A's grammar of 1.0 methods (PascalCase) nor 0.3's (with a slash): an
// extension method (A2A's extensions topic), answered as a stream like
// SubscribeToTask.
const MethodWatchTasks = "a2abus.WatchTasks"

// WatchTasksRequest is the feed's params. Without AllAgents it carries
// the tasks of the agent whose endpoint was called, as ListTasks lists
// them; with it, the caller's tasks of every agent.
type WatchTasksRequest struct {
	AllAgents bool `json:"allAgents,omitempty"`
}

// TaskChange is one event of the feed: a write of a task the caller may
// see, summarised.
type TaskChange struct {
	TaskID    string    `json:"taskId"`
	ContextID string    `json:"contextId,omitempty"`
	Agent     string    `json:"agent"`
	State     TaskState `json:"state"`
	// Timestamp is the task's status time.
	Timestamp time.Time `json:"timestamp"`
}

// TaskChangeEvent is the result of each event of the feed's stream.
type TaskChangeEvent struct {
	TaskChange *TaskChange `json:"taskChange"`
}
