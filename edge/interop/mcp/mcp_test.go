// Package mcpinterop proves that the official MCP Go SDK's client
// (github.com/modelcontextprotocol/go-sdk) uses a2abus's agents as MCP
// tools. It is a package of its own, apart from the A2A SDK's tests:
// the bridge links discovery, and with it a2abus's lf.a2a.v1 messages,
// which cannot share a test binary with the A2A SDK's copy (protobuf's
// registry refuses the second).
package mcpinterop

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/discovery/mcpbridge"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/edge/interop/internal/a2abusbin"
	"github.com/a2abus/a2abus/workers"
)

// slow reports WORKING and then waits until it is canceled.
var slow = workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	if err := out.Working(ctx, "waiting"); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
})

// failing always fails.
var failing = workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	return out.Fail(ctx, "no luck today")
})

// startMCPA2Abus is a2abus with its agents served as MCP tools at /mcp,
// the way cmd wires an edge: the bridge's calls go into the edge's
// in-process door. Agents registered with a short TTL, so one that stops leaves
// the registry soon.
func startMCPA2Abus(t *testing.T) (string, *bus.Bus) {
	t.Helper()
	return startMCPA2AbusWith(t, edge.Config{})
}

// startMCPA2AbusWith is startMCPA2Abus with an edge configuration.
func startMCPA2AbusWith(t *testing.T, ecfg edge.Config) (string, *bus.Bus) {
	t.Helper()
	_, b := bustest.New(t, bustest.Options{Config: bus.Config{AgentTTL: 2 * time.Second}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, def := range []workers.Definition{workers.EchoDefinition("echo"), {Name: "slow", Agent: slow}, {Name: "sad", Agent: failing}} {
		startRunnerCtx(t, ctx, b, def)
	}
	ts := httptest.NewUnstartedServer(nil)
	base := "http://" + ts.Listener.Addr().String()
	var bridge *mcpbridge.Bridge
	ecfg.PublicURL, ecfg.DefaultAgent = base, "echo"
	ecfg.MCP = func(door *edge.InProcess) http.Handler {
		bridge = mcpbridge.New(mcpbridge.Options{Edge: door, Refresh: 100 * time.Millisecond, Wait: 20 * time.Second})
		return bridge.Handler()
	}
	e := edge.New(b, ecfg)
	ts.Config.Handler = e.Handler()
	ts.Start()
	edgeDone := make(chan error, 1)
	go func() { edgeDone <- e.Run(ctx) }()
	go func() { _ = bridge.Run(ctx) }()
	t.Cleanup(func() { ts.Close(); cancel(); <-edgeDone })
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := e.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-bridge.Ready():
	case <-rctx.Done():
		t.Fatal("the bridge never read the registry")
	}
	return ts.URL, b
}

// startRunnerCtx runs def on b until ctx ends.
func startRunnerCtx(t *testing.T, ctx context.Context, b *bus.Bus, def workers.Definition) {
	t.Helper()
	r := workers.NewRunner(b, def, workers.Options{ShutdownGrace: time.Second})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { <-done })
	select {
	case <-r.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("runner not ready")
	}
}

func toolNames(t *testing.T, cs *sdk.ClientSession) map[string]bool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, tool := range res.Tools {
		out[tool.Name] = true
	}
	return out
}

