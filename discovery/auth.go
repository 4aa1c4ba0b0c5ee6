package discovery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/a2abus/a2abus/schemas"
)

// Outbound authentication: credentials a client puts on its requests,
// chosen by what the agent's card declares (security.go), and the error an
// agent's refusal comes back as (AuthError).

// Credentials authenticate a client's requests (Options.Credentials,
// Fetcher.Credentials).
type Credentials interface {
	// Apply adds credentials to req, a request to an agent whose card
	// declares sec (nil or empty when the card is unknown or declares
	// nothing: then every credential configured is sent). It returns an
	// error wrapping ErrNoMatchingCredentials (a *MismatchError) when
	// the card declares schemes none of which the credentials satisfy,
	// and one wrapping ErrCredentialUnavailable when a credential cannot
	// be had now (a token endpoint refusing, a secret that cannot be
	// read).
	Apply(ctx context.Context, req *http.Request, sec *Security) error
}

// Refresher is implemented by Credentials that can get a fresh credential
// when an agent refuses the one sent (HTTP 401): Invalidate drops it, and
// reports whether sending the request again may succeed.
type Refresher interface {
	Invalidate(refused *http.Request) bool
}

// ErrNoMatchingCredentials is wrapped by the error of a call to an agent
// whose card declares security schemes none of which the configured
// credentials satisfy. The call is not sent.
var ErrNoMatchingCredentials = errors.New("no configured credential matches the agent's security schemes")

// ErrCredentialUnavailable is wrapped by the error of a call whose
// credential could not be had: an OAuth2 token endpoint that refused or
// could not be reached, a secret that could not be read. The call is not
// sent.
var ErrCredentialUnavailable = errors.New("credential unavailable")

// MismatchError is the error of a call whose credentials do not match the
// agent's card; errors.Is(err, ErrNoMatchingCredentials) holds.
type MismatchError struct {
	URL        string
	Wanted     Security // what the card declares
	Configured []string // what is configured, described (see Authenticator.Configured)
}

func (e *MismatchError) Error() string {
	have := "none"
	if len(e.Configured) > 0 {
		have = strings.Join(e.Configured, ", ")
	}
	return fmt.Sprintf("calling %s: %v: the agent's card asks for %s; configured: %s", e.URL, ErrNoMatchingCredentials, e.Wanted.String(), have)
}

// Is makes errors.Is(err, ErrNoMatchingCredentials) hold.
func (e *MismatchError) Is(target error) bool { return target == ErrNoMatchingCredentials }

// SecretFunc returns a secret's current value (cmd reads it from the
// environment or a file: discovery reads neither).
type SecretFunc func() (string, error)

// Secret is a SecretFunc of a fixed value.
func Secret(v string) SecretFunc { return func() (string, error) { return v, nil } }

// DefaultAPIKeyHeader is the header an API key goes in when the card does
// not name one.
const DefaultAPIKeyHeader = "X-API-Key"

// Auth configures an Authenticator: any of a bearer token, an API key and
// OAuth2 client credentials. Secrets are functions so they can be re-read
// (a rotated token file); they are never logged or put in errors.
type Auth struct {
	// BearerToken is sent as Authorization: Bearer for a card's http
	// bearer scheme, and for oauth2 and openIdConnect schemes when OAuth2
	// is not configured (a token obtained elsewhere).
	BearerToken SecretFunc
	// APIKey is sent for a card's apiKey scheme, where the scheme says;
	// to an agent whose card declares none, in APIKeyHeader (default
	// X-API-Key).
	APIKey       SecretFunc
	APIKeyHeader string
	// OAuth2 gets access tokens with the client credentials grant, for a
	// card's oauth2, openIdConnect and http bearer schemes.
	OAuth2 *OAuth2
}

// OAuth2 is an OAuth2 client of the client credentials grant (RFC 6749
// §4.4), done by golang.org/x/oauth2/clientcredentials. A token is fetched
// when first needed and reused until it is within tokenEarlyExpiry of its
// expiry, or until an agent refuses it (HTTP 401), then fetched again.
type OAuth2 struct {
	// TokenURL is the token endpoint; it comes from configuration, never
	// from a card (a card must not be able to send the client secret
	// elsewhere).
	TokenURL     string
	ClientID     string
	ClientSecret string
	Scopes       []string
	// HTTP is the client of the token endpoint. Default
	// Policy.Client(30s), the SSRF-guarded client.
	HTTP   *http.Client
	Policy Policy
}

// tokenEarlyExpiry is how long before its expiry a token is replaced, so
// that it does not expire on the way to the agent.
const tokenEarlyExpiry = 10 * time.Second

