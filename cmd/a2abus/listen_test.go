package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// cluster3 returns the arguments of three clustered NATS nodes on free
// 127.0.0.1 ports (data under dir, their credentials in dir/creds: see
// deploymentCreds) and their client URLs, comma-separated.
func cluster3(t *testing.T, dir string) (nodeArgs [3][]string, urls string) {
	t.Helper()
	creds := deploymentCreds(t, filepath.Join(dir, "creds"))
	var clients, routes [3]string
	var routeURLs, clientURLs []string
	for i := range 3 {
		clients[i], routes[i] = freeAddr(t), freeAddr(t)
		routeURLs = append(routeURLs, "nats://"+routes[i])
		clientURLs = append(clientURLs, "nats://"+clients[i])
	}
	for i := range 3 {
		nodeArgs[i] = []string{"node", "--server-name", fmt.Sprintf("nats-%d", i+1), "--data-dir", filepath.Join(dir, fmt.Sprintf("nats-%d", i+1)),
			"--nats-listen", clients[i], "--cluster-name", "a2abus", "--cluster-listen", routes[i], "--routes", strings.Join(routeURLs, ","),
			"--nats-users", filepath.Join(creds, "users.json"), "--cluster-creds", filepath.Join(creds, "cluster")}
	}
	return nodeArgs, strings.Join(clientURLs, ",")
}

// get returns the status, Retry-After and body of GET url, or fails.
func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
}

// waitListening polls base/healthz until it answers 200.
func waitListening(t *testing.T, p *proc, base string) {
	t.Helper()
	waitOK(t, p, base+"/healthz", 20*time.Second)
}

// waitOutput polls p's output until it contains want.
func waitOutput(t *testing.T, p *proc, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(p.output(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output never said %q:\n%s", want, p.output())
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("a2abus exited early (%v):\n%s", err, p.output())
		case <-time.After(50 * time.Millisecond): // polling an external process
		}
	}
}

// sendMessage posts a blocking JSON-RPC SendMessage with id "listen-1" and
// returns the status, Retry-After and body of the answer.
func sendMessage(t *testing.T, url, mid, text string) (int, string, []byte) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "listen-1", "method": "SendMessage", "params": map[string]any{
		"message": schemas.Message{MessageID: mid, Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)}},
	}})
	return post(t, http.DefaultClient, url, string(body))
}

