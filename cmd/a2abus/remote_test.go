package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// waitAgents polls GET /a2a/agents (an external process's view) until cond
// holds.
func waitAgents(t *testing.T, base, query, what string, cond func(schemas.AgentList) bool) schemas.AgentList {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var l schemas.AgentList
	for time.Now().Before(deadline) {
		l = schemas.AgentList{}
		if resp, err := http.Get(base + "/a2a/agents" + query); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&l)
			resp.Body.Close()
			if cond(l) {
				return l
			}
		}
		time.Sleep(20 * time.Millisecond) // polling an external process
	}
	t.Fatalf("%s never happened; last listing %+v", what, l)
	return l
}

// health is a remote agent's health as the listing shows it to any
// caller (its remote status is shown to admins only).
func health(l schemas.AgentList, name string) string {
	for _, a := range l.Agents {
		if a.Agent == name && a.Kind == "remote" {
			return a.Health
		}
	}
	return ""
}

// a2abus as a gateway, with real processes: an external A2A agent (another
// a2abus) and one that is down at start-up are configured as remote agents;
// start-up is not held up, the registry shows both with their health, the
// reachable one answers through the bus, a fan-out over a local, the remote
// and the down agent completes partially, and the down agent comes online
// when it starts, found by the periodic re-check.
func TestRemoteAndFanOutAgentsThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	extAddr, downAddr, gwAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	extGRPC := freeAddr(t)
	ext := startProc(t, "serve", "--listen", extAddr, "--grpc-listen", extGRPC, "--data-dir", filepath.Join(dir, "ext"), "--nats-listen", "off")
	waitReady(t, ext, "http://"+extAddr)

	cfg := filepath.Join(dir, "gw.json")
	writeFile(t, cfg, fmt.Sprintf(`{
  "outbound": {"allowLoopback": true},
  "agents": [
    {"name": "echo"},
    {"name": "far", "kind": "remote", "url": "http://%s/agents/echo", "checkEvery": "200ms"},
    {"name": "fargrpc", "kind": "remote", "url": "http://%s/agents/echo", "binding": "GRPC", "checkEvery": "200ms"},
    {"name": "later", "kind": "remote", "url": "http://%s", "checkEvery": "200ms"},
    {"name": "fan", "kind": "fanout", "targets": ["echo", "far", "later"], "mode": "partial", "childTimeout": "10s"}
  ]}`, extAddr, extAddr, downAddr))
	gw := startProc(t, "serve", "--listen", gwAddr, "--data-dir", filepath.Join(dir, "gw"), "--nats-listen", "off", "--config", cfg)
	base := "http://" + gwAddr
	waitReady(t, gw, base)

	// Both remote agents are listed, the down one offline with a reason.
	l := waitAgents(t, base, "?kind=remote", "far online", func(l schemas.AgentList) bool {
		return health(l, "far") == schemas.HealthOnline && health(l, "later") == schemas.HealthOffline
	})
	for _, a := range l.Agents {
		switch a.Name {
		case "far":
			if len(a.Skills) == 0 || a.Skills[0].ID != "echo" || a.Remote.LastSeen == nil {
				t.Fatalf("far's entry does not carry the external card: %+v", a)
			}
		case "later":
			if a.Remote.LastError == "" || !strings.Contains(a.Remote.LastError, downAddr) {
				t.Fatalf("later's entry does not say why it is offline: %+v", a.Remote)
			}
		}
	}
	if got := waitAgents(t, base, "?skill=echo", "skill query", func(l schemas.AgentList) bool { return len(l.Agents) == 3 }); got.Agents[0].Name != "echo" || got.Agents[1].Name != "far" || got.Agents[2].Name != "fargrpc" {
		t.Fatalf("?skill=echo: %+v", got)
	}

	// Through the bus to the external agent and back.
	var send struct {
		Task schemas.Task `json:"task"`
	}
	msg := schemas.Message{MessageID: "m1", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("over the gateway")}}
	if err := json.Unmarshal(rpc(t, base+"/agents/far", "SendMessage", map[string]any{"message": msg}), &send); err != nil {
		t.Fatal(err)
	}
	extID, _ := send.Task.Metadata[workers.MetaRemoteTaskID].(string)
	if send.Task.Status.State != schemas.TaskStateCompleted || artifactText(send.Task) != "over the gateway" || extID == "" {
		t.Fatalf("remote task: %+v", send.Task)
	}
	if got := getTask(t, "http://"+extAddr, "echo", extID); got.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("external task %s: %s", extID, got.Status.State)
	}
	// The same external agent preferred over its gRPC interface: the
	// external edge counts the calls under binding "grpc".
	waitAgents(t, base, "?kind=remote", "fargrpc online", func(l schemas.AgentList) bool { return health(l, "fargrpc") == schemas.HealthOnline })
	msg.MessageID = "m-grpc"
	if err := json.Unmarshal(rpc(t, base+"/agents/fargrpc", "SendMessage", map[string]any{"message": msg}), &send); err != nil {
		t.Fatal(err)
	}
	if send.Task.Status.State != schemas.TaskStateCompleted || artifactText(send.Task) != "over the gateway" {
		t.Fatalf("remote task over gRPC: %+v", send.Task)
	}
	resp, err := http.Get("http://" + extAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `a2a_rpc_requests_total{binding="grpc",code="0",method="SendStreamingMessage"}`) &&
		!strings.Contains(string(metrics), `a2a_rpc_requests_total{binding="grpc",code="0",method="SendMessage"}`) {
		t.Fatalf("the external agent counted no gRPC send:\n%s", metrics)
	}

	// Fan-out: two answers, and the down agent named.
	msg.MessageID = "m2"
	if err := json.Unmarshal(rpc(t, base+"/agents/fan", "SendMessage", map[string]any{"message": msg}), &send); err != nil {
		t.Fatal(err)
	}
	summary := ""
	if send.Task.Status.Message != nil {
		summary = send.Task.Status.Message.Text()
	}
	if send.Task.Status.State != schemas.TaskStateCompleted || len(send.Task.Artifacts) != 2 || !strings.Contains(summary, "2 of 3") || !strings.Contains(summary, "later:") {
		t.Fatalf("fan-out: %s %q %+v", send.Task.Status.State, summary, send.Task.Artifacts)
	}

	// The down agent starts: the periodic check finds it.
	later := startProc(t, "serve", "--listen", downAddr, "--data-dir", filepath.Join(dir, "later"), "--nats-listen", "off")
	waitReady(t, later, "http://"+downAddr)
	waitAgents(t, base, "?health=online", "later online", func(l schemas.AgentList) bool { return health(l, "later") == schemas.HealthOnline })

	later.stop(t)
	gw.stop(t)
	ext.stop(t)
}