// Authenticator is the Credentials of an Auth. It is safe for concurrent
// use; keep one per configured agent, so its OAuth2 token is shared.
type Authenticator struct {
	cfg Auth

	// OAuth2: base fetches, tokens caches base's tokens; mu guards
	// tokens and issued, the Authorization value of the token tokens
	// holds (last handed out).
	base   oauth2.TokenSource
	mu     sync.Mutex
	tokens oauth2.TokenSource
	issued string
}

// NewAuthenticator checks an Auth and returns its Credentials.
func NewAuthenticator(cfg Auth) (*Authenticator, error) {
	a := &Authenticator{cfg: cfg}
	if o := cfg.OAuth2; o != nil {
		u, err := url.Parse(o.TokenURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("discovery: OAuth2 token URL %q is not an absolute http(s) URL", redactRaw(o.TokenURL))
		}
		if err := o.Policy.CheckURL(u); err != nil && o.HTTP == nil {
			return nil, fmt.Errorf("discovery: OAuth2 token URL: %w", err)
		}
		if o.ClientID == "" {
			return nil, errors.New("discovery: OAuth2 client credentials need a client id")
		}
		hc := o.HTTP
		if hc == nil {
			hc = o.Policy.Client(30 * time.Second)
		}
		hc = tokenClient(hc)
		cc := &clientcredentials.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, TokenURL: o.TokenURL, Scopes: o.Scopes}
		// Every fetch uses this context: it carries the HTTP client only,
		// whose timeout bounds each fetch. (cc.TokenSource would cache
		// tokens itself, out of Invalidate's reach: base fetches anew each
		// time, and tokens is the one cache.)
		fetchCtx := context.WithValue(context.Background(), oauth2.HTTPClient, hc)
		a.base = tokenFunc(func() (*oauth2.Token, error) { return cc.Token(fetchCtx) })
		a.tokens = oauth2.ReuseTokenSourceWithExpiry(nil, a.base, tokenEarlyExpiry)
	}
	return a, nil
}

