// Command a2abus runs the a2abus A2A system: everything in one process with
// an embedded NATS server (serve), or an edge or a worker group joining an
// existing NATS (edge, worker). It is the only place that reads flags,
// environment and config files, and it wires the packages together.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/edge/grpcbinding"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

const usage = `a2abus — an A2A server built on NATS JetStream

Usage:
  a2abus serve  [flags]   embedded NATS + edge + agents, all in one process
  a2abus edge   [flags]   an A2A HTTP edge joining an existing NATS (--nats)
  a2abus worker [flags]   agent workers joining an existing NATS (--nats)
  a2abus node   [flags]   only the NATS JetStream server, e.g. one member of a
                          cluster (--server-name, --cluster-name, --cluster-listen, --routes)
  a2abus credentials --dir DIR
                          NATS credentials of a deployment: users.json and
                          cluster for nodes, edge and worker for those
  a2abus mcp [serve flags]  the agents as MCP tools over stdio, with a serve in
                          this process; a2abus mcp --url URL bridges a running edge
  a2abus push-keys --file FILE
                          make or rotate the keys push notifications
                          (--push-keys FILE) or agent cards (--card-keys
                          FILE) are signed with
  a2abus load   [flags]   load generator: N concurrent clients against any A2A
                          agent; prints throughput and p50/p90/p99 latency

A client of any A2A agent (-o text|json, --header 'Authorization: ...'):
  a2abus card URL                 the agent's card (--card-trust-keys FILE or
                                  --card-trust-jwks-url URL: check its signature)
  a2abus send URL TEXT            send a message (--stream, --no-wait, --task, --context,
                                  --push-url: register a webhook for its notifications)
  a2abus stream URL TEXT          send and print the task's progress as it happens
  a2abus get URL TASK_ID          a task
  a2abus tasks URL                list tasks (--context, --state, --page-size, --page-token)
  a2abus cancel URL TASK_ID       cancel a task
  a2abus subscribe URL TASK_ID    follow a task's events (--last-event-id)
  a2abus push-configs URL TASK_ID a task's push-notification configs and how their
                                  delivery stands (--delete ID)
  a2abus agents URL               an a2abus edge's agents (--skill, --tag, --kind, --health)
  a2abus agents add|update|remove URL NAME
                                  the run-time registry, as an admin: a remote agent
                                  (--remote URL, --check-every, --tag, --header-env),
                                  or maintenance (--maintenance "why"; "" ends it)
  a2abus approvals URL            the approvals waiting for a decision, as an approver
  a2abus approvals approve|deny URL TASK_ID --reason WHY
                                  decide one: approved, the task runs; denied, it
                                  ends REJECTED with the reason
  a2abus audit URL                the audit record, as an admin (--principal, --task,
                                  --agent, --since 1h|RFC3339, --until, --limit, --json)
  a2abus budget URL               the caller's budgets at an a2abus edge: limit, used,
                                  left, when each resets (--json; admins: --principal,
                                  --tenant)
  a2abus webhook --jwks URL       receive push notifications, verify and print them
                                  (--listen ADDR, --url URL as registered)

Run "a2abus <command> --help" for the flags of a command.
`

// ownsProcess is set by main: run may then tune the Go runtime for the
// whole process (GC target, memory limit). Tests that call run in their
// own process leave it unset, so one test's limits do not shrink the next
// in-process server (an embedded NATS server sizes JetStream's memory by
// the process's memory limit).
var ownsProcess bool