// A remote agent in push mode, with real processes: the local a2abus is
// SIGKILLed while the external task works and started again; the external
// agent's notifications meanwhile find no one, and the restarted process
// follows the external task to its end.
func TestRemoteAgentInPushModeSurvivesAKilledProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	extAddr, gwAddr := freeAddr(t), freeAddr(t)
	ext := startProc(t, "serve", "--listen", extAddr, "--data-dir", filepath.Join(dir, "ext"), "--nats-listen", "off", "--agent", "tck",
		"--push", "true", "--push-allow-http", "true", "--push-allow-private", "true")
	waitReady(t, ext, "http://"+extAddr)

	cfg := filepath.Join(dir, "gw.json")
	writeFile(t, cfg, fmt.Sprintf(`{
  "outbound": {"allowLoopback": true},
  "agents": [{"name": "far", "kind": "remote", "url": "http://%s/agents/tck", "checkEvery": "200ms", "push": true, "pushPollEvery": "500ms"}]}`, extAddr))
	args := []string{"serve", "--listen", gwAddr, "--data-dir", filepath.Join(dir, "gw"), "--nats-listen", "off", "--config", cfg, "--ack-wait", "2s"}
	gw := startProc(t, args...)
	base := "http://" + gwAddr
	waitReady(t, gw, base)
	waitAgentCard(t, base, "far")

	// The conformance agent holds this task WORKING for 4s.
	task := sendNow(t, base, "far", "test-resubscribe-message-id-"+schemas.NewID(), "x")
	working := waitTask(t, base, "far", task.ID, 30*time.Second, func(t schemas.Task) bool {
		return t.Metadata[workers.MetaRemoteTaskID] != nil && t.Metadata[workers.MetaRemotePushToken] != nil
	})
	if working.Status.State != schemas.TaskStateWorking {
		t.Fatalf("the task is %s before the kill", working.Status.State)
	}
	if err := gw.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-gw.done
	gw.done <- nil

	gw = startProc(t, args...)
	waitReady(t, gw, base)
	done := waitTask(t, base, "far", task.ID, 60*time.Second, func(t schemas.Task) bool { return t.Status.State.Terminal() })
	if done.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("after the restart: %s %v", done.Status.State, done.Status.Message)
	}
	gw.stop(t)
}

