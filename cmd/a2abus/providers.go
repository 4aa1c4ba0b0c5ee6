package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// LLMConfig is an agent of kind llm: an OpenAI-compatible
// chat-completions endpoint. The API key comes from the environment
// (apiKeyEnv) or a file (apiKeyFile), never from the config file.
type LLMConfig struct {
	BaseURL     string   `json:"baseUrl"`
	Model       string   `json:"model"`
	System      string   `json:"system,omitempty"`
	APIKeyEnv   string   `json:"apiKeyEnv,omitempty"`
	APIKeyFile  string   `json:"apiKeyFile,omitempty"`
	Timeout     Duration `json:"timeout,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	MaxTokens   int      `json:"maxTokens,omitempty"`
}

// llmDefinition builds an agent of kind llm.
func (p *process) llmDefinition(a AgentConfig, o llmOptions) (workers.Definition, error) {
	c := o.LLM
	if c == nil || c.BaseURL == "" || c.Model == "" {
		return workers.Definition{}, errors.New(`an llm agent needs "llm": {"baseUrl": ..., "model": ...}`)
	}
	pol, err := p.outboundURL("llm baseUrl", c.BaseURL)
	if err != nil {
		return workers.Definition{}, err
	}
	key, err := secret("apiKey", "", c.APIKeyEnv, c.APIKeyFile, os.LookupEnv)
	if err != nil {
		return workers.Definition{}, err
	}
	desc := fmt.Sprintf("The model %s: the task's messages are the conversation, the answer streams back as it is written.", c.Model)
	return workers.Definition{
		Name: a.Name,
		Card: schemas.AgentCard{Name: a.Name, Description: desc, Version: "1.0.0",
			Capabilities: schemas.AgentCapabilities{Streaming: schemas.Bool(true)},
			Skills:       []schemas.AgentSkill{{ID: "chat", Name: "Chat", Description: desc, Tags: []string{"llm", c.Model}}}},
		Agent: workers.LLM{BaseURL: c.BaseURL, Model: c.Model, System: c.System, APIKey: key, HTTP: pol.Client(0),
			Timeout: time.Duration(c.Timeout), Temperature: c.Temperature, MaxTokens: c.MaxTokens},
	}, nil
}

// LangGraphConfig is an agent of kind langgraph: an assistant of a
// LangGraph Platform deployment. The API key (sent as X-Api-Key) comes
// from the environment or a file.
type LangGraphConfig struct {
	URL        string   `json:"url"`
	Assistant  string   `json:"assistant"`
	APIKeyEnv  string   `json:"apiKeyEnv,omitempty"`
	APIKeyFile string   `json:"apiKeyFile,omitempty"`
	Timeout    Duration `json:"timeout,omitempty"`
	// Wait runs with /runs/wait (nothing streamed) instead of
	// /runs/stream.
	Wait bool `json:"wait,omitempty"`
}

// langGraphDefinition builds an agent of kind langgraph.
func (p *process) langGraphDefinition(a AgentConfig, o langGraphOptions) (workers.Definition, error) {
	c := o.LangGraph
	if c == nil || c.URL == "" || c.Assistant == "" {
		return workers.Definition{}, errors.New(`a langgraph agent needs "langgraph": {"url": ..., "assistant": ...}`)
	}
	pol, err := p.outboundURL("langgraph url", c.URL)
	if err != nil {
		return workers.Definition{}, err
	}
	key, err := secret("apiKey", "", c.APIKeyEnv, c.APIKeyFile, os.LookupEnv)
	if err != nil {
		return workers.Definition{}, err
	}
	header := func() (http.Header, error) {
		if key == nil {
			return nil, nil
		}
		k, err := key()
		if err != nil || k == "" {
			return nil, err
		}
		return http.Header{"X-Api-Key": {k}}, nil
	}
	desc := fmt.Sprintf("The LangGraph assistant %s: each task is a thread; its answer streams back as it is written, and an interrupt asks for input.", c.Assistant)
	return workers.Definition{
		Name: a.Name,
		Card: schemas.AgentCard{Name: a.Name, Description: desc, Version: "1.0.0",
			Capabilities: schemas.AgentCapabilities{Streaming: schemas.Bool(true)},
			Skills:       []schemas.AgentSkill{{ID: c.Assistant, Name: c.Assistant, Description: desc, Tags: []string{"langgraph"}}}},
		Agent: workers.LangGraph{URL: c.URL, Assistant: c.Assistant, Header: header, HTTP: pol.Client(0), Timeout: time.Duration(c.Timeout), Wait: c.Wait},
	}, nil
}

// outboundURL checks a URL an agent is configured to reach (what names
// it, e.g. "llm baseUrl"): an absolute http(s) URL the outbound policy
// lets this process reach. It returns that policy, whose client is the
// one to reach it with; errors show the URL redacted.
func (p *process) outboundURL(what, raw string) (discovery.Policy, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return discovery.Policy{}, fmt.Errorf("%s %q is not an http(s) URL", what, discovery.RedactURL(raw))
	}
	pol, err := p.outboundPolicy()
	if err != nil {
		return discovery.Policy{}, err
	}
	if err := pol.CheckURL(u); err != nil {
		return discovery.Policy{}, fmt.Errorf("%s %s: %w (see \"outbound\" in the config)", what, discovery.RedactURL(raw), err)
	}
	return pol, nil
}

// headerOf is a configured header map as request headers.
func headerOf(m map[string]string) http.Header {
	h := http.Header{}
	for k, v := range m {
		h.Set(k, v)
	}
	return h
}

// llmOptions are an llm agent's options: LLM is its chat-completions
// endpoint (see LLMConfig).
type llmOptions struct {
	LLM *LLMConfig `json:"llm,omitempty"`
}

var llmKind = kind(nil, (*process).llmDefinition)

// langGraphOptions are a langgraph agent's options: LangGraph is its
// deployment (see LangGraphConfig).
type langGraphOptions struct {
	LangGraph *LangGraphConfig `json:"langgraph,omitempty"`
}

var langGraphKind = kind(nil, (*process).langGraphDefinition)
