package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest/freeaddr"
	"github.com/a2abus/a2abus/schemas"
)

// The test binary doubles as the a2abus binary: with A2ABUS_TEST_MAIN=1 it
// runs main, so process tests start real a2abus processes without a
// separate build (and under the race detector when the tests use it).
func TestMain(m *testing.M) {
	if os.Getenv("A2ABUS_TEST_MCP_SERVER") == "1" && os.Getenv("A2ABUS_TEST_MAIN") != "1" {
		os.Exit(runTestMCPServer())
	}
	if os.Getenv("A2ABUS_TEST_MAIN") == "1" {
		os.Args = append([]string{"a2abus"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// proc is a running a2abus process.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, nil, args...)
}

// startProcEnv starts an a2abus process with extra environment entries.
func startProcEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startCmd(t, exec.Command(os.Args[0], args...), env, args)
}

// startProcFiles starts an a2abus process whose open-file limit (soft and
// hard) is nofile, through the shell's ulimit; exec keeps its pid.
func startProcFiles(t *testing.T, nofile int, args ...string) *proc {
	t.Helper()
	sh := exec.Command("sh", append([]string{"-c", `ulimit -n ` + strconv.Itoa(nofile) + ` && exec "$0" "$@"`, os.Args[0]}, args...)...)
	return startCmd(t, sh, nil, args)
}

// startCmd starts cmd, an a2abus process given args.
func startCmd(t *testing.T, cmd *exec.Cmd, env []string, args []string) *proc {
	t.Helper()
	cmd.Env = append(append(os.Environ(), "A2ABUS_TEST_MAIN=1"), env...)
	p := &proc{cmd: cmd, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p, p
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		// Each process connects to NATS with its role's credentials
		// (bus.Role); a refusal means the role lacks what its work needs.
		if strings.Contains(p.output(), "Permissions Violation") {
			t.Errorf("a2abus %s was refused by NATS for lack of permission", strings.Join(args, " "))
		}
		if t.Failed() {
			t.Logf("output of a2abus %s:\n%s", strings.Join(args, " "), p.output())
		}
	})
	return p
}

// stop sends SIGTERM and checks the process exits cleanly.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("a2abus exited with %v after SIGTERM:\n%s", err, p.output())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("a2abus did not exit after SIGTERM:\n%s", p.output())
	}
}

// freeAddr returns a loopback address no process listens on, for a child
// process told it by a flag; never the same one twice in a test binary
// (freeaddr says why not one of 127.0.0.1:0).
func freeAddr(t *testing.T) string { return freeaddr.Addr(t) }

// waitReady polls /readyz until the edge at base is ready, and then until
// the process's banner (written whole before it reports ready) has come
// through its output pipe.
func waitReady(t *testing.T, p *proc, base string) {
	t.Helper()
	waitOK(t, p, base+"/readyz", 60*time.Second)
	waitOutput(t, p, " ready\n", 10*time.Second)
}

// waitOK polls url until it answers 200, failing the test if p exits first
// or within passes.
func waitOK(t *testing.T, p *proc, url string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("a2abus exited early (%v):\n%s", err, p.output())
		case <-time.After(20 * time.Millisecond): // polling an external process
		}
	}
	t.Fatalf("%s never answered 200:\n%s", url, p.output())
}

// tryRPC makes a JSON-RPC call and decodes the result into v; a JSON-RPC
// error or a transport failure is returned as an error.
func tryRPC(url, method string, params any, v any) (string, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return string(raw), err
	}
	if r.Error != nil {
		return string(raw), fmt.Errorf("rpc error: %s", r.Error)
	}
	return string(raw), json.Unmarshal(r.Result, v)
}

func rpc(t *testing.T, url, method string, params any) json.RawMessage {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.Error != nil {
		t.Fatalf("%s: %s", method, raw)
	}
	return r.Result
}

// waitAgentCard polls until the edge serves the agent's card.
func waitAgentCard(t *testing.T, base, agent string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(base + "/agents/" + agent + "/.well-known/agent-card.json"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond) // polling an external process
	}
	t.Fatalf("agent %s never appeared at %s", agent, base)
}

