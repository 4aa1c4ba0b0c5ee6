package main

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// An agent's options are read by its kind when the config is read: a
// kind's own options are taken, an option of another kind (or a typo) is
// refused naming it, a kind's check refuses what it cannot run, and an
// unknown kind lists the kinds there are.
func TestAgentKindsReadTheirOwnOptions(t *testing.T) {
	dir := t.TempDir()
	load := func(cfg string) (Config, error) {
		return loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), []string{"--config", writeTemp(t, dir, cfg)}, func(string) string { return "" })
	}
	cfg, err := load(`{"agents":[{"name":"slow","kind":"echo","delay":"50ms","concurrency":4},{"name":"fan","kind":"fanout","targets":["slow"],"mode":"partial"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	echo, err := optionsOf[echoOptions](cfg.Agents[0])
	if err != nil || time.Duration(echo.Delay) != 50*time.Millisecond || cfg.Agents[0].Concurrency != 4 {
		t.Fatalf("echo options %+v (%v), concurrency %d", echo, err, cfg.Agents[0].Concurrency)
	}
	fan, err := optionsOf[fanoutOptions](cfg.Agents[1])
	if err != nil || len(fan.Targets) != 1 || fan.Mode != "partial" {
		t.Fatalf("fanout options %+v (%v)", fan, err)
	}
	for cfg, want := range map[string]string{
		`{"agents":[{"name":"e","kind":"echo","targets":["x"]}]}`:                       `agent "e": an echo agent's options: json: unknown field "targets"`,
		`{"agents":[{"name":"e","kind":"echo","dellay":"1s"}]}`:                         `unknown field "dellay"`,
		`{"agents":[{"name":"x","kind":"exec"}]}`:                                       `an exec agent needs "exec"`,
		`{"agents":[{"name":"r","kind":"remote","auth":{"bearerToken":"s3cret-tok"}}]}`: `auth.bearerToken holds a secret in the config file`,
		`{"agents":[{"name":"n","kind":"nonesuch"}]}`:                                   `unknown kind "nonesuch" (built-in kinds: echo, exec, fanout, langgraph, llm, mcp, remote, router, tck)`,
	} {
		_, err := load(cfg)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", cfg, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the secret: %v", cfg, err)
		}
	}
}
