package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/a2abus/a2abus/schemas"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The cluster fault tests run the compose.yaml topology as processes (see
// startTopology), drive it, and then audit the run: every task a client
// was given is followed to its end and classified, and every task the
// store holds is listed through the A2A ListTasks method, so a task no
// client was given (an orphan) is seen too.

// auditClient is the audit's HTTP client: every call is bounded in time.
var auditClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

// auditRPC makes a JSON-RPC call with the audit's client and decodes the
// result into v; a JSON-RPC error or a transport failure is an error.
func auditRPC(url, method string, params, v any) error {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp, err := auditClient.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, raw)
	}
	if r.Error != nil {
		return fmt.Errorf("rpc error (HTTP %d): %s", resp.StatusCode, r.Error)
	}
	return json.Unmarshal(r.Result, v)
}

// notFound reports whether err is the A2A TaskNotFoundError.
func notFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), `"code":-32001`)
}

// each runs f(i) for every i below n from par goroutines.
func each(n, par int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range par {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

// replayTimeout bounds one replay. The stream of a finished task ends
// after its last event, or, if its log lacks the final event, at the
// edge's next keep-alive check (every 15s by default).
const replayTimeout = 20 * time.Second

// replayClient has no timeout of its own: each replay has its context.
var replayClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

// completions replays a task's event log from its start (SubscribeToTask
// as an A2A 1.1 client, with Last-Event-ID 0: every event after
// generation 0) and counts the COMPLETED status updates in it; gens are
// the generations the events carry, in the order they came, each checked
// against its SSE id. A Task snapshot that closes a stream is not an
// event of the log and is not counted. ended tells whether the stream
// ended by itself within replayTimeout (if not, what came until then is
// counted).
func completions(base, agent, id string) (n int, gens []schemas.Generation, ended bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), replayTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": map[string]any{"id": id}})
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/agents/"+agent, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.1")
	req.Header.Set("Last-Event-ID", "0")
	resp, err := replayClient.Do(req)
	if err != nil {
		return 0, nil, false, err
	}
	defer resp.Body.Close()
	raw, rerr := io.ReadAll(resp.Body) // on a timeout: what came until then
	events := 0
	for _, ev := range parseSSE(string(raw)) {
		var env struct {
			Result schemas.StreamResponse `json:"result"`
			Error  json.RawMessage        `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev.data), &env); err != nil {
			if rerr != nil {
				continue // cut off by the timeout
			}
			return 0, nil, true, fmt.Errorf("event %s: %v", ev.id, err)
		}
		if env.Error != nil {
			return 0, nil, rerr == nil, fmt.Errorf("rpc error in the stream: %s", env.Error)
		}
		events++
		var g schemas.Generation
		switch r := env.Result; {
		case r.StatusUpdate != nil:
			g = r.StatusUpdate.Generation
		case r.ArtifactUpdate != nil:
			g = r.ArtifactUpdate.Generation
		default:
			continue
		}
		if ev.id != strconv.FormatInt(int64(g), 10) {
			return 0, nil, rerr == nil, fmt.Errorf("event id %q carries generation %d", ev.id, g)
		}
		gens = append(gens, g)
		if u := env.Result.StatusUpdate; u != nil && u.Status.State == schemas.TaskStateCompleted {
			n++
		}
	}
	switch {
	case rerr != nil && events == 0:
		return 0, nil, false, fmt.Errorf("no event within %s: %v", replayTimeout, rerr)
	case rerr == nil && events == 0:
		return 0, nil, true, fmt.Errorf("HTTP %d, no events: %s", resp.StatusCode, raw)
	}
	return n, gens, rerr == nil, nil
}

// generationFault says what is wrong with a replayed log's generations:
// misordered (a generation not above the one before: a repeat or a step
// back, which A2A 1.1 forbids), else gap (a step of more than one from
// 2, the first event's: an event whose writer died between storing and
// publishing it), else neither.
func generationFault(gens []schemas.Generation) (misordered, gap bool) {
	prev := schemas.Generation(1) // the task's creation
	for _, g := range gens {
		switch {
		case g <= prev:
			return true, false
		case g != prev+1:
			gap = true
		}
		prev = g
	}
	return false, gap
}

// auditCounts is what an audit found.
type auditCounts struct {
	accepted, refused, unusable int
	completed, failed           int
	stuck                       int // exists, not terminal past the deadline
	lost                        int // gone (or unreadable) at the deadline
	duplicated                  int // more than one COMPLETED in its event log
	missing                     int // completed, but its event log lacks the completion
	misordered                  int // its log's generations repeat or step back
	gaps                        int // its log skips a generation (see generationFault)
	listed                      int // tasks ListTasks returned
	orphans                     int // listed, but no client was given its id
}

func (a auditCounts) String() string {
	return fmt.Sprintf("accepted %d, refused (retryable) %d, unusable answers %d; completed %d, failed %d, stuck %d, lost %d, duplicated %d, completion missing from the event log %d, generations misordered %d, skipped %d; listed %d, orphans %d",
		a.accepted, a.refused, a.unusable, a.completed, a.failed, a.stuck, a.lost, a.duplicated, a.missing, a.misordered, a.gaps, a.listed, a.orphans)
}

// clean is the audit's pass condition: every accepted task completed, once,
// with its completion in its log, and nothing else in the store.
func (a auditCounts) clean() bool {
	return a.completed == a.accepted && a.failed == 0 && a.stuck == 0 && a.lost == 0 &&
		a.duplicated == 0 && a.missing == 0 && a.misordered == 0 && a.orphans == 0
}

// examples keeps the first few lines of one kind and counts the rest.
type examples struct {
	lines []string
	more  int
}

func (e *examples) add(format string, args ...any) {
	if len(e.lines) < 30 {
		e.lines = append(e.lines, fmt.Sprintf(format, args...))
		return
	}
	e.more++
}

func (e *examples) log(t *testing.T, what string) {
	t.Helper()
	if len(e.lines) == 0 {
		return
	}
	s := strings.Join(e.lines, "\n  ")
	if e.more > 0 {
		s += fmt.Sprintf("\n  ... and %d more", e.more)
	}
	t.Logf("%s:\n  %s", what, s)
}

// tally counts lines by kind and renders them most frequent first.
func tally(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d × %s", m[k], k))
	}
	return strings.Join(parts, "; ")
}

// audit follows every task the ledgers' clients were given to its end,
// waiting up to within for all of them together, and classifies each:
// completed, failed, stuck (still there, not terminal at the deadline),
// lost (gone). Each completed task's event log is replayed from the start
// and must hold exactly one completion. Then every task of the ledgers'
// agents is listed through ListTasks (pages of 100): a task no client was
// given is an orphan. It logs one line with every count, examples of each
// kind of failure, and what the processes' logs say about dropped or
// unqueued work.
func (tp *topology) audit(name string, within time.Duration, ls ...*ledger) auditCounts {
	t := tp.t
	t.Helper()
	var a auditCounts
	agentOf := map[string]string{}
	var ids []string
	var acceptedAt []time.Time
	var agents []string
	var unusable examples
	refusedWhy := map[string]int{}
	for _, l := range ls {
		l.mu.Lock()
		if !slices.Contains(agents, l.agent) {
			agents = append(agents, l.agent)
		}
		a.refused += l.refused
		for k, n := range l.why {
			refusedWhy[k] += n
		}
		a.unusable += len(l.unusable)
		for _, u := range l.unusable {
			unusable.add("%s", u)
		}
		for k, id := range l.accepted {
			if _, dup := agentOf[id]; dup {
				t.Errorf("task id %s was given to two clients", id)
				continue
			}
			agentOf[id] = l.agent
			ids = append(ids, id)
			acceptedAt = append(acceptedAt, l.at[k])
		}
		l.mu.Unlock()
	}
	a.accepted = len(ids)
	first := time.Now()
	for _, at := range acceptedAt {
		if at.Before(first) {
			first = at
		}
	}
	// when tells when a task was accepted, counted from the first.
	when := func(i int) string { return fmt.Sprintf("accepted at +%.2fs", acceptedAt[i].Sub(first).Seconds()) }

	// Follow every task until it is terminal, polling those that are not.
	type seen struct {
		state schemas.TaskState
		msg   string
		err   error
	}
	last := make([]seen, len(ids))
	pending := make([]int, len(ids))
	for i := range pending {
		pending[i] = i
	}
	start := time.Now()
	deadline := start.Add(within)
	for len(pending) > 0 {
		each(len(pending), 8, func(k int) {
			i := pending[k]
			var task schemas.Task
			err := auditRPC(tp.edges[i%len(tp.edges)]+"/agents/"+agentOf[ids[i]], "GetTask", map[string]any{"id": ids[i], "historyLength": 0}, &task)
			last[i] = seen{task.Status.State, task.Status.Message.Text(), err}
		})
		rest := pending[:0]
		for _, i := range pending {
			if last[i].err != nil || !last[i].state.Terminal() {
				rest = append(rest, i)
			}
		}
		pending = rest
		if len(pending) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond) // polling other processes
	}
	// A task not found at the deadline is read a few more times: one read
	// may have been answered by a replica that is behind.
	for _, i := range pending {
		for try := 0; try < 3 && notFound(last[i].err); try++ {
			time.Sleep(200 * time.Millisecond) // polling other processes
			var task schemas.Task
			err := auditRPC(tp.edges[(i+try+1)%len(tp.edges)]+"/agents/"+agentOf[ids[i]], "GetTask", map[string]any{"id": ids[i], "historyLength": 0}, &task)
			last[i] = seen{task.Status.State, task.Status.Message.Text(), err}
		}
	}
	followed := time.Since(start)

	var failed, stuck, lost, dup, missing examples
	stuckStates, failedWhy := map[string]int{}, map[string]int{}
	var done []int
	for i, id := range ids {
		s := last[i]
		switch {
		case s.err == nil && s.state == schemas.TaskStateCompleted:
			a.completed++
			done = append(done, i)
		case s.err == nil && s.state.Terminal():
			a.failed++
			failedWhy[fmt.Sprintf("%s %q", s.state, s.msg)]++
			failed.add("task %s (%s) ended %s: %s", id, when(i), s.state, s.msg)
		case s.err == nil:
			a.stuck++
			stuckStates[string(s.state)]++
			stuck.add("task %s (%s) still %s", id, when(i), s.state)
		case notFound(s.err):
			a.lost++
			lost.add("task %s (%s): gone: %v", id, when(i), s.err)
		default:
			a.lost++ // not even readable at the deadline
			lost.add("task %s (%s): unreadable: %v", id, when(i), s.err)
		}
	}

	// Each completed task's log holds its completion once.
	counts := make([]int, len(done))
	gens := make([][]schemas.Generation, len(done))
	ended := make([]bool, len(done))
	errs := make([]error, len(done))
	replayStart := time.Now()
	each(len(done), 8, func(k int) {
		id := ids[done[k]]
		for try := 0; try < 2; try++ { // a replay that failed is made again once
			counts[k], gens[k], ended[k], errs[k] = completions(tp.edges[(k+try)%len(tp.edges)], agentOf[id], id)
			if errs[k] == nil {
				return
			}
		}
	})
	var unended, misgen, gapped examples
	for k, i := range done {
		switch {
		case errs[k] != nil:
			a.missing++
			missing.add("task %s: its event log could not be replayed: %v", ids[i], errs[k])
		case counts[k] == 0:
			a.missing++
			missing.add("task %s: its event log lacks the completion (the replay ended by itself: %t)", ids[i], ended[k])
		case counts[k] > 1:
			a.duplicated++
			dup.add("task %s: %d completions in its event log", ids[i], counts[k])
		}
		if errs[k] == nil && !ended[k] {
			unended.add("task %s: %d completions, and the stream went on", ids[i], counts[k])
		}
		if errs[k] != nil {
			continue
		}
		switch misordered, gap := generationFault(gens[k]); {
		case misordered:
			a.misordered++
			misgen.add("task %s: generations %v", ids[i], gens[k])
		case gap:
			a.gaps++
			gapped.add("task %s: generations %v", ids[i], gens[k])
		}
	}

	replayed := time.Since(replayStart)

	// Everything in the store, through ListTasks.
	listStart := time.Now()
	orphanKinds := map[string]int{}
	var orphans examples
	listed := map[string]bool{}
	for _, agent := range agents {
		token := ""
		for page := 0; page < 100000; page++ {
			var res schemas.ListTasksResponse
			var err error
			for try := 0; try < 5; try++ {
				if err = auditRPC(tp.front+"/agents/"+agent, "ListTasks", map[string]any{"pageSize": 100, "pageToken": token, "historyLength": 0}, &res); err == nil {
					break
				}
				time.Sleep(500 * time.Millisecond) // polling other processes
			}
			if err != nil {
				t.Errorf("ListTasks on %s (page %d): %v", agent, page, err)
				break
			}
			for _, task := range res.Tasks {
				if listed[task.ID] {
					continue
				}
				listed[task.ID] = true
				if _, ok := agentOf[task.ID]; !ok {
					a.orphans++
					orphanKinds[fmt.Sprintf("%s %q", task.Status.State, task.Status.Message.Text())]++
					orphans.add("task %s (agent %s) %s: %s", task.ID, agent, task.Status.State, task.Status.Message.Text())
				}
			}
			if res.NextPageToken == "" {
				break
			}
			token = res.NextPageToken
		}
	}
	a.listed = len(listed)
	listedIn := time.Since(listStart)
	unlisted := 0
	for _, id := range ids {
		if !listed[id] {
			unlisted++
		}
	}

	t.Logf("audit %s: %s", name, a)
	t.Logf("audit %s: followed the tasks for %s (deadline %s), replayed their logs in %s (replays not ended after %s: %d), listed the store in %s; accepted tasks absent from ListTasks: %d",
		name, followed.Round(time.Millisecond), within, replayed.Round(time.Millisecond), replayTimeout, len(unended.lines)+unended.more, listedIn.Round(time.Millisecond), unlisted)
	if len(refusedWhy) > 0 {
		t.Logf("audit %s: refusals by answer: %s", name, tally(refusedWhy))
	}
	if len(stuckStates) > 0 {
		t.Logf("audit %s: stuck by state: %s", name, tally(stuckStates))
	}
	if len(failedWhy) > 0 {
		t.Logf("audit %s: failed by state and message: %s", name, tally(failedWhy))
	}
	if len(orphanKinds) > 0 {
		t.Logf("audit %s: orphans by state and message: %s", name, tally(orphanKinds))
	}
	stuck.log(t, "stuck")
	lost.log(t, "lost")
	failed.log(t, "failed")
	dup.log(t, "duplicated")
	unended.log(t, fmt.Sprintf("replays of a completed task's log that had not ended after %s (not counted above unless the completion was missing)", replayTimeout))
	missing.log(t, "completion missing")
	misgen.log(t, "generations misordered")
	gapped.log(t, "generations skipped (an event stored but never published: its writer died in between)")
	orphans.log(t, "orphans")
	unusable.log(t, "unusable answers")
	tp.logSays(name)
	return a
}

// logSays logs how often the processes' logs mention the known ways to
// strand or orphan a task, for whoever reads a failure.
func (tp *topology) logSays(name string) {
	count := func(ps []*proc, s string) int {
		n := 0
		for _, p := range ps {
			n += strings.Count(p.output(), s)
		}
		return n
	}
	tp.t.Logf("audit %s: worker logs: %d × %q; edge logs: %d × %q",
		name, count(tp.workers, "work for a task that no longer exists"), "work for a task that no longer exists",
		count(tp.edgeProcs, "queueing work failed"), "queueing work failed")
}

// natsNode returns the index of the node p holds a client connection to,
// read from Linux's /proc (the socket inodes of p's descriptors, matched
// against the TCP table); -1 if it cannot tell.
func (tp *topology) natsNode(p *proc) int {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid), fd.Name()))
		if ino, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	ports := map[uint64]int{}
	for i, addr := range tp.natsAddr {
		_, port, _ := strings.Cut(addr, ":")
		n, _ := strconv.ParseUint(port, 10, 16)
		ports[n] = i
	}
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != "01" || !inodes[f[9]] { // 01: established
			continue
		}
		_, hexPort, _ := strings.Cut(f[2], ":")
		port, err := strconv.ParseUint(hexPort, 16, 16)
		if i, ok := ports[port]; err == nil && ok {
			return i
		}
	}
	return -1
}

// jsLeaders asks the cluster which node leads each of the streams and
// the work consumer of agent: a map from "stream" or "stream/consumer" to
// the node's index, -1 where it cannot tell.
func (tp *topology) jsLeaders(agent string) map[string]int {
	out := map[string]int{}
	var urls []string
	for _, a := range tp.natsAddr {
		urls = append(urls, "nats://"+a)
	}
	admin := adminCreds(tp.t, tp.creds)
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Timeout(5*time.Second), nats.UserInfo(admin.User, admin.Password))
	if err != nil {
		return out
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	node := func(c *jetstream.ClusterInfo) int {
		var i int
		if c == nil {
			return -1
		}
		if _, err := fmt.Sscanf(c.Leader, "nats-%d", &i); err != nil {
			return -1
		}
		return i - 1
	}
	for _, name := range []string{"KV_" + schemas.BucketTasks, schemas.StreamWork, schemas.StreamEvents} {
		out[name] = -1
		if s, err := js.Stream(ctx, name); err == nil {
			out[name] = node(s.CachedInfo().Cluster)
		}
	}
	key := schemas.StreamWork + "/" + schemas.ConsumerWork(agent)
	out[key] = -1
	if c, err := js.Consumer(ctx, schemas.StreamWork, schemas.ConsumerWork(agent)); err == nil {
		out[key] = node(c.CachedInfo().Cluster)
	}
	return out
}

// lead moves the leadership of stream (or, if consumer is not empty, of
// that consumer of stream) to node i, as an operator would: a leader
// stepdown through the JetStream API naming i as the preferred leader. It
// waits until the cluster reports i as the leader.
func (tp *topology) lead(i int, stream, consumer string) {
	t := tp.t
	t.Helper()
	admin := adminCreds(t, tp.creds)
	nc, err := nats.Connect("nats://"+tp.natsAddr[i], nats.Timeout(5*time.Second), nats.UserInfo(admin.User, admin.Password))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	subject, key := "$JS.API.STREAM.LEADER.STEPDOWN."+stream, stream
	if consumer != "" {
		subject, key = "$JS.API.CONSUMER.LEADER.STEPDOWN."+stream+"."+consumer, stream+"/"+consumer
	}
	agent := strings.TrimPrefix(consumer, "work-")
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; tp.jsLeaders(agent)[key] != i; n++ {
		if time.Now().After(deadline) {
			t.Fatalf("%s: could not move its leader to nats-%d", key, i+1)
		}
		if n%20 == 0 { // ask again now and then; an election takes a moment
			req := fmt.Sprintf(`{"placement":{"preferred":"nats-%d"}}`, i+1)
			if _, err := nc.Request(subject, []byte(req), 5*time.Second); err != nil {
				t.Logf("%s leader stepdown: %v", key, err)
			}
		}
		time.Sleep(50 * time.Millisecond) // polling the cluster
	}
}

// taskBucketLeader returns the index of the node that leads the task
// bucket's stream, asked of the cluster; -1 if it cannot tell.
func (tp *topology) taskBucketLeader() int {
	return tp.jsLeaders("")["KV_"+schemas.BucketTasks]
}

// leadersLine renders jsLeaders for a log line.
func leadersLine(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s nats-%d", k, m[k]+1))
	}
	return strings.Join(parts, ", ")
}

// renice lowers the CPU priority of every thread of p to nice n (Linux:
// priority is per thread; threads started later inherit it from the
// thread that starts them).
func renice(p *proc, n int) error {
	dir := fmt.Sprintf("/proc/%d/task", p.cmd.Process.Pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil {
			return err
		}
	}
	return nil
}

// prober sends one small non-blocking request to one edge directly every
// interval, each on its own (a slow answer does not delay the next probe),
// and records in its ledger when each was sent and answered. The tasks it
// is given are audited with the load's.
type prober struct {
	edge    string
	l       *ledger
	mu      sync.Mutex
	skipped int // ticks with too many probes in flight
}

// probeClient bounds one probe in time.
var probeClient = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}

func startProber(edge, agent string, every time.Duration, stop <-chan struct{}) (*prober, func()) {
	pr := &prober{edge: edge, l: &ledger{agent: agent}}
	var wg sync.WaitGroup
	inflight := make(chan struct{}, 32)
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 0; n < 20000; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			select {
			case inflight <- struct{}{}:
			default:
				pr.mu.Lock()
				pr.skipped++
				pr.mu.Unlock()
				continue
			}
			wg.Go(func() {
				defer func() { <-inflight }()
				sent := time.Now()
				status, retry, id, raw := sendVia(probeClient, edge, agent, fmt.Sprintf("probe-%d-%d", n, sent.UnixNano()))
				pr.l.add(sent, status, retry, id, raw)
			})
		}
	})
	return pr, wg.Wait
}

// phase is a named span of a run.
type phase struct {
	name       string
	from, till time.Time
}

// report logs, for the span of each phase, what the prober saw: probes
// sent, answered with a task, not; and the longest gap between two
// successive answers with a task (counted from the phase's start).
func (pr *prober) report(t *testing.T, label string, phases []phase) {
	t.Helper()
	pr.l.mu.Lock()
	ps := append([]answer(nil), pr.l.answers...)
	pr.l.mu.Unlock()
	pr.mu.Lock()
	skipped := pr.skipped
	pr.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool { return ps[i].done.Before(ps[j].done) })
	var parts []string
	for _, ph := range phases {
		sent, ok := 0, 0
		prev, gap := ph.from, time.Duration(0)
		var slowest time.Duration
		for _, p := range ps {
			if !p.sent.Before(ph.from) && p.sent.Before(ph.till) {
				sent++
				if p.ok {
					ok++
				}
				slowest = max(slowest, p.done.Sub(p.sent))
			}
			if p.ok && p.done.After(ph.from) && p.done.Before(ph.till) {
				gap = max(gap, p.done.Sub(prev))
				prev = p.done
			}
		}
		gap = max(gap, ph.till.Sub(prev))
		parts = append(parts, fmt.Sprintf("%s: probes %d, with a task %d, without %d, slowest answer %.1fs, longest gap between successes %.1fs",
			ph.name, sent, ok, sent-ok, slowest.Seconds(), gap.Seconds()))
	}
	t.Logf("prober %s: %s; ticks skipped (32 probes in flight) %d", label, strings.Join(parts, "; "), skipped)
}

// recovery is the time from at until the edge first answered, with a
// task, a probe sent at or after at; -1 if it never did.
func (pr *prober) recovery(at time.Time) time.Duration {
	pr.l.mu.Lock()
	defer pr.l.mu.Unlock()
	best := time.Duration(-1)
	for _, p := range pr.l.answers {
		if p.ok && !p.sent.Before(at) {
			if d := p.done.Sub(at); best < 0 || d < best {
				best = d
			}
		}
	}
	return best
}

// throughput logs, for each phase, the tasks l was given per second
// (counted when the answers came), and of the requests sent in the phase:
// how many, how many were answered without a task, and the slowest
// answer.
func throughput(t *testing.T, l *ledger, phases []phase) {
	t.Helper()
	l.mu.Lock()
	answers := append([]answer(nil), l.answers...)
	l.mu.Unlock()
	var parts []string
	for _, ph := range phases {
		n, sent, without := 0, 0, 0
		var slowest time.Duration
		for _, a := range answers {
			if a.ok && !a.done.Before(ph.from) && a.done.Before(ph.till) {
				n++
			}
			if !a.sent.Before(ph.from) && a.sent.Before(ph.till) {
				sent++
				if !a.ok {
					without++
				}
				slowest = max(slowest, a.done.Sub(a.sent))
			}
		}
		d := ph.till.Sub(ph.from).Seconds()
		parts = append(parts, fmt.Sprintf("%s: %d tasks in %.1fs = %.1f/s (requests sent %d, answered without a task %d, slowest answer %.1fs)",
			ph.name, n, d, float64(n)/d, sent, without, slowest.Seconds()))
	}
	t.Logf("throughput through the front port: %s", strings.Join(parts, "; "))
}

// workerOn starts one more worker process given only node i's address
// (it connects there, and learns the others from the cluster).
func (tp *topology) workerOn(i int, args ...string) *proc {
	env := append(append([]string(nil), tp.env...), "NATS_URL=nats://"+tp.natsAddr[i])
	p := startProcEnv(tp.t, env, append([]string{"worker", "--nats-creds", filepath.Join(tp.creds, "worker")}, args...)...)
	tp.workers = append(tp.workers, p)
	return p
}

// No fault at all: concurrent load through the front port, three echo
// worker processes. Every accepted task completes, once, with its
// completion in its log, and the store holds nothing no client was given.
//
// A worker reads the task of each work item it takes. That read may be
// answered by any replica of the task bucket, and a follower that has not
// yet applied the edge's create says the task does not exist; a worker
// that then drops the work leaves the task SUBMITTED for good. To make
// that window show in a short run, the three workers connect to the node
// that leads the task bucket (in compose a worker connects to a random
// node: this is one of its cases), the same node is made to lead the work
// stream, its consumer and the events stream (leader stepdowns naming it,
// as an operator would), and one follower runs at a lower CPU priority
// (nice 10), like a node on a busier host. Nothing fails; that node is
// only a little behind the others. (Measured on 2 cores: with the workers
// on random nodes and no node reniced, about 0.05% of tasks were
// stranded; set up like this, about 5%, with or without -race.)
func TestClusterNoFaultStrandsNothing(t *testing.T) {
	scenario(t)
	if runtime.GOOS != "linux" {
		t.Skip("renices a node's threads through /proc (Linux)")
	}
	const (
		rounds   = 3
		clients  = 8
		pace     = 20 * time.Millisecond // each client's wait after each task
		roundFor = 3 * time.Second       // the lag builds up under sustained load
	)
	tp := startTopology(t, nil, nil)
	leader := -1
	until(t, 30*time.Second, "the task bucket's leader", func() bool { leader = tp.taskBucketLeader(); return leader >= 0 })
	for range 3 {
		tp.workerOn(leader, "--agent", "echo")
	}
	for _, e := range tp.edges {
		waitAgentCard(t, e, "echo")
	}
	// The work and the events are led by the same node; the slow node
	// leads none of what a task goes through.
	tp.lead(leader, schemas.StreamWork, "")
	tp.lead(leader, schemas.StreamWork, schemas.ConsumerWork("echo"))
	tp.lead(leader, schemas.StreamEvents, "")
	slow := (leader + 1) % len(tp.nodes)
	if err := renice(tp.nodes[slow], 10); err != nil {
		t.Fatalf("renice nats-%d: %v", slow+1, err)
	}
	t.Logf("leaders: %s; nats-%d runs at nice 10; workers connected to nats-%d, nats-%d, nats-%d; edges to nats-%d, nats-%d",
		leadersLine(tp.jsLeaders("echo")), slow+1, tp.natsNode(tp.workers[0])+1, tp.natsNode(tp.workers[1])+1, tp.natsNode(tp.workers[2])+1,
		tp.natsNode(tp.edgeProcs[0])+1, tp.natsNode(tp.edgeProcs[1])+1)

	var ls []*ledger
	start := time.Now()
	for range rounds {
		stop := make(chan struct{})
		l, wait := drivePaced(tp.front, "echo", clients, pace, stop)
		<-time.After(roundFor) // the round's length
		close(stop)
		wait()
		ls = append(ls, l)
	}
	t.Logf("load: %d rounds of %d clients (each waiting %s after each task) through the front port in %s; the task bucket's leader is now nats-%d",
		rounds, clients, pace, time.Since(start).Round(time.Millisecond), tp.taskBucketLeader()+1)
	// 40s: time enough for a redelivery after the default 30s AckWait.
	a := tp.audit("no fault", 40*time.Second, ls...)
	if !a.clean() {
		t.Fatalf("want every accepted task completed once and no orphans: %s", a)
	}
}

// nodeLossPlan is the schedule of a node-loss run, counted from the start
// of the load.
type nodeLossPlan struct {
	clientsPerEdge int
	pace           time.Duration // each load client's wait after each task it is given
	kill           time.Duration // SIGKILL one node
	restart        time.Duration // start it again on its data dir
	workerKill     time.Duration // SIGKILL one worker process; a supervisor starts another
	end            time.Duration // stop the load
	within         time.Duration // the audit's deadline
}

// nodeLossAudited runs plan: load through the front port and a light
// prober on each edge directly; one node SIGKILLed (the one the first edge
// is connected to) and later restarted on its data dir; one worker process
// SIGKILLed and replaced. It logs, never asserts, each edge's time from
// the kill to its next success and the throughput in each phase, then
// audits the load's and the probers' tasks.
func nodeLossAudited(t *testing.T, name string, plan nodeLossPlan) {
	t.Setenv("A2ABUS_ACK_WAIT", "5s") // work held by a connection the node took down comes back soon
	tp := startTopology(t, nil, nil)
	// An echo that takes a moment, so the worker kill lands mid-task.
	cfg := tp.config("echo.json", `{"agents":[{"name":"echo","kind":"echo","delay":"30ms","concurrency":16}]}`)
	for range 3 {
		tp.worker("--config", cfg)
	}
	for _, e := range tp.edges {
		waitAgentCard(t, e, "echo")
	}
	victim := tp.natsNode(tp.edgeProcs[0])
	if victim < 0 {
		t.Logf("cannot tell which node edge 1 is connected to; killing nats-2")
		victim = 1
	}
	// The same case in every run: the node to be killed leads the work
	// stream, its consumer and the events stream; another node leads the
	// task bucket. So while the work stream elects a new leader, a task
	// can be stored but its work not queued.
	tp.lead((victim+1)%len(tp.nodes), "KV_"+schemas.BucketTasks, "")
	tp.lead(victim, schemas.StreamWork, "")
	tp.lead(victim, schemas.StreamWork, schemas.ConsumerWork("echo"))
	tp.lead(victim, schemas.StreamEvents, "")
	var conns []string
	for i, e := range tp.edgeProcs {
		conns = append(conns, fmt.Sprintf("edge %d nats-%d", i+1, tp.natsNode(e)+1))
	}
	for i, w := range tp.workers {
		conns = append(conns, fmt.Sprintf("worker %d nats-%d", i+1, tp.natsNode(w)+1))
	}
	t.Logf("connected: %s; leaders: %s; the node to kill: nats-%d", strings.Join(conns, ", "), leadersLine(tp.jsLeaders("echo")), victim+1)

	stop := make(chan struct{})
	var probers []*prober
	var waits []func()
	for _, e := range tp.edges {
		pr, wait := startProber(e, "echo", 200*time.Millisecond, stop)
		probers = append(probers, pr)
		waits = append(waits, wait)
	}
	l, wait := drivePaced(tp.front, "echo", plan.clientsPerEdge*len(tp.edges), plan.pace, stop)
	waits = append(waits, wait)
	t0 := time.Now()
	// The schedule: each step happens at its time into the run, whatever
	// the processes are doing (no process is waited for).
	at := func(d time.Duration) time.Time {
		timer := time.NewTimer(time.Until(t0.Add(d)))
		<-timer.C
		return time.Now()
	}
	tKill := at(plan.kill)
	sigkill(t, tp.nodes[victim])
	t.Logf("%.1fs: nats-%d SIGKILLed (accepted so far %d)", tKill.Sub(t0).Seconds(), victim+1, l.count())
	tRestart := at(plan.restart)
	tp.nodes[victim] = startProc(t, tp.nodeArgs(victim)...)
	t.Logf("%.1fs: nats-%d restarted on its data dir", tRestart.Sub(t0).Seconds(), victim+1)
	tWorker := at(plan.workerKill)
	sigkill(t, tp.workers[0])
	tp.worker("--config", cfg) // a supervisor restarts it
	t.Logf("%.1fs: worker 1 SIGKILLed and replaced", tWorker.Sub(t0).Seconds())
	tEnd := at(plan.end)
	close(stop)
	for _, w := range waits {
		w()
	}
	t.Logf("load: %d clients through the front port (each waiting %s after each task) for %.1fs; leaders now: %s",
		plan.clientsPerEdge*len(tp.edges), plan.pace, time.Since(t0).Seconds(), leadersLine(tp.jsLeaders("echo")))

	phases := []phase{
		{"before the kill", t0, tKill},
		{"node down", tKill, tRestart},
		{"after rejoin", tRestart, tWorker},
		{"after the worker kill", tWorker, tEnd},
	}
	for i, pr := range probers {
		r := pr.recovery(tKill)
		t.Logf("edge %d: %.2fs from the node kill until it answered a request (sent after the kill) with a task", i+1, r.Seconds())
		pr.report(t, fmt.Sprintf("edge %d", i+1), phases)
	}
	throughput(t, l, phases)

	ls := []*ledger{l}
	for _, pr := range probers {
		ls = append(ls, pr.l)
	}
	a := tp.audit(name, plan.within, ls...)
	if !a.clean() {
		t.Fatalf("want every accepted task completed once and no orphans: %s", a)
	}
}

// One node SIGKILLed under load and restarted on its data dir, then one
// worker process SIGKILLed: the audit finds every accepted task completed
// once and nothing a client was not given (a refused request leaves no
// task behind). It logs each edge's time from the kill to its next
// success and the throughput of each phase. CI size: about 50s when it
// passes.
func TestClusterNodeLossAudited(t *testing.T) {
	scenario(t)
	nodeLossAudited(t, "node loss", nodeLossPlan{clientsPerEdge: 6, pace: 200 * time.Millisecond, kill: 6 * time.Second,
		restart: 16 * time.Second, workerKill: 22 * time.Second, end: 28 * time.Second, within: 30 * time.Second})
}

// The same, full size: 16 clients per edge for 60s, the node killed at
// 15s and restarted at 30s, a worker killed at 40s. Set
// A2ABUS_CLUSTER_SOAK=1 to run it. It takes minutes: most of it is the
// audit's listing, as ListTasks reads the whole bucket for every page of
// 100 (about 4.5 minutes for 12k tasks on 2 cores under -race).
func TestClusterNodeLossSoak(t *testing.T) {
	if testing.Short() || os.Getenv("A2ABUS_CLUSTER_SOAK") != "1" {
		t.Skip("set A2ABUS_CLUSTER_SOAK=1 (and not -short) to run the full-size node-loss soak")
	}
	nodeLossAudited(t, "node loss soak", nodeLossPlan{clientsPerEdge: 16, kill: 15 * time.Second, restart: 30 * time.Second,
		workerKill: 40 * time.Second, end: 60 * time.Second, within: 90 * time.Second})
}
