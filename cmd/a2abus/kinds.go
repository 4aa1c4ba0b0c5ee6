package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/a2abus/a2abus/workers"
)

// The built-in kinds of agent. Each kind declares, beside its agent (the
// in-process ones below, the others in their own files), the options it
// reads from an agent's object in the config file (a struct:
// the fields besides name, kind, concurrency and extendedSkills; any other
// field is an error), how they are checked when the config is read, and
// how a process builds the agent. Adding a kind is its declaration and its
// line in agentKinds.

// agentKind is one built-in kind: check reads and checks an agent's
// options (when the config is read, so a mistake stops the process at
// once), build makes the agent in a process.
type agentKind struct {
	check func(a AgentConfig) error
	build func(p *process, a AgentConfig) (workers.Definition, error)
}

// agentKinds are the built-in kinds by the name a config gives them.
var agentKinds = map[string]agentKind{
	"echo":      echoKind,
	"tck":       tckKind,
	"exec":      execKind,
	"remote":    remoteKind,
	"fanout":    fanoutKind,
	"router":    routerKind,
	"mcp":       mcpKind,
	"llm":       llmKind,
	"langgraph": langGraphKind,
}

// kind declares a kind whose options are O: check (nil: none) runs on
// them when the config is read, build makes the agent.
func kind[O any](check func(o *O) error, build func(p *process, a AgentConfig, o O) (workers.Definition, error)) agentKind {
	return agentKind{
		check: func(a AgentConfig) error {
			o, err := optionsOf[O](a)
			if err == nil && check != nil {
				err = check(&o)
			}
			return err
		},
		build: func(p *process, a AgentConfig) (workers.Definition, error) {
			o, err := optionsOf[O](a)
			if err != nil {
				return workers.Definition{}, err
			}
			return build(p, a, o)
		},
	}
}

// commonFields are AgentConfig's own fields, which no kind's options hold.
var commonFields = []string{"name", "kind", "concurrency", "extendedSkills"}

// optionsOf reads an agent's options as its kind's O: every field of its
// object but the common ones, none of them unknown to O.
func optionsOf[O any](a AgentConfig) (O, error) {
	var o O
	if len(a.options) == 0 {
		return o, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(a.options, &fields); err != nil {
		return o, err
	}
	for k := range fields {
		if slices.ContainsFunc(commonFields, func(c string) bool { return strings.EqualFold(c, k) }) {
			delete(fields, k)
		}
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return o, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return o, fmt.Errorf("%s %s agent's options: %w", article(a.Kind), a.Kind, err)
	}
	return o, nil
}

// article is "an" before a kind spelled with a vowel first, else "a".
func article(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an"
	}
	return "a"
}

func unknownKind(a AgentConfig) error {
	return fmt.Errorf("agent %q: unknown kind %q (built-in kinds: %s)", a.Name, a.Kind, strings.Join(slices.Sorted(maps.Keys(agentKinds)), ", "))
}

// definitions builds the agents of the configuration.
func (p *process) definitions() ([]workers.Definition, error) {
	var defs []workers.Definition
	for _, a := range p.cfg.Agents {
		k, ok := agentKinds[a.Kind]
		if !ok {
			return nil, unknownKind(a)
		}
		def, err := k.build(p, a)
		if err != nil {
			return nil, fmt.Errorf("agent %q: %w", a.Name, err)
		}
		defs = append(defs, def)
	}
	return defs, nil
}

// The kinds that run in the process, needing nothing outside it.

// echoOptions: Delay makes an echo agent wait this long before answering,
// a stand-in for a model call in load runs ("50ms").
type echoOptions struct {
	Delay Duration `json:"delay,omitempty"`
}

var echoKind = kind(nil, func(_ *process, a AgentConfig, o echoOptions) (workers.Definition, error) {
	def := workers.EchoDefinition(a.Name)
	def.Agent = workers.Echo{Delay: time.Duration(o.Delay)}
	return def, nil
})

var tckKind = kind(nil, func(_ *process, a AgentConfig, _ struct{}) (workers.Definition, error) {
	return workers.TCKDefinition(a.Name), nil
})

// execOptions: Exec configures an exec agent (command, args, env, dir,
// timeout).
type execOptions struct {
	Exec *workers.ExecConfig `json:"exec,omitempty"`
}

var execKind = kind(func(o *execOptions) error {
	if o.Exec == nil {
		return fmt.Errorf(`an exec agent needs "exec": {"command": ...} in the config file`)
	}
	return nil
}, func(_ *process, a AgentConfig, o execOptions) (workers.Definition, error) {
	cfg := *o.Exec
	cfg.BaseEnv = os.Environ()
	return workers.ExecDefinition(a.Name, cfg)
})
