package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/schemas"
)

// Config is the whole configuration of one a2abus process. It is filled in
// layers, each overriding the one before: the defaults below, the JSON
// config file (--config), the environment (NATS_URL, A2ABUS_*), and flags
// given on the command line. cmd is the only package that reads any of them.
//
// The file format is JSON: the standard library reads it (no dependency
// beyond the four the product allows), it is the format of everything else
// a2abus speaks, and an agent's exec settings nest naturally in it.
type Config struct {
	// Listen is the edge's HTTP address. Default 127.0.0.1:8080.
	Listen string `json:"listen"`
	// PublicURL is the base URL put in agent cards. Default http://<listen>
	// (https:// with TLS).
	PublicURL string `json:"publicUrl"`
	// CardScopesAsArrays writes the scopes of the cards'
	// securityRequirements as bare arrays, for the official Go SDK through
	// v2.4.0 (see edge.Config.CardScopesAsArrays). Default false.
	CardScopesAsArrays bool `json:"cardScopesAsArrays,omitempty"`
	// CardForm is the form of the served cards: "union" (default; A2A
	// 1.0's fields and 0.3's, one card both generations of clients read)
	// or "1.0" (1.0's fields alone; see edge.Config.Card10Only).
	CardForm string `json:"cardForm,omitempty"`
	// TLSCert and TLSKey make the edge serve HTTPS (HTTP stays the default
	// for local use); TLSClientCA is a PEM bundle of the CAs whose client
	// certificates authenticate their subject (mutual TLS, see AuthConfig).
	// GRPCListen, when set, serves A2A's gRPC binding (lf.a2a.v1) on its
	// own address: cleartext HTTP/2, or TLS with TLSCert. Off by default.
	GRPCListen  string `json:"grpcListen,omitempty"`
	TLSCert     string `json:"tlsCert,omitempty"`
	TLSKey      string `json:"tlsKey,omitempty"`
	TLSClientCA string `json:"tlsClientCa,omitempty"`
	// DataDir holds the embedded NATS server's JetStream store. Default
	// ./a2abus-data.
	DataDir string `json:"dataDir"`
	// NATSListen is the embedded server's client address, so other
	// processes (edges, workers) can join. Default 127.0.0.1:4222; "off"
	// accepts in-process connections only.
	NATSListen string `json:"natsListen"`
	// ServerName names the embedded server (required in a cluster).
	ServerName string `json:"serverName"`
	// ClusterName, ClusterListen and Routes make the embedded server a
	// member of a JetStream cluster (routes: comma-separated nats:// URLs
	// of all members). Empty: standalone.
	ClusterName   string `json:"clusterName"`
	ClusterListen string `json:"clusterListen"`
	Routes        string `json:"routes"`
	// NATSURL is the NATS server list that edge and worker connect to.
	// Default nats://127.0.0.1:4222.
	NATSURL string `json:"natsUrl"`
	// NATSCreds is the file of the credentials an edge or worker presents
	// to NATS: "user:password" (as serve makes them in
	// <dataDir>/nats-credentials/) or a NATS .creds file. Default none.
	NATSCreds string `json:"natsCreds"`
	// NATSUsers is the JSON file of the embedded server's users (serve,
	// node): [{"user","password" or "passwordHash" (bcrypt),"role"}],
	// role admin, edge or worker. Default: a standalone server makes one
	// user per role in <dataDir>/nats-credentials/; a cluster member
	// requires it.
	NATSUsers string `json:"natsUsers"`
	// ClusterCreds is the "user:password" file cluster members
	// authenticate their routes with; required in a cluster.
	ClusterCreds string `json:"clusterCreds"`
	// NATSTLSCert and NATSTLSKey (PEM files) make the embedded server
	// require TLS on its client listener and its routes. NATSTLSCA is the
	// CA members verify each other with, and edges and workers verify
	// their server with. Default: no TLS.
	NATSTLSCert string `json:"natsTlsCert"`
	NATSTLSKey  string `json:"natsTlsKey"`
	NATSTLSCA   string `json:"natsTlsCa"`
	// StartTimeout bounds how long edge and worker wait at start-up for
	// NATS to be reachable and provisioned (a cluster may still be
	// forming) before exiting with an error. Default 0: until stopped,
	// logging every few seconds; an edge meanwhile answers 503 "not
	// ready". serve, whose server is in-process, always allows 60s.
	StartTimeout Duration `json:"startTimeout"`
	// Agents are the agents this process runs (serve, worker). The first is
	// the default agent. Default: one echo agent.
	Agents []AgentConfig `json:"agents"`
	// Outbound guards requests to external agents.
	Outbound OutboundConfig `json:"outbound"`
	// Trust is the edge's trust policy (trust.go): the level of each
	// call from where it comes from and who makes it, and what each level
	// may do.
	Trust TrustConfig `json:"trust,omitempty"`
	// Approvals says which new tasks wait for a person's approval and who
	// gives it (approvals.go).
	Approvals ApprovalsConfig `json:"approvals,omitempty"`
	// Budgets are what each principal and tenant may spend per period
	// across the deployment (budget.go); every process reads the same.
	Budgets []BudgetRuleConfig `json:"budgets,omitempty"`
	// DefaultAgent is the agent served at "/"; default the first agent.
	DefaultAgent string `json:"defaultAgent"`

	// Replicas is the replica count of streams and buckets (1, or 3 in a
	// cluster). Default 1.
	Replicas int `json:"replicas"`
	// TaskTTL is how long a task is kept after its last change. Default 24h.
	TaskTTL Duration `json:"taskTtl"`
	// HistoryCap bounds a task's history. Default 100.
	HistoryCap int `json:"historyCap"`
	// AckWait is how long work may go without a heartbeat before another
	// worker gets it. Default 30s.
	AckWait Duration `json:"ackWait"`
	// MaxDeliver bounds the deliveries of one work item. Default 5.
	MaxDeliver int `json:"maxDeliver"`
	// BlockingTimeout bounds a blocking SendMessage. Default 60s.
	BlockingTimeout Duration `json:"blockingTimeout"`
	// MaxFinishedTasks bounds how many finished tasks are kept (oldest
	// finished are deleted first; unfinished never). Default 100000.
	MaxFinishedTasks int `json:"maxFinishedTasks"`
	// MaxFinishedBytes bounds the stored size of finished tasks the same
	// way. Default 512 MiB, half the task bucket, so finished tasks are
	// evicted long before the bucket would refuse new ones.
	MaxFinishedBytes int64 `json:"maxFinishedBytes"`
	// SweepEvery is how often an edge deletes finished tasks past the
	// bounds above and looks for orphaned work. Default 30s.
	SweepEvery Duration `json:"sweepEvery"`
	// OrphanAfter is how long a task may stay SUBMITTED with no work
	// queued (its process died between storing it and queueing its work)
	// before an edge's sweep queues its work. Default 30s.
	OrphanAfter Duration `json:"orphanAfter"`
	// IdleAfter is how long a task may wait for input before a sweep
	// cancels it. Default 24h.
	IdleAfter Duration `json:"idleAfter"`
	// MaxBacklog bounds the tasks queued or running per agent; past it new
	// tasks get 503 + Retry-After. One caller may hold 1/32 of it (429
	// past that). Default 10000.
	MaxBacklog int `json:"maxBacklog"`
	// Limits bounds each caller of an edge: request rate and unfinished
	// tasks (see LimitsConfig). Default: the rate decided by the edge's
	// exposure (autoRate), a burst of 1000, 1000 unfinished tasks holding
	// at most defaultUnfinishedBytes.
	Limits LimitsConfig `json:"limits"`
	// MaxBodyBytes bounds an HTTP request body. Default 4 MiB.
	MaxBodyBytes int64 `json:"maxBodyBytes"`
	// AuditMaxAge and AuditMaxBytes bound the audit record (the A2A_AUDIT
	// stream): past either the oldest records are dropped. Default 90
	// days and 1 GiB. Only a process with an admin NATS user (serve, or
	// an edge given admin credentials) changes them on an existing
	// stream; an edge's apply when it creates the stream.
	AuditMaxAge   Duration `json:"auditMaxAge"`
	AuditMaxBytes int64    `json:"auditMaxBytes"`
	// MaxBodyBuffer bounds the memory request bodies hold on an edge
	// together, and MaxBodyBufferPerAddr those from one source address;
	// past either a body is refused with 503 + Retry-After. Defaults
	// 128 MiB and 16 MiB (see edge.Config).
	MaxBodyBuffer        int64 `json:"maxBodyBuffer"`
	MaxBodyBufferPerAddr int64 `json:"maxBodyBufferPerAddr"`
	// HTTP bounds what clients of the process's HTTP listeners may hold:
	// time, head size, connections (see HTTPLimits).
	HTTP HTTPLimits `json:"http"`
	// ShutdownGrace is how long in-flight work may finish on shutdown.
	// Default 10s.
	ShutdownGrace Duration `json:"shutdownGrace"`
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string `json:"logLevel"`
	// LogFormat is text or json. Default text.
	LogFormat string `json:"logFormat"`
	// Tracing turns OpenTelemetry tracing on even where the environment
	// names no OTLP endpoint (the exporter's default, localhost:4318, is
	// then used); OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT turn it on by themselves, and
	// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none keep it off
	// (see tracing.go).
	Tracing bool `json:"tracing"`
	// GCPercent is the Go garbage collector's target (GOGC) for the
	// process. Default 400: an a2abus process keeps a small live heap (tens
	// of MiB), so trading a few times that in headroom for a quarter of the
	// collection work is the right default for a server; GOGC in the
	// environment wins.
	GCPercent int `json:"gcPercent"`
	// MemoryLimit is the process's soft memory limit in bytes (Go's
	// GOMEMLIMIT): the garbage collector works harder as the heap nears
	// it, so the high GCPercent buys throughput only while memory is
	// plentiful. Default (-1): three quarters of the container's memory
	// limit when it has one, else 512 MiB (see memlimit.go); 0 sets none;
	// GOMEMLIMIT in the environment wins.
	MemoryLimit int64 `json:"memoryLimit"`
	// HeapFactor keeps the heap near the live set (memlimit.go's
	// heapPolicy): the soft memory limit follows the live heap times this,
	// within MemoryLimit. Default 2.5; 0 keeps the limit at MemoryLimit.
	HeapFactor float64 `json:"heapFactor"`
	// Pprof is a HOST:PORT where Go's profiler (net/http/pprof) is served,
	// on its own listener so it is never exposed with the A2A port. Empty
	// (the default) serves nothing.
	Pprof string `json:"pprof"`
	// MetricsListen is a HOST:PORT where the process's Prometheus metrics
	// are served at /metrics on their own listener: the way to scrape a
	// worker process, which has no HTTP port. An edge also serves them at
	// /metrics on its A2A listener. Empty (the default) starts nothing.
	MetricsListen string `json:"metricsListen"`
	// Push configures push notifications (see PushConfig).
	Push PushConfig `json:"push"`
	// CardKeys is the JWK set of private keys the edge (serve, edge) signs
	// every card it serves with (A2A §8.4; the first signs, the others
	// stay published at /.well-known/jwks.json for a rotation's overlap):
	// made and rotated by "a2abus push-keys", the same file in every edge,
	// and it may be the push key file. Re-read when it changes. Default
	// none: cards are not signed.
	CardKeys string `json:"cardKeys,omitempty"`
	// RegistryAgents runs, in serve and worker, the remote agents admins
	// register at run time (GET/PUT/DELETE /a2a/admin/agents). Default
	// true.
	RegistryAgents *bool `json:"registryAgents,omitempty"`
	// RemoteEnvAllow are the environment variables, beyond those named
	// A2ABUS_REMOTE_…, that a remote agent registered at run time may name
	// in headersFromEnv: an edge refuses an entry naming another, and a
	// serve or worker process does not run one (schemas.RemoteEnvAllowed).
	// Agents of this file may name any variable.
	RemoteEnvAllow []string `json:"remoteEnvAllow,omitempty"`
	// Auth is how an edge authenticates its callers. With no scheme
	// configured the edge serves everyone as one anonymous principal, which
	// it does only on a loopback address unless AllowAnonymous says so.
	Auth AuthConfig `json:"auth"`
}

