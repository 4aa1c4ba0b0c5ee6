package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// received is one request a test webhook got.
type received struct {
	header http.Header
	body   []byte
}

// webhook is a real receiver on 127.0.0.1. answer decides each request's
// status (nil: 200); what it answered 2xx is in ok.
type webhook struct {
	*httptest.Server
	mu     sync.Mutex
	all    []received
	ok     []received
	answer func(n int, r *http.Request) int
	got    chan struct{}
}

func newWebhook(t *testing.T, answer func(n int, r *http.Request) int) *webhook {
	w := &webhook{answer: answer, got: make(chan struct{}, 1024)}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		n := len(w.all)
		w.all = append(w.all, received{r.Header.Clone(), body})
		w.mu.Unlock()
		status := http.StatusOK
		if w.answer != nil {
			status = w.answer(n, r)
		}
		if status/100 == 2 {
			w.mu.Lock()
			w.ok = append(w.ok, received{r.Header.Clone(), body})
			w.mu.Unlock()
		}
		rw.WriteHeader(status)
		w.got <- struct{}{}
	}))
	t.Cleanup(w.Close)
	return w
}

func (w *webhook) delivered() []received {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ok)
}

// loopbackClient is the outbound guard's client allowing 127.0.0.1 only,
// redirects not followed, as cmd builds it for the sender.
func loopbackClient() *http.Client {
	c := discovery.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}.Client(0)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// startSender runs a push sender on b until the test ends.
func startSender(t *testing.T, b *bus.Bus, opt workers.PushOptions) stored {
	t.Helper()
	st := newStored()
	opt.Stored = st.observe
	if opt.Client == nil {
		opt.Client = loopbackClient()
	}
	if opt.Backoff == 0 {
		opt.Backoff, opt.MaxBackoff = 5*time.Millisecond, 40*time.Millisecond
	}
	s, err := workers.NewPushSender(b, opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("push sender: %v", err)
		}
	})
	return st
}

var pushOwner = bus.Owner{Agent: "steps", Principal: "alice"}

// steps works in n steps: WORKING, an artifact chunk per step, and then
// COMPLETED, or INPUT_REQUIRED when the message says "ask".
func steps(n int) workers.Definition {
	return def("steps", workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
		if err := out.Working(ctx, "starting"); err != nil {
			return err
		}
		for i := range n {
			a := schemas.Artifact{ArtifactID: "out", Parts: []schemas.Part{schemas.TextPart(fmt.Sprintf("step %d;", i))}}
			if err := out.ArtifactChunk(ctx, a, i > 0, i == n-1); err != nil {
				return err
			}
			if err := out.Flush(ctx); err != nil {
				return err
			}
		}
		if p := req.Message.Parts[0].Text; p != nil && *p == "ask" {
			return out.InputRequired(ctx, "more?")
		}
		return out.Complete(ctx, "done")
	}))
}

// pushTask submits a task of alice's for the steps agent with cfg, as a
// message sent with a push config is: the config is stored before the
// work is queued, so every event of the task comes after it.
func pushTask(t *testing.T, b *bus.Bus, text string, cfg schemas.TaskPushNotificationConfig, dialect string) string {
	t.Helper()
	msg := &schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)}}
	rec, _, err := b.Submit(context.Background(), bus.Submission{Agent: pushOwner.Agent, Owner: pushOwner.Principal, Message: msg,
		PushConfig: &cfg, PushDialect: dialect}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Task.ID
}

// storedIDs are the ids of the task's stored events, in order, once the
// log holds the settled record's last event (see readAll).
func storedIDs(t *testing.T, b *bus.Bus, id string) []string {
	t.Helper()
	readAll(t, b, id)
	var ids []string
	for _, e := range bustest.StoredEvents(t, b, id) {
		for _, u := range e.Updates {
			ids = append(ids, u.ID)
		}
	}
	return ids
}

// waitFor waits (bounded) until the webhook has had what cond asks.
func (w *webhook) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-w.got:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; the webhook had %d requests, %d answered 2xx", what, len(w.all), len(w.delivered()))
		}
	}
}

