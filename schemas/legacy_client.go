package schemas

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// The older tasks/send dialect as a2abus's client meets it: what to send
// an agent that speaks it, and how to read what such agents answer. The
// server side (legacy.go, legacy_params.go) reads clients strictly and
// gives their task ids UUIDs; this side keeps the agent's own ids (later
// calls must name them) and reads answers leniently, since the agents in
// the field disagree on details the first schema left open: OpenFang
// answers a bare task whose status is a plain string ("completed") and
// whose history is under "messages", AgentOS a JSON-RPC result with a
// status object and "history"; states are spelled input-required or
// input_required, canceled or cancelled; file and data parts come flat
// ({"type":"file","name","mime_type","data"}) or nested.

// ProtocolVersionLegacy is the protocolVersion a2abus gives an interface
// that speaks the older tasks/send dialect: A2A 0.1, its first public
// schema. Cards of that dialect declare no protocolVersion at all.
const ProtocolVersionLegacy = "0.1"

// LegacySendParamsFromV1 returns the params of tasks/send (and
// tasks/sendSubscribe) for a 1.0 request: taskID is the task the message
// continues, or the new id the client chose; the message's contextId
// becomes sessionId; historyLength, acceptedOutputModes, the push config
// and the request's metadata are carried over.
func LegacySendParamsFromV1(req *SendMessageRequest, taskID string) LegacySendParams {
	p := LegacySendParams{ID: taskID, Metadata: req.Metadata}
	if req.Message != nil {
		m := LegacyMessageFromV1(*req.Message)
		p.Message, p.SessionID = &m, req.Message.ContextID
	}
	if c := req.Configuration; c != nil {
		p.AcceptedOutputModes, p.HistoryLength = c.AcceptedOutputModes, c.HistoryLength
		if pc := c.TaskPushNotificationConfig; pc != nil {
			v := PushConfigToV03(*pc).PushNotificationConfig
			p.PushNotification = &v
		}
	}
	return p
}

// LegacyStateToV1 reads a task state as agents of the older dialect spell
// it: case, "-", "_" and spaces do not matter, and both "canceled" and
// "cancelled" are read. "unknown" is TaskStateUnspecified. Anything else
// is an ErrInvalidAgentResponse occurrence.
func LegacyStateToV1(s string) (TaskState, error) {
	k := strings.Map(func(r rune) rune {
		switch r {
		case '-', '_', ' ':
			return -1
		}
		return r
	}, strings.ToLower(strings.TrimSpace(s)))
	switch k {
	case "submitted":
		return TaskStateSubmitted, nil
	case "working":
		return TaskStateWorking, nil
	case "inputrequired":
		return TaskStateInputRequired, nil
	case "authrequired":
		return TaskStateAuthRequired, nil
	case "completed":
		return TaskStateCompleted, nil
	case "canceled", "cancelled":
		return TaskStateCanceled, nil
	case "failed":
		return TaskStateFailed, nil
	case "rejected":
		return TaskStateRejected, nil
	case "unknown":
		return TaskStateUnspecified, nil
	}
	return "", Errorf(ErrInvalidAgentResponse, "state %q is not a task state", s)
}

// The shapes agents answer, read leniently (see the top of this file).
type (
	agentLegacyTask struct {
		ID        string                `json:"id"`
		SessionID string                `json:"sessionId"`
		Status    json.RawMessage       `json:"status"`
		History   []agentLegacyMessage  `json:"history"`
		Messages  []agentLegacyMessage  `json:"messages"`
		Artifacts []agentLegacyArtifact `json:"artifacts"`
		Metadata  map[string]any        `json:"metadata"`
	}
	agentLegacyStatus struct {
		State     string              `json:"state"`
		Message   *agentLegacyMessage `json:"message"`
		Timestamp string              `json:"timestamp"`
	}
	agentLegacyMessage struct {
		Role     string            `json:"role"`
		Parts    []json.RawMessage `json:"parts"`
		Metadata map[string]any    `json:"metadata"`
	}
	agentLegacyArtifact struct {
		Name        string            `json:"name"`
		Description string            `json:"description"`
		Parts       []json.RawMessage `json:"parts"`
		Index       *int              `json:"index"`
		Append      bool              `json:"append"`
		LastChunk   bool              `json:"lastChunk"`
		Metadata    map[string]any    `json:"metadata"`
	}
	agentLegacyPart struct {
		Type         string          `json:"type"`
		Kind         string          `json:"kind"`
		Text         *string         `json:"text"`
		File         *V03File        `json:"file"`
		Data         json.RawMessage `json:"data"`
		Name         string          `json:"name"`
		MimeType     string          `json:"mimeType"`
		MimeTypeRust string          `json:"mime_type"`
		Metadata     map[string]any  `json:"metadata"`
	}
)

