package auth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// The schemes a principal can be authenticated by (Principal.Scheme).
const (
	SchemeAPIKey = "apiKey"
	// SchemeMTLS: a client certificate the TLS listener verified.
	SchemeMTLS      = "mtls"
	SchemeBearer    = "bearer" // a JWT access token
	SchemeAnonymous = "anonymous"
)

// AnonymousName is the name of the principal of an anonymous authenticator.
const AnonymousName = "anonymous"

// The prefixes of scheme-qualified principal names. API-key principals
// keep their bare names; JWT and certificate principals carry one of
// these, so no identity provider or CA can name another scheme's
// principal, or an admin listed for another scheme, by choosing a name.
// An API key's principal may not start with either.
const (
	// PrefixJWT starts a JWT principal's name: "jwt:<issuer>#<claim>"
	// when JWTConfig.Issuer is set, "jwt:<claim>" when it is not (the
	// claim is JWTConfig.PrincipalClaim's value).
	PrefixJWT = "jwt:"
	// PrefixCert starts a client certificate principal's name:
	// "cert:<name>" (see Config.ClientCertificates).
	PrefixCert = "cert:"
)

// Defaults, applied by New.
const (
	// DefaultAPIKeyHeader reads API keys as "Authorization: Bearer <key>",
	// and also from AltAPIKeyHeader.
	DefaultAPIKeyHeader = "Authorization"
	// AltAPIKeyHeader is the header the card names for API keys when
	// APIKeyHeader is the default.
	AltAPIKeyHeader           = "X-API-Key"
	DefaultRealm              = "a2abus"
	DefaultClockSkew          = 30 * time.Second
	DefaultKeyRefreshInterval = 10 * time.Second
	DefaultMaxCachedTokens    = 10000
	// DefaultFetchTimeout bounds one fetch of the discovery document or the
	// JWKS, whatever the HTTP client's own timeout.
	DefaultFetchTimeout = 10 * time.Second
)

// MinAPIKeyLength is the shortest API key New accepts, in bytes: shorter
// keys can be guessed.
const MinAPIKeyLength = 16

// Principal is who a request acts for.
type Principal struct {
	// Name identifies the principal: the API key's principal as written,
	// "jwt:" + issuer + "#" + the JWT's principal claim ("jwt:" + the claim
	// without a configured issuer; PrefixJWT), "cert:" + the client
	// certificate's name (PrefixCert), or
	// AnonymousName. It is never "". With Config.LegacyPrincipalNames, a
	// JWT or named certificate principal is the bare claim or name.
	Name string
	// Scheme is SchemeAPIKey, SchemeBearer, SchemeMTLS or SchemeAnonymous.
	Scheme string
	// Tenant is the tenant the principal acts in when a request names
	// none: the JWT's tenant claim when one is configured and present, or
	// the first of the API key's tenants; "" otherwise.
	Tenant string
	// Tenants are the other tenants the principal may act in, by naming
	// one in a request (an API key's further tenants).
	Tenants []string
	// Admin is true when the principal's scheme-qualified name is in
	// Config.Admins, or the API key's entry says so.
	Admin bool
}

// Config configures an Authenticator. The zero Config is anonymous.
type Config struct {
	// APIKeys are the accepted API keys. New keeps only their digests.
	APIKeys []APIKey
	// APIKeyHeader is where an API key is read. With the default,
	// "Authorization", a key is read as "Authorization: Bearer <key>" and
	// also as the raw value of the X-API-Key header (AltAPIKeyHeader), which
	// is what the card declares: so curl-style Bearer use and clients
	// following the card both work. Any other header name reads the key as
	// that header's raw value, and only there.
	APIKeyHeader string
	// JWT, when set, accepts JWT access tokens as Bearer tokens.
	JWT *JWTConfig
	// ClientCertificates accepts a client certificate that the edge's TLS
	// listener verified against its client CA bundle (mutual TLS): the
	// principal is "cert:" and the certificate's name: its first URI, DNS
	// or e-mail SAN, else its subject's common name, else (a certificate
	// naming no one, e.g. only an IP SAN or O/OU fields) "sha256:" and the
	// lower-case hex SHA-256 of the whole certificate (DER), so that two
	// such certificates are two principals, and a renewed one a new
	// principal. The listener, not this package, checks the chain; a
	// request without a verified certificate falls to the other schemes.
	ClientCertificates bool
	// Admins names the principals that are admins, by their full names:
	// a bare name is an API-key principal's only; a JWT or certificate
	// admin is listed as "jwt:…" or "cert:…" (see Principal.Name). New
	// refuses a "jwt:" entry that no token of the configured issuer can
	// name.
	Admins []string
	// LegacyPrincipalNames names JWT principals by their bare principal
	// claim and certificate principals by their bare name, as before
	// principal names carried their scheme, so tasks stored under those
	// names stay readable. It puts JWT and certificate users back in the
	// API keys' namespace (a token with sub "alice" is the key principal
	// "alice"): leave it off (the default) unless old tasks must be read;
	// finished ones go when the task TTL ends. Admins are still matched on the
	// scheme-qualified names, so no issuer or CA can name an admin.
	// A certificate naming no one is "cert:sha256:…" either way.
	LegacyPrincipalNames bool
	// HTTPClient fetches the OIDC discovery document and the JWKS; give
	// it one that applies the deployment's outbound policy. Whatever its
	// own redirect rule, a redirect is followed only to https, or http on
	// a loopback host (as JWT.JWKSURL and JWT.Issuer must be). Default: a
	// client with a DefaultFetchTimeout timeout.
	HTTPClient *http.Client
	// Realm is the realm of the WWW-Authenticate challenges. Default
	// "a2abus".
	Realm string
	// MaxCachedTokens bounds the cache of verified tokens. Default
	// DefaultMaxCachedTokens.
	MaxCachedTokens int

	// now is the clock (tests); time.Now when nil.
	now func() time.Time
}

