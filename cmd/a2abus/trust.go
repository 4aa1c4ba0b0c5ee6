package main

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/a2abus/a2abus/edge"
)

// TrustConfig is the edge's trust policy as the config file writes it
// (edge.TrustPolicy says what each part means):
//
//	"trust": {
//	  "trustedProxies": ["10.0.0.5"],
//	  "rules": [{"level": "untrusted", "sources": ["203.0.113.0/24"]},
//	            {"level": "local", "principals": ["cert:ops"]}],
//	  "levels": {"public": {"agents": ["echo"]}, "partner": {"audit": true}}
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
// only the agents listed; and whether its calls are audited. Audit
// unset (absent from the file) keeps the level's default: public is
// audited, every other level is not; true or false says so for the
// level, public included.
type TrustLevelConfig struct {
	Refuse bool     `json:"refuse,omitempty"`
	Agents []string `json:"agents,omitempty"`
	Audit  *bool    `json:"audit,omitempty"`
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
	for name, l := range c.Levels {
		if !trustLevelName.MatchString(name) {
			errs = append(errs, fmt.Errorf("trust.levels: %q is not a level name (lower-case letters, digits, - and _, starting with a letter)", name))
		}
		if p.Levels == nil {
			p.Levels = map[string]edge.TrustLevel{}
		}
		audit := name == edge.TrustPublic
		if l.Audit != nil {
			audit = *l.Audit
		}
		p.Levels[name] = edge.TrustLevel{Refuse: l.Refuse, Agents: l.Agents, Audit: audit}
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
