package main

import (
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// roundRobin is the one published port in front of the edges.
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
	ts := httptest.NewServer(rp)
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