// HTTPLimits bounds the clients of the process's HTTP listeners: the
// edge's A2A port, --metrics-listen and --pprof (see edge.HTTPConfig).
// The connection caps are the edge's; the metrics and profiler listeners
// hold at most opsMaxConns each.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds how long a request's head may take to
	// arrive (a client trickling its headers is cut). Default 10s.
	ReadHeaderTimeout Duration `json:"readHeaderTimeout"`
	// ReadBodyTimeout bounds how long a request's body may take to arrive
	// after its head. Default 30s.
	ReadBodyTimeout Duration `json:"readBodyTimeout"`
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request. Default 120s.
	IdleTimeout Duration `json:"idleTimeout"`
	// MaxHeaderBytes bounds a request's head. Default 64 KiB.
	MaxHeaderBytes int64 `json:"maxHeaderBytes"`
	// MaxConnections bounds the edge's open connections; the process
	// lowers it to what its file descriptors allow beside FDReserve.
	// Default 4096; 0: only the file descriptors bound it.
	MaxConnections int `json:"maxConnections"`
	// MaxConnectionsPerAddr bounds the edge's open connections from one
	// source address (an IPv6 /64). Default 256; 0: no cap, for an edge
	// behind a proxy, whose address every client has.
	MaxConnectionsPerAddr int `json:"maxConnectionsPerAddr"`
	// MaxStreams bounds the edge's open SSE streams, shared fairly by
	// source address (see edge.Config.MaxStreams). It is kept below the
	// edge's connection cap by streamReserve, so held streams never take
	// the connections other requests and newcomers need. Default 0: the
	// connection cap less that reserve.
	MaxStreams int `json:"maxStreams"`
	// FDReserve is the file descriptors HTTP connections may never take:
	// the NATS connection, the embedded server's clients and store files,
	// exec agents' pipes, logs. Default 1024.
	FDReserve int `json:"fdReserve"`
}

