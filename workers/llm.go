package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/tracing"
	"github.com/a2abus/a2abus/schemas"
)

// The llm agent kind: any OpenAI-compatible chat-completions endpoint
// (OpenAI, Ollama, vLLM, a LiteLLM proxy) as an agent. The task's history
// is the conversation (the system prompt first, the client's messages as
// "user", the agent's as "assistant"); the model's answer streams into the
// task as artifact chunks as its tokens arrive; the token usage is put in
// the task's metadata. The task completes with its answer, so a
// conversation goes on in a new task whose message refers to the earlier
// ones (referenceTaskIds; one reference to the last is enough, as each
// refers to the one before): their messages and answers come first.

// MetaLLMUsage is the task metadata key of a completion's token usage:
// {"prompt_tokens", "completion_tokens", "total_tokens"} as the provider
// reported it.
const MetaLLMUsage = "a2abus.llm.usage"

// LLM calls a chat-completions endpoint.
type LLM struct {
	// BaseURL is the API's base, e.g. https://api.openai.com/v1 or
	// http://127.0.0.1:11434/v1 (Ollama); /chat/completions is appended.
	BaseURL string
	Model   string
	// System is the system prompt ("" for none).
	System string
	// APIKey returns the key sent as a bearer token (nil or "": none).
	APIKey func() (string, error)
	// HTTP reaches the API; cmd passes the outbound guard's client.
	HTTP *http.Client
	// Timeout bounds one completion; default 5m.
	Timeout time.Duration
	// Temperature and MaxTokens are passed when set.
	Temperature *float64
	MaxTokens   int
	// MaxHistory bounds the messages sent (the related tasks' and the
	// task's, the latest kept); default 50.
	MaxHistory int
	// Budget, if set, holds the runs to the tokens budgets of the task's
	// owner and tenant: a run whose budget is spent when it starts fails
	// the task, and each completion's usage is counted once it is spent
	// (so a budget can end over its limit by the completion that crossed
	// it, and by a completion run again after a worker died before the
	// task was stored finished).
	Budget TokenBudget
}

// TokenBudget is what an agent that spends model tokens counts them
// against (a *bus.Budgets): CheckTokens refuses with a
// schemas.ErrRateLimited error while a tokens budget of o is spent;
// AddTokens counts n tokens against each.
type TokenBudget interface {
	CheckTokens(ctx context.Context, o bus.Owner) error
	AddTokens(ctx context.Context, o bus.Owner, n int64) error
}

// TokenSpender is an Agent whose runs spend model tokens: its runner
// registers it so (AgentRegistration.SpendsTokens), and edges refuse its
// new tasks while a tokens budget of the caller is spent.
type TokenSpender interface {
	SpendsTokens() bool
}

// SpendsTokens reports true: every completion spends tokens.
func (l LLM) SpendsTokens() bool { return true }

// errStreamDone ends the reading of a stream early (its end marker).
var errStreamDone = errors.New("end of stream")

// chatMessage is one message of the conversation sent.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatChunk is what the agent reads of one streamed chunk.
type chatChunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
}

