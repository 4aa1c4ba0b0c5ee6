package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejson "github.com/go-jose/go-jose/v4/json"
	"github.com/go-jose/go-jose/v4/jwt"
)

// supportedAlgorithms are the "alg" values JWTConfig.Algorithms may list:
// the asymmetric signature algorithms. HMAC would need a shared secret,
// and "none" verifies nothing.
var supportedAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// defaultAlgorithms is the allow-list when JWTConfig.Algorithms is empty.
var defaultAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256}

// jwtVerifier verifies JWT access tokens and caches the verified ones.
type jwtVerifier struct {
	algs           []jose.SignatureAlgorithm
	issuer         string
	audience       jwt.Audience
	principalClaim string
	tenantClaim    string
	skew           time.Duration
	admins         map[string]bool
	// prefix starts the principal names of this issuer (jwtPrefix);
	// legacyNames: Principal.Name is the bare claim.
	prefix      string
	legacyNames bool
	now         func() time.Time

	keys  *keySet
	cache *tokenCache
}

// tokenError is why a token is refused; its text is safe to show.
type tokenError string

func (e tokenError) Error() string { return string(e) }

func newJWTVerifier(ctx context.Context, cfg JWTConfig, client *http.Client, maxCached int, admins map[string]bool, legacyNames bool, now func() time.Time) (*jwtVerifier, error) {
	v := &jwtVerifier{
		issuer:         cfg.Issuer,
		audience:       jwt.Audience(cfg.Audience),
		principalClaim: cfg.PrincipalClaim,
		tenantClaim:    cfg.TenantClaim,
		skew:           cfg.ClockSkew,
		admins:         admins,
		prefix:         jwtPrefix(cfg.Issuer),
		legacyNames:    legacyNames,
		now:            now,
		cache:          newTokenCache(maxCached),
	}
	if len(cfg.Audience) == 0 || slices.Contains(cfg.Audience, "") {
		return nil, fmt.Errorf("%w: JWT.Audience is required (non-empty values): without it a token the issuer made for another service would be accepted", ErrInvalidConfig)
	}
	if v.principalClaim == "" {
		v.principalClaim = "sub"
	}
	switch {
	case v.skew < 0:
		return nil, fmt.Errorf("%w: JWT.ClockSkew must not be negative", ErrInvalidConfig)
	case v.skew == 0:
		v.skew = DefaultClockSkew
	}
	if len(cfg.Algorithms) == 0 {
		v.algs = slices.Clone(defaultAlgorithms)
	}
	for _, alg := range cfg.Algorithms {
		a := jose.SignatureAlgorithm(alg)
		if !slices.Contains(supportedAlgorithms, a) {
			return nil, fmt.Errorf("%w: JWT.Algorithms: %q is not allowed; use asymmetric ones (RS*, PS*, ES*, EdDSA): \"none\" and HMAC (HS*) are refused", ErrInvalidConfig, alg)
		}
		if !slices.Contains(v.algs, a) {
			v.algs = append(v.algs, a)
		}
	}
	refresh := cfg.KeyRefreshInterval
	switch {
	case refresh < 0:
		return nil, fmt.Errorf("%w: JWT.KeyRefreshInterval must not be negative", ErrInvalidConfig)
	case refresh == 0:
		refresh = DefaultKeyRefreshInterval
	}
	switch {
	case cfg.JWKSURL != "":
		if err := checkFetchURL(cfg.JWKSURL); err != nil {
			return nil, fmt.Errorf("%w: JWT.JWKSURL: %v", ErrInvalidConfig, err)
		}
	case cfg.Issuer != "":
		if err := checkFetchURL(cfg.Issuer); err != nil {
			return nil, fmt.Errorf("%w: JWT.Issuer (for OIDC discovery, as JWT.JWKSURL is empty): %v", ErrInvalidConfig, err)
		}
	default:
		return nil, fmt.Errorf("%w: JWT needs JWKSURL or Issuer (for OIDC discovery)", ErrInvalidConfig)
	}
	v.keys = &keySet{ctx: ctx, client: client, jwksURL: cfg.JWKSURL, issuer: cfg.Issuer, minInterval: refresh, now: now}
	return v, nil
}

