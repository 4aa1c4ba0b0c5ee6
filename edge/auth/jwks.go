package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Bounds of what is read from an issuer.
const (
	maxDocumentBytes = 1 << 20 // a discovery document or a JWKS
	maxKeys          = 100     // usable keys kept from one JWKS
	minRSABits       = 2048
)

// keySet holds the issuer's public signing keys, fetched from its JWKS on
// first need and again when a token names a key not held, at most once per
// minInterval. One fetch runs at a time; requests that need it wait for it.
type keySet struct {
	ctx         context.Context // bounds every fetch (New's)
	client      *http.Client
	jwksURL     string // configured; "" when found by discovery
	issuer      string
	minInterval time.Duration
	now         func() time.Time

	mu       sync.Mutex
	keys     []verifyKey // replaced whole by a fetch, never changed in place
	loaded   bool        // a fetch has succeeded
	lastTry  time.Time   // start of the last fetch
	lastErr  error       // of the last fetch
	flight   *flight     // the fetch under way, if any
	resolved string      // the JWKS URL discovery found
}

// verifyKey is one usable public key of the JWKS.
type verifyKey struct {
	kid, alg string // alg "" when the JWK does not restrict it
	key      any    // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
}

// flight is one fetch under way; done is closed when it ends.
type flight struct{ done chan struct{} }

// find returns the keys that may have signed a token with header kid and
// alg: those with that kid (every key when kid is ""), of a type that
// fits alg. When none is held it refreshes the set (rate-limited) and
// looks again. Its error is a tokenError when the issuer does not publish
// such a key, or a *Failure (ErrUnavailable) when no key could be fetched
// at all.
// verify checks sig against the set's keys for its kid and alg and
// returns its payload: find's error when the set has none,
// errNoKeyVerifies when none of them verifies it. Access tokens and push
// notifications are checked alike; each caller words its refusal.
func (s *keySet) verify(ctx context.Context, sig *jose.JSONWebSignature) ([]byte, error) {
	h := sig.Signatures[0].Header
	keys, err := s.find(ctx, h.KeyID, h.Algorithm)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if payload, err := sig.Verify(k); err == nil {
			return payload, nil
		}
	}
	return nil, errNoKeyVerifies
}

// errNoKeyVerifies is keySet.verify's: keys were found, none verifies.
var errNoKeyVerifies = errors.New("the signature does not verify with any key of the set")

func (s *keySet) find(ctx context.Context, kid, alg string) ([]any, error) {
	if ks := s.match(kid, alg); len(ks) > 0 {
		return ks, nil
	}
	s.refresh(ctx)
	if ks := s.match(kid, alg); len(ks) > 0 {
		return ks, nil
	}
	s.mu.Lock()
	loaded, lastErr := s.loaded, s.lastErr
	s.mu.Unlock()
	switch {
	case !loaded && lastErr != nil:
		return nil, unavailable("the issuer's signing keys could not be fetched", lastErr.Error())
	case !loaded:
		return nil, unavailable("the issuer's signing keys are being fetched", "")
	case kid == "":
		return nil, tokenError("token names no key (kid), and no key of the issuer fits its algorithm")
	}
	return nil, tokenError("token is signed by a key the issuer does not publish, or one unfit for its algorithm")
}

func (s *keySet) match(kid, alg string) []any {
	s.mu.Lock()
	keys := s.keys
	s.mu.Unlock()
	return matchKeys(keys, kid, alg)
}

// matchKeys are the keys of keys a signature naming kid ("": any) made
// with alg may be verified with: tokens' and cards' one rule.
func matchKeys(keys []verifyKey, kid, alg string) []any {
	var out []any
	for _, k := range keys {
		if (kid == "" || k.kid == kid) && k.fits(alg) {
			out = append(out, k.key)
		}
	}
	return out
}

// fits reports whether a token of algorithm alg may be verified with k:
// the key's type and curve must be the algorithm's, and the JWK's own
// "alg", when set, must be alg. So an RSA key never checks an ES256 token,
// and no key ever checks an HMAC one.
func (k verifyKey) fits(alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	switch key := k.key.(type) {
	case *rsa.PublicKey:
		switch jose.SignatureAlgorithm(alg) {
		case jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512:
			return true
		}
	case *ecdsa.PublicKey:
		switch jose.SignatureAlgorithm(alg) {
		case jose.ES256:
			return key.Curve == elliptic.P256()
		case jose.ES384:
			return key.Curve == elliptic.P384()
		case jose.ES512:
			return key.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return jose.SignatureAlgorithm(alg) == jose.EdDSA
	}
	return false
}

// refresh fetches the JWKS unless the last fetch started less than
// minInterval ago, or waits for the fetch under way. The caller that
// starts a fetch makes it, under the set's context and DefaultFetchTimeout
// (not its own context: others may be waiting for it); a caller waiting
// for another's fetch stops waiting when its ctx ends.
func (s *keySet) refresh(ctx context.Context) {
	s.mu.Lock()
	if f := s.flight; f != nil {
		s.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
		}
		return
	}
	if !s.lastTry.IsZero() && s.now().Sub(s.lastTry) < s.minInterval {
		s.mu.Unlock()
		return
	}
	f := &flight{done: make(chan struct{})}
	s.flight, s.lastTry = f, s.now()
	jwksURL := s.jwksURL
	if jwksURL == "" {
		jwksURL = s.resolved
	}
	s.mu.Unlock()

	var keys []verifyKey
	var err error
	defer func() {
		s.mu.Lock()
		s.lastErr = err
		if err == nil {
			s.keys, s.loaded = keys, true
		}
		s.flight = nil
		s.mu.Unlock()
		close(f.done)
	}()
	fctx, cancel := context.WithTimeout(s.ctx, DefaultFetchTimeout)
	defer cancel()
	if jwksURL == "" {
		if jwksURL, err = s.discover(fctx); err != nil {
			return
		}
		s.mu.Lock()
		s.resolved = jwksURL
		s.mu.Unlock()
	}
	keys, err = s.fetchKeys(fctx, jwksURL)
}