// badAnswer is the error of an answer that does not read as the dialect.
func badAnswer(format string, a ...any) *Error {
	return Errorf(ErrInvalidAgentResponse, format, a...)
}

// LegacyAgentTaskToV1 reads a task as an agent of the older dialect
// answers tasks/send, tasks/get or tasks/cancel (the task object itself,
// not its JSON-RPC envelope). The agent's id is kept as the task id, since
// later calls must name it; sessionId becomes the contextId; the history
// is read from "history", else "messages"; artifacts without an index get
// their position. A status given as a plain string, or as an object
// without a message, takes the last history message when that is the
// agent's, so the answer of an agent that keeps it only in the history
// reaches 1.0 readers, who look at the status and the artifacts. Messages,
// which have no id in this dialect, get new ones; a timestamp that does not
// parse is dropped. An answer that is not such a task is an
// ErrInvalidAgentResponse occurrence naming what is wrong.
func LegacyAgentTaskToV1(raw []byte) (Task, error) {
	var t agentLegacyTask
	if err := json.Unmarshal(raw, &t); err != nil {
		return Task{}, badAnswer("the task does not decode: %v", err)
	}
	if t.ID == "" {
		return Task{}, badAnswer("the task has no id")
	}
	st, err := legacyAgentStatus(t.Status)
	if err != nil {
		return Task{}, err
	}
	out := Task{ID: t.ID, ContextID: t.SessionID, Status: st, Metadata: t.Metadata}
	history := t.History
	if len(history) == 0 {
		history = t.Messages
	}
	for i, m := range history {
		mm, err := m.toV1()
		if err != nil {
			return Task{}, badAnswer("history[%d]: %s", i, err.Error())
		}
		out.History = append(out.History, mm)
	}
	for i, a := range t.Artifacts {
		aa, err := a.toV1(i)
		if err != nil {
			return Task{}, badAnswer("artifacts[%d]: %s", i, err.Error())
		}
		out.Artifacts = append(out.Artifacts, aa)
	}
	if n := len(out.History); out.Status.Message == nil && n > 0 && out.History[n-1].Role == RoleAgent {
		m := out.History[n-1]
		out.Status.Message = &m
	}
	return out, nil
}

