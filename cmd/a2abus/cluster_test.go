package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// roundRobin is the one published port in front of the edges. Like
// deploy/nginx.conf (nginx buffers request bodies unless told not to), it
// reads a request's whole body before forwarding it; answers are streamed
// unbuffered.
//
// The buffering keeps SSE streams whole. A proxied body is read by the
// transport once more after its declared length, to check for EOF. An edge
// answers SubscribeToTask with SSE headers at once, and when those reach
// the client first, writing them makes this server drain and close the
// client's request body (net/http's HTTP/1 server is not full duplex).
// The transport's late read then fails ("invalid Read on closed Body"),
// its write loop closes the connection to the edge, and the stream being
// relayed is cut short ("read error during body copy: use of closed
// network connection"): the client sees HTTP 200 and a stream that ends
// early, often before its first event.
func roundRobin(t *testing.T, backends []string) string {
	var next atomic.Uint64
	var targets []*url.URL
	for _, b := range backends {
		u, _ := url.Parse(b)
		targets = append(targets, u)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(targets[next.Add(1)%uint64(len(targets))])
		},
		FlushInterval: -1,
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// sendRetry sends a non-blocking message, retrying while the cluster
// elects new leaders (a retryable error is an answer, never a silent drop).
func sendRetry(t *testing.T, base, agent, mid string) schemas.Task {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var res struct {
			Task schemas.Task `json:"task"`
		}
		raw, err := tryRPC(base+"/agents/"+agent, "SendMessage", map[string]any{
			"message":       schemas.Message{MessageID: mid, Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("x")}},
			"configuration": map[string]any{"returnImmediately": true},
		}, &res)
		if err == nil && res.Task.ID != "" {
			return res.Task
		}
		if time.Now().After(deadline) {
			t.Fatalf("send %s: %v %s", mid, err, raw)
		}
		time.Sleep(100 * time.Millisecond) // back off as the error asks
	}
}

func tryGetTask(base, agent, id string) (schemas.Task, error) {
	var task schemas.Task
	_, err := tryRPC(base+"/agents/"+agent, "GetTask", map[string]any{"id": id}, &task)
	return task, err
}

// The front keeps SSE streams whole: an answer that starts at once and
// sends its event a moment later reaches the client complete, every time
// (forwarding request bodies unbuffered, a few streams in a thousand were
// cut short on two cores).
func TestFrontKeepsStreamsWhole(t *testing.T) {
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		time.Sleep(2 * time.Millisecond) // the event comes after the headers
		_, _ = io.WriteString(w, "data: last\n\n")
	}))
	defer edge.Close()
	front := roundRobin(t, []string{edge.URL})
	const n = 1000
	cut := 0
	for range n {
		resp, err := http.Post(front, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"x"}}`))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !strings.Contains(string(b), "data: last") {
			cut++
		}
	}
	if cut > 0 {
		t.Fatalf("%d of %d streams cut short by the front", cut, n)
	}
}
