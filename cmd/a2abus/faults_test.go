package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// The fault tests run the deployment compose.yaml describes, as child
// processes on 127.0.0.1: three clustered NATS nodes (streams and buckets
// R3), two edges behind one port, and worker processes. A load of
// concurrent clients goes through the front port while a fault is
// injected; then every task the system accepted is followed to its end,
// and each test prints what it counted.

// topology is one running deployment.
type topology struct {
	t         *testing.T
	dir       string
	nodes     [3]*proc
	natsAddr  [3]string // each node's client address
	nodeArgs  func(i int) []string
	env       []string
	creds     string // the deployment's NATS credentials (deploymentCreds)
	edges     []string
	edgeProcs []*proc
	front     string
	workers   []*proc
}

// startTopology starts the nodes, two edges (with edgeFlags) and the
// worker processes (each with its own flags), and waits until the front
// port serves every agent in agents.
func startTopology(t *testing.T, edgeFlags []string, workers [][]string, agents ...string) *topology {
	t.Helper()
	tp := &topology{t: t, dir: t.TempDir()}
	tp.creds = deploymentCreds(t, filepath.Join(tp.dir, "creds"))
	var clientAddrs, routeAddrs [3]string
	var routes, urls []string
	for i := range tp.nodes {
		clientAddrs[i], routeAddrs[i] = freeAddr(t), freeAddr(t)
		tp.natsAddr[i] = clientAddrs[i]
		routes = append(routes, "nats://"+routeAddrs[i])
		urls = append(urls, "nats://"+clientAddrs[i])
	}
	tp.nodeArgs = func(i int) []string {
		return []string{"node", "--server-name", fmt.Sprintf("nats-%d", i+1), "--data-dir", filepath.Join(tp.dir, fmt.Sprintf("nats-%d", i+1)),
			"--nats-listen", clientAddrs[i], "--cluster-name", "a2abus", "--cluster-listen", routeAddrs[i], "--routes", strings.Join(routes, ","),
			"--nats-users", filepath.Join(tp.creds, "users.json"), "--cluster-creds", filepath.Join(tp.creds, "cluster")}
	}
	for i := range tp.nodes {
		tp.nodes[i] = startProc(t, tp.nodeArgs(i)...)
	}
	tp.env = []string{"NATS_URL=" + strings.Join(urls, ","), "A2ABUS_REPLICAS=3"}
	for range 2 {
		addr := freeAddr(t)
		p := startProcEnv(t, tp.env, append([]string{"edge", "--listen", addr, "--public-url", "http://" + addr, "--default-agent", "echo",
			"--nats-creds", filepath.Join(tp.creds, "edge")}, edgeFlags...)...)
		waitReady(t, p, "http://"+addr)
		tp.edges = append(tp.edges, "http://"+addr)
		tp.edgeProcs = append(tp.edgeProcs, p)
	}
	for _, w := range workers {
		tp.worker(w...)
	}
	tp.front = roundRobin(t, tp.edges)
	for _, e := range tp.edges {
		for _, a := range agents {
			waitAgentCard(t, e, a)
		}
	}
	return tp
}

// waitAgent waits until every edge serves agent: each follows the
// registry on its own, and the front port spreads requests over all.
func (tp *topology) waitAgent(agent string) {
	for _, e := range tp.edges {
		waitAgentCard(tp.t, e, agent)
	}
}

// worker starts one more worker process.
func (tp *topology) worker(args ...string) *proc {
	p := startProcEnv(tp.t, tp.env, append([]string{"worker", "--nats-creds", filepath.Join(tp.creds, "worker")}, args...)...)
	tp.workers = append(tp.workers, p)
	return p
}

// config writes an agents file into the topology's directory.
func (tp *topology) config(name, content string) string {
	path := filepath.Join(tp.dir, name)
	writeFile(tp.t, path, content)
	return path
}

// sigkill kills p at once, as a crash would, and reaps it.
func sigkill(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-p.done
	p.done <- err // for the cleanup
}

// ledger is what one load run saw: the tasks the system accepted, in
// order (with when each answer came), and the requests it turned away
// with a retryable error.
type ledger struct {
	mu       sync.Mutex
	agent    string
	accepted []string
	at       []time.Time    // when each accepted task's answer arrived
	refused  int            // 503/429 with Retry-After: the client is told to come back
	why      map[string]int // the refusals' error messages
	unusable []string
	answers  []answer // every request, in the order answered
}

