package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
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

	// A level's skills and limits, as the config file writes them.
	var tc TrustConfig
	if err := json.Unmarshal([]byte(`{"levels": {"public": {"agents": ["echo"], "skills": ["echo", "summarize"],
	  "limits": {"rate": 2.5, "burst": 4, "maxUnfinishedTasks": 3, "maxUnfinishedBytes": 65536, "maxBodyBytes": 4096, "maxStreams": 2}},
	  "local": {"limits": {"rate": -1, "maxUnfinishedTasks": -1}}}}`), &tc); err != nil {
		t.Fatal(err)
	}
	if p, err = tc.policy(); err != nil {
		t.Fatal(err)
	}
	if got, want := p.Levels["public"], (edge.TrustLevel{Agents: []string{"echo"}, Skills: []string{"echo", "summarize"},
		Limits: edge.LevelLimits{Rate: 2.5, Burst: 4, MaxUnfinished: 3, MaxUnfinishedBytes: 65536, MaxBodyBytes: 4096, MaxStreams: 2}}); !reflect.DeepEqual(got, want) {
		t.Errorf("the public level: %+v, want %+v", got, want)
	}
	if got := p.Levels["local"].Limits; got != (edge.LevelLimits{Rate: -1, MaxUnfinished: -1}) {
		t.Errorf("the local level's limits: %+v", got)
	}

	_, err = TrustConfig{
		TrustedProxies: []string{"proxy.example"},
		Rules:          []TrustRuleConfig{{Level: "Public!", Sources: []string{"10.0.0.0/33"}}, {Level: "x", Principals: []string{" "}}},
		Levels: map[string]TrustLevelConfig{
			"public":  {Agents: []string{"no/agent"}, Skills: []string{""}, Limits: &TrustLimitsConfig{Rate: -2, MaxBodyBytes: -1, MaxStreams: -3, MaxUnfinishedTasks: -5}},
			"partner": {Limits: &TrustLimitsConfig{Burst: 3, MaxUnfinishedBytes: -9}},
		},
	}.policy()
	for _, want := range []string{`trust.trustedProxies: "proxy.example" is neither an address nor a CIDR prefix`,
		`trust.rules[0]: level "Public!" is not a level name`, `trust.rules[0].sources: "10.0.0.0/33"`, `trust.rules[1].principals: an empty principal name`,
		`trust.levels.public.agents: "no/agent" is not an agent name`, `trust.levels.public.skills: an empty skill id`,
		`trust.levels.public.limits.rate: -2 is not a rate`, `trust.levels.public.limits.maxBodyBytes: -1 is not a bound`,
		`trust.levels.public.limits.maxStreams: -3 is not a bound`, `trust.levels.public.limits.maxUnfinishedTasks: -5 is not a bound`,
		`trust.levels.partner.limits.burst: a burst goes with a rate`, `trust.levels.partner.limits.maxUnfinishedBytes: -9 is not a bound`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

// A trust rule naming a client certificate's identity, in the config
// file of a serve process with mutual TLS: the certificate's calls get
// that rule's level, whose agent list keeps them from the others.
func TestTrustLevelFromTheClientCertificate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	certs := bustest.TLS(t)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, string(b))
		return p
	}
	cfg := write("a2abus.json", []byte(`{"agents": [{"name": "echo"}, {"name": "tck"}],
  "trust": {"rules": [{"level": "partner", "principals": ["cert:a2abus test node"]}],
            "levels": {"partner": {"agents": ["tck"]}}}}`))
	httpAddr := freeAddr(t)
	p := startProc(t, "serve", "--listen", httpAddr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", "off", "--config", cfg,
		"--tls-cert", write("cert.pem", certs.Cert), "--tls-key", write("key.pem", certs.Key), "--tls-client-ca", write("ca.pem", certs.CA))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certs.CA)
	pair, err := tls.X509KeyPair(certs.Cert, certs.Key)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}}}
	base := "https://" + httpAddr
	waitReadyOver(t, p, client, base)
	post := func(agent string) string {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"` + schemas.NewID() + `","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`
		resp, err := client.Post(base+"/agents/"+agent, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if b := post("echo"); !strings.Contains(b, "-31403") || !strings.Contains(b, `trust level \"partner\" may not call agent \"echo\"`) {
		t.Errorf("the partner's certificate calling echo: %s", b)
	}
	if b := post("tck"); strings.Contains(b, `"error"`) {
		t.Errorf("the partner's certificate calling tck: %s", b)
	}
}
