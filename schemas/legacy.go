package schemas

import (
	"fmt"

	"github.com/google/uuid"
)

// The older `tasks/send` dialect (A2A's first public schema, before
// message/send), still spoken by the systems a2abus replaces: the client
// chooses the task id, `sessionId` plays the part of contextId, parts carry
// a `type` discriminator, messages have no id, streams are
// tasks/sendSubscribe with `final` on status updates. Converted here to and
// from the 1.0 model.

// DialectLegacy marks tasks created through the older dialect (stored in
// TaskRecord.Dialect), so reads through it answer in its shapes.
const DialectLegacy = "legacy"

// legacyNamespace scopes the UUIDs derived from client task ids.
var legacyNamespace = uuid.MustParse("6f1c2b8e-2a4d-5c8e-9b1a-a2ab0500a2ab")

// LegacyTaskID returns the server task id of a client-chosen task id: the id
// itself when it is already a UUID, else a UUID derived from it (v5), so the
// same client id always names the same task and no client string reaches a
// subject or key.
func LegacyTaskID(clientID string) string {
	if ValidTaskID(clientID) {
		return clientID
	}
	return uuid.NewSHA1(legacyNamespace, []byte(clientID)).String()
}

// ScopedLegacyTaskID is the server task id of a client-chosen id that is
// private to scope (an authenticated caller: its tenant and principal):
// two callers that choose the same id name two different tasks, never one.
// An empty scope (an edge serving anonymously) is LegacyTaskID.
func ScopedLegacyTaskID(scope, clientID string) string {
	if scope == "" {
		return LegacyTaskID(clientID)
	}
	return uuid.NewSHA1(legacyNamespace, []byte(scope+"\x00"+clientID)).String()
}