// ids are the notification ids of rs, in order.
func ids(rs []received) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.header.Get(schemas.HeaderNotificationEventID))
	}
	return out
}

// stored is a sender's Stored observer: a signal per stored outcome.
type stored chan struct{}

func newStored() stored { return make(stored, 4096) }

func (s stored) observe(string) {
	select {
	case s <- struct{}{}:
	default:
	}
}

// waitConfigs waits until the task's configs are as cond asks, looking
// again after each outcome a sender stores.
func (s stored) waitConfigs(t *testing.T, b *bus.Bus, id, what string, cond func([]schemas.PushConfigRecord) bool) []schemas.PushConfigRecord {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		cfgs, _, err := b.PushConfigsOf(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(cfgs) {
			return cfgs
		}
		select {
		case <-s:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; configs %+v", what, cfgs)
		}
	}
}

// caughtUp says whether every config of the finished task id has been
// delivered its last event, each kept: a finished task's configs stay
// readable until deleted or the task is.
func caughtUp(t *testing.T, b *bus.Bus, id string) func([]schemas.PushConfigRecord) bool {
	t.Helper()
	last, err := b.LastStoredEvent(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	final := last.LastCursor()
	return func(cfgs []schemas.PushConfigRecord) bool {
		return len(cfgs) > 0 && !slices.ContainsFunc(cfgs, func(c schemas.PushConfigRecord) bool { return c.Delivered < final })
	}
}

func TestPushDeliversEveryEventInOrderWithItsCredentials(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, steps(5), workers.Options{})
	var signed []workers.Notification
	var mu sync.Mutex
	st := startSender(t, b, workers.PushOptions{Sign: func(n workers.Notification) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		signed = append(signed, n)
		return "jwt-" + n.EventID, nil
	}})
	hook := newWebhook(t, nil)
	id := pushTask(t, b, "go", schemas.TaskPushNotificationConfig{URL: hook.URL + "/hook", Token: "tok-1",
		Authentication: &schemas.AuthenticationInfo{Scheme: "Bearer", Credentials: "secret-1"}}, "1.0")
	waitSettled(t, b, id)
	want := storedIDs(t, b, id)
	hook.waitFor(t, "every event", func() bool { return len(hook.delivered()) >= len(want) })
	got := hook.delivered()
	if !slices.Equal(ids(got), want) {
		t.Fatalf("notification ids %v, want the task's events in order %v", ids(got), want)
	}
	var states []schemas.TaskState
	for i, r := range got {
		h := r.header
		if h.Get("Content-Type") != schemas.ContentTypeA2A || h.Get("Authorization") != "Bearer secret-1" ||
			h.Get(schemas.HeaderNotificationToken) != "tok-1" || h.Get(schemas.HeaderNotificationTokenX) != "tok-1" ||
			h.Get(schemas.HeaderNotificationTaskID) != id || h.Get(schemas.HeaderNotificationSignature) != "jwt-"+want[i] {
			t.Fatalf("notification %d headers: %v", i, h)
		}
		var sr schemas.StreamResponse
		if err := json.Unmarshal(r.body, &sr); err != nil {
			t.Fatalf("notification %d body %s: %v", i, r.body, err)
		}
		switch {
		case sr.StatusUpdate != nil:
			if sr.StatusUpdate.TaskID != id {
				t.Fatalf("status of task %s in a notification of %s", sr.StatusUpdate.TaskID, id)
			}
			states = append(states, sr.StatusUpdate.Status.State)
		case sr.ArtifactUpdate != nil:
		default:
			t.Fatalf("notification %d is neither a status nor an artifact update: %s", i, r.body)
		}
	}
	if states[0] != schemas.TaskStateWorking || states[len(states)-1] != schemas.TaskStateCompleted {
		t.Fatalf("states %v, want WORKING first and COMPLETED last", states)
	}
	mu.Lock()
	if len(signed) != len(got) || signed[0].URL != hook.URL+"/hook" || signed[0].TaskID != id || string(signed[0].Body) != string(got[0].body) {
		t.Errorf("signed %d notifications (first %+v), delivered %d", len(signed), signed[0], len(got))
	}
	mu.Unlock()
	st.waitConfigs(t, b, id, "every event delivered, the configs kept", caughtUp(t, b, id))
}