func main() {
	ownsProcess = true
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "a2abus:", err)
		}
		// 1: the agent or the network failed a client command; 2: usage
		// and start-up errors.
		var ce *cliError
		if errors.As(err, &ce) {
			os.Exit(1)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	cmd := args[0]
	if cmd == "load" {
		return runLoad(ctx, args[1:], stdout, stderr)
	}
	if cmd == "credentials" {
		return runCredentials(args[1:], stdout, stderr)
	}
	if cmd == "push-keys" {
		return runPushKeys(args[1:], stdout, stderr)
	}
	if cmd == "webhook" {
		return runWebhook(ctx, args[1:], stdout, stderr)
	}
	if cmd == "mcp" {
		return runMCP(ctx, args[1:], stdout, stderr, getenv)
	}
	if cmd == "approvals" {
		return runApprovals(ctx, args[1:], stdout, stderr, getenv)
	}
	if cmd == "audit" {
		return runAudit(ctx, args[1:], stdout, stderr, getenv)
	}
	if cmd == "budget" {
		return runBudget(ctx, args[1:], stdout, stderr, getenv)
	}
	if _, ok := clientCommands[cmd]; ok {
		return runClient(ctx, cmd, args[1:], stdout, stderr)
	}
	switch cmd {
	case "serve", "edge", "worker", "node":
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
	fs := flag.NewFlagSet("a2abus "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, err := loadConfig(fs, args[1:], getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	if tracingWanted(cfg, getenv) {
		stopTracing, err := startTracing(ctx, cfg, cmd, getenv, log)
		if err != nil {
			return err
		}
		defer stopTracing()
	}
	if ownsProcess && getenv("GOGC") == "" && cfg.GCPercent > 0 {
		debug.SetGCPercent(cfg.GCPercent)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if ownsProcess && getenv("GOMEMLIMIT") == "" {
		if limit, why := memoryLimit(cfg.MemoryLimit, os.ReadFile); limit > 0 {
			debug.SetMemoryLimit(limit)
			log.Info("memory limit", "bytes", limit, "from", why, "heap_factor", cfg.HeapFactor)
			if cfg.HeapFactor > 0 {
				hp := heapPolicy{factor: cfg.HeapFactor, floor: min(heapPolicyFloor, limit), ceiling: limit}
				go hp.run(ctx, time.Second, debug.SetMemoryLimit)
			}
		}
	}
	return (&process{cfg: cfg, log: log, out: stdout}).run(ctx, cmd)
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(traceHandler{slog.NewJSONHandler(w, opts)})
	}
	return slog.New(traceHandler{slog.NewTextHandler(w, opts)})
}

// registry is the live registry the process's agents may read (the
// router's), or nil when no agent asked for one (see wantDirectory).
func (p *process) registry() workers.Registry {
	if p.directory == nil {
		return nil
	}
	return p.directory
}

// process is one running a2abus process and the pieces it started,
// stopped in the order the end of run gives: the edge stops taking
// requests and the workers stop taking work together, within one grace,
// then the bus connection drains, then the NATS server stops.
type process struct {
	cfg Config
	log *slog.Logger
	out io.Writer
	// bus is set once connected; fanout agents create their children on
	// it and remote agents keep their cards in its cache.
	bus *bus.Bus
	// monitors follow the external agents of remote agents and the MCP
	// servers of mcp agents; directory is the registry routers read (made
	// by the first router, run with the monitors).
	monitors      []interface{ Run(context.Context) }
	directory     *bus.AgentDirectory
	wantDirectory bool
	// metrics is the process's registry, shared by the bus, the edge, the
	// runners and the card resolver.
	metrics *bus.Metrics
	// anonymous is set when the edge authenticates no one; schemes names
	// the schemes it takes otherwise (for the start-up banner).
	anonymous bool
	schemes   []string
	// openAdmin is set when such an edge serves its admin routes to every
	// caller (see decideOpenAdmin).
	openAdmin bool
	// credsDir is where the embedded server's credentials were made, if
	// it made them.
	credsDir string
	// conns shares the process's file descriptors out between its HTTP
	// listeners and its embedded NATS server.
	conns connPlan
	// mcpStdio, when set, is where "a2abus mcp" answers MCP (stdin is
	// where it reads): the process's agents served as tools over stdio.
	mcpStdio io.Writer
	// cardVerify checks the signatures of external agents' cards (nil:
	// not checked; see cardTrust).
	cardVerify discovery.CardVerifier
}

// busConfig is the bus configuration of cmd's process: in-process to srv
// (serve), or to --nats with na (see clientAuth). A worker binds to the
// streams and buckets an edge (or serve) provisioned: its credentials may
// not change them.
func (p *process) busConfig(role string, srv *bus.Server, na clientAuth) bus.Config {
	c := p.cfg
	return bus.Config{
		URL: c.NATSURL, Server: srv, Role: role, Logger: p.log, Metrics: p.metrics,
		Credentials: na.creds, TLS: na.tls,
		Replicas:      c.Replicas,
		TaskTTL:       time.Duration(c.TaskTTL),
		HistoryCap:    c.HistoryCap,
		AckWait:       time.Duration(c.AckWait),
		MaxDeliver:    c.MaxDeliver,
		AuditMaxAge:   time.Duration(c.AuditMaxAge),
		AuditMaxBytes: c.AuditMaxBytes,
		BindOnly:      role == "worker",
		Name:          edgeInstance(role, c.Listen),
	}
}

// edgeInstance names a process that serves an edge by its host and listen
// port, which no other process on the host holds at the same time, so
// that the same process restarted is the same instance on the bus and
// takes back at once the sweep lease it held when it died. Other
// processes keep a random name ("").
func edgeInstance(role, listen string) string {
	if role != "serve" && role != "edge" {
		return ""
	}
	host, err := os.Hostname()
	_, port, perr := net.SplitHostPort(listen)
	if err != nil || perr != nil || host == "" || port == "" || port == "0" {
		return ""
	}
	name := []byte(host + "-" + port)
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			name[i] = '-'
		}
	}
	return role + "-" + string(name)
}

// startContext bounds the start of cmd: connecting to NATS, provisioning,
// the agents and the edge becoming ready. serve's server is in-process, so
// anything it cannot do within 60s is a failure; edge and worker wait for
// their NATS servers (a cluster may still be forming) until stopped, or for
// --start-timeout when it is set. The bus logs every few seconds while it
// waits, and gives up at once on a connection it can never use.
func (p *process) startContext(ctx context.Context, cmd string) (context.Context, context.CancelFunc) {
	if cmd == "serve" {
		return context.WithTimeout(ctx, 60*time.Second)
	}
	if d := time.Duration(p.cfg.StartTimeout); d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// await waits for ready, a wait bounded by ctx, logging every few seconds
// that the process is still waiting for what. It returns ctx's error if ctx
// ends first.
func (p *process) await(ctx context.Context, what string, ready func(context.Context) error) error {
	begin := time.Now()
	for {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := ready(wctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.log.Warn("start-up still waiting", "waiting_for", what, "waited", time.Since(begin).Round(time.Second).String())
	}
}

// edgeHTTP is the HTTP server of an edge process. It owns the listener from
// start-up on; start answers every request (not ready) until the edge is
// handed to it.
type edgeHTTP struct {
	l     *edge.HTTPListener
	start *edge.Starting
	// grpcL is the gRPC binding's listener (--grpc-listen), bound with
	// the edge's; grpc serves it once the edge is ready (serveGRPC), with
	// the edge's TLS (tls, nil for cleartext), and grpcDone carries the
	// error it stops serving with (nil: stopped).
	grpcL    net.Listener
	tls      *tls.Config
	grpc     *grpcbinding.Server
	grpcDone chan error
	stopOnce sync.Once
}

// listen binds the edge's address and serves it with an edge.Starting,
// within the process's HTTP bounds and its share of file descriptors.
func (p *process) listen(authn *auth.Authenticator) (*edgeHTTP, error) {
	hc := p.httpConfig("a2a")
	hc.MaxConns, hc.MaxConnsPerAddr = p.conns.edge, p.conns.perAddr
	scheme := "http"
	if p.cfg.TLSCert != "" {
		tc, err := p.tlsConfig()
		if err != nil {
			return nil, err
		}
		hc.TLS, scheme = tc, "https"
	}
	w := &edgeHTTP{start: edge.NewStarting(p.metrics, edge.Config{Auth: authn, PublicMetrics: p.cfg.Auth.PublicMetrics, OpenAdmin: p.openAdmin}),
		tls: hc.TLS, grpcDone: make(chan error, 1)}
	l, err := edge.Listen(p.cfg.Listen, w.start, hc)
	if err != nil {
		return nil, fmt.Errorf("edge listen: %w", err)
	}
	w.l = l
	p.log.Info("edge listening; not ready until it follows the bus", "addr", scheme+"://"+l.Addr().String())
	if p.cfg.GRPCListen != "" {
		raw, err := net.Listen("tcp", p.cfg.GRPCListen)
		if err != nil {
			l.Stop(0)
			return nil, fmt.Errorf("grpc listen: %w", err)
		}
		// Its connections count against the edge's caps: one budget of
		// file descriptors, one share per source address.
		w.grpcL = l.Share(raw)
		p.log.Info("gRPC binding listening; not ready until the edge is", "addr", w.grpcL.Addr().String())
	}
	return w, nil
}

// httpConfig is the bounds of the process's HTTP listener name, without
// connection caps.
func (p *process) httpConfig(name string) edge.HTTPConfig {
	h := p.cfg.HTTP
	return edge.HTTPConfig{
		Name:              name,
		ReadHeaderTimeout: time.Duration(h.ReadHeaderTimeout),
		ReadBodyTimeout:   time.Duration(h.ReadBodyTimeout),
		IdleTimeout:       time.Duration(h.IdleTimeout),
		MaxHeaderBytes:    int(h.MaxHeaderBytes),
		Metrics:           p.metrics,
		Logger:            p.log,
	}
}

// opsHTTP is the bounds of the metrics or profiler listener.
func (p *process) opsHTTP(name string) edge.HTTPConfig {
	hc := p.httpConfig(name)
	hc.MaxConns = opsMaxConns
	return hc
}

// planConns raises the process's file limit and shares it out (see
// fds.go), and says so.
func (p *process) planConns(cmd string) {
	soft, hard, err := raiseFDLimit()
	if err != nil && soft == 0 {
		p.log.Debug("open file limit unknown; connection caps as configured", "err", err)
	}
	ops := 0
	for _, addr := range []string{p.cfg.MetricsListen, p.cfg.Pprof} {
		if addr != "" {
			ops++
		}
	}
	p.conns = planConns(soft, hard, p.cfg.HTTP, ops, cmd == "serve")
	c := p.conns
	switch cmd {
	case "serve", "edge":
		p.log.Info("connection limits", "fd_soft_limit", c.soft, "fd_hard_limit", c.hard, "fd_reserve", p.cfg.HTTP.FDReserve,
			"max_connections", c.edge, "max_connections_per_addr", c.perAddr, "max_streams", c.streams, "nats_max_connections", c.nats)
		if c.lowered {
			p.log.Warn("the open file limit lowers the edge's connection cap below --max-connections; raise it (ulimit -n) or lower --fd-reserve",
				"max_connections", p.cfg.HTTP.MaxConnections, "lowered_to", c.edge)
		}
	default:
		p.log.Debug("open file limit", "fd_soft_limit", c.soft, "fd_hard_limit", c.hard)
	}
}

// setReason says what the edge is waiting for (w may be nil: no edge).
func (w *edgeHTTP) setReason(reason string) {
	if w != nil {
		w.start.SetReason(reason)
	}
}

// stop stops accepting requests and calls on the edge's HTTP and gRPC
// listeners and lets those in flight finish for up to grace, then ends
// them (see edge.HTTPListener.Stop). Only the first call does anything.
func (w *edgeHTTP) stop(grace time.Duration) {
	w.stopOnce.Do(func() {
		var wg sync.WaitGroup
		if w.grpc != nil {
			wg.Go(func() { w.grpc.Stop(grace) })
		} else if w.grpcL != nil {
			_ = w.grpcL.Close()
		}
		w.l.Stop(grace)
		wg.Wait()
	})
}

// grpcAddress is the gRPC binding's address as cards declare it: the
// listener's, with the public URL's host when it listens on every
// interface.
func (p *process) grpcAddress(w *edgeHTTP) string {
	if w.grpcL == nil {
		return ""
	}
	host, port, _ := net.SplitHostPort(w.grpcL.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if u, err := url.Parse(p.cfg.PublicURL); err == nil && u.Hostname() != "" {
			host = u.Hostname()
		}
	}
	return net.JoinHostPort(host, port)
}

// serveGRPC serves the gRPC binding of e, once it is ready: every call
// through its in-process door. The error it stops with goes to grpcDone.
func (p *process) serveGRPC(w *edgeHTTP, e *edge.Server) {
	if w.grpcL == nil {
		return
	}
	w.grpc = grpcbinding.NewServer(e.InProcess("grpc"), grpcbinding.Options{MaxMessageBytes: int(p.cfg.MaxBodyBytes), TLS: w.tls})
	go func() { w.grpcDone <- w.grpc.Serve(w.grpcL) }()
}

func (p *process) agentNames() string {
	var names []string
	for _, a := range p.cfg.Agents {
		names = append(names, a.Name)
	}
	return strings.Join(names, ",")
}

// announce tells a person where to point a client, in one write.
func (p *process) announce(cmd, addr string, srv *bus.Server) {
	var out strings.Builder
	defer func() { _, _ = io.WriteString(p.out, out.String()) }()
	base := p.cfg.PublicURL
	fmt.Fprintf(&out, "a2abus %s ready\n", cmd)
	scheme := "http"
	if p.cfg.TLSCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(&out, "  listening on   %s://%s\n", scheme, addr)
	fmt.Fprintf(&out, "  agent card     %s/.well-known/agent-card.json\n", base)
	fmt.Fprintf(&out, "  JSON-RPC       %s/  (default agent %q)\n", base, p.cfg.DefaultAgent)
	fmt.Fprintf(&out, "  agents         %s/a2a/agents\n", base)
	if p.anonymous {
		fmt.Fprintf(&out, "  AUTH           NONE: anyone who can reach %s can read, list and cancel every task.\n", addr)
		fmt.Fprintf(&out, "                 Configure --api-key-file, $A2ABUS_API_KEYS or --jwt-* before exposing it (see README).\n")
		if p.openAdmin {
			fmt.Fprintf(&out, "  admin          OPEN: every caller may change the agent registry and read /metrics (--open-admin=false closes them).\n")
		} else {
			fmt.Fprintf(&out, "  admin          closed: the agent registry's admin API and /metrics need authentication and --admins (or --open-admin).\n")
		}
	} else {
		fmt.Fprintf(&out, "  auth           %s\n", strings.Join(p.schemes, ", "))
	}
	if p.cfg.Push.Enabled {
		fmt.Fprintf(&out, "  push           on; notifications signed with the keys at %s/.well-known/jwks.json\n", base)
	}
	if srv != nil && srv.ClientURL() != "" {
		creds := "FILE"
		if p.credsDir != "" {
			creds = filepath.Join(p.credsDir, string(bus.RoleWorker))
		}
		fmt.Fprintf(&out, "  NATS           %s  (join with: a2abus worker --nats %s --nats-creds %s --agent NAME)\n", srv.ClientURL(), srv.ClientURL(), creds)
	}
}

// serveMetrics serves the Prometheus metrics of the process at /metrics
// on their own listener, within hc's bounds, until stop is called.
func serveMetrics(addr string, m *bus.Metrics, hc edge.HTTPConfig, log *slog.Logger) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", edge.MetricsHandler(m))
	l, err := edge.Listen(addr, opsHosts(addr, mux), hc)
	if err != nil {
		return nil, fmt.Errorf("metrics listen: %w", err)
	}
	log.Info("metrics listening", "addr", "http://"+l.Addr().String()+"/metrics")
	return func() { l.Stop(0) }, nil
}

// servePprof serves the profiler on its own listener, within hc's bounds,
// until stop is called.
func servePprof(addr string, hc edge.HTTPConfig, log *slog.Logger) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	l, err := edge.Listen(addr, opsHosts(addr, mux), hc)
	if err != nil {
		return nil, fmt.Errorf("pprof listen: %w", err)
	}
	log.Info("profiler listening", "addr", "http://"+l.Addr().String()+"/debug/pprof/")
	return func() { l.Stop(0) }, nil
}

// opsHosts guards the metrics or profiler listener at addr as the edge
// guards its own: on loopback, only requests whose Host is a loopback name
// are served, so a browser page whose DNS name was rebound to 127.0.0.1
// reads neither goroutine dumps nor profiles (edge.LoopbackHosts). A
// listener beyond loopback is reached by address (a scraper's Host is the
// pod's IP) and is the operator's to firewall.
func opsHosts(addr string, h http.Handler) http.Handler {
	if !loopbackAddr(addr) {
		return h
	}
	return edge.LoopbackHosts("", h)
}

// decideOpenAdmin is whether the edge of cmd, if it authenticates no one,
// serves the registry's admin API and /metrics to every caller
// (edge.Config.OpenAdmin): as --open-admin says, by default only for serve
// on loopback, the user's own single process. An edge joining a bus others
// share does not by default: its callers would change the registry of
// every edge, whatever those require. It is refused beyond loopback, where
// "every caller" is the network.
func (p *process) decideOpenAdmin(cmd string) (bool, error) {
	if !p.anonymous {
		return false, nil
	}
	loopback := loopbackAddr(p.cfg.Listen)
	o := p.cfg.Auth.OpenAdmin
	if o == nil {
		return cmd == "serve" && loopback, nil
	}
	if *o && !loopback {
		return false, fmt.Errorf("--open-admin lets every caller change the agent registry, and %s is not a loopback address; configure authentication and --admins instead (for /metrics alone: --metrics-public or --metrics-listen)", p.cfg.Listen)
	}
	return *o, nil
}

// a2aBeyondLoopback is the first address the process takes A2A calls on
// (the edge's, then the gRPC binding's) that is not a loopback address,
// or "" when every one is: what decides whether anonymous callers may be
// served, and without a rate limit. (The admin routes and the Host guard
// are the HTTP listener's alone: loopbackAddr(p.cfg.Listen).)
func (p *process) a2aBeyondLoopback() string {
	for _, addr := range []string{p.cfg.Listen, p.cfg.GRPCListen} {
		if addr != "" && !loopbackAddr(addr) {
			return addr
		}
	}
	return ""
}

// loopbackAddr reports whether a listen address (host:port) accepts
// connections from this machine only.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && auth.LoopbackHost(host)
}