// Execute sends the conversation and streams the answer.
func (l LLM) Execute(ctx context.Context, req *Request, out *Emitter) (err error) {
	owner := bus.Owner{Principal: req.Owner, Tenant: req.Tenant}
	if l.Budget != nil {
		if err := l.Budget.CheckTokens(ctx, owner); errors.Is(err, schemas.ErrRateLimited) {
			return out.Fail(ctx, "not run: "+err.Error())
		} else if err != nil {
			return fmt.Errorf("the tokens budget cannot be checked: %w", err)
		}
	}
	ctx, end := l.startChat(ctx)
	defer func() { end(err) }()
	msgs := l.conversation(ctx, req)
	body := map[string]any{"model": l.Model, "messages": msgs, "stream": true, "stream_options": map[string]any{"include_usage": true}}
	if l.Temperature != nil {
		body["temperature"] = *l.Temperature
	}
	if l.MaxTokens > 0 {
		body["max_tokens"] = l.MaxTokens
	}
	d := l.Timeout
	if d <= 0 {
		d = 5 * time.Minute
	}
	// The call's context is the run's for cancellation only until the
	// answer's [DONE]: the run ends right after it, and the read of the
	// answer's end that keeps the connection (keepConnection) must not be
	// cut by it.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	unfollow := context.AfterFunc(ctx, cancel)
	// kept is set when the answer ended with [DONE]: its tail is read in
	// the background (keepConnection), which ends cctx.
	kept := false
	defer func() {
		if !kept {
			unfollow()
			cancel()
		}
	}()
	key := ""
	if l.APIKey != nil {
		var err error
		if key, err = l.APIKey(); err != nil {
			return fmt.Errorf("the model's API key cannot be read: %w", err)
		}
	}
	resp, err := postJSON(cctx, l.HTTP, l.BaseURL, "/chat/completions", body, func(h http.Header) error {
		h.Set("Accept", "text/event-stream")
		if key != "" {
			h.Set("Authorization", "Bearer "+key)
		}
		return nil
	})
	if ok, err := providerAnswer(ctx, out, "the model", resp, err); !ok {
		return err
	}
	defer func() {
		if !kept {
			_ = resp.Body.Close()
		}
	}()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A server that does not stream answers one completion.
		return l.whole(ctx, resp.Body, out, owner)
	}
	art := schemas.Artifact{ArtifactID: "answer", Name: l.Model}
	chunks := 0
	var usage json.RawMessage
	finish := ""
	var badChunk, emitErr error
	err = readSSE(resp.Body, func(_ string, data []byte) error {
		if string(bytes.TrimSpace(data)) == "[DONE]" {
			kept = true
			return errStreamDone
		}
		var c chatChunk
		if err := json.Unmarshal(data, &c); err != nil {
			badChunk = err
			return errStreamDone
		}
		if len(c.Usage) > 0 && string(c.Usage) != "null" {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
			if ch.Delta.Content == "" {
				continue
			}
			art.Parts = []schemas.Part{schemas.TextPart(ch.Delta.Content)}
			if emitErr = out.ArtifactChunk(ctx, art, chunks > 0, false); emitErr != nil {
				return emitErr
			}
			chunks++
		}
		return nil
	})
	if kept {
		unfollow()
		keepConnection(resp.Body, cancel)
	}
	switch {
	case emitErr != nil:
		return emitErr
	case badChunk != nil:
		return out.Fail(ctx, "the model's stream is not chat-completion chunks: "+badChunk.Error())
	case errors.Is(err, errStreamDone) || err == nil:
	case ctx.Err() != nil:
		return ctx.Err()
	case cctx.Err() != nil:
		return out.Fail(ctx, fmt.Sprintf("the model did not finish within %s", d))
	default:
		return fmt.Errorf("the model's stream broke: %w", err)
	}
	return l.finish(ctx, out, art, chunks, usage, finish, owner)
}

// After a provider's [DONE] its answer still ends (the chunked body's last
// chunk); net/http keeps a connection for the next request only when the
// body was read to its end, and drops one closed before, so the next
// completion would dial and shake hands over TLS again. keepConnection
// reads that end in the background, at most streamTailBytes for at most
// streamTailWait, then closes the body and ends the request's context
// (cancel); a provider that keeps the answer open past that has it closed.
func keepConnection(body io.ReadCloser, cancel context.CancelFunc) {
	stop := time.AfterFunc(streamTailWait, cancel)
	go func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(body, streamTailBytes))
		_ = body.Close()
		stop.Stop()
		cancel()
		if f := connectionReleased.Load(); f != nil {
			(*f)()
		}
	}()
}

const streamTailBytes = 4 << 10

var streamTailWait = 250 * time.Millisecond // a variable for tests

// connectionReleased, when set (tests), is called once keepConnection
// has released a connection.
var connectionReleased atomic.Pointer[func()]