func TestPushRetriesAFailingWebhookInOrder(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, steps(3), workers.Options{})
	st := startSender(t, b, workers.PushOptions{Timeout: 300 * time.Millisecond})
	release := make(chan struct{})
	hook := newWebhook(t, func(n int, r *http.Request) int {
		switch n {
		case 0, 3:
			return http.StatusServiceUnavailable
		case 1:
			return http.StatusInternalServerError
		case 5:
			// no answer within the attempt's timeout
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return http.StatusOK
		}
		return http.StatusOK
	})
	defer close(release)
	id := pushTask(t, b, "go", schemas.TaskPushNotificationConfig{URL: hook.URL}, "1.0")
	waitSettled(t, b, id)
	want := storedIDs(t, b, id)
	hook.waitFor(t, "every event", func() bool {
		return len(slices.Compact(ids(hook.delivered()))) >= len(want)
	})
	// At least once and in order: an event is never delivered after a
	// later one, a repeat follows its own first delivery at once.
	if got := slices.Compact(ids(hook.delivered())); !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	// The failures were retried: the first event was asked three times.
	hook.mu.Lock()
	first := 0
	for _, r := range hook.all {
		if r.header.Get(schemas.HeaderNotificationEventID) == want[0] {
			first++
		}
	}
	hook.mu.Unlock()
	if first != 3 {
		t.Errorf("the first event was posted %d times, want 3 (two failures, then success)", first)
	}
	st.waitConfigs(t, b, id, "every event delivered, the configs kept", caughtUp(t, b, id))
}

func TestPushDeadLettersAfterTheBoundAndMarksTheConfigFailing(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, steps(2), workers.Options{})
	st := startSender(t, b, workers.PushOptions{MaxAttempts: 3})
	hook := newWebhook(t, func(int, *http.Request) int { return http.StatusBadGateway })
	id := pushTask(t, b, "ask", schemas.TaskPushNotificationConfig{ID: "c1", URL: hook.URL}, "1.0")
	waitSettled(t, b, id) // INPUT_REQUIRED: the config stays
	want := storedIDs(t, b, id)
	cfgs := st.waitConfigs(t, b, id, "every event dead-lettered", func(cs []schemas.PushConfigRecord) bool {
		return len(cs) == 1 && cs[0].Failing != nil && cs[0].Failing.DeadLettered == len(want)
	})
	if f := cfgs[0].Failing; !strings.Contains(f.LastError, "502") || strings.Contains(f.LastError, hook.URL) {
		t.Fatalf("config after the bound: failing %+v", f)
	}
	ctx := context.Background()
	c, err := b.PushConfig(ctx, pushOwner, id, "c1")
	if err != nil || c.Failing == nil {
		t.Fatalf("the owner's view of the config: %+v, %v", c, err)
	}
	var got []string
	for _, d := range bustest.PushDeadLetters(t, b, id) {
		if d.ConfigID != "c1" || !strings.Contains(d.Reason, "gave up after 3 attempts") || !strings.Contains(d.Reason, "502") {
			t.Fatalf("dead letter %+v", d)
		}
		var sr schemas.StreamResponse
		if err := json.Unmarshal(d.Body, &sr); err != nil || (sr.StatusUpdate == nil && sr.ArtifactUpdate == nil) {
			t.Fatalf("dead-lettered body %s: %v", d.Body, err)
		}
		got = append(got, d.ConfigID)
	}
	if len(got) != len(want) {
		t.Fatalf("%d dead letters, want %d", len(got), len(want))
	}
	hook.mu.Lock()
	n := len(hook.all)
	hook.mu.Unlock()
	if n < 3 {
		t.Fatalf("the webhook got %d requests, want the 3 attempts", n)
	}
}