// APIKey is one accepted API key.
type APIKey struct {
	Key       string
	Principal string
	Admin     bool
	// Tenants are the tenants the key's principal may act in, the first
	// by default; none: the default tenant ("") only.
	Tenants []string
}

// JWTConfig configures the acceptance of JWT access tokens.
type JWTConfig struct {
	// JWKSURL is where the issuer's public keys are. When empty, OpenID
	// Connect discovery at Issuer + "/.well-known/openid-configuration"
	// gives it (jwks_uri). Either must be https, or http on a loopback
	// host.
	JWKSURL string
	// Issuer is the token issuer ("iss" must equal it). Required when
	// JWKSURL is empty; when empty, "iss" is not checked. An http(s) Issuer
	// makes the card declare an openIdConnect scheme at its discovery URL;
	// otherwise the card declares an HTTP Bearer scheme (bearerFormat JWT).
	Issuer string
	// Audience lists the accepted audiences: "aud" must contain one of
	// them. Required, so a token the issuer made for another service is
	// not accepted here.
	Audience []string
	// Algorithms is the allow-list of "alg" values. Default RS256 and
	// ES256. Allowed: RS256, RS384, RS512, PS256, PS384, PS512, ES256,
	// ES384, ES512, EdDSA. "none" and the HMAC algorithms (HS*) are refused:
	// tokens are verified with the issuer's public keys only.
	Algorithms []string
	// PrincipalClaim is the string claim that names the principal. Default
	// "sub".
	PrincipalClaim string
	// TenantClaim, when set, is the string claim copied to
	// Principal.Tenant ("" when the token lacks it).
	TenantClaim string
	// ClockSkew is the leeway on exp, nbf and iat. Default 30s.
	ClockSkew time.Duration
	// KeyRefreshInterval is the least time between two fetches of the JWKS
	// (a token naming an unknown key triggers one). Default 10s.
	KeyRefreshInterval time.Duration
}

// Authenticator authenticates requests. It is safe for concurrent use.
type Authenticator struct {
	anonymous bool
	admins    map[string]bool
	now       func() time.Time
	ch        challenges

	keys *keyStore // nil without API keys
	// keysAsBearer: API keys are read from Authorization: Bearer.
	keysAsBearer bool
	// keyHeader is the canonical header API keys are read from ("" when
	// none); keyHeaderName its spelling for the card and challenge.
	keyHeader, keyHeaderName string

	jwt *jwtVerifier // nil without JWT

	certs bool // verified client certificates authenticate
	// legacyNames: JWT and certificate principals are named bare
	// (Config.LegacyPrincipalNames).
	legacyNames bool

	card cardSecurity
}

