package workers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// The langgraph agent kind: an assistant of a LangGraph Platform (LangGraph
// Server) deployment as an agent. Each task is a thread (POST /threads;
// its id kept in the task's metadata); the message runs the assistant on
// it with POST /threads/{id}/runs/stream, stream_mode messages-tuple and
// values: the AI message tokens stream in as artifact chunks, the final
// state's last AI message is the answer when nothing streamed. A graph
// that interrupts (the state's __interrupt__) leaves the task
// INPUT_REQUIRED with the interrupt's value as the question; the answer
// resumes the thread's run (command.resume). A cancel cancels the run. A
// new task whose message refers to earlier ones (referenceTaskIds) runs on
// a copy of the newest one's thread (POST /threads/{id}/copy), so the
// graph goes on from the conversation so far.

// MetaLangGraphThread is the task metadata key of its LangGraph thread.
const MetaLangGraphThread = "a2abus.langgraph.threadId"

// LangGraph runs an assistant of a LangGraph Platform deployment.
type LangGraph struct {
	// URL is the deployment's base URL.
	URL string
	// Assistant is the assistant id or graph name.
	Assistant string
	// Header returns headers for every request (the deployment's API key
	// as X-Api-Key, or a bearer token); nil: none.
	Header func() (http.Header, error)
	HTTP   *http.Client
	// Timeout bounds one run; default 10m.
	Timeout time.Duration
	// Wait runs with POST /threads/{id}/runs/wait (the final state at
	// once, nothing streamed) instead of runs/stream: for a deployment or
	// a graph that does not stream.
	Wait bool
}

// Execute runs the assistant on the task's thread.
func (g LangGraph) Execute(ctx context.Context, req *Request, out *Emitter) error {
	d := g.Timeout
	if d <= 0 {
		d = 10 * time.Minute
	}
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	thread, _ := req.Task.Metadata[MetaLangGraphThread].(string)
	// A second message of the task answers the question an interrupt
	// asked (the only way a task gets one): it resumes the run.
	users := 0
	for _, m := range req.Task.History {
		if m.Role == schemas.RoleUser {
			users++
		}
	}
	resume := thread != "" && users > 1
	if thread == "" {
		// A new task that refers to earlier ones (Request.RelatedTasks)
		// goes on from a copy of the newest one's thread, where the graph
		// keeps the conversation's state: a thread of its own, so tasks
		// that refer to the same one, or a run still going there, do not
		// mix.
		from := ""
		related := req.RelatedTasks(ctx)
		for i := len(related) - 1; from == "" && i >= 0; i-- {
			from, _ = related[i].Metadata[MetaLangGraphThread].(string)
		}
		var t struct {
			ThreadID string `json:"thread_id"`
		}
		var err error
		if from != "" {
			err = g.call(cctx, "/threads/"+url.PathEscape(from)+"/copy", map[string]any{}, &t)
		} else {
			err = g.call(cctx, "/threads", map[string]any{"metadata": map[string]any{"a2abus_task": req.Task.ID}}, &t)
		}
		if err != nil {
			return err
		}
		if t.ThreadID == "" {
			return out.Fail(ctx, "the LangGraph deployment made a thread without an id")
		}
		thread = t.ThreadID
		if err := out.Annotate(ctx, map[string]any{MetaLangGraphThread: thread}); err != nil {
			return err
		}
	}
	body := map[string]any{"assistant_id": g.Assistant, "stream_mode": []string{"messages-tuple", "values"}}
	text := req.Message.Text()
	if resume {
		body["command"] = map[string]any{"resume": text}
	} else {
		body["input"] = map[string]any{"messages": []map[string]string{{"role": "human", "content": text}}}
	}
	if g.Wait {
		delete(body, "stream_mode")
		return g.wait(ctx, cctx, d, thread, body, out)
	}
	resp, err := g.post(cctx, "/threads/"+thread+"/runs/stream", body)
	if ok, err := providerAnswer(ctx, out, "the LangGraph deployment", resp, err); !ok {
		return err
	}
	defer resp.Body.Close()
	art := schemas.Artifact{ArtifactID: "answer", Name: g.Assistant}
	var runID string
	var values map[string]json.RawMessage
	chunks := 0
	err = readSSE(resp.Body, func(event string, data []byte) error {
		switch event {
		case "metadata":
			var m struct {
				RunID string `json:"run_id"`
			}
			_ = json.Unmarshal(data, &m)
			runID = m.RunID
		case "messages":
			// [message chunk, metadata]
			var tuple []json.RawMessage
			if json.Unmarshal(data, &tuple) != nil || len(tuple) == 0 {
				return nil
			}
			var m lgMessage
			if json.Unmarshal(tuple[0], &m) != nil || !m.fromAI() {
				return nil
			}
			text := m.text()
			if text == "" {
				return nil
			}
			art.Parts = []schemas.Part{schemas.TextPart(text)}
			if err := out.ArtifactChunk(ctx, art, chunks > 0, false); err != nil {
				return err
			}
			chunks++
		case "values":
			_ = json.Unmarshal(data, &values)
		case "error":
			return runError(providerError(bytes.NewReader(data)))
		}
		return nil
	})
	var runErr runError
	switch {
	case ctx.Err() != nil:
		g.cancelRun(thread, runID)
		return ctx.Err()
	case cctx.Err() != nil:
		g.cancelRun(thread, runID)
		return out.Fail(ctx, fmt.Sprintf("the LangGraph run did not finish within %s", d))
	case errors.As(err, &runErr):
		return out.Fail(ctx, "the LangGraph run failed: "+string(runErr))
	case err != nil:
		return err
	}
	// The streamed answer ends with an empty last chunk; one that did not
	// stream is the final state's last AI message, in one chunk.
	q, asked := interrupted(values)
	switch {
	case chunks > 0:
		art.Parts = []schemas.Part{schemas.TextPart("")}
	case !asked:
		art.Parts = []schemas.Part{schemas.TextPart(lastAIMessage(values))}
	}
	if chunks > 0 || !asked {
		if err := out.ArtifactChunk(ctx, art, chunks > 0, true); err != nil {
			return err
		}
	}
	if asked {
		return out.InputRequired(ctx, q)
	}
	return out.Complete(ctx, "")
}

