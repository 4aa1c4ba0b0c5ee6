package schemas

import "time"

// DeadLetterSummary is one dead letter as an operator lists it (the edge's
// GET /a2a/admin/dead-letters): what was given up on and why, never the
// work item's message or the notification's body.
type DeadLetterSummary struct {
	// Kind is "work" (a work item of an agent) or "push" (a push
	// notification).
	Kind  string `json:"kind"`
	Agent string `json:"agent,omitempty"`
	// TaskID is the task the work or the notification was for; empty for
	// a work item that could not be decoded.
	TaskID string `json:"taskId,omitempty"`
	// ConfigID is a push notification's config.
	ConfigID string    `json:"configId,omitempty"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// The kinds of dead letters.
const (
	DeadLetterWork = "work"
	DeadLetterPush = "push"
)
