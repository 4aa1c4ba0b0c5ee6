package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/discovery/mcpbridge"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/workers"
)

// The phases of a serve, edge, worker or node process, from the ops
// listeners to the ordered shutdown.

// run is the life of a serve, edge, worker or node process, phase by
// phase. The defers order its shutdown: what started later stops first,
// so the edge's following of the bus ends before the bus connection
// drains, which it does before the embedded server stops, and the ops
// listeners close last of all.
func (p *process) run(ctx context.Context, cmd string) error {
	stopOps, err := p.startOps(cmd)
	if err != nil {
		return err
	}
	defer stopOps()
	pre, err := p.prepare(ctx, cmd)
	if err != nil {
		return err
	}
	web := pre.web
	if web != nil {
		defer web.stop(5 * time.Second) // early returns: a running edge is stopped in order by serveEdge
	}
	srv, err := p.startServer(cmd)
	if err != nil {
		return err
	}
	if srv != nil {
		defer srv.Shutdown()         // last: after every client has drained
		srv.ReportMetrics(p.metrics) // its traffic, JetStream and streams, on this process's /metrics
	}
	if cmd == "node" {
		return p.runNode(ctx, srv)
	}
	startCtx, cancel := p.startContext(ctx, cmd)
	defer cancel()
	web.setReason("connecting to NATS")
	b, err := p.connect(startCtx, cmd, srv, pre.natsAuth)
	if err != nil {
		return p.stopped(ctx, err)
	}
	defer b.Close() // drains the connection before the server stops

	// Workers first, so the agents are registered when the edge opens.
	wk, err := p.startWorkers(ctx, cmd, b, pre)
	if err != nil {
		return err
	}
	web.setReason("starting agents")
	if err := p.await(startCtx, "agents", wk.ready); err != nil {
		wk.stop()
		return p.stopped(ctx, fmt.Errorf("agents did not start: %w", err))
	}
	if cmd == "worker" {
		return p.runWorker(ctx, wk)
	}
	return p.runEdge(ctx, startCtx, cmd, b, srv, pre, wk)
}

// startOps owns what every later phase reports into: the process's
// metrics registry (with its build info), the share of its file
// descriptors, and the metrics and profiler listeners, opened first so
// that start-up itself can be watched and profiled. stop closes the
// listeners; run defers it first, so they close last.
func (p *process) startOps(cmd string) (stop func(), err error) {
	p.metrics = bus.NewMetrics()
	p.metrics.Gauge("a2a_build_info", "The a2abus version and Go runtime of this process (always 1).", "version", "go").
		Set(1, discovery.Version, runtime.Version())
	p.planConns(cmd)
	stopPprof := func() {}
	if p.cfg.Pprof != "" {
		if stopPprof, err = servePprof(p.cfg.Pprof, p.opsHTTP("pprof"), p.log); err != nil {
			return nil, err
		}
	}
	if p.cfg.MetricsListen == "" {
		return stopPprof, nil
	}
	stopMetrics, err := serveMetrics(p.cfg.MetricsListen, p.metrics, p.opsHTTP("metrics"), p.log)
	if err != nil {
		stopPprof()
		return nil, err
	}
	return func() { stopMetrics(); stopPprof() }, nil
}

// prepared is what start-up reads and checks before anything starts,
// kept for the phases that start things.
type prepared struct {
	// defs are the agents this process runs (serve, worker).
	defs []workers.Definition
	// keys sign push notifications, and pushPolicy is where webhooks may
	// point (keys is nil when push is off).
	keys       *keyring
	pushPolicy discovery.Policy
	// cardKeys sign the cards an edge serves (nil: unsigned; keys when
	// it is the same file); trusted are the pinned keys external agents'
	// cards may be signed with (nil: none pinned).
	cardKeys *keyring
	trusted  *reloaded[auth.CardKeys]
	// natsAuth is an edge's or worker's NATS credentials and TLS.
	natsAuth clientAuth
	// authn is the edge's authentication, and web its HTTP server,
	// listening already (both nil without an edge: worker, node).
	authn *auth.Authenticator
	web   *edgeHTTP
}

