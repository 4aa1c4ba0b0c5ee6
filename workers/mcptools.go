package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// The mcp agent kind: an MCP server's tools as an a2abus agent. Each tool
// is a skill of the agent, named <server>_<tool> as OpenFang names them; a
// message names the tool to call — a data part {"tool": ..., "arguments":
// {...}}, or text "tool: {json arguments}" — and the tool's result becomes
// the task's artifact. A result the tool marks as an error fails the task
// with its text. cmd adapts discovery/mcpbridge's client to ToolServer
// (workers does not import the MCP SDK).

// ToolServer is what the mcp agent kind needs of an MCP server session.
type ToolServer interface {
	// Call calls a tool by its server name; an error wrapping
	// ErrToolReported is the tool's own failure.
	Call(ctx context.Context, tool string, args json.RawMessage) ([]schemas.Part, error)
}

// ErrToolReported marks a call the tool answered with an error result.
var ErrToolReported = errors.New("the tool reported an error")

// MCPTools runs tasks by calling an MCP server's tools.
type MCPTools struct {
	// Server is the server's name: the prefix of its tools' skill names.
	Server string
	// Tools lists the server's tool names now (the monitor's last list).
	Tools func() []string
	// Client returns the session with the server; an error means it
	// cannot be reached now (the task fails saying so).
	Client func(ctx context.Context) (ToolServer, error)
	// CallTimeout bounds one call; default 60s.
	CallTimeout time.Duration
}

// SkillName is a tool's skill id: <server>_<tool>.
func (m MCPTools) SkillName(tool string) string { return m.Server + "_" + tool }

// Execute reads which tool the message names, calls it, and answers with
// its result.
func (m MCPTools) Execute(ctx context.Context, req *Request, out *Emitter) error {
	tool, args, err := m.pick(req.Message)
	if err != nil {
		return out.Reject(ctx, err.Error())
	}
	cl, err := m.Client(ctx)
	if err != nil {
		return fmt.Errorf("the MCP server %s cannot be reached: %w", m.Server, err)
	}
	if err := out.Working(ctx, "calling "+m.SkillName(tool)); err != nil {
		return err
	}
	d := m.CallTimeout
	if d <= 0 {
		d = 60 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	parts, err := cl.Call(cctx, tool, args)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, ErrToolReported):
		return out.Fail(ctx, fmt.Sprintf("tool %s failed: %v", m.SkillName(tool), err))
	case cctx.Err() != nil:
		return out.Fail(ctx, fmt.Sprintf("tool %s did not answer within %s", m.SkillName(tool), d))
	case err != nil:
		return fmt.Errorf("calling tool %s of the MCP server %s: %w", tool, m.Server, err)
	}
	if len(parts) == 0 {
		parts = []schemas.Part{schemas.TextPart("")}
	}
	a := schemas.Artifact{ArtifactID: "result", Name: m.SkillName(tool), Parts: parts}
	if err := out.Artifact(ctx, a); err != nil {
		return err
	}
	return out.Complete(ctx, "")
}

// pick reads the tool a message names and its arguments: a data part
// {"tool", "arguments"}, or text "tool: {arguments}" ("tool" alone: no
// arguments); the tool by its skill name or its own.
func (m MCPTools) pick(msg schemas.Message) (string, json.RawMessage, error) {
	var name string
	var args json.RawMessage
	for _, p := range msg.Parts {
		if p.Data != nil {
			var d struct {
				Tool      string          `json:"tool"`
				Arguments json.RawMessage `json:"arguments"`
			}
			if json.Unmarshal(p.Data, &d) == nil && d.Tool != "" {
				name, args = d.Tool, d.Arguments
				break
			}
		}
		if p.Text != nil && name == "" {
			head, rest, _ := strings.Cut(strings.TrimSpace(*p.Text), ":")
			name, args = strings.TrimSpace(head), json.RawMessage(strings.TrimSpace(rest))
			if len(args) > 0 && !json.Valid(args) {
				return "", nil, fmt.Errorf("the arguments after %q are not JSON; send \"tool: {...}\" or a data part {\"tool\": ..., \"arguments\": {...}}", name+":")
			}
		}
	}
	tools := m.Tools()
	for _, t := range tools {
		if name == t || name == m.SkillName(t) {
			return t, args, nil
		}
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = m.SkillName(t)
	}
	if name == "" {
		return "", nil, fmt.Errorf("the message names no tool; send \"tool: {json arguments}\" or a data part {\"tool\": ..., \"arguments\": {...}}; tools: %s", strings.Join(names, ", "))
	}
	return "", nil, fmt.Errorf("no tool %q here; tools: %s", name, strings.Join(names, ", "))
}
