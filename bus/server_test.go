package bus

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// Helpers shared by the tests of this package. bustest cannot be imported
// here (it imports bus), so these do the same with the unexported fields at
// hand: a real embedded JetStream server per test, never a mock.

// testCtx returns a context that ends when the test does, or after 30s, so
// a hung bus call fails the test instead of the whole run.
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startServer starts an embedded server on dir (default a fresh temporary
// directory) that is shut down when the test ends. Shutdown is idempotent,
// so a test may also stop it earlier.
func startServer(t testing.TB, dir string) *Server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := StartServer(ServerConfig{DataDir: dir})
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// connect connects a Bus to s with cfg (Server and a quiet logger filled
// in); it is closed when the test ends, before the server shuts down.
func connect(t testing.TB, s *Server, cfg Config) *Bus {
	t.Helper()
	cfg.Server = s
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	b, err := Connect(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// newTestBus starts a server and connects one memory-storage Bus to it.
// startRun runs a follower of the bus (a task watcher, an agent
// directory) until the test ends, checking it stops cleanly, and waits
// until it is ready.
func startRun(t testing.TB, ctx context.Context, what string, run func(context.Context) error, ready <-chan struct{}) {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("%s Run: %v", what, err)
		}
	})
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatalf("%s never became ready", what)
	}
}

func newTestBus(t testing.TB, cfg Config) *Bus {
	t.Helper()
	cfg.MemoryStorage = true
	return connect(t, startServer(t, ""), cfg)
}

// eventually polls cond until it holds or 10s pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// streamMsgs returns the number of messages a stream holds.
func streamMsgs(t testing.TB, b *Bus, name string) uint64 {
	t.Helper()
	st, err := b.js.Stream(testCtx(t), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := st.Info(testCtx(t))
	if err != nil {
		t.Fatalf("stream %s info: %v", name, err)
	}
	return info.State.Msgs
}

func TestStartServerNeedsDataDir(t *testing.T) {
	if _, err := StartServer(ServerConfig{}); err == nil {
		t.Fatal("StartServer without a data directory succeeded")
	}
}

// A cluster member without a client listener would never open its routes
// (the NATS server waits for the client listener first): refused.
func TestStartServerRefusesAClusterMemberWithoutClientListener(t *testing.T) {
	s, err := StartServer(ServerConfig{DataDir: t.TempDir(), Anonymous: true,
		ClusterName: "c", ClusterListen: "127.0.0.1:0", Name: "n0", Routes: []string{"nats://127.0.0.1:1"}})
	if err == nil {
		s.Shutdown()
		t.Fatal("a cluster member without a client listener started")
	}
	if !strings.Contains(err.Error(), "client listen address") {
		t.Fatalf("error %q does not say what is missing", err)
	}
}

func TestStartServerRejectsBadListen(t *testing.T) {
	for _, listen := range []string{"no-port", "127.0.0.1:http-ish", "127.0.0.1:-"} {
		s, err := StartServer(ServerConfig{DataDir: t.TempDir(), Listen: listen})
		if err == nil {
			s.Shutdown()
			t.Errorf("StartServer(Listen %q) succeeded", listen)
		}
	}
}

// A server that cannot open its listeners says why, at once, instead of
// waiting out the readiness bound with no reason given.
func TestStartServerSaysWhyItCannotListen(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	for name, cfg := range map[string]ServerConfig{
		"client port": {Listen: addr},
		"route port":  {ClusterName: "c", ClusterListen: addr, Name: "n0", Routes: []string{"nats://" + addr}, Listen: "127.0.0.1:0"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg.DataDir, cfg.Anonymous = t.TempDir(), true
			s, err := StartServer(cfg)
			if err == nil {
				s.Shutdown()
				t.Fatalf("StartServer on %s, which another socket holds, succeeded", addr)
			}
			_, port, _ := net.SplitHostPort(addr)
			if !strings.Contains(err.Error(), port) || !strings.Contains(err.Error(), "address already in use") {
				t.Fatalf("error %q does not name the port and the reason", err)
			}
		})
	}
}

func TestServerInProcessOnlyHasNoClientURL(t *testing.T) {
	s := startServer(t, "")
	if u := s.ClientURL(); u != "" {
		t.Fatalf("ClientURL of an in-process server = %q, want empty", u)
	}
}