// AuthConfig configures the edge's authentication (edge/auth). Secrets
// come from files or the environment: API keys from APIKeyFile or
// A2ABUS_API_KEYS ("key=principal,..."), or the config file's apiKeys
// (keep that file private).
type AuthConfig struct {
	APIKeys      []APIKeyConfig `json:"apiKeys,omitempty"`
	APIKeyFile   string         `json:"apiKeyFile,omitempty"`
	APIKeyHeader string         `json:"apiKeyHeader,omitempty"`
	JWT          *JWTConfig     `json:"jwt,omitempty"`
	// Admins name the principals that see every principal's tasks (of
	// their tenant) and read /metrics, by their full names: a bare name is
	// an API key's principal; "jwt:ISSUER#SUB" ("jwt:SUB" without an
	// issuer) and "cert:NAME" name JWT and client certificate principals
	// (see edge/auth's Principal.Name).
	Admins []string `json:"admins,omitempty"`
	// LegacyPrincipalNames names JWT and client certificate principals
	// by their bare claim or name, as before principal names carried their
	// scheme, so their tasks stored then stay readable; it puts them back
	// in the API keys' namespace. Default false.
	LegacyPrincipalNames bool `json:"legacyPrincipalNames,omitempty"`
	// AllowAnonymous lets an edge without authentication listen beyond
	// loopback.
	AllowAnonymous bool `json:"allowAnonymous,omitempty"`
	// PublicMetrics serves /metrics without credentials.
	PublicMetrics bool `json:"publicMetrics,omitempty"`
	// OpenAdmin lets an edge without authentication, on loopback, serve
	// the registry's admin API and /metrics to every caller (see
	// edge.Config.OpenAdmin). Default: true for serve on a loopback
	// address (one process, the user's own), false for edge; no effect on
	// an edge that authenticates.
	OpenAdmin *bool `json:"openAdmin,omitempty"`

	apiKeysEnv string // $A2ABUS_API_KEYS
}

// APIKeyConfig is one API key and the principal it stands for.
type APIKeyConfig struct {
	Key       string `json:"key"`
	Principal string `json:"principal"`
	Admin     bool   `json:"admin,omitempty"`
	// Tenants the principal may act in (a request's tenant field picks
	// one), the first by default.
	Tenants []string `json:"tenants,omitempty"`
}

// JWTConfig accepts JWT bearer tokens of one issuer.
type JWTConfig struct {
	JWKSURL        string   `json:"jwksUrl,omitempty"`
	Issuer         string   `json:"issuer,omitempty"`
	Audience       []string `json:"audience,omitempty"`
	Algorithms     []string `json:"algorithms,omitempty"`
	PrincipalClaim string   `json:"principalClaim,omitempty"`
	TenantClaim    string   `json:"tenantClaim,omitempty"`
}

// AgentConfig is one agent to run: what every kind has, and its options,
// the rest of its JSON object, which its kind reads (see kinds.go).
type AgentConfig struct {
	// Name is the agent name (lowercase letters, digits, '-', '_').
	Name string `json:"name"`
	// Kind is the built-in kind (agentKinds). Default: the name.
	Kind string `json:"kind"`
	// Concurrency bounds the tasks one process runs at once. Default 16.
	Concurrency int `json:"concurrency"`
	// ExtendedSkills are skills shown only to authenticated callers, on
	// the agent's extended card (GetExtendedAgentCard); an edge that
	// authenticates declares the extended card on the public one.
	ExtendedSkills []schemas.AgentSkill `json:"extendedSkills,omitempty"`
	// options is the agent's whole object as the config file gave it.
	options json.RawMessage
}

// UnmarshalJSON reads the fields every kind has and keeps the object for
// the agent's kind to read its options from.
func (a *AgentConfig) UnmarshalJSON(b []byte) error {
	type common AgentConfig
	var c common
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	*a = AgentConfig(c)
	a.options = append(json.RawMessage(nil), b...)
	return nil
}

// OutboundConfig is the SSRF guard of every request a2abus makes to
// external agents (card discovery, remote agents). By default only public
// addresses are reached; cloud metadata addresses never are.
type OutboundConfig struct {
	AllowLoopback  bool `json:"allowLoopback"`
	AllowPrivate   bool `json:"allowPrivate"`
	AllowLinkLocal bool `json:"allowLinkLocal"`
	// Allow and Deny are CIDR prefixes that override the classes above.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// RequireHTTPS refuses plain http URLs.
	RequireHTTPS bool `json:"requireHTTPS"`
	// CardHardTTL is how long a cached card is served while its agent is
	// unreachable. Default 24h.
	CardHardTTL Duration `json:"cardHardTTL,omitempty"`
	// CardTrust says which keys may sign the cards of external agents
	// (see CardTrustConfig). Default: none, signatures are not checked.
	CardTrust CardTrustConfig `json:"cardTrust,omitempty"`
}

// CardTrustConfig is what the remote agents of a serve or worker process
// believe of external agents' card signatures (A2A §8.4): the keys trusted
// to sign them, pinned in a file or fetched from a JWKS URL the operator
// chose — never from a key set a card's signature points to (jku).
type CardTrustConfig struct {
	// KeysFile is a JWK set of the trusted keys (public keys; a signer's
	// private key file serves too). Re-read when it changes.
	KeysFile string `json:"keysFile,omitempty"`
	// JWKSURL is a JWK set of trusted keys (https, or http on a loopback
	// host the outbound policy allows), fetched through the outbound
	// guard and again, at most once a minute, when a card names a key it
	// does not hold.
	JWKSURL string `json:"jwksUrl,omitempty"`
	// RequireSigned refuses an unsigned card. Without it an unsigned card
	// is accepted, and a signed one must verify with a trusted key.
	// Needs KeysFile or JWKSURL.
	RequireSigned bool `json:"requireSigned,omitempty"`
}

// Duration is the one JSON duration type of the configuration
// (schemas.Duration: "30s", "5m").
type Duration = schemas.Duration

