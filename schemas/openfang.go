package schemas

// OpenFang's REST routes (POST /a2a/tasks/send, GET /a2a/tasks/{id}, POST
// /a2a/tasks/{id}/cancel) answer a task in a shape of their own: the status
// a plain state string, the conversation under "messages", parts and
// artifacts as in the older tasks/send dialect. a2abus answers those routes
// in that shape (../shared/seeds/000…, "POST /a2a/tasks/send"), keeping
// the older dialect's richer artifacts (index, description, metadata),
// which OpenFang's document does not forbid.

// OpenFangTask is a task as OpenFang's REST routes answer it.
type OpenFangTask struct {
	ID        string           `json:"id"`
	SessionID string           `json:"sessionId,omitempty"`
	Status    string           `json:"status"`
	Messages  []LegacyMessage  `json:"messages"`
	Artifacts []LegacyArtifact `json:"artifacts"`
	Metadata  map[string]any   `json:"metadata,omitempty"`
}

// OpenFangState names a state as OpenFang does: its states are Submitted,
// Working, InputRequired, Completed, Cancelled and Failed. The document
// prints "completed", so the others are lowercase too; "cancelled" is its
// spelling, and the interrupted states take the older dialect's
// "input-required". REJECTED is a failure to an OpenFang client.
func OpenFangState(s TaskState) string {
	switch s {
	case TaskStateCanceled:
		return "cancelled"
	case TaskStateRejected:
		return "failed"
	}
	return LegacyStateFromV1(s)
}

// OpenFangTaskFromV1 converts a task for OpenFang's routes, answering with
// the client's own id (the task's when empty). The messages are the
// history and then the current status message, if the history does not
// hold it already: OpenFang puts the agent's answer in messages.
func OpenFangTaskFromV1(t Task, clientID string) OpenFangTask {
	if clientID == "" {
		clientID = t.ID
	}
	out := OpenFangTask{ID: clientID, SessionID: t.ContextID, Status: OpenFangState(t.Status.State),
		Messages: []LegacyMessage{}, Artifacts: []LegacyArtifact{}, Metadata: t.Metadata}
	seen := map[string]bool{}
	for _, m := range t.History {
		seen[m.MessageID] = m.MessageID != ""
		out.Messages = append(out.Messages, LegacyMessageFromV1(m))
	}
	if m := t.Status.Message; m != nil && !(m.MessageID != "" && seen[m.MessageID]) {
		out.Messages = append(out.Messages, LegacyMessageFromV1(*m))
	}
	for i, a := range t.Artifacts {
		out.Artifacts = append(out.Artifacts, LegacyArtifactFromV1(a, i))
	}
	return out
}