// authenticator builds the edge's authentication from the configuration.
// An edge without any scheme serves one anonymous principal, and only on
// a loopback address unless anonymity is allowed explicitly.
func (p *process) authenticator(ctx context.Context) (*auth.Authenticator, error) {
	ac := p.cfg.Auth
	cfg := auth.Config{APIKeyHeader: ac.APIKeyHeader, Admins: ac.Admins, ClientCertificates: p.cfg.TLSClientCA != "",
		LegacyPrincipalNames: ac.LegacyPrincipalNames}
	for _, k := range ac.APIKeys {
		cfg.APIKeys = append(cfg.APIKeys, auth.APIKey{Key: k.Key, Principal: k.Principal, Admin: k.Admin, Tenants: k.Tenants})
	}
	if ac.APIKeyFile != "" {
		keys, err := loadAPIKeyFile(ac.APIKeyFile)
		if err != nil {
			return nil, err
		}
		cfg.APIKeys = append(cfg.APIKeys, keys...)
	}
	if ac.apiKeysEnv != "" {
		keys, err := auth.ParseAPIKeys(ac.apiKeysEnv)
		if err != nil {
			return nil, fmt.Errorf("$A2ABUS_API_KEYS: %w", err)
		}
		cfg.APIKeys = append(cfg.APIKeys, keys...)
	}
	if j := ac.JWT; j != nil {
		cfg.JWT = &auth.JWTConfig{JWKSURL: j.JWKSURL, Issuer: j.Issuer, Audience: j.Audience, Algorithms: j.Algorithms,
			PrincipalClaim: j.PrincipalClaim, TenantClaim: j.TenantClaim}
		client, err := p.keyFetchClient(j)
		if err != nil {
			return nil, err
		}
		cfg.HTTPClient = client
	}
	if p.cfg.TLSClientCA != "" && p.cfg.TLSCert == "" {
		return nil, fmt.Errorf("--tls-client-ca needs --tls-cert: client certificates come only over TLS")
	}
	a, err := auth.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if a.Anonymous() {
		if addr := p.a2aBeyondLoopback(); addr != "" && !ac.AllowAnonymous {
			return nil, fmt.Errorf("refusing to serve A2A on %s without authentication: anyone who reaches it could read and cancel every task; configure API keys (--api-key-file, $A2ABUS_API_KEYS) or JWT (--jwt-issuer, --jwt-audience), or pass --allow-anonymous", addr)
		}
		p.anonymous = true
		p.log.Warn("the edge serves without authentication", "listen", p.cfg.Listen)
		return a, nil
	}
	p.schemes = a.LegacySchemes()
	if cfg.ClientCertificates {
		p.schemes = append(p.schemes, "client certificates")
	}
	if cfg.LegacyPrincipalNames {
		p.schemes = append(p.schemes, "(legacy principal names: JWT and certificate users share the API keys' names)")
	}
	return a, nil
}