func defaultConfig() Config {
	return Config{
		Listen:          "127.0.0.1:8080",
		DataDir:         "a2abus-data",
		NATSListen:      "127.0.0.1:4222",
		NATSURL:         "nats://127.0.0.1:4222",
		Replicas:        1,
		TaskTTL:         Duration(24 * time.Hour),
		HistoryCap:      100,
		AckWait:         Duration(30 * time.Second),
		MaxDeliver:      5,
		BlockingTimeout: Duration(60 * time.Second),
		MaxBodyBytes:    4 << 20,
		AuditMaxAge:     Duration(90 * 24 * time.Hour),
		AuditMaxBytes:   1 << 30,

		MaxBodyBuffer:        128 << 20,
		MaxBodyBufferPerAddr: 16 << 20,

		HTTP: HTTPLimits{
			ReadHeaderTimeout: Duration(10 * time.Second), ReadBodyTimeout: Duration(30 * time.Second),
			IdleTimeout: Duration(120 * time.Second), MaxHeaderBytes: 64 << 10,
			MaxConnections: 4096, MaxConnectionsPerAddr: 256, FDReserve: 1024,
		},
		MaxBacklog:       10000,
		MaxFinishedTasks: 100000,
		MaxFinishedBytes: 512 << 20,
		SweepEvery:       Duration(10 * time.Second),
		Limits:           LimitsConfig{Limits: Limits{Rate: autoRate, Burst: 1000, MaxUnfinished: 1000, MaxUnfinishedBytes: defaultUnfinishedBytes}},
		OrphanAfter:      Duration(30 * time.Second),
		IdleAfter:        Duration(24 * time.Hour),
		ShutdownGrace:    Duration(10 * time.Second),
		LogLevel:         "info",
		LogFormat:        "text",
		GCPercent:        400,
		HeapFactor:       2.5,
		MemoryLimit:      autoMemoryLimit,
	}
}

// setting is one configurable value: its flag name, environment variable
// and how to apply a string to the Config.
type setting struct {
	flag, env, usage string
	set              func(c *Config, v string) error
}

