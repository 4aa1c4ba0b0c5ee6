package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// This file holds the A2A 1.0 wire types. Field names and enum strings follow
// ProtoJSON of specification/a2a.proto (package lf.a2a.v1): camelCase names,
// enums by their full proto names, bytes as base64, Timestamp as RFC 3339 UTC.
// Unset optional fields are omitted on output; unknown fields are ignored on
// input (encoding/json does that by default).

// TaskState is the lifecycle state of a task (proto enum TaskState).
type TaskState string

// The TaskState values. See state.go for the classes and transitions.
const (
	TaskStateUnspecified   TaskState = "TASK_STATE_UNSPECIFIED"
	TaskStateSubmitted     TaskState = "TASK_STATE_SUBMITTED"
	TaskStateWorking       TaskState = "TASK_STATE_WORKING"
	TaskStateCompleted     TaskState = "TASK_STATE_COMPLETED"
	TaskStateFailed        TaskState = "TASK_STATE_FAILED"
	TaskStateCanceled      TaskState = "TASK_STATE_CANCELED"
	TaskStateInputRequired TaskState = "TASK_STATE_INPUT_REQUIRED"
	TaskStateRejected      TaskState = "TASK_STATE_REJECTED"
	TaskStateAuthRequired  TaskState = "TASK_STATE_AUTH_REQUIRED"
)

// Role says who wrote a message (proto enum Role).
type Role string

// The Role values.
const (
	RoleUnspecified Role = "ROLE_UNSPECIFIED"
	RoleUser        Role = "ROLE_USER"
	RoleAgent       Role = "ROLE_AGENT"
)

// Part is one piece of message or artifact content. Exactly one of Text, Raw,
// URL or Data is set (proto oneof content); MediaType, Filename and Metadata
// apply to every kind. An empty file is a Raw that is empty but not nil,
// and is written as "raw":"" (omitzero), so it stays a file when read back.
type Part struct {
	Text      *string         `json:"text,omitempty"`
	Raw       []byte          `json:"raw,omitzero"`
	URL       *string         `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
}

// TextPart returns a Part holding text.
func TextPart(s string) Part { return Part{Text: &s} }

// DataPart returns a Part holding a JSON value. It panics only if v cannot be
// marshalled, which is a programming error.
func DataPart(v any) Part {
	b, err := json.Marshal(v)
	if err != nil {
		panic("schemas.DataPart: " + err.Error())
	}
	return Part{Data: b, MediaType: "application/json"}
}

// FilePart returns a Part holding inline bytes with a file name and media type.
func FilePart(raw []byte, filename, mediaType string) Part {
	return Part{Raw: raw, Filename: filename, MediaType: mediaType}
}

// URLPart returns a Part that points at content by URL.
func URLPart(url, filename, mediaType string) Part {
	return Part{URL: &url, Filename: filename, MediaType: mediaType}
}

// Message is one turn of communication between a client and an agent.
type Message struct {
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             Role           `json:"role"`
	Parts            []Part         `json:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
}

// Text returns the message's text parts joined by newlines.
func (m *Message) Text() string {
	if m == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Text == nil {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(*p.Text)
	}
	return b.String()
}

// TaskStatus is the current state of a task with an optional message.
type TaskStatus struct {
	State     TaskState  `json:"state"`
	Message   *Message   `json:"message,omitempty"`
	Timestamp *Timestamp `json:"timestamp,omitempty"`
}

