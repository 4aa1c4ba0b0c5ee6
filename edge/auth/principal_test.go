package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// clientCert makes a certificate of tmpl, self-signed: certPrincipal reads
// the leaf only, the listener having checked the chain.
func clientCert(t *testing.T, tmpl x509.Certificate) *x509.Certificate {
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
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withCert is a request whose TLS connection verified c.
func withCert(c *x509.Certificate) *http.Request {
	r := request()
	r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{c}}}
	return r
}

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestCertificatePrincipals: a certificate's principal is "cert:" and its
// first URI, DNS or e-mail SAN, else its common name, else its SHA-256
// fingerprint: never "", so two certificates naming no one (an IP SAN
// only, organisation fields only) are two principals. A common name equal
// to an admin's bare name is no admin; "cert:<name>" in Admins is.
func TestCertificatePrincipals(t *testing.T) {
	spiffe, _ := url.Parse("spiffe://example.org/agent/a")
	ipOnly := clientCert(t, x509.Certificate{IPAddresses: []net.IP{net.IPv4(10, 0, 0, 7)}})
	orgOnly := clientCert(t, x509.Certificate{Subject: pkix.Name{Organization: []string{"Acme"}, OrganizationalUnit: []string{"devices"}}})
	a := newAuth(t, Config{
		ClientCertificates: true,
		APIKeys:            testKeys(), // root is an admin by its entry
		Admins:             []string{"ops", "cert:auditor"},
	}, nil)
	tests := []struct {
		name string
		cert *x509.Certificate
		want Principal
	}{
		{"URI SAN", clientCert(t, x509.Certificate{URIs: []*url.URL{spiffe}, DNSNames: []string{"a.example"}, Subject: pkix.Name{CommonName: "cn"}}),
			Principal{Name: "cert:spiffe://example.org/agent/a", Scheme: SchemeMTLS}},
		{"DNS SAN", clientCert(t, x509.Certificate{DNSNames: []string{"a.example"}, EmailAddresses: []string{"a@example.com"}}),
			Principal{Name: "cert:a.example", Scheme: SchemeMTLS}},
		{"e-mail SAN", clientCert(t, x509.Certificate{EmailAddresses: []string{"a@example.com"}, Subject: pkix.Name{CommonName: "cn"}}),
			Principal{Name: "cert:a@example.com", Scheme: SchemeMTLS}},
		{"common name", clientCert(t, x509.Certificate{Subject: pkix.Name{CommonName: "device-1"}}),
			Principal{Name: "cert:device-1", Scheme: SchemeMTLS}},
		{"IP SAN only", ipOnly, Principal{Name: "cert:" + fingerprint(ipOnly), Scheme: SchemeMTLS}},
		{"O/OU only", orgOnly, Principal{Name: "cert:" + fingerprint(orgOnly), Scheme: SchemeMTLS}},
		{"CN of a bare admin", clientCert(t, x509.Certificate{Subject: pkix.Name{CommonName: "ops"}}),
			Principal{Name: "cert:ops", Scheme: SchemeMTLS}},
		{"CN of a key admin by entry", clientCert(t, x509.Certificate{Subject: pkix.Name{CommonName: "root"}}),
			Principal{Name: "cert:root", Scheme: SchemeMTLS}},
		{"CN listed as cert: admin", clientCert(t, x509.Certificate{Subject: pkix.Name{CommonName: "auditor"}}),
			Principal{Name: "cert:auditor", Scheme: SchemeMTLS, Admin: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(withCert(tt.cert))
			if err != nil || !reflect.DeepEqual(p, tt.want) {
				t.Fatalf("Authenticate = %+v, %v; want %+v", p, err, tt.want)
			}
		})
	}
	if fingerprint(ipOnly) == fingerprint(orgOnly) {
		t.Fatal("two certificates have one fingerprint")
	}
	// The key principal whose name a certificate took is still itself.
	if p, err := a.Authenticate(request(bearer(keyRoot)...)); err != nil || p.Name != "root" || !p.Admin {
		t.Fatalf("key root: %+v, %v", p, err)
	}
}

// TestLegacyPrincipalNames: with LegacyPrincipalNames, JWT and named
// certificate principals keep the bare names they had before names carried
// their scheme (so tasks stored under them stay theirs), while admins are
// still matched on the qualified names; a certificate naming no one is
// never "" either way.
func TestLegacyPrincipalNames(t *testing.T) {
	k := ecKey(t, "k")
	is := newTestIssuer(t, k)
	clock := newFakeClock()
	iss := is.url()
	a := newAuth(t, Config{
		JWT:                  &JWTConfig{Issuer: iss, Audience: []string{testAudience}},
		ClientCertificates:   true,
		Admins:               []string{"alice", "device-1", "jwt:" + iss + "#root", "cert:auditor"},
		LegacyPrincipalNames: true,
	}, clock)
	jwtAs := func(sub string) Principal {
		t.Helper()
		p, err := a.Authenticate(request(bearer(sign(t, k, claims(iss, clock.Now(), set("sub", sub))))...))
		if err != nil {
			t.Fatalf("token of %s: %v", sub, err)
		}
		return p
	}
	certAs := func(c *x509.Certificate) Principal {
		t.Helper()
		p, err := a.Authenticate(withCert(c))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	nameless := clientCert(t, x509.Certificate{IPAddresses: []net.IP{net.IPv4(10, 0, 0, 7)}})
	for _, c := range []struct {
		what      string
		got, want Principal
	}{
		{"JWT", jwtAs("alice"), Principal{Name: "alice", Scheme: SchemeBearer}},
		{"JWT admin", jwtAs("root"), Principal{Name: "root", Scheme: SchemeBearer, Admin: true}},
		{"certificate", certAs(clientCert(t, x509.Certificate{Subject: pkix.Name{CommonName: "device-1"}})), Principal{Name: "device-1", Scheme: SchemeMTLS}},
		{"certificate admin", certAs(clientCert(t, x509.Certificate{Subject: pkix.Name{CommonName: "auditor"}})), Principal{Name: "auditor", Scheme: SchemeMTLS, Admin: true}},
		{"nameless certificate", certAs(nameless), Principal{Name: "cert:" + fingerprint(nameless), Scheme: SchemeMTLS}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.what, c.got, c.want)
		}
	}
}

