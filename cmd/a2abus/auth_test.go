package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
)

// An edge that would listen beyond loopback with no authentication
// refuses to start, saying how to configure it; --allow-anonymous is the
// explicit way out. (It fails before binding anything.)
func TestAnonymousEdgeOnlyOnLoopback(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"serve", "--data-dir", t.TempDir(), "--nats-listen", "off", "--listen", "0.0.0.0:0"}
	err := run(t.Context(), args, &out, &errOut, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "without authentication") || !strings.Contains(err.Error(), "--allow-anonymous") {
		t.Fatalf("err = %v", err)
	}
	// So does one whose gRPC binding would listen beyond loopback, its
	// HTTP on loopback.
	args = []string{"serve", "--data-dir", t.TempDir(), "--nats-listen", "off", "--listen", "127.0.0.1:0", "--grpc-listen", "0.0.0.0:0"}
	err = run(t.Context(), args, &out, &errOut, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "without authentication") || !strings.Contains(err.Error(), "0.0.0.0:0") {
		t.Fatalf("gRPC beyond loopback: err = %v", err)
	}
	// A bad key configuration fails at start too, without showing the key.
	err = run(t.Context(), []string{"serve", "--data-dir", t.TempDir(), "--nats-listen", "off", "--listen", "127.0.0.1:0"}, &out, &errOut,
		func(k string) string {
			if k == "A2ABUS_API_KEYS" {
				return "short=alice"
			}
			return ""
		})
	if err == nil || strings.Contains(err.Error(), "short=") {
		t.Fatalf("a too-short key: %v", err)
	}
}

// serve with API keys from the environment: the banner says which schemes,
// the card declares them, a JSON-RPC request without a key is refused
// (−31401, with a challenge), and one with a key is served.
func TestServeWithAPIKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const key = "a-key-of-alice-0123456789"
	httpAddr := freeAddr(t)
	p := startProcEnv(t, []string{"A2ABUS_API_KEYS=" + key + "=alice"},
		"serve", "--listen", httpAddr, "--data-dir", filepath.Join(t.TempDir(), "data"), "--nats-listen", "off")
	base := "http://" + httpAddr
	waitReady(t, p, base)
	if out := p.output(); !strings.Contains(out, "auth ") || strings.Contains(out, "NONE") || strings.Contains(out, key) {
		t.Fatalf("banner:\n%s", out)
	}
	resp, err := http.Get(base + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	var card schemas.AgentCard
	err = json.NewDecoder(resp.Body).Decode(&card)
	resp.Body.Close()
	if err != nil || card.SecuritySchemes["apiKey"] == nil {
		t.Fatalf("card: %+v %v", card.SecuritySchemes, err)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`
	post := func(k string) (int, string, string) {
		req, _ := http.NewRequest("POST", base+"/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if k != "" {
			req.Header.Set("X-API-Key", k)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
	}
	if status, challenge, b := post(""); status != http.StatusOK || challenge == "" || !strings.Contains(b, "-31401") {
		t.Fatalf("without a key: %d %q %s", status, challenge, b)
	}
	if status, _, b := post(key); status != http.StatusOK || !strings.Contains(b, "TASK_STATE_COMPLETED") {
		t.Fatalf("with the key: %d %s", status, b)
	}
	// The CLI against the edge's own refusal: it names the scheme and the
	// flag; with the key it is served.
	_, _, err = cli(t, "send", base+"/agents/echo", "hello")
	if err == nil || !strings.Contains(err.Error(), "--api-key") {
		t.Fatalf("a2abus send without a key: %v", err)
	}
	if out, _, err := cli(t, "send", "--api-key", key, base+"/agents/echo", "hello"); err != nil || !strings.Contains(out, "TASK_STATE_COMPLETED") {
		t.Fatalf("a2abus send --api-key: %v\n%s", err, out)
	}
	if strings.Contains(p.output(), key) {
		t.Fatal("the key reached the log")
	}
	p.stop(t)
}

// The edge over HTTPS with mutual TLS: a client certificate from the
// configured CA authenticates its subject; a request with no certificate
// is refused like any unauthenticated one (the card stays public); one
// from another CA does not get through the handshake.
func TestServeMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	mine, other := bustest.TLS(t), bustest.TLS(t)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, string(b))
		return p
	}
	httpAddr := freeAddr(t)
	p := startProc(t, "serve", "--listen", httpAddr, "--data-dir", filepath.Join(dir, "data"), "--nats-listen", "off",
		"--tls-cert", write("cert.pem", mine.Cert), "--tls-key", write("key.pem", mine.Key), "--tls-client-ca", write("ca.pem", mine.CA))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(mine.CA)
	client := func(files *bus.TLSFiles) *http.Client {
		tc := &tls.Config{RootCAs: roots}
		if files != nil {
			c, err := tls.X509KeyPair(files.Cert, files.Key)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{c}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	}
	base := "https://" + httpAddr
	anonymous, good, stranger := client(nil), client(mine), client(other)
	waitReadyOver(t, p, anonymous, base)
	// The banner names the one scheme, not an empty line.
	if out := p.output(); !strings.Contains(out, "  auth           client certificates\n") {
		t.Fatalf("banner:\n%s", out)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`
	post := func(c *http.Client) (string, error) {
		resp, err := c.Post(base+"/", "application/json", strings.NewReader(body))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), nil
	}
	if b, err := post(anonymous); err != nil || !strings.Contains(b, "-31401") {
		t.Fatalf("without a certificate: %v %s", err, b)
	}
	if b, err := post(good); err != nil || !strings.Contains(b, "TASK_STATE_COMPLETED") {
		t.Fatalf("with a certificate of the CA: %v %s", err, b)
	}
	if _, err := post(stranger); err == nil {
		t.Fatal("a certificate of another CA got through the handshake")
	}
	resp, err := anonymous.Get(base + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	card, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(card), `"mtlsSecurityScheme"`) || !strings.Contains(string(card), `"url":"https://`) {
		t.Fatalf("card: %s", card)
	}
	p.stop(t)
}

// waitReadyOver polls base's /readyz with client (an HTTPS edge's) until
// it answers 200, failing the test after a minute.
func waitReadyOver(t *testing.T, p *proc, client *http.Client, base string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready over HTTPS: %v\n%s", err, p.output())
		}
		time.Sleep(20 * time.Millisecond) // polling another process
	}
}
