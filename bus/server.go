package bus

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerConfig configures the embedded NATS server. The zero value is not
// useful; cmd fills it from flags and tests from bustest.
type ServerConfig struct {
	// Listen is the client address, HOST:PORT. Port 0 picks a free port;
	// an empty Listen accepts no network clients (in-process only).
	Listen string
	// DataDir is the JetStream store directory. Required: even a server
	// whose streams use memory storage needs a place for its metadata.
	DataDir string
	// Name is the server name (cluster member name); default "a2abus".
	Name string
	// MaxMemory and MaxStore bound JetStream's memory and file storage
	// (bytes); 0 lets the server choose.
	MaxMemory, MaxStore int64
	// SyncAlways fsyncs every write: safer, much slower (~3k writes/s).
	SyncAlways bool
	// MaxConnections bounds the clients connected at once (over Listen and
	// in-process); one more is refused by the server. It keeps a flood of
	// clients from taking the file descriptors the server's store and the
	// process's HTTP listeners need. 0: NATS's default (64K).
	MaxConnections int
	// ClusterName, ClusterListen and Routes make the server a member of a
	// JetStream cluster: the cluster's name, this member's route address
	// HOST:PORT, and the route URLs (nats://host:port) of the other
	// members. Every member needs a distinct Name. Empty: standalone.
	ClusterName   string
	ClusterListen string
	Routes        []string

	// Users may connect over Listen, each with its role's permissions (see
	// Role). A server that listens (Listen or ClusterListen set) needs
	// users, or Anonymous. In-process connections (Connect with
	// Config.Server) need none: they are an admin the server made up.
	Users []NATSUser
	// ClusterUser and ClusterPassword authenticate the routes between
	// cluster members: a member accepts a route only with them, and
	// presents them on the routes it opens (added to each of Routes that
	// has no user of its own). Required with ClusterListen, unless
	// Anonymous.
	ClusterUser, ClusterPassword string
	// Anonymous lets any client connect over Listen, and any server route
	// over ClusterListen, without credentials: for tests on loopback only.
	Anonymous bool
	// TLS, when set, makes the client listener require TLS with TLS.Cert
	// and TLS.Key, and the routes too, each member verifying the others'
	// certificates with TLS.CA (mutual TLS). In-process connections never
	// use it.
	TLS *TLSFiles
}

// ErrServerNeedsAuth is returned by StartServer for a server that would
// listen on the network with nobody to authenticate (no Users for Listen,
// no cluster credentials for ClusterListen) and is not Anonymous.
var ErrServerNeedsAuth = errors.New("bus: an embedded server that listens needs credentials")

// Server is an embedded NATS server with JetStream.
type Server struct {
	s *server.Server
	// inProcess authenticates in-process connections; zero when the server
	// has no users.
	inProcess Credentials
}