// Artifact is an output of a task.
type Artifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []Part         `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Extensions  []string       `json:"extensions,omitempty"`
}

// Task is the unit of work an agent performs for a client.
type Task struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId,omitempty"`
	Status    TaskStatus     `json:"status"`
	Artifacts []Artifact     `json:"artifacts,omitempty"`
	History   []Message      `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	// Generation is set only in answers to A2A 1.1 calls (see
	// Generation); the stored task leaves it out (TaskRecord.Generation
	// keeps it), so 1.0 clients never see a field they do not know.
	Generation Generation `json:"generation,omitempty"`
}

// TaskStatusUpdateEvent reports a status change of a task.
type TaskStatusUpdateEvent struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	// Generation is the task's generation after this event (A2A 1.1;
	// set only for 1.1 calls, as Task.Generation).
	Generation Generation `json:"generation,omitempty"`
}

// TaskArtifactUpdateEvent reports a new artifact or a chunk of one. Append
// adds the parts to the artifact with the same ID sent earlier; LastChunk
// marks the final chunk of that artifact.
type TaskArtifactUpdateEvent struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Artifact  Artifact       `json:"artifact"`
	Append    bool           `json:"append,omitempty"`
	LastChunk bool           `json:"lastChunk,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	// Generation: see TaskStatusUpdateEvent.Generation.
	Generation Generation `json:"generation,omitempty"`
}

// SendMessageResponse is the result of SendMessage: exactly one of Task or
// Message is set.
type SendMessageResponse struct {
	Task    *Task    `json:"task,omitempty"`
	Message *Message `json:"message,omitempty"`
}

// StreamResponse is one event of a stream: exactly one field is set.
type StreamResponse struct {
	Task           *Task                    `json:"task,omitempty"`
	Message        *Message                 `json:"message,omitempty"`
	StatusUpdate   *TaskStatusUpdateEvent   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *TaskArtifactUpdateEvent `json:"artifactUpdate,omitempty"`
}

// SendMessageConfiguration holds the optional settings of a send.
type SendMessageConfiguration struct {
	AcceptedOutputModes        []string                    `json:"acceptedOutputModes,omitempty"`
	TaskPushNotificationConfig *TaskPushNotificationConfig `json:"taskPushNotificationConfig,omitempty"`
	HistoryLength              *int32                      `json:"historyLength,omitempty"`
	ReturnImmediately          bool                        `json:"returnImmediately,omitempty"`
	// IfGenerationMatch (A2A 1.1) refuses a continuation of a task whose
	// generation is not this one with ErrTaskGenerationMismatch, decided
	// in the write that stores the message; ignored for a new task.
	IfGenerationMatch *Generation `json:"ifGenerationMatch,omitempty"`
}

// SendMessageRequest is the params of SendMessage and SendStreamingMessage.
type SendMessageRequest struct {
	Tenant        string                    `json:"tenant,omitempty"`
	Message       *Message                  `json:"message"`
	Configuration *SendMessageConfiguration `json:"configuration,omitempty"`
	Metadata      map[string]any            `json:"metadata,omitempty"`
}

// GetTaskRequest is the params of GetTask.
type GetTaskRequest struct {
	Tenant        string `json:"tenant,omitempty"`
	ID            string `json:"id"`
	HistoryLength *int32 `json:"historyLength,omitempty"`
	// CurrentGeneration (A2A 1.1) holds the answer until the task's
	// generation is greater (a long poll), bounded by the edge's timeout.
	CurrentGeneration *Generation `json:"currentGeneration,omitempty"`
}

// CancelTaskRequest is the params of CancelTask.
type CancelTaskRequest struct {
	Tenant   string         `json:"tenant,omitempty"`
	ID       string         `json:"id"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// SubscribeToTaskRequest is the params of SubscribeToTask.
type SubscribeToTaskRequest struct {
	Tenant string `json:"tenant,omitempty"`
	ID     string `json:"id"`
}

// ListTasksRequest is the params of ListTasks.
type ListTasksRequest struct {
	Tenant               string     `json:"tenant,omitempty"`
	ContextID            string     `json:"contextId,omitempty"`
	Status               TaskState  `json:"status,omitempty"`
	PageSize             *int32     `json:"pageSize,omitempty"`
	PageToken            string     `json:"pageToken,omitempty"`
	HistoryLength        *int32     `json:"historyLength,omitempty"`
	StatusTimestampAfter *Timestamp `json:"statusTimestampAfter,omitempty"`
	IncludeArtifacts     bool       `json:"includeArtifacts,omitempty"`
}

// ListTasksResponse is the result of ListTasks. NextPageToken is always
// present ("" on the last page).
type ListTasksResponse struct {
	Tasks         []Task `json:"tasks"`
	NextPageToken string `json:"nextPageToken"`
	PageSize      int32  `json:"pageSize"`
	TotalSize     int32  `json:"totalSize"`
}

// AuthenticationInfo names the HTTP auth scheme a push webhook expects.
type AuthenticationInfo struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials,omitempty"`
}

