package auth

import (
	"errors"
	"net/http"
	"strings"
)

// The kinds of failure. A *Failure wraps exactly one of them, so callers
// classify with errors.Is.
var (
	// ErrNoCredentials: the request carries no credential of a configured
	// scheme. Answer 401 with the challenge.
	ErrNoCredentials = errors.New("auth: no credentials")
	// ErrInvalidCredentials: the request carries a credential that is not
	// accepted (unknown API key; a token that is malformed, expired, not
	// yet valid, for another audience or issuer, or not signed by a key of
	// the issuer). Answer 401 with the challenge (error="invalid_token").
	ErrInvalidCredentials = errors.New("auth: invalid credentials")
	// ErrForbidden: the principal is known but not allowed (Forbidden).
	// Answer 403.
	ErrForbidden = errors.New("auth: forbidden")
	// ErrUnavailable: a token cannot be checked now because the issuer's
	// keys could not be fetched. Answer 503; retrying later may succeed.
	ErrUnavailable = errors.New("auth: cannot check credentials now")
	// ErrInvalidConfig: New, ParseAPIKeys or ReadAPIKeys refused their
	// input. The message says where, never what a key is.
	ErrInvalidConfig = errors.New("auth: invalid configuration")
)

// Failure is why a request was not authenticated, and what to answer.
// It is the only error type Authenticate returns.
type Failure struct {
	// Status is the HTTP status to answer: 401 (ErrNoCredentials,
	// ErrInvalidCredentials), 403 (ErrForbidden) or 503 (ErrUnavailable).
	Status int
	// Challenge is the value of the WWW-Authenticate header to send with a
	// 401 or 403 (RFC 7235, RFC 6750): one challenge per configured way of
	// presenting a credential, comma-separated, e.g.
	//
	//	Bearer realm="a2abus"
	//	Bearer realm="a2abus", error="invalid_token", error_description="token expired"
	//
	// It is "" for a 503.
	Challenge string
	// Reason says what was wrong, for the client and for logs. It never
	// contains a credential, anything read from one (but the name of a
	// token's algorithm), or an internal URL.
	Reason string
	// Scheme is how the refused credential was presented: SchemeAPIKey or
	// SchemeBearer, "" when there was none.
	Scheme string

	kind   error
	detail string // for logs only: why the keys could not be fetched
}

// Error returns the kind and the reason, e.g. "auth: invalid credentials:
// token expired", for logs. For ErrUnavailable it adds the cause (the
// issuer's URL that failed and how), which Reason leaves out, as clients
// need not learn the internal URLs of the identity provider.
func (f *Failure) Error() string {
	if f.detail != "" {
		return f.kind.Error() + ": " + f.Reason + ": " + f.detail
	}
	return f.kind.Error() + ": " + f.Reason
}

// Unwrap returns the kind: ErrNoCredentials, ErrInvalidCredentials,
// ErrForbidden or ErrUnavailable.
func (f *Failure) Unwrap() error { return f.kind }

// via is where a credential was read: the Authorization header (Bearer) or
// the API key header.
type via int

const (
	viaNone via = iota
	viaBearer
	viaKeyHeader
)

// challenges are the plain challenges of an authenticator, computed once.
type challenges struct {
	realm  string
	bearer string // `Bearer realm="…"` when Authorization is read, else ""
	key    string // `APIKey realm="…", header="…"` when a key header is read, else ""
}

func newChallenges(realm string, bearer bool, keyHeader string) challenges {
	c := challenges{realm: realm}
	if bearer {
		c.bearer = `Bearer realm="` + realm + `"`
	}
	if keyHeader != "" {
		// Not a registered HTTP authentication scheme: it names the header
		// for a client reading the challenge; the card says the same in
		// the standard way (apiKey scheme).
		c.key = `APIKey realm="` + realm + `", header="` + keyHeader + `"`
	}
	return c
}

// header returns the WWW-Authenticate value, adding RFC 6750 error
// parameters to the challenge of the way the credential came (if any).
func (c challenges) header(v via, code, description string) string {
	var parts []string
	for _, ch := range []struct {
		v    via
		text string
	}{{viaBearer, c.bearer}, {viaKeyHeader, c.key}} {
		if ch.text == "" {
			continue
		}
		if code != "" && ch.v == v {
			ch.text += `, error="` + code + `", error_description="` + quotable(description) + `"`
		}
		parts = append(parts, ch.text)
	}
	return strings.Join(parts, ", ")
}

func (c challenges) missing(reason string) *Failure {
	return &Failure{Status: http.StatusUnauthorized, Challenge: c.header(viaNone, "", ""), Reason: reason, kind: ErrNoCredentials}
}

func (c challenges) invalid(v via, reason string) *Failure {
	return &Failure{Status: http.StatusUnauthorized, Challenge: c.header(v, "invalid_token", reason), Reason: reason, Scheme: v.scheme(), kind: ErrInvalidCredentials}
}

func unavailable(reason, detail string) *Failure {
	return &Failure{Status: http.StatusServiceUnavailable, Reason: reason, Scheme: SchemeBearer, kind: ErrUnavailable, detail: detail}
}

func (v via) scheme() string {
	switch v {
	case viaBearer:
		return SchemeBearer
	case viaKeyHeader:
		return SchemeAPIKey
	}
	return ""
}

// quotable keeps what RFC 6750 allows in error_description (%x20-21,
// %x23-5B, %x5D-7E) and replaces anything else with a space.
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return ' '
		}
		return r
	}, s)
}
