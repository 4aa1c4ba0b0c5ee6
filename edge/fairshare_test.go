package edge_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// subscribeFrom opens a SubscribeToTask stream of task from the address
// from and returns its HTTP status and Retry-After; a stream opened is
// held until the test ends.
func subscribeFrom(t *testing.T, base, task, from string) (status int, retryAfter string) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":%q}}`, task)
	req, _ := http.NewRequest(http.MethodPost, base+"/agents/echo", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("subscribe from %s: %v", from, err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Cleanup(func() { resp.Body.Close() })
		return resp.StatusCode, ""
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatalf("subscribe from %s: 200 without a stream: %s", from, raw)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// Issue 29: held SSE streams filled the whole connection pool and were
// never cut. Config.MaxStreams bounds them, shared by address: past half
// of them open, an address may open one more only below its fair share
// (429 + Retry-After beyond it), and none past the bound (503 +
// Retry-After), while ordinary requests are still served.
func TestStreamsSharedByAddress(t *testing.T) {
	canSendFrom(t, "127.0.3.2")
	const maxStreams = 12
	_, b := bustest.New(t, bustest.Options{})
	runAgent(t, b, workers.EchoDefinition("echo"))
	e := edge.New(b, edge.Config{MaxStreams: maxStreams})
	runEdge(t, e)
	l := listen(t, e.Handler(), edge.HTTPConfig{})
	base := "http://" + l.Addr().String()
	h := &harness{t: t, b: b, url: base}
	h.waitAgent(base, "echo")
	task := mustResult[struct {
		Task schemas.Task `json:"task"`
	}](t, h.call("echo", "SendMessage", send(userMessage(workers.AskCommand), false))).Task // waits for input: its streams stay open

	heavy, other, late := "127.0.3.2", "127.0.3.3", "127.0.3.4"
	for i := range maxStreams / 2 {
		if status, _ := subscribeFrom(t, base, task.ID, heavy); status != http.StatusOK {
			t.Fatalf("stream %d of the first address: %d", i, status)
		}
	}
	// Half are open: from now on each address holds at most its share,
	// half of them once another address holds 4 (the floor: fewer would
	// not count).
	for i := range 4 {
		if status, _ := subscribeFrom(t, base, task.ID, other); status != http.StatusOK {
			t.Fatalf("stream %d of the second address: %d", i, status)
		}
	}
	if status, retry := subscribeFrom(t, base, task.ID, heavy); status != http.StatusTooManyRequests || retry == "" {
		t.Fatalf("a stream past the address's share: %d, Retry-After %q; want 429 with one", status, retry)
	}
	// The last places go to an address below its share; past them, none.
	for i := range 2 {
		if status, _ := subscribeFrom(t, base, task.ID, late); status != http.StatusOK {
			t.Fatalf("stream %d of a third address: %d", i, status)
		}
	}
	if status, retry := subscribeFrom(t, base, task.ID, late); status != http.StatusServiceUnavailable || retry == "" {
		t.Fatalf("a stream past the bound: %d, Retry-After %q; want 503 with one", status, retry)
	}
	// Requests other than streams are not bounded by it.
	getFrom(t, base+"/healthz", late)
	getFrom(t, base+"/a2a/agents", late)
}