// The run-time registry with real processes: an admin registers a remote
// agent on one edge (a non-admin may not), and a second edge on the same
// bus serves it too; maintenance shows on both and refuses new tasks;
// removing it takes it off both at once. The second edge presents the
// edge role's NATS credentials, which read the registry but cannot change
// it: its admin's change is refused at once with 403 and what to do (not
// a publish timeout answered 503 "retry"); a third edge presenting the
// edge-admin role's changes it for all.
func TestRegistryChangedAtRunTimeSeenByASecondEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	extAddr, gwAddr, natsAddr, edgeAddr := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	ext := startProc(t, "serve", "--listen", extAddr, "--data-dir", filepath.Join(dir, "ext"), "--nats-listen", "off")
	waitReady(t, ext, "http://"+extAddr)
	keys := []string{"A2ABUS_API_KEYS=ops-key-0123456789abcdef=ops,alice-key-0123456789abcdef=alice"}
	gw := startProcEnv(t, keys, "serve", "--listen", gwAddr, "--data-dir", filepath.Join(dir, "gw"), "--nats-listen", natsAddr,
		"--admins", "ops", "--outbound-allow-private", "true")
	gwBase := "http://" + gwAddr
	waitReady(t, gw, gwBase)
	second := startProcEnv(t, keys, "edge", "--listen", edgeAddr, "--public-url", "http://"+edgeAddr, "--nats", "nats://"+natsAddr,
		"--nats-creds", servedCreds(filepath.Join(dir, "gw"), bus.RoleEdge), "--admins", "ops")
	edgeBase := "http://" + edgeAddr
	waitReady(t, second, edgeBase)

	add := []string{"agents", "add", gwBase, "far", "--remote", "http://" + extAddr + "/agents/echo", "--check-every", "1s", "--tag", "weather"}
	if _, _, err := cli(t, append(add, "--api-key", "alice-key-0123456789abcdef")...); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a non-admin registered an agent: %v", err)
	}
	if out, stderr, err := cli(t, append(add, "--api-key", "ops-key-0123456789abcdef")...); err != nil {
		t.Fatalf("add: %v\n%s%s", err, out, stderr)
	}
	for _, base := range []string{gwBase, edgeBase} {
		waitAgents(t, base, "?tag=weather", "the registered agent on "+base, func(l schemas.AgentList) bool { return health(l, "far") == "online" })
	}
	// The entry records which admin made it.
	req, _ := http.NewRequest("GET", gwBase+"/a2a/admin/agents/far", nil)
	req.Header.Set("X-API-Key", "ops-key-0123456789abcdef")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var entry schemas.RegistryEntry
	err = json.NewDecoder(resp.Body).Decode(&entry)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || entry.UpdatedBy != "ops" {
		t.Fatalf("the entry as read by an admin: %d %+v %v", resp.StatusCode, entry, err)
	}
	task := sendAs(t, edgeBase, "far", "alice-key-0123456789abcdef", "through the second edge")
	if task.Status.State != schemas.TaskStateCompleted || artifactText(task) != "through the second edge" {
		t.Fatalf("task through the registered agent: %s %q", task.Status.State, artifactText(task))
	}

	// The second edge's NATS user may not change the registry.
	update := []string{"agents", "update", edgeBase, "far", "--maintenance", "upgrading", "--api-key", "ops-key-0123456789abcdef"}
	for what, args := range map[string][]string{"update": update, "remove": {"agents", "remove", edgeBase, "far", "--api-key", "ops-key-0123456789abcdef"}} {
		_, _, err := cli(t, args...)
		if err == nil || !strings.Contains(err.Error(), "403") ||
			!strings.Contains(err.Error(), "this edge's NATS credentials (role edge) may not change the registry") || !strings.Contains(err.Error(), "--nats-creds DIR/edge-admin") {
			t.Fatalf("an admin's %s through an edge with the edge role's credentials: %v, want 403 naming the edge-admin credentials", what, err)
		}
	}
	if l := waitAgents(t, gwBase, "", "the agent as it was", func(schemas.AgentList) bool { return true }); health(l, "far") != "online" {
		t.Fatalf("after the refused changes: %+v", l)
	}
	adminAddr := freeAddr(t)
	adminEdge := startProcEnv(t, keys, "edge", "--listen", adminAddr, "--public-url", "http://"+adminAddr, "--nats", "nats://"+natsAddr,
		"--nats-creds", servedCreds(filepath.Join(dir, "gw"), bus.RoleAdminEdge), "--admins", "ops")
	adminBase := "http://" + adminAddr
	waitReady(t, adminEdge, adminBase)
	update[2] = adminBase
	if out, stderr, err := cli(t, update...); err != nil {
		t.Fatalf("update through the edge with the edge-admin role's credentials: %v\n%s%s", err, out, stderr)
	}
	for _, base := range []string{gwBase, edgeBase, adminBase} {
		waitAgents(t, base, "?health=maintenance", "maintenance on "+base, func(l schemas.AgentList) bool {
			return len(l.Agents) == 1 && l.Agents[0].Maintenance == "upgrading"
		})
	}
	if status, raw := trySend(t, edgeBase, "far", "alice-key-0123456789abcdef"); status != http.StatusServiceUnavailable || !strings.Contains(raw, "maintenance") {
		t.Fatalf("a new task for an agent in maintenance: %d %s", status, raw)
	}

	if _, _, err := cli(t, "agents", "remove", gwBase, "far", "--api-key", "ops-key-0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{gwBase, edgeBase} {
		waitAgents(t, base, "", "the agent gone from "+base, func(l schemas.AgentList) bool {
			for _, a := range l.Agents {
				if a.Agent == "far" {
					return false
				}
			}
			return true
		})
	}
}

