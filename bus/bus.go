package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// Config is everything a process needs to join the bus. Zero fields take the
// defaults documented on each field, applied in one place (withDefaults).
type Config struct {
	// URL is the NATS server URL list (comma-separated). Ignored when Server
	// is set.
	URL string
	// Metrics is the process's registry; the bus counts its work outcomes,
	// finished tasks, store conflicts and messages there. Default: a new
	// one (see Bus.Metrics).
	Metrics *Metrics
	// Server, when set, is an embedded server to connect to in-process
	// (with the server's own credentials: Credentials and TLS are not
	// used).
	Server *Server
	// Credentials authenticate the connection to URL; zero: none.
	Credentials Credentials
	// TLS, when set, is what the connection to URL trusts (TLS.CA; Cert
	// and Key are not used): a server that requires TLS is verified
	// against it. Without it a server that requires TLS is verified
	// against the system's roots.
	TLS *TLSFiles
	// BindOnly makes Connect look up the streams and buckets instead of
	// creating or updating them, and wait (as for a server not up yet)
	// until a process allowed to provision (an edge, serve) has made them:
	// what a worker does, whose credentials may not change streams.
	BindOnly bool
	// NoDispatch keeps this process from dispatching work (see
	// dispatch.go). A BindOnly process never dispatches either: its NATS
	// user (RoleWorker) may not. Every other process takes the dispatch
	// lease when it is free.
	NoDispatch bool
	// dispatchLeaseTTL, in tests, replaces dispatchLeaseTTL (a holder
	// that dies is replaced sooner).
	dispatchLeaseTTL time.Duration
	// replayStall, in tests, replaces replayStall.
	replayStall time.Duration
	// intakeCheckEvery, in tests, replaces intakeCheckEvery; and
	// beforeIntakeFetch, when set, is called before each fetch of an
	// agent's intake (a test takes a delivery away meanwhile).
	intakeCheckEvery  time.Duration
	beforeIntakeFetch func(agent string)
	// Name identifies this connection and is the instance part of
	// CloudEvent sources; default a random id.
	Name string
	// Role is the component role in CloudEvent sources ("edge", "worker");
	// default "node".
	Role string
	// Logger receives connection events; default slog.Default().
	Logger *slog.Logger

	// MemoryStorage keeps streams and buckets in memory (tests); default file.
	MemoryStorage bool
	// Replicas is the replica count of every stream and bucket; default 1.
	Replicas int

	// TaskTTL is how long a finished task (terminal state) is kept after it
	// finished; default 24h. A task that is not finished is never expired.
	TaskTTL time.Duration
	// TaskMaxBytes bounds the task bucket; default 1 GiB.
	TaskMaxBytes int64
	// TaskMaxValueSize bounds one task record; default 1 MiB.
	TaskMaxValueSize int32
	// HistoryCap bounds the messages kept in a task's history; default 100.
	HistoryCap int
	// EventsMaxAge is how long task events are kept; default TaskTTL.
	EventsMaxAge time.Duration
	// EventsMaxPerTask bounds the event messages kept per task (a write of
	// several events is one message); default 10000.
	EventsMaxPerTask int64
	// EventsMaxBytes bounds the events stream; default 1 GiB.
	EventsMaxBytes int64
	// MaxReplays bounds the event readers of this process that read a
	// page of what the events stream stored (through its leader) at once;
	// more wait for a place, which a reader holds only while it reads, not
	// while its client is slow to take the page. It keeps a crowd of
	// resuming streams from flooding the stream's leader. Default 64.
	MaxReplays int
	// WorkMaxAge is how long unclaimed work waits; default 24h.
	WorkMaxAge time.Duration
	// WorkMaxBytes bounds the work stream; default 256 MiB.
	WorkMaxBytes int64
	// Duplicates is the publish de-duplication window of the work and
	// events streams; default 1m, twice the longest a publish is retried
	// (publishRetryFor): a repeat is always a retry of a publish whose
	// answer was lost, and the server keeps every id of the window in
	// memory (at 4 000 tasks a second, two ids a task, ~25 MB a minute).
	Duplicates time.Duration
	// AckWait is how long a worker may hold work without a heartbeat before
	// it is redelivered; default 30s.
	AckWait time.Duration
	// MaxDeliver bounds deliveries of one work item; default 5.
	MaxDeliver int
	// MaxAckPending bounds unacknowledged work per agent; default 1024.
	MaxAckPending int
	// AgentTTL is how long an agent registration lives without a heartbeat;
	// default 30s.
	AgentTTL time.Duration
	// CardTTL is how long a cached external card is kept after its last
	// write; default 7 days.
	CardTTL time.Duration
	// CardMaxBytes bounds the card cache; default 64 MiB.
	CardMaxBytes int64
	// AuditMaxAge is how long audit records are kept (StreamAudit);
	// default 90 days.
	AuditMaxAge time.Duration
	// AuditMaxBytes bounds the audit stream; default 1 GiB. Past either
	// bound the oldest records are dropped, never a new one refused.
	AuditMaxBytes int64
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Name == "" {
		c.Name = schemas.NewID()[:8]
	}
	if c.Role == "" {
		c.Role = "node"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	def(&c.TaskTTL, 24*time.Hour)
	if c.TaskMaxBytes <= 0 {
		c.TaskMaxBytes = 1 << 30
	}
	if c.TaskMaxValueSize <= 0 {
		// Below the 1 MiB NATS payload limit, leaving room for headers.
		c.TaskMaxValueSize = 1<<20 - 16<<10
	}
	if c.HistoryCap <= 0 {
		c.HistoryCap = 100
	}
	def(&c.EventsMaxAge, c.TaskTTL)
	if c.EventsMaxPerTask <= 0 {
		c.EventsMaxPerTask = 10000
	}
	if c.MaxReplays <= 0 {
		c.MaxReplays = 64
	}
	if c.EventsMaxBytes <= 0 {
		c.EventsMaxBytes = 1 << 30
	}
	def(&c.WorkMaxAge, 24*time.Hour)
	if c.WorkMaxBytes <= 0 {
		c.WorkMaxBytes = 256 << 20
	}
	def(&c.Duplicates, 2*publishRetryFor)
	def(&c.AckWait, 30*time.Second)
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 5
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = 1024
	}
	def(&c.AgentTTL, 30*time.Second)
	def(&c.CardTTL, 7*24*time.Hour)
	if c.CardMaxBytes <= 0 {
		c.CardMaxBytes = 64 << 20
	}
	def(&c.AuditMaxAge, 90*24*time.Hour)
	if c.AuditMaxBytes <= 0 {
		c.AuditMaxBytes = 1 << 30
	}
	return c
}

