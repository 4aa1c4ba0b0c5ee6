package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2abus/a2abus/schemas"
)

// AgentInput is the input of an agent's tool.
type AgentInput struct {
	Message   string `json:"message" jsonschema:"the message to send the agent"`
	ContextID string `json:"contextId,omitempty" jsonschema:"continue this conversation (a contextId an earlier call returned)"`
	TaskID    string `json:"taskId,omitempty" jsonschema:"answer this task (the taskId of a call that asked for input)"`
}

// TaskRef names a task of an agent.
type TaskRef struct {
	Agent  string `json:"agent" jsonschema:"the agent the task was sent to"`
	TaskID string `json:"taskId" jsonschema:"the task's id"`
}

// SearchInput narrows the agents listed.
type SearchInput struct {
	Query string `json:"query,omitempty" jsonschema:"words that must all appear in the agent's name, description, skills, tags or examples"`
	Skill string `json:"skill,omitempty" jsonschema:"a skill id the agent must offer"`
	Tag   string `json:"tag,omitempty" jsonschema:"a tag one of the agent's skills must carry"`
}

// TaskOutcome is the structured result of a call: where the task stands.
type TaskOutcome struct {
	TaskID    string `json:"taskId,omitempty"`
	ContextID string `json:"contextId,omitempty"`
	State     string `json:"state"`
	// Question is what an interrupted task asks; answer by calling the
	// same tool with taskId.
	Question string `json:"question,omitempty"`
}

// addAgentTool serves an agent's tool, described from its card.
func (b *Bridge) addAgentTool(a schemas.AgentEntry) {
	var desc strings.Builder
	desc.WriteString(a.Description)
	if desc.Len() == 0 {
		desc.WriteString("The A2A agent " + a.Agent + ".")
	}
	if len(a.Skills) > 0 {
		desc.WriteString("\nSkills:")
		for _, sk := range a.Skills {
			fmt.Fprintf(&desc, "\n- %s: %s", sk.Name, sk.Description)
			if len(sk.Examples) > 0 {
				fmt.Fprintf(&desc, " (e.g. %q)", sk.Examples[0])
			}
		}
	}
	desc.WriteString("\nIf the agent asks for input, call again with the taskId it returned.")
	agent := a.Agent
	sdk.AddTool(b.srv, &sdk.Tool{Name: ToolName(agent), Title: a.Name, Description: desc.String()},
		func(ctx context.Context, req *sdk.CallToolRequest, in AgentInput) (*sdk.CallToolResult, any, error) {
			return b.send(ctx, req, agent, in)
		})
}

// addFixedTools serves the tools that are not an agent's.
func (b *Bridge) addFixedTools() {
	sdk.AddTool(b.srv, &sdk.Tool{Name: "list_agents", Description: "Lists the A2A agents served here: name, description, skills, and for a proxied agent its health."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return b.listAgents(ctx, req, schemas.AgentQuery{})
		})
	sdk.AddTool(b.srv, &sdk.Tool{Name: "search_agents", Description: "Finds A2A agents by words in their name, description, skills, tags or examples, by skill id or by tag."},
		func(ctx context.Context, req *sdk.CallToolRequest, in SearchInput) (*sdk.CallToolResult, any, error) {
			q := schemas.AgentQuery{Text: in.Query}
			if in.Skill != "" {
				q.Skills = []string{in.Skill}
			}
			if in.Tag != "" {
				q.Tags = []string{in.Tag}
			}
			return b.listAgents(ctx, req, q)
		})
	sdk.AddTool(b.srv, &sdk.Tool{Name: "get_task", Description: "Reads a task an agent's tool started: its state, what the agent made, or what it asks."},
		func(ctx context.Context, req *sdk.CallToolRequest, in TaskRef) (*sdk.CallToolResult, any, error) {
			t, err := b.opt.Edge.GetTask(ctx, b.caller(req), in.Agent, &schemas.GetTaskRequest{ID: in.TaskID})
			if err != nil {
				return toolError(err), nil, nil
			}
			res, out := taskResult(in.Agent, t)
			return res, out, nil
		})
	sdk.AddTool(b.srv, &sdk.Tool{Name: "cancel_task", Description: "Cancels a task an agent's tool started."},
		func(ctx context.Context, req *sdk.CallToolRequest, in TaskRef) (*sdk.CallToolResult, any, error) {
			t, err := b.opt.Edge.CancelTask(ctx, b.caller(req), in.Agent, &schemas.CancelTaskRequest{ID: in.TaskID})
			if err != nil {
				return toolError(err), nil, nil
			}
			res, out := taskResult(in.Agent, t)
			return res, out, nil
		})
}

