package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
)

// cli runs one client command in-process and returns its stdout, stderr
// and error.
func cli(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb, os.Getenv)
	return out.String(), errb.String(), err
}

// cliJSON runs a command with -o json and decodes its one-line output.
func cliJSON[T any](t *testing.T, args ...string) T {
	t.Helper()
	out, stderr, err := cli(t, append(args, "-o", "json")...)
	if err != nil {
		t.Fatalf("a2abus %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("a2abus %s -o json printed %d lines, want one:\n%s", strings.Join(args, " "), strings.Count(out, "\n"), out)
	}
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("a2abus %s -o json printed %q: %v", strings.Join(args, " "), out, err)
	}
	return v
}

// cliEvents runs a streaming command with -o json and decodes its lines.
func cliEvents(t *testing.T, args ...string) ([]schemas.StreamResponse, error) {
	t.Helper()
	out, _, err := cli(t, append(args, "-o", "json")...)
	var evs []schemas.StreamResponse
	for _, l := range strings.Split(out, "\n") {
		if l == "" {
			continue
		}
		var ev schemas.StreamResponse
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("a2abus %s: line %q is not a StreamResponse: %v", strings.Join(args, " "), l, err)
		}
		evs = append(evs, ev)
	}
	return evs, err
}

// kinds names stream events: "task", "artifact", "message" or the state of
// a status update.
func kinds(evs []schemas.StreamResponse) string {
	var k []string
	for _, ev := range evs {
		switch {
		case ev.Task != nil:
			k = append(k, "task")
		case ev.StatusUpdate != nil:
			k = append(k, string(ev.StatusUpdate.Status.State))
		case ev.ArtifactUpdate != nil:
			k = append(k, "artifact")
		case ev.Message != nil:
			k = append(k, "message")
		}
	}
	return strings.Join(k, ",")
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := cli(t, args...)
	if err != nil {
		t.Fatalf("a2abus %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// wantCLIError checks err is a failure of the agent, the network or the
// task (exit 1, not a usage error) whose message says contains.
func wantCLIError(t *testing.T, err error, contains string) {
	t.Helper()
	var ce *cliError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), contains) {
		t.Fatalf("error %v, want a client error (exit 1) saying %q", err, contains)
	}
}

func wantLines(t *testing.T, out string, prefixes ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(prefixes) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(prefixes), out)
	}
	for i, p := range prefixes {
		if !strings.HasPrefix(lines[i], p) {
			t.Fatalf("line %d = %q, want it to start with %q:\n%s", i+1, lines[i], p, out)
		}
	}
}

// following runs a streaming command in the background; its output is read
// line by line as it is printed.
type following struct {
	lines *bufio.Scanner
	done  chan error
}

func follow(ctx context.Context, args ...string) *following {
	pr, pw := io.Pipe()
	f := &following{lines: bufio.NewScanner(pr), done: make(chan error, 1)}
	go func() {
		err := run(ctx, args, pw, io.Discard, os.Getenv)
		pw.Close()
		f.done <- err
	}()
	return f
}

func (f *following) next(t *testing.T) string {
	t.Helper()
	if !f.lines.Scan() {
		t.Fatal("the stream ended early")
	}
	return f.lines.Text()
}

// end reads the remaining lines and the command's error.
func (f *following) end() ([]string, error) {
	var rest []string
	for f.lines.Scan() {
		rest = append(rest, f.lines.Text())
	}
	return rest, <-f.done
}

// gateway stands in front of the edge as two other kinds of A2A agent: at
// /v03 one that publishes an A2A 0.3 card (url + preferredTransport), and
// at /bare one with no card at all whose JSON-RPC endpoint needs a bearer
// token (it proxies to the edge's echo agent).
func gateway(t *testing.T, base string) *httptest.Server {
	t.Helper()
	card03 := fmt.Sprintf(`{
  "name": "echo03", "description": "echo behind an A2A 0.3 card", "version": "0.3.7",
  "protocolVersion": "0.3.0", "url": %q, "preferredTransport": "JSONRPC",
  "capabilities": {"streaming": true},
  "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
  "skills": [{"id": "echo", "name": "Echo", "description": "echoes", "tags": ["demo"]}]
}`, base+"/agents/echo")
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.URL.Path, pr.Out.URL.RawPath = "/agents/echo", ""
	}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v03/.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, card03)
	})
	mux.HandleFunc("POST /bare", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		// Read the request first: the server closes an unread body once
		// the (streamed) answer starts, which would cut the proxied call.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	})
	gw := httptest.NewServer(mux)
	t.Cleanup(gw.Close)
	return gw
}