// answer is one request of a load: when it was sent and answered, and
// whether a task came back.
type answer struct {
	sent, done time.Time
	ok         bool
}

// add records the answer to a request sent at sent.
func (l *ledger) add(sent time.Time, status int, retry, id, raw string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers = append(l.answers, answer{sent: sent, done: time.Now(), ok: id != ""})
	switch {
	case id != "":
		l.accepted = append(l.accepted, id)
		l.at = append(l.at, time.Now())
	case (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests) && retry != "":
		l.refused++
		var r struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(raw), &r)
		if l.why == nil {
			l.why = map[string]int{}
		}
		l.why[fmt.Sprintf("HTTP %d %q", status, r.Error.Message)]++
	default:
		l.unusable = append(l.unusable, fmt.Sprintf("HTTP %d: %s", status, raw))
	}
}

func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accepted)
}

// maxRequestsPerClient bounds the requests of one load client, whatever
// the run's length.
const maxRequestsPerClient = 50000

// loadClient is the load's HTTP client: an answer that takes longer than
// its timeout is recorded as unusable (the client gave up).
var loadClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// drive sends non-blocking SendMessage requests to agent through base from
// clients concurrent clients until stop is closed. An answer without a
// task must be a retryable refusal (503 or 429 with Retry-After); the
// client then waits as told (capped at 200ms, to keep the run short), as
// a real client would. Anything else is recorded as unusable.
func drive(base, agent string, clients int, stop <-chan struct{}) (*ledger, func()) {
	return drivePaced(base, agent, clients, 0, stop)
}

// drivePaced is drive with each client waiting pace after each task it
// was given before its next request (0: at once).
func drivePaced(base, agent string, clients int, pace time.Duration, stop <-chan struct{}) (*ledger, func()) {
	l := &ledger{agent: agent}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := 0; i < maxRequestsPerClient; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sent := time.Now()
				status, retry, id, raw := sendOnceHTTP(base, agent, fmt.Sprintf("load-%d-%d-%d", c, i, sent.UnixNano()))
				l.add(sent, status, retry, id, raw)
				wait := pace
				if id == "" {
					wait = 200 * time.Millisecond // the back-off the answer asks for
				}
				if wait > 0 {
					select {
					case <-stop:
						return
					case <-time.After(wait):
					}
				}
			}
		})
	}
	return l, wg.Wait
}

// sendOnceHTTP sends one non-blocking message and returns the HTTP status,
// Retry-After, the task id if one was created, and the body otherwise.
func sendOnceHTTP(base, agent, mid string) (status int, retryAfter, id, body string) {
	return sendVia(loadClient, base, agent, mid)
}

// sendVia is sendOnceHTTP with client.
func sendVia(client *http.Client, base, agent, mid string) (status int, retryAfter, id, body string) {
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{
		"message":       schemas.Message{MessageID: mid, Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart("load")}},
		"configuration": map[string]any{"returnImmediately": true},
	}})
	resp, err := client.Post(base+"/agents/"+agent, "application/json", bytes.NewReader(req))
	if err != nil {
		return 0, "", "", err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		Result struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		} `json:"result"`
	}
	_ = json.Unmarshal(raw, &r)
	return resp.StatusCode, resp.Header.Get("Retry-After"), r.Result.Task.ID, string(raw)
}

// outcome is what became of a ledger's tasks.
// missing counts completed tasks whose event log lacks the completion.
type outcome struct{ completed, failed, lost, duplicated, missing int }