// An edge and a worker started before any NATS node of their 3-node
// cluster is up: the edge's port answers at once, alive but not ready,
// refusing A2A calls with a retryable 503 + JSON-RPC error, and both
// processes keep waiting (saying so) instead of giving up. When the nodes
// start and the cluster forms, the edge becomes ready and a message goes
// through it to the worker and back.
func TestEdgeListensBeforeItsClusterForms(t *testing.T) {
	scenario(t)
	dir := t.TempDir()
	nodeArgs, urls := cluster3(t, dir)
	edgeAddr := freeAddr(t)
	base := "http://" + edgeAddr
	edgeProc := startProc(t, "edge", "--nats", urls, "--nats-creds", filepath.Join(dir, "creds", "edge"), "--replicas", "3", "--listen", edgeAddr, "--default-agent", "echo")
	worker := startProc(t, "worker", "--nats", urls, "--nats-creds", filepath.Join(dir, "creds", "worker"), "--replicas", "3", "--agent", "echo")

	waitListening(t, edgeProc, base)
	if status, _, body := get(t, base+"/readyz"); status != 503 || !strings.HasPrefix(body, "not ready: ") || len(strings.TrimSpace(body)) <= len("not ready: ") {
		t.Fatalf("readyz before NATS = %d %q", status, body)
	}
	status, retry, raw := sendMessage(t, base+"/", "listen-early", "too early")
	var refusal struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code int `json:"code"`
			Data []struct {
				Reason string `json:"reason"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &refusal); err != nil {
		t.Fatalf("SendMessage before NATS: %v: %s", err, raw)
	}
	if status != 503 || retry == "" || refusal.JSONRPC != "2.0" || string(refusal.ID) != `"listen-1"` || refusal.Error == nil ||
		refusal.Error.Code != schemas.ErrUnavailable.Code || len(refusal.Error.Data) != 1 || refusal.Error.Data[0].Reason != schemas.ErrUnavailable.Reason {
		t.Fatalf("SendMessage before NATS = %d Retry-After %q %s", status, retry, raw)
	}
	if status, retry, body := get(t, base+"/.well-known/agent-card.json"); status != 503 || retry == "" {
		t.Fatalf("card before NATS = %d Retry-After %q %s", status, retry, body)
	}

	// Both keep waiting and say so; the edge still answers.
	waitOutput(t, edgeProc, "waiting for NATS JetStream", 30*time.Second)
	waitOutput(t, worker, "waiting for NATS JetStream", 30*time.Second)
	if status, _, body := get(t, base+"/readyz"); status != 503 {
		t.Fatalf("readyz while waiting = %d %q", status, body)
	}

	var nodes [3]*proc
	for i := range nodes {
		nodes[i] = startProc(t, nodeArgs[i]...)
	}
	waitReady(t, edgeProc, base)
	waitAgentCard(t, base, "echo")
	if !strings.Contains(edgeProc.output(), "a2abus edge ready") {
		t.Fatalf("the edge did not announce itself:\n%s", edgeProc.output())
	}
	// A cluster that has just formed may still move a leader: a
	// retryable refusal is retried as it asks.
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, _, raw := sendMessage(t, base+"/", "listen-late", "hello cluster")
		var res struct {
			Result struct {
				Task schemas.Task `json:"task"`
			} `json:"result"`
		}
		_ = json.Unmarshal(raw, &res)
		if status == 200 && res.Result.Task.Status.State == schemas.TaskStateCompleted {
			if !strings.Contains(artifactText(res.Result.Task), "hello cluster") {
				t.Fatalf("echo task: %s", raw)
			}
			break
		}
		if status != 503 || time.Now().After(deadline) {
			t.Fatalf("SendMessage after the cluster formed = %d %s", status, raw)
		}
		time.Sleep(250 * time.Millisecond) // backing off as Retry-After asks
	}

	edgeProc.stop(t)
	worker.stop(t)
	for _, n := range nodes {
		n.stop(t)
	}
}

// A stop signal while the edge waits for NATS ends it promptly and
// cleanly.
func TestEdgeStopsCleanlyWhileWaitingForNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	addr := freeAddr(t)
	p := startProc(t, "edge", "--nats", "nats://"+freeAddr(t), "--listen", addr)
	waitListening(t, p, "http://"+addr)
	begin := time.Now()
	p.stop(t)
	if took := time.Since(begin); took > 10*time.Second {
		t.Fatalf("took %v to stop while waiting for NATS", took)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Fatal("the port still answers after the edge exited")
	}
}

// What still fails the start: a port already in use fails at once, before
// any NATS is involved (and serve's embedded NATS port in use too, with
// the reason), and --start-timeout bounds the wait for NATS.
func TestEdgeStartFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	exitsWith := func(t *testing.T, p *proc, within time.Duration, want string) {
		t.Helper()
		select {
		case err := <-p.done:
			p.done <- err
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(p.output(), want) {
				t.Fatalf("exit %v, want code 2 saying %q:\n%s", err, want, p.output())
			}
		case <-time.After(within):
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			t.Fatalf("still running after %v:\n%s", within, p.output())
		}
	}
	t.Run("port in use", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		p := startProc(t, "edge", "--nats", "nats://"+freeAddr(t), "--listen", ln.Addr().String())
		exitsWith(t, p, 15*time.Second, "edge listen")
	})
	t.Run("nats port in use", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		p := startProc(t, "serve", "--listen", freeAddr(t), "--data-dir", t.TempDir(), "--nats-listen", ln.Addr().String())
		exitsWith(t, p, 15*time.Second, "address already in use")
	})
	t.Run("start timeout", func(t *testing.T) {
		addr := freeAddr(t)
		p := startProc(t, "edge", "--nats", "nats://"+freeAddr(t), "--listen", addr, "--start-timeout", "2s")
		waitListening(t, p, "http://"+addr)
		exitsWith(t, p, 20*time.Second, "deadline exceeded")
	})
}