func TestPushGoneDisablesTheConfig(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, steps(2), workers.Options{})
	st := startSender(t, b, workers.PushOptions{})
	goneHook := newWebhook(t, func(int, *http.Request) int { return http.StatusGone })
	id := pushTask(t, b, "ask", schemas.TaskPushNotificationConfig{ID: "gone", URL: goneHook.URL}, "1.0")
	waitSettled(t, b, id)
	st.waitConfigs(t, b, id, "the config disabled", func(cs []schemas.PushConfigRecord) bool {
		return len(cs) == 1 && cs[0].Disabled != ""
	})
	goneHook.mu.Lock()
	n := len(goneHook.all)
	goneHook.mu.Unlock()
	if n != 1 {
		t.Fatalf("a webhook that answered 410 got %d requests", n)
	}
}

func TestPushIn03ShapeForA03Registration(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, steps(2), workers.Options{})
	st := startSender(t, b, workers.PushOptions{})
	hook := newWebhook(t, nil)
	id := pushTask(t, b, "go", schemas.TaskPushNotificationConfig{URL: hook.URL, Token: "t03"}, "0.3")
	waitSettled(t, b, id)
	hook.waitFor(t, "the completed task", func() bool {
		for _, r := range hook.delivered() {
			if strings.Contains(string(r.body), `"completed"`) {
				return true
			}
		}
		return false
	})
	for _, r := range hook.delivered() {
		var task schemas.V03Task
		if err := json.Unmarshal(r.body, &task); err != nil || task.Kind != "task" || task.ID != id {
			t.Fatalf("0.3 notification is not a 0.3 task: %s (%v)", r.body, err)
		}
		if r.header.Get(schemas.HeaderNotificationTokenX) != "t03" || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("0.3 notification headers %v", r.header)
		}
	}
	st.waitConfigs(t, b, id, "every event delivered, the configs kept", caughtUp(t, b, id))
}

// A sender whose connection dies mid-backlog (as when its process is
// killed) loses nothing: another sender takes the task's wake-up after
// AckWait and resumes at the cursor.
func TestPushResumesAfterASenderDies(t *testing.T) {
	srv, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, steps(6), workers.Options{})
	doomed := bustest.Connect(t, srv, bustest.Options{})
	stuck := make(chan struct{})
	var once sync.Once
	hook := newWebhook(t, func(n int, r *http.Request) int {
		if n == 3 {
			once.Do(func() { close(stuck) })
			<-r.Context().Done() // the first sender dies waiting here
			return http.StatusOK
		}
		return http.StatusOK
	})
	startSender(t, doomed, workers.PushOptions{AckWait: 500 * time.Millisecond, Timeout: time.Minute})
	id := pushTask(t, b, "go", schemas.TaskPushNotificationConfig{URL: hook.URL}, "1.0")
	<-stuck
	bustest.Abort(doomed)
	startSender(t, b, workers.PushOptions{AckWait: 500 * time.Millisecond})
	waitSettled(t, b, id)
	want := storedIDs(t, b, id)
	hook.waitFor(t, "every event", func() bool { return len(slices.Compact(ids(hook.delivered()))) >= len(want) })
	if got := slices.Compact(ids(hook.delivered())); !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
}

// A redirect is not followed, to loopback or anywhere.
func TestPushDoesNotFollowRedirects(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, steps(1), workers.Options{})
	st := startSender(t, b, workers.PushOptions{MaxAttempts: 2})
	target := newWebhook(t, nil)
	redirect := newWebhook(t, func(int, *http.Request) int { return 0 })
	redirect.Config.Handler = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		http.Redirect(rw, r, target.URL, http.StatusTemporaryRedirect)
	})
	id := pushTask(t, b, "ask", schemas.TaskPushNotificationConfig{ID: "r", URL: redirect.URL}, "1.0")
	waitSettled(t, b, id)
	cfgs := st.waitConfigs(t, b, id, "the redirected notifications dead-lettered", func(cs []schemas.PushConfigRecord) bool {
		return len(cs) == 1 && cs[0].Failing != nil && cs[0].Failing.DeadLettered > 0
	})
	if e := cfgs[0].Failing.LastError; !strings.Contains(e, "307") {
		t.Fatalf("last error %q", e)
	}
	if n := len(target.delivered()); n != 0 {
		t.Fatalf("the redirect's target got %d notifications", n)
	}
}