func contentText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The official MCP Go SDK's client, over Streamable HTTP: a2abus's agents
// are tools that follow the registry; a call completes, asks for input and
// is continued, fails, and is canceled; progress is reported.
func TestOfficialMCPClientOverStreamableHTTP(t *testing.T) {
	base, b := startMCPA2Abus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	changed := make(chan struct{}, 16)
	progress := make(chan string, 256)
	client := sdk.NewClient(&sdk.Implementation{Name: "interop", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} },
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			select {
			case progress <- r.Params.Message:
			default:
			}
		},
	})
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	waitTools(t, cs, changed, func(tools map[string]bool) bool {
		for _, name := range []string{"a2a_echo", "a2a_slow", "a2a_sad", "list_agents", "search_agents", "get_task", "cancel_task"} {
			if !tools[name] {
				return false
			}
		}
		return true
	})

	// A call that completes, with progress.
	params := &sdk.CallToolParams{Name: "a2a_echo", Arguments: map[string]any{"message": "hello over mcp"}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError || !strings.Contains(contentText(res), "hello over mcp") {
		t.Fatalf("echo: %+v %v", res, err)
	}
	select {
	case <-progress: // notifications are handled apart from the result
	case <-time.After(10 * time.Second):
		t.Error("no progress notification for a streamed call")
	}

	// Input required, then continued with the task id.
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "a2a_echo", Arguments: map[string]any{"message": "/ask"}})
	if err != nil || res.IsError {
		t.Fatalf("ask: %+v %v", res, err)
	}
	var asked mcpbridge.TaskOutcome
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &asked); err != nil || asked.State != "INPUT_REQUIRED" || asked.TaskID == "" || asked.Question == "" {
		t.Fatalf("ask outcome %s (%v)", raw, err)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "a2a_echo", Arguments: map[string]any{"message": "the answer", "taskId": asked.TaskID}})
	if err != nil || res.IsError || !strings.Contains(contentText(res), "the answer") {
		t.Fatalf("continued: %+v %v", res, err)
	}

	// A failing agent: an error result saying why.
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "a2a_sad", Arguments: map[string]any{"message": "x"}})
	if err != nil || !res.IsError || !strings.Contains(contentText(res), "no luck today") {
		t.Fatalf("failing agent: %+v %v", res, err)
	}

	// Cancel: a slow task started (the call answers within its wait with
	// the task still working), then canceled with cancel_task.
	slowCall := make(chan *sdk.CallToolResult, 1)
	go func() {
		r, _ := cs.CallTool(ctx, &sdk.CallToolParams{Name: "a2a_slow", Arguments: map[string]any{"message": "take your time"}})
		slowCall <- r
	}()
	var slowID string
	for slowID == "" {
		res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "search_agents", Arguments: map[string]any{"query": "slow"}})
		if err != nil || res.IsError {
			t.Fatalf("search: %+v %v", res, err)
		}
		// find the slow task through the edge's listing
		slowID = latestTask(t, base, "slow")
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "cancel_task", Arguments: map[string]any{"agent": "slow", "taskId": slowID}})
	if err != nil || !res.IsError || !strings.Contains(contentText(res), "CANCELED") {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	if r := <-slowCall; r == nil || !r.IsError {
		t.Fatalf("the canceled call answered %+v", r)
	}

	// An agent that joins is a new tool, and the client is told.
	late, stopLate := context.WithCancel(context.Background())
	startRunnerCtx(t, late, b, workers.Definition{Name: "late", Agent: slow})
	waitTools(t, cs, changed, func(tools map[string]bool) bool { return tools["a2a_late"] })
	stopLate()
	waitTools(t, cs, changed, func(tools map[string]bool) bool { return !tools["a2a_late"] })
}

// waitTools waits for list-changed notifications until the tools are as
// cond asks.
func waitTools(t *testing.T, cs *sdk.ClientSession, changed chan struct{}, cond func(map[string]bool) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond(toolNames(t, cs)) {
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("tools never became as expected: %v", toolNames(t, cs))
		}
	}
}

// latestTask is the id of the agent's most recent task ("" if none yet).
func latestTask(t *testing.T, base, agent string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":1}}`
	resp, err := http.Post(base+"/agents/"+agent, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		Result struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("ListTasks: %s", raw)
	}
	if len(r.Result.Tasks) == 0 {
		return ""
	}
	return r.Result.Tasks[0].ID
}

// Protocol versions: a client of the current revision and one of
// 2024-11-05 (OpenFang's) are both answered in their own version.
func TestMCPInitializeNegotiatesVersions(t *testing.T) {
	base, _ := startMCPA2Abus(t)
	for _, v := range []string{"2025-06-18", "2024-11-05"} {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
		req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(raw), `"protocolVersion":"`+v+`"`) {
			t.Errorf("initialize %s: %d %s", v, resp.StatusCode, raw)
		}
	}
}