// prepare owns the checks of start-up: every definition, key, credential
// and setting cmd needs is read and checked here, so that a mistake fails
// before anything starts, and the edge's port is bound last of all.
func (p *process) prepare(ctx context.Context, cmd string) (*prepared, error) {
	var pre prepared
	// Build the agents first: a configuration mistake fails before anything
	// starts. Their remote agents check card signatures with what
	// cardTrust reads.
	if cmd == "serve" || cmd == "worker" {
		var err error
		if pre.trusted, err = p.cardTrust(ctx); err != nil {
			return nil, err
		}
		if pre.defs, err = p.definitions(); err != nil {
			return nil, err
		}
	}
	// Push notifications: the signing keys and where webhooks may point,
	// read now too.
	if p.cfg.Push.Enabled && cmd != "node" {
		var err error
		if pre.pushPolicy, err = p.cfg.Push.policy(); err != nil {
			return nil, err
		}
		if pre.keys, err = p.pushKeys(cmd); err != nil {
			return nil, err
		}
	}
	// The keys an edge signs its cards with: the push keys' keyring when
	// it is the same file, so one watch re-reads it.
	if (cmd == "serve" || cmd == "edge") && p.cfg.CardKeys != "" {
		var err error
		if pre.keys != nil && pre.keys.path == p.cfg.CardKeys {
			pre.cardKeys = pre.keys
		} else if pre.cardKeys, err = p.signingKeys(p.cfg.CardKeys, "card signing keys"); err != nil {
			return nil, err
		}
	}
	// An edge's or worker's NATS credentials and TLS files are read now,
	// so a missing or malformed one fails before anything starts too.
	if cmd == "edge" || cmd == "worker" {
		var err error
		if pre.natsAuth, err = p.cfg.clientAuth(); err != nil {
			return nil, err
		}
	}
	// The edge's port is bound before anything else starts, so a port
	// conflict fails at once, and it answers from then on: alive, but 503
	// "not ready" to every A2A request until the edge follows the bus.
	// Its authentication is checked before that: a mistake there, or an
	// anonymous edge on a public address, fails before anything listens.
	if cmd == "serve" || cmd == "edge" {
		var err error
		if pre.authn, err = p.authenticator(ctx); err != nil {
			return nil, err
		}
		if p.openAdmin, err = p.decideOpenAdmin(cmd); err != nil {
			return nil, err
		}
		if pre.web, err = p.listen(pre.authn); err != nil {
			return nil, err
		}
	}
	return &pre, nil
}

// startServer starts the embedded NATS server of serve and node, the
// process's own bus; nil for edge and worker, which join one elsewhere.
func (p *process) startServer(cmd string) (*bus.Server, error) {
	if cmd != "serve" && cmd != "node" {
		return nil, nil
	}
	listen := p.cfg.NATSListen
	if listen == "off" {
		listen = ""
	}
	routes := splitList(p.cfg.Routes)
	sc := bus.ServerConfig{
		DataDir: p.cfg.DataDir, Listen: listen, Name: p.cfg.ServerName,
		ClusterName: p.cfg.ClusterName, ClusterListen: p.cfg.ClusterListen, Routes: routes,
		MaxConnections: p.conns.nats,
	}
	if err := p.serverAuth(&sc); err != nil {
		return nil, err
	}
	return bus.StartServer(sc)
}

// runNode is the rest of a node's life: it only runs srv, which it
// announces, until ctx ends.
func (p *process) runNode(ctx context.Context, srv *bus.Server) error {
	fmt.Fprintf(p.out, "a2abus node ready\n  NATS           %s\n", srv.ClientURL())
	if p.credsDir != "" {
		fmt.Fprintf(p.out, "  credentials    %s  (edge, worker, admin: --nats-creds FILE)\n", p.credsDir)
	}
	<-ctx.Done()
	p.log.Info("shutting down")
	return nil
}

// connect owns the process's bus connection (to srv when it has one),
// and the directory its routers read, made on it; p.bus is set for the
// agents that create their children or keep their cards on it.
func (p *process) connect(startCtx context.Context, cmd string, srv *bus.Server, na clientAuth) (*bus.Bus, error) {
	b, err := bus.Connect(startCtx, p.busConfig(cmd, srv, na))
	if err != nil {
		return nil, err
	}
	p.bus = b
	if p.wantDirectory {
		p.directory = b.NewAgentDirectory()
	}
	return b, nil
}