// TaskPushNotificationConfig is a webhook registration for a task.
type TaskPushNotificationConfig struct {
	Tenant         string              `json:"tenant,omitempty"`
	ID             string              `json:"id,omitempty"`
	TaskID         string              `json:"taskId,omitempty"`
	URL            string              `json:"url"`
	Token          string              `json:"token,omitempty"`
	Authentication *AuthenticationInfo `json:"authentication,omitempty"`
}

// GetTaskPushNotificationConfigRequest names one config of a task: the
// params of GetTaskPushNotificationConfig and
// DeleteTaskPushNotificationConfig.
type GetTaskPushNotificationConfigRequest struct {
	Tenant string `json:"tenant,omitempty"`
	TaskID string `json:"taskId"`
	ID     string `json:"id"`
}

// ListTaskPushNotificationConfigsRequest is the params of
// ListTaskPushNotificationConfigs.
type ListTaskPushNotificationConfigsRequest struct {
	Tenant    string `json:"tenant,omitempty"`
	TaskID    string `json:"taskId"`
	PageSize  int32  `json:"pageSize,omitempty"`
	PageToken string `json:"pageToken,omitempty"`
}

// ListTaskPushNotificationConfigsResponse is the result of
// ListTaskPushNotificationConfigs.
type ListTaskPushNotificationConfigsResponse struct {
	Configs       []TaskPushNotificationConfig `json:"configs"`
	NextPageToken string                       `json:"nextPageToken"`
}

// Timestamp is a google.protobuf.Timestamp: RFC 3339 in UTC with a "Z",
// millisecond precision on output, any RFC 3339 offset accepted on input.
type Timestamp struct{ time.Time }

// Now returns the current time as a Timestamp, truncated to milliseconds.
func Now() *Timestamp { return &Timestamp{time.Now().UTC().Truncate(time.Millisecond)} }

// MarshalJSON writes the time as "2006-01-02T15:04:05.000Z".
func (t Timestamp) MarshalJSON() ([]byte, error) { return t.AppendJSON(nil), nil }

// AppendJSON appends what MarshalJSON writes (for encoders that write
// into a buffer of their own).
func (t Timestamp) AppendJSON(b []byte) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	return append(b, '"')
}

// UnmarshalJSON reads an RFC 3339 time; a missing zone is read as UTC, as
// some 0.3 peers emitted it that way.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	// A timestamp has no escapes: take it between its quotes without a
	// nested decode (this runs for every record a worker or edge reads).
	var s string
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' && bytes.IndexByte(b[1:n-1], '\\') < 0 && bytes.IndexByte(b[1:n-1], '"') < 0 {
		s = string(b[1 : n-1])
	} else if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseTimestamp(s)
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}

// ParseTimestamp parses an RFC 3339 time, reading a missing zone as UTC. A
// time whose UTC year is not 0000 to 9999 (9999-12-31T23:00:00-05:00) is
// refused: RFC 3339, and so every a2abus answer, cannot write it.
func ParseTimestamp(s string) (time.Time, error) {
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		var err2 error
		v, err2 = time.Parse("2006-01-02T15:04:05.999999999", s)
		if err2 != nil {
			return time.Time{}, err
		}
	}
	v = v.UTC()
	if y := v.Year(); y < 0 || y > 9999 {
		return time.Time{}, fmt.Errorf("timestamp %q is in the year %d in UTC, which RFC 3339 cannot write", s, y)
	}
	return v, nil
}