// The official MCP client over stdio: "a2abus mcp --url" bridging a
// running edge, and "a2abus mcp" with a serve in its own process.
func TestOfficialMCPClientOverStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a2abus")
	}
	bin := a2abusbin.Build(t)
	base, _ := startMCPA2Abus(t)
	for name, args := range map[string][]string{
		"bridging an edge": {"mcp", "--url", base, "--refresh", "100ms"},
		"embedded serve":   {"mcp", "--data-dir", filepath.Join(t.TempDir(), "data")},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.Command(bin, args...)
			cmd.Stderr = &strings.Builder{}
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "interop-stdio", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("%v\n%s", err, cmd.Stderr)
			}
			defer cs.Close()
			if v := cs.InitializeResult().ProtocolVersion; v == "" {
				t.Fatal("no protocol version")
			}
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "a2a_echo", Arguments: map[string]any{"message": "hello over stdio"}})
			if err != nil || res.IsError || !strings.Contains(contentText(res), "hello over stdio") {
				t.Fatalf("echo over stdio: %+v %v\n%s", res, err, cmd.Stderr)
			}
			// Close ends the process (its stdin closes) and waits for it. A
			// binary built with the race detector (a2abusbin.Build) says on
			// stderr if it saw a race.
			closed := cs.Close()
			if stderr := cmd.Stderr.(*strings.Builder).String(); strings.Contains(stderr, "WARNING: DATA RACE") {
				t.Fatalf("a2abus %s saw a data race (%v):\n%s", strings.Join(args, " "), closed, stderr)
			}
		})
	}
}

// headerTransport adds a header to every request.
type headerTransport struct {
	name, value string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// Over MCP a caller is who its credentials say, as over A2A: without them
// a call is refused; with them it works, and another caller's task is not
// found.
func TestMCPCallsCarryTheCallersCredentials(t *testing.T) {
	a, err := auth.New(context.Background(), auth.Config{APIKeys: []auth.APIKey{
		{Key: "mcp-alice-key-0123456789", Principal: "alice"}, {Key: "mcp-bob-key-0123456789", Principal: "bob"}}})
	if err != nil {
		t.Fatal(err)
	}
	base, _ := startMCPA2AbusWith(t, edge.Config{Auth: a})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	session := func(key string) *sdk.ClientSession {
		t.Helper()
		tr := &sdk.StreamableClientTransport{Endpoint: base + "/mcp"}
		if key != "" {
			tr.HTTPClient = &http.Client{Transport: headerTransport{"X-API-Key", key}}
		}
		changed := make(chan struct{}, 16)
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "auth", Version: "1"}, &sdk.ClientOptions{
			ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} }}).Connect(ctx, tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		waitTools(t, cs, changed, func(tools map[string]bool) bool { return tools["a2a_echo"] })
		return cs
	}
	anon, alice, bob := session(""), session("mcp-alice-key-0123456789"), session("mcp-bob-key-0123456789")
	res, err := anon.CallTool(ctx, &sdk.CallToolParams{Name: "a2a_echo", Arguments: map[string]any{"message": "hi"}})
	if err != nil || !res.IsError || !strings.Contains(strings.ToLower(contentText(res)), "auth") {
		t.Fatalf("without credentials: %+v %v (%s)", res, err, contentText(res))
	}
	res, err = alice.CallTool(ctx, &sdk.CallToolParams{Name: "a2a_echo", Arguments: map[string]any{"message": "/ask"}})
	if err != nil || res.IsError {
		t.Fatalf("alice: %+v %v", res, err)
	}
	var asked mcpbridge.TaskOutcome
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &asked)
	res, err = bob.CallTool(ctx, &sdk.CallToolParams{Name: "get_task", Arguments: map[string]any{"agent": "echo", "taskId": asked.TaskID}})
	if err != nil || !res.IsError || !strings.Contains(strings.ToLower(contentText(res)), "not found") {
		t.Fatalf("bob reading alice's task: %+v %v (%s)", res, err, contentText(res))
	}
	res, err = alice.CallTool(ctx, &sdk.CallToolParams{Name: "get_task", Arguments: map[string]any{"agent": "echo", "taskId": asked.TaskID}})
	if err != nil || res.IsError {
		t.Fatalf("alice reading her task: %+v %v (%s)", res, err, contentText(res))
	}
}