// keyFetchClient fetches the JWT issuer's discovery document and keys
// through the outbound guard, as every other request this process makes
// to a configured URL: the issuer or JWKS URL must be one the outbound
// policy lets it reach (a local issuer needs "outbound": {"allowLoopback":
// true}, one on a private network allowPrivate), checked now when it is
// an address; every address dialled, redirects included, is checked when
// connecting.
func (p *process) keyFetchClient(j *JWTConfig) (*http.Client, error) {
	what, u := "jwt issuer", j.Issuer
	if j.JWKSURL != "" {
		what, u = "jwt jwks url", j.JWKSURL
	}
	if u == "" {
		return nil, nil // auth.New says what is missing
	}
	pol, err := p.outboundURL(what, u)
	if err != nil {
		return nil, err
	}
	return pol.Client(auth.DefaultFetchTimeout), nil
}

// extendedSkills are the configured agents' extended-card skills, by name.
func (p *process) extendedSkills() map[string][]schemas.AgentSkill {
	out := map[string][]schemas.AgentSkill{}
	for _, a := range p.cfg.Agents {
		if len(a.ExtendedSkills) > 0 {
			out[a.Name] = a.ExtendedSkills
		}
	}
	return out
}

// tlsConfig is the edge's HTTPS: its certificate, and with a client CA
// bundle, mutual TLS: a client certificate is asked for and, if given,
// must chain to that bundle (the handshake fails otherwise); a request
// without one falls to the other schemes (edge/auth).
func (p *process) tlsConfig() (*tls.Config, error) {
	if p.cfg.TLSKey == "" {
		return nil, fmt.Errorf("--tls-cert needs --tls-key")
	}
	cert, err := tls.LoadX509KeyPair(p.cfg.TLSCert, p.cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("edge TLS: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if p.cfg.TLSClientCA != "" {
		pem, err := os.ReadFile(p.cfg.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("edge TLS client CA: %w", err)
		}
		pool, err := bus.CertPool(pem)
		if err != nil {
			return nil, fmt.Errorf("edge TLS client CA %s %w", p.cfg.TLSClientCA, err)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return tc, nil
}
