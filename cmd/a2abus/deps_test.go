package main

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The dependency rules of ARCHITECTURE.md, enforced. It lives in cmd
// because cmd is the one package allowed to see every other.

// modPath is the module; rules name its packages relative to it.
const modPath = "github.com/a2abus/a2abus"

// layer is the rule of one package of the module.
type layer struct {
	// may lists the packages of the module it may depend on, directly or
	// through others. Everything else of the module is forbidden to it.
	may []string
	// tests lists what its tests may import beyond itself, may and (for a
	// package above bus) bus/bustest. Every entry is an allowance the
	// design makes for end-to-end tests; the reason is in the table.
	tests []string
	// natsInTests lets its tests import NATS or CloudEvents libraries.
	natsInTests bool
}

// layers holds a rule for every package of the module: schemas ← bus ←
// {edge, workers, discovery} ← cmd. TestImportRules fails for a package
// that has no rule here, so a new package must be given its place.
var layers = map[string]layer{
	// The vocabulary: below everything (and only stdlib and uuid, below).
	"schemas": {},
	// The only package that speaks NATS, JetStream and CloudEvents.
	"bus": {may: []string{"schemas", "bus/internal/testhooks", "bus/tracing"}},
	// Carries bus's test-only operations to bus/bustest: part of bus (see
	// allows), on the standard library alone. The go command lets only
	// packages under bus/ import it.
	"bus/internal/testhooks": {},
	// In-process JetStream for tests, and bus's test-only operations. It
	// imports testing, so no product package may depend on it: only tests
	// (see testMay).
	"bus/bustest": {may: []string{"bus", "schemas", "bus/internal/testhooks", "bus/tracing"}},
	// The spans' shared parts (bus/tracing): whether the process traces,
	// its tracer, the W3C trace context a2abus carries, its attribute
	// names. A leaf on the OpenTelemetry API alone, below every package
	// that makes spans.
	"bus/tracing": {},
	// Records the spans a test's process makes (the OpenTelemetry SDK in
	// memory). It imports testing: only tests may use it (see testMay).
	"bus/tracing/tracingtest": {may: []string{"bus/tracing"}},
	// Loopback ports for tests that bind them later (restarted members,
	// child processes); on the standard library only, so bus's own tests
	// may use it too.
	"bus/bustest/freeaddr": {},
	// edge, workers and discovery never import each other; cmd wires them.
	"edge": {
		may: []string{"schemas", "bus", "bus/tracing", "edge/auth", "edge/ui"},
		// End-to-end tests put real agents (echo, exec, fan-out) behind
		// the edge on an in-process bus, instead of fakes of the runtime;
		// the checks every binding must pass (authentication, isolation)
		// drive the gRPC binding too, served by the edge's door.
		tests: []string{"workers", "edge/grpcbinding", "edge/grpcbinding/a2apb"},
	},
	// Authentication of the edge's requests: a library the front door
	// calls. It knows nothing of the bus: credentials in, a principal out.
	// Its third-party code is the JOSE library and, for the canonical form
	// of the agent cards it signs and verifies, the JCS library (see
	// joseModules, jcsModules).
	"edge/auth": {may: []string{"schemas"}},
	// The dashboard's page, embedded: files, nothing of the module.
	"edge/ui": {},
	"workers": {
		may: []string{"schemas", "bus", "bus/tracing"},
		// The remote agent kind is tested end to end as cmd wires it: the
		// external agent is a real a2abus edge (with agents), reached
		// through the discovery client.
		tests: []string{"edge", "discovery"},
	},
	// discovery uses bus only for the card cache store (A2A_CARDS) and the
	// metrics registry, and edge/auth (a library that knows nothing of
	// the edge's server) for the JWKS verification of push notifications
	// a receiver needs, written once for tokens coming in either way (the
	// card signatures it checks come through its CardVerifier interface,
	// which cmd fills with edge/auth's). Its gRPC wire speaks the
	// lf.a2a.v1 messages generated once for both ends
	// (edge/grpcbinding/a2apb) through the conversions the server uses
	// (edge/grpcbinding/pbwire): two leaves that know nothing of the edge
	// (schemas and protobuf only), never the binding's server itself.
	"discovery": {
		may: []string{"schemas", "bus", "bus/tracing", "edge/auth", "edge/grpcbinding/a2apb", "edge/grpcbinding/pbwire"},
		// The client is tested against a real A2A server: an a2abus edge
		// with agents on an in-process bus, in every binding and version
		// (gRPC served by edge/grpcbinding).
		tests: []string{"edge", "workers", "edge/grpcbinding"},
	},
	// The MCP bridge: an A2A client of an edge (through discovery) that
	// serves its agents as MCP tools; the one package that imports the
	// official MCP Go SDK.
	"discovery/mcpbridge": {
		may: []string{"schemas", "bus", "bus/tracing", "edge/auth", "discovery", "edge/grpcbinding/a2apb", "edge/grpcbinding/pbwire"},
		// Tested against a real edge with agents, over the SDK's client.
		tests: []string{"edge", "workers"},
	},
	// The protobuf messages and gRPC service of A2A's lf.a2a.v1, generated
	// from the specification's a2a.proto (generate.sh): the gRPC and
	// protobuf runtime only, nothing of the module.
	"edge/grpcbinding/a2apb": {},
	// A2A's gRPC wire form for both ends, the binding's server and
	// discovery's gRPC wire: the schemas' types to lf.a2a.v1 messages and
	// back, errors to google.rpc.Status and back.
	"edge/grpcbinding/pbwire": {may: []string{"schemas", "edge/grpcbinding/a2apb"}},
	// The gRPC binding: an adapter of the edge's in-process door, which it
	// declares (Door) instead of importing the edge; only cmd wires them.
	"edge/grpcbinding": {
		may: []string{"schemas", "edge/grpcbinding/a2apb", "edge/grpcbinding/pbwire"},
		// Tested against a real edge with agents on an in-process bus.
		tests: []string{"edge", "edge/auth", "workers", "bus/bustest"},
	},
	"cmd/a2abus": {
		may: []string{"schemas", "bus", "bus/tracing", "edge", "edge/auth", "edge/ui", "workers", "discovery", "discovery/mcpbridge", "edge/grpcbinding", "edge/grpcbinding/a2apb", "edge/grpcbinding/pbwire"},
		// The cluster fault tests ask the NATS cluster which node leads a
		// stream, to kill that one.
		natsInTests: true,
	},
}

