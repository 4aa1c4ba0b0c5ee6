package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
)

// httpEdge is an edge in another process, reached over its HTTP API: GET
// /a2a/agents for the registry and A2A 1.0 JSON-RPC at /agents/{agent}
// for the calls, each carrying the credentials of whom it is made for.
type httpEdge struct {
	base string
	http *http.Client
	// timeout bounds a unary call and the start of a stream.
	timeout time.Duration
}

// NewHTTPEdge is the Edge at base (an a2abus edge's public URL), reached
// with client (default a plain one). A call forwards the credentials its
// caller presented (Authorization and X-API-Key) and nothing else of its
// header; the client never follows a redirect, so they go nowhere else.
func NewHTTPEdge(base string, client *http.Client) (Edge, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("mcpbridge: the edge's URL %q is not an absolute http(s) URL", base)
	}
	if client == nil {
		client = &http.Client{}
	}
	c := *client
	c.CheckRedirect = noRedirects
	return &httpEdge{base: strings.TrimSuffix(base, "/"), http: &c, timeout: 30 * time.Second}, nil
}

// forwarded are the headers of what a caller presented that its calls
// carry to the edge: its credentials.
var forwarded = []string{"Authorization", "X-Api-Key"}

// credentialsOf is the part of who's header a call forwards.
func credentialsOf(who schemas.Presented) http.Header {
	h := http.Header{}
	for _, k := range forwarded {
		if v := who.Header.Values(k); len(v) > 0 {
			h[http.CanonicalHeaderKey(k)] = slices.Clone(v)
		}
	}
	return h
}

func (e *httpEdge) Agents(ctx context.Context, who schemas.Presented, q schemas.AgentQuery) ([]schemas.AgentEntry, error) {
	v := url.Values{}
	v["skill"], v["tag"] = q.Skills, q.Tags
	for k, s := range map[string]string{"kind": q.Kind, "health": q.Health, "q": q.Text} {
		if s != "" {
			v.Set(k, s)
		}
	}
	u := e.base + "/a2a/agents"
	if enc := v.Encode(); enc != "" {
		u += "?" + enc
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header = credentialsOf(who)
	resp, err := e.http.Do(req)
	if err != nil {
		return nil, discovery.RedactError(err, u) // it goes to the MCP client
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the registry answered %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var list schemas.AgentList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("the registry's answer: %w", err)
	}
	return list.Agents, nil
}

// client is the A2A client of agent for who.
func (e *httpEdge) client(who schemas.Presented, agent string) (*discovery.Client, error) {
	if !schemas.ValidAgentName(agent) {
		return nil, fmt.Errorf("%q is not an agent name", agent)
	}
	// A client per call: the endpoint is fixed (nothing to learn about
	// it), and the credentials are the caller's.
	return discovery.NewClient(discovery.Endpoint{URL: e.base + "/agents/" + agent, Binding: schemas.BindingJSONRPC, Version: schemas.ProtocolVersion},
		discovery.Options{HTTP: e.http, Header: credentialsOf(who), Timeout: e.timeout})
}

func (e *httpEdge) SendStreamingMessage(ctx context.Context, who schemas.Presented, agent string, req *schemas.SendMessageRequest, each func(id string, ev *schemas.StreamResponse) error) error {
	c, err := e.client(who, agent)
	if err != nil {
		return err
	}
	stream, err := c.SendStreamingMessage(ctx, req)
	if err != nil {
		return err
	}
	defer stream.Close()
	for {
		ev, err := stream.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := each(stream.LastEventID(), ev); err != nil {
			return err
		}
	}
}

func (e *httpEdge) GetTask(ctx context.Context, who schemas.Presented, agent string, req *schemas.GetTaskRequest) (*schemas.Task, error) {
	c, err := e.client(who, agent)
	if err != nil {
		return nil, err
	}
	return c.GetTask(ctx, req)
}

func (e *httpEdge) CancelTask(ctx context.Context, who schemas.Presented, agent string, req *schemas.CancelTaskRequest) (*schemas.Task, error) {
	c, err := e.client(who, agent)
	if err != nil {
		return nil, err
	}
	return c.CancelTask(ctx, req)
}

// noRedirects is http.Client.CheckRedirect for clients that add
// credentials to every request: a redirect is answered, not followed.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// withHeader adds a fixed header to every request (an MCP server's
// configured credentials).
type withHeader struct {
	next http.RoundTripper
	h    http.Header
}

func (t withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.h {
		r.Header[k] = slices.Clone(vs)
	}
	return t.next.RoundTrip(r)
}

func transportOf(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}