// settle follows every accepted task to a terminal state (within a
// deadline for the whole run) and counts: completed, failed, lost (gone,
// or never finished) and duplicated (more than one COMPLETED in the
// task's event log, replayed from the start). It prints the counts.
func (tp *topology) settle(name string, l *ledger, within time.Duration) outcome {
	t := tp.t
	t.Helper()
	var o outcome
	deadline := time.Now().Add(within)
	for _, id := range l.accepted {
		for {
			task, err := tryGetTask(tp.front, l.agent, id)
			if err == nil && task.Status.State.Terminal() {
				if task.Status.State == schemas.TaskStateCompleted {
					o.completed++
					replay := subscribeAll(t, tp.front, l.agent, id, "0")
					switch n := strings.Count(replay, `"state":"TASK_STATE_COMPLETED"`); {
					case n == 0:
						o.missing++
						t.Errorf("task %s: its event log lacks the completion:\n%s", id, replay)
					case n > 1:
						o.duplicated++
						t.Errorf("task %s: %d completions in its event log:\n%s", id, n, replay)
					}
				} else {
					o.failed++
					t.Errorf("task %s ended %s: %s", id, task.Status.State, task.Status.Message.Text())
				}
				break
			}
			if time.Now().After(deadline) {
				o.lost++
				t.Errorf("task %s lost: state %q, err %v", id, task.Status.State, err)
				break
			}
			time.Sleep(50 * time.Millisecond) // polling other processes
		}
	}
	t.Logf("%s: accepted %d, refused (retryable) %d, unusable answers %d; completed %d, failed %d, lost %d, duplicated %d, completion missing from the event log %d",
		name, len(l.accepted), l.refused, len(l.unusable), o.completed, o.failed, o.lost, o.duplicated, o.missing)
	for _, u := range l.unusable {
		t.Errorf("an answer that is neither a task nor a retryable refusal: %s", u)
	}
	return o
}

// until waits (polling) until cond holds, or fails the test.
func until(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling other processes
	}
}

// 1. Worker processes killed with SIGKILL mid-task, again and again, under
// load: every accepted task completes exactly once; none is lost.
func TestFaultWorkersKilledUnderLoad(t *testing.T) {
	scenario(t)
	t.Setenv("A2ABUS_ACK_WAIT", "2s") // inherited by every process: redelivery after 2s
	tp := startTopology(t, nil, nil)
	slow := tp.config("slow.json", `{"agents":[{"name":"slow","kind":"echo","delay":"150ms","concurrency":4}]}`)
	for range 3 {
		tp.worker("--config", slow)
	}
	tp.waitAgent("slow")

	stop := make(chan struct{})
	l, wait := drive(tp.front, "slow", 8, stop)
	kills := 0
	for _, at := range []int{20, 45, 70} {
		until(t, 60*time.Second, fmt.Sprintf("%d accepted tasks", at), func() bool { return l.count() >= at })
		victim := tp.workers[kills%len(tp.workers)]
		sigkill(t, victim) // mid-task: it holds up to 4 tasks of 150ms each
		kills++
		tp.worker("--config", slow) // a supervisor restarts it
	}
	until(t, 60*time.Second, "90 accepted tasks", func() bool { return l.count() >= 90 })
	close(stop)
	wait()
	t.Logf("workers killed: %d", kills)
	o := tp.settle("worker kills", l, 120*time.Second)
	if o.completed != len(l.accepted) || o.lost != 0 || o.duplicated != 0 || o.missing != 0 {
		t.Fatalf("want every accepted task completed once")
	}
}

// 3. One NATS node killed and brought back under load: no accepted task
// is lost, and all finish. (compose.yaml is this topology; see
// TestComposeMatchesProcessTopology.)
func TestClusterTopologySurvivesNodeLoss(t *testing.T) {
	scenario(t)
	t.Setenv("A2ABUS_ACK_WAIT", "5s") // work held by a connection the node took down comes back soon
	tp := startTopology(t, nil, [][]string{{"--agent", "echo"}, {"--agent", "tck"}}, "echo", "tck")
	slow := tp.config("slow.json", `{"agents":[{"name":"slow","kind":"echo","delay":"100ms","concurrency":8}]}`)
	tp.worker("--config", slow)
	tp.worker("--config", slow)
	tp.waitAgent("slow")

	stop := make(chan struct{})
	l, wait := drive(tp.front, "slow", 8, stop)
	until(t, 60*time.Second, "30 accepted tasks", func() bool { return l.count() >= 30 })
	victim := 1
	sigkill(t, tp.nodes[victim])
	before := l.count()
	until(t, 90*time.Second, "30 tasks accepted without the node", func() bool { return l.count() >= before+30 })
	// The node comes back on its data dir and rejoins; work goes on.
	tp.nodes[victim] = startProc(t, tp.nodeArgs(victim)...)
	back := l.count()
	until(t, 90*time.Second, "30 tasks accepted after the node returned", func() bool { return l.count() >= back+30 })
	close(stop)
	wait()
	o := tp.settle("node loss", l, 120*time.Second)
	if o.completed != len(l.accepted) || o.lost != 0 || o.duplicated != 0 || o.missing != 0 {
		t.Fatalf("want every accepted task completed once")
	}
}