// allows reports whether the rule lets its package depend on d. bus's
// internal packages are part of bus: whatever may depend on bus depends
// on them through it, and cannot import them itself.
func (l layer) allows(d string) bool {
	return slices.Contains(l.may, d) || strings.HasPrefix(d, "bus/internal/") && slices.Contains(l.may, "bus")
}

// natsPrefixes are the libraries only bus (and bus/bustest) may import.
var natsPrefixes = []string{"github.com/nats-io/", "github.com/cloudevents/"}

// joseModules are the security libraries: JWS and JWK parsing and
// signature verification are not hand-rolled. Only edge/auth imports them,
// and it imports nothing else outside the standard library and the module.
var joseModules = []string{"github.com/go-jose/go-jose/v4"}

// jcsModules are RFC 8785 (JSON Canonicalization Scheme): the canonical
// form agent card signatures are made over (A2A §8.4), whose number and
// string serialisation is not hand-rolled. Only edge/auth, which signs
// and verifies cards, imports it.
var jcsModules = []string{"github.com/gowebpki/jcs"}

// oauth2Modules are the OAuth2 client library: the client credentials
// grant, token caching and refresh of remote agents are not hand-rolled
// either. Only discovery (the A2A client) imports it; the packages it
// imports need nothing outside the standard library.
var oauth2Modules = []string{"golang.org/x/oauth2"}

// mcpModules are the official MCP Go SDK: the MCP protocol (versions,
// sessions, stdio and Streamable HTTP) is not hand-written. Only
// discovery/mcpbridge imports it.
var mcpModules = []string{"github.com/modelcontextprotocol/go-sdk"}

// grpcModules are gRPC and protobuf: the gRPC binding's transport and
// messages, generated from the specification (not hand-written). Only
// grpcPackages import them; the bus contract and schemas stay JSON.
var grpcModules = []string{"google.golang.org/grpc", "google.golang.org/protobuf", "google.golang.org/genproto/googleapis/rpc"}

