// Package auth authenticates the requests that reach the edge's one front
// door: it turns the credentials of an HTTP request into a Principal, or
// into a Failure that says what to answer (401 with a WWW-Authenticate
// challenge naming the configured schemes, 403, or 503 when the keys to
// check a token cannot be fetched), and it describes the configured schemes
// for the agent card (CardSecurity, in the A2A 1.0 and 0.3 shapes).
//
// Two kinds of credentials are accepted:
//
//   - API keys, read from "Authorization: Bearer <key>" and the X-API-Key
//     header (the default), or from one header named in the Config. The
//     authenticator keeps only their SHA-256 digests and compares a
//     presented key with every digest in constant time.
//   - JWT access tokens as Bearer tokens, signed with an asymmetric key
//     (RS*, PS*, ES*, EdDSA; never "none" and never HMAC) of the issuer's
//     JWKS, found through OpenID Connect discovery or named directly. The
//     JWKS is fetched on first need and again, at most once per
//     KeyRefreshInterval, when a token names a key it does not hold (key
//     rotation). A verified token is cached, by the SHA-256 of the token,
//     until it expires, so a client that repeats its token costs one map
//     lookup.
//
// A client certificate the edge's TLS listener verified is accepted too
// when Config.ClientCertificates is set.
//
// With none configured the authenticator is anonymous: every request is
// the anonymous principal and the card declares no scheme.
//
// Principal names carry their scheme, so that no identity provider or CA
// can name another scheme's principal, or an admin, by choosing a name:
// an API key's principal keeps its bare name (so stored task owners, limits
// and admins written for keys stay valid), a JWT's is
// "jwt:<issuer>#<claim>" ("jwt:<claim>" without a configured issuer), a
// certificate's "cert:<name>", or "cert:sha256:<hex>" for a certificate
// that names no one. Admins are listed by these full names.
//
// What is checked is what the A2A specification asks of a server (§7, §13):
// credentials only in headers, 401 with a challenge for missing or bad
// ones, and nothing that could reveal a credential in an error or a log: a
// Failure's Reason is safe to show and log.
//
// It also signs what a deployment vouches for and checks what others
// vouch for: push notifications (SigningKeys.Sign, NotificationVerifier)
// and agent cards (SigningKeys.SignCard, CardVerifier: A2A §8.4, a JWS
// over the card's RFC 8785 form, checked against keys the operator trusts,
// never keys a card points to).
//
// JWS and JWK parsing and signature verification are go-jose's
// (github.com/go-jose/go-jose/v4), and RFC 8785 canonical JSON is
// gowebpki/jcs's: security code is not hand-rolled here. OpenID Connect
// discovery is one GET of a JSON document, done here.
//
// Dependency rule: auth depends on the standard library, schemas (for the
// HTTP syntax rules it shares with the rest of the module), go-jose and
// jcs only; it never imports bus, NATS or the rest of edge. It reads no flags, environment or files (a test holds every
// package but cmd to that): ReadAPIKeys, ParseAPIKeys,
// ParseSigningKeys and ParseCardKeys read what cmd read.
package auth
