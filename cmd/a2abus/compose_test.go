package main

import (
	"debug/elf"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/bus"
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
// flag it passes is one the binary accepts. No NATS port is anonymous:
// one service makes the credentials ("a2abus credentials"), every node
// takes its users and route credentials from what it made, and every edge
// and worker presents its role's: the edges authenticate (API keys), so
// they present the edge-admin role's, which may change the agent registry
// their admins manage. (Docker is not available where CI runs,
// so this is what keeps the file honest.)
func TestComposeMatchesProcessTopology(t *testing.T) {
	b, err := os.ReadFile("../../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The edges listen on every address, so they must authenticate.
	for _, want := range []string{`NATS_URL: nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222`, `A2ABUS_REPLICAS: "3"`, `dockerfile: cmd/a2abus/Dockerfile`, `A2ABUS_API_KEYS: ${A2ABUS_API_KEYS:?`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("compose.yaml lacks %s", want)
		}
	}
	services := composeServices(t)
	var nodes, edges, workerAgents, makers []string
	// credsAt is where the services read what the credentials service
	// made: its directory as the others mount its volume.
	const credsAt = "/creds"
	creds := func(name, flag, path, file string) {
		t.Helper()
		if path != credsAt+"/"+file {
			t.Errorf("%s: --%s %q, want %s/%s (made by the credentials service)", name, flag, path, credsAt, file)
		}
	}
	for name, args := range services {
		if len(args) == 0 {
			t.Fatalf("%s: empty command", name)
		}
		flags := map[string]string{}
		for i := 1; i+1 < len(args); i += 2 {
			flags[strings.TrimLeft(args[i], "-")] = args[i+1]
		}
		if args[0] == "credentials" {
			makers = append(makers, name)
			if len(args) != 3 || flags["dir"] == "" {
				t.Errorf("%s: a2abus %s, want credentials --dir DIR", name, strings.Join(args, " "))
			}
			if !strings.Contains(string(b), name+":"+flags["dir"]+"]") || !strings.Contains(string(b), name+":"+credsAt+":ro]") {
				t.Errorf("%s: its volume is not mounted at %s (read-only) where the others read it", name, credsAt)
			}
			continue
		}
		// Every command parses with the binary's own flags.
		fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if _, err := loadConfig(fs, args[1:], func(string) string { return "" }); err != nil {
			t.Errorf("%s: a2abus %s: %v", name, strings.Join(args, " "), err)
		}
		switch args[0] {
		case "node":
			nodes = append(nodes, name)
			for _, f := range []string{"server-name", "data-dir", "nats-listen", "cluster-name", "cluster-listen", "routes", "nats-users", "cluster-creds"} {
				if flags[f] == "" {
					t.Errorf("%s: node without --%s (the process test sets it)", name, f)
				}
			}
			if n := len(strings.Split(flags["routes"], ",")); n != 3 {
				t.Errorf("%s: %d routes, want 3", name, n)
			}
			creds(name, "nats-users", flags["nats-users"], "users.json")
			creds(name, "cluster-creds", flags["cluster-creds"], "cluster")
		case "edge":
			edges = append(edges, name)
			if flags["default-agent"] != "echo" || flags["listen"] == "" || flags["public-url"] == "" {
				t.Errorf("%s: edge flags %v differ from the process test's", name, flags)
			}
			creds(name, "nats-creds", flags["nats-creds"], string(bus.RoleAdminEdge))
		case "worker":
			workerAgents = append(workerAgents, flags["agent"])
			creds(name, "nats-creds", flags["nats-creds"], string(bus.RoleWorker))
		default:
			t.Errorf("%s: unexpected command %q", name, args[0])
		}
	}
	slices.Sort(workerAgents)
	if len(nodes) != 3 || len(edges) != 2 || !slices.Equal(workerAgents, []string{"echo", "tck"}) || len(makers) != 1 {
		t.Fatalf("topology: nodes %v, edges %v, worker agents %v, credentials %v; want 3 nodes, 2 edges, echo and tck workers, one credentials service",
			nodes, edges, workerAgents, makers)
	}
}

// The image compose.yaml builds must hold one static binary: alpine has no
// glibc, so a binary that needs a dynamic loader would not start there.
// There is no Docker engine where the tests run, so this runs the build
// step of cmd/a2abus/Dockerfile itself (same environment and flags) and
// checks the ELF file: no interpreter and no dynamic section. That build
// shares nothing with the test binaries' (another CGO setting, -trimpath):
// a whole second compile, minutes from a cold cache, so the default test
// run leaves it to .ci/run, which sets A2ABUS_RELEASE_BUILD=1.
func TestDockerfileBuildsAStaticBinary(t *testing.T) {
	if testing.Short() || os.Getenv("A2ABUS_RELEASE_BUILD") == "" {
		t.Skip("builds the release binary: A2ABUS_RELEASE_BUILD=1 go test -run TestDockerfileBuildsAStaticBinary ./cmd/a2abus (.ci/run does)")
	}
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var step string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "RUN ") && strings.Contains(l, "go build") {
			step = strings.TrimPrefix(l, "RUN ")
		}
	}
	fields := shellWords(step)
	if len(fields) < 3 || fields[0] != "CGO_ENABLED=0" || fields[1] != "go" || fields[2] != "build" {
		t.Fatalf("Dockerfile build step %q is not `CGO_ENABLED=0 go build ...`", step)
	}
	out := filepath.Join(t.TempDir(), "a2abus")
	var args []string
	for i := 3; i < len(fields); i++ {
		switch {
		case fields[i] == "-o" && i+1 < len(fields):
			args = append(args, "-o", out)
			i++
		default:
			args = append(args, fields[i])
		}
	}
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", args, err, msg)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("the image's binary is dynamically linked (%v program header)", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("the image's binary needs shared libraries %v", libs)
	}
	// And it is the a2abus binary: it answers --help like the one tested.
	var help strings.Builder
	run := exec.Command(out, "serve", "--help")
	run.Stdout, run.Stderr = &help, &help
	_ = run.Run()
	if !strings.Contains(help.String(), "-nats-listen") {
		t.Fatalf("built binary's serve --help:\n%s", help.String())
	}
}

// shellWords splits a Dockerfile RUN line as sh would for the simple case it
// holds: words separated by spaces, double quotes grouping and removed.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
			}
			inWord = false
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}