// Bus is a connection to NATS with JetStream and the handles of the
// provisioned streams and buckets. It is safe for concurrent use.
type Bus struct {
	m      busMetrics
	cfg    Config
	nc     *nats.Conn
	js     jetstream.JetStream
	tasks  jetstream.KeyValue
	agents jetstream.KeyValue
	cards  jetstream.KeyValue
	// contexts holds who each claimed context id belongs to, and
	// claims the ones this process has confirmed.
	contexts jetstream.KeyValue
	claims   contextClaims
	// waiting holds the records of tasks this process saw settle
	// waiting for their caller, for the caller's next message.
	waiting *waitingRecords
	// handover hands records this process wrote to its own readers
	// (handover.go).
	handover *handover
	// leases holds the leases of work one process does at a time.
	leases jetstream.KeyValue
	// push holds the tasks' push-notification configs, bound on first use.
	push lazyBucket
	// reg holds the run-time registry, bound on first use.
	reg lazyBucket
	// budgets holds the budgets' counters (budget.go), bound on first use.
	budgets lazyBucket
	// refusals are the server's refusals of this connection's publishes,
	// for the operations waiting on them (see refusals).
	refusals *refusals
	// hub serves the event readers of this process (see eventHub).
	hub     *eventHub
	hubOnce sync.Once
	hubStop context.CancelFunc
	// replays holds a place for each replay under way (Config.MaxReplays).
	replays chan struct{}
	// dispatch takes the dispatch lease and moves work while it holds
	// it; nil with Config.NoDispatch.
	dispatch *dispatcher
	source   string
	log      *slog.Logger
}