func TestServerListensForNetworkClients(t *testing.T) {
	s, err := StartServer(ServerConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	u := s.ClientURL()
	if !strings.HasPrefix(u, "nats://127.0.0.1:") || strings.HasSuffix(u, ":0") {
		t.Fatalf("ClientURL = %q, want nats://127.0.0.1:<port>", u)
	}
	b, err := Connect(testCtx(t), Config{URL: u, MemoryStorage: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("connect over the network: %v", err)
	}
	defer b.Close()
	if !b.Connected() {
		t.Fatal("not connected")
	}
	rec := newRecord("net")
	if _, _, err := b.createTask(testCtx(t), rec); err != nil {
		t.Fatal(err)
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.Name == "" || c.Role != "node" || c.Logger == nil || c.Replicas != 1 {
		t.Errorf("identity defaults: %+v", c)
	}
	if c.EventsMaxAge != c.TaskTTL || c.TaskTTL != 24*time.Hour {
		t.Errorf("EventsMaxAge = %v, TaskTTL = %v; want both 24h", c.EventsMaxAge, c.TaskTTL)
	}
	if c.AckWait != 30*time.Second || c.MaxDeliver != 5 || c.HistoryCap != 100 || c.TaskMaxValueSize != 1<<20-16<<10 {
		t.Errorf("work/task defaults: %+v", c)
	}
	// Explicit values survive.
	c = Config{TaskTTL: time.Hour, AckWait: time.Second, HistoryCap: 7}.withDefaults()
	if c.TaskTTL != time.Hour || c.EventsMaxAge != time.Hour || c.AckWait != time.Second || c.HistoryCap != 7 {
		t.Errorf("explicit values overridden: %+v", c)
	}
}

func TestCloseIsIdempotentAndAbortMakesCallsUnavailable(t *testing.T) {
	s := startServer(t, "")
	b := connect(t, s, Config{MemoryStorage: true})
	if !b.Connected() {
		t.Fatal("not connected after Connect")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if b.Connected() {
		t.Fatal("connected after Close")
	}

	b2 := connect(t, s, Config{MemoryStorage: true})
	b2.abort()
	_, _, err := b2.createTask(testCtx(t), newRecord("x"))
	if !errors.Is(err, schemas.ErrUnavailable) {
		t.Fatalf("createTask on an aborted bus: %v, want ErrUnavailable", err)
	}
}

// Provisioning runs in every process at start-up: a second process (or a
// restart) must find everything in place and succeed.
func TestProvisionIsIdempotent(t *testing.T) {
	s := startServer(t, "")
	b1 := connect(t, s, Config{MemoryStorage: true, Role: "edge"})
	b2 := connect(t, s, Config{MemoryStorage: true, Role: "worker"})
	ctx := testCtx(t)
	for _, b := range []*Bus{b1, b2, b1} {
		if err := b.ensureAgent(ctx, "echo"); err != nil {
			t.Fatalf("ensureAgent: %v", err)
		}
	}
	if err := b1.ensureAgent(ctx, "Not.Valid"); err == nil {
		t.Fatal("ensureAgent accepted an invalid agent name")
	}
	// Both see the same task store.
	rec := newRecord("echo")
	if _, _, err := b1.createTask(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b2.GetTask(ctx, rec.Task.ID); err != nil {
		t.Fatalf("task created on one connection not visible on the other: %v", err)
	}
}

// A changed bound on a later Connect is applied in place: the stream keeps
// its messages.
func TestProvisionUpdatesBoundsInPlace(t *testing.T) {
	s := startServer(t, "")
	ctx := testCtx(t)
	b1 := connect(t, s, Config{MemoryStorage: true})
	rec := newRecord("echo")
	if _, _, err := b1.createTask(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := b1.queueWork(ctx, workItem(rec), PublishOptions{}); err != nil {
		t.Fatal(err)
	}

	b2 := connect(t, s, Config{MemoryStorage: true, TaskMaxBytes: 64 << 20, WorkMaxBytes: 32 << 20, EventsMaxPerTask: 50})
	st, err := b2.tasks.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kvs := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
	if kvs.Config.MaxBytes != 64<<20 {
		t.Errorf("task bucket MaxBytes = %d, want %d", kvs.Config.MaxBytes, 64<<20)
	}
	if kvs.State.Msgs != 1 {
		t.Errorf("task bucket holds %d records after re-provisioning, want 1", kvs.State.Msgs)
	}
	for _, name := range []string{schemas.StreamWork, schemas.StreamIntake} {
		ws, err := b2.js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		wi, err := ws.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The item waits in the intake: no worker asked for it.
		want := uint64(0)
		if name == schemas.StreamIntake {
			want = 1
		}
		if wi.Config.MaxBytes != 32<<20 || wi.State.Msgs != want {
			t.Errorf("%s MaxBytes %d msgs %d, want %d and %d", name, wi.Config.MaxBytes, wi.State.Msgs, 32<<20, want)
		}
	}
	es, err := b2.js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if got := es.CachedInfo().Config.MaxMsgsPerSubject; got != 50 {
		t.Errorf("events MaxMsgsPerSubject = %d, want 50", got)
	}
	if got, _, err := b2.GetTask(ctx, rec.Task.ID); err != nil || got.Task.ID != rec.Task.ID {
		t.Fatalf("GetTask after re-provisioning: %v, %v", got, err)
	}
}

// A task stored with file storage survives a restart of the server on the
// same data directory.
func TestTasksSurviveServerRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := testCtx(t)

	s1, err := StartServer(ServerConfig{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s1.Shutdown)
	b1, err := Connect(ctx, Config{Server: s1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecord("echo")
	rec.Task.Artifacts = []schemas.Artifact{{ArtifactID: "a1", Parts: []schemas.Part{schemas.TextPart("kept")}}}
	rev, _, err := b1.createTask(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := b1.queueWork(ctx, workItem(rec), PublishOptions{ID: "work-1"}); err != nil {
		t.Fatal(err)
	}
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	s1.Shutdown()

	s2 := startServer(t, dir)
	b2 := connect(t, s2, Config{MemoryStorage: false})
	got, gotRev, err := b2.GetTask(ctx, rec.Task.ID)
	if err != nil {
		t.Fatalf("GetTask after restart: %v", err)
	}
	if gotRev != rev || got.Agent != "echo" || len(got.Task.Artifacts) != 1 || got.Task.Artifacts[0].ArtifactID != "a1" {
		t.Fatalf("after restart got rev %d %+v, want rev %d with artifact a1", gotRev, got, rev)
	}
	wc, err := b2.WorkConsumer(ctx, "echo")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := wc.Fetch(ctx, 1, 10*time.Second)
	if err != nil || len(ws) != 1 {
		t.Fatalf("work after restart: %v, %v", ws, err)
	}
	if ws[0].EventID != "work-1" || ws[0].Item.TaskID != rec.Task.ID {
		t.Fatalf("work after restart: %+v", ws[0])
	}
	_ = ws[0].Ack()
}

func TestAgentDirectory(t *testing.T) {
	s := startServer(t, "")
	ctx := testCtx(t)
	worker := connect(t, s, Config{MemoryStorage: true, Role: "worker"})
	edge := connect(t, s, Config{MemoryStorage: true, Role: "edge"})

	// Registered before the directory starts: present as soon as it is ready.
	if err := worker.RegisterAgent(ctx, schemas.AgentRegistration{Agent: "zeta", Card: schemas.AgentCard{Name: "Zeta"}, Instance: "z-1"}); err != nil {
		t.Fatal(err)
	}
	if err := worker.RegisterAgent(ctx, schemas.AgentRegistration{Agent: "Bad Name"}); err == nil {
		t.Fatal("RegisterAgent accepted an invalid agent name")
	}

	d := edge.NewAgentDirectory()
	startRun(t, ctx, "directory", d.Run, d.Ready())
	reg, ok := d.Get("zeta")
	if !ok || reg.Card.Name != "Zeta" || reg.Instance != "z-1" || reg.UpdatedAt.IsZero() {
		t.Fatalf("Get(zeta) right after Ready = %+v, %v", reg, ok)
	}

	// Registered later: shows up.
	if err := worker.RegisterAgent(ctx, schemas.AgentRegistration{Agent: "alpha", Card: schemas.AgentCard{Name: "Alpha"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "alpha in the directory", func() bool { _, ok := d.Get("alpha"); return ok })
	list := d.List()
	if len(list) != 2 || list[0].Agent != "alpha" || list[1].Agent != "zeta" {
		t.Fatalf("List = %+v, want alpha, zeta", list)
	}
	if _, ok := d.Get("nobody"); ok {
		t.Fatal("Get(nobody) found something")
	}

	// A deleted registration disappears.
	if err := worker.agents.Delete(ctx, "zeta"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "zeta gone from the directory", func() bool { _, ok := d.Get("zeta"); return !ok })

	if hb := worker.AgentHeartbeat(); hb != worker.Config().AgentTTL/3 || hb <= 0 {
		t.Fatalf("AgentHeartbeat = %v", hb)
	}
}

// A registration's CardSince is when its card last changed: a refresh of
// the same card, by any worker of the agent, keeps the stored one; another
// card starts a new one. So every edge serves the card with the same
// Last-Modified.
func TestRegistrationKeepsWhenItsCardChanged(t *testing.T) {
	s := startServer(t, "")
	ctx := testCtx(t)
	worker := connect(t, s, Config{MemoryStorage: true, Role: "worker"})
	long := &schemas.Timestamp{Time: time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)}
	card := schemas.AgentCard{Name: "Echo", Version: "1"}
	stored, _ := json.Marshal(schemas.AgentRegistration{Agent: "echo", Card: card, Instance: "w-1", UpdatedAt: *long, CardSince: long})
	if _, err := worker.agents.Put(ctx, "echo", stored); err != nil {
		t.Fatal(err)
	}
	since := func() *schemas.Timestamp {
		t.Helper()
		e, err := worker.agents.Get(ctx, "echo")
		if err != nil {
			t.Fatal(err)
		}
		var reg schemas.AgentRegistration
		if err := json.Unmarshal(e.Value(), &reg); err != nil {
			t.Fatal(err)
		}
		return reg.CardSince
	}
	// Another worker refreshes the same card.
	if err := worker.RegisterAgent(ctx, schemas.AgentRegistration{Agent: "echo", Card: card, Instance: "w-2"}); err != nil {
		t.Fatal(err)
	}
	if got := since(); got == nil || !got.Equal(long.Time) {
		t.Fatalf("a refresh of the same card moved cardSince to %v", got)
	}
	// A changed card is new.
	card.Version = "2"
	before := time.Now().Add(-time.Second)
	if err := worker.RegisterAgent(ctx, schemas.AgentRegistration{Agent: "echo", Card: card, Instance: "w-2"}); err != nil {
		t.Fatal(err)
	}
	if got := since(); got == nil || got.Before(before) {
		t.Fatalf("a changed card kept cardSince %v", got)
	}
}