// One a2abus serve process, then a separate edge process and a separate
// worker process joining its embedded NATS: a task sent through the first
// edge is read and canceled through the second, and a task for the agent
// that only the worker process runs completes. Every process shuts down
// cleanly on SIGTERM.
func TestServeEdgeAndWorkerProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	httpAddr, natsAddr, edgeAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	cfg := filepath.Join(dir, "a2abus.json")
	writeFile(t, cfg, `{"agents":[{"name":"echo"},{"name":"shout","kind":"exec","exec":{"command":"tr","args":["a-z","A-Z"],"timeout":"10s"}}]}`)

	serve := startProc(t, "serve", "--listen", httpAddr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", natsAddr, "--config", cfg)
	base := "http://" + httpAddr
	waitReady(t, serve, base)
	if !strings.Contains(serve.output(), "agent card") {
		t.Fatalf("serve did not say where to find it:\n%s", serve.output())
	}

	var send struct {
		Task schemas.Task `json:"task"`
	}
	msg := schemas.Message{MessageID: "m1", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("hello processes")}}
	if err := json.Unmarshal(rpc(t, base+"/", "SendMessage", map[string]any{"message": msg}), &send); err != nil {
		t.Fatal(err)
	}
	if send.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("echo task: %s", send.Task.Status.State)
	}
	msg.MessageID = "m2"
	if err := json.Unmarshal(rpc(t, base+"/agents/shout", "SendMessage", map[string]any{"message": msg}), &send); err != nil {
		t.Fatal(err)
	}
	if send.Task.Status.State != schemas.TaskStateCompleted || !strings.Contains(artifactText(send.Task), "HELLO PROCESSES") {
		t.Fatalf("exec task: %+v", send.Task)
	}

	nats := "nats://" + natsAddr
	data := filepath.Join(dir, "data")
	if want := "--nats-creds " + servedCreds(data, bus.RoleWorker); !strings.Contains(serve.output(), want) {
		t.Fatalf("serve did not say how a worker joins (%s):\n%s", want, serve.output())
	}
	edgeProc := startProc(t, "edge", "--nats", nats, "--nats-creds", servedCreds(data, bus.RoleEdge), "--listen", edgeAddr, "--default-agent", "echo")
	metricsAddr := freeAddr(t)
	worker := startProc(t, "worker", "--nats", nats, "--nats-creds", servedCreds(data, bus.RoleWorker), "--agent", "tck", "--metrics-listen", metricsAddr)
	base2 := "http://" + edgeAddr
	waitReady(t, edgeProc, base2)
	waitAgentCard(t, base2, "tck")

	var got schemas.Task
	if err := json.Unmarshal(rpc(t, base2+"/agents/shout", "GetTask", map[string]any{"id": send.Task.ID}), &got); err != nil || got.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("second edge reading the exec task: %+v %v", got, err)
	}
	msg.MessageID = "tck-complete-task-1"
	if err := json.Unmarshal(rpc(t, base2+"/agents/tck", "SendMessage", map[string]any{"message": msg}), &send); err != nil {
		t.Fatal(err)
	}
	if send.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("tck task via the second edge and the worker process: %s", send.Task.Status.State)
	}
	// The first edge answers for the task the second one created.
	if err := json.Unmarshal(rpc(t, base+"/agents/tck", "GetTask", map[string]any{"id": send.Task.ID}), &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != send.Task.ID || got.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("first edge sees %+v", got)
	}

	// A worker process has no A2A port; --metrics-listen serves what it
	// did. Its ack of the task's work may follow the client's answer.
	metrics := func(url, want string) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := http.Get(url)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if strings.Contains(string(b), want) {
					return string(b)
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s lacks %q:\n%s", url, want, b)
				}
			} else if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v", url, err)
			}
			time.Sleep(20 * time.Millisecond) // polling another process
		}
	}
	wm := metrics("http://"+metricsAddr+"/metrics", `a2a_work_messages_total{agent="tck",outcome="ack"} 1`+"\n")
	for _, want := range []string{`a2a_tasks_finished_total{agent="tck",state="TASK_STATE_COMPLETED"} 1`, `a2a_build_info{go="`, `a2a_task_duration_seconds_count{agent="tck",state="TASK_STATE_COMPLETED"} 1`} {
		if !strings.Contains(wm, want) {
			t.Errorf("worker metrics lack %q", want)
		}
	}
	// What the worker serves parses with the official parser, with the
	// Go runtime's and the process's families.
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(wm))
	if err != nil {
		t.Fatalf("worker metrics do not parse: %v", err)
	}
	for _, name := range []string{"go_goroutines", "go_gc_duration_seconds", "process_resident_memory_bytes", "process_open_fds", "process_cpu_seconds_total"} {
		if fams[name] == nil || len(fams[name].GetMetric()) == 0 {
			t.Errorf("worker metrics lack %s", name)
		}
	}
	// serve's edge serves the metrics of the whole process on its port,
	// its embedded NATS server's among them (the stored tasks in the task
	// bucket's stream, which the one server leads).
	sm := metrics(base+"/metrics", `a2a_rpc_requests_total{binding="jsonrpc",code="0",method="SendMessage"} 2`+"\n")
	for _, want := range []string{"a2a_nats_in_msgs_total ", "a2a_nats_route_out_bytes_total 0\n", `a2a_nats_stream_leader{stream="KV_A2A_TASKS"} 1` + "\n"} {
		if !strings.Contains(sm, want) {
			t.Errorf("serve metrics lack %q", want)
		}
	}
	if strings.Contains(wm, "a2a_nats_") {
		t.Error("a worker, which runs no NATS server, serves a2a_nats_ families")
	}

	worker.stop(t)
	edgeProc.stop(t)
	serve.stop(t)
}