// New checks cfg, applies its defaults and returns an Authenticator. It
// makes no network call: the JWKS (and the OIDC discovery document) are
// fetched when the first token needs them. ctx bounds those fetches for the
// authenticator's whole life (they do not end with the request that
// started them, since others may wait on them): cancel it at shutdown.
//
// New returns an error wrapping ErrInvalidConfig for a config it refuses:
// a short, empty or repeated API key (named by its index, never its
// value), an API key header that is not a header name, a JWT config
// without audience, without JWKS URL or issuer, with an http URL that is
// not loopback, or with an algorithm outside the allowed list, an API key
// principal named like a JWT or certificate principal ("jwt:…",
// "cert:…"), or a "jwt:" entry of Admins that names no principal of the
// configured issuer.
func New(ctx context.Context, cfg Config) (*Authenticator, error) {
	a := &Authenticator{now: cfg.now, admins: map[string]bool{}, legacyNames: cfg.LegacyPrincipalNames}
	if a.now == nil {
		a.now = time.Now
	}
	for _, name := range cfg.Admins {
		if err := checkAdmin(name, cfg.JWT); err != nil {
			return nil, err
		}
		a.admins[name] = true
	}
	realm := cfg.Realm
	if realm == "" {
		realm = DefaultRealm
	}
	if strings.ContainsAny(realm, "\"\\") || quotable(realm) != realm {
		return nil, fmt.Errorf("%w: Realm must be printable ASCII without quotes or backslashes", ErrInvalidConfig)
	}

	if len(cfg.APIKeys) > 0 {
		ks, err := newKeyStore(cfg.APIKeys, a.admins)
		if err != nil {
			return nil, err
		}
		a.keys = ks
		switch h := cfg.APIKeyHeader; {
		case h == "" || strings.EqualFold(h, DefaultAPIKeyHeader):
			a.keysAsBearer = true
			a.keyHeaderName = AltAPIKeyHeader
		case !schemas.HTTPToken(h):
			return nil, fmt.Errorf("%w: APIKeyHeader %q is not a valid header name", ErrInvalidConfig, h)
		default:
			a.keyHeaderName = h
		}
		a.keyHeader = textproto.CanonicalMIMEHeaderKey(a.keyHeaderName)
	}

	maxCached := cfg.MaxCachedTokens
	switch {
	case maxCached < 0:
		return nil, fmt.Errorf("%w: MaxCachedTokens must not be negative", ErrInvalidConfig)
	case maxCached == 0:
		maxCached = DefaultMaxCachedTokens
	}
	if cfg.JWT != nil {
		client := cfg.HTTPClient
		if client == nil {
			client = &http.Client{Timeout: DefaultFetchTimeout}
		}
		v, err := newJWTVerifier(ctx, *cfg.JWT, keyFetchClient(client), maxCached, a.admins, a.legacyNames, a.now)
		if err != nil {
			return nil, err
		}
		a.jwt = v
	}

	a.certs = cfg.ClientCertificates
	a.anonymous = a.keys == nil && a.jwt == nil && !a.certs
	a.ch = newChallenges(realm, a.keysAsBearer || a.jwt != nil, a.keyHeaderName)
	a.card = newCardSecurity(a)
	return a, nil
}

// Anonymous reports whether no scheme is configured: every request is then
// the anonymous principal.
func (a *Authenticator) Anonymous() bool { return a.anonymous }

// Authenticate returns the principal of r, or a *Failure (the only error
// type it returns; see its kinds: ErrNoCredentials, ErrInvalidCredentials,
// ErrUnavailable).
//
// Where credentials are read: "Authorization: Bearer <credential>" when API
// keys are read there or JWT is configured (an Authorization header of
// another scheme is not ours and is ignored), else the API key header.
// When both are present, Authorization decides. A Bearer credential is
// first looked up among the API keys (when they are read there), then
// verified as a JWT (when configured). Several Authorization or API key
// headers are refused.
//
// Header names are looked up in canonical form, as net/http's server
// stores them. A verified token is cached until it expires; the first use
// of a token may fetch the issuer's keys, bounded by the request's context
// for this caller (the fetch itself goes on for others, bounded by New's
// context).
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	if a.anonymous {
		return Principal{Name: AnonymousName, Scheme: SchemeAnonymous, Admin: a.admins[AnonymousName]}, nil
	}
	if a.certs && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		return a.certPrincipal(r.TLS.VerifiedChains[0][0]), nil
	}
	ignored := ""
	if a.keysAsBearer || a.jwt != nil {
		switch vals := r.Header["Authorization"]; len(vals) {
		case 0:
		case 1:
			scheme, cred, _ := strings.Cut(vals[0], " ")
			if strings.EqualFold(scheme, "Bearer") {
				return a.bearer(r.Context(), strings.TrimSpace(cred))
			}
			ignored = " (an Authorization header of another scheme than Bearer is not read)"
		default:
			return Principal{}, a.ch.invalid(viaBearer, "several Authorization headers")
		}
	}
	if a.keyHeader != "" {
		switch vals := r.Header[a.keyHeader]; len(vals) {
		case 0:
		case 1:
			if p, ok := a.keys.lookup(sha256.Sum256([]byte(strings.TrimSpace(vals[0])))); ok {
				return p, nil
			}
			return Principal{}, a.ch.invalid(viaKeyHeader, "unknown API key")
		default:
			return Principal{}, a.ch.invalid(viaKeyHeader, "several "+a.keyHeaderName+" headers")
		}
	}
	return Principal{}, a.ch.missing("no credentials" + ignored)
}