// tokenClient is hc for token requests: a redirect to another origin is
// refused, as a 307/308 would repeat the request's body there, and the
// body may hold the client secret (x/oauth2 sends it there for
// token endpoints that do not take HTTP Basic).
func tokenClient(hc *http.Client) *http.Client {
	c := *hc
	next := hc.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if leftOrigin(req, via) {
			return refuse("refusing to follow the token endpoint's redirect to %s: another origin would get the client credentials", redact(req.URL))
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
	return &c
}

// tokenFunc is an oauth2.TokenSource of a function.
type tokenFunc func() (*oauth2.Token, error)

func (f tokenFunc) Token() (*oauth2.Token, error) { return f() }

// Configured describes the configured credentials for a person (no
// secrets): "a bearer token", "an API key", "OAuth2 client credentials
// (client "x")".
func (a *Authenticator) Configured() []string {
	var out []string
	if a.cfg.BearerToken != nil {
		out = append(out, "a bearer token")
	}
	if a.cfg.APIKey != nil {
		out = append(out, "an API key")
	}
	if o := a.cfg.OAuth2; o != nil {
		out = append(out, fmt.Sprintf("OAuth2 client credentials (client %q at %s)", o.ClientID, redactRaw(o.TokenURL)))
	}
	return out
}

// credential is one thing to put on a request.
type credential int

const (
	credBearer credential = iota + 1 // the static bearer token
	credOAuth2                       // an OAuth2 access token
	credAPIKey                       // the API key, where place says
)

type placed struct {
	cred      credential
	in, param string // for credAPIKey: header, query or cookie, and its name
}

// Apply implements Credentials: the first alternative of sec (see
// Security.Alternatives) the configured credentials satisfy is sent; with
// nothing declared, every configured credential is (a bearer token, else
// an OAuth2 token; the API key in APIKeyHeader).
func (a *Authenticator) Apply(ctx context.Context, req *http.Request, sec *Security) error {
	if !sec.Declared() {
		return a.put(req, a.everything())
	}
	open := false
	for _, alt := range sec.Alternatives() {
		if len(alt) == 0 {
			open = true // the agent lets callers in without credentials
			continue
		}
		if plan, ok := a.plan(sec, alt); ok {
			return a.put(req, plan)
		}
	}
	if open {
		return nil
	}
	return &MismatchError{URL: redact(req.URL), Wanted: *sec, Configured: a.Configured()}
}

func (a *Authenticator) everything() []placed {
	var plan []placed
	switch {
	case a.cfg.BearerToken != nil:
		plan = append(plan, placed{cred: credBearer})
	case a.cfg.OAuth2 != nil:
		plan = append(plan, placed{cred: credOAuth2})
	}
	if a.cfg.APIKey != nil {
		plan = append(plan, placed{cred: credAPIKey, in: "header"})
	}
	return plan
}

// plan chooses a credential for every scheme of one alternative, or
// reports that one of them has none.
func (a *Authenticator) plan(sec *Security, alt []string) ([]placed, bool) {
	var plan []placed
	for _, name := range alt {
		s, ok := sec.Scheme(name)
		if !ok {
			return nil, false
		}
		switch {
		case s.Type == SchemeAPIKey && a.cfg.APIKey != nil:
			plan = append(plan, placed{cred: credAPIKey, in: s.In, param: s.ParamName})
		case s.Type == SchemeHTTP && s.Bearer() && a.cfg.BearerToken != nil:
			plan = append(plan, placed{cred: credBearer})
		case s.Bearer() && a.cfg.OAuth2 != nil:
			plan = append(plan, placed{cred: credOAuth2})
		case s.Bearer() && a.cfg.BearerToken != nil:
			plan = append(plan, placed{cred: credBearer})
		default:
			return nil, false
		}
	}
	return plan, true
}

func (a *Authenticator) put(req *http.Request, plan []placed) error {
	for _, p := range plan {
		switch p.cred {
		case credBearer:
			tok, err := a.cfg.BearerToken()
			if err != nil {
				return fmt.Errorf("discovery: %w: reading the bearer token: %v", ErrCredentialUnavailable, err)
			}
			req.Header.Set("Authorization", "Bearer "+tok)
		case credOAuth2:
			if err := a.oauth2(req); err != nil {
				return err
			}
		case credAPIKey:
			key, err := a.cfg.APIKey()
			if err != nil {
				return fmt.Errorf("discovery: %w: reading the API key: %v", ErrCredentialUnavailable, err)
			}
			switch p.in {
			case "query":
				q := req.URL.Query()
				q.Set(p.param, key)
				req.URL.RawQuery = q.Encode()
			case "cookie":
				req.AddCookie(&http.Cookie{Name: p.param, Value: key})
			default:
				h := cmp.Or(p.param, a.cfg.APIKeyHeader, DefaultAPIKeyHeader)
				req.Header.Set(h, key)
			}
		}
	}
	return nil
}

// oauth2 puts the current access token on req, fetching one if there is
// none or it is about to expire.
func (a *Authenticator) oauth2(req *http.Request) error {
	a.mu.Lock()
	src := a.tokens
	a.mu.Unlock()
	tok, err := src.Token()
	if err != nil {
		return fmt.Errorf("discovery: %w: getting an OAuth2 token from %s for client %q: %s",
			ErrCredentialUnavailable, redactRaw(a.cfg.OAuth2.TokenURL), a.cfg.OAuth2.ClientID, tokenFailure(err))
	}
	tok.SetAuthHeader(req)
	a.mu.Lock()
	if a.tokens == src {
		a.issued = req.Header.Get("Authorization")
	}
	a.mu.Unlock()
	return nil
}

// tokenFailure says why a token fetch failed, from what the token
// endpoint answered (its error code and description, or its status), never
// from the request (which holds the secret).
func tokenFailure(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := ""
		if re.Response != nil {
			status = "HTTP " + re.Response.Status
		}
		switch {
		case re.ErrorCode != "" && re.ErrorDescription != "":
			return strings.TrimSpace(fmt.Sprintf("%s %s: %s", status, re.ErrorCode, re.ErrorDescription))
		case re.ErrorCode != "":
			return strings.TrimSpace(status + " " + re.ErrorCode)
		case status != "":
			return status
		}
	}
	return strings.TrimPrefix(unwrapURLError(err).Error(), "oauth2: ")
}