// The NATS port of a serve takes no anonymous client: serve makes one
// user per role (files 0600 in a 0700 directory under its data directory,
// secrets never logged) and keeps them across restarts; a client without
// credentials is refused, and an edge started without them exits at once;
// a worker's credentials cannot delete the task bucket. With --nats-listen
// off there is nothing to authenticate and nothing is made.
func TestServeNATSNeedsCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	args := []string{"serve", "--listen", httpAddr, "--data-dir", data, "--nats-listen", natsAddr, "--agent", "echo"}
	serve := startProc(t, args...)
	base, url := "http://"+httpAddr, "nats://"+natsAddr
	waitReady(t, serve, base)

	credsDir := filepath.Join(data, credentialsDir)
	if fi, err := os.Stat(credsDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("credentials directory: %v %v, want mode 0700", fi, err)
	}
	secrets := map[bus.Role]string{}
	for _, role := range bus.Roles {
		path := servedCreds(data, role)
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", path, fi, err)
		}
		c, err := readCredentialsFile(path)
		if err != nil || c.User != string(role) || len(c.Password) < 32 {
			t.Fatalf("%s: %+v %v", path, c.User, err)
		}
		if strings.Contains(serve.output(), c.Password) {
			t.Fatalf("serve logged the %s password", role)
		}
		b, _ := os.ReadFile(path)
		secrets[role] = string(b)
	}

	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("connected to serve's NATS without credentials")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("without credentials: %v, want an authorization violation", err)
	}
	anon := startProc(t, "edge", "--nats", url, "--listen", freeAddr(t))
	exitsWithin(t, anon, 20*time.Second, 2)

	worker, err := readCredentialsFile(servedCreds(data, bus.RoleWorker))
	if err != nil {
		t.Fatal(err)
	}
	violations := make(chan error, 4)
	nc, err := nats.Connect(url, nats.UserInfo(worker.User, worker.Password),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	deleted := make(chan error, 1)
	go func() { deleted <- js.DeleteKeyValue(ctx, schemas.BucketTasks) }()
	select {
	case err := <-violations:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("deleting the task bucket as a worker: %v, want a permission violation", err)
		}
	case err := <-deleted:
		t.Fatalf("deleting the task bucket as a worker ended (%v) without a permission violation", err)
	}
	cancel()
	<-deleted
	nc.Close()
	var task schemas.Task
	if err := json.Unmarshal(rpc(t, base+"/", "SendMessage", map[string]any{"message": schemas.Message{MessageID: "after", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("still here")}}}), &struct {
		Task *schemas.Task `json:"task"`
	}{&task}); err != nil || task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("a task after the attempt: %+v %v", task, err)
	}

	// Restarted, serve keeps its credentials: a worker given them joins.
	serve.stop(t)
	serve = startProc(t, args...)
	waitReady(t, serve, base)
	for role, want := range secrets {
		if b, _ := os.ReadFile(servedCreds(data, role)); string(b) != want {
			t.Fatalf("the %s credentials changed across a restart", role)
		}
	}
	w := startProc(t, "worker", "--nats", url, "--nats-creds", servedCreds(data, bus.RoleWorker), "--agent", "tck")
	waitAgentCard(t, base, "tck")
	w.stop(t)
	serve.stop(t)

	offData := filepath.Join(dir, "off")
	offAddr := freeAddr(t)
	off := startProc(t, "serve", "--listen", offAddr, "--data-dir", offData, "--nats-listen", "off")
	waitReady(t, off, "http://"+offAddr)
	if _, err := os.Stat(filepath.Join(offData, credentialsDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("serve --nats-listen off made credentials: %v", err)
	}
	off.stop(t)
}

// exitsWithin waits for p to exit with code within d.
func exitsWithin(t *testing.T, p *proc, d time.Duration, code int) {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != code {
			t.Fatalf("exit %v, want code %d:\n%s", err, code, p.output())
		}
	case <-time.After(d):
		t.Fatalf("still running after %v:\n%s", d, p.output())
	}
}

// servedCreds is the credentials file of role that a serve (or a
// standalone node) with data directory dataDir made for other processes.
func servedCreds(dataDir string, role bus.Role) string {
	return filepath.Join(dataDir, credentialsDir, string(role))
}

// deploymentCreds makes the NATS credentials of a deployment in dir (as
// "a2abus credentials --dir" does) and returns dir.
func deploymentCreds(t *testing.T, dir string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := runCredentials([]string{"--dir", dir}, &out, &errOut); err != nil {
		t.Fatalf("credentials: %v\n%s", err, errOut.String())
	}
	return dir
}

