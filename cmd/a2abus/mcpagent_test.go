package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2abus/a2abus/schemas"
)

// runTestMCPServer is the MCP server the mcp agent kind is tested with: the
// test binary, started by a2abus as the agent's command, speaking MCP over
// stdio with the official SDK. Tools: add, fail (an error result), crash
// (the process exits).
func runTestMCPServer() int {
	s := sdk.NewServer(&sdk.Implementation{Name: "calc", Version: "1"}, nil)
	type addIn struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Adds a and b."}, func(_ context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always fails."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "it broke"}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Exits the server."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		os.Exit(3)
		return nil, nil, nil
	})
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// sendTask sends a blocking message to an agent and returns the task.
func sendTask(t *testing.T, base, agent string, parts ...map[string]any) schemas.Task {
	t.Helper()
	msg := map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": parts}
	var res struct {
		Task schemas.Task `json:"task"`
	}
	if err := json.Unmarshal(rpc(t, base+"/agents/"+agent, "SendMessage", map[string]any{"message": msg}), &res); err != nil {
		t.Fatal(err)
	}
	return res.Task
}

// An MCP server process as an agent: its tools are the agent's skills, a
// message names the tool, the result is the artifact, a tool's error fails
// the task, an unknown tool is rejected; the server crashing fails the
// call in flight, and the agent connects again and works.
func TestMCPServerAsAnAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := filepath.Join(dir, "mcp.json")
	writeFile(t, cfg, fmt.Sprintf(`{"agents": [{"name": "calc", "kind": "mcp",
  "mcp": {"command": %q, "env": ["A2ABUS_TEST_MCP_SERVER"], "callTimeout": "10s"}}]}`, os.Args[0]))
	serve := startProcEnv(t, []string{"A2ABUS_TEST_MCP_SERVER=1"}, "serve", "--listen", addr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", "off", "--config", cfg)
	base := "http://" + addr
	waitReady(t, serve, base)
	online := func(what string) {
		waitAgents(t, base, "", what, func(l schemas.AgentList) bool {
			for _, a := range l.Agents {
				if a.Agent == "calc" && a.Remote != nil && a.Remote.Health == "online" && len(a.Skills) == 3 {
					return true
				}
			}
			return false
		})
	}
	online("the MCP server's tools as skills")

	if task := sendTask(t, base, "calc", map[string]any{"text": `add: {"a": 2, "b": 3}`}); task.Status.State != schemas.TaskStateCompleted || artifactText(task) != "5" {
		t.Fatalf("add: %s %q", task.Status.State, artifactText(task))
	}
	if task := sendTask(t, base, "calc", map[string]any{"data": map[string]any{"tool": "calc_add", "arguments": map[string]any{"a": 40, "b": 2}}}); task.Status.State != schemas.TaskStateCompleted || artifactText(task) != "42" {
		t.Fatalf("add by data part: %s %q", task.Status.State, artifactText(task))
	}
	if task := sendTask(t, base, "calc", map[string]any{"text": "fail"}); task.Status.State != schemas.TaskStateFailed || !strings.Contains(task.Status.Message.Text(), "it broke") {
		t.Fatalf("fail: %s %v", task.Status.State, task.Status.Message)
	}
	if task := sendTask(t, base, "calc", map[string]any{"text": "nope: {}"}); task.Status.State != schemas.TaskStateRejected || !strings.Contains(task.Status.Message.Text(), "calc_add") {
		t.Fatalf("unknown tool: %s %v", task.Status.State, task.Status.Message)
	}
	if task := sendTask(t, base, "calc", map[string]any{"text": "crash"}); task.Status.State != schemas.TaskStateFailed {
		t.Fatalf("crash: %s %v", task.Status.State, task.Status.Message)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		task := sendTask(t, base, "calc", map[string]any{"text": `add: {"a": 1, "b": 1}`})
		if task.Status.State == schemas.TaskStateCompleted && artifactText(task) == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the crash: %s %v", task.Status.State, task.Status.Message)
		}
	}
	online("the agent back after the crash")
	serve.stop(t)
}

// An MCP server over Streamable HTTP as an agent: another a2abus's /mcp,
// whose tools are its agents — a2abus on both sides of MCP.
func TestMCPServerOverHTTPAsAnAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	extAddr, gwAddr := freeAddr(t), freeAddr(t)
	ext := startProc(t, "serve", "--listen", extAddr, "--data-dir", filepath.Join(dir, "ext"), "--nats-listen", "off")
	waitReady(t, ext, "http://"+extAddr)
	cfg := filepath.Join(dir, "gw.json")
	writeFile(t, cfg, fmt.Sprintf(`{"outbound": {"allowLoopback": true},
  "agents": [{"name": "far", "kind": "mcp", "mcp": {"url": "http://%s/mcp"}}]}`, extAddr))
	gw := startProc(t, "serve", "--listen", gwAddr, "--data-dir", filepath.Join(dir, "gw"), "--nats-listen", "off", "--config", cfg)
	base := "http://" + gwAddr
	waitReady(t, gw, base)
	waitAgents(t, base, "", "the remote edge's agents as tools", func(l schemas.AgentList) bool {
		for _, a := range l.Agents {
			if a.Agent == "far" && a.Remote != nil && a.Remote.Health == "online" {
				for _, sk := range a.Skills {
					if sk.ID == "far_a2a_echo" {
						return true
					}
				}
			}
		}
		return false
	})
	task := sendTask(t, base, "far", map[string]any{"text": `a2a_echo: {"message": "hello through two a2abus"}`})
	if task.Status.State != schemas.TaskStateCompleted || !strings.Contains(artifactText(task), "hello through two a2abus") {
		t.Fatalf("through MCP over HTTP: %s %q %v", task.Status.State, artifactText(task), task.Status.Message)
	}
}