// whole reads a non-streamed completion.
func (l LLM) whole(ctx context.Context, body io.Reader, out *Emitter, owner bus.Owner) error {
	var r struct {
		Choices []struct {
			Message      chatMessage `json:"message"`
			FinishReason string      `json:"finish_reason"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.NewDecoder(io.LimitReader(body, 16<<20)).Decode(&r); err != nil || len(r.Choices) == 0 {
		return out.Fail(ctx, "the model's answer is not a chat completion")
	}
	art := schemas.Artifact{ArtifactID: "answer", Name: l.Model, Parts: []schemas.Part{schemas.TextPart(r.Choices[0].Message.Content)}}
	if err := out.ArtifactChunk(ctx, art, false, false); err != nil {
		return err
	}
	return l.finish(ctx, out, art, 1, r.Usage, r.Choices[0].FinishReason, owner)
}

// finish closes the answer, records the usage (in the task, and against
// owner's tokens budgets), and completes the task.
func (l LLM) finish(ctx context.Context, out *Emitter, art schemas.Artifact, chunks int, usage json.RawMessage, finish string, owner bus.Owner) error {
	art.Parts = []schemas.Part{schemas.TextPart("")}
	if err := out.ArtifactChunk(ctx, art, chunks > 0, true); err != nil {
		return err
	}
	if len(usage) > 0 {
		var u any
		if json.Unmarshal(usage, &u) == nil {
			traceUsage(ctx, u)
			if err := l.countTokens(ctx, owner, u); err != nil {
				return err
			}
			if err := out.Annotate(ctx, map[string]any{MetaLLMUsage: u}); err != nil {
				return err
			}
		}
	}
	if finish == "length" {
		return out.Complete(ctx, "the answer was cut at the model's length limit")
	}
	return out.Complete(ctx, "")
}

// conversation is the related tasks' messages and answers and the task's
// history as chat messages, the system prompt first, at most MaxHistory
// of the latest. Of a related task only the client's messages and the
// answer (its artifacts' text) are taken: the agent's messages in its
// history are status notes (why it failed, that the answer was cut), not
// turns of the conversation.
func (l LLM) conversation(ctx context.Context, req *Request) []chatMessage {
	var msgs []chatMessage
	history := func(h []schemas.Message, agents bool) {
		for _, m := range h {
			text := m.Text()
			if text == "" || (m.Role == schemas.RoleAgent && !agents) {
				continue
			}
			role := "user"
			if m.Role == schemas.RoleAgent {
				role = "assistant"
			}
			msgs = append(msgs, chatMessage{Role: role, Content: text})
		}
	}
	for _, t := range req.RelatedTasks(ctx) {
		history(t.History, false)
		var answer strings.Builder
		for _, a := range t.Artifacts {
			for _, p := range a.Parts {
				if p.Text != nil {
					answer.WriteString(*p.Text)
				}
			}
		}
		if answer.Len() > 0 {
			msgs = append(msgs, chatMessage{Role: "assistant", Content: answer.String()})
		}
	}
	history(req.Task.History, true)
	if last := len(msgs) - 1; last < 0 || msgs[last].Role != "user" || msgs[last].Content != req.Message.Text() {
		msgs = append(msgs, chatMessage{Role: "user", Content: req.Message.Text()})
	}
	limit := l.MaxHistory
	if limit <= 0 {
		limit = 50
	}
	if len(msgs) > limit {
		msgs = msgs[len(msgs)-limit:]
	}
	if l.System != "" {
		msgs = append([]chatMessage{{Role: "system", Content: l.System}}, msgs...)
	}
	return msgs
}

// providerAnswer sorts out a provider's answer to the request that starts
// a run: ok when it is the 200 to read; else the provider could not be
// reached (an error the runtime fails the task with), or it refused (the
// task is failed with its message).
func providerAnswer(ctx context.Context, out *Emitter, who string, resp *http.Response, err error) (bool, error) {
	switch {
	case err != nil && ctx.Err() != nil:
		return false, ctx.Err()
	case err != nil:
		return false, fmt.Errorf("%s cannot be reached: %w", who, unwrapURLError(err))
	case resp.StatusCode != http.StatusOK:
		defer resp.Body.Close()
		return false, out.Fail(ctx, fmt.Sprintf("%s answered %d: %s", who, resp.StatusCode, providerError(resp.Body)))
	}
	return true, nil
}

// providerError is the message of an error answer ({"error": {"message"}}
// as OpenAI and its look-alikes send), or its start.
func providerError(body io.Reader) string {
	raw, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	s := strings.TrimSpace(string(raw))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// unwrapURLError drops the URL net/http repeats in its errors (it may
// carry a key in its query, and the error reaches logs and the task).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// startChat starts the GenAI conventions' span of the completion the
// agent asks for (chat <model>, a client span around the provider's
// request and its streamed answer), when the process traces.
func (l LLM) startChat(ctx context.Context) (context.Context, func(error)) {
	if !tracing.Enabled() {
		return ctx, func(error) {}
	}
	ctx, span := tracing.Tracer().Start(ctx, "chat "+l.Model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(tracing.GenAIOperationName.String("chat"), tracing.GenAIProviderName.String("openai"), tracing.GenAIRequestModel.String(l.Model)))
	return ctx, func(err error) {
		tracing.Fail(span, "agent", err)
		span.End()
	}
}

// traceUsage puts a completion's token counts (the OpenAI usage object)
// on the chat span.
func traceUsage(ctx context.Context, u any) {
	m, ok := u.(map[string]any)
	if !ok || !tracing.Enabled() {
		return
	}
	span := trace.SpanFromContext(ctx)
	if n, ok := m["prompt_tokens"].(float64); ok {
		span.SetAttributes(tracing.GenAIInputTokens.Int64(int64(n)))
	}
	if n, ok := m["completion_tokens"].(float64); ok {
		span.SetAttributes(tracing.GenAIOutputTokens.Int64(int64(n)))
	}
}

// countTokens counts a completion's tokens (the usage's total_tokens,
// else prompt_tokens plus completion_tokens) against owner's budgets,
// even when the run is being canceled: they are spent.
func (l LLM) countTokens(ctx context.Context, owner bus.Owner, u any) error {
	m, ok := u.(map[string]any)
	if l.Budget == nil || !ok {
		return nil
	}
	n, _ := m["total_tokens"].(float64)
	if n <= 0 {
		p, _ := m["prompt_tokens"].(float64)
		c, _ := m["completion_tokens"].(float64)
		n = p + c
	}
	if n <= 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := l.Budget.AddTokens(cctx, owner, int64(n)); err != nil {
		return fmt.Errorf("the completion's %d tokens could not be counted against the budgets: %w", int64(n), err)
	}
	return nil
}