// Connect connects to NATS (the embedded server in-process, or cfg.URL),
// provisions streams and buckets idempotently, and returns the Bus. The
// connection reconnects forever; Close drains it.
func Connect(ctx context.Context, cfg Config) (*Bus, error) {
	cfg = cfg.withDefaults()
	log := cfg.Logger.With("component", "bus")
	refused := &refusals{}
	opts := []nats.Option{
		nats.Name("a2abus-" + cfg.Role + "-" + cfg.Name),
		nats.MaxReconnects(-1),
		// Servers may still be starting (a cluster coming up with its
		// edges and workers): keep trying, bounded by ctx in provisioning.
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectBufSize(8 << 20),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted()) }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if refused.refused(err) {
				return // the refused operation returns it (ErrNotPermitted)
			}
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("nats async error", "subject", subj, "err", err)
		}),
	}
	url := cfg.URL
	creds := cfg.Credentials
	if cfg.Server != nil {
		opts = append(opts, nats.InProcessServer(cfg.Server.s))
		url, creds = "", cfg.Server.inProcess
	} else {
		if url == "" {
			url = nats.DefaultURL
		}
		if cfg.TLS != nil {
			tc, err := cfg.TLS.clientTLS()
			if err != nil {
				return nil, err
			}
			opts = append(opts, nats.Secure(tc))
		}
	}
	switch {
	case creds.CredsFile != "":
		opts = append(opts, nats.UserCredentials(creds.CredsFile))
	case creds.User != "":
		opts = append(opts, nats.UserInfo(creds.User, creds.Password))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect to nats %q: %w", RedactURLs(url), err)
	}
	// An answer to an asynchronous publish (a new context's claim) that
	// never comes is given up on as a retried step's attempt would be.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(attemptLimit))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("bus: jetstream: %w", err)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	b := &Bus{cfg: cfg, nc: nc, js: js, source: schemas.Source(cfg.Role, cfg.Name), log: log, m: newBusMetrics(cfg.Metrics, nc), waiting: newWaitingRecords(), handover: newHandover(),
		replays: make(chan struct{}, cfg.MaxReplays)}
	b.refusals = refused
	// A server that is not up yet, or a cluster that is still forming (no
	// JetStream leader yet), refuses provisioning for a while; keep trying
	// until ctx ends, saying so every few seconds. A connection the client
	// closed for good (the server refused its credentials twice, say) will
	// never provision: that fails at once.
	start, lastLog := time.Now(), time.Now()
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := b.provision(actx)
		cancel()
		if err == nil {
			if !cfg.NoDispatch && !cfg.BindOnly {
				b.startDispatch()
			}
			return b, nil
		}
		if nc.IsClosed() {
			if last := nc.LastError(); last != nil {
				err = last
			}
			return nil, fmt.Errorf("%w: %w", ErrConnectionClosed, err)
		}
		select {
		case <-ctx.Done():
			nc.Close()
			return nil, fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
			log.Debug("provisioning not possible yet; retrying", "err", err)
		}
		if time.Since(lastLog) >= 5*time.Second {
			lastLog = time.Now()
			log.Warn("waiting for NATS JetStream; still trying", "connected", nc.IsConnected(),
				"waited", time.Since(start).Round(time.Second).String(), "err", err)
		}
	}
}

// ErrConnectionClosed is returned by Connect when the NATS client closed
// its connection for good before provisioning succeeded (for instance the
// server refused its credentials): retrying cannot help.
var ErrConnectionClosed = errors.New("bus: the NATS connection was closed")

