package schemas

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// A2A 0.3 (JSON-RPC) shapes and their lossless conversion to and from the
// 1.0 model, in one place. 0.3 differs in: `kind` discriminators, lowercase
// states and roles, Part variants text/file/data (file = bytes or uri with
// name and mimeType; data must be an object), `final` on status updates,
// `blocking` instead of `returnImmediately`, and free-form error data.

// V03Part is a 0.3 part: kind "text", "file" or "data".
type V03Part struct {
	Kind     string          `json:"kind"`
	Text     *string         `json:"text,omitempty"`
	File     *V03File        `json:"file,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	Metadata map[string]any  `json:"metadata,omitempty"`
}

// V03File is the file of a 0.3 file part: inline bytes or a URI.
type V03File struct {
	Name     string  `json:"name,omitempty"`
	MimeType string  `json:"mimeType,omitempty"`
	Bytes    *string `json:"bytes,omitempty"`
	URI      *string `json:"uri,omitempty"`
}

// V03Message is a 0.3 message.
type V03Message struct {
	Kind             string         `json:"kind"`
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             string         `json:"role"`
	Parts            []V03Part      `json:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
}

// V03TaskStatus is a 0.3 task status.
type V03TaskStatus struct {
	State     string      `json:"state"`
	Message   *V03Message `json:"message,omitempty"`
	Timestamp string      `json:"timestamp,omitempty"`
}

// V03Artifact is a 0.3 artifact.
type V03Artifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []V03Part      `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Extensions  []string       `json:"extensions,omitempty"`
}

// V03Task is a 0.3 task (kind "task").
type V03Task struct {
	Kind      string         `json:"kind"`
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    V03TaskStatus  `json:"status"`
	History   []V03Message   `json:"history,omitempty"`
	Artifacts []V03Artifact  `json:"artifacts,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// V03StatusUpdate is a 0.3 status-update event.
