package edge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// Cost as work grows (issue 35): each benchmark here measures both ends
// of one growth in the same run, interleaved, and reports their ratio as
// a metric, so a slow or busy machine moves both sides alike. The
// targets and the measured ratios are in ARCHITECTURE.md, "Where the time
// goes". None asserts a time: the numbers are read, the tests carry the
// guarantees.

// conversationTurns is how long the conversation of BenchmarkGrowthTurns
// runs: past the history bound (bus.Config.HistoryCap, 100 messages, two
// a turn) from turn 51 on.
const conversationTurns = 100

// asker is a multi-turn agent that never finishes: every turn it asks for
// the next one (INPUT_REQUIRED), so one task holds the whole conversation.
var asker = workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	return out.InputRequired(ctx, "and then? (after "+req.Message.Text()+")")
})

// postTurn sends one blocking SendMessage and returns the answer's bytes,
// read but not decoded (the client's decoding is no cost of the server).
func postTurn(b *testing.B, c *http.Client, url string, body []byte) []byte {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(out, []byte("TASK_STATE_INPUT_REQUIRED")) {
		b.Fatalf("status %d: %.300s", resp.StatusCode, out)
	}
	return out
}

// turnBody is the blocking SendMessage of one turn; taskID is empty for
// the first. A history length (> 0) asks for that much of the history
// in the answer.
func turnBody(taskID string, turn int, history int32) []byte {
	msg := schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, TaskID: taskID,
		Parts: []schemas.Part{schemas.TextPart("turn " + strconv.Itoa(turn) + " of the conversation")}}
	req := schemas.SendMessageRequest{Message: &msg}
	if history > 0 {
		req.Configuration = &schemas.SendMessageConfiguration{HistoryLength: &history}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": turn, "method": "SendMessage", "params": req})
	return body
}

// BenchmarkGrowthTurns is one conversation of 100 turns on one task
// through the edge: a blocking SendMessage each turn, the agent asking for
// input every time, the task's history at its bound (100 messages) from
// turn 51 on. One op is one conversation; turn100/turn1 is the median
// time of the 100th turn over the 1st's (the 1st creates the task, the
// others continue it), turns91-100/turns2-11 the same growth on ten turns
// each, steadier and without the create. In answer=history every answer
// carries the whole history (the default); in answer=last2 the client
// asks for the last two messages (historyLength 2), so what is left of
// the growth is the bus's and the agent's, not the answer's:
//
//	go test -run '^$' -bench GrowthTurns -benchtime 20x ./edge/
func BenchmarkGrowthTurns(b *testing.B) {
	h := newHarness(b, harnessOptions{agents: []workers.Definition{{Name: "asker", Agent: asker}}})
	url := h.url + "/agents/asker"
	c := &http.Client{}
	postTurn(b, c, url, turnBody("", 1, 0)) // warm up: consumers bound, connection open
	b.Run("answer=history", func(b *testing.B) { conversations(b, c, url, 0) })
	b.Run("answer=last2", func(b *testing.B) { conversations(b, c, url, 2) })
}

// conversations is BenchmarkGrowthTurns' op: one conversation of
// conversationTurns turns, answers with history messages of it (0: all).
func conversations(b *testing.B, c *http.Client, url string, history int32) {
	var first, last, early, late []time.Duration
	var size1, size100 int // the answers' bytes: the task, its history growing to the bound
	for b.Loop() {
		t0 := time.Now()
		out := postTurn(b, c, url, turnBody("", 1, history))
		first = append(first, time.Since(t0))
		size1 = len(out)
		var r struct {
			Result schemas.SendMessageResponse `json:"result"`
		}
		if err := json.Unmarshal(out, &r); err != nil || r.Result.Task == nil {
			b.Fatalf("first turn: %v %.300s", err, out)
		}
		id := r.Result.Task.ID
		var e, l time.Duration
		for turn := 2; turn <= conversationTurns; turn++ {
			body := turnBody(id, turn, history)
			t0 := time.Now()
			out = postTurn(b, c, url, body)
			d := time.Since(t0)
			switch {
			case turn <= 11:
				e += d
			case turn > conversationTurns-10:
				l += d
			}
			if turn == conversationTurns {
				last = append(last, d)
			}
		}
		early, late = append(early, e), append(late, l)
		size100 = len(out)
		if !bytes.Contains(out, []byte("turn 100 of the conversation")) {
			b.Fatalf("the last answer does not hold the last turn: %.300s", out)
		}
	}
	b.ReportMetric(float64(median(first).Microseconds()), "turn1-µs")
	b.ReportMetric(float64(median(last).Microseconds()), "turn100-µs")
	b.ReportMetric(float64(median(last))/float64(median(first)), "turn100/turn1")
	b.ReportMetric(float64(median(late))/float64(median(early)), "turns91-100/turns2-11")
	b.ReportMetric(float64(size1), "turn1-answer-B")
	b.ReportMetric(float64(size100), "turn100-answer-B")
}

