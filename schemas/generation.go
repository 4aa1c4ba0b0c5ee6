package schemas

import (
	"bytes"
	"strconv"
)

// Generation is a task's generation (A2A 1.1, on the spec's dev-1.1
// branch): 1 when the task is created, one more for every event the task
// emits (a status or an artifact update), so a client that tracks it sees
// a gap as a missed event, long-polls GetTask for the next one
// (GetTaskRequest.CurrentGeneration) and guards a continuation against a
// concurrent one (SendMessageConfiguration.IfGenerationMatch). 0 means
// unknown: a server (or a record) that does not keep it.
//
// It is an int64 in the proto, which ProtoJSON writes as a string; a2abus
// writes a number (what the JSON examples and the hand-written SDKs use)
// and reads either.
type Generation int64

// UnmarshalJSON reads a number or a string holding one.
func (g *Generation) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		b = b[1 : len(b)-1]
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 0 {
		return &generationError{text: string(b)}
	}
	*g = Generation(n)
	return nil
}

type generationError struct{ text string }

func (e *generationError) Error() string {
	text := e.text
	if len(text) > 32 {
		text = text[:32] + "…"
	}
	return "a generation is a non-negative integer (a number or a string of digits), not " + strconv.Quote(text)
}

// GenerationMismatch refuses a continuation whose
// configuration.ifGenerationMatch is not the task's generation: the task
// changed since the client read it.
func GenerationMismatch(taskID string, expected, current Generation) *Error {
	return Errorf(ErrTaskGenerationMismatch, "task generation mismatch: expected %d but current generation is %d; get the task and decide again", expected, current).
		With("taskId", taskID).
		With("expectedGeneration", strconv.FormatInt(int64(expected), 10)).
		With("currentGeneration", strconv.FormatInt(int64(current), 10))
}