// LegacyPart is a part of the older dialect: type "text", "file" or "data".
// Data is written whenever it is set, also as an empty object (omitzero).
type LegacyPart struct {
	Type     string         `json:"type"`
	Text     *string        `json:"text,omitempty"`
	File     *V03File       `json:"file,omitempty"`
	Data     map[string]any `json:"data,omitzero"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// LegacyMessage is a message of the older dialect.
type LegacyMessage struct {
	Role     string         `json:"role"`
	Parts    []LegacyPart   `json:"parts"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// LegacyTaskStatus is a task status of the older dialect.
type LegacyTaskStatus struct {
	State     string         `json:"state"`
	Message   *LegacyMessage `json:"message,omitempty"`
	Timestamp string         `json:"timestamp,omitempty"`
}

// LegacyArtifact is an artifact of the older dialect.
type LegacyArtifact struct {
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []LegacyPart   `json:"parts"`
	Index       int            `json:"index"`
	Append      bool           `json:"append,omitempty"`
	LastChunk   bool           `json:"lastChunk,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// LegacyTask is a task of the older dialect.
type LegacyTask struct {
	ID        string           `json:"id"`
	SessionID string           `json:"sessionId,omitempty"`
	Status    LegacyTaskStatus `json:"status"`
	Artifacts []LegacyArtifact `json:"artifacts,omitempty"`
	History   []LegacyMessage  `json:"history,omitempty"`
	Metadata  map[string]any   `json:"metadata,omitempty"`
}

// LegacyStatusUpdate is a tasks/sendSubscribe status event.
type LegacyStatusUpdate struct {
	ID       string           `json:"id"`
	Status   LegacyTaskStatus `json:"status"`
	Final    bool             `json:"final"`
	Metadata map[string]any   `json:"metadata,omitempty"`
}

// LegacyArtifactUpdate is a tasks/sendSubscribe artifact event.
type LegacyArtifactUpdate struct {
	ID       string         `json:"id"`
	Artifact LegacyArtifact `json:"artifact"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// LegacySendParams is the params of tasks/send and tasks/sendSubscribe.
type LegacySendParams struct {
	ID        string         `json:"id"`
	SessionID string         `json:"sessionId,omitempty"`
	Message   *LegacyMessage `json:"message"`
	// AcceptedOutputModes was in the Python samples' TaskSendParams only.
	AcceptedOutputModes []string                   `json:"acceptedOutputModes,omitempty"`
	PushNotification    *V03PushNotificationConfig `json:"pushNotification,omitempty"`
	HistoryLength       *int32                     `json:"historyLength,omitempty"`
	Metadata            map[string]any             `json:"metadata,omitempty"`
	// Deadline is when the task must be done by, in whole seconds since
	// the Unix epoch (Aleph's A2ATask.deadline): see LegacyDeadline.
	Deadline *int64 `json:"deadline,omitempty"`
}

// LegacyPartToV1 converts a part of the older dialect. It returns an
// InvalidField occurrence naming the field at fault within the part.
func LegacyPartToV1(p LegacyPart) (Part, error) { return legacyPartToV1(p, "") }

// legacyPartToV1 converts a part of the older dialect found at path.
func legacyPartToV1(p LegacyPart, path string) (Part, error) {
	v := V03Part{Kind: p.Type, Text: p.Text, File: p.File, Metadata: p.Metadata}
	if p.Data != nil {
		v.Data = mustJSON(p.Data)
	}
	return partFromV03(v, path, "type")
}

// LegacyPartFromV1 converts a 1.0 part to the older dialect.
func LegacyPartFromV1(p Part) LegacyPart {
	v := PartToV03(p)
	out := LegacyPart{Type: v.Kind, Text: v.Text, File: v.File, Metadata: v.Metadata}
	if v.Data != nil {
		_ = jsonUnmarshal(v.Data, &out.Data)
	}
	return out
}

// ToV1 converts tasks/send params: a message with a new id, in the session
// as its context. The task id and sessionId are checked as a client's ids
// (CheckID); the message, as any client's, by CheckInput.
func (p *LegacySendParams) ToV1() (*SendMessageRequest, error) {
	if p.ID == "" {
		return nil, Errorf(ErrInvalidParams, "id (the task id) is required")
	}
	if err := CheckID("id", p.ID); err != nil {
		return nil, err
	}
	if err := CheckID("sessionId", p.SessionID); err != nil {
		return nil, err
	}
	if p.Message == nil {
		return nil, Errorf(ErrInvalidParams, "message is required")
	}
	m, err := LegacyMessageToV1(*p.Message)
	if err != nil {
		return nil, err
	}
	m.ContextID = p.SessionID
	req := &SendMessageRequest{Message: &m, Metadata: p.Metadata}
	if p.HistoryLength != nil || p.AcceptedOutputModes != nil || p.PushNotification != nil {
		req.Configuration = &SendMessageConfiguration{HistoryLength: p.HistoryLength, AcceptedOutputModes: p.AcceptedOutputModes}
	}
	if p.PushNotification != nil {
		pc, err := p.PushNotification.toV1("pushNotification", "")
		if err != nil {
			return nil, err
		}
		req.Configuration.TaskPushNotificationConfig = pc
	}
	return req, nil
}

// LegacyMessageToV1 converts a message of the older dialect.
func LegacyMessageToV1(m LegacyMessage) (Message, error) {
	role, err := RoleFromV03(m.Role)
	if err != nil {
		return Message{}, err
	}
	out := Message{MessageID: NewID(), Role: role, Metadata: m.Metadata}
	for i, p := range m.Parts {
		pp, err := legacyPartToV1(p, fmt.Sprintf("message.parts[%d]", i))
		if err != nil {
			return out, err
		}
		out.Parts = append(out.Parts, pp)
	}
	return out, nil
}

// LegacyMessageFromV1 converts a 1.0 message to the older dialect.
func LegacyMessageFromV1(m Message) LegacyMessage {
	out := LegacyMessage{Role: RoleToV03(m.Role), Metadata: m.Metadata, Parts: []LegacyPart{}}
	for _, p := range m.Parts {
		out.Parts = append(out.Parts, LegacyPartFromV1(p))
	}
	return out
}

// LegacyStatusFromV1 converts a 1.0 task status.
func LegacyStatusFromV1(s TaskStatus) LegacyTaskStatus {
	v := statusToV03(s)
	out := LegacyTaskStatus{State: LegacyStateFromV1(s.State), Timestamp: v.Timestamp}
	if s.Message != nil {
		m := LegacyMessageFromV1(*s.Message)
		out.Message = &m
	}
	return out
}

// LegacyArtifactFromV1 converts a 1.0 artifact; index is its position in
// the task.
func LegacyArtifactFromV1(a Artifact, index int) LegacyArtifact {
	out := LegacyArtifact{Name: a.Name, Description: a.Description, Index: index, Metadata: a.Metadata, Parts: []LegacyPart{}}
	for _, p := range a.Parts {
		out.Parts = append(out.Parts, LegacyPartFromV1(p))
	}
	return out
}

// LegacyTaskFromV1 converts a 1.0 task, answering with the client's own id.
func LegacyTaskFromV1(t Task, clientID string) LegacyTask {
	if clientID == "" {
		clientID = t.ID
	}
	out := LegacyTask{ID: clientID, SessionID: t.ContextID, Status: LegacyStatusFromV1(t.Status), Metadata: t.Metadata}
	for i, a := range t.Artifacts {
		out.Artifacts = append(out.Artifacts, LegacyArtifactFromV1(a, i))
	}
	for _, m := range t.History {
		out.History = append(out.History, LegacyMessageFromV1(m))
	}
	return out
}

// LegacyStreamEvent converts one stream event to the older dialect's
// object: the task snapshot and status changes become status updates
// (final when the task is terminal or interrupted), artifacts artifact
// updates (index = position among the task's artifacts, given by index).
func LegacyStreamEvent(r StreamResponse, clientID string, index func(artifactID string) int) any {
	switch {
	case r.Task != nil:
		return &LegacyStatusUpdate{ID: clientID, Status: LegacyStatusFromV1(r.Task.Status), Final: r.Task.Status.State.Settled()}
	case r.StatusUpdate != nil:
		return &LegacyStatusUpdate{ID: clientID, Status: LegacyStatusFromV1(r.StatusUpdate.Status), Final: r.StatusUpdate.Status.State.Settled(), Metadata: r.StatusUpdate.Metadata}
	case r.ArtifactUpdate != nil:
		a := LegacyArtifactFromV1(r.ArtifactUpdate.Artifact, index(r.ArtifactUpdate.Artifact.ArtifactID))
		a.Append, a.LastChunk = r.ArtifactUpdate.Append, r.ArtifactUpdate.LastChunk
		return &LegacyArtifactUpdate{ID: clientID, Artifact: a, Metadata: r.ArtifactUpdate.Metadata}
	case r.Message != nil:
		m := LegacyMessageFromV1(*r.Message)
		return &LegacyStatusUpdate{ID: clientID, Status: LegacyTaskStatus{State: "completed", Message: &m, Timestamp: Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")}, Final: true}
	}
	return nil
}