// StartServer starts an embedded NATS server with JetStream and waits until
// it accepts connections.
func StartServer(cfg ServerConfig) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("bus: embedded server needs a data directory")
	}
	opts := &server.Options{
		ServerName:         cfg.Name,
		JetStream:          true,
		StoreDir:           cfg.DataDir,
		JetStreamMaxMemory: cfg.MaxMemory,
		JetStreamMaxStore:  cfg.MaxStore,
		SyncAlways:         cfg.SyncAlways,
		MaxConn:            cfg.MaxConnections,
		NoSigs:             true,
		NoLog:              true,
		// Work items and events are small, but an artifact chunk may be
		// large; keep the NATS default and let the edge bound bodies below it.
		MaxPayload: 1 << 20,
	}
	if opts.ServerName == "" {
		opts.ServerName = "a2abus"
	}
	if cfg.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := splitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("bus: nats listen address: %w", err)
		}
		opts.Host, opts.Port = host, port
		if len(cfg.Users) == 0 && !cfg.Anonymous {
			return nil, fmt.Errorf("%w: a client listener needs users", ErrServerNeedsAuth)
		}
	}
	var inProcess Credentials
	if len(cfg.Users) > 0 {
		inProcess = Credentials{User: inProcessUser, Password: NewPassword()}
		users, err := serverUsers(cfg.Users, inProcess.Password)
		if err != nil {
			return nil, err
		}
		opts.Users = users
	}
	var routeTLS *tls.Config
	if cfg.TLS != nil {
		client, route, err := cfg.TLS.serverTLS()
		if err != nil {
			return nil, err
		}
		opts.TLSConfig, routeTLS = client, route
	}
	if cfg.ClusterName != "" || cfg.ClusterListen != "" {
		if cfg.ClusterName == "" || cfg.ClusterListen == "" || cfg.Name == "" {
			return nil, errors.New("bus: a cluster member needs a cluster name, a cluster listen address and a server name")
		}
		if cfg.Listen == "" {
			// The NATS server opens its routes only once it listens for
			// clients; without a client listener it would never start.
			return nil, errors.New("bus: a cluster member needs a client listen address too (the NATS server routes only once it listens for clients)")
		}
		if (cfg.ClusterUser == "" || cfg.ClusterPassword == "") && !cfg.Anonymous {
			return nil, fmt.Errorf("%w: a cluster member needs the cluster's route credentials", ErrServerNeedsAuth)
		}
		host, port, err := splitHostPort(cfg.ClusterListen)
		if err != nil {
			return nil, fmt.Errorf("bus: cluster listen address: %w", err)
		}
		opts.Cluster = server.ClusterOpts{Name: cfg.ClusterName, Host: host, Port: port,
			Username: cfg.ClusterUser, Password: cfg.ClusterPassword, TLSConfig: routeTLS}
		for _, r := range cfg.Routes {
			u, err := url.Parse(r)
			if err != nil || u.Host == "" {
				// A route may carry its user and password: never repeat it.
				return nil, fmt.Errorf("bus: route %d is not a nats://host:port URL", len(opts.Routes)+1)
			}
			if u.User == nil && cfg.ClusterUser != "" {
				u.User = url.UserPassword(cfg.ClusterUser, cfg.ClusterPassword)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: embedded server: %w", err)
	}
	fatal := &startFailure{reason: make(chan string, 1)}
	s.SetLoggerV2(fatal, false, false, false)
	go s.Start()
	// A loaded machine (a cluster member starting beside its peers, under
	// a CI run's parallel packages) can take tens of seconds; serve allows
	// a minute for its whole start. A start that cannot succeed (a port
	// in use, a store JetStream cannot open) says so at once instead.
	deadline := time.Now().Add(serverReadyWithin)
	for !s.ReadyForConnections(250 * time.Millisecond) {
		select {
		case reason := <-fatal.reason:
			s.Shutdown()
			return nil, fmt.Errorf("bus: embedded server: %s", reason)
		default:
		}
		if time.Now().After(deadline) {
			s.Shutdown()
			return nil, fmt.Errorf("bus: embedded server did not become ready within %s", serverReadyWithin)
		}
	}
	return &Server{s: s, inProcess: inProcess}, nil
}

// startFailure is the embedded server's logger, which is otherwise silent
// (a2abus logs the bus from the client side): it keeps the first fatal
// error, which the server reports only through its logger and after
// which it never becomes ready (a listener it could not open, JetStream
// it could not start).
type startFailure struct{ reason chan string }

func (f *startFailure) Fatalf(format string, v ...any) {
	select {
	case f.reason <- fmt.Sprintf(format, v...):
	default:
	}
}
func (*startFailure) Noticef(string, ...any) {}
func (*startFailure) Warnf(string, ...any)   {}
func (*startFailure) Errorf(string, ...any)  {}
func (*startFailure) Debugf(string, ...any)  {}
func (*startFailure) Tracef(string, ...any)  {}

// serverReadyWithin bounds how long StartServer waits for the embedded
// server to accept clients.
const serverReadyWithin = 60 * time.Second

// splitHostPort parses HOST:PORT; port 0 asks for a free port.
func splitHostPort(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%q: %w", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", 0, fmt.Errorf("%q: port is not a number", addr)
	}
	if p == 0 {
		p = server.RANDOM_PORT
	}
	return host, p, nil
}

// ClientURL returns the nats:// URL other processes connect to, or "" when
// the server does not listen on the network.
func (s *Server) ClientURL() string {
	if s.s.Addr() == nil {
		return ""
	}
	return s.s.ClientURL()
}

// Shutdown stops the server and waits until it has stopped.
func (s *Server) Shutdown() {
	s.s.Shutdown()
	s.s.WaitForShutdown()
}
