package edge_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/workers"
)

// BenchmarkSendMessageAuth is what authentication costs a blocking
// SendMessage at 64 concurrent clients: the same edge, bus and echo worker
// with no authentication, an API key, and JWT bearer tokens (ES256, RS256)
// from a JWKS server in the test. Compare the cases of one run:
//
//	go test -run '^$' -bench SendMessageAuth -benchmem ./edge/
func BenchmarkSendMessageAuth(b *testing.B) {
	const apiKey = "bench-api-key-0123456789abcdef"
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: &ecKey.PublicKey, KeyID: "ec", Algorithm: "ES256", Use: "sig"},
			{Key: &rsaKey.PublicKey, KeyID: "rsa", Algorithm: "RS256", Use: "sig"},
		}})
	}))
	defer jwks.Close()
	token := func(alg jose.SignatureAlgorithm, key crypto.Signer, kid string) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
		if err != nil {
			b.Fatal(err)
		}
		tok, err := jwt.Signed(s).Claims(jwt.Claims{Subject: "bench", Issuer: "bench-issuer", Audience: jwt.Audience{"a2abus"},
			Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour)), IssuedAt: jwt.NewNumericDate(time.Now())}).Serialize()
		if err != nil {
			b.Fatal(err)
		}
		return tok
	}
	authed, err := auth.New(context.Background(), auth.Config{
		APIKeys: []auth.APIKey{{Key: apiKey, Principal: "bench"}},
		JWT:     &auth.JWTConfig{JWKSURL: jwks.URL, Issuer: "bench-issuer", Audience: []string{"a2abus"}},
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, credential string
		a                *auth.Authenticator
	}{
		{"anonymous", "", nil},
		{"api-key", apiKey, authed},
		{"jwt-es256", token(jose.ES256, ecKey, "ec"), authed},
		{"jwt-rs256", token(jose.RS256, rsaKey, "rsa"), authed},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := bustest.NewServer(b, bustest.Options{})
			edgeBus := bustest.Connect(b, srv, bustest.Options{})
			workerBus := bustest.Connect(b, srv, bustest.Options{})
			h := &harness{t: b, srv: srv, b: edgeBus}
			h.startRunner(workerBus, workers.EchoDefinition("echo"))
			base := h.startEdge(edgeBus, edge.Config{Auth: c.a})
			h.waitAgent(base, "echo")
			url := base + "/agents/echo"
			tr := &http.Transport{MaxIdleConnsPerHost: 256}
			client := &http.Client{Transport: tr}
			post := func() {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(sendBody))
				req.Header.Set("Content-Type", "application/json")
				if c.credential != "" {
					req.Header.Set("Authorization", "Bearer "+c.credential)
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || bytes.Contains(body, []byte(`"error"`)) {
					b.Fatalf("status %d: %s", resp.StatusCode, body)
				}
			}
			post()               // warm up (and fetch the JWKS once)
			b.SetParallelism(32) // 64 clients on 2 CPUs
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					post()
				}
			})
			b.StopTimer()
			tr.CloseIdleConnections()
		})
	}
}