// 5. Overload: past the backlog bound new requests get 503 + Retry-After
// (never a silent drop), and the work already accepted is unaffected.
func TestFaultOverloadRefusesClearly(t *testing.T) {
	scenario(t)
	tp := startTopology(t, []string{"--max-backlog", "10"}, nil)
	slow := tp.config("slow.json", `{"agents":[{"name":"slow","kind":"echo","delay":"100ms","concurrency":4}]}`)
	tp.worker("--config", slow)
	tp.waitAgent("slow")

	stop := make(chan struct{})
	l, wait := drive(tp.front, "slow", 16, stop)
	until(t, 60*time.Second, "refusals and accepted work", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.refused >= 20 && len(l.accepted) >= 10
	})
	close(stop)
	wait()
	o := tp.settle("overload", l, 120*time.Second)
	if l.refused == 0 || o.completed != len(l.accepted) || o.lost != 0 || o.duplicated != 0 || o.missing != 0 {
		t.Fatalf("want refusals, and every accepted task completed once")
	}
}

// 6. Eviction and TTL with small bounds: finished tasks beyond the bound
// are deleted oldest first, finished tasks expire after the task TTL, and
// a task that is not finished is never deleted.
func TestFaultEvictionAndTTL(t *testing.T) {
	scenario(t)
	t.Setenv("A2ABUS_TASK_TTL", "8s")
	const keep = 15
	tp := startTopology(t, []string{"--max-finished-tasks", fmt.Sprint(keep), "--sweep-every", "300ms"}, [][]string{{"--agent", "echo"}}, "echo")
	hold := tp.config("hold.json", `{"agents":[{"name":"hold","kind":"echo","delay":"10m","concurrency":1}]}`)
	tp.worker("--config", hold)
	tp.waitAgent("hold")
	unfinished := sendRetry(t, tp.front, "hold", "hold-1").ID

	stop := make(chan struct{})
	l, wait := drive(tp.front, "echo", 4, stop)
	until(t, 60*time.Second, "60 accepted tasks", func() bool { return l.count() >= 60 })
	close(stop)
	wait()
	// Follow each task to its end (tasks may already be evicted by then,
	// so read them as they finish, not after).
	finishedAt := map[string]time.Time{}
	for _, id := range l.accepted {
		until(t, 60*time.Second, "task "+id+" to finish", func() bool {
			task, err := tryGetTask(tp.front, "echo", id)
			if err != nil && strings.Contains(err.Error(), "-32001") {
				return true // already evicted: it finished before newer ones
			}
			if err == nil && task.Status.State.Terminal() {
				finishedAt[id] = task.Status.Timestamp.Time
				return true
			}
			return false
		})
	}
	present := func(id string) bool {
		_, err := tryGetTask(tp.front, "echo", id)
		return err == nil
	}
	until(t, 30*time.Second, fmt.Sprintf("at most %d finished tasks left", keep), func() bool {
		n := 0
		for _, id := range l.accepted {
			if present(id) {
				n++
			}
		}
		return n <= keep
	})
	var kept, evicted []time.Time
	for _, id := range l.accepted {
		at, seen := finishedAt[id]
		switch {
		case present(id):
			kept = append(kept, at)
		case seen:
			evicted = append(evicted, at)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].Before(kept[j]) })
	for _, e := range evicted {
		if len(kept) > 0 && e.After(kept[0]) {
			t.Fatalf("a task finished at %s was evicted while one finished at %s was kept", e, kept[0])
		}
	}
	if task, err := tryGetTask(tp.front, "hold", unfinished); err != nil || task.Status.State.Terminal() {
		t.Fatalf("the unfinished task: %+v %v", task.Status, err)
	}
	t.Logf("eviction: accepted %d, kept %d (bound %d), evicted %d, unfinished kept 1", len(l.accepted), len(kept), keep, len(l.accepted)-len(kept))
	if len(kept) == 0 || len(kept) > keep {
		t.Fatalf("kept %d finished tasks, want 1..%d", len(kept), keep)
	}

	// The task TTL: the kept finished tasks expire; the unfinished one stays.
	until(t, 30*time.Second, "finished tasks to expire after the TTL", func() bool {
		for _, id := range l.accepted {
			if present(id) {
				return false
			}
		}
		return true
	})
	if task, err := tryGetTask(tp.front, "hold", unfinished); err != nil || task.Status.State.Terminal() {
		t.Fatalf("the unfinished task after the TTL: %+v %v", task.Status, err)
	}
	t.Logf("ttl: every finished task expired; the unfinished one is still there")
}