// workerGroup is the process's work in the background: the monitors of
// external agents, the runners of its agents, the push keys' watcher, the
// agents of the run-time registry and the push sender. A stop signal does
// not end it: the shutdown stops it in its turn, once the edge takes no
// new requests.
type workerGroup struct {
	runners []*workers.Runner
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// ready waits for every runner to be ready to take work, or for ctx.
func (g *workerGroup) ready(ctx context.Context) error {
	for _, r := range g.runners {
		select {
		case <-r.Ready():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// stop ends the work and waits until it has ended.
func (g *workerGroup) stop() { g.cancel(); g.wg.Wait() }

// keysEvery is how often the key files are looked at: a rotation takes
// effect within it.
const keysEvery = 10 * time.Second

// startWorkers starts the process's workers on b (see workerGroup). If
// one cannot start, those started are stopped.
func (p *process) startWorkers(ctx context.Context, cmd string, b *bus.Bus, pre *prepared) (*workerGroup, error) {
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	g := &workerGroup{runners: make([]*workers.Runner, len(pre.defs)), cancel: stopWork}
	// External agents are discovered in the background: one that is down
	// is logged and recorded as offline, and never holds up start-up.
	for _, m := range p.monitors {
		g.wg.Go(func() { m.Run(workCtx) })
	}
	budgets, _ := budgetPolicy(p.cfg.Budgets) // checked by validate
	for i, def := range pre.defs {
		if l, ok := def.Agent.(workers.LLM); ok && len(budgets.Rules) > 0 {
			// The llm kind counts its tokens against the budgets.
			l.Budget = b.Budgets(budgets)
			def.Agent = l
		}
		r := workers.NewRunner(b, def, workers.Options{
			Concurrency:   p.cfg.Agents[i].Concurrency,
			ShutdownGrace: time.Duration(p.cfg.ShutdownGrace),
			Registry:      p.registry(),
			Logger:        p.log,
		})
		g.runners[i] = r
		g.wg.Go(func() {
			if err := r.Run(workCtx); err != nil {
				p.log.Error("worker stopped", "agent", def.Name, "err", err)
			}
		})
	}
	if keys := pre.keys; keys != nil {
		g.wg.Go(func() { keys.watch(workCtx, keysEvery, p.log, p.auditKeys(b)) })
	}
	if keys := pre.cardKeys; keys != nil && keys != pre.keys {
		g.wg.Go(func() { keys.watch(workCtx, keysEvery, p.log, p.auditKeys(b)) })
	}
	if keys := pre.trusted; keys != nil {
		g.wg.Go(func() { keys.watch(workCtx, keysEvery, p.log, p.auditKeys(b)) })
	}
	if (cmd == "serve" || cmd == "worker") && (p.cfg.RegistryAgents == nil || *p.cfg.RegistryAgents) {
		dyn := &dynamicAgents{p: p, static: map[string]bool{}, running: map[string]*dynAgent{}}
		for _, a := range p.cfg.Agents {
			dyn.static[a.Name] = true
		}
		g.wg.Go(func() { dyn.Run(workCtx) })
	}
	if p.runsSender(cmd) {
		ps, err := p.pushSender(b, pre.keys, pre.pushPolicy)
		if err != nil {
			g.stop()
			return nil, err
		}
		g.wg.Go(func() {
			if err := ps.Run(workCtx); err != nil {
				p.log.Error("push sender stopped", "err", err)
			}
		})
	}
	return g, nil
}

// runWorker is the rest of a worker's life: its agents work until ctx
// ends, then stop.
func (p *process) runWorker(ctx context.Context, wk *workerGroup) error {
	p.log.Info("a2abus worker running", "agents", p.agentNames(), "nats", bus.RedactURLs(p.cfg.NATSURL))
	<-ctx.Done()
	p.log.Info("shutting down")
	wk.stop()
	return nil
}

// runEdge is the rest of an edge's life (serve, edge): the edge on b,
// with its MCP bridge, follows the bus until it is ready, then the
// listener held since start-up hands it every request until the process
// stops (see serveEdge). It owns the edge's following of the bus and MCP
// over stdio, which end when it returns: before run drains the bus
// connection. wk is stopped on every way out.
func (p *process) runEdge(ctx, startCtx context.Context, cmd string, b *bus.Bus, srv *bus.Server, pre *prepared, wk *workerGroup) error {
	web := pre.web
	ec := p.edgeConfig(pre)
	var bridge *mcpbridge.Bridge
	ec.MCP = func(door *edge.InProcess) http.Handler {
		bridge = p.edgeBridge(door)
		return bridge.Handler()
	}
	ec.GRPCAddress = p.grpcAddress(web)
	e := edge.New(b, ec)
	followCtx, stopFollow := context.WithCancel(context.WithoutCancel(ctx))
	followDone := make(chan error, 1)
	go func() { followDone <- e.Run(followCtx) }()
	defer func() { stopFollow(); <-followDone }()
	web.setReason("following the bus")
	if err := p.await(startCtx, "the edge to follow the bus", e.WaitReady); err != nil {
		wk.stop()
		return p.stopped(ctx, fmt.Errorf("edge did not become ready: %w", err))
	}
	// The banner is whole before the edge reports ready: whoever waits
	// for /readyz reads all of it.
	p.announce(cmd, web.l.Addr().String(), srv)
	web.start.Serve(e.Handler())
	p.serveGRPC(web, e)
	go func() { _ = bridge.Run(followCtx) }()
	if p.mcpStdio != nil {
		// "a2abus mcp": MCP over stdio until the client goes, then the
		// process stops as on a signal.
		mcpCtx, endMCP := context.WithCancel(ctx)
		defer endMCP()
		go func() {
			<-bridge.Ready()
			if err := bridge.ServeIO(mcpCtx, os.Stdin, nopWriteCloser{p.mcpStdio}); err != nil && mcpCtx.Err() == nil {
				p.log.Warn("MCP over stdio ended", "err", err)
			}
			endMCP()
		}()
		ctx = mcpCtx
	}
	return p.serveEdge(ctx, e, web, wk)
}

// edgeConfig is the edge's configuration, with what prepare read.
func (p *process) edgeConfig(pre *prepared) edge.Config {
	ec := edge.Config{
		PublicURL:          p.cfg.PublicURL,
		DefaultAgent:       p.cfg.DefaultAgent,
		MaxBodyBytes:       p.cfg.MaxBodyBytes,
		MaxBacklogPerAgent: uint64(max(p.cfg.MaxBacklog, 0)),
		Limits:             p.edgeLimits(),
		MaxFinishedTasks:   p.cfg.MaxFinishedTasks,
		MaxFinishedBytes:   p.cfg.MaxFinishedBytes,
		SweepEvery:         time.Duration(p.cfg.SweepEvery),
		OrphanAfter:        time.Duration(p.cfg.OrphanAfter),
		IdleAfter:          time.Duration(p.cfg.IdleAfter),
		BlockingTimeout:    time.Duration(p.cfg.BlockingTimeout),
		MaxStreams:         p.conns.streams,
		LoopbackOnly:       loopbackAddr(p.cfg.Listen),
		Auth:               pre.authn,
		ExtendedSkills:     p.extendedSkills(),
		CardScopesAsArrays: p.cfg.CardScopesAsArrays,
		Card10Only:         p.cfg.CardForm == "1.0",
		PublicMetrics:      p.cfg.Auth.PublicMetrics,
		OpenAdmin:          p.openAdmin,
		RemoteEnvAllow:     p.cfg.RemoteEnvAllow,
		Logger:             p.log,
	}
	ec.MaxBodyBuffer, ec.MaxBodyBufferPerAddr = p.cfg.MaxBodyBuffer, p.cfg.MaxBodyBufferPerAddr
	ec.Trust, _ = p.cfg.Trust.policy()          // checked by validate
	ec.Approvals, _ = p.cfg.Approvals.policy()  // checked by validate
	ec.Budgets, _ = budgetPolicy(p.cfg.Budgets) // checked by validate
	if pre.cardKeys != nil {
		ec.CardKeys = pre.cardKeys.get
	}
	if pre.keys != nil {
		keys := pre.keys
		ec.Push, ec.CheckWebhook, ec.NotificationKeys = true, checkWebhook(pre.pushPolicy), func() []byte { return keys.get().JWKS() }
	}
	return ec
}

// serveEdge owns the edge's serving and its ordered shutdown: e serves
// until ctx ends, then it drains, and its requests and wk's work share one
// grace. A listener that fails ends the process with an error.
func (p *process) serveEdge(ctx context.Context, e *edge.Server, web *edgeHTTP, wk *workerGroup) error {
	select {
	case <-ctx.Done():
	case err := <-web.l.Done():
		web.stop(0)
		wk.stop()
		return fmt.Errorf("edge http: %w", err)
	case err := <-web.grpcDone:
		// Serve returns nil only once stopped, which only stop does.
		web.stop(0)
		wk.stop()
		return fmt.Errorf("edge grpc: %w", err)
	}
	// 1. not ready, and the streams of tasks that only wait for input end
	// at once (their clients resume elsewhere)  2. stop accepting HTTP;
	// requests, streams and work in flight get the one grace together:
	// the workers take no new work from the moment the edge takes no new
	// requests, and whatever still runs when the grace is over is ended
	// (requests canceled and their connections closed, work handed back)
	// 3./4. (deferred) drain the connection, stop the server. Nothing a
	// client or an agent holds keeps the process past the grace and a
	// second or two. The log says what the shutdown waits for and, when
	// it waited for something, what it cut.
	grace := time.Duration(p.cfg.ShutdownGrace)
	d := e.Drain()
	attrs := []any{"waiting_for", d.WaitFor.String(), "up_to", grace.String()}
	if d.EndedNow > 0 {
		what := "streams of tasks"
		if d.EndedNow == 1 {
			what = "stream of a task"
		}
		attrs = append(attrs, "ended_at_once", fmt.Sprintf("%d %s waiting for input", d.EndedNow, what))
	}
	p.log.Info("shutting down", attrs...)
	var httpDone sync.WaitGroup
	httpDone.Go(func() { web.stop(grace) })
	wk.stop()
	httpDone.Wait()
	if d.WaitFor != (edge.InFlight{}) {
		p.log.Info("edge drained", "cut_at_grace_end", e.Cut().String())
	}
	return nil
}

// stopped tells an error of the start from a stop signal during it (ctx,
// the process's, ended), which ends the process cleanly.
func (p *process) stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		p.log.Info("shutting down before start-up finished")
		return nil
	}
	return err
}
