package main

import (
	"encoding/json"
	"flag"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// A budgets section that cannot be read says which rule and why.
func TestBudgetConfigErrorsSayWhere(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a2abus.json")
	writeFile(t, file, `{"budgets":[
		{"principal":"alice","period":"1h","tasks":10},
		{"principal":"bob","tenant":"acme","period":"1h","tasks":1},
		{"tenant":"*","period":"1500ms","tasks":1},
		{"principal":"*","period":"24h"},
		{"period":"1h","tasks":1},
		{"principal":"alice","period":"1h","tokens":5}]}`)
	fs := flag.NewFlagSet("a2abus serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	_, err := loadConfig(fs, []string{"--config", file}, func(string) string { return "" })
	if err == nil {
		t.Fatal("bad budgets accepted")
	}
	for _, want := range []string{
		"budgets[1]: name a principal or a tenant, not both",
		"budgets[2]: period 1.5s is not a whole number of seconds",
		"budgets[3]: give a positive tasks or tokens limit",
		`budgets[4]: name a principal or a tenant ("*" for every one)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "budgets[0]") {
		t.Errorf("a good rule blamed:\n%v", err)
	}

	// Two rules that would share a counter are refused once the rest
	// reads.
	writeFile(t, file, `{"budgets":[{"principal":"alice","period":"1h","tasks":10},{"principal":"alice","period":"1h","tokens":5}]}`)
	fs = flag.NewFlagSet("a2abus serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := loadConfig(fs, []string{"--config", file}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "rules 0 and 1") {
		t.Fatalf("two rules for alice's hour: %v", err)
	}
}

// serve with a budget: the third task of a principal's hour is refused
// by "a2abus send" with what is left and when it resets, and "a2abus
// budget" prints the budget as a table and as JSON.
func TestBudgetCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const key = "a-key-of-alice-0123456789"
	dir := t.TempDir()
	cfg := filepath.Join(dir, "a2abus.json")
	writeFile(t, cfg, `{"budgets":[{"principal":"*","period":"1h","tasks":2},{"tenant":"*","period":"24h","tokens":1000}]}`)
	addr := freeAddr(t)
	p := startProcEnv(t, []string{"A2ABUS_API_KEYS=" + key + "=alice"},
		"serve", "--listen", addr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", "off", "--config", cfg)
	base := "http://" + addr
	waitReady(t, p, base)
	for range 2 {
		mustCLI(t, "send", base, "hi", "--api-key", key)
	}
	_, _, err := cli(t, "send", base, "one too many", "--api-key", key)
	wantCLIError(t, err, "the tasks budget of principal \"alice\" is spent")
	if !strings.Contains(err.Error(), "0 left; it resets at ") {
		t.Fatalf("refusal: %v", err)
	}

	out := mustCLI(t, "budget", base, "--api-key", key)
	if !strings.HasPrefix(out, "budgets of principal alice\n") {
		t.Fatalf("budget table:\n%s", out)
	}
	reset := time.Now().UTC().Truncate(time.Hour).Add(time.Hour).Format(time.RFC3339)
	row := regexp.MustCompile(`(?m)^principal +alice +tasks +1h +2 +2 +0 +(\S+) \(in \S+\)$`).FindStringSubmatch(out)
	if row == nil || (row[1] != reset && row[1] != time.Now().UTC().Truncate(time.Hour).Format(time.RFC3339)) {
		t.Fatalf("no row of alice's tasks budget resetting at %s:\n%s", reset, out)
	}
	if !regexp.MustCompile(`(?m)^tenant +\(default tenant\) +tokens +24h +1000 +0 +1000 `).MatchString(out) {
		t.Fatalf("no row of the default tenant's tokens budget:\n%s", out)
	}

	raw := mustCLI(t, "budget", base, "--api-key", key, "--json")
	var l schemas.BudgetList
	if err := json.Unmarshal([]byte(raw), &l); err != nil || l.Principal != "alice" || len(l.Budgets) != 2 || l.Budgets[0].Used != 2 || l.Budgets[0].Left != 0 {
		t.Fatalf("budget --json: %v\n%s", err, raw)
	}
	_, _, err = cli(t, "budget", base, "--api-key", key, "--principal", "bob")
	wantCLIError(t, err, "403 only an admin principal may read another principal's budgets")
}