// median is the middle of ds (the mean of the two middle ones for an
// even count); ds is sorted in place. The growth ratios are of medians:
// on a shared machine one op caught by another process's burst moves a
// mean of a few ops far more than the growth measured.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	n := len(ds)
	return (ds[(n-1)/2] + ds[n/2]) / 2
}

// chunkBytes is the text of one streamed chunk of BenchmarkGrowthStream.
var chunkBytes = strings.Repeat("c", 31) + "\n"

// counter streams as many artifact chunks as its message's number says,
// one artifact appended to, and completes.
var counter = workers.AgentFunc(func(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	n, err := strconv.Atoi(req.Message.Text())
	if err != nil {
		return err
	}
	for i := range n {
		a := schemas.Artifact{ArtifactID: "count", Parts: []schemas.Part{schemas.TextPart(chunkBytes)}}
		if err := out.ArtifactChunk(ctx, a, i > 0, i == n-1); err != nil {
			return err
		}
	}
	return nil
})

// streamCount streams one task of n chunks to its end as a client sees
// it (SendStreamingMessage until the final event, events read but not
// decoded) and checks it ended COMPLETED.
func streamCount(b *testing.B, base string, n int) {
	s, r := openStream(b, base, "counter", "SendStreamingMessage", send(userMessage(strconv.Itoa(n)), false), "")
	if r != nil {
		b.Fatal(r.Error)
	}
	got, last := 0, sseEvent{}
	for ev, ok := s.next(); ok; ev, ok = s.next() {
		got, last = got+1, ev
	}
	s.resp.Body.Close()
	if got != n+3 || kind(s.result(last)) != "status:TASK_STATE_COMPLETED" { // task, working, n chunks, completed
		b.Fatalf("%d events for %d chunks, last %.200s", got, n, last.data)
	}
}

// BenchmarkGrowthStream is the cost of a streamed chunk as a task streams
// more of them: one op is ten tasks of 10 chunks and one of 1 000, each
// streamed to its end by an SSE client (SendStreamingMessage), 32-byte
// chunks appended to one artifact. perchunk1000/perchunk10 is the time a
// chunk of the long task takes over a chunk of the short ones (theirs
// carries a share of the task's own start and end), medians of the ops:
//
//	go test -run '^$' -bench GrowthStream -benchtime 5x ./edge/
func BenchmarkGrowthStream(b *testing.B) {
	const short, long, shorts = 10, 1000, 10
	h := newHarness(b, harnessOptions{agents: []workers.Definition{{Name: "counter", Agent: counter}}})
	streamCount(b, h.url, short) // warm up
	var tShort, tLong []time.Duration
	for b.Loop() {
		t0 := time.Now()
		for range shorts {
			streamCount(b, h.url, short)
		}
		t1 := time.Now()
		streamCount(b, h.url, long)
		tShort, tLong = append(tShort, t1.Sub(t0)), append(tLong, time.Since(t1))
	}
	perShort := float64(median(tShort).Nanoseconds()) / (shorts * short)
	perLong := float64(median(tLong).Nanoseconds()) / long
	b.ReportMetric(perShort/1e3, "perchunk10-µs")
	b.ReportMetric(perLong/1e3, "perchunk1000-µs")
	b.ReportMetric(perLong/perShort, "perchunk1000/perchunk10")
}

