package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/schemas"
	"github.com/google/uuid"
)

// a2abus load: the project's load generator. It drives any A2A 1.0 (or
// 0.3) agent with N concurrent clients for a fixed time and prints
// throughput and latency percentiles. Performance claims in notes come
// from it (and from benchmarks), never from timed assertions in tests.
//
// Modes:
//   - send:   blocking SendMessage that creates a task; an operation is ok
//     when the answer is a COMPLETED task or a message.
//   - stream: SendStreamingMessage read to its end; ok when the stream ends
//     on a terminal state. Time to first event is reported as well.
//   - fanout: one SendMessage to every --url at once; the operation takes
//     as long as the slowest and is ok when all are.
//
// A run whose answers are mostly the server's rate-limit refusals stops
// early and fails (see limitedMinAnswers): it would measure the limiter.

const loadUsage = `Usage: a2abus load --url URL [--url URL ...] [flags]

Drives A2A agents with concurrent clients and prints throughput and latency
percentiles (p50/p90/p99). URL is an agent's base URL (its card is read to
pick the interface) or, with --binding, the endpoint itself (for grpc, the
gRPC address with the agent as its path: http://HOST:PORT/agents/NAME).

Flags:
`

type loadOptions struct {
	urls      []string
	mode      string
	clients   int
	duration  time.Duration
	warmup    time.Duration
	requests  int
	text      string
	binding   string
	output    string
	header    http.Header
	timeout   time.Duration
	allowAddr bool
	// stopLimited stops a run on the server's rate limit (see
	// limitedMinAnswers); off, a run measures the limiter on purpose.
	stopLimited bool
}

type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*m = append(*m, s)
		}
	}
	return nil
}

type headerFlag http.Header

func (h headerFlag) String() string { return "" }
func (h headerFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("header %q must be \"Name: value\"", v)
	}
	http.Header(h).Add(strings.TrimSpace(k), strings.TrimSpace(val))
	return nil
}

