package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/discovery/mcpbridge"
	"github.com/a2abus/a2abus/edge"
)

// The MCP side of the process: every edge serves its agents as MCP tools
// at /mcp, and "a2abus mcp" serves them over stdio, either bridging a
// running edge (--url) or running a whole serve in the process.

// edgeBridge builds the MCP bridge of an edge over its in-process door
// (edge.Config.MCP calls it once, as the edge is built).
func (p *process) edgeBridge(door *edge.InProcess) *mcpbridge.Bridge {
	return mcpbridge.New(mcpbridge.Options{
		Edge:    door,
		Wait:    time.Duration(p.cfg.BlockingTimeout),
		Version: discovery.Version,
		Logger:  p.log,
	})
}

// runMCP is "a2abus mcp": with --url, an MCP server over stdio bridging the
// edge there; without, a serve in this process whose agents it bridges
// (its announcements and logs on stderr: stdout is MCP's).
func runMCP(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	for _, a := range args {
		if a == "--url" || a == "-url" || strings.HasPrefix(a, "--url=") || strings.HasPrefix(a, "-url=") {
			return runMCPClient(ctx, args, stderr, getenv)
		}
	}
	fs := flag.NewFlagSet("a2abus mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, err := loadConfig(fs, args, func(k string) string {
		switch k {
		case "A2ABUS_LISTEN":
			if v := getenv(k); v != "" {
				return v
			}
			return "127.0.0.1:0" // no port to hold: MCP is on stdio
		case "A2ABUS_NATS_LISTEN":
			if v := getenv(k); v != "" {
				return v
			}
			return "off"
		}
		return getenv(k)
	})
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	ctx, stop := signalContext(ctx)
	defer stop()
	p := &process{cfg: cfg, log: log, out: stderr, mcpStdio: stdout}
	return p.run(ctx, "serve")
}

// runMCPClient is "a2abus mcp --url URL": the bridge of a running edge.
func runMCPClient(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("a2abus mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "", "the a2abus edge whose agents to serve as MCP tools")
	var o clientOptions
	o.credentialFlags(fs, " for the edge", "")
	wait := fs.Duration("wait", 60*time.Second, "how long a tool call waits for its task to settle")
	refresh := fs.Duration("refresh", 5*time.Second, "how often the edge's agents are read for tools that come and go")
	allowPrivate := fs.Bool("allow-private", true, "allow loopback, private and link-local addresses (metadata addresses are always refused)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *base == "" || fs.NArg() > 0 {
		return errors.New("mcp --url needs the edge's URL and no arguments")
	}
	o.credentialsFromEnv(getenv)
	h := o.credentialHeader()
	pol := discovery.Policy{AllowLoopback: *allowPrivate, AllowPrivate: *allowPrivate, AllowLinkLocal: *allowPrivate}
	e, err := mcpbridge.NewHTTPEdge(*base, pol.Client(0))
	if err != nil {
		return err
	}
	b := mcpbridge.New(mcpbridge.Options{Edge: e, Header: h, Wait: *wait, Refresh: *refresh,
		Version: discovery.Version, Logger: newLogger(Config{LogLevel: "info", LogFormat: "text"}, stderr)})
	ctx, stop := signalContext(ctx)
	defer stop()
	go func() { _ = b.Run(ctx) }()
	select {
	case <-b.Ready():
	case <-ctx.Done():
		return nil
	case <-time.After(30 * time.Second):
		fmt.Fprintln(stderr, "a2abus mcp: the edge's agents could not be read yet; serving the fixed tools meanwhile")
	}
	return b.ServeStdio(ctx)
}

// signalContext ends ctx on SIGINT and SIGTERM.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// nopWriteCloser is stdout for MCP: the process closes it, not the server.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