// Every client command against a real a2abus (a serve process), in text and
// JSON, and against agents that are not a2abus-shaped (a 0.3 card, no card
// and a token); progress printed while streaming; continuation of an
// input-required task; cancel, subscribe and resuming a broken stream; the
// exit status of failed tasks; and the errors a person sees when a task
// does not exist, nothing answers or the command line is wrong.
func TestCLIAgainstServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := filepath.Join(dir, "a2abus.json")
	writeFile(t, cfg, `{"agents":[{"name":"echo"},
		{"name":"sleepy","kind":"exec","exec":{"command":"sleep","args":["60"],"timeout":"120s"}},
		{"name":"broken","kind":"exec","exec":{"command":"sh","args":["-c","echo disk full >&2; exit 3"],"timeout":"10s"}}]}`)
	serve := startProc(t, "serve", "--listen", addr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", "off", "--config", cfg)
	base := "http://" + addr
	waitReady(t, serve, base)
	gw := gateway(t, base)

	t.Run("card", func(t *testing.T) {
		out := mustCLI(t, "card", base)
		for _, want := range []string{"echo 1.0.0 — ", "card from  " + base + "/.well-known/agent-card.json", "interface  JSONRPC 1.0 " + base + "/agents/echo",
			"interface  HTTP+JSON 1.0 " + base + "/agents/echo", "streaming  yes", "skill      echo: Echo [demo, echo]"} {
			if !strings.Contains(out, want) {
				t.Fatalf("card text lacks %q:\n%s", want, out)
			}
		}
		card := cliJSON[schemas.AgentCard](t, "card", base+"/agents/sleepy")
		if card.Name != "sleepy" || len(card.SupportedInterfaces) == 0 {
			t.Fatalf("card json: %+v", card)
		}
	})

	var taskID, contextID string
	t.Run("send", func(t *testing.T) {
		out := mustCLI(t, "send", base, "hello from the cli")
		wantLines(t, out, "task ", "  context  ", "  status   echoed", "  artifact echo: hello from the cli")
		if !strings.Contains(out, "TASK_STATE_COMPLETED") {
			t.Fatalf("send text:\n%s", out)
		}
		res := cliJSON[schemas.SendMessageResponse](t, "send", base, "json please")
		if res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted || artifactText(*res.Task) != "json please" {
			t.Fatalf("send json: %+v", res)
		}
		taskID, contextID = res.Task.ID, res.Task.ContextID
		// Flags before the arguments work as well as after them.
		res = cliJSON[schemas.SendMessageResponse](t, "send", "--context", contextID, base, "same context")
		if res.Task.ContextID != contextID {
			t.Fatalf("--context: %s, want %s", res.Task.ContextID, contextID)
		}
		// --ref goes as the message's referenceTaskIds.
		res = cliJSON[schemas.SendMessageResponse](t, "send", base, "with a reference", "--ref", taskID)
		if h := res.Task.History; len(h) == 0 || !slices.Equal(h[0].ReferenceTaskIDs, []string{taskID}) {
			t.Fatalf("--ref: history %+v, want the first message to refer to %s", h, taskID)
		}
		// After -- a text may start with a dash.
		if out := mustCLI(t, "send", base, "--", "-n"); !strings.Contains(out, "artifact echo: -n\n") {
			t.Fatalf("send -- -n:\n%s", out)
		}
	})

	var streamedID string
	t.Run("stream", func(t *testing.T) {
		text := "one two three four five six"
		out := mustCLI(t, "send", base, text, "--stream")
		wantLines(t, out, "task ", "status TASK_STATE_WORKING", "artifact echo: one two three four", "  + echo: five six", "status TASK_STATE_COMPLETED")
		if alias := mustCLI(t, "stream", base, text); strings.Count(alias, "\n") != 5 {
			t.Fatalf("a2abus stream (alias of send --stream):\n%s", alias)
		}
		evs, err := cliEvents(t, "send", base, text, "--stream")
		if err != nil || kinds(evs) != "task,TASK_STATE_WORKING,artifact,artifact,TASK_STATE_COMPLETED" {
			t.Fatalf("stream json events: %s (%v)", kinds(evs), err)
		}
		streamedID = evs[0].Task.ID
		// The events of a finished task replay from the start of its log.
		evs, err = cliEvents(t, "subscribe", base, streamedID, "--last-event-id", "0")
		if err != nil || kinds(evs) != "TASK_STATE_WORKING,artifact,artifact,TASK_STATE_COMPLETED" || evs[3].StatusUpdate.TaskID != streamedID {
			t.Fatalf("subscribe --last-event-id 0: %s (%v)", kinds(evs), err)
		}
	})

	t.Run("input-required", func(t *testing.T) {
		res := cliJSON[schemas.SendMessageResponse](t, "send", base, "/ask")
		if res.Task == nil || res.Task.Status.State != schemas.TaskStateInputRequired {
			t.Fatalf("/ask: %+v", res)
		}
		out := mustCLI(t, "send", base, "my answer", "--task", res.Task.ID)
		if !strings.Contains(out, "task "+res.Task.ID+"  TASK_STATE_COMPLETED") || !strings.Contains(out, "artifact echo: my answer") {
			t.Fatalf("--task continuation:\n%s", out)
		}
		// Streamed, the question ends the stream (exit 0) with a hint how to
		// answer it.
		out = mustCLI(t, "send", base, "/ask", "--stream")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		id := strings.Fields(lines[0])[1]
		if last := lines[len(lines)-1]; last != "  reply    a2abus send "+base+" TEXT --task "+id {
			t.Fatalf("stream ending input-required:\n%s", out)
		}
		evs, err := cliEvents(t, "send", base, "streamed answer", "--task", id, "--stream")
		if err != nil || !strings.HasSuffix(kinds(evs), "TASK_STATE_COMPLETED") || evs[0].Task.ID != id {
			t.Fatalf("streamed --task continuation: %s (%v)", kinds(evs), err)
		}
	})

	t.Run("get-and-tasks", func(t *testing.T) {
		out := mustCLI(t, "get", base, taskID, "--history", "1")
		if !strings.Contains(out, "task "+taskID+"  TASK_STATE_COMPLETED") || !strings.Contains(out, "  history  AGENT: echoed") || strings.Contains(out, "history  USER") {
			t.Fatalf("get text --history 1:\n%s", out)
		}
		if got := cliJSON[schemas.Task](t, "get", base, taskID); got.ID != taskID || got.Status.State != schemas.TaskStateCompleted {
			t.Fatalf("get json: %+v", got)
		}
		out = mustCLI(t, "tasks", base, "--context", contextID, "--state", "completed")
		if !strings.Contains(out, taskID) || !strings.Contains(out, "2 task(s)") {
			t.Fatalf("tasks text:\n%s", out)
		}
		page := cliJSON[schemas.ListTasksResponse](t, "tasks", base, "--page-size", "1")
		if len(page.Tasks) != 1 || page.NextPageToken == "" {
			t.Fatalf("tasks json page: %+v", page)
		}
		next := cliJSON[schemas.ListTasksResponse](t, "tasks", base, "--page-size", "1", "--page-token", page.NextPageToken)
		if len(next.Tasks) != 1 || next.Tasks[0].ID == page.Tasks[0].ID {
			t.Fatalf("tasks --page-token: %+v after %+v", next.Tasks, page.Tasks)
		}
		if out := mustCLI(t, "tasks", base, "--page-size", "1"); !strings.Contains(out, "more: --page-token "+page.NextPageToken) {
			t.Fatalf("tasks text does not say how to read on:\n%s", out)
		}
		asked := cliJSON[schemas.ListTasksResponse](t, "tasks", base, "--state", "input-required")
		for _, tk := range asked.Tasks {
			if tk.Status.State != schemas.TaskStateInputRequired {
				t.Fatalf("--state input-required listed %s", tk.Status.State)
			}
		}
	})

	t.Run("no-wait-subscribe-cancel", func(t *testing.T) {
		sleepy := base + "/agents/sleepy"
		res := cliJSON[schemas.SendMessageResponse](t, "send", sleepy, "zzz", "--no-wait")
		if res.Task == nil || res.Task.Status.State.Terminal() {
			t.Fatalf("--no-wait returned %+v, want a task still running", res)
		}
		id := res.Task.ID
		out := mustCLI(t, "send", sleepy, "zzz", "--no-wait")
		if !strings.Contains(out, "  follow   a2abus subscribe "+sleepy+" ") {
			t.Fatalf("--no-wait text does not say how to follow the task:\n%s", out)
		}
		mustCLI(t, "cancel", sleepy, strings.Fields(out)[1])

		// A stream cut short says how to resume it.
		ctx, interrupt := context.WithCancel(context.Background())
		cut := follow(ctx, "subscribe", sleepy, id)
		if first := cut.next(t); !strings.HasPrefix(first, "task "+id) {
			t.Fatalf("subscribe's first line: %q", first)
		}
		interrupt()
		_, err := cut.end()
		wantCLIError(t, err, "interrupted; resume with: a2abus subscribe "+sleepy+" "+id+" --last-event-id ")
		cursor := err.Error()[strings.LastIndex(err.Error(), " ")+1:]

		// subscribe prints events as they come; cancel once it is following.
		live := follow(context.Background(), "subscribe", sleepy, id)
		if first := live.next(t); !strings.HasPrefix(first, "task "+id) {
			t.Fatalf("subscribe's first line: %q", first)
		}
		out = mustCLI(t, "cancel", sleepy, id)
		if !strings.HasPrefix(out, "task "+id+"  TASK_STATE_CANCELED") {
			t.Fatalf("cancel:\n%s", out)
		}
		rest, err := live.end()
		if len(rest) == 0 || !strings.HasPrefix(rest[len(rest)-1], "status TASK_STATE_CANCELED") {
			t.Fatalf("subscribe did not follow the task to its end: %q", rest)
		}
		wantCLIError(t, err, "ended TASK_STATE_CANCELED")
		if !errors.Is(err, errTaskEnded) {
			t.Fatalf("a canceled task's error %v does not wrap errTaskEnded", err)
		}

		// Resuming the cut stream gives what it missed, without a snapshot.
		evs, err := cliEvents(t, "subscribe", sleepy, id, "--last-event-id", cursor)
		if k := kinds(evs); strings.Contains(k, "task") || !strings.HasSuffix(k, "TASK_STATE_CANCELED") || !errors.Is(err, errTaskEnded) {
			t.Fatalf("subscribe --last-event-id %s: %s (%v)", cursor, k, err)
		}
		// Canceling it again is refused: it is already finished.
		_, _, err = cli(t, "cancel", sleepy, id)
		wantCLIError(t, err, "TASK_NOT_CANCELABLE, code -32002")
	})

	t.Run("failed-task", func(t *testing.T) {
		broken := base + "/agents/broken"
		out, _, err := cli(t, "send", broken, "go")
		wantCLIError(t, err, "ended TASK_STATE_FAILED: sh exited with status 3: disk full")
		if !errors.Is(err, errTaskEnded) || !strings.Contains(out, "TASK_STATE_FAILED") || !strings.Contains(out, "disk full") {
			t.Fatalf("failed send: %v\n%s", err, out)
		}
		evs, err := cliEvents(t, "send", broken, "go", "--stream")
		if !errors.Is(err, errTaskEnded) || !strings.HasSuffix(kinds(evs), "TASK_STATE_FAILED") {
			t.Fatalf("failed stream: %s (%v)", kinds(evs), err)
		}
		// get reports the state without judging it.
		if got := cliJSON[schemas.Task](t, "get", broken, evs[0].Task.ID); got.Status.State != schemas.TaskStateFailed {
			t.Fatalf("get of a failed task: %+v", got)
		}
	})

	t.Run("agents", func(t *testing.T) {
		out := mustCLI(t, "agents", base)
		for _, want := range []string{"echo (local) — Echoes", "  endpoint JSONRPC 1.0 " + base + "/agents/echo", "  skill    ask: Ask first", "sleepy (local)", "broken (local)"} {
			if !strings.Contains(out, want) {
				t.Fatalf("agents text lacks %q:\n%s", want, out)
			}
		}
		list := cliJSON[schemas.AgentList](t, "agents", base, "--skill", "echo")
		if len(list.Agents) != 1 || list.Agents[0].Name != "echo" {
			t.Fatalf("agents json --skill echo: %+v", list)
		}
		if out := mustCLI(t, "agents", base, "--kind", "remote"); out != "no agents match\n" {
			t.Fatalf("agents --kind remote:\n%s", out)
		}
		_, _, err := cli(t, "agents", base+"/agents/echo/.well-known/agent-card.json")
		wantCLIError(t, err, "did not answer with an a2abus agent registry")
		_, _, err = cli(t, "agents", gw.URL+"/v03")
		wantCLIError(t, err, "`card` reads any agent's card")
	})

	// Explicit bindings: the URL is the endpoint.
	t.Run("bindings", func(t *testing.T) {
		res := cliJSON[schemas.SendMessageResponse](t, "send", base, "over rest", "--binding", "rest")
		if res.Task == nil || artifactText(*res.Task) != "over rest" {
			t.Fatalf("--binding rest send: %+v", res)
		}
		if out := mustCLI(t, "get", base, res.Task.ID, "--binding", "rest"); !strings.Contains(out, "artifact echo: over rest") {
			t.Fatalf("--binding rest get:\n%s", out)
		}
		evs, err := cliEvents(t, "send", base, "rest stream", "--binding", "rest", "--stream")
		if err != nil || kinds(evs) != "task,TASK_STATE_WORKING,artifact,TASK_STATE_COMPLETED" {
			t.Fatalf("--binding rest --stream: %s (%v)", kinds(evs), err)
		}
		res = cliJSON[schemas.SendMessageResponse](t, "send", base+"/agents/echo", "in 0.3", "--binding", "jsonrpc03")
		if res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted || artifactText(*res.Task) != "in 0.3" {
			t.Fatalf("--binding jsonrpc03 send: %+v", res)
		}
		if got := cliJSON[schemas.Task](t, "get", base+"/agents/echo", res.Task.ID, "--binding", "jsonrpc03"); got.ID != res.Task.ID {
			t.Fatalf("--binding jsonrpc03 get: %+v", got)
		}
	})

	// Agents that are not an a2abus edge: a 0.3 card, and no card at all
	// behind a token.
	t.Run("other-agents", func(t *testing.T) {
		v03 := gw.URL + "/v03"
		out := mustCLI(t, "card", v03)
		if !strings.Contains(out, "echo03 0.3.7") || !strings.Contains(out, "interface  JSONRPC 0.3 "+base+"/agents/echo") {
			t.Fatalf("0.3 card text:\n%s", out)
		}
		raw := cliJSON[map[string]any](t, "card", v03)
		if raw["protocolVersion"] != "0.3.0" || raw["url"] != base+"/agents/echo" || raw["supportedInterfaces"] != nil {
			t.Fatalf("card -o json is not the card as served: %v", raw)
		}
		res := cliJSON[schemas.SendMessageResponse](t, "send", v03, "via a 0.3 card")
		if res.Task == nil || res.Task.Status.State != schemas.TaskStateCompleted || artifactText(*res.Task) != "via a 0.3 card" {
			t.Fatalf("send through a 0.3 card: %+v", res)
		}
		out = mustCLI(t, "send", v03, "one two three four five six", "--stream")
		if !strings.Contains(out, "  + echo: five six") || !strings.HasPrefix(strings.Split(strings.TrimSpace(out), "\n")[strings.Count(strings.TrimSpace(out), "\n")], "status TASK_STATE_COMPLETED") {
			t.Fatalf("0.3 stream:\n%s", out)
		}
		_, _, err := cli(t, "tasks", v03)
		wantCLIError(t, err, "speaks A2A 0.3, which cannot list tasks")

		bare := gw.URL + "/bare"
		_, _, err = cli(t, "send", bare, "no token")
		wantCLIError(t, err, bare+" answered HTTP 401 Unauthorized: authentication required (UNAUTHENTICATED, code -31401); no credentials were given: pass --token TOKEN (or set A2A_TOKEN) or --api-key KEY")
		if !errors.Is(err, schemas.ErrUnauthenticated) {
			t.Fatalf("%v is not ErrUnauthenticated", err)
		}
		res = cliJSON[schemas.SendMessageResponse](t, "send", bare, "with a token", "--token", "s3cret")
		if res.Task == nil || artifactText(*res.Task) != "with a token" {
			t.Fatalf("send --token to an agent without a card: %+v", res)
		}
		auth := []string{"--header", "Authorization: Bearer s3cret"}
		res = cliJSON[schemas.SendMessageResponse](t, append([]string{"send", bare, "with a header"}, auth...)...)
		if res.Task == nil || artifactText(*res.Task) != "with a header" {
			t.Fatalf("send to an agent without a card: %+v", res)
		}
		evs, err := cliEvents(t, append([]string{"subscribe", bare, streamedID, "--last-event-id", "0"}, auth...)...)
		if err != nil || kinds(evs) != "TASK_STATE_WORKING,artifact,artifact,TASK_STATE_COMPLETED" {
			t.Fatalf("subscribe through a proxy: %s (%v)", kinds(evs), err)
		}
		_, _, err = cli(t, "send", gw.URL+"/nothing", "anyone?")
		wantCLIError(t, err, "does not look like an A2A agent")
	})

	t.Run("errors", func(t *testing.T) {
		missing := schemas.NewID()
		_, _, err := cli(t, "get", base, missing)
		wantCLIError(t, err, "not found (TASK_NOT_FOUND, code -32001)")
		if !strings.Contains(err.Error(), missing) {
			t.Fatalf("%v does not name the task", err)
		}
		if !errors.Is(err, schemas.ErrTaskNotFound) {
			t.Fatalf("%v is not ErrTaskNotFound", err)
		}
		_, _, err = cli(t, "cancel", base, missing, "-o", "json")
		wantCLIError(t, err, "TASK_NOT_FOUND")
		_, _, err = cli(t, "cancel", base, taskID)
		wantCLIError(t, err, "TASK_NOT_CANCELABLE, code -32002")

		down := "http://" + freeAddr(t)
		_, _, err = cli(t, "send", down, "anyone?")
		wantCLIError(t, err, "cannot reach "+down+"/.well-known/agent-card.json: connection refused (is the agent running")
		var te *discovery.TransportError
		if !errors.As(err, &te) {
			t.Fatalf("%v is not a TransportError", err)
		}
		_, _, err = cli(t, "get", down, missing, "--binding", "jsonrpc")
		wantCLIError(t, err, "cannot reach "+down+": connection refused")
		_, _, err = cli(t, "card", base+"/nothing")
		wantCLIError(t, err, "no agent card at "+base+"/nothing/.well-known/agent-card.json")
		_, _, err = cli(t, "send", "http://169.254.169.254", "metadata?")
		wantCLIError(t, err, "refusing to connect to 169.254.169.254 (cloud metadata endpoint)")
		if !errors.Is(err, discovery.ErrForbiddenAddress) {
			t.Fatalf("%v is not ErrForbiddenAddress", err)
		}
		_, _, err = cli(t, "card", base, "--allow-private=false")
		wantCLIError(t, err, "(loopback)")
	})

	// Usage errors print the command's usage and are not client errors
	// (exit 2, not 1).
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"get", base},
			{"send", base, "a", "b"},
			{"send", base, "x", "--binding", "mqtt"},
			{"send", base, "x", "--stream", "--no-wait"},
			{"send", "localhost:8080", "x"},
			{"tasks", base, "--state", "bogus"},
			{"tasks", base, "--page-size", "-1"},
			{"card", base, "-o", "yaml"},
			{"agents", base, "--kind", "elsewhere"},
			{"cancel", base, "id", "--header", "no colon"},
		} {
			_, stderr, err := cli(t, args...)
			var ce *cliError
			if err == nil || errors.As(err, &ce) || !strings.Contains(stderr, "Usage:") {
				t.Errorf("a2abus %s: error %v, stderr %q; want a usage error", strings.Join(args, " "), err, stderr)
			}
		}
	})
	serve.stop(t)
}