type V03StatusUpdate struct {
	Kind      string         `json:"kind"`
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    V03TaskStatus  `json:"status"`
	Final     bool           `json:"final"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// V03ArtifactUpdate is a 0.3 artifact-update event.
type V03ArtifactUpdate struct {
	Kind      string         `json:"kind"`
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Artifact  V03Artifact    `json:"artifact"`
	Append    bool           `json:"append,omitempty"`
	LastChunk bool           `json:"lastChunk,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// V03SendConfiguration is 0.3 MessageSendConfiguration.
type V03SendConfiguration struct {
	AcceptedOutputModes    []string                   `json:"acceptedOutputModes,omitempty"`
	HistoryLength          *int32                     `json:"historyLength,omitempty"`
	PushNotificationConfig *V03PushNotificationConfig `json:"pushNotificationConfig,omitempty"`
	Blocking               *bool                      `json:"blocking,omitempty"`
}

// V03MessageSendParams is the params of message/send and message/stream.
type V03MessageSendParams struct {
	Message       *V03Message           `json:"message"`
	Configuration *V03SendConfiguration `json:"configuration,omitempty"`
	Metadata      map[string]any        `json:"metadata,omitempty"`
}

// V03TaskQueryParams is the params of tasks/get.
type V03TaskQueryParams struct {
	ID            string         `json:"id"`
	HistoryLength *int32         `json:"historyLength,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

// V03TaskIDParams is the params of tasks/cancel and tasks/resubscribe.
type V03TaskIDParams struct {
	ID       string         `json:"id"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

var states03 = map[TaskState]string{
	TaskStateUnspecified: "unknown", TaskStateSubmitted: "submitted", TaskStateWorking: "working",
	TaskStateCompleted: "completed", TaskStateFailed: "failed", TaskStateCanceled: "canceled",
	TaskStateInputRequired: "input-required", TaskStateRejected: "rejected", TaskStateAuthRequired: "auth-required",
}

// StateToV03 returns the 0.3 name of a state ("unknown" for unset).
func StateToV03(s TaskState) string {
	if v, ok := states03[s]; ok {
		return v
	}
	return "unknown"
}

// StateFromV03 parses a 0.3 state name.
func StateFromV03(s string) (TaskState, error) {
	for k, v := range states03 {
		if v == s {
			return k, nil
		}
	}
	return "", Errorf(ErrInvalidParams, "state %q is not an A2A 0.3 task state", s)
}

// RoleToV03 returns "user" or "agent".
func RoleToV03(r Role) string {
	if r == RoleAgent {
		return "agent"
	}
	return "user"
}

// RoleFromV03 parses a 0.3 role.
func RoleFromV03(r string) (Role, error) {
	switch r {
	case "user":
		return RoleUser, nil
	case "agent":
		return RoleAgent, nil
	}
	return "", Errorf(ErrInvalidParams, "role %q is not \"user\" or \"agent\"", r)
}

// wrappedKey marks a 1.0 data value that was not an object and had to be
// wrapped as {"value": v} for 0.3, so the way back unwraps it exactly.
// mediaTypeKey and filenameKey carry the 1.0 mediaType and filename of text
// and data parts, which have no slot for them in 0.3.
const (
	wrappedKey   = "a2abus/wrapped"
	mediaTypeKey = "a2abus/mediaType"
	filenameKey  = "a2abus/filename"
)

// withMeta returns md plus the non-empty entries of kv (pairs of key and
// value), as a new map; md itself is never changed.
func withMeta(md map[string]any, kv ...any) map[string]any {
	var out map[string]any
	for i := 0; i+1 < len(kv); i += 2 {
		if v, ok := kv[i+1].(string); ok && v == "" {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(md)+len(kv)/2)
			for k, v := range md {
				out[k] = v
			}
		}
		out[kv[i].(string)] = kv[i+1]
	}
	if out == nil {
		return md
	}
	return out
}

// PartToV03 converts a 1.0 part.
func PartToV03(p Part) V03Part {
	out := V03Part{Metadata: p.Metadata}
	switch {
	case p.Text != nil:
		out.Kind, out.Text = "text", p.Text
		out.Metadata = withMeta(p.Metadata, mediaTypeKey, p.MediaType, filenameKey, p.Filename)
	case p.Raw != nil:
		b := base64.StdEncoding.EncodeToString(p.Raw)
		out.Kind, out.File = "file", &V03File{Name: p.Filename, MimeType: p.MediaType, Bytes: &b}
	case p.URL != nil:
		u := *p.URL
		out.Kind, out.File = "file", &V03File{Name: p.Filename, MimeType: p.MediaType, URI: &u}
	default:
		out.Kind, out.Data = "data", p.Data
		if t := bytes.TrimSpace(p.Data); len(t) == 0 || t[0] != '{' {
			out.Data, _ = json.Marshal(map[string]json.RawMessage{"value": p.Data})
			out.Metadata = withMeta(out.Metadata, wrappedKey, true)
		}
		// 0.3 data is JSON: only another media type, or none, is recorded.
		mt := p.MediaType
		switch mt {
		case "application/json":
			mt = ""
		case "":
			mt = "-"
		}
		out.Metadata = withMeta(out.Metadata, mediaTypeKey, mt, filenameKey, p.Filename)
	}
	return out
}

// PartFromV03 converts a 0.3 part. It returns an InvalidField occurrence
// naming the field at fault within the part ("file.bytes").
func PartFromV03(p V03Part) (Part, error) { return partFromV03(p, "", "kind") }

// partFromV03 converts a 0.3 part found at path (a part of the older
// dialect too, whose discriminator is named kind), naming the fields of
// its errors from there.
func partFromV03(p V03Part, path, kind string) (Part, error) {
	at := func(field string) string {
		if path == "" {
			return field
		}
		return path + "." + field
	}
	out := Part{Metadata: p.Metadata}
	switch p.Kind {
	case "text", "":
		if p.Text == nil {
			return out, InvalidField(at("text"), "is required in a text part")
		}
		out.Text = p.Text
		out.MediaType, _ = p.Metadata[mediaTypeKey].(string)
		out.Filename, _ = p.Metadata[filenameKey].(string)
		out.Metadata = withoutMeta(p.Metadata, mediaTypeKey, filenameKey)
	case "file":
		if p.File == nil {
			return out, InvalidField(at("file"), "is required in a file part")
		}
		out.Filename, out.MediaType = p.File.Name, p.File.MimeType
		switch {
		case p.File.Bytes != nil:
			raw, err := base64.StdEncoding.DecodeString(*p.File.Bytes)
			if err != nil {
				if raw, err = base64.URLEncoding.DecodeString(*p.File.Bytes); err != nil {
					return out, InvalidField(at("file.bytes"), "is not base64")
				}
			}
			if raw == nil {
				raw = []byte{}
			}
			out.Raw = raw
		case p.File.URI != nil:
			u := *p.File.URI
			out.URL = &u
		default:
			return out, InvalidField(at("file"), "needs bytes or uri")
		}
	case "data":
		if len(p.Data) == 0 {
			return out, InvalidField(at("data"), "is required in a data part")
		}
		out.Data, out.MediaType = p.Data, "application/json"
		drop := []string{mediaTypeKey, filenameKey}
		if w, _ := p.Metadata[wrappedKey].(bool); w {
			// Unwrap only what PartToV03 wrapped: exactly {"value": v}.
			var inner map[string]json.RawMessage
			if json.Unmarshal(p.Data, &inner) == nil && len(inner) == 1 && inner["value"] != nil {
				out.Data = inner["value"]
				drop = append(drop, wrappedKey)
			}
		}
		if mt, ok := p.Metadata[mediaTypeKey].(string); ok {
			out.MediaType = mt
			if mt == "-" {
				out.MediaType = ""
			}
		}
		out.Filename, _ = p.Metadata[filenameKey].(string)
		out.Metadata = withoutMeta(p.Metadata, drop...)
	default:
		return out, InvalidField(at(kind), "%q is not text, file or data", p.Kind)
	}
	return out, nil
}

// withoutMeta returns md without keys, as a new map (nil when nothing is
// left); md itself is never changed.
func withoutMeta(md map[string]any, keys ...string) map[string]any {
	hit := false
	for _, k := range keys {
		if _, ok := md[k]; ok {
			hit = true
		}
	}
	if !hit {
		return md
	}
	var out map[string]any
	for k, v := range md {
		if slices.Contains(keys, k) {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		out[k] = v
	}
	return out
}

// MessageToV03 converts a 1.0 message.
func MessageToV03(m Message) V03Message {
	out := V03Message{Kind: "message", MessageID: m.MessageID, ContextID: m.ContextID, TaskID: m.TaskID,
		Role: RoleToV03(m.Role), Metadata: m.Metadata, Extensions: m.Extensions, ReferenceTaskIDs: m.ReferenceTaskIDs}
	out.Parts = make([]V03Part, len(m.Parts))
	for i, p := range m.Parts {
		out.Parts[i] = PartToV03(p)
	}
	return out
}

// MessageFromV03 converts a 0.3 message.
func MessageFromV03(m V03Message) (Message, error) {
	role, err := RoleFromV03(m.Role)
	if err != nil {
		return Message{}, Errorf(ErrInvalidParams, "message.%s", err.Error())
	}
	out := Message{MessageID: m.MessageID, ContextID: m.ContextID, TaskID: m.TaskID, Role: role,
		Metadata: m.Metadata, Extensions: m.Extensions, ReferenceTaskIDs: m.ReferenceTaskIDs}
	out.Parts = make([]Part, len(m.Parts))
	for i, p := range m.Parts {
		if out.Parts[i], err = partFromV03(p, fmt.Sprintf("message.parts[%d]", i), "kind"); err != nil {
			return out, err
		}
	}
	return out, nil
}

func statusToV03(s TaskStatus) V03TaskStatus {
	out := V03TaskStatus{State: StateToV03(s.State)}
	if s.Message != nil {
		m := MessageToV03(*s.Message)
		out.Message = &m
	}
	if s.Timestamp != nil {
		out.Timestamp = s.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	return out
}

func statusFromV03(s V03TaskStatus) (TaskStatus, error) {
	st, err := StateFromV03(s.State)
	if err != nil {
		return TaskStatus{}, err
	}
	out := TaskStatus{State: st}
	if s.Message != nil {
		m, err := MessageFromV03(*s.Message)
		if err != nil {
			return out, err
		}
		out.Message = &m
	}
	if s.Timestamp != "" {
		t, err := ParseTimestamp(s.Timestamp)
		if err != nil {
			return out, Errorf(ErrInvalidParams, "status.timestamp %q is not a time", s.Timestamp)
		}
		out.Timestamp = &Timestamp{t.Truncate(time.Millisecond)}
	}
	return out, nil
}

// ArtifactToV03 converts a 1.0 artifact.
func ArtifactToV03(a Artifact) V03Artifact {
	out := V03Artifact{ArtifactID: a.ArtifactID, Name: a.Name, Description: a.Description, Metadata: a.Metadata, Extensions: a.Extensions}
	out.Parts = make([]V03Part, len(a.Parts))
	for i, p := range a.Parts {
		out.Parts[i] = PartToV03(p)
	}
	return out
}

// ArtifactFromV03 converts a 0.3 artifact.
func ArtifactFromV03(a V03Artifact) (Artifact, error) {
	out := Artifact{ArtifactID: a.ArtifactID, Name: a.Name, Description: a.Description, Metadata: a.Metadata, Extensions: a.Extensions}
	out.Parts = make([]Part, len(a.Parts))
	for i, p := range a.Parts {
		var err error
		if out.Parts[i], err = partFromV03(p, fmt.Sprintf("artifact.parts[%d]", i), "kind"); err != nil {
			return out, err
		}
	}
	return out, nil
}

// TaskToV03 converts a 1.0 task.
func TaskToV03(t Task) V03Task {
	out := V03Task{Kind: "task", ID: t.ID, ContextID: t.ContextID, Status: statusToV03(t.Status), Metadata: t.Metadata}
	for _, m := range t.History {
		out.History = append(out.History, MessageToV03(m))
	}
	for _, a := range t.Artifacts {
		out.Artifacts = append(out.Artifacts, ArtifactToV03(a))
	}
	return out
}

// TaskFromV03 converts a 0.3 task.
func TaskFromV03(t V03Task) (Task, error) {
	st, err := statusFromV03(t.Status)
	if err != nil {
		return Task{}, err
	}
	out := Task{ID: t.ID, ContextID: t.ContextID, Status: st, Metadata: t.Metadata}
	for _, m := range t.History {
		mm, err := MessageFromV03(m)
		if err != nil {
			return out, err
		}
		out.History = append(out.History, mm)
	}
	for _, a := range t.Artifacts {
		aa, err := ArtifactFromV03(a)
		if err != nil {
			return out, err
		}
		out.Artifacts = append(out.Artifacts, aa)
	}
	return out, nil
}

// StreamResponseToV03 converts one stream event to its 0.3 object: a
// *V03Task, *V03Message, *V03StatusUpdate (final when the task is terminal
// or interrupted: the stream ends there) or *V03ArtifactUpdate.
func StreamResponseToV03(r StreamResponse) any {
	switch {
	case r.Task != nil:
		t := TaskToV03(*r.Task)
		return &t
	case r.Message != nil:
		m := MessageToV03(*r.Message)
		return &m
	case r.StatusUpdate != nil:
		u := r.StatusUpdate
		return &V03StatusUpdate{Kind: "status-update", TaskID: u.TaskID, ContextID: u.ContextID,
			Status: statusToV03(u.Status), Final: u.Status.State.Settled(), Metadata: u.Metadata}
	case r.ArtifactUpdate != nil:
		u := r.ArtifactUpdate
		return &V03ArtifactUpdate{Kind: "artifact-update", TaskID: u.TaskID, ContextID: u.ContextID,
			Artifact: ArtifactToV03(u.Artifact), Append: u.Append, LastChunk: u.LastChunk, Metadata: u.Metadata}
	}
	return nil
}

// ToV1 converts message/send params. Absent "blocking" means blocking, as
// 0.3 servers treated it.
func (p *V03MessageSendParams) ToV1() (*SendMessageRequest, error) {
	if p.Message == nil {
		return nil, Errorf(ErrInvalidParams, "message is required")
	}
	m, err := MessageFromV03(*p.Message)
	if err != nil {
		return nil, err
	}
	req := &SendMessageRequest{Message: &m, Metadata: p.Metadata}
	if c := p.Configuration; c != nil {
		req.Configuration = &SendMessageConfiguration{AcceptedOutputModes: c.AcceptedOutputModes, HistoryLength: c.HistoryLength}
		if c.Blocking != nil && !*c.Blocking {
			req.Configuration.ReturnImmediately = true
		}
		if c.PushNotificationConfig != nil {
			pc, err := c.PushNotificationConfig.toV1("configuration.pushNotificationConfig", "")
			if err != nil {
				return nil, err
			}
			req.Configuration.TaskPushNotificationConfig = pc
		}
	}
	return req, nil
}

// V03ErrorData is the object-valued error.data of a 0.3 error response:
// the ErrorInfo reason and domain with the metadata entries beside them.
func V03ErrorData(e *Error) map[string]any {
	d := map[string]any{"reason": e.Reason, "domain": ErrorDomain}
	for k, v := range e.Metadata {
		d[k] = v
	}
	return d
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// ResultFromV03 reads one 0.3 result object, as a 0.3 agent answers
// message/send or sends on a stream, told apart by its "kind": a task, a
// message, a status-update or an artifact-update. It is the inverse of
// StreamResponseToV03, used by clients of 0.3 agents.
func ResultFromV03(raw json.RawMessage) (StreamResponse, error) {
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return StreamResponse{}, Errorf(ErrInvalidAgentResponse, "0.3 result is not a JSON object: %v", err)
	}
	bad := func(err error) (StreamResponse, error) {
		return StreamResponse{}, Errorf(ErrInvalidAgentResponse, "0.3 %s: %v", head.Kind, err)
	}
	switch head.Kind {
	case "task":
		var t V03Task
		if err := json.Unmarshal(raw, &t); err != nil {
			return bad(err)
		}
		task, err := TaskFromV03(t)
		if err != nil {
			return bad(err)
		}
		return StreamResponse{Task: &task}, nil
	case "message":
		var m V03Message
		if err := json.Unmarshal(raw, &m); err != nil {
			return bad(err)
		}
		msg, err := MessageFromV03(m)
		if err != nil {
			return bad(err)
		}
		return StreamResponse{Message: &msg}, nil
	case "status-update":
		var u V03StatusUpdate
		if err := json.Unmarshal(raw, &u); err != nil {
			return bad(err)
		}
		st, err := statusFromV03(u.Status)
		if err != nil {
			return bad(err)
		}
		return StreamResponse{StatusUpdate: &TaskStatusUpdateEvent{TaskID: u.TaskID, ContextID: u.ContextID, Status: st, Metadata: u.Metadata}}, nil
	case "artifact-update":
		var u V03ArtifactUpdate
		if err := json.Unmarshal(raw, &u); err != nil {
			return bad(err)
		}
		a, err := ArtifactFromV03(u.Artifact)
		if err != nil {
			return bad(err)
		}
		return StreamResponse{ArtifactUpdate: &TaskArtifactUpdateEvent{TaskID: u.TaskID, ContextID: u.ContextID,
			Artifact: a, Append: u.Append, LastChunk: u.LastChunk, Metadata: u.Metadata}}, nil
	}
	return StreamResponse{}, Errorf(ErrInvalidAgentResponse, "0.3 result has unknown kind %q", head.Kind)
}

// SendParamsToV03 converts SendMessage params to 0.3 message/send params.
func SendParamsToV03(r *SendMessageRequest) V03MessageSendParams {
	var out V03MessageSendParams
	if r.Message != nil {
		m := MessageToV03(*r.Message)
		out.Message = &m
	}
	out.Metadata = r.Metadata
	if c := r.Configuration; c != nil {
		out.Configuration = &V03SendConfiguration{AcceptedOutputModes: c.AcceptedOutputModes, HistoryLength: c.HistoryLength,
			Blocking: Bool(!c.ReturnImmediately)}
		if pc := c.TaskPushNotificationConfig; pc != nil {
			v := PushConfigToV03(*pc).PushNotificationConfig
			out.Configuration.PushNotificationConfig = &v
		}
	} else {
		out.Configuration = &V03SendConfiguration{Blocking: Bool(true)}
	}
	return out
}