func settings() []setting {
	str := func(f func(*Config) *string) func(*Config, string) error {
		return func(c *Config, v string) error { *f(c) = v; return nil }
	}
	dur := func(f func(*Config) *Duration) func(*Config, string) error {
		return func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return err
			}
			*f(c) = Duration(d)
			return nil
		}
	}
	num := func(f func(*Config) *int) func(*Config, string) error {
		return func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return err
			}
			*f(c) = n
			return nil
		}
	}
	size := func(f func(*Config) *int64) func(*Config, string) error {
		return func(c *Config, v string) error {
			n, err := parseBytes(v)
			if err != nil {
				return err
			}
			*f(c) = n
			return nil
		}
	}
	return []setting{
		{"listen", "A2ABUS_LISTEN", "edge HTTP address HOST:PORT (default 127.0.0.1:8080)", str(func(c *Config) *string { return &c.Listen })},
		{"public-url", "A2ABUS_PUBLIC_URL", "base URL put in agent cards (default http://<listen>)", str(func(c *Config) *string { return &c.PublicURL })},
		{"card-scopes-as-arrays", "A2ABUS_CARD_SCOPES_AS_ARRAYS", `write the scopes of the cards' securityRequirements as bare arrays ({"schemes":{"apiKey":[]}}), which the official Go SDK a2a-go v2 through v2.4.0 reads, instead of the spec's {"list":[]}: true or false (default false)`, boolean(func(c *Config) *bool { return &c.CardScopesAsArrays })},
		{"card-form", "A2ABUS_CARD_FORM", `the form of the served agent cards: "union" (A2A 1.0's fields and 0.3's top-level url, preferredTransport and protocolVersion side by side, so clients of both versions read one card) or "1.0" (1.0's fields alone, which strict 1.0 card validators such as the TCK's schema accept; 0.3 clients that read only url then find no endpoint) (default union)`, str(func(c *Config) *string { return &c.CardForm })},
		{"grpc-listen", "A2ABUS_GRPC_LISTEN", "serve A2A's gRPC binding (lf.a2a.v1) on HOST:PORT, cleartext HTTP/2 or TLS with --tls-cert; agents' cards declare it (default: off)", str(func(c *Config) *string { return &c.GRPCListen })},
		{"data-dir", "A2ABUS_DATA_DIR", "JetStream store directory of the embedded NATS server (default ./a2abus-data)", str(func(c *Config) *string { return &c.DataDir })},
		{"nats-listen", "A2ABUS_NATS_LISTEN", `embedded NATS client address HOST:PORT, or "off" (default 127.0.0.1:4222)`, str(func(c *Config) *string { return &c.NATSListen })},
		{"server-name", "A2ABUS_SERVER_NAME", "name of the embedded NATS server (required in a cluster)", str(func(c *Config) *string { return &c.ServerName })},
		{"cluster-name", "A2ABUS_CLUSTER_NAME", "JetStream cluster the embedded server joins (empty: standalone)", str(func(c *Config) *string { return &c.ClusterName })},
		{"cluster-listen", "A2ABUS_CLUSTER_LISTEN", "route address HOST:PORT of the embedded server in a cluster", str(func(c *Config) *string { return &c.ClusterListen })},
		{"routes", "A2ABUS_ROUTES", "route URLs of the cluster members, comma-separated (nats://host:port)", str(func(c *Config) *string { return &c.Routes })},
		{"nats", "NATS_URL", "NATS server URLs, comma-separated, for edge and worker (default nats://127.0.0.1:4222)", str(func(c *Config) *string { return &c.NATSURL })},
		{"nats-creds", "NATS_CREDS", "credentials file edge and worker present to NATS: user:password (e.g. <data-dir>/nats-credentials/worker of a serve; edge-admin for an edge whose admins change the agent registry, edge for one that only reads it) or a NATS .creds file", str(func(c *Config) *string { return &c.NATSCreds })},
		{"nats-users", "A2ABUS_NATS_USERS", `path of a JSON file of the users of the embedded NATS server, [{"user","password"|"passwordHash","role":"admin|edge|worker"}] (default: a standalone serve or node makes one per role in <data-dir>/nats-credentials/; required in a cluster)`, str(func(c *Config) *string { return &c.NATSUsers })},
		{"cluster-creds", "A2ABUS_CLUSTER_CREDS", "path of a user:password file cluster members authenticate their routes with (required with --cluster-listen)", str(func(c *Config) *string { return &c.ClusterCreds })},
		{"nats-tls-cert", "A2ABUS_NATS_TLS_CERT", "PEM certificate of the embedded NATS server: TLS on its client and route listeners (with --nats-tls-key)", str(func(c *Config) *string { return &c.NATSTLSCert })},
		{"nats-tls-key", "A2ABUS_NATS_TLS_KEY", "PEM private key of --nats-tls-cert", str(func(c *Config) *string { return &c.NATSTLSKey })},
		{"nats-tls-ca", "A2ABUS_NATS_TLS_CA", "PEM CA that cluster members verify each other with and edges and workers verify their NATS server with", str(func(c *Config) *string { return &c.NATSTLSCA })},
		{"start-timeout", "A2ABUS_START_TIMEOUT", "how long edge and worker wait at start-up for NATS before exiting (default 0: until stopped; the edge answers 503 not ready meanwhile)", dur(func(c *Config) *Duration { return &c.StartTimeout })},
		{"default-agent", "A2ABUS_DEFAULT_AGENT", `agent served at "/" (default the first agent)`, str(func(c *Config) *string { return &c.DefaultAgent })},
		{"replicas", "A2ABUS_REPLICAS", "replicas of streams and buckets (default 1)", num(func(c *Config) *int { return &c.Replicas })},
		{"task-ttl", "A2ABUS_TASK_TTL", "how long a task is kept after its last change (default 24h)", dur(func(c *Config) *Duration { return &c.TaskTTL })},
		{"history-cap", "A2ABUS_HISTORY_CAP", "messages kept in a task's history (default 100)", num(func(c *Config) *int { return &c.HistoryCap })},
		{"ack-wait", "A2ABUS_ACK_WAIT", "time before unacknowledged work goes to another worker (default 30s)", dur(func(c *Config) *Duration { return &c.AckWait })},
		{"max-deliver", "A2ABUS_MAX_DELIVER", "deliveries of one work item before it is given up (default 5)", num(func(c *Config) *int { return &c.MaxDeliver })},
		{"blocking-timeout", "A2ABUS_BLOCKING_TIMEOUT", "longest wait of a blocking SendMessage (default 60s)", dur(func(c *Config) *Duration { return &c.BlockingTimeout })},
		{"max-finished-tasks", "A2ABUS_MAX_FINISHED_TASKS", "finished tasks kept before the oldest are deleted (default 100000)", num(func(c *Config) *int { return &c.MaxFinishedTasks })},
		{"sweep-every", "A2ABUS_SWEEP_EVERY", "how often an edge deletes finished tasks past the bounds and looks for orphaned work (default 10s)", dur(func(c *Config) *Duration { return &c.SweepEvery })},
		{"idle-after", "A2ABUS_IDLE_AFTER", "how long a task may wait for input (INPUT_REQUIRED, AUTH_REQUIRED) before a sweep cancels it (default 24h)", dur(func(c *Config) *Duration { return &c.IdleAfter })},
		{"orphan-after", "A2ABUS_ORPHAN_AFTER", "how long a task may stay SUBMITTED with no work queued before a sweep queues it (default 30s)", dur(func(c *Config) *Duration { return &c.OrphanAfter })},
		{"max-finished-bytes", "A2ABUS_MAX_FINISHED_BYTES", "stored bytes of finished tasks kept before the oldest are deleted (default 536870912)", size(func(c *Config) *int64 { return &c.MaxFinishedBytes })},
		{"rate-limit", "A2ABUS_RATE_LIMIT", "requests a second one caller (a principal, or an anonymous source address) may send to an edge (default 500 when the edge authenticates or listens beyond loopback, none on a loopback-only edge without authentication; 0 for no limit; a value given here applies everywhere)", func(c *Config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 {
				return fmt.Errorf("must be a number of requests a second, got %q", v)
			}
			c.Limits.Rate = f
			return nil
		}},
		{"rate-burst", "A2ABUS_RATE_BURST", "requests one caller may send at once before the rate limit applies (default 1000)", num(func(c *Config) *int { return &c.Limits.Burst })},
		{"max-unfinished-bytes", "A2ABUS_MAX_UNFINISHED_BYTES", "stored size of one caller's unfinished tasks before new ones get 429: bytes, or with KiB, MiB, GiB (default 32MiB, 1/32 of the task store; 0 for no limit)", size(func(c *Config) *int64 { return &c.Limits.MaxUnfinishedBytes })},
		{"max-unfinished", "A2ABUS_MAX_UNFINISHED", "unfinished tasks one caller may have before new ones get 429 (default 1000; 0 for no limit)", num(func(c *Config) *int { return &c.Limits.MaxUnfinished })},
		{"max-backlog", "A2ABUS_MAX_BACKLOG", "tasks queued or running per agent before new ones get 503 + Retry-After; one caller may hold 1/32 of them (default 10000)", num(func(c *Config) *int { return &c.MaxBacklog })},
		{"audit-max-age", "A2ABUS_AUDIT_MAX_AGE", "how long audit records are kept (default 90 days, 2160h)", dur(func(c *Config) *Duration { return &c.AuditMaxAge })},
		{"audit-max-bytes", "A2ABUS_AUDIT_MAX_BYTES", "bytes of audit records kept before the oldest are dropped: bytes, or with KiB, MiB, GiB (default 1GiB)", size(func(c *Config) *int64 { return &c.AuditMaxBytes })},
		{"max-body-bytes", "A2ABUS_MAX_BODY_BYTES", "largest HTTP request body (default 4194304)", size(func(c *Config) *int64 { return &c.MaxBodyBytes })},
		{"max-body-buffer", "A2ABUS_MAX_BODY_BUFFER", "memory the request bodies being read or served hold on the edge together; a body past it gets 503 + Retry-After: bytes, or with KiB, MiB, GiB (default 128MiB; never below --max-body-bytes)", size(func(c *Config) *int64 { return &c.MaxBodyBuffer })},
		{"max-body-buffer-per-addr", "A2ABUS_MAX_BODY_BUFFER_PER_ADDR", "memory the request bodies from one source address (an IPv6 /64) hold on the edge, authenticated or not; a body past it gets 503 + Retry-After (default 16MiB; never below --max-body-bytes)", size(func(c *Config) *int64 { return &c.MaxBodyBufferPerAddr })},
		{"shutdown-grace", "A2ABUS_SHUTDOWN_GRACE", "time requests, streams and work in flight may finish on shutdown before they are ended (default 10s)", dur(func(c *Config) *Duration { return &c.ShutdownGrace })},
		{"read-header-timeout", "A2ABUS_READ_HEADER_TIMEOUT", "longest time an HTTP request's head may take to arrive; a slower client is disconnected (default 10s)", dur(func(c *Config) *Duration { return &c.HTTP.ReadHeaderTimeout })},
		{"read-body-timeout", "A2ABUS_READ_BODY_TIMEOUT", "longest time an HTTP request's body may take to arrive after its head (default 30s)", dur(func(c *Config) *Duration { return &c.HTTP.ReadBodyTimeout })},
		{"idle-timeout", "A2ABUS_IDLE_TIMEOUT", "how long an idle keep-alive HTTP connection is kept (default 120s)", dur(func(c *Config) *Duration { return &c.HTTP.IdleTimeout })},
		{"max-header-bytes", "A2ABUS_MAX_HEADER_BYTES", "largest HTTP request head: bytes, or with KiB, MiB (default 64KiB)", size(func(c *Config) *int64 { return &c.HTTP.MaxHeaderBytes })},
		{"max-connections", "A2ABUS_MAX_CONNECTIONS", "open connections the edge holds; more are closed at accept; lowered to fit the file descriptor limit (default 4096; 0: only that limit)", num(func(c *Config) *int { return &c.HTTP.MaxConnections })},
		{"max-connections-per-addr", "A2ABUS_MAX_CONNECTIONS_PER_ADDR", "open connections the edge holds from one source address; more are closed at accept (default 256; 0: no cap, e.g. behind a proxy)", num(func(c *Config) *int { return &c.HTTP.MaxConnectionsPerAddr })},
		{"max-streams", "A2ABUS_MAX_STREAMS", "open SSE streams the edge holds, shared fairly by source address; more get 429 or 503 + Retry-After (default 0: --max-connections less min(1/8 of it, 64); at most that)", num(func(c *Config) *int { return &c.HTTP.MaxStreams })},
		{"fd-reserve", "A2ABUS_FD_RESERVE", "file descriptors HTTP connections never take: NATS connections and store files, exec agents, logs (default 1024)", num(func(c *Config) *int { return &c.HTTP.FDReserve })},
		{"log-level", "A2ABUS_LOG_LEVEL", "debug, info, warn or error (default info)", str(func(c *Config) *string { return &c.LogLevel })},
		{"outbound-allow-private", "A2ABUS_OUTBOUND_ALLOW_PRIVATE", "let remote agents and discovery reach loopback, private and link-local addresses: true or false (default false; metadata addresses stay refused)", setBool(func(c *Config, b bool) {
			c.Outbound.AllowLoopback, c.Outbound.AllowPrivate, c.Outbound.AllowLinkLocal = b, b, b
		})},
		{"memory-limit", "A2ABUS_MEMORY_LIMIT", "soft memory limit of the process: bytes, or with KiB, MiB, GiB (default: three quarters of the container's memory limit, or 512MiB outside a container; 0 for none; GOMEMLIMIT in the environment wins)", size(func(c *Config) *int64 { return &c.MemoryLimit })},
		{"heap-factor", "A2ABUS_HEAP_FACTOR", "keep the heap near the live set: the soft memory limit follows the live heap times this, within --memory-limit (default 2.5; 0 holds the limit at --memory-limit)", func(c *Config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || (f > 0 && f < 1.2) {
				return fmt.Errorf("must be 0 or a number from 1.2 (the limit must leave the collector room), got %q", v)
			}
			c.HeapFactor = f
			return nil
		}},
		{"gc-percent", "A2ABUS_GC_PERCENT", "Go GC target percent of the process (default 400; GOGC in the environment wins)", num(func(c *Config) *int { return &c.GCPercent })},
		{"metrics-listen", "A2ABUS_METRICS_LISTEN", "HOST:PORT serving Prometheus metrics at /metrics on their own listener, e.g. for a worker (an edge also serves /metrics; default off)", str(func(c *Config) *string { return &c.MetricsListen })},
		{"pprof", "A2ABUS_PPROF", "HOST:PORT serving Go's profiler (net/http/pprof) for diagnosis; keep it on loopback (default off)", str(func(c *Config) *string { return &c.Pprof })},
		{"log-format", "A2ABUS_LOG_FORMAT", "text or json (default text)", str(func(c *Config) *string { return &c.LogFormat })},
		{"trusted-proxies", "A2ABUS_TRUSTED_PROXIES", "reverse proxies (addresses or CIDR prefixes, comma-separated) whose X-Forwarded-For or Forwarded header names the source of a call for its trust level (the config file's trust.trustedProxies; default none)", func(c *Config, v string) error {
			c.Trust.TrustedProxies = splitList(v)
			return nil
		}},
		{"tracing", "A2ABUS_TRACING", "export OpenTelemetry traces over OTLP, configured by the standard OTEL_* variables, even where OTEL_EXPORTER_OTLP_ENDPOINT is unset (it turns tracing on by itself): true or false (default false)", boolean(func(c *Config) *bool { return &c.Tracing })},
		{"api-key-file", "A2ABUS_API_KEY_FILE", `file of API keys the edge accepts, one "KEY PRINCIPAL [admin]" per line (API keys themselves also come from $A2ABUS_API_KEYS as "key=principal,...")`, str(func(c *Config) *string { return &c.Auth.APIKeyFile })},
		{"api-key-header", "A2ABUS_API_KEY_HEADER", "header API keys are read from (default Authorization: Bearer KEY, and X-API-Key)", str(func(c *Config) *string { return &c.Auth.APIKeyHeader })},
		{"jwt-jwks-url", "A2ABUS_JWT_JWKS_URL", "accept JWT bearer tokens signed by the keys at this JWKS URL", jwt(func(j *JWTConfig, v string) { j.JWKSURL = v })},
		{"jwt-issuer", "A2ABUS_JWT_ISSUER", "the JWT issuer (iss); without --jwt-jwks-url its keys come from OpenID Connect discovery", jwt(func(j *JWTConfig, v string) { j.Issuer = v })},
		{"jwt-audience", "A2ABUS_JWT_AUDIENCE", "accepted JWT audiences, comma-separated (required with JWT)", jwt(func(j *JWTConfig, v string) { j.Audience = splitList(v) })},
		{"jwt-principal-claim", "A2ABUS_JWT_PRINCIPAL_CLAIM", "JWT claim naming the principal (default sub)", jwt(func(j *JWTConfig, v string) { j.PrincipalClaim = v })},
		{"jwt-tenant-claim", "A2ABUS_JWT_TENANT_CLAIM", "JWT claim naming the tenant (default none)", jwt(func(j *JWTConfig, v string) { j.TenantClaim = v })},
		{"tls-cert", "A2ABUS_TLS_CERT", "PEM certificate (chain) the edge serves HTTPS with (default: plain HTTP)", str(func(c *Config) *string { return &c.TLSCert })},
		{"tls-key", "A2ABUS_TLS_KEY", "PEM private key of --tls-cert", str(func(c *Config) *string { return &c.TLSKey })},
		{"tls-client-ca", "A2ABUS_TLS_CLIENT_CA", "PEM CA bundle: a client certificate it issued authenticates the principal cert:NAME, NAME its first URI, DNS or e-mail SAN, else its common name, else sha256:FINGERPRINT (mutual TLS; needs --tls-cert)", str(func(c *Config) *string { return &c.TLSClientCA })},
		{"admins", "A2ABUS_ADMINS", "principals that see every principal's tasks and read /metrics, comma-separated: an API key's principal as named, jwt:ISSUER#SUB (jwt:SUB without --jwt-issuer) for a JWT's, cert:NAME for a client certificate's", func(c *Config, v string) error { c.Auth.Admins = splitList(v); return nil }},
		{"legacy-principal-names", "A2ABUS_LEGACY_PRINCIPAL_NAMES", "name JWT and client certificate principals by their bare sub or certificate name, as before names carried their scheme, to keep reading tasks stored then; it lets a token or certificate be the API key principal of the same name: true or false (default false)", boolean(func(c *Config) *bool { return &c.Auth.LegacyPrincipalNames })},
		{"allow-anonymous", "A2ABUS_ALLOW_ANONYMOUS", "let an edge without authentication listen beyond loopback: true or false (default false)", boolean(func(c *Config) *bool { return &c.Auth.AllowAnonymous })},
		{"open-admin", "A2ABUS_OPEN_ADMIN", "let an edge without authentication, on loopback, serve the agent registry's admin API (/a2a/admin/agents) and /metrics to every caller: true or false (default true for serve on loopback, false for edge)", setBool(func(c *Config, b bool) { c.Auth.OpenAdmin = &b })},
		{"remote-env-allow", "A2ABUS_REMOTE_ENV_ALLOW", "environment variables, comma-separated, that remote agents registered at run time may name in headersFromEnv besides those named A2ABUS_REMOTE_* (serve, edge, worker; default none)", func(c *Config, v string) error { c.RemoteEnvAllow = splitList(v); return nil }},
		{"registry-agents", "A2ABUS_REGISTRY_AGENTS", "run the remote agents admins register at run time (/a2a/admin/agents) in this serve or worker process: true or false (default true)", setBool(func(c *Config, b bool) { c.RegistryAgents = &b })},
		{"push", "A2ABUS_PUSH", "push notifications: serve the config methods, declare them in the cards and (serve, worker) deliver them: true or false (default false)", boolean(func(c *Config) *bool { return &c.Push.Enabled })},
		{"card-keys", "A2ABUS_CARD_KEYS", "JWK set of the private keys the edge signs every agent card it serves with (A2A §8.4), the same file for every edge, may be the --push-keys file (make and rotate with: a2abus push-keys --file FILE; default none: cards are not signed)", str(func(c *Config) *string { return &c.CardKeys })},
		{"card-trust-keys", "A2ABUS_CARD_TRUST_KEYS", "JWK set of the keys trusted to sign the cards of external agents (remote agents of serve and worker); a signed card must verify with one of them (default none: signatures are not checked)", str(func(c *Config) *string { return &c.Outbound.CardTrust.KeysFile })},
		{"card-trust-jwks-url", "A2ABUS_CARD_TRUST_JWKS_URL", "JWKS URL of keys trusted to sign the cards of external agents, fetched through the outbound guard (a card's own jku is never followed; default none)", str(func(c *Config) *string { return &c.Outbound.CardTrust.JWKSURL })},
		{"card-require-signed", "A2ABUS_CARD_REQUIRE_SIGNED", "refuse an external agent whose card is not signed by a trusted key: true or false (default false: unsigned cards are accepted; needs --card-trust-keys or --card-trust-jwks-url)", boolean(func(c *Config) *bool { return &c.Outbound.CardTrust.RequireSigned })},
		{"push-keys", "A2ABUS_PUSH_KEYS", "JWK set of the private keys push notifications are signed with, the same file for every edge and worker (make and rotate with: a2abus push-keys --file FILE; serve without it makes a key at start-up)", str(func(c *Config) *string { return &c.Push.KeysFile })},
		{"push-issuer", "A2ABUS_PUSH_ISSUER", "the iss of push notification tokens, the same for every process, e.g. the public URL (default a2abus)", str(func(c *Config) *string { return &c.Push.Issuer })},
		{"push-sender", "A2ABUS_PUSH_SENDER", "deliver push notifications from this serve or worker process: true or false (default true with --push)", setBool(func(c *Config, b bool) { c.Push.Sender = &b })},
		{"push-timeout", "A2ABUS_PUSH_TIMEOUT", "longest a webhook may take to answer one notification (default 10s)", dur(func(c *Config) *Duration { return &c.Push.Timeout })},
		{"push-max-attempts", "A2ABUS_PUSH_MAX_ATTEMPTS", "attempts at one notification before it is dead-lettered and its config marked failing (default 10)", num(func(c *Config) *int { return &c.Push.MaxAttempts })},
		{"push-max-age", "A2ABUS_PUSH_MAX_AGE", "longest a notification is retried before it is dead-lettered (default 1h)", dur(func(c *Config) *Duration { return &c.Push.MaxAge })},
		{"push-concurrency", "A2ABUS_PUSH_CONCURRENCY", "tasks one sender delivers at once (default 64)", num(func(c *Config) *int { return &c.Push.Concurrency })},
		{"push-allow-http", "A2ABUS_PUSH_ALLOW_HTTP", "accept http:// webhooks: true or false (default false: https only)", boolean(func(c *Config) *bool { return &c.Push.AllowHTTP })},
		{"push-allow-private", "A2ABUS_PUSH_ALLOW_PRIVATE", "let webhooks be on loopback, private and link-local addresses: true or false (default false; metadata addresses stay refused)", setBool(func(c *Config, b bool) {
			c.Push.AllowLoopback, c.Push.AllowPrivate = b, b
		})},
		{"metrics-public", "A2ABUS_METRICS_PUBLIC", "serve /metrics without credentials when the edge authenticates: true or false (default false)", boolean(func(c *Config) *bool { return &c.Auth.PublicMetrics })},
	}
}

