package edge_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/edge"
	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// testCA issues client certificates for the edge's mutual TLS.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue makes a client certificate with the identity of tmpl.
func (ca *testCA) issue(t *testing.T, tmpl x509.Certificate) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	tmpl.KeyUsage, tmpl.ExtKeyUsage = x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// jwtIssuer publishes one ES256 key as a JWKS on 127.0.0.1 and signs
// tokens with it.
type jwtIssuer struct {
	url    string // the JWKS URL
	signer jose.Signer
}

const principalsIssuer = "https://idp.example"

func newJWTIssuer(t *testing.T) *jwtIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	}))
	t.Cleanup(jwks.Close)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	return &jwtIssuer{url: jwks.URL, signer: signer}
}

func (is *jwtIssuer) token(t *testing.T, sub string) string {
	t.Helper()
	tok, err := jwt.Signed(is.signer).Claims(jwt.Claims{Subject: sub, Issuer: principalsIssuer, Audience: jwt.Audience{"a2abus"},
		Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour)), IssuedAt: jwt.NewNumericDate(time.Now())}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// mtlsEdge is an edge over HTTPS on b that asks for client certificates
// of ca, as cmd's listener does (a request without one falls to the other
// schemes).
type mtlsEdge struct {
	url  string
	ca   *testCA
	root *x509.CertPool // trusts the edge's server certificate
}

func startMTLSEdge(t *testing.T, b *bus.Bus, ca *testCA, cfg edge.Config) *mtlsEdge {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	ts.TLS = &tls.Config{ClientCAs: ca.pool, ClientAuth: tls.VerifyClientCertIfGiven}
	cfg.PublicURL = "https://" + ts.Listener.Addr().String()
	e := edge.New(b, cfg)
	ts.Config.Handler = e.Handler()
	ts.StartTLS()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() { ts.Close(); cancel(); <-done })
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := e.WaitReady(rctx); err != nil {
		t.Fatalf("edge not ready: %v", err)
	}
	root := x509.NewCertPool()
	root.AddCert(ts.Certificate())
	return &mtlsEdge{url: ts.URL, ca: ca, root: root}
}

// caller is one way of presenting credentials to an mtlsEdge: a client
// certificate, or a header.
type principalCaller struct {
	client *http.Client
	header [2]string
}

func (m *mtlsEdge) withCert(t *testing.T, tmpl x509.Certificate) principalCaller {
	tc := &tls.Config{RootCAs: m.root, Certificates: []tls.Certificate{m.ca.issue(t, tmpl)}}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	t.Cleanup(c.CloseIdleConnections)
	return principalCaller{client: c}
}

func (m *mtlsEdge) withBearer(t *testing.T, cred string) principalCaller {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: m.root}}}
	t.Cleanup(c.CloseIdleConnections)
	return principalCaller{client: c, header: [2]string{"Authorization", "Bearer " + cred}}
}

