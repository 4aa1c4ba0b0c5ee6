package main

import (
	"net/netip"
	"strings"
	"testing"
)

// The config file's trust section becomes the edge's policy: addresses
// as their own prefix, levels by name; what is wrong is refused at start
// with where it is.
func TestTrustConfigBecomesThePolicy(t *testing.T) {
	p, err := TrustConfig{
		TrustedProxies: []string{"10.0.0.5", "192.168.0.0/16"},
		Rules:          []TrustRuleConfig{{Level: "untrusted", Sources: []string{"203.0.113.0/24"}}, {Level: "local", Principals: []string{"cert:ops"}}},
		Levels:         map[string]TrustLevelConfig{"public": {Agents: []string{"echo"}}},
	}.policy()
	if err != nil {
		t.Fatal(err)
	}
	if p.TrustedProxies[0] != netip.MustParsePrefix("10.0.0.5/32") || p.Rules[0].Sources[0] != netip.MustParsePrefix("203.0.113.0/24") ||
		p.Rules[1].Principals[0] != "cert:ops" || p.Levels["public"].Agents[0] != "echo" {
		t.Fatalf("policy: %+v", p)
	}
	_, err = TrustConfig{
		TrustedProxies: []string{"proxy.example"},
		Rules:          []TrustRuleConfig{{Level: "Public!", Sources: []string{"10.0.0.0/33"}}, {Level: "x", Principals: []string{" "}}},
	}.policy()
	for _, want := range []string{`trust.trustedProxies: "proxy.example" is neither an address nor a CIDR prefix`,
		`trust.rules[0]: level "Public!" is not a level name`, `trust.rules[0].sources: "10.0.0.0/33"`, `trust.rules[1].principals: an empty principal name`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}