// discover reads the issuer's OpenID Connect discovery document and
// returns its jwks_uri.
func (s *keySet) discover(ctx context.Context) (string, error) {
	u := strings.TrimSuffix(s.issuer, "/") + "/.well-known/openid-configuration"
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := getJSON(ctx, s.client, u, &doc); err != nil {
		return "", err
	}
	// OpenID Connect Discovery 1.0 §4.3: the document's issuer must be
	// the one it was fetched for.
	if doc.Issuer != s.issuer {
		return "", fmt.Errorf("OIDC discovery at %s names another issuer", redact(u))
	}
	if err := checkFetchURL(doc.JWKSURI); err != nil {
		return "", fmt.Errorf("OIDC discovery at %s: jwks_uri: %v", redact(u), err)
	}
	return doc.JWKSURI, nil
}

// fetchKeys reads a JWKS and keeps its usable keys; keys go-jose cannot
// parse, symmetric keys, keys not for signatures and RSA keys under 2048
// bits are skipped.
func (s *keySet) fetchKeys(ctx context.Context, u string) ([]verifyKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := getJSON(ctx, s.client, u, &doc); err != nil {
		return nil, err
	}
	var keys []verifyKey
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue
		}
		if vk, ok := usable(k); ok {
			keys = append(keys, vk)
			if len(keys) == maxKeys {
				break
			}
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("JWKS at %s has no usable signature key", redact(u))
	}
	return keys, nil
}

func usable(k jose.JSONWebKey) (verifyKey, bool) {
	if k.Use != "" && k.Use != "sig" {
		return verifyKey{}, false
	}
	pub := k.Public() // the public half of a private key; invalid for symmetric keys
	if !pub.Valid() {
		return verifyKey{}, false
	}
	switch key := pub.Key.(type) {
	case *rsa.PublicKey:
		if key.N.BitLen() < minRSABits {
			return verifyKey{}, false
		}
	case *ecdsa.PublicKey, ed25519.PublicKey:
	default:
		return verifyKey{}, false
	}
	return verifyKey{kid: k.KeyID, alg: k.Algorithm, key: pub.Key}, true
}

// maxFetchRedirects is how many redirects a fetch of keys follows, as
// net/http does by default.
const maxFetchRedirects = 10

// keyFetchClient returns a shallow copy of client whose redirects are held
// to the rule of the first hop (checkFetchURL: https, or http on a loopback
// host) before anything is dialled, and then to client's own
// CheckRedirect, if any. The rule is kept here whatever client the caller
// gives: keys fetched over plain HTTP at any hop could be replaced on the
// way, so a redirect must not lower what the configured URL promised.
func keyFetchClient(client *http.Client) *http.Client {
	c := *client
	next := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := checkFetchURL(req.URL.String()); err != nil {
			return fmt.Errorf("refusing the redirect to %s: %v", redact(req.URL.String()), err)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= maxFetchRedirects {
			return fmt.Errorf("stopped after %d redirects", maxFetchRedirects)
		}
		return nil
	}
	return &c
}

// getJSON GETs u and decodes its JSON body into v: status 200, at most
// maxDocumentBytes.
func getJSON(ctx context.Context, client *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %v", redact(u), err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err // net/http's error names the URL without its password
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", redact(u), resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	switch {
	case err != nil:
		return fmt.Errorf("GET %s: %v", redact(u), err)
	case len(body) > maxDocumentBytes:
		return fmt.Errorf("GET %s: document larger than %d bytes", redact(u), maxDocumentBytes)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: not a JSON document of the expected shape", redact(u))
	}
	return nil
}

// redact returns u without a password, for messages.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}

// LoopbackHost reports whether host (a name or address, without port; an
// IPv6 address with or without brackets) names this machine only:
// localhost, a name under .localhost (RFC 6761), or a loopback address.
// It is the one loopback rule of a2abus: the issuer check here, the
// edge's DNS-rebinding guard and the start-up rule on anonymous serving.
func LoopbackHost(host string) bool {
	host = strings.ToLower(strings.Trim(host, "[]"))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