// listAgents answers the registry, narrowed by q, as the caller sees it.
func (b *Bridge) listAgents(ctx context.Context, req *sdk.CallToolRequest, q schemas.AgentQuery) (*sdk.CallToolResult, any, error) {
	agents, err := b.opt.Edge.Agents(ctx, b.caller(req), q)
	if err != nil {
		return toolError(err), nil, nil
	}
	type entry struct {
		Agent       string               `json:"agent"`
		Tool        string               `json:"tool"`
		Name        string               `json:"name"`
		Description string               `json:"description,omitempty"`
		Skills      []schemas.AgentSkill `json:"skills,omitempty"`
		Kind        string               `json:"kind"`
		Health      string               `json:"health,omitempty"`
	}
	out := struct {
		Agents []entry `json:"agents"`
	}{Agents: []entry{}}
	var text strings.Builder
	for _, a := range agents {
		e := entry{Agent: a.Agent, Tool: ToolName(a.Agent), Name: a.Name, Description: a.Description, Skills: a.Skills, Kind: a.Kind}
		e.Health = a.Health
		out.Agents = append(out.Agents, e)
		fmt.Fprintf(&text, "%s (tool %s): %s\n", a.Agent, e.Tool, a.Description)
	}
	if len(agents) == 0 {
		text.WriteString("no agent matches\n")
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text.String()}}}, out, nil
}

// send runs an agent's tool: the message goes to the agent as a streaming
// send, each event is reported as MCP progress (when the client asked for
// it), and the call answers once the task settles or Wait passes.
func (b *Bridge) send(ctx context.Context, req *sdk.CallToolRequest, agent string, in AgentInput) (*sdk.CallToolResult, any, error) {
	if strings.TrimSpace(in.Message) == "" {
		return toolError(errors.New("message is empty")), nil, nil
	}
	msg := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, TaskID: in.TaskID, ContextID: in.ContextID,
		Parts: []schemas.Part{schemas.TextPart(in.Message)}}
	wctx, cancel := context.WithTimeout(ctx, b.opt.Wait)
	defer cancel()
	token := req.Params.GetProgressToken()
	var task *schemas.Task
	var reply *schemas.Message
	progress := 0.0
	err := b.opt.Edge.SendStreamingMessage(wctx, b.caller(req), agent, &schemas.SendMessageRequest{Message: msg}, func(_ string, ev *schemas.StreamResponse) error {
		task, reply = fold(task, ev)
		if token != nil {
			progress++
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: progress, Message: describe(ev)})
		}
		if reply != nil || (task != nil && task.Status.State.Settled()) {
			return errSettled
		}
		return nil
	})
	// A stream cut by Wait while the task works is answered with where it
	// stands.
	if err != nil && !errors.Is(err, errSettled) && !(wctx.Err() != nil && ctx.Err() == nil && task != nil) {
		return toolError(err), nil, nil
	}
	if reply != nil {
		return &sdk.CallToolResult{Content: partsContent(reply.Parts)}, TaskOutcome{ContextID: reply.ContextID, State: "message"}, nil
	}
	if task == nil {
		return toolError(errors.New("the agent answered nothing")), nil, nil
	}
	res, out := taskResult(agent, task)
	return res, out, nil
}

// errSettled ends a tool's stream once it has its answer.
var errSettled = errors.New("mcpbridge: the task settled")

// fold applies a stream event to the task as the client sees it.
func fold(t *schemas.Task, ev *schemas.StreamResponse) (*schemas.Task, *schemas.Message) {
	switch {
	case ev.Message != nil:
		return t, ev.Message
	case ev.Task != nil:
		cp := *ev.Task
		return &cp, nil
	case t == nil:
		return nil, nil
	case ev.StatusUpdate != nil:
		t.Status = ev.StatusUpdate.Status
	case ev.ArtifactUpdate != nil:
		u := ev.ArtifactUpdate
		for i := range t.Artifacts {
			if t.Artifacts[i].ArtifactID == u.Artifact.ArtifactID {
				if u.Append {
					t.Artifacts[i].Parts = append(t.Artifacts[i].Parts, u.Artifact.Parts...)
				} else {
					t.Artifacts[i] = u.Artifact
				}
				return t, nil
			}
		}
		t.Artifacts = append(t.Artifacts, u.Artifact)
	}
	return t, nil
}