// The guard is applied at delivery too: a webhook whose name resolves to
// a refused address (localhost, where the policy allows no loopback) is
// never connected to, and its notifications are dead-lettered.
func TestPushRefusesAWebhookThatResolvesToARefusedAddress(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	startRunner(t, b, steps(1), workers.Options{})
	guarded := discovery.Policy{}.Client(0) // public addresses only
	guarded.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	st := startSender(t, b, workers.PushOptions{Client: guarded, MaxAttempts: 2})
	hook := newWebhook(t, nil)
	_, port, _ := strings.Cut(strings.TrimPrefix(hook.URL, "http://"), ":")
	id := pushTask(t, b, "ask", schemas.TaskPushNotificationConfig{ID: "l", URL: "http://localhost:" + port + "/"}, "1.0")
	waitSettled(t, b, id)
	cfgs := st.waitConfigs(t, b, id, "the refused notifications dead-lettered", func(cs []schemas.PushConfigRecord) bool {
		return len(cs) == 1 && cs[0].Failing != nil && cs[0].Failing.DeadLettered > 0
	})
	if e := cfgs[0].Failing.LastError; !strings.Contains(e, "refusing to connect") || strings.Contains(e, "http://") {
		t.Fatalf("last error %q: want the refusal, without the URL", e)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if len(hook.all) != 0 {
		t.Fatalf("the refused webhook got %d requests", len(hook.all))
	}
}

// failingDialer is a transport whose every connection fails with err, as
// net's dialer reports a failure it met below HTTP.
type failingDialer struct{ err error }

func (f failingDialer) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

// The failure a config shows its owner (lastError) says what went wrong
// without naming what the deployment's network said of itself: not the
// resolver asked, not the address a name resolved to, not the local
// address; a connection refused by a real closed port on loopback
// included.
func TestPushLastErrorNamesNoInternalAddress(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	deadURL := closed.URL + "/hook" // nobody listens there once closed
	closed.Close()
	_, deadPort, _ := strings.Cut(strings.TrimPrefix(deadURL, "http://127.0.0.1:"), "/")
	dnsFailure := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "hooks.example", Server: "10.0.0.2:53", IsNotFound: true}}
	refusedAt := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 443}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	resetFrom := &net.OpError{Op: "read", Net: "tcp", Source: &net.TCPAddr{IP: net.ParseIP("10.0.0.5"), Port: 40000}, Addr: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 443}, Err: errors.New("tls: bad record from 10.1.2.3:443")}
	for _, c := range []struct {
		name   string
		client *http.Client
		url    string
		want   string
	}{
		{"a closed port", loopbackClient(), deadURL, "the webhook's host refused the connection"},
		{"a name that does not resolve", &http.Client{Transport: failingDialer{dnsFailure}}, "https://hooks.example/a2a", "the webhook's host name could not be resolved"},
		{"a refused connection", &http.Client{Transport: failingDialer{refusedAt}}, "https://hooks.example/a2a", "the webhook's host refused the connection"},
		{"another failure", &http.Client{Transport: failingDialer{resetFrom}}, "https://hooks.example/a2a", "read: tls: bad record from an address"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, b := bustest.New(t, bustest.Options{})
			startRunner(t, b, steps(1), workers.Options{})
			st := startSender(t, b, workers.PushOptions{Client: c.client, MaxAttempts: 1})
			id := pushTask(t, b, "ask", schemas.TaskPushNotificationConfig{ID: "c", URL: c.url}, "1.0")
			cfgs := st.waitConfigs(t, b, id, "the config failing", func(cs []schemas.PushConfigRecord) bool {
				return len(cs) == 1 && cs[0].Failing != nil
			})
			got := cfgs[0].Failing.LastError
			if got != c.want {
				t.Errorf("lastError %q, want %q", got, c.want)
			}
			for _, internal := range []string{"10.0.0.2", "10.1.2.3", "10.0.0.5", "127.0.0.1", ":" + deadPort, "hooks.example"} {
				if strings.Contains(got, internal) {
					t.Errorf("lastError %q names %s", got, internal)
				}
			}
		})
	}
}