func jwt(f func(*JWTConfig, string)) func(*Config, string) error {
	return func(c *Config, v string) error {
		if c.Auth.JWT == nil {
			c.Auth.JWT = &JWTConfig{}
		}
		f(c.Auth.JWT, v)
		return nil
	}
}

func boolean(f func(*Config) *bool) func(*Config, string) error {
	return setBool(func(c *Config, b bool) { *f(c) = b })
}

// setBool reads a true or false setting and hands it to set.
func setBool(set func(*Config, bool)) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("must be true or false, got %q", v)
		}
		set(c, b)
		return nil
	}
}

// Limits bounds one caller: see edge.Limits. Rate is autoRate in the
// default Limits unless configured.
type Limits struct {
	Rate               float64 `json:"rate"`
	Burst              int     `json:"burst"`
	MaxUnfinished      int     `json:"maxUnfinished"`
	MaxUnfinishedBytes int64   `json:"maxUnfinishedBytes"`
}

// LimitsConfig is the default Limits of every caller, and whole
// replacements for some principals or tenants.
type LimitsConfig struct {
	Limits
	Principals map[string]Limits `json:"principals,omitempty"`
	Tenants    map[string]Limits `json:"tenants,omitempty"`
}

// defaultUnfinishedBytes, the default of Limits.MaxUnfinishedBytes, is
// 1/32 of the task bucket (1 GiB, bus.Config.TaskMaxBytes): a caller that
// leaves its tasks waiting holds at most that share of the store, so no
// handful of callers brings it to the 90% past which the edge refuses
// every new task (29 would have to).
const defaultUnfinishedBytes = 1 << 30 / 32

