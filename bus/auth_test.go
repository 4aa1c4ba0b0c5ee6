package bus

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// testUsers are one user of each role, one of them with a bcrypt hash of
// its password ("hashed-worker-pass") instead of the password.
var testUsers = []NATSUser{
	{Name: "edge-1", Password: "edge-pass", Role: RoleEdge},
	{Name: "edge-admin-1", Password: "edge-admin-pass", Role: RoleAdminEdge},
	{Name: "worker-1", Password: "worker-pass", Role: RoleWorker},
	{Name: "worker-2", Password: "$2a$04$mnPH8xx4e1vZgg7OgmFTLO5Ip39VTc8Lh5Sv8a557f7JbSQhKUALu", Role: RoleWorker},
	{Name: "ops", Password: "admin-pass", Role: RoleAdmin},
}

var (
	edgeCreds      = Credentials{User: "edge-1", Password: "edge-pass"}
	edgeAdminCreds = Credentials{User: "edge-admin-1", Password: "edge-admin-pass"}
	workerCreds    = Credentials{User: "worker-1", Password: "worker-pass"}
	adminCreds     = Credentials{User: "ops", Password: "admin-pass"}
)

// startAuthServer starts a server listening on loopback with testUsers.
func startAuthServer(t testing.TB) *Server {
	t.Helper()
	s, err := StartServer(ServerConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Users: testUsers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// violations records the NATS permission violations a Bus logs (the
// connection's async errors): a role that lacks a permission its work
// needs shows up here.
type violations struct {
	mu   sync.Mutex
	errs []error
}

func (v *violations) Enabled(context.Context, slog.Level) bool { return true }
func (v *violations) WithAttrs([]slog.Attr) slog.Handler       { return v }
func (v *violations) WithGroup(string) slog.Handler            { return v }
func (v *violations) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && errors.Is(err, nats.ErrPermissionViolation) {
			v.mu.Lock()
			v.errs = append(v.errs, err)
			v.mu.Unlock()
		}
		return true
	})
	return nil
}

func (v *violations) check(t testing.TB, who string) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.errs) > 0 {
		t.Errorf("%s hit %d permission violations, first: %v", who, len(v.errs), v.errs[0])
	}
}