// Config returns the effective configuration, defaults applied.
func (b *Bus) Config() Config { return b.cfg }

// Connected reports whether the NATS connection is up (for readiness).
func (b *Bus) Connected() bool { return b.nc.IsConnected() }

// Close drains the connection: subscriptions finish what they hold,
// pending publishes are flushed, then the connection closes.
func (b *Bus) Close() error {
	if b.nc.IsClosed() {
		return nil
	}
	b.hubOnce.Do(func() {}) // no hub starts from now on
	if b.dispatch != nil {
		b.dispatch.close()
	}
	if b.hubStop != nil {
		b.hubStop()
	}
	done := make(chan struct{})
	b.nc.SetClosedHandler(func(*nats.Conn) { close(done) })
	if err := b.nc.Drain(); err != nil {
		b.nc.Close()
		return nil
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		b.nc.Close()
	}
	return nil
}

// storage returns the configured storage type.
func (b *Bus) storage() jetstream.StorageType {
	if b.cfg.MemoryStorage {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// ensureAgent creates or updates the durable work consumer of an agent. All
// replicas of the agent bind to this one consumer, so work is shared, and a
// crashed replica's unacknowledged work goes to another after AckWait.
func (b *Bus) ensureAgent(ctx context.Context, agent string) error {
	if !schemas.ValidAgentName(agent) {
		return fmt.Errorf("bus: invalid agent name %q", agent)
	}
	c := b.cfg
	_, err := b.js.CreateOrUpdateConsumer(ctx, schemas.StreamWork, jetstream.ConsumerConfig{
		Durable:     schemas.ConsumerWork(agent),
		Description: "a2abus work for agent " + agent,
		// The per-task subjects, and the agent's own subject where work
		// from edges before per-task subjects may still wait.
		FilterSubjects: []string{schemas.SubjectWork(agent), schemas.SubjectWorkTasks(agent)},
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        c.AckWait,
		MaxDeliver:     c.MaxDeliver,
		MaxAckPending:  c.MaxAckPending,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		Replicas:       c.Replicas,
		MemoryStorage:  c.MemoryStorage,
	})
	if err != nil {
		return fmt.Errorf("bus: provision consumer for agent %s: %w", agent, err)
	}
	return nil
}

// jsErrStoreFailed is the JetStream error code of a store refusing a write
// (a discard-new stream or bucket at its MaxBytes/MaxMsgs bound).
const jsErrStoreFailed = 10077

// errUnavailable classifies bus failures a caller may retry (stream full,
// no JetStream reachable, timeouts) as schemas.ErrUnavailable.
func errUnavailable(op string, err error) error {
	var api *jetstream.APIError
	if errors.As(err, &api) && (api.ErrorCode == jsErrStoreFailed || api.Code == 503) {
		// A stream or bucket at its bound (discard-new) or storage trouble:
		// the caller should retry later; nothing accepted is affected.
		return fmt.Errorf("%s: %w: %w", op, schemas.Errorf(schemas.ErrUnavailable, "the message bus is at capacity (%s); retry shortly", api.Description), err)
	}
	if errors.Is(err, jetstream.ErrMaxBytesExceeded) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("%s: %w: %w", op, schemas.Errorf(schemas.ErrUnavailable, "the message bus cannot take this request now; retry shortly"), err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// abort closes the connection at once, without draining: work in flight
// stays unacknowledged and is redelivered to another worker after AckWait.
// That is what a crashed process looks like to the rest of the system;
// tests simulate one with it (bustest.Abort).
func (b *Bus) abort() { b.nc.Close() }

// Metrics returns the process's metrics registry (Config.Metrics).
func (b *Bus) Metrics() *Metrics { return b.cfg.Metrics }

// busMetrics are the families the bus records.
type busMetrics struct {
	work        Counter   // a2a_work_messages_total{agent,outcome}
	redelivered Counter   // a2a_work_redeliveries_total{agent}
	deadLetters Counter   // a2a_work_dead_letters_total{agent}
	dispatched  Counter   // a2a_work_dispatched_total{agent}
	waiting     Gauge     // a2a_work_waiting{agent}
	finished    Counter   // a2a_tasks_finished_total{agent,state}
	duration    Histogram // a2a_task_duration_seconds{agent,state}: created to terminal
	expired     Counter   // a2a_tasks_expired_total{agent,state}
	conflicts   Counter   // a2a_task_store_conflicts_total
	following   Gauge     // a2a_bus_watch_following{watch}
	replaced    Counter   // a2a_bus_watch_consumers_replaced_total{watch}
	// push notifications
	pushWakes       Counter // a2a_push_wakeups_total
	pushDeadLetters Counter // a2a_push_dead_letters_total
}

func newBusMetrics(m *Metrics, nc *nats.Conn) busMetrics {
	m.CounterFunc("a2a_bus_messages_sent_total", "NATS messages this process sent (every JetStream operation is at least one).",
		func() float64 { return float64(nc.Stats().OutMsgs) })
	m.CounterFunc("a2a_bus_messages_received_total", "NATS messages this process received.",
		func() float64 { return float64(nc.Stats().InMsgs) })
	m.CounterFunc("a2a_bus_reconnects_total", "Times this process reconnected to NATS.",
		func() float64 { return float64(nc.Stats().Reconnects) })
	return busMetrics{
		work:        m.Counter("a2a_work_messages_total", "Work deliveries ended by this process, by how: ack (done or already finished), nak (handed back), term (never retried).", "agent", "outcome"),
		redelivered: m.Counter("a2a_work_redeliveries_total", "Work deliveries taken that were not the first delivery of their item.", "agent"),
		deadLetters: m.Counter("a2a_work_dead_letters_total", "Work items this process moved to the dead-letter stream.", "agent"),
		dispatched:  m.Counter("a2a_work_dispatched_total", "Work items this process moved to their agent's workers, holding the dispatch lease: from the intake, or directly when their turn was now.", "agent"),
		waiting:     m.Gauge("a2a_work_waiting", "Work items waiting for their caller's turn that this process holds, holding the dispatch lease.", "agent"),
		finished:    m.Counter("a2a_tasks_finished_total", "Tasks this process moved to a terminal state, by state.", "agent", "state"),
		duration:    m.Histogram("a2a_task_duration_seconds", "Time from a task's creation to the terminal state this process moved it to, by agent and state.", TaskDurationBuckets, "agent", "state"),
		expired:     m.Counter("a2a_tasks_expired_total", "Tasks canceled after waiting too long for input, by the state they waited in.", "agent", "state"),
		conflicts:   m.Counter("a2a_task_store_conflicts_total", "Task record writes that lost a compare-and-swap race and were retried."),
		following:   m.Gauge("a2a_bus_watch_following", "1 while the process's watch (tasks, agents) has a live consumer, 0 while it replaces a lost one.", "watch"),
		replaced:    m.Counter("a2a_bus_watch_consumers_replaced_total", "Consumers of a watch (tasks, agents) lost and replaced (a node died, the connection moved, the consumer was deleted).", "watch"),

		pushWakes:       m.Counter("a2a_push_wakeups_total", "Wake-ups of push senders this process published (one a task write, when none was pending)."),
		pushDeadLetters: m.Counter("a2a_push_dead_letters_total", "Push notifications this process gave up on and moved to the dead-letter stream."),
	}
}

// Stats counts the messages this connection sent and received: every
// JetStream operation (publish, KV read or write, fetch, ack) is at least one
// message out, so the counts measure what a task costs on the bus (a
// benchmark reads them through bustest.Stats).
type Stats struct {
	OutMsgs, InMsgs uint64
}

// stats returns the connection's message counts so far.
func (b *Bus) stats() Stats {
	s := b.nc.Stats()
	return Stats{OutMsgs: s.OutMsgs, InMsgs: s.InMsgs}
}
