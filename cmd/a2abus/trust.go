package main

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
)

// TrustConfig is the edge's trust policy as the config file writes it
// (edge.TrustPolicy says what each part means):
//
//	"trust": {
//	  "trustedProxies": ["10.0.0.5"],
//	  "rules": [{"level": "untrusted", "sources": ["203.0.113.0/24"]},
//	            {"level": "local", "principals": ["cert:ops"]}],
//	  "levels": {"public": {"agents": ["echo"], "skills": ["echo"],
//	                        "limits": {"rate": 5, "burst": 10, "maxUnfinishedTasks": 20}}}
//	}
type TrustConfig struct {
	Rules          []TrustRuleConfig           `json:"rules,omitempty"`
	TrustedProxies []string                    `json:"trustedProxies,omitempty"`
	Levels         map[string]TrustLevelConfig `json:"levels,omitempty"`
}

// TrustRuleConfig is one rule: Level for a call matching every list it
// sets (sources: CIDR prefixes or addresses; principals as the edge names
// them: an API key's, jwt:ISSUER#SUB, cert:NAME; tenants).
type TrustRuleConfig struct {
	Level      string   `json:"level"`
	Sources    []string `json:"sources,omitempty"`
	Principals []string `json:"principals,omitempty"`
	Tenants    []string `json:"tenants,omitempty"`
}

// TrustLevelConfig is what one level may do: refuse every call, or call
// only the agents and skills listed, within its limits.
type TrustLevelConfig struct {
	Refuse bool               `json:"refuse,omitempty"`
	Agents []string           `json:"agents,omitempty"`
	Skills []string           `json:"skills,omitempty"`
	Limits *TrustLimitsConfig `json:"limits,omitempty"`
}

// TrustLimitsConfig is a level's limits (edge.LevelLimits): an absent or
// zero field keeps the edge's (--rate-limit, --rate-burst,
// --max-unfinished, --max-unfinished-bytes, --max-body-bytes,
// --max-streams); -1 lifts the rate or an unfinished-task bound at the
// level; maxBodyBytes and maxStreams only lower the edge's.
type TrustLimitsConfig struct {
	Rate               float64 `json:"rate,omitempty"`
	Burst              int     `json:"burst,omitempty"`
	MaxUnfinishedTasks int     `json:"maxUnfinishedTasks,omitempty"`
	MaxUnfinishedBytes int64   `json:"maxUnfinishedBytes,omitempty"`
	MaxBodyBytes       int64   `json:"maxBodyBytes,omitempty"`
	MaxStreams         int     `json:"maxStreams,omitempty"`
}

// limits is the level's edge.LevelLimits, or what is wrong with them,
// saying where.
func (l *TrustLimitsConfig) limits(where string) (edge.LevelLimits, []error) {
	if l == nil {
		return edge.LevelLimits{}, nil
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: "+format, append([]any{where, field}, args...)...))
	}
	if l.Rate < 0 && l.Rate != -1 {
		bad("rate", "%g is not a rate: requests a second above 0, or -1 for no rate limit at this level", l.Rate)
	}
	switch {
	case l.Burst < 0:
		bad("burst", "%d is not a burst: requests at once, at least 1", l.Burst)
	case l.Burst > 0 && l.Rate <= 0:
		bad("burst", "a burst goes with a rate: set rate too (the level's rate and burst replace the edge's together)")
	}
	if l.MaxUnfinishedTasks < -1 {
		bad("maxUnfinishedTasks", "%d is not a bound: tasks above 0, or -1 for none at this level", l.MaxUnfinishedTasks)
	}
	if l.MaxUnfinishedBytes < -1 {
		bad("maxUnfinishedBytes", "%d is not a bound: bytes above 0, or -1 for none at this level", l.MaxUnfinishedBytes)
	}
	if l.MaxBodyBytes < 0 {
		bad("maxBodyBytes", "%d is not a bound: bytes above 0 (it can only lower the edge's --max-body-bytes)", l.MaxBodyBytes)
	}
	if l.MaxStreams < 0 {
		bad("maxStreams", "%d is not a bound: streams above 0 that one caller of the level may hold open", l.MaxStreams)
	}
	return edge.LevelLimits{Rate: l.Rate, Burst: l.Burst, MaxUnfinished: l.MaxUnfinishedTasks, MaxUnfinishedBytes: l.MaxUnfinishedBytes,
		MaxBodyBytes: l.MaxBodyBytes, MaxStreams: l.MaxStreams}, errs
}

var trustLevelName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// policy is the edge's TrustPolicy of c, or what is wrong with it, saying
// where.
func (c TrustConfig) policy() (edge.TrustPolicy, error) {
	var p edge.TrustPolicy
	var errs []error
	var err error
	if p.TrustedProxies, err = addrPrefixes(c.TrustedProxies, "trust.trustedProxies"); err != nil {
		errs = append(errs, err)
	}
	for i, r := range c.Rules {
		where := fmt.Sprintf("trust.rules[%d]", i)
		if !trustLevelName.MatchString(r.Level) {
			errs = append(errs, fmt.Errorf("%s: level %q is not a level name (lower-case letters, digits, - and _, starting with a letter)", where, r.Level))
		}
		src, err := addrPrefixes(r.Sources, where+".sources")
		if err != nil {
			errs = append(errs, err)
		}
		for _, pr := range r.Principals {
			if strings.TrimSpace(pr) == "" {
				errs = append(errs, fmt.Errorf("%s.principals: an empty principal name", where))
			}
		}
		p.Rules = append(p.Rules, edge.TrustRule{Level: r.Level, Sources: src, Principals: r.Principals, Tenants: r.Tenants})
	}
	for _, name := range slices.Sorted(maps.Keys(c.Levels)) {
		l := c.Levels[name]
		where := "trust.levels." + name
		if !trustLevelName.MatchString(name) {
			errs = append(errs, fmt.Errorf("trust.levels: %q is not a level name (lower-case letters, digits, - and _, starting with a letter)", name))
		}
		for _, a := range l.Agents {
			if !schemas.ValidAgentName(a) {
				errs = append(errs, fmt.Errorf("%s.agents: %q is not an agent name", where, a))
			}
		}
		for _, sk := range l.Skills {
			if strings.TrimSpace(sk) == "" {
				errs = append(errs, fmt.Errorf("%s.skills: an empty skill id (skills are named by their id on the agent's card)", where))
			}
		}
		limits, lerrs := l.Limits.limits(where + ".limits")
		errs = append(errs, lerrs...)
		if p.Levels == nil {
			p.Levels = map[string]edge.TrustLevel{}
		}
		p.Levels[name] = edge.TrustLevel{Refuse: l.Refuse, Agents: l.Agents, Skills: l.Skills, Limits: limits}
	}
	return p, errors.Join(errs...)
}

// addrPrefixes reads CIDR prefixes, a bare address as its own /32 or
// /128.
func addrPrefixes(in []string, where string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range in {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is neither an address nor a CIDR prefix", where, s)
		}
		out = append(out, pfx.Masked())
	}
	return out, nil
}
