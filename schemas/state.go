package schemas

// The task state machine. Every component that changes a task (edge on
// create and cancel, workers on agent events) goes through CanTransition, so
// the rules live here once:
//
//	SUBMITTED ─▶ WORKING ─▶ COMPLETED | FAILED | CANCELED | REJECTED
//	    │           │  ▲
//	    │           ▼  │
//	    │     INPUT_REQUIRED | AUTH_REQUIRED ─▶ (any terminal)
//	    └──────────────────────────────────────▶ (any terminal)
//
// Terminal states absorb: nothing leaves them. A status update that repeats
// the current non-terminal state is allowed (a new status message while
// WORKING).

// Valid reports whether s is one of the defined states other than UNSPECIFIED.
func (s TaskState) Valid() bool {
	switch s {
	case TaskStateSubmitted, TaskStateWorking, TaskStateCompleted, TaskStateFailed,
		TaskStateCanceled, TaskStateInputRequired, TaskStateRejected, TaskStateAuthRequired:
		return true
	}
	return false
}

// Terminal reports whether s is a final state: COMPLETED, FAILED, CANCELED
// or REJECTED. A terminal task never changes again.
func (s TaskState) Terminal() bool {
	switch s {
	case TaskStateCompleted, TaskStateFailed, TaskStateCanceled, TaskStateRejected:
		return true
	}
	return false
}

// Interrupted reports whether s waits for the client: INPUT_REQUIRED or
// AUTH_REQUIRED.
func (s TaskState) Interrupted() bool {
	return s == TaskStateInputRequired || s == TaskStateAuthRequired
}

// Settled reports whether a blocking caller can be answered: the task is
// terminal or interrupted.
func (s TaskState) Settled() bool { return s.Terminal() || s.Interrupted() }

// CanTransition reports whether a task may move from one state to another.
func CanTransition(from, to TaskState) bool {
	if !to.Valid() || from.Terminal() {
		return false
	}
	switch from {
	case TaskStateWorking:
		// Work never goes back to the queue by itself.
		return to != TaskStateSubmitted
	case TaskStateSubmitted, TaskStateInputRequired, TaskStateAuthRequired:
		// Queued work may go anywhere; an interrupted task continues when the
		// client answers (SUBMITTED again, set by the edge), when the agent
		// resumes (WORKING), or ends.
		return true
	}
	return false
}