func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("a2abus load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := loadOptions{header: http.Header{}}
	var urls multiFlag
	fs.Var(&urls, "url", "agent base URL, or endpoint with --binding (repeatable; fanout sends to all)")
	fs.StringVar(&o.mode, "mode", "send", "send, stream or fanout")
	fs.IntVar(&o.clients, "clients", 64, "concurrent clients")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long to measure")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "load before measuring (connections, caches, JIT of the agent)")
	fs.IntVar(&o.requests, "requests", 0, "stop after this many measured operations (0: run for --duration)")
	fs.StringVar(&o.text, "text", "hello world", "message text sent")
	fs.StringVar(&o.binding, "binding", "auto", "auto (read the card), or the wire form at the URL: "+strings.Join(discovery.WireNames(), ", "))
	fs.StringVar(&o.output, "o", "text", "output: text or json")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "timeout of one operation")
	fs.Var(headerFlag(o.header), "header", "extra request header \"Name: value\" (repeatable)")
	fs.BoolVar(&o.allowAddr, "allow-private", true, "allow loopback and private agent addresses (load runs usually target them)")
	fs.BoolVar(&o.stopLimited, "stop-when-limited", true, "stop early and fail when most answers (of at least 200) are the server's rate-limit refusals (429 / RATE_LIMITED); false keeps going, to measure the limiter itself")
	cpuProfile := fs.String("cpuprofile", "", "write the load generator's own CPU profile to this file (is the generator the bottleneck?)")
	fs.Usage = func() { fmt.Fprint(stderr, loadUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.urls = urls
	if len(o.urls) == 0 {
		fs.Usage()
		return errors.New("load: --url is required")
	}
	if o.clients < 1 {
		return errors.New("load: --clients must be at least 1")
	}
	if !slices.Contains([]string{"send", "stream", "fanout"}, o.mode) {
		return fmt.Errorf("load: unknown --mode %q (send, stream or fanout)", o.mode)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	clients, err := loadClients(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	// The generator shares the machine with what it measures: the GC
	// target of a server (see Config.GCPercent) keeps its own collection
	// work from taking CPU the system under test could use.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	res := runLoadClients(ctx, o, clients)
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		res.print(stdout)
	}
	if st := res.StoppedLimited; st != nil {
		return &cliError{msg: fmt.Sprintf("load: stopped early: %d of %d answers were RATE_LIMITED (HTTP 429 / JSON-RPC -31429), so this run measured the server's per-caller rate limiter, not the server. "+
			"Raise the limit where the server runs (a2abus serve or edge --rate-limit N, or --rate-limit 0 for none; --rate-burst for the burst; --max-unfinished if the refusals name unfinished tasks) and run again",
			st.RateLimited, st.Answers)}
	}
	if res.OK == 0 {
		return errors.New("load: no operation succeeded")
	}
	return nil
}

// A run stops early once at least limitedMinAnswers answers have come
// (warm-up included) and more than half of them were refusals of the
// server's per-caller limits (429 / -31429 RATE_LIMITED, on any binding):
// going on would measure the server's limiter and report its rate as the
// server's throughput. The minimum keeps a few refusals at the start (a
// burst allowance being spent) from ending a run.
const limitedMinAnswers = 200

// rateLimited reports whether err is the server refusing the caller over
// its limits: a RATE_LIMITED protocol error (JSON-RPC, HTTP+JSON, 0.3), or
// an HTTP 429 that is not an A2A answer (a route limited by address, a
// proxy).
func rateLimited(err error) bool {
	var te *discovery.TransportError
	return errors.Is(err, schemas.ErrRateLimited) || errors.As(err, &te) && te.Status == http.StatusTooManyRequests
}

// loadClients builds one A2A client per URL, sharing one HTTP transport
// sized for the number of concurrent clients (a gRPC endpoint's client
// holds one connection, which carries every concurrent call); the caller
// closes them.
func loadClients(ctx context.Context, o loadOptions) (_ []*discovery.Client, err error) {
	policy := discovery.Policy{AllowLoopback: o.allowAddr, AllowPrivate: o.allowAddr, AllowLinkLocal: o.allowAddr}
	tr := policy.Transport(&http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        o.clients * 2 * len(o.urls),
		MaxIdleConnsPerHost: o.clients * 2,
		IdleConnTimeout:     90 * time.Second,
	})
	hc := &http.Client{Transport: tr}
	opts := discovery.Options{HTTP: hc, Policy: policy, Header: o.header, Timeout: o.timeout}
	var out []*discovery.Client
	defer func() {
		if err != nil {
			for _, c := range out {
				c.Close()
			}
		}
	}()
	for _, u := range o.urls {
		ep, named := discovery.NamedEndpoint(o.binding, u)
		switch {
		case named:
		case o.binding == "auto":
			f := discovery.Fetcher{HTTP: hc, Header: o.header}
			fc, err := f.Fetch(ctx, u, "")
			if err != nil {
				return nil, fmt.Errorf("load: reading the card of %s: %w (or name the endpoint with --binding)", u, err)
			}
			eps := discovery.Endpoints(&fc.Card)
			if len(eps) == 0 {
				return nil, fmt.Errorf("load: the card of %s offers no interface a2abus speaks", u)
			}
			ep = eps[0]
		default:
			return nil, fmt.Errorf("load: unknown --binding %q (%s)", o.binding, bindingChoices())
		}
		c, err := discovery.NewClient(ep, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// loadResult is what one run measured.
type loadResult struct {
	Mode       string         `json:"mode"`
	Targets    []string       `json:"targets"`
	Clients    int            `json:"clients"`
	Seconds    float64        `json:"seconds"`
	OK         int            `json:"ok"`
	Failed     int            `json:"failed"`
	Errors     map[string]int `json:"errors,omitempty"`
	PerSecond  float64        `json:"perSecond"`
	Latency    percentiles    `json:"latencyMs"`
	FirstEvent *percentiles   `json:"firstEventMs,omitempty"`
	Events     int            `json:"events,omitempty"`
	// StoppedLimited is set when the run stopped early because most
	// answers were rate-limit refusals (see limitedMinAnswers).
	StoppedLimited *limitedStop `json:"stoppedRateLimited,omitempty"`
}

// limitedStop is what stopped a run early: of Answers (warm-up
// included), RateLimited were refusals of the server's limits.
type limitedStop struct {
	Answers     int `json:"answers"`
	RateLimited int `json:"rateLimited"`
}

type percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func percentilesOf(d []time.Duration) percentiles {
	if len(d) == 0 {
		return percentiles{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(q float64) float64 {
		i := int(q*float64(len(d))+0.5) - 1
		i = max(0, min(i, len(d)-1))
		return float64(d[i].Microseconds()) / 1000
	}
	return percentiles{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: float64(d[len(d)-1].Microseconds()) / 1000}
}

func (r *loadResult) print(w io.Writer) {
	fmt.Fprintf(w, "mode %s, %d clients, %.1fs, target %s\n", r.Mode, r.Clients, r.Seconds, strings.Join(r.Targets, " "))
	fmt.Fprintf(w, "  ok %d  failed %d  throughput %.1f/s\n", r.OK, r.Failed, r.PerSecond)
	if st := r.StoppedLimited; st != nil {
		fmt.Fprintf(w, "  STOPPED EARLY: %d of %d answers were RATE_LIMITED; this measured the server's rate limiter\n", st.RateLimited, st.Answers)
	}
	fmt.Fprintf(w, "  latency ms   p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n", r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Max)
	if r.FirstEvent != nil {
		fmt.Fprintf(w, "  first event  p50 %.2f  p90 %.2f  p99 %.2f  max %.2f   events %d\n",
			r.FirstEvent.P50, r.FirstEvent.P90, r.FirstEvent.P99, r.FirstEvent.Max, r.Events)
	}
	keys := make([]string, 0, len(r.Errors))
	for k := range r.Errors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  error x%d: %s\n", r.Errors[k], k)
	}
}

// sample is one measured operation; limited says its error was the
// server's rate limit (rateLimited).
type sample struct {
	took, first time.Duration
	events      int
	err         error
	limited     bool
}

func runLoadClients(ctx context.Context, o loadOptions, clients []*discovery.Client) *loadResult {
	res := &loadResult{Mode: o.mode, Clients: o.clients, Errors: map[string]int{}}
	for _, c := range clients {
		res.Targets = append(res.Targets, c.Endpoint().URL)
	}
	op := func(ctx context.Context) sample {
		switch o.mode {
		case "stream":
			return streamOnce(ctx, clients[0], o.text)
		case "fanout":
			return fanoutOnce(ctx, clients, o.text)
		}
		return sendOnce(ctx, clients[0], o.text)
	}

	// Warm up, then measure: every sample that starts inside the window
	// counts; the window's length is the measured time.
	warmEnd := time.Now().Add(o.warmup)
	var (
		mu      sync.Mutex
		samples []sample
		wg      sync.WaitGroup
		start   time.Time
		end     time.Time
	)
	measuring := make(chan struct{})
	done := make(chan struct{})
	var once sync.Once
	finish := func() { once.Do(func() { end = time.Now(); close(done) }) }
	// Every answer counts towards stopping on the limiter, measured or not.
	var answers, limited atomic.Int64
	var limitedOnce sync.Once
	for range o.clients {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				case <-ctx.Done():
					return
				default:
				}
				inWindow := false
				select {
				case <-measuring:
					inWindow = true
				default:
				}
				octx, cancel := context.WithTimeout(ctx, o.timeout)
				s := op(octx)
				cancel()
				all, refused := answers.Add(1), limited.Load()
				if s.limited {
					refused = limited.Add(1)
				}
				if o.stopLimited && all >= limitedMinAnswers && 2*refused > all {
					limitedOnce.Do(func() { res.StoppedLimited = &limitedStop{Answers: int(all), RateLimited: int(refused)} })
					finish()
					return
				}
				if !inWindow {
					continue
				}
				select {
				case <-done: // finished after the window closed: not counted
					return
				default:
				}
				mu.Lock()
				samples = append(samples, s)
				n := len(samples)
				mu.Unlock()
				if o.requests > 0 && n >= o.requests {
					finish()
				}
			}
		})
	}
	select {
	case <-time.After(time.Until(warmEnd)):
	case <-ctx.Done():
	case <-done: // stopped on the limiter while warming up
	}
	start = time.Now()
	close(measuring)
	if o.requests == 0 {
		select {
		case <-time.After(o.duration):
		case <-ctx.Done():
		case <-done:
		}
		finish()
	} else {
		select {
		case <-done:
		case <-ctx.Done():
			finish()
		}
	}
	mu.Lock()
	got := slices.Clone(samples)
	mu.Unlock()
	wg.Wait()

	res.Seconds = max(end.Sub(start).Seconds(), 0)
	var lat, first []time.Duration
	for _, s := range got {
		if s.err != nil {
			res.Failed++
			res.Errors[s.err.Error()]++
			continue
		}
		res.OK++
		res.Events += s.events
		lat = append(lat, s.took)
		if s.first > 0 {
			first = append(first, s.first)
		}
	}
	if res.Seconds > 0 {
		res.PerSecond = float64(res.OK) / res.Seconds
	}
	res.Latency = percentilesOf(lat)
	if o.mode == "stream" {
		p := percentilesOf(first)
		res.FirstEvent = &p
	}
	return res
}

func newLoadMessage(text string) *schemas.SendMessageRequest {
	return &schemas.SendMessageRequest{Message: &schemas.Message{
		MessageID: uuid.NewString(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)},
	}}
}

