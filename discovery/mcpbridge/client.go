package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
)

// The other way round: an MCP server's tools used by an a2abus agent (the
// mcp agent kind). Dial connects to the server — a command spoken to over
// stdio, or a Streamable HTTP URL — and ToolClient lists and calls its
// tools, turning results into A2A parts.

// ServerConfig is an MCP server to connect to: Command (with Args, Dir
// and the environment Env, nothing else of the process's environment), or
// URL (with Header).
type ServerConfig struct {
	Command string
	Args    []string
	Dir     string
	// Env is the command's whole environment, as "NAME=value" (cmd takes
	// the variables a server's config names from its own environment).
	Env []string
	URL string
	// Header is sent with every request to URL.
	Header http.Header
	// HTTP reaches URL; default the outbound guard's client for public
	// addresses (cmd passes the configured policy's).
	HTTP *http.Client
}

// ToolClient is a session with an MCP server. Its errors never repeat
// the server's URL as configured (discovery.RedactError): they reach the
// registry, logs and tasks' status, and the URL may hold a key.
type ToolClient struct {
	cs  *sdk.ClientSession
	url string
}

// Dial connects to the server and initializes a session (the SDK
// negotiates the protocol version).
func Dial(ctx context.Context, c ServerConfig, version string) (*ToolClient, error) {
	var t sdk.Transport
	switch {
	case c.Command != "":
		cmd := exec.Command(c.Command, c.Args...)
		cmd.Dir = c.Dir
		cmd.Env = append([]string{}, c.Env...)
		t = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	case c.URL != "":
		client := c.HTTP
		if client == nil {
			client = discovery.Policy{}.Client(0) // public addresses only
		}
		if len(c.Header) > 0 {
			client = &http.Client{Transport: withHeader{next: transportOf(client), h: c.Header}, CheckRedirect: noRedirects, Timeout: client.Timeout}
		}
		t = &sdk.StreamableClientTransport{Endpoint: c.URL, HTTPClient: client, MaxRetries: -1}
	default:
		return nil, errors.New("mcpbridge: an MCP server needs a command or a URL")
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "a2abus", Version: version}, nil).Connect(ctx, t, nil)
	if err != nil {
		return nil, discovery.RedactError(err, c.URL)
	}
	return &ToolClient{cs: cs, url: c.URL}, nil
}

// Tool is one tool a server offers.
type Tool struct {
	Name, Title, Description string
	InputSchema              json.RawMessage
}

// Tools lists the server's tools (every page).
func (c *ToolClient) Tools(ctx context.Context) ([]Tool, error) {
	var out []Tool
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, discovery.RedactError(err, c.url)
		}
		schema, _ := json.Marshal(t.InputSchema)
		out = append(out, Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: schema})
	}
	return out, nil
}

// ErrToolFailed is wrapped by the error of a call the tool itself reported
// failed (isError), as opposed to one that did not reach it.
var ErrToolFailed = errors.New("the tool reported an error")

// Call calls a tool and returns its result as A2A parts: text as text,
// images and audio as file bytes, embedded resources as text or bytes,
// resource links as URL parts, structured content as a data part. A
// result the tool marked as an error is ErrToolFailed with its text.
func (c *ToolClient) Call(ctx context.Context, name string, args json.RawMessage) ([]schemas.Part, error) {
	var a any
	if len(args) > 0 {
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, fmt.Errorf("the arguments are not JSON: %v", err)
		}
	}
	res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: a})
	if err != nil {
		return nil, discovery.RedactError(err, c.url)
	}
	parts := resultParts(res)
	if res.IsError {
		text := ""
		for _, p := range parts {
			if p.Text != nil {
				text += *p.Text
			}
		}
		return nil, fmt.Errorf("%w: %s", ErrToolFailed, text)
	}
	return parts, nil
}

func resultParts(res *sdk.CallToolResult) []schemas.Part {
	var parts []schemas.Part
	for _, c := range res.Content {
		switch v := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, schemas.TextPart(v.Text))
		case *sdk.ImageContent:
			parts = append(parts, schemas.Part{Raw: v.Data, MediaType: v.MIMEType})
		case *sdk.AudioContent:
			parts = append(parts, schemas.Part{Raw: v.Data, MediaType: v.MIMEType})
		case *sdk.ResourceLink:
			u := v.URI
			parts = append(parts, schemas.Part{URL: &u, Filename: v.Name, MediaType: v.MIMEType})
		case *sdk.EmbeddedResource:
			if r := v.Resource; r != nil {
				if r.Blob != nil {
					parts = append(parts, schemas.Part{Raw: slices.Clone(r.Blob), MediaType: r.MIMEType, Filename: r.URI})
				} else {
					parts = append(parts, schemas.TextPart(r.Text))
				}
			}
		}
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, schemas.Part{Data: json.RawMessage(b)})
		}
	}
	return parts
}

// Wait blocks until the session ends (the server exited or the
// connection broke).
func (c *ToolClient) Wait() error { return discovery.RedactError(c.cs.Wait(), c.url) }

// Close ends the session; a command is stopped (stdin closed, then
// SIGTERM, then SIGKILL).
func (c *ToolClient) Close() error { return c.cs.Close() }
