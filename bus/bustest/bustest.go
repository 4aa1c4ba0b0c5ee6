// Package bustest starts real in-process JetStream servers for tests, so no
// test of a2abus mocks the bus.
package bustest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/bus"
)

// Options adjusts a test bus.
type Options struct {
	// Config is the bus configuration; MemoryStorage is forced on unless
	// FileStorage is set.
	Config bus.Config
	// FileStorage keeps streams on disk (restart tests).
	FileStorage bool
	// Listen makes the server accept network clients on this address
	// (e.g. "127.0.0.1:0"), for tests that use real processes. Without
	// Users they connect without credentials (bus.ServerConfig.Anonymous).
	Listen string
	// Users are the server's NATS users (tests of credentials and roles).
	Users []bus.NATSUser
	// DataDir reuses a store directory; default t.TempDir().
	DataDir string
}

// NewServer starts an embedded JetStream server that is shut down when the
// test ends.
func NewServer(t testing.TB, o Options) *bus.Server {
	t.Helper()
	dir := o.DataDir
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := bus.StartServer(bus.ServerConfig{DataDir: dir, Listen: o.Listen, Users: o.Users, Anonymous: len(o.Users) == 0})
	if err != nil {
		t.Fatalf("bustest: start server: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// Connect connects a new Bus to s; it is closed when the test ends.
func Connect(t testing.TB, s *bus.Server, o Options) *bus.Bus {
	t.Helper()
	cfg := o.Config
	cfg.Server = s
	cfg.MemoryStorage = !o.FileStorage
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("bustest: connect: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// New starts a server and connects one Bus to it.
func New(t testing.TB, o Options) (*bus.Server, *bus.Bus) {
	t.Helper()
	s := NewServer(t, o)
	return s, Connect(t, s, o)
}

// LaggingReplica adds to s's task bucket a replica that never catches up:
// a mirror of the bucket's stream holding only key keep, which answers
// the bucket's direct gets (JetStream spreads them over the stream and its
// direct mirrors) as a follower that has not seen a write would: with
// "not found", or an older value. It returns once the mirror answers
// reads, and is removed when the test ends. s must listen on the network
// (Options.Listen); keep must already be written (the mirror serves reads
// only after it copied something).
func LaggingReplica(t testing.TB, s *bus.Server, bucket, keep string) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("bustest: lagging replica: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := "KV_" + bucket
	name := "LAGGING_" + bucket
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:         name,
		Mirror:       &jetstream.StreamSource{Name: stream, FilterSubject: "$KV." + bucket + "." + keep},
		MirrorDirect: true,
		AllowDirect:  true,
		Storage:      jetstream.MemoryStorage,
	}); err != nil {
		t.Fatalf("bustest: lagging replica: %v", err)
	}
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		_ = js.DeleteStream(dctx, name)
	})
	// The mirror joins the direct gets once it has copied keep; until then
	// every read is answered by the bucket itself.
	for {
		st, err := js.Stream(ctx, name)
		if err == nil && st.CachedInfo().State.Msgs > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("bustest: the lagging replica copied nothing")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TLS returns a certificate authority and a certificate it signed for
// 127.0.0.1 with its key, all PEM, valid for an hour: the certificate is
// good for server and client authentication, as NATS cluster members need.
func TLS(t testing.TB) *bus.TLSFiles {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatalf("bustest: TLS key: %v", err)
		}
		return k
	}
	caKey, leafKey := key(), key()
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "a2abus test CA"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("bustest: TLS CA: %v", err)
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		t.Fatalf("bustest: TLS CA: %v", err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "a2abus test node"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("bustest: TLS certificate: %v", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		t.Fatalf("bustest: TLS key: %v", err)
	}
	return &bus.TLSFiles{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		CA:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	}
}