// autoRate, the default of Limits.Rate, leaves the per-caller request
// rate to LimitsConfig.edge: defaultRate on an edge others can reach (one
// that authenticates, or listens beyond loopback), none on a loopback-only
// edge that authenticates no one. Every caller of that edge is a process
// of this machine, and all of them share one address, so they are one
// anonymous caller: a rate there throttles only the user's own clients and
// benchmarks, and protects nothing the user does not already own. Its
// connection caps, body bounds, unfinished-task quotas and backlog bound
// still apply. A rate given in the file, the environment or a flag is
// applied as given, on loopback too.
const (
	autoRate    = -1
	defaultRate = 500
)

// edgeLimits are the limits of the process's edge, once its
// authentication is known (authenticator).
func (p *process) edgeLimits() edge.LimitsConfig {
	return p.cfg.Limits.edge(p.anonymous && p.a2aBeyondLoopback() == "")
}

// edge converts the configuration for an edge; localAnonymous says the
// edge listens on loopback only and authenticates no one. This is the one
// place an automatic rate (autoRate) is decided.
func (lc LimitsConfig) edge(localAnonymous bool) edge.LimitsConfig {
	if lc.Rate == autoRate {
		lc.Rate = defaultRate
		if localAnonymous {
			lc.Rate = 0
		}
	}
	conv := func(m map[string]Limits) map[string]edge.Limits {
		out := make(map[string]edge.Limits, len(m))
		for k, l := range m {
			out[k] = edge.Limits(l)
		}
		return out
	}
	return edge.LimitsConfig{Default: edge.Limits(lc.Limits), Principals: conv(lc.Principals), Tenants: conv(lc.Tenants)}
}

