package schemas

import (
	"bytes"
	"cmp"
	"encoding/json"
	"strings"
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
//
// The leniency is all this side owns: each shape an agent answers is put
// in the 0.3 shape it stands for (toV03), and a2a03.go's converters, the
// ones every 0.3 answer goes through, make the 1.0 model of it.

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
	k := squashState(s)
	if k == "cancelled" {
		k = "canceled"
	}
	for st, name := range states03 {
		if squashState(name) == k {
			return st, nil
		}
	}
	return "", Errorf(ErrInvalidAgentResponse, "state %q is not a task state", s)
}

// squashState is a state's name without case, "-", "_" or spaces.
func squashState(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '-', '_', ' ':
			return -1
		}
		return r
	}, strings.ToLower(strings.TrimSpace(s)))
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

// asBadAnswer is badAnswer of err, an error of a2a03.go's converters
// (which read what a client sent, so say ErrInvalidParams), prefixed
// with where it was found.
func asBadAnswer(where string, err error) error {
	if where != "" {
		where += ": "
	}
	return badAnswer("%s%s", where, err.Error())
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
	v := V03Task{Kind: "task", ID: t.ID, ContextID: t.SessionID, Metadata: t.Metadata}
	var err error
	if v.Status, err = legacyAgentStatus(t.Status); err != nil {
		return Task{}, err
	}
	history := t.History
	if len(history) == 0 {
		history = t.Messages
	}
	for i, m := range history {
		mm, err := m.toV03()
		if err != nil {
			return Task{}, badAnswer("history[%d]: %s", i, err.Error())
		}
		v.History = append(v.History, mm)
	}
	for i, a := range t.Artifacts {
		aa, err := a.toV03(i)
		if err != nil {
			return Task{}, badAnswer("artifacts[%d]: %s", i, err.Error())
		}
		v.Artifacts = append(v.Artifacts, aa)
	}
	out, err := TaskFromV03(v)
	if err != nil {
		return Task{}, asBadAnswer("", err)
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
		v, err := u.Artifact.toV03(0)
		if err != nil {
			return ev, false, badAnswer("artifact: %s", err.Error())
		}
		a, err := ArtifactFromV03(v)
		if err != nil {
			return ev, false, asBadAnswer("artifact", err)
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
	v, err := legacyAgentStatus(head["status"])
	if err != nil {
		return ev, false, err
	}
	st, err := statusFromV03(v)
	if err != nil {
		return ev, false, asBadAnswer("status", err)
	}
	ev.StatusUpdate = &TaskStatusUpdateEvent{TaskID: f.ID, ContextID: contextID, Status: st, Metadata: f.Metadata}
	return ev, f.Final || st.State.Settled(), nil
}

// legacyAgentStatus reads a status, an object {state, message, timestamp}
// or the state alone as a string, into the 0.3 shape: the state spelled
// as 0.3 does, a timestamp that does not parse dropped.
func legacyAgentStatus(raw json.RawMessage) (V03TaskStatus, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return V03TaskStatus{}, badAnswer("the task has no status")
	}
	var s agentLegacyStatus
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s.State); err != nil {
			return V03TaskStatus{}, badAnswer("status does not decode: %v", err)
		}
	} else if err := json.Unmarshal(raw, &s); err != nil {
		return V03TaskStatus{}, badAnswer("status does not decode: %v", err)
	}
	st, err := LegacyStateToV1(s.State)
	if err != nil {
		return V03TaskStatus{}, err
	}
	out := V03TaskStatus{State: StateToV03(st)}
	if s.Message != nil {
		m, err := s.Message.toV03()
		if err != nil {
			return out, badAnswer("status.message: %s", err.Error())
		}
		out.Message = &m
	}
	if _, err := ParseTimestamp(s.Timestamp); err == nil {
		out.Timestamp = s.Timestamp
	}
	return out, nil
}

// toV03 puts a message in the 0.3 shape, with a new id (the dialect's
// messages have none) and its role in lower case.
func (m agentLegacyMessage) toV03() (V03Message, error) {
	out := V03Message{Kind: "message", MessageID: NewID(), Role: strings.ToLower(m.Role), Metadata: m.Metadata}
	parts, err := agentLegacyPartsToV03(m.Parts)
	out.Parts = parts
	return out, err
}

// toV03 puts an artifact in the 0.3 shape; position is its place in the
// task, its index when it names none.
func (a agentLegacyArtifact) toV03(position int) (V03Artifact, error) {
	index := position
	if a.Index != nil {
		index = *a.Index
	}
	out := V03Artifact{ArtifactID: LegacyArtifactID(index), Name: a.Name, Description: a.Description, Metadata: a.Metadata}
	parts, err := agentLegacyPartsToV03(a.Parts)
	out.Parts = parts
	return out, err
}

// agentLegacyPartsToV03 puts a message's or an artifact's parts in the
// 0.3 shape, an error naming the part that does not read.
func agentLegacyPartsToV03(raws []json.RawMessage) ([]V03Part, error) {
	out := make([]V03Part, len(raws))
	for i, raw := range raws {
		var err error
		if out[i], err = agentLegacyPartToV03(raw); err != nil {
			return out, badAnswer("parts[%d]: %s", i, err.Error())
		}
	}
	return out, nil
}

// agentLegacyPartToV03 puts a part in the 0.3 shape: the schema's nested
// shapes ({"type":"file","file":{...}}, data objects) as they are, and
// the flat ones (a file's name, mime type and base64 data beside its
// type; data of any JSON type, with a mime type) as the nested shape they
// stand for, a data part's mime type where PartFromV03 reads it.
func agentLegacyPartToV03(raw json.RawMessage) (V03Part, error) {
	var p agentLegacyPart
	if err := json.Unmarshal(raw, &p); err != nil {
		return V03Part{}, badAnswer("the part does not decode: %v", err)
	}
	typ := cmp.Or(p.Type, p.Kind)
	if typ == "" && p.Text != nil {
		typ = "text"
	}
	mime := cmp.Or(p.MimeType, p.MimeTypeRust)
	data := bytes.TrimSpace(p.Data)
	switch typ {
	case "text":
		return V03Part{Kind: "text", Text: p.Text, Metadata: p.Metadata}, nil
	case "file":
		if p.File != nil {
			return V03Part{Kind: "file", File: p.File, Metadata: p.Metadata}, nil
		}
		var b64 string
		if err := json.Unmarshal(data, &b64); err != nil {
			return V03Part{}, badAnswer("a file part needs file, or data holding base64")
		}
		return V03Part{Kind: "file", File: &V03File{Name: p.Name, MimeType: mime, Bytes: &b64}, Metadata: p.Metadata}, nil
	case "data":
		if len(data) == 0 || string(data) == "null" {
			return V03Part{}, badAnswer("a data part needs data")
		}
		return V03Part{Kind: "data", Data: data, Metadata: withMeta(p.Metadata, mediaTypeKey, mime)}, nil
	}
	return V03Part{}, badAnswer("part type %q is not text, file or data", typ)
}
