package main

import (
	"flag"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// composeServices reads the command of every service in compose.yaml. The
// file is ours and simple (one flow-style list per command), so a small
// reader keeps a YAML library out of the module.
func composeServices(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svc := regexp.MustCompile(`^  ([a-z0-9-]+):\s*$`)
	out := map[string][]string{}
	inServices, cur := false, ""
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case l == "services:":
			inServices = true
		case inServices && len(l) > 0 && l[0] != ' ' && l[0] != '#':
			inServices = false
		case inServices && svc.MatchString(l):
			cur = svc.FindStringSubmatch(l)[1]
		case inServices && cur != "" && strings.HasPrefix(strings.TrimSpace(l), "command: ["):
			list := strings.TrimPrefix(strings.TrimSpace(l), "command: [")
			for !strings.Contains(list, "]") && i+1 < len(lines) {
				i++
				list += " " + strings.TrimSpace(lines[i])
			}
			list = list[:strings.Index(list, "]")]
			out[cur] = splitFlow(list)
		}
	}
	return out
}

// splitFlow splits the items of a flow-style list, honouring double quotes
// (a quoted item may hold commas).
func splitFlow(list string) []string {
	var out []string
	var item strings.Builder
	quoted := false
	for _, r := range list + "," {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ',' && !quoted:
			out = append(out, strings.TrimSpace(item.String()))
			item.Reset()
		default:
			item.WriteRune(r)
		}
	}
	return out
}

// compose.yaml is the topology TestClusterTopologySurvivesNodeLoss runs:
// three clustered nodes with the same flags, two edges, worker groups for
// echo and tck, R3 and the node list in the shared environment; and every
// flag it passes is one the binary accepts. (Docker is not available where
// CI runs, so this is what keeps the file honest.)
func TestComposeMatchesProcessTopology(t *testing.T) {
	b, err := os.ReadFile("../../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`NATS_URL: nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222`, `A2ABUS_REPLICAS: "3"`, `dockerfile: cmd/a2abus/Dockerfile`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("compose.yaml lacks %s", want)
		}
	}
	services := composeServices(t)
	var nodes, edges, workerAgents []string
	for name, args := range services {
		if len(args) == 0 {
			t.Fatalf("%s: empty command", name)
		}
		// Every command parses with the binary's own flags.
		fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if _, err := loadConfig(fs, args[1:], func(string) string { return "" }); err != nil {
			t.Errorf("%s: a2abus %s: %v", name, strings.Join(args, " "), err)
		}
		flags := map[string]string{}
		for i := 1; i+1 < len(args); i += 2 {
			flags[strings.TrimLeft(args[i], "-")] = args[i+1]
		}
		switch args[0] {
		case "node":
			nodes = append(nodes, name)
			for _, f := range []string{"server-name", "data-dir", "nats-listen", "cluster-name", "cluster-listen", "routes"} {
				if flags[f] == "" {
					t.Errorf("%s: node without --%s (the process test sets it)", name, f)
				}
			}
			if n := len(strings.Split(flags["routes"], ",")); n != 3 {
				t.Errorf("%s: %d routes, want 3", name, n)
			}
		case "edge":
			edges = append(edges, name)
			if flags["default-agent"] != "echo" || flags["listen"] == "" || flags["public-url"] == "" {
				t.Errorf("%s: edge flags %v differ from the process test's", name, flags)
			}
		case "worker":
			workerAgents = append(workerAgents, flags["agent"])
		default:
			t.Errorf("%s: unexpected command %q", name, args[0])
		}
	}
	slices.Sort(workerAgents)
	if len(nodes) != 3 || len(edges) != 2 || !slices.Equal(workerAgents, []string{"echo", "tck"}) {
		t.Fatalf("topology: nodes %v, edges %v, worker agents %v; want 3 nodes, 2 edges, echo and tck workers", nodes, edges, workerAgents)
	}
}
