package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// describeEvent names a task event by what a client sees of it.
func describeEvent(sr *schemas.StreamResponse) string {
	switch {
	case sr.StatusUpdate != nil:
		return "status " + string(sr.StatusUpdate.Status.State)
	case sr.ArtifactUpdate != nil:
		return fmt.Sprintf("artifact %s %q", sr.ArtifactUpdate.Artifact.ArtifactID, partsText(sr.ArtifactUpdate.Artifact.Parts))
	case sr.Message != nil:
		return "message"
	}
	return "task"
}

// replayedEvents are the task's status and artifact events as a client
// replaying it from the start sees them.
func replayedEvents(t *testing.T, base, agent, id string) []string {
	t.Helper()
	raw := subscribeAll(t, base, agent, id, "0")
	var out []string
	sc := bufio.NewScanner(strings.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var resp struct {
			Result schemas.StreamResponse `json:"result"`
		}
		if err := json.Unmarshal([]byte(data), &resp); err != nil {
			t.Fatalf("replayed event %s: %v", data, err)
		}
		if r := resp.Result; r.StatusUpdate != nil || r.ArtifactUpdate != nil {
			out = append(out, describeEvent(&r))
		}
	}
	return out
}

// A push sender in a worker process, SIGKILLed while a webhook holds one
// of its notifications, loses nothing: the next worker process delivers
// every task's every event, in order, each signed with a key the edge
// publishes. The receiver is discovery's, verifying against the served
// JWKS.
func TestPushSenderProcessKilledMidBacklogDeliversAll(t *testing.T) {
	if testing.Short() {
		t.Skip("processes")
	}
	dir := t.TempDir()
	keys := filepath.Join(dir, "push-keys.json")
	if err := runPushKeys([]string{"--file", keys}, &strings.Builder{}, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	httpAddr, natsAddr := freeAddr(t), freeAddr(t)
	base := "http://" + httpAddr
	push := []string{"--push", "true", "--push-keys", keys, "--push-allow-http", "true", "--push-allow-private", "true", "--ack-wait", "2s"}
	serve := startProc(t, append([]string{"serve", "--listen", httpAddr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", natsAddr,
		"--agent", "echo", "--push-sender", "false"}, push...)...)
	waitReady(t, serve, base)
	worker := func() *proc {
		return startProc(t, append([]string{"worker", "--nats", "nats://" + natsAddr, "--nats-creds", servedCreds(filepath.Join(dir, "data"), bus.RoleWorker),
			"--agent", "echo"}, push...)...)
	}
	first := worker()

	// The webhook: verifies each notification, records the first delivery
	// of each event per task, and holds the 6th request until the test
	// lets go.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hookURL := "http://" + l.Addr().String() + "/hook"
	ctx := context.Background()
	v, err := discovery.NewNotificationVerifier(ctx, base+"/.well-known/jwks.json", "a2abus", discovery.Policy{AllowLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string][]string{}
	arrived := make(chan string, 1024)
	rc := &discovery.Receiver{Verifier: v, URL: hookURL, Handle: func(_ context.Context, n *discovery.Notification) error {
		if n.Token != "tok" {
			return fmt.Errorf("token %q", n.Token)
		}
		mu.Lock()
		got[n.TaskID] = append(got[n.TaskID], describeEvent(n.Event))
		mu.Unlock()
		arrived <- n.TaskID
		return nil
	}}
	held := make(chan struct{})
	var requests int
	var reqMu sync.Mutex
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqMu.Lock()
		requests++
		n := requests
		reqMu.Unlock()
		if n == 6 {
			close(held)
			<-r.Context().Done() // the sender dies holding it
			return
		}
		rec := &statusRecorder{ResponseWriter: w}
		rc.ServeHTTP(rec, r)
		if rec.status == http.StatusUnauthorized {
			t.Logf("refused: %s", rec.body.String())
		}
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	var ids []string
	for i := range 8 {
		msg := schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(fmt.Sprintf("task %d", i))}}
		var res struct {
			Task schemas.Task `json:"task"`
		}
		raw := rpc(t, base+"/agents/echo", "SendMessage", map[string]any{"message": msg, "configuration": map[string]any{
			"returnImmediately": true, "taskPushNotificationConfig": map[string]any{"url": hookURL, "token": "tok"}}})
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Task.ID)
	}
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatalf("no notification reached the webhook:\n%s", first.output())
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.done
	first.done <- nil
	worker()

	want := map[string][]string{}
	for _, id := range ids {
		waitTask(t, base, "echo", id, 60*time.Second, func(t schemas.Task) bool { return t.Status.State.Terminal() })
		want[id] = replayedEvents(t, base, "echo", id)
	}
	complete := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if len(got[id]) < len(want[id]) {
				return false
			}
		}
		return true
	}
	deadline := time.After(90 * time.Second)
	for !complete() {
		select {
		case <-arrived:
		case <-deadline:
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("not every event was delivered: got %v\nwant %v", got, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if !slices.Equal(got[id], want[id]) {
			t.Errorf("task %s: delivered %q, want its events in order %q", id, got[id], want[id])
		}
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	body   strings.Builder
}

func (r *statusRecorder) WriteHeader(s int) { r.status = s; r.ResponseWriter.WriteHeader(s) }
func (r *statusRecorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// Where a webhook may point is checked when its config is created: https
// only unless allowed, no loopback or private address unless allowed, a
// metadata address never.
func TestWebhookPolicyAtCreate(t *testing.T) {
	check := func(c PushConfig, raw string) error {
		t.Helper()
		p, err := c.policy()
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return checkWebhookWith(p, testNames)(context.Background(), u)
	}
	def := PushConfig{Enabled: true}
	open := PushConfig{Enabled: true, AllowHTTP: true, AllowLoopback: true, AllowPrivate: true}
	for _, c := range []struct {
		cfg    PushConfig
		url    string
		refuse string
	}{
		{def, "https://hooks.example/a2a", ""},
		{def, "http://hooks.example/a2a", "use https"},
		{def, "https://127.0.0.1/h", "a loopback address is not allowed"},
		{def, "https://10.1.2.3/h", "a private network address is not allowed"},
		{def, "https://[::1]/h", "outbound policy"},
		{open, "http://127.0.0.1:9000/h", ""},
		{open, "http://10.1.2.3/h", ""},
		{open, "http://169.254.169.254/latest/meta-data", "a cloud metadata endpoint address is not allowed"},
		{open, "http://[fd00:ec2::254]/", "outbound policy"},
		{PushConfig{AllowHTTP: true, Deny: []string{"203.0.113.0/24"}}, "http://203.0.113.9/", "outbound policy"},
	} {
		err := check(c.cfg, c.url)
		switch {
		case c.refuse == "" && err != nil:
			t.Errorf("%s refused: %v", c.url, err)
		case c.refuse != "" && (err == nil || !strings.Contains(err.Error(), c.refuse)):
			t.Errorf("%s: %v, want a refusal saying %q", c.url, err, c.refuse)
		}
	}
	if _, err := (PushConfig{Allow: []string{"nope"}}).policy(); err == nil {
		t.Error("a bad CIDR prefix was accepted")
	}
}

// testNames is a resolver of fixed names, as a network's DNS would
// answer them: a public host, names of refused addresses, and a name
// that does not exist (whatever is not listed).
var testNames = fixedResolver{
	"hooks.example":            {netip.MustParseAddr("203.0.113.10")},
	"localhost":                {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
	"metadata.google.internal": {netip.MustParseAddr("169.254.169.254")},
	"inside.example":           {netip.MustParseAddr("203.0.113.11"), netip.MustParseAddr("10.0.0.7")},
	"gcp6.example":             {netip.MustParseAddr("fd20:ce::254")},
}

type fixedResolver map[string][]netip.Addr

func (f fixedResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, Server: "10.0.0.2:53", IsNotFound: true}
}

// A webhook named by a host name is checked when its config is created
// on the addresses the name resolves to, not only when dialled: a name of
// a loopback, private or metadata address is refused (every address must
// pass), and so is a name that does not resolve, without naming the
// resolver asked. With private addresses allowed, the cloud credential
// endpoints are refused still.
func TestWebhookHostNamesResolvedAtCreate(t *testing.T) {
	def := PushConfig{Enabled: true}
	open := PushConfig{Enabled: true, AllowHTTP: true, AllowLoopback: true, AllowPrivate: true}
	for _, c := range []struct {
		cfg    PushConfig
		url    string
		refuse string // "" accepted
	}{
		{def, "https://hooks.example/a2a", ""},
		{def, "https://localhost/x", "a loopback address is not allowed"},
		{def, "https://metadata.google.internal/computeMetadata/v1/", "a cloud metadata endpoint address is not allowed"},
		{def, "https://inside.example/x", "a private network address is not allowed"},
		{def, "https://nowhere.example/x", `the webhook's host name "nowhere.example" could not be resolved by this server (it does not exist)`},
		{open, "http://localhost/x", ""},
		{open, "http://inside.example/x", ""},
		{open, "http://metadata.google.internal/", "never cloud metadata addresses"},
		{open, "http://gcp6.example/", "never cloud metadata addresses"},
		{open, "http://[fd20:ce::254]/", "never cloud metadata addresses"},
		{open, "http://169.254.170.23/", "never cloud metadata addresses"},
		{open, "http://[fd00:ec2::23]/", "never cloud metadata addresses"},
		{open, "http://192.0.0.192/", "never cloud metadata addresses"},
	} {
		p, err := c.cfg.policy()
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(c.url)
		err = checkWebhookWith(p, testNames)(context.Background(), u)
		switch {
		case c.refuse == "" && err != nil:
			t.Errorf("%s refused: %v", c.url, err)
		case c.refuse != "" && (err == nil || !strings.Contains(err.Error(), c.refuse)):
			t.Errorf("%s: %v, want a refusal saying %q", c.url, err, c.refuse)
		case err != nil && strings.Contains(err.Error(), "10.0.0.2"):
			t.Errorf("%s: the refusal names the resolver: %v", c.url, err)
		}
	}
}

// Through a real edge with the webhook policy cmd wires into it (the
// system's resolver), a config for https://localhost/x is invalid params
// when it is created, on every way a config is created.
func TestWebhookNamingLoopbackRefusedAtCreate(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	r := workers.NewRunner(b, workers.EchoDefinition("echo"), workers.Options{ShutdownGrace: time.Second})
	rdone := make(chan error, 1)
	go func() { rdone <- r.Run(ctx) }()
	<-r.Ready()
	p, err := PushConfig{Enabled: true}.policy()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	e := edge.New(b, edge.Config{PublicURL: "http://" + ts.Listener.Addr().String(), DefaultAgent: "echo", Push: true, CheckWebhook: checkWebhook(p)})
	ts.Config.Handler = e.Handler()
	ts.Start()
	edone := make(chan error, 1)
	go func() { edone <- e.Run(ctx) }()
	t.Cleanup(func() { ts.Close(); cancel(); <-edone; <-rdone })
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := e.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	var sent schemas.SendMessageResponse
	msg := schemas.Message{MessageID: "m1", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("hi")}}
	if err := json.Unmarshal(rpc(t, ts.URL+"/agents/echo", "SendMessage", map[string]any{"message": msg}), &sent); err != nil || sent.Task == nil {
		t.Fatalf("send: %+v %v", sent, err)
	}
	inline := schemas.Message{MessageID: "m2", Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("hi")}}
	for _, c := range []struct{ method, params string }{
		{"CreateTaskPushNotificationConfig", `{"taskId":"` + sent.Task.ID + `","url":"https://localhost/x"}`},
		{"tasks/pushNotificationConfig/set", `{"taskId":"` + sent.Task.ID + `","pushNotificationConfig":{"url":"https://localhost/x"}}`},
		{"SendMessage", `{"message":` + mustJSON(t, inline) + `,"configuration":{"taskPushNotificationConfig":{"url":"https://localhost/x"}}}`},
	} {
		raw, err := tryRPC(ts.URL+"/agents/echo", c.method, json.RawMessage(c.params), new(json.RawMessage))
		var r struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(raw), &r)
		if err == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "a loopback address is not allowed") {
			t.Errorf("%s with https://localhost/x: %s", c.method, raw)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// At delivery, a webhook whose name resolves to a refused address is
// never connected to, and the failure says so in push's terms.
func TestWebhookClientRefusesAtDial(t *testing.T) {
	p, err := PushConfig{AllowHTTP: true}.policy()
	if err != nil {
		t.Fatal(err)
	}
	hit := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = true }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	_, err = webhookClient(p).Post("http://localhost:"+port+"/", "application/json", strings.NewReader("{}"))
	if err == nil || !strings.Contains(err.Error(), "the webhook resolves to a loopback address, which this server's outbound policy refuses") || hit {
		t.Fatalf("%v (the webhook was hit: %v)", err, hit)
	}
}

// a2abus push-configs shows a task's configs and how their delivery
// stands (a webhook nobody answers: failing, with the reason), and
// deletes one.
func TestPushConfigsCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("processes")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	base := "http://" + addr
	serve := startProc(t, "serve", "--listen", addr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", "off",
		"--push", "true", "--push-allow-http", "true", "--push-allow-private", "true")
	waitReady(t, serve, base)
	dead := "http://" + freeAddr(t) + "/hook" // nobody listens there
	out, stderr, err := cli(t, "send", base, "hello", "--no-wait", "--push-url", dead, "-o", "json")
	if err != nil {
		t.Fatalf("send: %v\n%s", err, stderr)
	}
	var res struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Task.ID == "" {
		t.Fatalf("send answered %s", out)
	}
	taskID := res.Task.ID
	deadline := time.Now().Add(30 * time.Second)
	var listed string
	for {
		listed, stderr, err = cli(t, "push-configs", base, taskID)
		if err != nil {
			t.Fatalf("push-configs: %v\n%s", err, stderr)
		}
		if strings.Contains(listed, "failing since") && strings.Contains(listed, "refused") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the config never showed failing:\n%s", listed)
		}
		time.Sleep(100 * time.Millisecond) // polling another process
	}
	id, _, _ := strings.Cut(strings.TrimSpace(listed), " ")
	if out, _, err := cli(t, "push-configs", base, taskID, "--delete", id); err != nil || !strings.Contains(out, "deleted") {
		t.Fatalf("delete: %q %v", out, err)
	}
	if out, _, err := cli(t, "push-configs", base, taskID); err != nil || !strings.Contains(out, "no push notification configs") {
		t.Fatalf("after the delete: %q %v", out, err)
	}
}