// parseBytes reads a size: a number of bytes, or one with a KiB, MiB or
// GiB suffix.
func parseBytes(v string) (int64, error) {
	num, unit := strings.TrimSpace(v), int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, unit = strings.TrimSpace(rest), u.n
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/unit {
		return 0, fmt.Errorf("must be a size in bytes (like 536870912 or 512MiB), got %q", v)
	}
	return n * unit, nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// agentList is the repeatable --agent flag.
type agentList []string

func (a *agentList) String() string     { return strings.Join(*a, ",") }
func (a *agentList) Set(v string) error { *a = append(*a, v); return nil }

// loadConfig builds the Config of a command from defaults, file, environment
// and flags (in that order of precedence, last wins).
func loadConfig(fs *flag.FlagSet, args []string, getenv func(string) string) (Config, error) {
	sets := settings()
	vals := make([]string, len(sets))
	for i, s := range sets {
		fs.StringVar(&vals[i], s.flag, "", s.usage+" [$"+s.env+"]")
	}
	var agents agentList
	fs.Var(&agents, "agent", "agent to run, by built-in kind: echo, tck (repeatable; the first is the default) [$A2ABUS_AGENTS, comma-separated]")
	configFile := fs.String("config", getenv("A2ABUS_CONFIG"), "JSON config file (see README) [$A2ABUS_CONFIG]")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	cfg := defaultConfig()
	if *configFile != "" {
		b, err := os.ReadFile(*configFile)
		if err != nil {
			return cfg, fmt.Errorf("config file: %w", err)
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return cfg, fmt.Errorf("config file %s: %w", *configFile, err)
		}
	}
	for _, s := range sets {
		if v := getenv(s.env); v != "" {
			if err := s.set(&cfg, v); err != nil {
				return cfg, fmt.Errorf("$%s=%q: %w", s.env, v, err)
			}
		}
	}
	if v := getenv("A2ABUS_API_KEYS"); v != "" {
		// Keys only from the environment, never a flag: a command line is
		// visible to every user of the machine.
		cfg.Auth.apiKeysEnv = v
	}
	if v := getenv("A2ABUS_AGENTS"); v != "" && len(agents) == 0 {
		for _, a := range strings.Split(v, ",") {
			agents = append(agents, strings.TrimSpace(a))
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for i, s := range sets {
		if set[s.flag] {
			if err := s.set(&cfg, vals[i]); err != nil {
				return cfg, fmt.Errorf("--%s=%q: %w", s.flag, vals[i], err)
			}
		}
	}
	if len(agents) > 0 {
		cfg.Agents = nil
		for _, a := range agents {
			cfg.Agents = append(cfg.Agents, AgentConfig{Name: a, Kind: a})
		}
	}
	if len(cfg.Agents) == 0 {
		cfg.Agents = []AgentConfig{{Name: "echo", Kind: "echo"}}
	}
	if cfg.DefaultAgent == "" {
		cfg.DefaultAgent = cfg.Agents[0].Name
	}
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + cfg.Listen
		if cfg.TLSCert != "" {
			cfg.PublicURL = "https://" + cfg.Listen
		}
	}
	return cfg, cfg.validate()
}

func (c *Config) validate() error {
	var errs []error
	if _, err := c.Approvals.policy(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Trust.policy(); err != nil {
		errs = append(errs, err)
	}
	if _, err := budgetPolicy(c.Budgets); err != nil {
		errs = append(errs, err)
	}
	seen := map[string]bool{}
	for i := range c.Agents {
		a := &c.Agents[i]
		if a.Kind == "" {
			a.Kind = a.Name
		}
		if seen[a.Name] {
			errs = append(errs, fmt.Errorf("agent %q is configured twice", a.Name))
		}
		seen[a.Name] = true
		if k, ok := agentKinds[a.Kind]; !ok {
			errs = append(errs, unknownKind(*a))
		} else if err := k.check(*a); err != nil {
			errs = append(errs, fmt.Errorf("agent %q: %w", a.Name, err))
		}
	}
	if (c.NATSTLSCert == "") != (c.NATSTLSKey == "") {
		errs = append(errs, errors.New("--nats-tls-cert and --nats-tls-key go together"))
	}
	if c.Replicas < 1 {
		errs = append(errs, errors.New("replicas must be at least 1"))
	}
	if c.AuditMaxAge < Duration(2*time.Minute) || c.AuditMaxBytes < 1<<20 {
		errs = append(errs, errors.New("--audit-max-age must be at least 2m (the audit stream's duplicates window) and --audit-max-bytes at least 1MiB"))
	}
	if h := c.HTTP; h.ReadHeaderTimeout <= 0 || h.ReadBodyTimeout <= 0 || h.IdleTimeout <= 0 || h.MaxHeaderBytes <= 0 || h.MaxHeaderBytes > 1<<30 {
		errs = append(errs, errors.New("HTTP timeouts and the largest request head must be positive (and the head at most 1GiB)"))
	}
	if h := c.HTTP; h.MaxConnections < 0 || h.MaxConnectionsPerAddr < 0 || h.MaxStreams < 0 || h.FDReserve < 0 {
		errs = append(errs, errors.New("connection caps and the file descriptor reserve cannot be negative"))
	}
	if c.Limits.Rate < 0 && c.Limits.Rate != autoRate {
		errs = append(errs, fmt.Errorf("limits.rate cannot be negative (got %g); 0 is no limit", c.Limits.Rate))
	}
	if _, err := c.Push.policy(); err != nil {
		errs = append(errs, err)
	}
	if p := c.Push; p.Timeout < 0 || p.MaxAttempts < 0 || p.MaxAge < 0 || p.Concurrency < 0 {
		errs = append(errs, errors.New("push timeout, attempts, age and concurrency cannot be negative"))
	}
	if t := c.Outbound.CardTrust; t.RequireSigned && t.KeysFile == "" && t.JWKSURL == "" {
		errs = append(errs, errors.New("--card-require-signed needs the keys cards must be signed with: --card-trust-keys FILE or --card-trust-jwks-url URL"))
	}
	switch c.CardForm {
	case "", "union", "1.0":
	default:
		errs = append(errs, fmt.Errorf(`card form %q is not "union" or "1.0"`, c.CardForm))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("log format %q is not text or json", c.LogFormat))
	}
	return errors.Join(errs...)
}