// do sends one request and returns the status and body.
func (pc principalCaller) do(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if pc.header[0] != "" {
		req.Header.Set(pc.header[0], pc.header[1])
	}
	resp, err := pc.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (pc principalCaller) rpc(t *testing.T, m *mtlsEdge, method string, params any) []byte {
	t.Helper()
	_, b := pc.do(t, "POST", m.url+"/agents/echo", rpcBody(1, method, params))
	return b
}

// send creates a task (in contextID when not "") and returns it.
func (pc principalCaller) send(t *testing.T, m *mtlsEdge, contextID string) schemas.Task {
	t.Helper()
	msg := map[string]any{"messageId": schemas.NewID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hello"}}}
	if contextID != "" {
		msg["contextId"] = contextID
	}
	b := pc.rpc(t, m, "SendMessage", map[string]any{"message": msg})
	var r struct {
		Result schemas.SendMessageResponse `json:"result"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Result.Task == nil {
		t.Fatalf("send: %s", b)
	}
	return *r.Result.Task
}

// reads reports whether the caller reads task id (GetTask answers it, not
// "task not found").
func (pc principalCaller) reads(t *testing.T, m *mtlsEdge, id string) bool {
	t.Helper()
	b := pc.rpc(t, m, "GetTask", map[string]any{"id": id})
	switch {
	case strings.Contains(string(b), `"result"`) && strings.Contains(string(b), id):
		return true
	case strings.Contains(string(b), "-32001"):
		return false
	}
	t.Fatalf("GetTask %s: %s", id, b)
	return false
}

// lists returns the ids of the tasks the caller lists.
func (pc principalCaller) lists(t *testing.T, m *mtlsEdge) []string {
	t.Helper()
	b := pc.rpc(t, m, "ListTasks", map[string]any{})
	var r struct {
		Result schemas.ListTasksResponse `json:"result"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("list: %s", b)
	}
	var ids []string
	for _, task := range r.Result.Tasks {
		ids = append(ids, task.ID)
	}
	return ids
}

// admin reports whether the caller may read /metrics, which only admins
// may (403 otherwise).
func (pc principalCaller) admin(t *testing.T, m *mtlsEdge) bool {
	t.Helper()
	status, b := pc.do(t, "GET", m.url+"/metrics", "")
	switch status {
	case http.StatusOK:
		return true
	case http.StatusForbidden:
		return false
	}
	t.Fatalf("GET /metrics: %d %s", status, b)
	return false
}

// principalsEdge is a harness whose edge over mutual TLS takes API keys
// (alice; ops, an admin by --admins), JWTs of a test issuer and client
// certificates, with admins "ops", "cert:auditor" and the issuer's root.
func principalsEdge(t *testing.T, legacy bool) (*harness, *mtlsEdge, *jwtIssuer) {
	t.Helper()
	is := newJWTIssuer(t)
	a, err := auth.New(t.Context(), auth.Config{
		APIKeys:              []auth.APIKey{{Key: aliceKey, Principal: "alice"}, {Key: opsKey, Principal: "ops"}},
		JWT:                  &auth.JWTConfig{JWKSURL: is.url, Issuer: principalsIssuer, Audience: []string{"a2abus"}},
		ClientCertificates:   true,
		Admins:               []string{"ops", "cert:auditor", "jwt:" + principalsIssuer + "#root"},
		LegacyPrincipalNames: legacy,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := edge.Config{DefaultAgent: "echo", Auth: a}
	h := newHarness(t, harnessOptions{agents: []workers.Definition{workers.EchoDefinition("echo")}, edge: cfg})
	return h, startMTLSEdge(t, h.b, newTestCA(t), cfg), is
}

// Two client certificates that name no one (an IP SAN only; organisation
// fields only) are two principals: neither reads, lists, cancels or
// continues the other's tasks, nor joins a context the other chose.
func TestNamelessCertificatesAreTwoPrincipals(t *testing.T) {
	_, m, _ := principalsEdge(t, false)
	a := m.withCert(t, x509.Certificate{IPAddresses: []net.IP{net.IPv4(10, 0, 0, 7)}})
	b := m.withCert(t, x509.Certificate{Subject: pkix.Name{Organization: []string{"Acme"}, OrganizationalUnit: []string{"devices"}}})

	ctxID := "device-a-context-" + schemas.NewID()
	task := a.send(t, m, ctxID)
	if !a.reads(t, m, task.ID) {
		t.Fatal("device A does not read its own task")
	}
	if b.reads(t, m, task.ID) {
		t.Fatal("device B reads device A's task")
	}
	if got := b.lists(t, m); len(got) != 0 {
		t.Fatalf("device B lists %v", got)
	}
	if got := a.lists(t, m); len(got) != 1 || got[0] != task.ID {
		t.Fatalf("device A lists %v", got)
	}
	if body := b.rpc(t, m, "CancelTask", map[string]any{"id": task.ID}); !strings.Contains(string(body), "-32001") {
		t.Fatalf("device B canceling device A's task: %s", body)
	}
	// The context device A chose is its own.
	msg := map[string]any{"messageId": schemas.NewID(), "contextId": ctxID, "role": "ROLE_USER", "parts": []any{map[string]any{"text": "mine"}}}
	if body := b.rpc(t, m, "SendMessage", map[string]any{"message": msg}); !strings.Contains(string(body), `"error"`) {
		t.Fatalf("device B joined device A's context: %s", body)
	}
	a.send(t, m, ctxID) // and still A's
}

// No scheme names another's principals or admins: a JWT whose sub is an
// API-key principal's name (an admin's, or alice's) is neither that
// principal nor an admin; a certificate whose common name is an admin's
// bare name is no admin; "cert:…" and "jwt:…" entries of Admins name the
// admins of those schemes.
func TestSchemesNameTheirOwnPrincipals(t *testing.T) {
	_, m, is := principalsEdge(t, false)
	alice := m.withBearer(t, aliceKey)
	task := alice.send(t, m, "")

	for name, c := range map[string]struct {
		who        principalCaller
		reads      bool
		admin      bool
		listsAlice bool
	}{
		"key ops (admin by Admins)":  {m.withBearer(t, opsKey), true, true, true},
		"JWT sub ops":                {m.withBearer(t, is.token(t, "ops")), false, false, false},
		"JWT sub alice":              {m.withBearer(t, is.token(t, "alice")), false, false, false},
		"JWT root (jwt: admin)":      {m.withBearer(t, is.token(t, "root")), true, true, true},
		"certificate CN=ops":         {m.withCert(t, x509.Certificate{Subject: pkix.Name{CommonName: "ops"}}), false, false, false},
		"certificate CN=alice":       {m.withCert(t, x509.Certificate{Subject: pkix.Name{CommonName: "alice"}}), false, false, false},
		"certificate CN=auditor":     {m.withCert(t, x509.Certificate{Subject: pkix.Name{CommonName: "auditor"}}), true, true, true},
		"certificate DNS SAN of ops": {m.withCert(t, x509.Certificate{DNSNames: []string{"ops"}}), false, false, false},
	} {
		if got := c.who.reads(t, m, task.ID); got != c.reads {
			t.Errorf("%s reads alice's task: %v, want %v", name, got, c.reads)
		}
		if got := c.who.admin(t, m); got != c.admin {
			t.Errorf("%s is an admin: %v, want %v", name, got, c.admin)
		}
		ids := c.who.lists(t, m)
		if got := len(ids) == 1 && ids[0] == task.ID; got != c.listsAlice {
			t.Errorf("%s lists %v", name, ids)
		}
	}
	if !alice.reads(t, m, task.ID) {
		t.Fatal("alice does not read her task")
	}
}

// With LegacyPrincipalNames a JWT or named certificate principal keeps the
// bare name it had before names carried their scheme, so it reads the
// tasks stored under that name (here one stored by the key principal
// alice, as a token with sub alice stored them before); an edge without
// it does not. Admins stay qualified: a bare admin name is still no
// admin of another scheme.
func TestLegacyPrincipalNamesKeepStoredOwners(t *testing.T) {
	h, legacy, is := principalsEdge(t, true)
	// The same bus, an edge with the default (scheme-qualified) names.
	a, err := auth.New(t.Context(), auth.Config{
		APIKeys:            []auth.APIKey{{Key: aliceKey, Principal: "alice"}},
		JWT:                &auth.JWTConfig{JWKSURL: is.url, Issuer: principalsIssuer, Audience: []string{"a2abus"}},
		ClientCertificates: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	current := startMTLSEdge(t, h.b, legacy.ca, edge.Config{DefaultAgent: "echo", Auth: a})

	task := legacy.withBearer(t, aliceKey).send(t, legacy, "")
	token := is.token(t, "alice")
	if !legacy.withBearer(t, token).reads(t, legacy, task.ID) {
		t.Fatal("with legacy names, the token of alice does not read alice's stored task")
	}
	if !legacy.withCert(t, x509.Certificate{Subject: pkix.Name{CommonName: "alice"}}).reads(t, legacy, task.ID) {
		t.Fatal("with legacy names, the certificate of alice does not read alice's stored task")
	}
	if current.withBearer(t, token).reads(t, current, task.ID) {
		t.Fatal("without legacy names, the token of alice reads the key principal's task")
	}
	if current.withCert(t, x509.Certificate{Subject: pkix.Name{CommonName: "alice"}}).reads(t, current, task.ID) {
		t.Fatal("without legacy names, the certificate of alice reads the key principal's task")
	}
	if legacy.withBearer(t, is.token(t, "ops")).admin(t, legacy) {
		t.Fatal("with legacy names, a token with sub ops is an admin")
	}
}