// grpcPackages are the packages that speak gRPC: the generated messages
// and service, their conversions for both ends, the binding's server and
// the A2A client's gRPC wire.
var grpcPackages = []string{"edge/grpcbinding/a2apb", "edge/grpcbinding/pbwire", "edge/grpcbinding", "discovery"}

// jsonModules are the JSON reader of the bus's hot paths: the prototype of
// the standard library's encoding/json/v2, read with encoding/json's
// semantics (bus/readjson.go says why). Only bus imports it; what clients
// send the edge is read by encoding/json.
var jsonModules = []string{"github.com/go-json-experiment/json"}

// otelAPIModules are the OpenTelemetry API (spans, attributes, the
// semantic conventions, propagation), which the packages that make spans
// import; otelSDKModules are the SDK and its OTLP exporters, which only
// cmd, where the process decides whether and where it exports, imports
// (tracing is off, and none of their code runs, unless it installs them).
var (
	otelAPIModules = []string{"go.opentelemetry.io/otel", "go.opentelemetry.io/otel/trace"}
	otelSDKModules = []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters"}
)

// promModules are the Prometheus client, its data model and exposition
// formats: the
// metrics registry, the Go runtime's and the process's collectors and
// content negotiation are not hand-written. Only bus imports them; every
// other package records through bus.Metrics (tests may parse what is
// served with expfmt).
var promModules = []string{"github.com/prometheus/client_golang", "github.com/prometheus/client_model", "github.com/prometheus/common"}

// allowedModules are the product's direct requirements: the modules the
// design allows, besides the module itself — the four the bus is built on,
// go-jose and jcs for edge/auth and x/oauth2 for discovery, because
// security code must not be hand-rolled, the JSON reader of the bus, the
// MCP SDK, gRPC with protobuf and the google.rpc error details for the
// gRPC binding, OpenTelemetry's API, SDK and OTLP trace exporters, and the
// Prometheus client for the metrics.
var allowedModules = slices.Concat([]string{
	"github.com/nats-io/nats.go", "github.com/nats-io/nats-server/v2",
	"github.com/cloudevents/sdk-go/v2", "github.com/google/uuid",
}, joseModules, jcsModules, oauth2Modules, jsonModules, mcpModules, grpcModules, otelAPIModules,
	[]string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp", "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc",
		// OTLP's messages, which the exporters send: cmd's tracing
		// test decodes them in its OTLP receiver.
		"go.opentelemetry.io/proto/otlp"},
	promModules)

// listedPackage is what go list -json says of one package.
type listedPackage struct {
	ImportPath   string
	Dir          string
	GoFiles      []string // its non-test files for this platform
	Deps         []string // every package it depends on, transitively
	Imports      []string
	TestImports  []string // of its _test.go files in the package
	XTestImports []string // of its _test.go files in package <name>_test
}

// standard reports whether an import path is of the standard library:
// its first element has no dot (the rule the go command applies).
func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// local returns path relative to the module, and whether it is in it.
func local(path string) (string, bool) {
	if path == modPath {
		return ".", true
	}
	rel, ok := strings.CutPrefix(path, modPath+"/")
	return rel, ok
}

func isNATS(path string) bool {
	return slices.ContainsFunc(natsPrefixes, func(p string) bool { return strings.HasPrefix(path, p) })
}

// inModules reports whether an import path is a package of one of mods.
func inModules(path string, mods []string) bool {
	return slices.ContainsFunc(mods, func(m string) bool { return path == m || strings.HasPrefix(path, m+"/") })
}

// listPackages lists every package of the module with one go list call.
func listPackages(t *testing.T) map[string]listedPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", modPath+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]listedPackage{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		for _, l := range [][]string{p.Deps, p.Imports, p.TestImports, p.XTestImports} {
			for i, path := range l {
				// A main package built with a profile (cmd/a2abus's
				// default.pgo) lists its dependencies as variants
				// built for it: "path [main path]".
				l[i], _, _ = strings.Cut(path, " [")
			}
		}
		rel, ok := local(p.ImportPath)
		if !ok {
			t.Fatalf("go list %s/... listed %s", modPath, p.ImportPath)
		}
		pkgs[rel] = p
	}
	return pkgs
}

