package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The dependency rules of DESIGN.md, enforced: schemas ← bus ← {edge,
// workers} ← cmd; only bus touches NATS and CloudEvents; edge and workers
// never import each other; the product uses no module beyond the four it
// allows.
func TestImportRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const mod = "github.com/a2abus/a2abus/"
	nats := []string{"github.com/nats-io/", "github.com/cloudevents/"}
	// Packages of the module: nothing may depend on these, even indirectly.
	rules := []struct {
		pkg    string
		forbid []string
	}{
		{"schemas", []string{mod + "bus", mod + "edge", mod + "workers", mod + "cmd"}},
		{"bus", []string{mod + "edge", mod + "workers", mod + "cmd"}},
		{"edge", []string{mod + "workers", mod + "cmd", mod + "discovery"}},
		{"workers", []string{mod + "edge", mod + "cmd", mod + "discovery"}},
	}
	for _, r := range rules {
		out, err := exec.Command("go", "list", "-deps", mod+r.pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", r.pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range r.forbid {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s depends on %s, which the design forbids", r.pkg, dep)
				}
			}
		}
	}
	// Only bus (and cmd, which wires it) imports NATS or CloudEvents.
	for _, pkg := range []string{"schemas", "edge", "workers"} {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, mod+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			for _, f := range nats {
				if strings.HasPrefix(imp, f) {
					t.Errorf("%s imports %s; only bus may", pkg, imp)
				}
			}
		}
	}
	// schemas: standard library and uuid only.
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", mod+"schemas").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if !strings.HasPrefix(dep, mod+"schemas") && dep != "github.com/google/uuid" {
			t.Errorf("schemas depends on %s", dep)
		}
	}
	// The product's direct requirements are the four allowed modules.
	out, err = exec.Command("go", "list", "-m", "-f", "{{if not .Indirect}}{{.Path}}{{end}}", "all").Output()
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{
		"github.com/a2abus/a2abus": true, "github.com/nats-io/nats.go": true, "github.com/nats-io/nats-server/v2": true,
		"github.com/cloudevents/sdk-go/v2": true, "github.com/google/uuid": true,
	}
	for _, m := range strings.Fields(string(out)) {
		if !allowed[m] {
			t.Errorf("go.mod requires %s directly; the product allows only nats.go, nats-server, sdk-go and uuid", m)
		}
	}
}
