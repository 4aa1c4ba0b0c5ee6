package workers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// Echo is the demo agent: it streams the user's text back as an artifact,
// a few words per chunk (append/lastChunk), and completes. A short message
// is one chunk; a long one is at most MaxEchoChunks chunks, so what a
// message costs to echo follows its size, not its number of words (each
// chunk is an event stored and sent). A message starting with "/ask" makes it ask what to echo
// (INPUT_REQUIRED); the answer, sent on the same task, is echoed. It shows
// every part of the runtime a real agent uses.
type Echo struct {
	// WordsPerChunk is how many words go in one artifact chunk; default 4.
	WordsPerChunk int
	// Delay is waited before answering: a stand-in for a model call, so
	// load runs can measure a fleet of workers on a sleep-bound agent.
	Delay time.Duration
}

// MakesTasks reports true: every message makes a task, whatever it asks.
func (Echo) MakesTasks() bool { return true }

// MaxEchoChunks bounds the chunks of one echo: past WordsPerChunk ×
// MaxEchoChunks words, chunks hold more words each.
const MaxEchoChunks = 64

// AskCommand starts a message that makes the echo agent ask for input.
const AskCommand = "/ask"

// EchoDefinition returns the definition of the echo agent named name.
func EchoDefinition(name string) Definition {
	return Definition{
		Name: name,
		Card: schemas.AgentCard{
			Name:        name,
			Description: "Echoes your message back as a streamed text artifact.",
			Version:     "1.0.0",
			Skills: []schemas.AgentSkill{{
				ID: "echo", Name: "Echo", Description: "Returns the text it is sent, streamed in chunks.",
				Tags: []string{"demo", "echo"}, Examples: []string{"hello world"},
			}, {
				ID: "ask", Name: "Ask first", Description: "Send /ask: the agent asks what to echo (input-required) and echoes your answer.",
				Tags: []string{"demo", "multi-turn"}, Examples: []string{"/ask"},
			}},
		},
		Agent: Echo{},
	}
}

// Execute streams the message text back and completes.
func (e Echo) Execute(ctx context.Context, req *Request, out *Emitter) error {
	text := req.Message.Text()
	if strings.HasPrefix(text, AskCommand) {
		return out.InputRequired(ctx, "What should I echo?")
	}
	if text == "" {
		return out.Reject(ctx, "echo needs a message with text")
	}
	if e.Delay > 0 {
		t := time.NewTimer(e.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	n := e.WordsPerChunk
	if n <= 0 {
		n = 4
	}
	chunks := chunkWords(text, n, len(text)/MaxEchoChunks)
	art := schemas.Artifact{ArtifactID: "echo-" + req.Task.ID, Name: "echo"}
	last := len(chunks) - 1
	for i, c := range chunks[:last] {
		art.Parts = []schemas.Part{schemas.TextPart(c)}
		if err := out.ArtifactChunk(ctx, art, i > 0, false); err != nil {
			return err
		}
	}
	art.Parts = []schemas.Part{schemas.TextPart(chunks[last])}
	return out.CompleteWith(ctx, art, last > 0, fmt.Sprintf("echoed %d characters in %d chunk(s)", len(text), len(chunks)))
}

// chunkWords splits s before a word once a chunk holds n words and at
// least minBytes bytes, keeping the whitespace, so the chunks concatenate
// back to s.
func chunkWords(s string, n, minBytes int) []string {
	var out []string
	words, start := 0, 0
	inWord := false
	for i, r := range s {
		space := strings.ContainsRune(" \t\n\r", r)
		if !space && !inWord {
			if words >= n && i-start >= minBytes {
				out = append(out, s[start:i])
				start, words = i, 0
			}
			words++
		}
		inWord = !space
	}
	return append(out, s[start:])
}