// testMay is the set of packages of the module the tests of pkg may
// import: pkg itself (external tests), what pkg may depend on, bus/bustest
// for a package at or above bus, and the rule's end-to-end allowances.
func testMay(pkg string, l layer) map[string]bool {
	ok := map[string]bool{pkg: true}
	for _, p := range l.may {
		ok[p] = true
	}
	if pkg == "bus" || ok["bus"] {
		ok["bus/bustest"] = true
		ok["bus/bustest/freeaddr"] = true
	}
	if ok["bus/tracing"] {
		ok["bus/tracing/tracingtest"] = true
	}
	for _, p := range l.tests {
		ok[p] = true
	}
	return ok
}

func TestImportRules(t *testing.T) {
	pkgs := listPackages(t)

	// Every package has a rule, and every rule a package.
	for rel := range pkgs {
		if _, ok := layers[rel]; !ok {
			t.Errorf("package %s has no rule in layers: give it its place in the design (ARCHITECTURE.md) and here", rel)
		}
	}
	for rel := range layers {
		if _, ok := pkgs[rel]; !ok {
			t.Errorf("layers has a rule for %s, which is not a package of the module any more", rel)
		}
	}

	names := make([]string, 0, len(pkgs))
	for rel := range pkgs {
		names = append(names, rel)
	}
	sort.Strings(names)
	for _, rel := range names {
		p, l := pkgs[rel], layers[rel]

		// The product: only what the rule allows, even indirectly.
		for _, dep := range p.Deps {
			if d, ok := local(dep); ok && !l.allows(d) {
				t.Errorf("%s depends on %s, which the design forbids (it may depend on %v)", rel, d, l.may)
			}
		}
		// Only bus (and its test helper) imports NATS or CloudEvents.
		if rel != "bus" && rel != "bus/bustest" {
			for _, imp := range p.Imports {
				if isNATS(imp) {
					t.Errorf("%s imports %s; only bus may", rel, imp)
				}
			}
		}
		// Only discovery imports the OAuth2 library.
		if rel != "discovery" {
			for _, imp := range p.Imports {
				if inModules(imp, oauth2Modules) {
					t.Errorf("%s imports %s; only discovery may", rel, imp)
				}
			}
		}

		// Only the MCP bridge imports the MCP SDK.
		if rel != "discovery/mcpbridge" {
			for _, imp := range p.Imports {
				if inModules(imp, mcpModules) {
					t.Errorf("%s imports %s; only discovery/mcpbridge may", rel, imp)
				}
			}
		}

		// Only the gRPC packages import gRPC and protobuf.
		if !slices.Contains(grpcPackages, rel) {
			for _, imp := range p.Imports {
				if inModules(imp, grpcModules) {
					t.Errorf("%s imports %s; only %v may", rel, imp, grpcPackages)
				}
			}
		}

		// Only cmd imports the OpenTelemetry SDK and exporters (and the
		// tests' recorder, the SDK in memory).
		if rel != "cmd/a2abus" && rel != "bus/tracing/tracingtest" {
			for _, imp := range p.Imports {
				if inModules(imp, otelSDKModules) {
					t.Errorf("%s imports %s; only cmd/a2abus may", rel, imp)
				}
			}
		}

		// Only bus imports the Prometheus client.
		if rel != "bus" {
			for _, imp := range p.Imports {
				if inModules(imp, promModules) {
					t.Errorf("%s imports %s; only bus may (record through bus.Metrics)", rel, imp)
				}
			}
		}

		// Only bus imports the JSON reader.
		if rel != "bus" {
			for _, imp := range p.Imports {
				if inModules(imp, jsonModules) {
					t.Errorf("%s imports %s; only bus may", rel, imp)
				}
			}
		}

		// The tests: what the product may use, plus the allowances.
		ok := testMay(rel, l)
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			if d, in := local(imp); in && !ok[d] {
				t.Errorf("tests of %s import %s, which the design does not allow them", rel, d)
			}
			if isNATS(imp) && rel != "bus" && rel != "bus/bustest" && !l.natsInTests {
				t.Errorf("tests of %s import %s; they use bus/bustest, not NATS", rel, imp)
			}
		}
	}

	// schemas: the standard library and uuid only.
	for _, dep := range pkgs["schemas"].Deps {
		if !standard(dep) && dep != "github.com/google/uuid" {
			t.Errorf("schemas depends on %s; it may use the standard library and uuid only", dep)
		}
	}

	// The JOSE and JCS libraries: imported by edge/auth only, and never
	// below it (not by schemas or bus, even indirectly); edge/auth: the
	// standard library, the module (schemas, and with it uuid) and those
	// two, nothing else.
	authModules := slices.Concat(joseModules, jcsModules)
	for _, rel := range names {
		if rel == "edge/auth" {
			continue
		}
		for _, imp := range pkgs[rel].Imports {
			if inModules(imp, authModules) {
				t.Errorf("%s imports %s; only edge/auth may", rel, imp)
			}
		}
	}
	for _, rel := range []string{"schemas", "bus", "bus/bustest"} {
		for _, dep := range pkgs[rel].Deps {
			if inModules(dep, authModules) {
				t.Errorf("%s depends on %s; the JOSE and JCS libraries stay in edge/auth", rel, dep)
			}
		}
	}
	for _, dep := range pkgs["edge/auth"].Deps {
		if _, in := local(dep); !in && !standard(dep) && !inModules(dep, authModules) && dep != "github.com/google/uuid" {
			t.Errorf("edge/auth depends on %s; it may use the standard library, schemas (with uuid) and %v only", dep, authModules)
		}
	}

	// The product's direct requirements are the allowed modules.
	out, err := exec.Command("go", "mod", "edit", "-json").Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var gomod struct {
		Require []struct {
			Path     string
			Indirect bool
		}
	}
	if err := json.Unmarshal(out, &gomod); err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	for _, r := range gomod.Require {
		if !r.Indirect && !slices.Contains(allowedModules, r.Path) {
			t.Errorf("go.mod requires %s directly; the product allows only %v", r.Path, allowedModules)
		}
	}
}