// connectAs connects a memory-storage Bus over the network as creds; the
// returned violations record what its role was refused.
func connectAs(t testing.TB, url string, creds Credentials, cfg Config) (*Bus, *violations) {
	t.Helper()
	v := &violations{}
	cfg.URL, cfg.Credentials, cfg.Logger, cfg.MemoryStorage = url, creds, slog.New(v), true
	b, err := Connect(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("connect as %s: %v", creds.User, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, v
}

// A server that listens needs someone to authenticate: users for its
// client listener, the cluster's credentials for its routes; users must
// be usable.
func TestListeningServerNeedsCredentials(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  ServerConfig
		want error
	}{
		{"client listener without users", ServerConfig{Listen: "127.0.0.1:0"}, ErrServerNeedsAuth},
		{"routes without credentials", ServerConfig{Listen: "127.0.0.1:0", Users: testUsers, Name: "n1", ClusterName: "c", ClusterListen: "127.0.0.1:0"}, ErrServerNeedsAuth},
		{"no name", ServerConfig{Listen: "127.0.0.1:0", Users: []NATSUser{{Password: "p", Role: RoleEdge}}}, ErrBadUsers},
		{"twice", ServerConfig{Listen: "127.0.0.1:0", Users: []NATSUser{{"a", "p", RoleEdge}, {"a", "q", RoleWorker}}}, ErrBadUsers},
		{"reserved", ServerConfig{Listen: "127.0.0.1:0", Users: []NATSUser{{inProcessUser, "p", RoleAdmin}}}, ErrBadUsers},
		{"no password", ServerConfig{Listen: "127.0.0.1:0", Users: []NATSUser{{"a", "", RoleEdge}}}, ErrBadUsers},
		{"unknown role", ServerConfig{Listen: "127.0.0.1:0", Users: []NATSUser{{"a", "p", "root"}}}, ErrBadUsers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.DataDir = t.TempDir()
			s, err := StartServer(tc.cfg)
			if err == nil {
				s.Shutdown()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// A network client without a user's credentials is refused, so is one
// with a wrong password, and so is one presenting the server's in-process
// admin (an in-process connection only). Each role's user, the bcrypt one
// too, connects; in-process connections need nothing.
func TestNetworkClientsNeedCredentials(t *testing.T) {
	s := startAuthServer(t)
	url := s.ClientURL()
	for name, opts := range map[string][]nats.Option{
		"none":           nil,
		"wrong password": {nats.UserInfo("edge-1", "nope")},
		"in-process":     {nats.UserInfo(s.inProcess.User, s.inProcess.Password)},
	} {
		nc, err := nats.Connect(url, opts...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
		} else if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("%s: err = %v, want an authorization violation", name, err)
		}
	}
	ctx := testCtx(t)
	if b, err := Connect(ctx, Config{URL: url, Logger: slog.New(slog.DiscardHandler)}); err == nil {
		_ = b.Close()
		t.Fatal("Connect without credentials succeeded")
	} else if !errors.Is(err, ErrConnectionClosed) || ctx.Err() != nil {
		t.Fatalf("Connect without credentials: %v, want ErrConnectionClosed at once", err)
	}

	connect(t, s, Config{MemoryStorage: true}) // in-process: the server's own admin
	for _, c := range []Credentials{edgeCreds, edgeAdminCreds, workerCreds, {User: "worker-2", Password: "hashed-worker-pass"}, adminCreds} {
		b, v := connectAs(t, url, c, Config{BindOnly: c.User != "edge-1" && c.User != "edge-admin-1" && c.User != "ops"})
		if !b.Connected() {
			t.Errorf("%s not connected", c.User)
		}
		v.check(t, c.User)
	}
}

// denied runs op on a fresh connection as creds and expects the server to
// refuse it for lack of permission: a JetStream API request that is
// refused is never answered, so the refusal is the violation the server
// reports to the connection, after which op is given up.
func denied(t *testing.T, url string, creds Credentials, what string, op func(ctx context.Context, js jetstream.JetStream) error) {
	t.Helper()
	errs := make(chan error, 16)
	nc, err := nats.Connect(url, nats.UserInfo(creds.User, creds.Password),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op(ctx, js) }()
	select {
	case err := <-errs:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("%s %s: async error %v, want a permission violation", creds.User, what, err)
		}
		cancel()
		<-done
	case err := <-done:
		t.Errorf("%s %s: done (err %v) without a permission violation", creds.User, what, err)
	}
}

// A worker's and an edge's credentials cannot delete the bus, change how
// its streams keep data, or act outside their roles: each attempt is
// refused by the server, and afterwards everything is as it was.
func TestRolesCannotDestroyTheBus(t *testing.T) {
	s := startAuthServer(t)
	url := s.ClientURL()
	admin := connect(t, s, Config{MemoryStorage: true})
	ctx := testCtx(t)
	wc := workConsumer(t, admin, "echo")
	_ = wc
	rec := newRecord("echo")
	if _, _, err := admin.createTask(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := admin.queueWork(ctx, workItem(rec), PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.PutRegistryEntry(ctx, schemas.RegistryEntry{Agent: "far", Maintenance: "upgrading"}); err != nil {
		t.Fatal(err)
	}
	events, err := admin.js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	eventsCfg := events.CachedInfo().Config

	tasksStream := kvStream(schemas.BucketTasks)
	changedEvents := eventsCfg
	changedEvents.MaxAge = time.Second
	both := map[string]func(ctx context.Context, js jetstream.JetStream) error{
		"delete the task bucket's stream": func(ctx context.Context, js jetstream.JetStream) error { return js.DeleteStream(ctx, tasksStream) },
		"delete the task bucket": func(ctx context.Context, js jetstream.JetStream) error {
			return js.DeleteKeyValue(ctx, schemas.BucketTasks)
		},
		"purge the task bucket": func(ctx context.Context, js jetstream.JetStream) error {
			st, err := js.Stream(ctx, tasksStream)
			if err != nil {
				return err
			}
			return st.Purge(ctx)
		},
		"delete the events stream": func(ctx context.Context, js jetstream.JetStream) error {
			return js.DeleteStream(ctx, schemas.StreamEvents)
		},
		"delete the work consumer": func(ctx context.Context, js jetstream.JetStream) error {
			return js.DeleteConsumer(ctx, schemas.StreamWork, schemas.ConsumerWork("echo"))
		},
	}
	worker := map[string]func(ctx context.Context, js jetstream.JetStream) error{
		"update the events stream's config": func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.UpdateStream(ctx, changedEvents)
			return err
		},
		"create a stream": func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ROGUE", Subjects: []string{"rogue.>"}, Storage: jetstream.MemoryStorage})
			return err
		},
	}
	edge := map[string]func(ctx context.Context, js jetstream.JetStream) error{
		"register an agent": func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.Publish(ctx, kvPrefix(schemas.BucketAgents)+"impostor", []byte("{}"))
			return err
		},
		"take work": func(ctx context.Context, js jetstream.JetStream) error {
			c, err := js.Consumer(ctx, schemas.StreamWork, schemas.ConsumerWork("echo"))
			if err != nil {
				return err
			}
			batch, err := c.Fetch(1, jetstream.FetchContext(ctx))
			if err != nil {
				return err
			}
			for range batch.Messages() {
			}
			return batch.Error()
		},
		"dead-letter work": func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.Publish(ctx, schemas.SubjectDLQ("echo"), []byte("x"))
			return err
		},
		"put a registry entry": func(ctx context.Context, js jetstream.JetStream) error {
			kv, err := js.KeyValue(ctx, schemas.BucketRegistry)
			if err != nil {
				return err
			}
			_, err = kv.Put(ctx, "far", []byte(`{"agent":"far","maintenance":"taken"}`))
			return err
		},
		"delete a registry entry": func(ctx context.Context, js jetstream.JetStream) error {
			kv, err := js.KeyValue(ctx, schemas.BucketRegistry)
			if err != nil {
				return err
			}
			return kv.Delete(ctx, "far")
		},
		"purge a registry entry": func(ctx context.Context, js jetstream.JetStream) error {
			kv, err := js.KeyValue(ctx, schemas.BucketRegistry)
			if err != nil {
				return err
			}
			return kv.Purge(ctx, "far")
		},
	}
	for what, op := range both {
		denied(t, url, workerCreds, what, op)
		denied(t, url, edgeCreds, what, op)
	}
	for what, op := range worker {
		denied(t, url, workerCreds, what, op)
	}
	for what, op := range edge {
		denied(t, url, edgeCreds, what, op)
	}

	// Nothing changed.
	for _, name := range busStreams {
		if _, err := admin.js.Stream(ctx, name); err != nil {
			t.Errorf("stream %s: %v", name, err)
		}
	}
	if got, _, err := admin.GetTask(ctx, rec.Task.ID); err != nil || got.Task.ID != rec.Task.ID {
		t.Errorf("the task after the attempts: %v", err)
	}
	if st, err := admin.js.Stream(ctx, schemas.StreamEvents); err != nil || st.CachedInfo().Config.MaxAge != eventsCfg.MaxAge {
		t.Errorf("events stream MaxAge after the attempts: %v", err)
	}
	if _, err := admin.js.Stream(ctx, "ROGUE"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("rogue stream: %v, want not found", err)
	}
	if pending, err := admin.AgentBacklog(ctx, "echo"); err != nil || pending != 1 {
		t.Errorf("work pending %d (%v), want the 1 item still queued", pending, err)
	}
	if _, err := admin.agents.Get(ctx, "impostor"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("impostor registration: %v, want not found", err)
	}
	if n := streamMsgs(t, admin, schemas.StreamDLQ); n != 0 {
		t.Errorf("dead-letter stream holds %d, want 0", n)
	}
	if e, ok, err := admin.RegistryEntry(ctx, "far"); err != nil || !ok || e.Maintenance != "upgrading" {
		t.Errorf("the registry entry after the attempts: %+v %v %v, want it as it was", e, ok, err)
	}
}

// The run-time registry is every edge's to read and follow, and only an
// admin edge's to change: an edge's put and delete are refused by the
// server and fail at once with ErrNotPermitted (classified as permission
// denied), not after a publish timeout that would read as a bus to retry,
// and the entry stays as it was (the refusal is returned, not logged as
// well); an admin edge changes it without a single violation.
func TestOnlyTheAdminEdgeChangesTheRegistry(t *testing.T) {
	s := startAuthServer(t)
	url := s.ClientURL()
	ctx := testCtx(t)
	admin := connect(t, s, Config{MemoryStorage: true})
	if err := admin.PutRegistryEntry(ctx, schemas.RegistryEntry{Agent: "far", Maintenance: "upgrading"}); err != nil {
		t.Fatal(err)
	}

	// The edge reads the registry: one entry, all entries, and follows it.
	eb, ev := connectAs(t, url, edgeCreds, Config{})
	if e, ok, err := eb.RegistryEntry(ctx, "far"); err != nil || !ok || e.Maintenance != "upgrading" {
		t.Fatalf("the edge reading an entry: %+v %v %v", e, ok, err)
	}
	if es, err := eb.RegistryEntries(ctx); err != nil || len(es) != 1 {
		t.Fatalf("the edge listing the registry: %+v %v", es, err)
	}
	seen := make(chan schemas.RegistryEntry, 4)
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() {
		watched <- eb.WatchRegistry(wctx, func(e schemas.RegistryEntry, deleted bool) {
			if !deleted {
				seen <- e
			}
		})
	}()
	select {
	case e := <-seen:
		if e.Agent != "far" {
			t.Fatalf("the edge following the registry saw %+v", e)
		}
	case <-ctx.Done():
		t.Fatal("the edge following the registry saw nothing")
	}
	stopWatch()
	if err := <-watched; err != nil {
		t.Fatal(err)
	}
	ev.check(t, "the edge reading the registry")

	// The edge cannot change it: refused at once, well inside a deadline
	// the publish would otherwise wait for.
	for what, change := range map[string]func(context.Context) error{
		"put": func(ctx context.Context) error {
			return eb.PutRegistryEntry(ctx, schemas.RegistryEntry{Agent: "far", Remote: &schemas.RemoteAgentSpec{URL: "http://attacker.example/a2a"}})
		},
		"delete": func(ctx context.Context) error { return eb.DeleteRegistryEntry(ctx, "far") },
	} {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := change(cctx)
		if !errors.Is(err, ErrNotPermitted) || !errors.Is(err, schemas.ErrPermissionDenied) || !errors.Is(err, nats.ErrPermissionViolation) || cctx.Err() != nil {
			t.Errorf("the edge's registry %s: %v (deadline: %v), want the server's refusal as ErrNotPermitted at once", what, err, cctx.Err())
		}
		cancel()
	}
	// Returned, the refusals are not logged as the connection's errors too.
	ev.check(t, "the edge after its refused changes")
	if e, ok, err := admin.RegistryEntry(ctx, "far"); err != nil || !ok || e.Maintenance != "upgrading" || e.Remote != nil {
		t.Fatalf("the entry after the edge's attempts: %+v %v %v, want it as it was", e, ok, err)
	}

	// The admin edge changes it, and its reads go on as the edge's.
	ab, av := connectAs(t, url, edgeAdminCreds, Config{})
	if err := ab.PutRegistryEntry(ctx, schemas.RegistryEntry{Agent: "far", Maintenance: "moved"}); err != nil {
		t.Fatal(err)
	}
	if e, ok, err := ab.RegistryEntry(ctx, "far"); err != nil || !ok || e.Maintenance != "moved" {
		t.Fatalf("the admin edge reading its change: %+v %v %v", e, ok, err)
	}
	if err := ab.DeleteRegistryEntry(ctx, "far"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := admin.RegistryEntry(ctx, "far"); err != nil || ok {
		t.Fatalf("the entry after the admin edge removed it: %v %v", ok, err)
	}
	av.check(t, "the admin edge")
}

// The admin edge's permissions are the edge's plus writing the registry,
// nothing more: what holds for the edge's work holds for its.
func TestAdminEdgeIsTheEdgeWithRegistryWrites(t *testing.T) {
	e, a := RoleEdge.permissions(), RoleAdminEdge.permissions()
	reg := kvPrefix(schemas.BucketRegistry) + ">"
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	if got, want := sorted(a.Publish.Allow), sorted(append(slices.Clone(e.Publish.Allow), reg)); !slices.Equal(got, want) {
		t.Errorf("admin edge publish allow:\n %v\nwant the edge's plus %s:\n %v", got, reg, want)
	}
	if !slices.Contains(e.Publish.Deny, reg) {
		t.Errorf("the edge's publish deny lacks %s", reg)
	}
	if got, want := sorted(a.Publish.Deny), sorted(slices.DeleteFunc(slices.Clone(e.Publish.Deny), func(s string) bool { return s == reg })); !slices.Equal(got, want) {
		t.Errorf("admin edge publish deny:\n %v\nwant the edge's without %s:\n %v", got, reg, want)
	}
	if !slices.Equal(a.Subscribe.Allow, e.Subscribe.Allow) || a.Subscribe.Deny != nil || a.Response != nil || e.Response != nil {
		t.Errorf("subscribe/response: admin edge %+v %+v, edge %+v %+v", a.Subscribe, a.Response, e.Subscribe, e.Response)
	}
	if !RoleAdminEdge.Valid() || !slices.Contains(Roles, RoleAdminEdge) {
		t.Error("the admin edge is not a role of Roles")
	}
}

// An edge and a worker, each with its role's credentials over the network,
// do all of their work without a single permission violation: the worker
// binds to what the edge provisions (waiting for it), registers, takes
// work, stores and publishes a task's changes, hears cancels, dead-letters
// work, submits a child task and caches a card; the edge follows the
// registry, the task bucket and a task's events, submits, cancels, lists,
// sweeps, reads a backlog and the dead letters.
func TestRolesDoTheirWork(t *testing.T) {
	s := startAuthServer(t)
	url := s.ClientURL()
	ctx := testCtx(t)

	// The worker only binds: it waits until the edge has provisioned.
	type conn struct {
		b *Bus
		v *violations
	}
	workerUp := make(chan conn, 1)
	go func() {
		v := &violations{}
		b, err := Connect(ctx, Config{URL: url, Credentials: workerCreds, BindOnly: true, Logger: slog.New(v), MemoryStorage: true, AgentTTL: 3 * time.Second})
		if err != nil {
			t.Errorf("worker connect: %v", err)
		}
		workerUp <- conn{b, v}
	}()
	eb, ev := connectAs(t, url, edgeCreds, Config{AgentTTL: 3 * time.Second})
	w := <-workerUp
	if w.b == nil {
		t.FailNow()
	}
	wb := w.b
	t.Cleanup(func() { _ = wb.Close() })
	defer ev.check(t, "the edge")
	defer w.v.check(t, "the worker")

	// Worker: register, listen for cancels and exhausted work, bind.
	cancels := make(chan schemas.CancelNotice, 4)
	stopCancels, err := wb.SubscribeCancels("echo", func(n schemas.CancelNotice) { cancels <- n })
	if err != nil {
		t.Fatal(err)
	}
	defer stopCancels()
	stopDLQ, err := wb.WatchDeadLetters("echo", func(DeadLetter) {})
	if err != nil {
		t.Fatal(err)
	}
	defer stopDLQ()
	if err := wb.RegisterAgent(ctx, schemas.AgentRegistration{Agent: "echo"}); err != nil {
		t.Fatal(err)
	}
	wc := workConsumer(t, wb, "echo")

	// Edge: follow the registry and the tasks.
	dir := eb.NewAgentDirectory()
	startRun(t, ctx, "agent directory", dir.Run, dir.Ready())
	eventually(t, "the edge to see the agent", func() bool { _, ok := dir.Get("echo"); return ok })
	tw := eb.NewTaskWatcher()
	startRun(t, ctx, "task watcher", tw.Run, tw.Ready())

	// A task through both.
	owner := Owner{Agent: "echo"}
	var wait *TaskWait
	msg := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("hi")}}
	rec, _, err := eb.Submit(ctx, Submission{Agent: "echo", Message: msg}, func(rec *schemas.TaskRecord, _ uint64) { wait = tw.Watch(rec.Task.ID, rec) })
	if err != nil {
		t.Fatal(err)
	}
	defer wait.Close()
	reader, err := eb.ReadEvents(ctx, rec.Task.ID, 0, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	work := fetchOne(t, wc)
	if _, _, err := wb.GetTaskAtLeast(ctx, work.Item.TaskID, work.Item.TaskRevision); err != nil {
		t.Fatal(err)
	}
	if err := work.InProgress(); err != nil {
		t.Fatal(err)
	}
	for _, st := range []schemas.TaskState{schemas.TaskStateWorking, schemas.TaskStateCompleted} {
		if _, _, err := wb.Apply(ctx, work.Item.TaskID, TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: st}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := work.Ack(); err != nil {
		t.Fatal(err)
	}
	if got, err := wait.UntilState(ctx, schemas.TaskState.Terminal); err != nil || got.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("the edge's wait: %v", err)
	}
	for done := false; !done; {
		select {
		case us, ok := <-reader.C():
			if !ok {
				t.Fatalf("event reader ended: %v", reader.Err())
			}
			u := us[len(us)-1]
			done = u.Status != nil && u.Status.Status.State == schemas.TaskStateCompleted
		case <-ctx.Done():
			t.Fatal("no completion event")
		}
	}
	if _, _, err := eb.Task(ctx, owner, rec.Task.ID); err != nil {
		t.Fatal(err)
	}
	// Push configs: the edge stores and deletes them, the worker reads them.
	if _, err := eb.CreatePushConfig(ctx, owner, schemas.TaskPushNotificationConfig{TaskID: rec.Task.ID, ID: "p", URL: "https://hooks.example/a2a"}, "1.0"); err != nil {
		t.Fatal(err)
	}
	if cs, err := wb.PushConfigs(ctx, owner, rec.Task.ID); err != nil || len(cs) != 1 {
		t.Fatalf("the worker read %d push configs: %v", len(cs), err)
	}
	// The worker is a push sender: it takes the wake-up the new config
	// published, reads the task's events, stores its progress, keeps a
	// notification given up on, and wakes the task again.
	pc, err := wb.PushConsumer(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	wakes, err := pc.Fetch(ctx, 1, 10*time.Second)
	if err != nil || len(wakes) != 1 || wakes[0].TaskID != rec.Task.ID {
		t.Fatalf("the worker's push wake-ups: %v, %v", wakes, err)
	}
	var stored int
	if err := wb.storedEvents(ctx, rec.Task.ID, 0, func(e StoredEvent) bool { stored += len(e.Updates); return true }); err != nil || stored < 2 {
		t.Fatalf("the worker read %d stored events: %v", stored, err)
	}
	if _, _, err := wb.ChangePushDelivery(ctx, rec.Task.ID, nil, 0, func(set *schemas.PushConfigSet) error { set.Configs[0].Delivered++; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := wb.DeadLetterPush(ctx, rec.Task.ID, "p", "e1", "test", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := wakes[0].Done(ctx); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*Bus{wb, eb} {
		if err := b.WakePush(ctx, rec.Task.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := eb.DeletePushConfig(ctx, owner, rec.Task.ID, "p"); err != nil {
		t.Fatal(err)
	}
	x := runIndex(t, eb)
	if page, err := x.List(ctx, ListQuery{Owner: Owner{Agent: "echo"}, Limit: 10}); err != nil || len(page.Tasks) != 1 {
		t.Fatalf("listing: %d tasks, %v", len(page.Tasks), err)
	}
	if _, err := x.Sweep(ctx, SweepOptions{Keep: Retention{MaxCount: 100, MaxBytes: 1 << 30}, OrphanAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the backlog to empty", func() bool { n, err := eb.AgentBacklog(ctx, "echo"); return err == nil && n == 0 })

	// A cancel reaches the worker.
	rec2, _, err := eb.Submit(ctx, Submission{Agent: "echo", Message: &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("stop me")}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eb.Cancel(ctx, owner, rec2.Task.ID, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-cancels:
		if n.TaskID != rec2.Task.ID {
			t.Fatalf("cancel notice for %s, want %s", n.TaskID, rec2.Task.ID)
		}
	case <-ctx.Done():
		t.Fatal("no cancel notice")
	}
	// The edge withdrew the canceled task's queued work.
	eventually(t, "the canceled task's work to be withdrawn", func() bool { n, err := eb.AgentBacklog(ctx, "echo"); return err == nil && n == 0 })
	// The worker dead-letters work: a poison item it took, and an
	// exhausted one it moves out of the work stream.
	rec4 := newRecord("echo")
	if _, _, err := eb.createTask(ctx, rec4); err != nil {
		t.Fatal(err)
	}
	if err := eb.queueWork(ctx, workItem(rec4), PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	// Work of the earlier steps may still be on its way to the workers
	// (a withdrawn task's item the dispatcher had moved): each step takes
	// its own task's item.
	poison := fetchTask(t, wc, rec4.Task.ID)
	if err := poison.DeadLetter(ctx, "poison"); err != nil {
		t.Fatal(err)
	}
	rec3 := newRecord("echo")
	if _, _, err := eb.createTask(ctx, rec3); err != nil {
		t.Fatal(err)
	}
	if err := eb.queueWork(ctx, workItem(rec3), PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	exhausted := fetchTask(t, wc, rec3.Task.ID)
	if dl, err := wb.moveToDLQ(ctx, "echo", exhausted.seq, 5); err != nil || dl == nil || dl.TaskID != rec3.Task.ID {
		t.Fatalf("moveToDLQ: %+v %v", dl, err)
	}
	if dls, err := eb.deadLetters(ctx, "echo"); err != nil || len(dls) != 2 {
		t.Fatalf("deadLetters: %+v %v", dls, err)
	}

	// A fan-out agent's worker submits and follows a child; a remote
	// agent's worker caches cards.
	child, _, err := wb.Submit(ctx, Submission{Agent: "echo", Message: &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("child")}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	childWork := fetchOne(t, wc)
	if _, _, err := wb.Apply(ctx, childWork.Item.TaskID, TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateCompleted}}}); err != nil {
		t.Fatal(err)
	}
	if err := childWork.Ack(); err != nil {
		t.Fatal(err)
	}
	if got, err := wb.Await(ctx, owner, child.Task.ID); err != nil || got.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("Await child: %v", err)
	}
	if err := wb.PutCard(ctx, &schemas.CachedCard{URL: "https://agent.example", Card: schemas.AgentCard{Name: "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := wb.GetCard(ctx, "https://agent.example"); err != nil {
		t.Fatal(err)
	}
	if err := wb.DeleteCard(ctx, "https://agent.example"); err != nil {
		t.Fatal(err)
	}
	// Both claim the context they make for a caller's task (the fan-out
	// submits its children as the caller), and read each other's claims.
	for _, b := range []*Bus{eb, wb} {
		msg := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("mine")}}
		rec, _, err := b.Submit(ctx, Submission{Agent: "echo", Owner: "alice", Message: msg}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, other := range []*Bus{wb, eb} {
			msg := &schemas.Message{MessageID: schemas.NewID(), ContextID: rec.Task.ContextID, Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("theirs")}}
			if _, _, err := other.Submit(ctx, Submission{Agent: "echo", Owner: "bob", Message: msg}, nil); !errors.Is(err, schemas.ErrInvalidParams) {
				t.Fatalf("bob naming alice's context: %v", err)
			}
		}
	}
}

// testPKI is a certificate authority and a certificate it signed for
// 127.0.0.1, good for servers and clients (as cluster members need).
func testPKI(t testing.TB) (cert, key, ca []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "a2abus test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "a2abus node"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

// A cluster whose members authenticate their routes and speak TLS on
// every listener: an edge and a worker with their roles' credentials,
// trusting the CA, on different members, run a task to its end on R3
// streams; a client that does not trust the CA is refused.
func TestClusterWithCredentialsAndTLS(t *testing.T) {
	cert, key, ca := testPKI(t)
	tlsFiles := &TLSFiles{Cert: cert, Key: key, CA: ca}
	var cfgs [3]ServerConfig
	var routes []string
	for i := range cfgs {
		cfgs[i] = ServerConfig{Name: fmt.Sprintf("n%d", i), DataDir: t.TempDir(),
			Listen: fmt.Sprintf("127.0.0.1:%d", freePort(t)), ClusterName: "a2abus-test", ClusterListen: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			Users: testUsers, ClusterUser: "route", ClusterPassword: "route-pass", TLS: tlsFiles}
		routes = append(routes, "nats://"+cfgs[i].ClusterListen)
	}
	var urls [3]string
	for i := range cfgs {
		cfgs[i].Routes = routes
		s, err := StartServer(cfgs[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Shutdown)
		urls[i] = s.ClientURL()
	}
	if nc, err := nats.Connect(urls[0], nats.UserInfo(edgeCreds.User, edgeCreds.Password)); err == nil {
		nc.Close()
		t.Fatal("a client that does not trust the CA connected")
	}
	trust := &TLSFiles{CA: ca}
	eb, ev := connectAs(t, urls[0], edgeCreds, Config{Replicas: 3, TLS: trust})
	wb, wv := connectAs(t, urls[2], workerCreds, Config{Replicas: 3, TLS: trust, BindOnly: true})
	ctx := testCtx(t)
	wc := workConsumer(t, wb, "echo")
	rec, _, err := eb.Submit(ctx, Submission{Agent: "echo", Message: &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("hi")}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	work := fetchOne(t, wc)
	if _, _, err := wb.Apply(ctx, work.Item.TaskID, TaskEvent{Status: &schemas.TaskStatusUpdateEvent{Status: schemas.TaskStatus{State: schemas.TaskStateCompleted}}}); err != nil {
		t.Fatal(err)
	}
	if err := work.Ack(); err != nil {
		t.Fatal(err)
	}
	if got, err := eb.Await(ctx, Owner{Agent: "echo"}, rec.Task.ID); err != nil || got.Task.Status.State != schemas.TaskStateCompleted {
		t.Fatalf("Await: %v", err)
	}
	st, err := eb.js.Stream(ctx, kvStream(schemas.BucketTasks))
	if err != nil || st.CachedInfo().Config.Replicas != 3 {
		t.Fatalf("task bucket: %v", err)
	}
	ev.check(t, "the edge")
	wv.check(t, "the worker")
}

// A route connection is accepted only with the cluster's credentials:
// whoever reaches a member's route port cannot join the cluster (and so
// read everything) by posing as a member.
func TestRoutesNeedClusterCredentials(t *testing.T) {
	routeAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	s, err := StartServer(ServerConfig{Name: "n0", DataDir: t.TempDir(), Listen: "127.0.0.1:0", Users: testUsers, ClusterName: "a2abus-test",
		ClusterListen: routeAddr, Routes: []string{"nats://" + routeAddr}, ClusterUser: "route", ClusterPassword: "route-pass"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	addr := s.s.ClusterAddr().String()
	for _, tc := range []struct {
		user, pass string
		refused    bool
	}{{"", "", true}, {"route", "wrong", true}, {"route", "route-pass", false}} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(conn)
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
			t.Fatalf("route port greeted with %q, %v", line, err)
		}
		fmt.Fprintf(conn, "CONNECT {\"user\":%q,\"pass\":%q,\"name\":\"rogue\",\"cluster\":\"a2abus-test\",\"headers\":true}\r\nPING\r\n", tc.user, tc.pass)
		var got string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				got += "(" + err.Error() + ")"
				break
			}
			if strings.HasPrefix(line, "-ERR") || strings.HasPrefix(line, "PONG") {
				got = strings.TrimSpace(line)
				break
			}
		}
		conn.Close()
		if refused := strings.Contains(got, "Authorization Violation"); refused != tc.refused {
			t.Errorf("route CONNECT as %q/%q: %s (want refused %t)", tc.user, tc.pass, got, tc.refused)
		}
	}
}

func TestRedactURLsHidesPasswords(t *testing.T) {
	got := RedactURLs("nats://edge:s3cret@a:4222, nats://b:4222,nats://u:p%zz@c")
	if strings.Contains(got, "s3cret") || strings.Contains(got, "p%zz") {
		t.Fatalf("redactURLs left a password: %q", got)
	}
	if !strings.Contains(got, "nats://edge:xxxxx@a:4222") || !strings.Contains(got, "nats://b:4222") {
		t.Fatalf("redactURLs = %q, want the hosts kept", got)
	}
}
