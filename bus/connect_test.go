package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// A server that refuses the client's credentials will never let it
// provision: Connect fails with ErrConnectionClosed as soon as the client
// gives up the connection, long before its ctx ends, so a process exits
// instead of waiting forever for a cluster that will not have it.
func TestConnectFailsAtOnceWhenTheServerRefusesCredentials(t *testing.T) {
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Username: "a2abus", Password: "right",
		JetStream: true, StoreDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := ns.Addr().String()
	b, err := Connect(ctx, Config{URL: fmt.Sprintf("nats://a2abus:wrong@%s", addr), Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		_ = b.Close()
		t.Fatal("connected with wrong credentials")
	}
	if !errors.Is(err, ErrConnectionClosed) || ctx.Err() != nil {
		t.Fatalf("err = %v (ctx %v); want ErrConnectionClosed before ctx ends", err, ctx.Err())
	}
	// The right credentials provision.
	b, err = Connect(ctx, Config{URL: fmt.Sprintf("nats://a2abus:right@%s", addr), Logger: slog.New(slog.DiscardHandler), MemoryStorage: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
}