// readsOutside are the functions of os that read the process's
// environment or files. cmd is the one package that calls them (and the
// one that parses flags): every other package is handed what it needs, so
// what a process reads is decided, and documented, in one place.
var readsOutside = map[string]bool{
	"Getenv": true, "LookupEnv": true, "Environ": true, "ExpandEnv": true,
	"ReadFile": true, "Open": true, "OpenFile": true, "ReadDir": true,
	"Stat": true, "Lstat": true, "DirFS": true, "Readlink": true,
}

// testSupport are packages only tests import (TestImportRules holds
// them to that), which may read what a test machine has.
var testSupport = map[string]bool{"bus/bustest": true, "bus/bustest/freeaddr": true}

// Only cmd reads the environment, files and flags: a call of os that
// reads them, or an import of flag, anywhere else of the product fails.
func TestOnlyCmdReadsTheEnvironmentAndFiles(t *testing.T) {
	checked := 0
	for rel, p := range listPackages(t) {
		if rel == "cmd/a2abus" || testSupport[rel] {
			continue
		}
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			osName := ""
			for _, imp := range f.Imports {
				switch strings.Trim(imp.Path.Value, `"`) {
				case "flag":
					t.Errorf("%s/%s imports flag: only cmd parses flags", rel, name)
				case "os":
					osName = "os"
					if imp.Name != nil {
						osName = imp.Name.Name
					}
				}
			}
			if osName == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == osName && readsOutside[sel.Sel.Name] {
					t.Errorf("%s/%s calls os.%s: only cmd reads the environment and files; hand the package what it needs", rel, name, sel.Sel.Name)
				}
				return true
			})
		}
	}
	if checked < 100 {
		t.Fatalf("only %d files checked", checked)
	}
}

// contractHeader matches a header name of a2abus's contracts (the bus's,
// A2A's, the MCP bridge's): "A2A-…", "A2abus-…", and their "X-" forms.
var contractHeader = regexp.MustCompile(`^"(X-)?(A2A|A2abus)-[A-Z][A-Za-z0-9-]*"$`)

// Every contract header name is declared once, in schemas/names.go: a
// string literal of one anywhere else of the product fails.
func TestHeaderNamesOnlyInNames(t *testing.T) {
	names := 0
	for rel, p := range listPackages(t) {
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING || !contractHeader.MatchString(lit.Value) {
					return true
				}
				if rel == "schemas" && name == "names.go" {
					names++
					return true
				}
				t.Errorf("%s/%s spells the header %s: use its constant in schemas/names.go", rel, name, lit.Value)
				return true
			})
		}
	}
	if names < 10 {
		t.Fatalf("schemas/names.go declares %d header names", names)
	}
}