// The subscribers of BenchmarkGrowthSubscribers are a child process (this
// test binary again, running TestGrowthSubscriberClients), so the edge's
// process holds only the server side of each connection: 10 000 streams
// are 20 000 descriptors in one process, the whole of this machine's
// limit.
const (
	envSubscribers  = "A2ABUS_BENCH_SUBSCRIBERS" // N; default 1000
	envClientsURL   = "A2ABUS_BENCH_CLIENTS_URL" // set for the child: the edge's agent URL
	envClientsTask  = "A2ABUS_BENCH_CLIENTS_TASK"
	envClientsCount = "A2ABUS_BENCH_CLIENTS_N"
)

// stamper is an agent that, once WORKING is stored, waits for a word on
// its go channel, then stores one artifact chunk and tells when the write
// began and when it was stored (Flush returned), and completes when go is
// closed.
type stamper struct {
	started chan string
	goOn    chan struct{}
	stamps  chan [2]time.Time
}

func (s *stamper) Execute(ctx context.Context, req *workers.Request, out *workers.Emitter) error {
	if err := out.Working(ctx, "waiting"); err != nil {
		return err
	}
	if err := out.Flush(ctx); err != nil {
		return err
	}
	s.started <- req.Task.ID
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case _, ok := <-s.goOn:
			if !ok {
				return out.Complete(ctx, "done")
			}
			t0 := time.Now()
			a := schemas.Artifact{ArtifactID: "stamp", Parts: []schemas.Part{schemas.TextPart("now")}}
			if err := out.ArtifactChunk(ctx, a, false, true); err != nil {
				return err
			}
			if err := out.Flush(ctx); err != nil {
				return err
			}
			s.stamps <- [2]time.Time{t0, time.Now()}
		}
	}
}

// BenchmarkGrowthSubscribers holds N SSE subscribers (SubscribeToTask) of
// one task on one edge and has the task's agent store one event; each
// subscriber notes when it arrives. It reports the largest and the 99th
// percentile delay from the start of the event's write to a subscriber
// reading it (an upper bound of the delay from its being stored: the
// write itself, store-ms, is in it). SubscribeToTask, not the task feed:
// the feed is one stream of a caller's task changes, where a subscriber
// here is a client following one task's events, which is what many
// watchers of a task are. One task for all: the edge's hub has one
// reader for it and hands every subscriber the same event at once, the
// worst case of one event. The edge serves through edge.Listen, its
// connection caps raised for N (the command's defaults, --max-connections
// 4096 and --max-connections-per-addr 256, would refuse them: every
// subscriber is on 127.0.0.1), and MaxStreams unbounded, as the command
// sets it from those caps.
//
//	go test -run '^$' -bench GrowthSubscribers -benchtime 1x ./edge/
//	A2ABUS_BENCH_SUBSCRIBERS=10000 go test -run '^$' -bench GrowthSubscribers -benchtime 1x -timeout 20m ./edge/
//
// N = 10 000 needs an open-file limit above 10 000 for each process (the
// edge with the embedded NATS server, and the subscribers).
func BenchmarkGrowthSubscribers(b *testing.B) {
	n := 1000
	if v := os.Getenv(envSubscribers); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a positive number", envSubscribers, v)
		}
	}
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	st := &stamper{started: make(chan string, 1), goOn: make(chan struct{}), stamps: make(chan [2]time.Time, 1)}
	srv := bustest.NewServer(b, bustest.Options{})
	eb := bustest.Connect(b, srv, bustest.Options{})
	h := &harness{t: b, srv: srv, b: eb}
	h.startRunner(eb, workers.Definition{Name: "stamper", Agent: st})
	e := edge.New(eb, edge.Config{})
	ln, err := edge.Listen("127.0.0.1:0", e.Handler(), edge.HTTPConfig{MaxConns: n + 1024, MaxConnsPerAddr: 0})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	b.Cleanup(func() { ln.Stop(time.Second); cancel(); <-done })
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if err := e.WaitReady(rctx); err != nil {
		b.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	h.waitAgent(base, "stamper")

	var delays []time.Duration
	var store time.Duration
	for b.Loop() {
		task := mustResult[schemas.SendMessageResponse](b, h.callAt(base, "stamper", "SendMessage", send(userMessage("go"), true))).Task
		recv(b, st.started, "the agent to start")
		cmd := exec.Command(self, "-test.run=^TestGrowthSubscriberClients$", "-test.count=1", "-test.timeout=30m")
		cmd.Env = append(os.Environ(), envClientsURL+"="+base+"/agents/stamper", envClientsTask+"="+task.ID, envClientsCount+"="+strconv.Itoa(n))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		for lines.Scan() && lines.Text() != "ready" {
		}
		st.goOn <- struct{}{}
		stamp := recv(b, st.stamps, "the event to be stored")
		store += stamp[1].Sub(stamp[0])
		got := 0
		for lines.Scan() {
			var ns int64
			if _, err := fmt.Sscanf(lines.Text(), "recv %d", &ns); err != nil {
				continue // the child's test output
			}
			delays = append(delays, time.Unix(0, ns).Sub(stamp[0]))
			got++
		}
		if err := cmd.Wait(); err != nil || got != n {
			b.Fatalf("subscribers: %d of %d received the event (%v)", got, n, err)
		}
		close(st.goOn)
		st.goOn = make(chan struct{})
	}
	slices.Sort(delays)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	b.ReportMetric(ms(delays[len(delays)-1]), "max-delay-ms")
	b.ReportMetric(ms(delays[len(delays)*99/100]), "p99-delay-ms")
	b.ReportMetric(ms(delays[len(delays)/2]), "p50-delay-ms")
	b.ReportMetric(ms(store)/float64(b.N), "store-ms")
	b.ReportMetric(float64(n), "subscribers")
}