// LegacyAgentEventToV1 reads one tasks/sendSubscribe (or
// tasks/resubscribe) event, the result of one JSON-RPC response on the
// stream: an artifact update {id, artifact} or a status update {id,
// status, final}; an object that also carries a task's fields (sessionId,
// history, messages, artifacts) is read as a task snapshot. contextID is
// the session the client sent, which the dialect's events do not repeat.
// final is set when the event says so or settles the task.
func LegacyAgentEventToV1(raw []byte, contextID string) (ev StreamResponse, final bool, err error) {
	var head map[string]json.RawMessage
	if err := json.Unmarshal(raw, &head); err != nil {
		return ev, false, badAnswer("the stream event is not an object: %v", err)
	}
	var f struct {
		ID       string         `json:"id"`
		Final    bool           `json:"final"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return ev, false, badAnswer("the stream event does not decode: %v", err)
	}
	if _, ok := head["artifact"]; ok {
		var u struct {
			Artifact agentLegacyArtifact `json:"artifact"`
		}
		if err := json.Unmarshal(raw, &u); err != nil {
			return ev, false, badAnswer("the artifact update does not decode: %v", err)
		}
		a, err := u.Artifact.toV1(0)
		if err != nil {
			return ev, false, badAnswer("artifact: %s", err.Error())
		}
		ev.ArtifactUpdate = &TaskArtifactUpdateEvent{TaskID: f.ID, ContextID: contextID, Artifact: a,
			Append: u.Artifact.Append, LastChunk: u.Artifact.LastChunk, Metadata: f.Metadata}
		return ev, f.Final, nil
	}
	if _, ok := head["status"]; !ok {
		return ev, false, badAnswer("the stream event is neither a status nor an artifact update")
	}
	for _, k := range []string{"sessionId", "history", "messages", "artifacts"} {
		if _, ok := head[k]; ok {
			t, err := LegacyAgentTaskToV1(raw)
			if err != nil {
				return ev, false, err
			}
			if t.ContextID == "" {
				t.ContextID = contextID
			}
			ev.Task = &t
			return ev, f.Final || t.Status.State.Settled(), nil
		}
	}
	st, err := legacyAgentStatus(head["status"])
	if err != nil {
		return ev, false, err
	}
	ev.StatusUpdate = &TaskStatusUpdateEvent{TaskID: f.ID, ContextID: contextID, Status: st, Metadata: f.Metadata}
	return ev, f.Final || st.State.Settled(), nil
}

// legacyAgentStatus reads a status: an object {state, message, timestamp}
// or the state alone as a string.
func legacyAgentStatus(raw json.RawMessage) (TaskStatus, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return TaskStatus{}, badAnswer("the task has no status")
	}
	var s agentLegacyStatus
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s.State); err != nil {
			return TaskStatus{}, badAnswer("status does not decode: %v", err)
		}
	} else if err := json.Unmarshal(raw, &s); err != nil {
		return TaskStatus{}, badAnswer("status does not decode: %v", err)
	}
	st, err := LegacyStateToV1(s.State)
	if err != nil {
		return TaskStatus{}, err
	}
	out := TaskStatus{State: st}
	if s.Message != nil {
		m, err := s.Message.toV1()
		if err != nil {
			return out, badAnswer("status.message: %s", err.Error())
		}
		out.Message = &m
	}
	if s.Timestamp != "" {
		if t, err := ParseTimestamp(s.Timestamp); err == nil {
			out.Timestamp = &Timestamp{t.Truncate(time.Millisecond)}
		}
	}
	return out, nil
}

func (m agentLegacyMessage) toV1() (Message, error) {
	role, err := RoleFromV03(strings.ToLower(m.Role))
	if err != nil {
		return Message{}, err
	}
	out := Message{MessageID: NewID(), Role: role, Metadata: m.Metadata, Parts: make([]Part, 0, len(m.Parts))}
	for i, raw := range m.Parts {
		p, err := agentLegacyPartToV1(raw)
		if err != nil {
			return out, badAnswer("parts[%d]: %s", i, err.Error())
		}
		out.Parts = append(out.Parts, p)
	}
	return out, nil
}

// toV1 converts an artifact; position is its place in the task, its index
// when it names none.
func (a agentLegacyArtifact) toV1(position int) (Artifact, error) {
	index := position
	if a.Index != nil {
		index = *a.Index
	}
	out := Artifact{ArtifactID: LegacyArtifactID(index), Name: a.Name, Description: a.Description, Metadata: a.Metadata,
		Parts: make([]Part, 0, len(a.Parts))}
	for i, raw := range a.Parts {
		p, err := agentLegacyPartToV1(raw)
		if err != nil {
			return out, badAnswer("parts[%d]: %s", i, err.Error())
		}
		out.Parts = append(out.Parts, p)
	}
	return out, nil
}

// agentLegacyPartToV1 reads a part: the schema's nested shapes
// ({"type":"file","file":{...}}, data objects) as LegacyPartToV1 does, and
// the flat ones (a file's name, mime type and base64 data beside its type;
// data of any JSON type).
func agentLegacyPartToV1(raw json.RawMessage) (Part, error) {
	var p agentLegacyPart
	if err := json.Unmarshal(raw, &p); err != nil {
		return Part{}, badAnswer("the part does not decode: %v", err)
	}
	typ := p.Type
	if typ == "" {
		typ = p.Kind
	}
	if typ == "" && p.Text != nil {
		typ = "text"
	}
	mime := p.MimeType
	if mime == "" {
		mime = p.MimeTypeRust
	}
	data := bytes.TrimSpace(p.Data)
	switch typ {
	case "text":
		return PartFromV03(V03Part{Kind: "text", Text: p.Text, Metadata: p.Metadata})
	case "file":
		if p.File != nil {
			return PartFromV03(V03Part{Kind: "file", File: p.File, Metadata: p.Metadata})
		}
		var b64 string
		if err := json.Unmarshal(data, &b64); err != nil {
			return Part{}, badAnswer("a file part needs file, or data holding base64")
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			if raw, err = base64.URLEncoding.DecodeString(b64); err != nil {
				return Part{}, badAnswer("the file part's data is not base64")
			}
		}
		return Part{Raw: raw, Filename: p.Name, MediaType: mime, Metadata: p.Metadata}, nil
	case "data":
		if len(data) == 0 || string(data) == "null" {
			return Part{}, badAnswer("a data part needs data")
		}
		if data[0] == '{' {
			out, err := PartFromV03(V03Part{Kind: "data", Data: data, Metadata: p.Metadata})
			if err == nil && mime != "" {
				out.MediaType = mime
			}
			return out, err
		}
		return Part{Data: append(json.RawMessage(nil), data...), MediaType: cmp.Or(mime, "application/json"), Metadata: p.Metadata}, nil
	}
	return Part{}, badAnswer("part type %q is not text, file or data", typ)
}
