package main

import (
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// The compose.yaml topology as processes on loopback, with the same flags:
// three `a2abus node` members of a JetStream cluster, two edges behind one
// round-robin front, and worker groups for two agents, all with R3 streams
// and buckets. A node is killed with SIGKILL while tasks flow and later
// restarted on its data dir; every task accepted before, during and after
// reaches a terminal state.
func TestClusterTopologySurvivesNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("processes")
	}
	dir := t.TempDir()
	const n = 3
	var clientAddrs, routeAddrs [n]string
	var routes, urls []string
	for i := range n {
		clientAddrs[i], routeAddrs[i] = freeAddr(t), freeAddr(t)
		routes = append(routes, "nats://"+routeAddrs[i])
		urls = append(urls, "nats://"+clientAddrs[i])
	}
	var nodes [n]*proc
	nodeArgs := func(i int) []string {
		return []string{"node", "--server-name", fmt.Sprintf("nats-%d", i+1), "--data-dir", filepath.Join(dir, fmt.Sprintf("nats-%d", i+1)),
			"--nats-listen", clientAddrs[i], "--cluster-name", "a2abus", "--cluster-listen", routeAddrs[i], "--routes", strings.Join(routes, ",")}
	}
	for i := range n {
		nodes[i] = startProc(t, nodeArgs(i)...)
	}
	env := []string{"NATS_URL=" + strings.Join(urls, ","), "A2ABUS_REPLICAS=3"}
	var edges []string
	for range 2 {
		addr := freeAddr(t)
		p := startProcEnv(t, env, "edge", "--listen", addr, "--public-url", "http://"+addr, "--default-agent", "echo")
		waitReady(t, p, "http://"+addr)
		edges = append(edges, "http://"+addr)
	}
	for _, agent := range []string{"echo", "tck"} {
		startProcEnv(t, env, "worker", "--agent", agent)
	}
	front := roundRobin(t, edges)
	for _, e := range edges {
		waitAgentCard(t, e, "echo")
		waitAgentCard(t, e, "tck")
	}

	type sent struct{ agent, id string }
	var tasks []sent
	send := func(i int) {
		agent, mid := "echo", fmt.Sprintf("m-%d", i)
		if i%3 == 0 {
			agent = "tck" // stays WORKING ~1s: in flight when the node dies
		}
		tasks = append(tasks, sent{agent, sendRetry(t, front, agent, mid).ID})
	}
	for i := range 30 {
		send(i)
	}
	victim := 1
	if err := nodes[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-nodes[victim].done
	nodes[victim].done <- nil
	for i := 30; i < 60; i++ {
		send(i)
	}
	// The node comes back on its data dir and rejoins; work goes on.
	nodes[victim] = startProc(t, nodeArgs(victim)...)
	for i := 60; i < 90; i++ {
		send(i)
	}
	for _, s := range tasks {
		deadline := time.Now().Add(90 * time.Second)
		for {
			task, err := tryGetTask(front, s.agent, s.id)
			if err == nil && task.Status.State.Terminal() {
				if task.Status.State != schemas.TaskStateCompleted {
					t.Fatalf("task %s ended %s: %s", s.id, task.Status.State, task.Status.Message.Text())
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s not finished after the node loss (state %v, err %v)", s.id, task.Status.State, err)
			}
			time.Sleep(50 * time.Millisecond) // polling other processes
		}
	}
}

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
