package interop

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// drain reads a stream as an SDK user does: events until the first error.
func drain(stream iter.Seq2[a2a.Event, error]) (events []string, err error) {
	for ev, err := range stream {
		if err != nil {
			return events, err
		}
		events = append(events, fmt.Sprintf("%T", ev))
	}
	return events, nil
}

// A streaming call that fails before its stream opens reaches the official
// Go client as the error, typed, on every binding. The SDK's JSON-RPC
// transports (1.0, and 0.3 through a2av0) take any HTTP 200 answer to a
// streaming call as an SSE stream and read only its data: lines, so a plain
// JSON-RPC error body is an empty stream to them, without an error: the
// error has to come as an SSE event holding the JSON-RPC error response.
// The HTTP+JSON transport reads the status code of a non-200 answer.
func TestOfficialGoClientSeesStreamingErrors(t *testing.T) {
	base := startA2Abus(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			echo := clientFor(t, base, "echo", tr)

			// SubscribeToTask on a task that does not exist.
			events, err := drain(echo.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: a2a.NewTaskID()}))
			if len(events) != 0 || !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("SubscribeToTask on an unknown task: events %v, error %v; want no events and ErrTaskNotFound", events, err)
			}

			// SubscribeToTask on a finished task.
			res, err := echo.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("finished"))})
			if err != nil {
				t.Fatalf("SendMessage: %v", err)
			}
			task, ok := res.(*a2a.Task)
			if !ok || task.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("SendMessage: %#v", res)
			}
			events, err = drain(echo.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}))
			if len(events) != 0 || !errors.Is(err, a2a.ErrUnsupportedOperation) {
				t.Errorf("SubscribeToTask on a completed task: events %v, error %v; want no events and ErrUnsupportedOperation", events, err)
			}

			// SendStreamingMessage continuing a task that does not exist.
			msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("to nowhere"))
			msg.TaskID = a2a.NewTaskID()
			events, err = drain(echo.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}))
			if len(events) != 0 || !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("SendStreamingMessage to an unknown task: events %v, error %v; want no events and ErrTaskNotFound", events, err)
			}

			// SendStreamingMessage with a message the server refuses (no parts).
			events, err = drain(echo.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser)}))
			if len(events) != 0 || !errors.Is(err, a2a.ErrInvalidParams) {
				t.Errorf("SendStreamingMessage without parts: events %v, error %v; want no events and ErrInvalidParams", events, err)
			}
		})
	}
}