// Invalidate implements Refresher: when the refused request carried the
// current OAuth2 token, it is dropped and the next Apply fetches another.
// A request that carried an older token (another request already replaced
// it) may be sent again too; one that carried the static bearer token or
// no OAuth2 token may not.
func (a *Authenticator) Invalidate(refused *http.Request) bool {
	if a.base == nil {
		return false
	}
	got := refused.Header.Get("Authorization")
	if got == "" {
		return false
	}
	if a.cfg.BearerToken != nil {
		if tok, err := a.cfg.BearerToken(); err == nil && got == "Bearer "+tok {
			return false
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if got == a.issued {
		a.tokens = oauth2.ReuseTokenSourceWithExpiry(nil, a.base, tokenEarlyExpiry)
		a.issued = ""
	}
	return true
}

// redact is a URL for messages: no user info, and no query (an API key may
// be there).
func redact(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery = nil, "", false
	return c.String()
}

// RedactURL returns the URL s fit for a log line or an error message: no
// user info and no query (an API key may be there). A URL that does not
// parse is not repeated at all.
func RedactURL(s string) string { return redactRaw(s) }

// RedactError is err fit for a log line, an error message or a status
// others read, when its text may repeat rawURL: net/http's errors do, and
// libraries print those into their own. Every form of rawURL in it is
// replaced by RedactURL's; an error that does not mention it is returned
// as it is. The result still wraps err (errors.Is and As see through it).
func RedactError(err error, rawURL string) error {
	if err == nil || rawURL == "" {
		return err
	}
	shown := redactRaw(rawURL)
	forms := []string{rawURL}
	if u, perr := url.Parse(rawURL); perr == nil {
		forms = append(forms, u.String(), u.Redacted())
	}
	text := err.Error()
	for _, f := range forms {
		if f != "" && f != shown {
			text = strings.ReplaceAll(text, f, shown)
		}
	}
	if text == err.Error() {
		return err
	}
	return redactedError{text: text, err: err}
}

type redactedError struct {
	text string
	err  error
}

func (e redactedError) Error() string { return e.text }
func (e redactedError) Unwrap() error { return e.err }

// redactRaw is redact for a URL as configured; one that does not parse is
// not repeated at all.
func redactRaw(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(an unparsable URL)"
	}
	return redact(u)
}

// AuthError is an agent's refusal of a call: HTTP 401 (or JSON-RPC
// -31401), it wants credentials or refused those sent; HTTP 403 (-31403),
// it knows the caller, who may not make the call. errors.Is(err,
// schemas.ErrUnauthenticated) or (err, schemas.ErrPermissionDenied)
// holds, and errors.As finds the agent's *schemas.Error.
type AuthError struct {
	URL    string
	Status int // 401 or 403
	// Challenge is the answer's WWW-Authenticate header, if any.
	Challenge string
	// Security is what the agent's card declares, when the client knows
	// its card.
	Security Security
	// Err is the agent's error, an occurrence of ErrUnauthenticated or
	// ErrPermissionDenied.
	Err *schemas.Error
}

func (e *AuthError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "calling %s: HTTP %d %s", e.URL, e.Status, http.StatusText(e.Status))
	if e.Err != nil && e.Err.Message != "" {
		b.WriteString(": " + e.Err.Message)
	}
	if e.Challenge != "" {
		fmt.Fprintf(&b, " (WWW-Authenticate: %s)", e.Challenge)
	}
	if e.Security.Declared() {
		b.WriteString("; the agent's card asks for " + e.Security.String())
	}
	return b.String()
}

func (e *AuthError) Unwrap() error { return e.Err }

// Unauthenticated reports whether the agent wants (other) credentials, as
// opposed to refusing a caller it knows (permission denied).
func (e *AuthError) Unauthenticated() bool { return e.Status != http.StatusForbidden }

// Refusal reads res as an *AuthError when it is an HTTP 401 or 403 (nil
// otherwise), from at most 64 KiB of its body, which the caller still
// drains and closes: the agent's error in any wire form when the body
// holds one of the two rows, else the row of the status. u names the
// call and sec is what the agent's card declares (nil: unknown). Every
// reader of an a2abus or A2A answer uses it (the card fetcher, the
// client, the CLI's registry listing).
func Refusal(u string, res *http.Response, sec *Security) *AuthError {
	var row *schemas.Error
	switch res.StatusCode {
	case http.StatusUnauthorized:
		row = schemas.ErrUnauthenticated
	case http.StatusForbidden:
		row = schemas.ErrPermissionDenied
	default:
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	e := schemas.Errorf(row, "%s", row.Message)
	var w struct {
		Error *wireError `json:"error"`
	}
	if json.Unmarshal(body, &w) == nil && w.Error != nil {
		if pe := w.Error.Decode(0); errors.Is(pe, schemas.ErrUnauthenticated) || errors.Is(pe, schemas.ErrPermissionDenied) {
			e = pe
		} else if w.Error.Message != "" {
			e = schemas.Errorf(row, "%s", w.Error.Message)
		}
	}
	return newAuthError(u, res.StatusCode, res, sec, e)
}

// newAuthError is the AuthError of an agent's refusal e, answered with
// HTTP status; res, when there is one, gives the challenge.
func newAuthError(u string, status int, res *http.Response, sec *Security, e *schemas.Error) *AuthError {
	ae := &AuthError{URL: redactRaw(u), Status: status, Err: e}
	if res != nil {
		ae.Challenge = res.Header.Get("WWW-Authenticate")
	}
	if sec != nil {
		ae.Security = *sec
	}
	return ae
}