// errorKey shortens an error for counting: the same failure must count
// under one key, so task ids and addresses are left out where known.
func errorKey(err error) error {
	var pe *schemas.Error
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s", pe.Reason, pe.Message)
	}
	return err
}

func sendOnce(ctx context.Context, c *discovery.Client, text string) sample {
	t0 := time.Now()
	res, err := c.SendMessage(ctx, newLoadMessage(text))
	s := sample{took: time.Since(t0), limited: rateLimited(err)}
	switch {
	case err != nil:
		s.err = errorKey(err)
	case res.Task != nil && res.Task.Status.State != schemas.TaskStateCompleted:
		s.err = fmt.Errorf("task ended %s", res.Task.Status.State)
	case res.Task == nil && res.Message == nil:
		s.err = errors.New("answer has neither task nor message")
	}
	return s
}

func streamOnce(ctx context.Context, c *discovery.Client, text string) sample {
	t0 := time.Now()
	st, err := c.SendStreamingMessage(ctx, newLoadMessage(text))
	if err != nil {
		return sample{took: time.Since(t0), err: errorKey(err), limited: rateLimited(err)}
	}
	defer st.Close()
	var s sample
	var last schemas.TaskState
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.err, s.limited = errorKey(err), rateLimited(err)
			break
		}
		if s.events == 0 {
			s.first = time.Since(t0)
		}
		s.events++
		switch {
		case ev.Task != nil:
			last = ev.Task.Status.State
		case ev.StatusUpdate != nil:
			last = ev.StatusUpdate.Status.State
		case ev.Message != nil:
			last = schemas.TaskStateCompleted
		}
	}
	s.took = time.Since(t0)
	if s.err == nil && !last.Terminal() {
		s.err = fmt.Errorf("stream ended in state %q", last)
	}
	return s
}

func fanoutOnce(ctx context.Context, cs []*discovery.Client, text string) sample {
	t0 := time.Now()
	errs := make([]error, len(cs))
	limited := make([]bool, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			s := sendOnce(ctx, c, text)
			errs[i], limited[i] = s.err, s.limited
		})
	}
	wg.Wait()
	return sample{took: time.Since(t0), err: errors.Join(errs...), limited: slices.Contains(limited, true)}
}
