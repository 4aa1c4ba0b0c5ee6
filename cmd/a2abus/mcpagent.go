package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/discovery/mcpbridge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// MCPServerConfig is the MCP server an agent of kind mcp uses: a command
// spoken to over stdio (with args, dir, and only the environment
// variables named in env), or a Streamable HTTP url (with headers).
type MCPServerConfig struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Dir     string            `json:"dir,omitempty"`
	Env     []string          `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// CallTimeout bounds one tool call; default 60s.
	CallTimeout Duration `json:"callTimeout,omitempty"`
}

// mcpMonitor owns the session with one agent's MCP server: it connects in
// the background (a server that is not there never holds up start-up),
// lists the tools as the agent's skills, records health as remote agents
// do, and connects again after the session ends (the server crashed).
type mcpMonitor struct {
	name, shown string
	cfg         mcpbridge.ServerConfig
	log         *slog.Logger

	mu      sync.Mutex
	client  *mcpbridge.ToolClient
	tools   []mcpbridge.Tool
	status  schemas.RemoteAgentStatus
	changed chan struct{}
	up      chan struct{} // replaced after each connection ends
}

// Run connects, and after the session ends connects again, with growing
// pauses while it fails, until ctx ends; the session is closed (a command
// stopped) then.
func (m *mcpMonitor) Run(ctx context.Context) {
	wait := 200 * time.Millisecond
	for ctx.Err() == nil {
		if m.connect(ctx) {
			wait = 200 * time.Millisecond
			m.mu.Lock()
			c := m.client
			m.mu.Unlock()
			done := make(chan error, 1)
			go func() { done <- c.Wait() }()
			select {
			case err := <-done:
				m.lost(err)
			case <-ctx.Done():
				_ = c.Close()
				return
			}
			continue
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
		wait = min(wait*2, 30*time.Second)
	}
}

func (m *mcpMonitor) connect(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := mcpbridge.Dial(cctx, m.cfg, discovery.Version)
	var tools []mcpbridge.Tool
	if err == nil {
		if tools, err = c.Tools(cctx); err != nil {
			_ = c.Close()
		}
	}
	now := schemas.Now()
	m.mu.Lock()
	m.status.CheckedAt = now
	if err != nil {
		// The registry shows it to every caller: the reason, not the
		// URL net/http repeats (mcpbridge redacts it where it is
		// repeated otherwise).
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		m.status.Health, m.status.LastError = schemas.HealthOffline, err.Error()
		m.mu.Unlock()
		m.log.Warn("MCP server not reachable", "err", err)
		m.signal()
		return false
	}
	m.client, m.tools = c, tools
	m.status.Health, m.status.LastError, m.status.LastSeen = schemas.HealthOnline, "", now
	close(m.up)
	m.mu.Unlock()
	m.log.Info("MCP server connected", "tools", len(tools))
	m.signal()
	return true
}

func (m *mcpMonitor) lost(err error) {
	m.mu.Lock()
	m.client = nil
	m.up = make(chan struct{})
	why := "the MCP server's session ended"
	if err != nil {
		why += ": " + err.Error()
	}
	m.status.Health, m.status.LastError, m.status.CheckedAt = schemas.HealthOffline, why, schemas.Now()
	m.mu.Unlock()
	m.log.Warn("MCP server went away; connecting again", "err", err)
	m.signal()
}

func (m *mcpMonitor) signal() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// Live is the card and health the worker group registers: one skill per
// tool.
func (m *mcpMonitor) Live() (schemas.AgentCard, *schemas.RemoteAgentStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.status
	c := schemas.AgentCard{Name: m.name, Version: "1.0.0",
		Description: fmt.Sprintf("The tools of the MCP server %s. Send \"tool: {json arguments}\", or a data part {\"tool\": ..., \"arguments\": {...}}.", m.shown)}
	for _, t := range m.tools {
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		if desc == "" {
			desc = "the tool " + t.Name
		}
		if len(t.InputSchema) > 0 && string(t.InputSchema) != "null" {
			desc += " Arguments (JSON Schema): " + string(t.InputSchema)
		}
		skill := workers.MCPTools{Server: m.name}.SkillName(t.Name)
		c.Skills = append(c.Skills, schemas.AgentSkill{ID: skill, Name: skill, Description: desc, Tags: []string{"mcp", m.name}})
	}
	return c, &st
}

func (m *mcpMonitor) toolNames() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, len(m.tools))
	for i, t := range m.tools {
		out[i] = t.Name
	}
	return out
}

// session is the current session, waiting a little for one while the
// monitor connects (again).
func (m *mcpMonitor) session(ctx context.Context) (workers.ToolServer, error) {
	m.mu.Lock()
	c, up, why := m.client, m.up, m.status.LastError
	m.mu.Unlock()
	if c != nil {
		return toolServer{c}, nil
	}
	select {
	case <-up:
		return m.session(ctx)
	case <-time.After(5 * time.Second):
		return nil, fmt.Errorf("not connected: %s", why)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// toolServer adapts the bridge's client to workers.ToolServer.
type toolServer struct{ c *mcpbridge.ToolClient }

func (t toolServer) Call(ctx context.Context, tool string, args json.RawMessage) ([]schemas.Part, error) {
	parts, err := t.c.Call(ctx, tool, args)
	if errors.Is(err, mcpbridge.ErrToolFailed) {
		return nil, fmt.Errorf("%w: %v", workers.ErrToolReported, err)
	}
	return parts, err
}

// mcpOptions are an mcp agent's options: MCP is its MCP server (see
// MCPServerConfig).
type mcpOptions struct {
	MCP *MCPServerConfig `json:"mcp,omitempty"`
}

var mcpKind = kind(nil, (*process).mcpDefinition)

// mcpDefinition builds an agent of kind mcp.
func (p *process) mcpDefinition(a AgentConfig, o mcpOptions) (workers.Definition, error) {
	s := o.MCP
	if s == nil || (s.Command == "") == (s.URL == "") {
		return workers.Definition{}, errors.New(`an mcp agent needs "mcp": {"command": ..., "args": [...]} or {"url": ...} (one of them)`)
	}
	cfg := mcpbridge.ServerConfig{Command: s.Command, Args: s.Args, Dir: s.Dir, Env: environ(s.Env), URL: s.URL}
	shown := "stdio:" + filepath.Base(s.Command)
	if s.URL != "" {
		pol, err := p.outboundURL("mcp url", s.URL)
		if err != nil {
			return workers.Definition{}, err
		}
		cfg.HTTP = pol.Client(0)
		cfg.Header = headerOf(s.Headers)
		shown = discovery.RedactURL(s.URL)
	}
	m := &mcpMonitor{name: a.Name, shown: shown, cfg: cfg, log: p.log.With("agent", a.Name, "mcp_server", shown),
		status:  schemas.RemoteAgentStatus{URL: shown, Health: schemas.HealthOffline, LastError: "not connected yet"},
		changed: make(chan struct{}, 1), up: make(chan struct{})}
	p.monitors = append(p.monitors, m)
	agent := workers.MCPTools{Server: a.Name, Tools: m.toolNames, Client: m.session, CallTimeout: time.Duration(s.CallTimeout)}
	return workers.Definition{Name: a.Name, Agent: agent, Live: m.Live, Changed: m.changed}, nil
}