// adminCreds reads the admin credentials kept in dir (by a serve, a
// standalone node or "a2abus credentials").
func adminCreds(t *testing.T, dir string) bus.Credentials {
	t.Helper()
	c, err := readCredentialsFile(filepath.Join(dir, string(bus.RoleAdmin)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func artifactText(t schemas.Task) string {
	var s string
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			if p.Text != nil {
				s += *p.Text
			}
		}
	}
	return s
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestConfigLayers(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.json")
	writeFile(t, file, `{"listen":"127.0.0.1:9001","ackWait":"7s","historyCap":5,"agents":[{"name":"a1","kind":"echo"},{"name":"a2","kind":"tck"}]}`)
	env := map[string]string{"A2ABUS_LISTEN": "127.0.0.1:9002", "NATS_URL": "nats://127.0.0.1:5555", "A2ABUS_HISTORY_CAP": "9"}
	getenv := func(k string) string { return env[k] }

	cfg, err := loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), []string{"--config", file, "--history-cap", "11"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9002" { // env beats file
		t.Errorf("listen = %s", cfg.Listen)
	}
	if cfg.HistoryCap != 11 { // flag beats env and file
		t.Errorf("historyCap = %d", cfg.HistoryCap)
	}
	if time.Duration(cfg.AckWait) != 7*time.Second { // file beats default
		t.Errorf("ackWait = %v", time.Duration(cfg.AckWait))
	}
	if cfg.NATSURL != "nats://127.0.0.1:5555" || cfg.DataDir != "a2abus-data" || cfg.PublicURL != "http://127.0.0.1:9002" {
		t.Errorf("cfg = %+v", cfg)
	}
	if len(cfg.Agents) != 2 || cfg.DefaultAgent != "a1" {
		t.Errorf("agents = %+v default %s", cfg.Agents, cfg.DefaultAgent)
	}

	// --agent replaces the file's agents; the first is the default.
	cfg, err = loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), []string{"--config", file, "--agent", "tck", "--agent", "echo"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Agents) != 2 || cfg.Agents[0].Name != "tck" || cfg.DefaultAgent != "tck" {
		t.Errorf("agents = %+v", cfg.Agents)
	}

	// No configuration at all: serve works with the defaults.
	cfg, err = loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:8080" || len(cfg.Agents) != 1 || cfg.Agents[0].Kind != "echo" || cfg.MemoryLimit != autoMemoryLimit {
		t.Errorf("defaults = %+v", cfg)
	}
	for v, want := range map[string]int64{"1GiB": 1 << 30, "256 MiB": 256 << 20, "1048576": 1 << 20, "0": 0} {
		cfg, err = loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), []string{"--memory-limit", v}, func(string) string { return "" })
		if err != nil || cfg.MemoryLimit != want {
			t.Errorf("--memory-limit %s = %d (%v), want %d", v, cfg.MemoryLimit, err, want)
		}
	}

	for name, args := range map[string][]string{
		"unknown field": {"--config", writeTemp(t, dir, `{"lisen":"x"}`)},
		"bad duration":  {"--ack-wait", "soon"},
		"bad number":    {"--replicas", "three"},
		"bad size":      {"--memory-limit", "lots"},
		"negative size": {"--memory-limit", "-1MiB"},
		"duplicate":     {"--agent", "echo", "--agent", "echo"},
		"stray arg":     {"extra"},
		"missing file":  {"--config", filepath.Join(dir, "nope.json")},
	} {
		if _, err := loadConfig(flag.NewFlagSet("t", flag.ContinueOnError), args, func(string) string { return "" }); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func writeTemp(t *testing.T, dir, content string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprint(f, content)
	return f.Name()
}

func TestHelpListsSettingsAndDefaults(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(t.Context(), []string{"serve", "--help"}, &out, &errOut, func(string) string { return "" })
	if err == nil {
		t.Fatal("--help should end the command")
	}
	for _, want := range []string{"-listen", "-data-dir", "-nats-listen", "-start-timeout", "-agent", "-config", "127.0.0.1:8080", "NATS_URL", "A2ABUS_"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestUnknownAgentKindFails(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(t.Context(), []string{"serve", "--agent", "nonesuch", "--data-dir", t.TempDir(), "--nats-listen", "off", "--listen", "127.0.0.1:0"}, &out, &errOut, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "unknown kind") {
		t.Fatalf("err = %v", err)
	}
}

// TestRedactURLs: no password or token of a NATS URL reaches a log line.
func TestRedactURLs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://worker:s3cret@h1:4222,nats://h2:4222", "nats://worker:xxxxx@h1:4222,nats://h2:4222"},
		{"nats://s3cret@h1:4222", "nats://xxxxx@h1:4222"},
	} {
		if got := bus.RedactURLs(c.in); got != c.want {
			t.Errorf("redactURLs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