// TestGrowthSubscriberClients is BenchmarkGrowthSubscribers' child
// process, and skips anywhere else: it opens the subscribers, says
// "ready" on stdout once each has its snapshot, and writes "recv <unix
// ns>" for each as the next event reaches it.
func TestGrowthSubscriberClients(t *testing.T) {
	url := os.Getenv(envClientsURL)
	if url == "" {
		t.Skip("the subscribers of BenchmarkGrowthSubscribers")
	}
	n, _ := strconv.Atoi(os.Getenv(envClientsCount))
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": map[string]any{"id": os.Getenv(envClientsTask)}})
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1}}
	// Each subscriber reads through a small buffer: n of 64 KiB would be
	// most of this process's memory at n = 10 000.
	open := func() (*bufio.Reader, io.Closer, error) {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("A2A-Version", "1.0")
		resp, err := c.Do(req)
		if err != nil {
			return nil, nil, err
		}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			resp.Body.Close()
			return nil, nil, fmt.Errorf("status %d, not a stream", resp.StatusCode)
		}
		return bufio.NewReaderSize(resp.Body, 4<<10), resp.Body, nil
	}
	// event reads up to the end of the next event.
	event := func(r *bufio.Reader) error {
		data := false
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				return err
			}
			switch {
			case bytes.HasPrefix(line, []byte("data:")):
				data = true
			case len(bytes.TrimSpace(line)) == 0 && data:
				return nil
			}
		}
	}
	readers := make([]*bufio.Reader, n)
	var (
		wg   sync.WaitGroup
		errs = make(chan error, n)
		next = make(chan int, n)
	)
	for i := range n {
		next <- i
	}
	close(next)
	for range 32 {
		wg.Go(func() {
			for i := range next {
				r, body, err := open()
				if err == nil {
					t.Cleanup(func() { body.Close() })
					err = event(r) // the snapshot
				}
				if err != nil {
					errs <- fmt.Errorf("subscriber %d: %w", i, err)
					return
				}
				readers[i] = r
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	received := make([]int64, n)
	var rwg sync.WaitGroup
	fails := make(chan error, n)
	for i, r := range readers {
		rwg.Go(func() {
			if err := event(r); err != nil {
				fails <- fmt.Errorf("subscriber %d: %w", i, err)
				return
			}
			received[i] = time.Now().UnixNano()
		})
	}
	fmt.Println("ready")
	rwg.Wait()
	close(fails)
	if err := <-fails; err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, ns := range received {
		fmt.Fprintf(&out, "recv %d\n", ns)
	}
	_, _ = os.Stdout.Write(out.Bytes())
}
