// Package ui_test drives the dashboard a2abus serves at /ui in a headless
// Chromium, through the Chrome DevTools protocol (chromedp), against a real
// a2abus process: what a user of the page does, checked on the page.
package ui_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/a2abus/a2abus/bus/bustest/freeaddr"
	"github.com/a2abus/a2abus/edge/interop/internal/a2abusbin"
)

const (
	userKey  = "ui-user-key-0123456789abcdef"
	adminKey = "ui-admin-key-0123456789abcdef"
)

// chromium is the browser to drive: $A2ABUS_CHROMIUM, else Debian's
// chromium package (.ci/run installs it).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("A2ABUS_CHROMIUM"); p != "" {
		return p
	}
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("no Chromium to drive: install Debian's chromium package (apt-get install chromium; .ci/run does) or set A2ABUS_CHROMIUM")
	return ""
}

// artefacts is where the screenshots go: $A2ABUS_ARTIFACTS, else a
// directory of the test's own, logged.
func artefacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("A2ABUS_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// remoteAgent is the external agent a remote agent of a2abus proxies: an
// HTTP server that serves a card (once it has one), stopped by the test to
// make the agent unhealthy.
type remoteAgent struct {
	card atomic.Pointer[[]byte]
	srv  *http.Server
	url  string
}

func startRemote(t *testing.T) *remoteAgent {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &remoteAgent{url: "http://" + ln.Addr().String()}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		card := r.card.Load()
		if card == nil || !strings.HasSuffix(req.URL.Path, "/agent-card.json") {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*card)
	})}
	go func() { _ = r.srv.Serve(ln) }()
	t.Cleanup(func() { _ = r.srv.Close() })
	return r
}

