package schemas

import (
	"fmt"
	"strconv"
	"time"
)

// More of the older tasks/send dialect (a2aproject/A2A v0.1.0,
// specification/json/a2a.json and samples/python/common/types.py): the
// params of tasks/get, tasks/cancel and tasks/resubscribe, its narrower
// state enum, and the conversions of tasks to the 1.0 model. The send
// params, messages, parts and the conversions from 1.0 are in legacy.go.

// LegacyTaskQueryParams is the params of tasks/get and tasks/resubscribe:
// the client's task id and how much history to return.
type LegacyTaskQueryParams struct {
	ID            string         `json:"id"`
	HistoryLength *int32         `json:"historyLength,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

// LegacyTaskIDParams is the params of tasks/cancel and
// tasks/pushNotification/get: the client's task id.
type LegacyTaskIDParams struct {
	ID       string         `json:"id"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// LegacyStateFromV1 returns the older dialect's name of a state. Its enum
// has only submitted, working, input-required, completed, canceled, failed
// and unknown, and its clients reject anything else, so REJECTED is sent as
// "failed" and AUTH_REQUIRED as "input-required" (both still end a
// tasks/sendSubscribe stream the same way).
func LegacyStateFromV1(s TaskState) string {
	switch s {
	case TaskStateRejected:
		return "failed"
	case TaskStateAuthRequired:
		return "input-required"
	}
	return StateToV03(s)
}

// LegacyStatusToV1 converts a task status of the older dialect. It returns
// an ErrInvalidParams occurrence naming the field for an unknown state, a
// bad message or a timestamp that is not RFC 3339 (a missing zone is read as
// UTC; precision is cut to milliseconds, as everywhere in a2abus).
func LegacyStatusToV1(s LegacyTaskStatus) (TaskStatus, error) {
	st, err := StateFromV03(s.State)
	if err != nil {
		return TaskStatus{}, Errorf(ErrInvalidParams, "status.state %q is not a task state", s.State)
	}
	out := TaskStatus{State: st}
	if s.Message != nil {
		m, err := LegacyMessageToV1(*s.Message)
		if err != nil {
			return out, Errorf(ErrInvalidParams, "status.message: %s", err.Error())
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

// LegacyArtifactID is the 1.0 artifactId given to the older dialect's
// artifact at index, which has no id of its own: chunks of one artifact
// share an index and so an id.
func LegacyArtifactID(index int) string { return "artifact-" + strconv.Itoa(index) }

// LegacyArtifactToV1 converts an artifact of the older dialect; its id is
// LegacyArtifactID(a.Index). It returns an ErrInvalidParams occurrence
// naming the bad part.
func LegacyArtifactToV1(a LegacyArtifact) (Artifact, error) {
	out := Artifact{ArtifactID: LegacyArtifactID(a.Index), Name: a.Name, Description: a.Description, Metadata: a.Metadata}
	out.Parts = make([]Part, len(a.Parts))
	for i, p := range a.Parts {
		var err error
		if out.Parts[i], err = legacyPartToV1(p, fmt.Sprintf("artifact.parts[%d]", i)); err != nil {
			return out, err
		}
	}
	return out, nil
}

// LegacyTaskToV1 converts a task of the older dialect. The 1.0 id is
// LegacyTaskID of the client's id and sessionId becomes the contextId;
// messages, which have no id in this dialect, get new ones. It returns an
// ErrInvalidParams occurrence naming the bad field.
func LegacyTaskToV1(t LegacyTask) (Task, error) {
	if t.ID == "" {
		return Task{}, Errorf(ErrInvalidParams, "id is required")
	}
	st, err := LegacyStatusToV1(t.Status)
	if err != nil {
		return Task{}, err
	}
	out := Task{ID: LegacyTaskID(t.ID), ContextID: t.SessionID, Status: st, Metadata: t.Metadata}
	for i, m := range t.History {
		mm, err := LegacyMessageToV1(m)
		if err != nil {
			return out, Errorf(ErrInvalidParams, "history[%d]: %s", i, err.Error())
		}
		out.History = append(out.History, mm)
	}
	for i, a := range t.Artifacts {
		aa, err := LegacyArtifactToV1(a)
		if err != nil {
			return out, Errorf(ErrInvalidParams, "artifacts[%d].%s", i, err.Error())
		}
		out.Artifacts = append(out.Artifacts, aa)
	}
	return out, nil
}
