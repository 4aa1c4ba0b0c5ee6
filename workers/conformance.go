package workers

import (
	"context"
	"strings"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// The conformance agent: the system-under-test agent of the public A2A
// conformance suite (a2aproject/a2a-tck). The suite cannot know what an
// agent does, so it steers it in-band by the messageId prefix of the
// message it sends; the behaviours and texts below are the ones its
// scenarios assert (TCK 1.0-dev, and the 0.3 suite's plain messages).
// Off unless configured (--agent tck).

// TCK is the conformance agent. Zero durations take the suite's defaults.
type TCK struct {
	// Hold is how long test-resubscribe-message-id tasks stay WORKING so a
	// client can subscribe mid-task: the suite asks for at least twice its
	// 2 s streaming timeout; default 4s.
	Hold time.Duration
	// Linger is how long a plain (unprefixed) task stays WORKING before it
	// completes, so the 0.3 suite can cancel or continue it; default 1s.
	Linger time.Duration
}

// TCKDefinition returns the conformance agent named name.
func TCKDefinition(name string) Definition {
	return Definition{
		Name: name,
		Card: schemas.AgentCard{
			Name:        name,
			Description: "A2A TCK conformance agent: behaviour is chosen by the messageId prefix of each message, as the public A2A conformance suite expects.",
			Version:     "1.0.0",
			Skills: []schemas.AgentSkill{{
				ID: "tck", Name: "Conformance scenarios", Tags: []string{"tck", "conformance"},
				Description: "tck-complete-task, tck-artifact-*, tck-message-response, tck-input-required, tck-reject-task, tck-stream-*, test-resubscribe-message-id",
			}},
		},
		Agent: TCK{},
	}
}

const tckFileText = "file output"

// tckScenarios maps messageId prefixes (longest first, so that
// tck-stream-artifact-file is not taken by a shorter prefix) to behaviour.
var tckScenarios = []struct {
	prefix string
	run    func(t TCK, ctx context.Context, req *Request, out *Emitter) error
}{
	{"tck-stream-artifact-chunked", func(_ TCK, ctx context.Context, req *Request, out *Emitter) error {
		if err := out.Status(ctx, schemas.TaskStateWorking, nil); err != nil {
			return err
		}
		a := schemas.Artifact{ArtifactID: "chunked-artifact", Parts: []schemas.Part{schemas.TextPart("chunk-1 ")}}
		if err := out.ArtifactChunk(ctx, a, false, false); err != nil {
			return err
		}
		a.Parts = []schemas.Part{schemas.TextPart("chunk-2")}
		if err := out.ArtifactChunk(ctx, a, true, true); err != nil {
			return err
		}
		return out.Complete(ctx, "")
	}},
	{"tck-stream-artifact-text", streamed(schemas.TextPart("Streamed text content"))},
	{"tck-stream-artifact-file", streamed(tckFile())},
	{"tck-stream-ordering-001", streamed(schemas.TextPart("Ordered output"))},
	{"test-resubscribe-message-id", func(t TCK, ctx context.Context, req *Request, out *Emitter) error {
		if err := out.Status(ctx, schemas.TaskStateWorking, nil); err != nil {
			return err
		}
		if err := wait(ctx, t.hold()); err != nil {
			return err
		}
		return out.Complete(ctx, "")
	}},
	{"tck-artifact-file-url", artifactThenComplete(schemas.URLPart("https://example.com/output.txt", "output.txt", "text/plain"))},
	{"tck-message-response", func(_ TCK, ctx context.Context, req *Request, out *Emitter) error {
		return out.Reply(ctx, *AgentMessage("Direct message response"))
	}},
	{"tck-input-required", func(_ TCK, ctx context.Context, req *Request, out *Emitter) error {
		return out.InputRequired(ctx, "Input required")
	}},
	{"tck-complete-task", func(_ TCK, ctx context.Context, req *Request, out *Emitter) error {
		return out.Complete(ctx, "Hello from TCK")
	}},
	{"tck-artifact-text", artifactThenComplete(schemas.TextPart("Generated text content"))},
	{"tck-artifact-file", artifactThenComplete(tckFile())},
	{"tck-artifact-data", artifactThenComplete(schemas.DataPart(map[string]any{"key": "value", "count": 42}))},
	{"tck-reject-task", func(_ TCK, ctx context.Context, req *Request, out *Emitter) error {
		return out.Reject(ctx, "rejected")
	}},
	{"tck-stream-001", streamed(schemas.TextPart("Stream hello from TCK"))},
	{"tck-stream-002", func(_ TCK, ctx context.Context, req *Request, out *Emitter) error {
		return out.Complete(ctx, "")
	}},
	{"tck-stream-003", streamed(schemas.TextPart("Stream task lifecycle"))},
}

func tckFile() schemas.Part {
	return schemas.FilePart([]byte(tckFileText), "output.txt", "text/plain")
}

// artifactThenComplete emits one artifact holding p and completes.
func artifactThenComplete(p schemas.Part) func(TCK, context.Context, *Request, *Emitter) error {
	return func(_ TCK, ctx context.Context, req *Request, out *Emitter) error {
		if err := out.Artifact(ctx, schemas.Artifact{ArtifactID: "tck-artifact", Parts: []schemas.Part{p}}); err != nil {
			return err
		}
		return out.Complete(ctx, "")
	}
}

// streamed is WORKING, one artifact holding p, COMPLETED.
func streamed(p schemas.Part) func(TCK, context.Context, *Request, *Emitter) error {
	return func(t TCK, ctx context.Context, req *Request, out *Emitter) error {
		if err := out.Status(ctx, schemas.TaskStateWorking, nil); err != nil {
			return err
		}
		return artifactThenComplete(p)(t, ctx, req, out)
	}
}

// Execute dispatches on the messageId prefix, also on follow-up messages
// of a task (the suite builds multi-turn history by sending prefixed
// answers). An unprefixed answer to a task that asked for input completes it
// with "Received: <text>"; any other unprefixed message stays WORKING for
// Linger, then completes.
func (t TCK) Execute(ctx context.Context, req *Request, out *Emitter) error {
	id := req.Message.MessageID
	for _, sc := range tckScenarios {
		if strings.HasPrefix(id, sc.prefix) {
			return sc.run(t, ctx, req, out)
		}
	}
	if len(req.Task.History) > 1 {
		for _, m := range req.Task.History[:len(req.Task.History)-1] {
			if m.Role == schemas.RoleAgent {
				return out.Complete(ctx, "Received: "+req.Message.Text())
			}
		}
	}
	if err := out.Status(ctx, schemas.TaskStateWorking, nil); err != nil {
		return err
	}
	if err := wait(ctx, t.linger()); err != nil {
		return err
	}
	return out.Complete(ctx, "Hello from TCK")
}

func (t TCK) hold() time.Duration {
	if t.Hold > 0 {
		return t.Hold
	}
	return 4 * time.Second
}

func (t TCK) linger() time.Duration {
	if t.Linger > 0 {
		return t.Linger
	}
	return time.Second
}

// wait pauses for d or until ctx ends.
func wait(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