// sendAs sends a blocking message as the holder of key.
func sendAs(t *testing.T, base, agent, key, text string) schemas.Task {
	t.Helper()
	status, raw := trySendText(t, base, agent, key, text)
	var r struct {
		Result struct {
			Task schemas.Task `json:"task"`
		} `json:"result"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(raw), &r) != nil {
		t.Fatalf("send: %d %s", status, raw)
	}
	return r.Result.Task
}

func trySend(t *testing.T, base, agent, key string) (int, string) {
	return trySendText(t, base, agent, key, "x")
}

func trySendText(t *testing.T, base, agent, key, text string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{
		"message": map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}}})
	req, _ := http.NewRequest("POST", base+"/agents/"+agent, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// A remote agent's monitor keeps its client across an offline spell: when
// the agent comes back with the card it had, the calls go through the
// client built before (a gRPC one holds a connection), and a card whose
// interfaces changed gets a new one.
func TestRemoteMonitorKeepsItsClientAcrossAnOfflineSpell(t *testing.T) {
	grpcCard := func(addr string) *schemas.AgentCard {
		return &schemas.AgentCard{Name: "far", SupportedInterfaces: []schemas.AgentInterface{
			{URL: addr, ProtocolBinding: schemas.BindingGRPC, ProtocolVersion: schemas.ProtocolVersion, Tenant: "agents/far"}}}
	}
	var card *schemas.AgentCard
	var down error
	m := newRemoteMonitor("far", "http://127.0.0.1:1", time.Minute, discovery.Options{}, nil, slog.New(slog.DiscardHandler))
	m.resolve = func(context.Context, string, bool) (*schemas.AgentCard, bool, error, error) {
		return card, false, nil, down
	}
	ctx := context.Background()
	client := func() *discovery.Client {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.client
	}

	card = grpcCard("127.0.0.1:50051")
	m.check(ctx, true)
	first := client()
	if first == nil || first.Endpoint().Binding != schemas.BindingGRPC {
		t.Fatalf("the client of a gRPC card: %+v", first)
	}
	down = errors.New("connection refused")
	if m.check(ctx, true); client() != nil {
		t.Fatal("an offline agent kept a client to call")
	}
	down, card = nil, grpcCard("127.0.0.1:50051")
	if m.check(ctx, true); client() != first {
		t.Fatal("the agent back with the same card got a new client")
	}
	card = grpcCard("127.0.0.1:50052")
	if m.check(ctx, true); client() == first || client().Endpoint().URL != "127.0.0.1:50052" {
		t.Fatalf("a card with another interface kept the client of %+v", first.Endpoint())
	}
}