// wait runs the assistant with runs/wait and answers with the final
// state: its last AI message, or an interrupt's question.
func (g LangGraph) wait(ctx, cctx context.Context, d time.Duration, thread string, body map[string]any, out *Emitter) error {
	resp, err := g.post(cctx, "/threads/"+thread+"/runs/wait", body)
	if ok, err := providerAnswer(ctx, out, "the LangGraph deployment", resp, err); !ok {
		if cctx.Err() != nil && ctx.Err() == nil {
			return out.Fail(ctx, fmt.Sprintf("the LangGraph run did not finish within %s", d))
		}
		return err
	}
	defer resp.Body.Close()
	var values map[string]json.RawMessage
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&values); err != nil {
		return out.Fail(ctx, "the LangGraph run's answer is not a state: "+err.Error())
	}
	if q, ok := interrupted(values); ok {
		return out.InputRequired(ctx, q)
	}
	art := schemas.Artifact{ArtifactID: "answer", Name: g.Assistant, Parts: []schemas.Part{schemas.TextPart(lastAIMessage(values))}}
	if err := out.Artifact(ctx, art); err != nil {
		return err
	}
	return out.Complete(ctx, "")
}

// runError is an error event of the run: what the deployment said.
type runError string

func (e runError) Error() string { return string(e) }

// lgMessage is a LangChain message as LangGraph serializes it.
type lgMessage struct {
	Type    string          `json:"type"`
	Content json.RawMessage `json:"content"`
}

func (m lgMessage) fromAI() bool {
	return m.Type == "ai" || m.Type == "AIMessageChunk" || m.Type == "AIMessage"
}

// text is the message's content: a string, or the text blocks of a list.
func (m lgMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &blocks) == nil {
		var b strings.Builder
		for _, bl := range blocks {
			if bl.Type == "text" {
				b.WriteString(bl.Text)
			}
		}
		return b.String()
	}
	return ""
}

// lastAIMessage is the text of the state's last AI message.
func lastAIMessage(values map[string]json.RawMessage) string {
	var msgs []lgMessage
	_ = json.Unmarshal(values["messages"], &msgs)
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].fromAI() {
			return msgs[i].text()
		}
	}
	return ""
}

// interrupted reports whether the state holds an interrupt, and its
// question.
func interrupted(values map[string]json.RawMessage) (string, bool) {
	raw, ok := values["__interrupt__"]
	if !ok {
		return "", false
	}
	var ints []struct {
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(raw, &ints) != nil || len(ints) == 0 {
		return "", false
	}
	var q string
	if json.Unmarshal(ints[0].Value, &q) != nil {
		q = string(ints[0].Value)
	}
	return q, true
}

// cancelRun asks the deployment to stop a run (best effort).
func (g LangGraph) cancelRun(thread, run string) {
	if run == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := g.post(ctx, "/threads/"+thread+"/runs/"+run+"/cancel", nil); err == nil {
		resp.Body.Close()
	}
}

// call posts body and decodes a 2xx answer into out.
func (g LangGraph) call(ctx context.Context, path string, body, out any) error {
	resp, err := g.post(ctx, path, body)
	if err != nil {
		return fmt.Errorf("the LangGraph deployment cannot be reached: %w", unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the LangGraph deployment answered %d to %s: %s", resp.StatusCode, path, providerError(resp.Body))
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(out)
}

func (g LangGraph) post(ctx context.Context, path string, body any) (*http.Response, error) {
	return postJSON(ctx, g.HTTP, g.URL, path, body, func(h http.Header) error {
		if g.Header == nil {
			return nil
		}
		extra, err := g.Header()
		if err != nil {
			return fmt.Errorf("the deployment's credentials cannot be read: %w", err)
		}
		for k, vs := range extra {
			h[k] = vs
		}
		return nil
	})
}

// postJSON POSTs body as JSON to base+path with client (default
// http.DefaultClient), headers added by header (nil: none): the request
// of the provider kinds, which differ only in their credentials.
func postJSON(ctx context.Context, client *http.Client, base, path string, body any, header func(http.Header) error) (*http.Response, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if header != nil {
		if err := header(req.Header); err != nil {
			return nil, err
		}
	}
	if client == nil {
		client = http.DefaultClient
	}
	return client.Do(req)
}

// readSSE calls fn with each event of an SSE stream (event name, data).
func readSSE(r io.Reader, fn func(event string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	event, data := "", []byte(nil)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 || event != "" {
				if err := fn(event, data); err != nil {
					return err
				}
			}
			event, data = "", nil
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(data) > 0 {
		return fn(event, data)
	}
	return nil
}