// authenticate returns the principal of a token whose SHA-256 is sum: from
// the cache, or by verifying it (then caching it). Its error is a
// *Failure (ErrUnavailable) or a tokenError.
func (v *jwtVerifier) authenticate(ctx context.Context, token string, sum [sha256.Size]byte) (Principal, error) {
	now := v.now()
	if p, ok := v.cache.get(sum, now); ok {
		return p, nil
	}
	p, exp, err := v.verify(ctx, token, now)
	if err != nil {
		return Principal{}, err
	}
	v.cache.put(sum, p, exp.Add(v.skew), now)
	return p, nil
}

// verify checks a token's signature and claims at now, and returns its
// principal and expiry.
func (v *jwtVerifier) verify(ctx context.Context, token string, now time.Time) (Principal, time.Time, error) {
	sig, err := jose.ParseSignedCompact(token, v.algs)
	if err != nil {
		return Principal{}, time.Time{}, tokenError(v.parseReason(token))
	}
	payload, err := v.keys.verify(ctx, sig)
	if errors.Is(err, errNoKeyVerifies) {
		return Principal{}, time.Time{}, tokenError("token signature does not verify with the issuer's key")
	}
	if err != nil {
		return Principal{}, time.Time{}, err
	}
	var claims jwt.Claims
	var extra map[string]any
	if josejson.Unmarshal(payload, &claims) != nil || josejson.Unmarshal(payload, &extra) != nil {
		return Principal{}, time.Time{}, tokenError("token claims are not a JSON object of JWT claims")
	}
	if claims.Expiry == nil {
		return Principal{}, time.Time{}, tokenError("token has no exp claim")
	}
	err = claims.ValidateWithLeeway(jwt.Expected{Issuer: v.issuer, AnyAudience: v.audience, Time: now}, v.skew)
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return Principal{}, time.Time{}, tokenError("token expired")
	case errors.Is(err, jwt.ErrNotValidYet):
		return Principal{}, time.Time{}, tokenError("token not valid yet (nbf)")
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return Principal{}, time.Time{}, tokenError("token issued in the future (iat)")
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return Principal{}, time.Time{}, tokenError("token issuer (iss) is not the accepted issuer")
	case errors.Is(err, jwt.ErrInvalidAudience):
		return Principal{}, time.Time{}, tokenError("token audience (aud) is not accepted here")
	case err != nil:
		return Principal{}, time.Time{}, tokenError("token claims are not valid")
	}

	name := claims.Subject
	if v.principalClaim != "sub" {
		name, _ = extra[v.principalClaim].(string)
	}
	if name == "" {
		return Principal{}, time.Time{}, tokenError("token has no " + v.principalClaim + " claim naming the principal")
	}
	p := Principal{Name: v.prefix + name, Scheme: SchemeBearer}
	p.Admin = v.admins[p.Name]
	if v.legacyNames {
		p.Name = name
	}
	if v.tenantClaim != "" {
		switch t := extra[v.tenantClaim].(type) {
		case nil:
		case string:
			p.Tenant = t
		default:
			return Principal{}, time.Time{}, tokenError("token claim " + v.tenantClaim + " (the tenant) is not a string")
		}
	}
	return p, claims.Expiry.Time(), nil
}

// parseReason says why go-jose did not parse a token as a JWS with an
// allowed algorithm. It reads the protected header's "alg" for the message
// only (a short name, shown quoted); nothing else of the token is shown.
func (v *jwtVerifier) parseReason(token string) string {
	head, _, ok := strings.Cut(token, ".")
	if !ok || strings.Count(token, ".") != 2 {
		return "not a JWT"
	}
	var h struct {
		Alg string `json:"alg"`
	}
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil || json.Unmarshal(b, &h) != nil || h.Alg == "" || slices.Contains(v.algs, jose.SignatureAlgorithm(h.Alg)) {
		return "token is not a well-formed JWS"
	}
	alg := h.Alg
	if len(alg) > 16 || quotable(alg) != alg {
		alg = "?"
	}
	allowed := make([]string, len(v.algs))
	for i, a := range v.algs {
		allowed[i] = string(a)
	}
	return fmt.Sprintf("token algorithm %s is not accepted (accepted: %s)", alg, strings.Join(allowed, ", "))
}

// checkFetchURL accepts an https URL, or an http URL on a loopback host
// (a local issuer, tests): keys fetched over plain HTTP elsewhere could be
// replaced on the way.
func checkFetchURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("not an absolute URL")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if LoopbackHost(u.Hostname()) {
			return nil
		}
		return errors.New("http is accepted on a loopback host only; use https")
	}
	return errors.New("not an http(s) URL")
}