// startA2Abus runs "a2abus serve" with a user's and an admin's API key,
// the echo agent (its "/ask" asks for input), an exec agent that works for
// half a minute, and a remote agent of remoteURL checked every second.
func startA2Abus(t *testing.T, remoteURL string) string {
	t.Helper()
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte(userKey+" carol\n"+adminKey+" ops admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "a2abus.json")
	if err := os.WriteFile(config, []byte(`{
  "outbound": {"allowLoopback": true, "requireHTTPS": false},
  "agents": [
    {"name": "echo"},
    {"name": "sleeper", "kind": "exec",
     "exec": {"command": "sh", "args": ["-c", "echo '{\"a2abus\":\"status\",\"text\":\"sleeping\"}'; sleep 30"], "timeout": "60s"}},
    {"name": "far", "kind": "remote", "url": "`+remoteURL+`", "checkEvery": "1s"},
    {"name": "guarded", "kind": "echo"}
  ],
  "approvals": {"agents": ["guarded"]}
}`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeaddr.Addr(t)
	a2abusbin.Start(t, nil, "serve", "--listen", addr, "--nats-listen", "off", "--data-dir", filepath.Join(dir, "data"),
		"--config", config, "--api-key-file", keys)
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("a2abus never became ready: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // polling a process that starts, not synchronising
	}
}

// The dashboard in a real browser: sign in with an API key, send a
// message from the form and watch its task reach COMPLETED live, open the
// task's page, see each agent's workers and (as an admin) a running exec
// task in flight in its agent's backlog, cancel it from its page, answer a
// task that asks for input, see a remote agent go unhealthy, lay out
// without overflowing on a phone's width, and, signed in as a user, see
// no backlog.
func TestDashboardInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a2abus and Chromium")
	}
	browser := chromium(t)
	shots := artefacts(t)
	remote := startRemote(t)
	base := startA2Abus(t, remote.url)
	// The remote agent's card: echo's, as a2abus serves it.
	resp, err := http.Get(base + "/agents/echo/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	card := make([]byte, 0, 4096)
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		card = append(card, buf[:n]...)
		if err != nil {
			break
		}
	}
	resp.Body.Close()
	remote.card.Store(&card)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	// The first run starts the browser, on a context without a deadline
	// (a deadline there would stop the whole browser); every step after it
	// is bounded.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", browser, err)
	}

	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	// step runs actions, its waits bounded, and names the step if it fails.
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			page, _ := chromedp.Run(pctx, chromedp.OuterHTML(css(".view:not([hidden])")))
			t.Fatalf("%s: %v\npage: %.3000s", what, err, page)
		}
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg) // quality 100: PNG
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name), png, 0o644)
		})
	}
	text := func(sel string) string {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		s, err := chromedp.Run(sctx, chromedp.Text(css(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return s
	}
	visible := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitVisible(css(sel)) }
	gone := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitNotVisible(css(sel)) }
	click := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(css(sel)) }
	keys := func(sel, v string) chromedp.Action[chromedp.Void] { return chromedp.SendKeys(css(sel), v) }
	set := func(sel, v string) chromedp.Action[chromedp.Void] { return chromedp.SetValue(css(sel), v) }
	clearField := func(sel string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](fmt.Sprintf(`(document.querySelector(%q).value = "", true)`, sel))(ctx, tg)
			return err
		})
	}
	state := func(sel, st string) string { return fmt.Sprintf(`%s[data-state="%s"]`, sel, st) }
	// overflows tells whether the page is wider than its viewport.
	overflows := func() bool {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		wide, err := chromedp.Run(sctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
		if err != nil {
			t.Fatal(err)
		}
		return wide
	}

	step("signing in",
		chromedp.Navigate(base+"/ui"),
		visible("#key"),
		keys("#key", adminKey),
		click("#signin-form button"),
		visible(`#agent-list [data-agent="echo"]`),
		visible(state(`[data-agent="far"] .badge`, "online")),
		visible("#chart"), // an admin's panel
		// serve runs one worker of each agent, a remote one's too.
		visible(`[data-agent="echo"] .workers[data-workers="1"]`),
		visible(`[data-agent="far"] .workers[data-workers="1"]`),
	)

	// A message from the form, its task followed live to COMPLETED.
	step("sending a message",
		chromedp.Navigate(base+"/ui#/send"),
		visible("#send-form"),
		set("#send-agent", "echo"),
		keys("#send-text", "hello from the dashboard"),
		click("#send-form button"),
		visible(state("#send-state", "TASK_STATE_COMPLETED")),
		shot("send.png"),
	)
	if got := text("#send-output"); !strings.Contains(got, "hello from the dashboard") {
		t.Fatalf("the streamed output: %q", got)
	}
	// The task list, live: the feed brought it; its page from there.
	sctx, cancelStep := context.WithTimeout(ctx, 10*time.Second)
	href, err := chromedp.Run(sctx, chromedp.AttributeValue(css("#send-task"), "href"))
	cancelStep()
	if err != nil || !href.Exists {
		t.Fatalf("the sent task's link: %v %+v", err, href)
	}
	id := href.Value[strings.LastIndex(href.Value, "/")+1:]
	step("opening the task's page from the live list",
		chromedp.Navigate(base+"/ui#/tasks"),
		visible(state("#feed-state", "TASK_STATE_COMPLETED")), // "live"
		visible(fmt.Sprintf(`tr[data-task="%s"] .badge[data-state="TASK_STATE_COMPLETED"]`, id)),
		click(fmt.Sprintf(`tr[data-task="%s"] a`, id)),
		visible(state("#task-state", "TASK_STATE_COMPLETED")),
		visible("#artifacts .artifact"),
		shot("task.png"),
	)
	if got := text("#artifacts"); !strings.Contains(got, "hello from the dashboard") {
		t.Fatalf("the task's artifacts: %q", got)
	}

	// A running exec task, canceled from its page.
	step("starting an exec task",
		chromedp.Navigate(base+"/ui#/send"),
		visible("#send-form"),
		set("#send-agent", "sleeper"),
		clearField("#send-text"),
		keys("#send-text", "take your time"),
		click("#send-form button"),
		visible(state("#send-state", "TASK_STATE_WORKING")),
		click("#send-task"),
		visible(state("#task-state", "TASK_STATE_WORKING")),
		visible("#task-cancel"),
	)
	// While it runs, its work item is in flight: an admin sees it in the
	// agent's backlog line, read from /metrics.
	sctx, cancelStep = context.WithTimeout(ctx, 10*time.Second)
	taskPage, err := chromedp.Run(sctx, chromedp.Location())
	cancelStep()
	if err != nil {
		t.Fatal(err)
	}
	step("seeing the exec task in flight in the agent's backlog",
		chromedp.Navigate(base+"/ui#/agents"),
		visible(`[data-agent="sleeper"] .backlog[data-in-flight="1"]`),
		visible(`[data-agent="echo"] .backlog[data-in-flight="0"]`),
	)
	// Read in one evaluation: the list is redrawn at every poll.
	sctx, cancelStep = context.WithTimeout(ctx, 10*time.Second)
	line, err := chromedp.Run(sctx, chromedp.Evaluate[string](`document.querySelector('[data-agent="sleeper"] .backlog').textContent`))
	cancelStep()
	if err != nil || !strings.Contains(line, "pending 0 · in flight 1 · oldest") {
		t.Fatalf("the sleeper's backlog line: %q (%v)", line, err)
	}
	step("back to the exec task",
		chromedp.Navigate(taskPage),
		visible(state("#task-state", "TASK_STATE_WORKING")),
		visible("#task-cancel"),
	)
	step("canceling it",
		click("#task-cancel"),
		visible(state("#task-state", "TASK_STATE_CANCELED")),
		visible(state("#timeline li", "TASK_STATE_CANCELED")),
		gone("#task-cancel"),
	)

	// A task that asks for input, answered from its page.
	step("starting a task that asks",
		chromedp.Navigate(base+"/ui#/send"),
		visible("#send-form"),
		set("#send-agent", "echo"),
		clearField("#send-text"),
		keys("#send-text", "/ask"),
		click("#send-form button"),
		visible(state("#send-state", "TASK_STATE_INPUT_REQUIRED")),
		click("#send-task"),
		visible(state("#task-state", "TASK_STATE_INPUT_REQUIRED")),
		visible("#answer-form"),
	)
	step("answering it",
		keys("#answer-text", "forty-two"),
		click("#answer-form button"),
		visible(state("#task-state", "TASK_STATE_COMPLETED")),
		gone("#answer-form"),
		shot("answered.png"),
	)
	if got := text("#artifacts"); !strings.Contains(got, "forty-two") {
		t.Fatalf("the answered task's artifacts: %q", got)
	}

	// A task of an agent that needs approval waits for one, and runs once
	// an admin approves it from the approvals view.
	step("sending a task that needs approval",
		chromedp.Navigate(base+"/ui#/send"),
		visible("#send-form"),
		set("#send-agent", "guarded"),
		clearField("#send-text"),
		keys("#send-text", "deploy please"),
		click("#send-form button"),
		visible(state("#send-state", "TASK_STATE_AUTH_REQUIRED")),
	)
	if got := text("#send-output"); !strings.Contains(got, "Waiting for approval by an admin") {
		t.Fatalf("the held task's status: %q", got)
	}
	sctx, cancelStep = context.WithTimeout(ctx, 10*time.Second)
	href, err = chromedp.Run(sctx, chromedp.AttributeValue(css("#send-task"), "href"))
	cancelStep()
	if err != nil || !href.Exists {
		t.Fatalf("the held task's link: %v %+v", err, href)
	}
	held := href.Value[strings.LastIndex(href.Value, "/")+1:]
	row := fmt.Sprintf(`#approval-table tr[data-task="%s"]`, held)
	step("approving it",
		chromedp.Navigate(base+"/ui#/approvals"),
		visible(row),
		shot("approvals.png"),
		keys(row+" input", "looks fine"),
		click(row+" button.approve"),
		visible("#approval-table td.hint"), // "no approvals pending"
		chromedp.Navigate(base+"/ui"+href.Value[strings.Index(href.Value, "#"):]),
		visible(state("#task-state", "TASK_STATE_COMPLETED")),
	)
	if got := text("#artifacts"); !strings.Contains(got, "deploy please") {
		t.Fatalf("the approved task's artifacts: %q", got)
	}

	// The remote agent's server stops: the page shows it unhealthy.
	_ = remote.srv.Close()
	step("seeing the remote agent unhealthy",
		chromedp.Navigate(base+"/ui#/agents"),
		visible(`#agent-list [data-agent="far"]`),
		visible(`[data-agent="far"] .badge:not([data-state="online"])`),
		shot("agents.png"),
	)

	// A phone's width: the layout does not overflow sideways.
	step("a phone's width",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(base+"/ui#/tasks"),
		visible("#task-table tbody tr"),
		shot("phone-tasks.png"),
	)
	if overflows() {
		t.Fatal("the task list overflows a phone's width")
	}
	for _, view := range []string{"agents", "send"} {
		step("a phone's width: "+view, chromedp.Navigate(base+"/ui#/"+view), visible("#"+view+" h2"))
		if overflows() {
			t.Fatalf("the %s view overflows a phone's width", view)
		}
	}

	// A user who is not an admin sees the workers, and no backlog: the
	// page reads it from /metrics, which refuses them.
	step("signing in as a user",
		chromedp.Navigate(base+"/ui#/agents"),
		visible("#signout"),
		click("#signout"),
		visible("#key"),
		keys("#key", userKey),
		click("#signin-form button"),
		visible(`[data-agent="echo"] .workers[data-workers="1"]`),
	)
	sctx, cancelStep = context.WithTimeout(ctx, 10*time.Second)
	backlogs, err := chromedp.Run(sctx, chromedp.Evaluate[int](`document.querySelectorAll("#agent-list .backlog").length`))
	cancelStep()
	if err != nil || backlogs != 0 {
		t.Fatalf("a user's agents view shows %d backlog lines (%v), want none", backlogs, err)
	}
}