// bearer authenticates the credential of "Authorization: Bearer".
func (a *Authenticator) bearer(ctx context.Context, cred string) (Principal, error) {
	if cred == "" {
		return Principal{}, a.ch.invalid(viaBearer, "empty Bearer credential")
	}
	sum := sha256.Sum256([]byte(cred))
	if a.keysAsBearer {
		if p, ok := a.keys.lookup(sum); ok {
			return p, nil
		}
	}
	if a.jwt == nil {
		return Principal{}, a.ch.invalid(viaBearer, "unknown API key")
	}
	if a.keysAsBearer && strings.Count(cred, ".") != 2 {
		return Principal{}, a.ch.invalid(viaBearer, "unknown API key") // and not a JWT
	}
	p, err := a.jwt.authenticate(ctx, cred, sum)
	if f, ok := err.(*Failure); ok {
		return Principal{}, f
	} else if err != nil {
		return Principal{}, a.ch.invalid(viaBearer, err.Error())
	}
	return p, nil
}

// Forbidden returns the failure for a principal that is authenticated but
// not allowed to do what it asked (e.g. an admin operation): 403, with an
// RFC 6750 insufficient_scope challenge when Bearer credentials are read.
// reason must not contain a credential.
func (a *Authenticator) Forbidden(reason string) *Failure {
	f := &Failure{Status: http.StatusForbidden, Reason: reason, kind: ErrForbidden}
	if a.ch.bearer != "" {
		f.Challenge = a.ch.bearer + `, error="insufficient_scope", error_description="` + quotable(reason) + `"`
	}
	return f
}

// checkAdmin refuses an Admins entry that can name no one: empty, or
// "jwt:" without the configured issuer's prefix (an entry written before
// JWT names carried the issuer, which would otherwise make no admin,
// silently).
func checkAdmin(name string, jwt *JWTConfig) error {
	if name == "" {
		return fmt.Errorf("%w: Admins: an empty name", ErrInvalidConfig)
	}
	if jwt == nil || jwt.Issuer == "" || !strings.HasPrefix(name, PrefixJWT) {
		return nil
	}
	if want := jwtPrefix(jwt.Issuer); !strings.HasPrefix(name, want) || len(name) == len(want) {
		return fmt.Errorf("%w: Admins: %q names no JWT principal: with issuer %q a JWT principal is named %q followed by its %s claim", ErrInvalidConfig, name, jwt.Issuer, want, cmp.Or(jwt.PrincipalClaim, "sub"))
	}
	return nil
}

// jwtPrefix is what the names of the JWT principals of issuer ("" when iss
// is not checked) start with.
func jwtPrefix(issuer string) string {
	if issuer == "" {
		return PrefixJWT
	}
	return PrefixJWT + issuer + "#"
}

// certPrincipal names the principal of a verified client certificate (see
// Config.ClientCertificates). A certificate naming no one is never the
// empty principal, which the edge would take for an anonymous caller
// shared with every other nameless certificate.
func (a *Authenticator) certPrincipal(c *x509.Certificate) Principal {
	name, named := certName(c)
	p := Principal{Name: PrefixCert + name, Scheme: SchemeMTLS}
	p.Admin = a.admins[p.Name]
	if a.legacyNames && named {
		p.Name = name
	}
	return p
}

// certName is a certificate's name: its first URI SAN (e.g. a SPIFFE id),
// DNS SAN or e-mail SAN, else its subject's common name (named); else its
// SHA-256 fingerprint, "sha256:<hex>".
func certName(c *x509.Certificate) (name string, named bool) {
	for _, u := range c.URIs {
		if s := u.String(); s != "" {
			return s, true
		}
	}
	for _, names := range [][]string{c.DNSNames, c.EmailAddresses, {c.Subject.CommonName}} {
		for _, n := range names {
			if n != "" {
				return n, true
			}
		}
	}
	sum := sha256.Sum256(c.Raw)
	return "sha256:" + hex.EncodeToString(sum[:]), false
}
