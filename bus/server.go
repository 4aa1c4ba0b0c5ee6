package bus

import (
	"errors"
	"fmt"
	"net"
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
}

// Server is an embedded NATS server with JetStream.
type Server struct {
	s *server.Server
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
		host, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("bus: nats listen address %q: %w", cfg.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("bus: nats listen port %q: %w", port, err)
		}
		if p == 0 {
			p = server.RANDOM_PORT
		}
		opts.Host, opts.Port = host, p
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: embedded server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, errors.New("bus: embedded server did not become ready within 30s")
	}
	return &Server{s: s}, nil
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