// redirectingIssuer is an issuer on 127.0.0.1 whose discovery document or
// JWKS (per test) answers 302 to a plain-http host that is not loopback,
// "keys.attacker.example", which the test's client reaches by connecting
// to another server on 127.0.0.1 that publishes the attacker's key. So on
// a client that followed the redirect, tokens of the attacker's key would
// verify; dials records what the client dialled.
type redirectingIssuer struct {
	good, evil *testIssuer
	client     *http.Client

	mu    sync.Mutex
	dials []string
}

const attackerHost = "keys.attacker.example"

func newRedirectingIssuer(t *testing.T, goodKey, evilKey signingKey, redirect string) *redirectingIssuer {
	t.Helper()
	ri := &redirectingIssuer{good: newTestIssuer(t, goodKey), evil: newTestIssuer(t, evilKey)}
	// The attacker's discovery document names the configured issuer (as
	// a copy of the real one would) and a JWKS that passes the check on
	// jwks_uri: loopback http, the attacker's own server.
	ri.evil.issuerInDoc = ri.good.url()
	ri.good.redirect(redirect, "http://"+attackerHost+redirect)
	evilAddr := ri.evil.srv.Listener.Addr().String()
	dialer := &net.Dialer{}
	ri.client = &http.Client{
		Timeout: DefaultFetchTimeout,
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			ri.mu.Lock()
			ri.dials = append(ri.dials, addr)
			ri.mu.Unlock()
			if host, _, _ := net.SplitHostPort(addr); host == attackerHost {
				addr = evilAddr
			}
			return dialer.DialContext(ctx, network, addr)
		}},
		// A client that follows any redirect: the rule must hold whatever
		// client the authenticator is given.
		CheckRedirect: func(*http.Request, []*http.Request) error { return nil },
	}
	return ri
}

func (ri *redirectingIssuer) dialled(host string) bool {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	for _, d := range ri.dials {
		if h, _, _ := net.SplitHostPort(d); h == host {
			return true
		}
	}
	return false
}

// TestKeyFetchRedirects: a JWKS or discovery URL that redirects to plain
// http on a host that is not loopback is not followed, whatever the HTTP
// client would do: nothing is dialled there, tokens signed with the keys
// served there are refused (503, the keys could not be fetched) and the
// error says why. A redirect that keeps to the rule (loopback http) is
// followed.
func TestKeyFetchRedirects(t *testing.T) {
	goodKey, evilKey := ecKey(t, "k"), ecKey(t, "k")
	for _, tc := range []struct {
		name     string
		redirect string // the path of the good issuer that redirects
		cfg      func(iss string) *JWTConfig
	}{
		{"JWKS", "/jwks", func(iss string) *JWTConfig {
			return &JWTConfig{JWKSURL: iss + "/jwks", Issuer: iss, Audience: []string{testAudience}}
		}},
		{"OIDC discovery", "/.well-known/openid-configuration", func(iss string) *JWTConfig {
			return &JWTConfig{Issuer: iss, Audience: []string{testAudience}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ri := newRedirectingIssuer(t, goodKey, evilKey, tc.redirect)
			clock := newFakeClock()
			iss := ri.good.url()
			a := newAuth(t, Config{JWT: tc.cfg(iss), HTTPClient: ri.client}, clock)
			tok := sign(t, evilKey, claims(iss, clock.Now()))
			p, err := a.Authenticate(request(bearer(tok)...))
			if err == nil {
				t.Fatalf("a token signed with the key behind the redirect was accepted as %+v", p)
			}
			f := failure(t, err)
			if !errors.Is(err, ErrUnavailable) || f.Status != http.StatusServiceUnavailable {
				t.Fatalf("failure %v (status %d), want ErrUnavailable 503", err, f.Status)
			}
			if !strings.Contains(f.Error(), "refusing the redirect to http://"+attackerHost) || !strings.Contains(f.Error(), "use https") {
				t.Fatalf("the error does not say the redirect was refused and why: %v", f)
			}
			if strings.Contains(f.Reason, attackerHost) {
				t.Fatalf("the client-facing reason shows the URL: %q", f.Reason)
			}
			if ri.dialled(attackerHost) {
				t.Fatal("the redirect target was dialled")
			}
		})
	}

	// A redirect within the rule: http on the issuer's own loopback host.
	is := newTestIssuer(t, goodKey)
	is.redirect("/old-jwks", is.url()+"/jwks")
	clock := newFakeClock()
	a := newAuth(t, Config{JWT: &JWTConfig{JWKSURL: is.url() + "/old-jwks", Audience: []string{testAudience}}}, clock)
	if _, err := a.Authenticate(request(bearer(sign(t, goodKey, claims(is.url(), clock.Now())))...)); err != nil {
		t.Fatalf("a redirect to loopback http: %v", err)
	}
}