// describe is a progress message for an event.
func describe(ev *schemas.StreamResponse) string {
	switch {
	case ev.StatusUpdate != nil:
		s := strings.TrimPrefix(string(ev.StatusUpdate.Status.State), "TASK_STATE_")
		if m := ev.StatusUpdate.Status.Message; m != nil && m.Text() != "" {
			s += ": " + m.Text()
		}
		return s
	case ev.ArtifactUpdate != nil:
		return "artifact " + ev.ArtifactUpdate.Artifact.ArtifactID
	case ev.Task != nil:
		return strings.TrimPrefix(string(ev.Task.Status.State), "TASK_STATE_")
	}
	return "message"
}

// taskResult is a tool result of a task: what its artifacts hold, or the
// question an interrupted task asks with how to answer it, or the reason
// it failed (an error result).
func taskResult(agent string, t *schemas.Task) (*sdk.CallToolResult, TaskOutcome) {
	out := TaskOutcome{TaskID: t.ID, ContextID: t.ContextID, State: strings.TrimPrefix(string(t.Status.State), "TASK_STATE_")}
	var content []sdk.Content
	for _, a := range t.Artifacts {
		content = append(content, partsContent(a.Parts)...)
	}
	status := ""
	if m := t.Status.Message; m != nil {
		status = m.Text()
	}
	res := &sdk.CallToolResult{}
	switch st := t.Status.State; {
	case st.Interrupted():
		out.Question = status
		content = append(content, &sdk.TextContent{Text: fmt.Sprintf("The agent asks: %s\nTo answer, call %s again with taskId %q.", status, ToolName(agent), t.ID)})
	case st == schemas.TaskStateCompleted:
		if len(content) == 0 && status != "" {
			content = append(content, &sdk.TextContent{Text: status})
		}
	case st.Terminal():
		res.IsError = true
		content = append(content, &sdk.TextContent{Text: fmt.Sprintf("The task ended %s: %s", out.State, status)})
	default:
		content = append(content, &sdk.TextContent{Text: fmt.Sprintf("The task is still %s; get_task with agent %q and taskId %q reads it later.", out.State, agent, t.ID)})
	}
	if len(content) == 0 {
		content = []sdk.Content{&sdk.TextContent{Text: "(the agent made nothing)"}}
	}
	res.Content = content
	return res, out
}

// partsContent is A2A parts as MCP content: text as text, data as its
// JSON, a file by URL as a resource link, file bytes as an image or an
// embedded resource.
func partsContent(parts []schemas.Part) []sdk.Content {
	var out []sdk.Content
	for _, p := range parts {
		switch {
		case p.Text != nil:
			out = append(out, &sdk.TextContent{Text: *p.Text})
		case p.Data != nil:
			b, _ := json.Marshal(p.Data)
			out = append(out, &sdk.TextContent{Text: string(b)})
		case p.URL != nil:
			out = append(out, &sdk.ResourceLink{URI: *p.URL, Name: p.Filename, MIMEType: p.MediaType})
		case p.Raw != nil:
			if strings.HasPrefix(p.MediaType, "image/") {
				out = append(out, &sdk.ImageContent{Data: p.Raw, MIMEType: p.MediaType})
				continue
			}
			out = append(out, &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "a2a:file/" + p.Filename, MIMEType: p.MediaType, Blob: p.Raw}})
		}
	}
	return out
}

// toolError is a failed call as MCP reports one to the model: a result
// with IsError and the reason.
// An A2A error leads with its reason (UNAUTHENTICATED, TASK_NOT_FOUND…)
// and says when to retry, so a model can tell what to do.
func toolError(err error) *sdk.CallToolResult {
	text := err.Error()
	var pe *schemas.Error
	if errors.As(err, &pe) && pe.Reason != "" {
		text = pe.Reason + ": " + pe.Message
		if pe.RetryAfter > 0 {
			text += fmt.Sprintf(" (retry after %ds)", pe.RetryAfter)
		}
	}
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}}
}
