package discovery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// Card discovery: fetch an agent's card from its well-known path, accept
// the 1.0 and 0.3 shapes and those of the older tasks/send dialect,
// validate the fields a client needs, and pick the interface to talk to.

// Well-known card paths: the 1.0 (and 0.3) path, then the path older agents
// serve.
const (
	WellKnownCard       = "/.well-known/agent-card.json"
	WellKnownCardLegacy = "/.well-known/agent.json"
)

// ErrInvalidCard is wrapped by every card that fails validation.
var ErrInvalidCard = errors.New("invalid agent card")

// errNotJSON is wrapped (beside ErrInvalidCard) when a card address answers
// something that is not JSON at all, as sites that serve an HTML page for
// every path do: the older card path is tried next.
var errNotJSON = errors.New("not a JSON object")

// Fetched is one fetched card with what HTTP said about its freshness.
type Fetched struct {
	Card schemas.AgentCard
	// Raw is the card as the agent served it, kept verbatim.
	Raw json.RawMessage
	// URL is the address the card was read from (after any fallback).
	URL string
	// ETag comes from the answer's ETag header.
	ETag string
	// MaxAge is how long the card stays fresh, from Cache-Control
	// (s-maxage, else max-age; zero for no-cache) less the answer's Age;
	// HasMaxAge says whether Cache-Control gave a freshness at all.
	MaxAge    time.Duration
	HasMaxAge bool
	// NoStore is set when Cache-Control said no-store: the card may be
	// used for this call but not kept.
	NoStore   bool
	FetchedAt time.Time
	// NotModified is set when a conditional fetch was answered 304: Card
	// and Raw are empty and the caller's copy is still good.
	NotModified bool
	// SignedBy is the kid of the trusted key whose signature of the card
	// verified (Fetcher.Verify); "" when the card was not checked, or was
	// unsigned and the policy accepts that.
	SignedBy string
}

// CardVerifier checks the signatures of a card as served (its JSON)
// against keys the operator trusts, never keys the card points to
// (edge/auth's CardVerifier). It returns the kid of the key whose
// signature verifies, "" for an unsigned card its policy accepts, or why
// the card is refused.
type CardVerifier interface {
	VerifyCard(ctx context.Context, card []byte) (kid string, err error)
}

// Fetcher fetches agent cards. The zero value is usable: public addresses
// only, 30 s timeout, 1 MiB cap.
type Fetcher struct {
	// HTTP is the client; default a Policy.Client for each Fetch, its
	// idle connections closed afterwards (cards are fetched rarely).
	HTTP   *http.Client
	Policy Policy
	Header http.Header
	// Credentials, when set, authenticate a card request the agent refused
	// without them (every credential configured is sent, as the agent's
	// card is not known yet). Cards are public as a rule, so an agent
	// whose card is public never sees them.
	Credentials Credentials
	Timeout     time.Duration // default 30s
	// MaxBytes caps a card body. Default 1 MiB.
	MaxBytes int64
	// Verify, when set, checks the signatures of every card fetched; a
	// card it refuses is an error wrapping ErrInvalidCard and Verify's
	// error. nil: signatures are not checked.
	Verify CardVerifier
}

// verify checks raw, a card as served, with f.Verify: the kid whose
// signature verified, or an error wrapping ErrInvalidCard and the
// verifier's error.
func (f *Fetcher) verify(ctx context.Context, raw []byte) (string, error) {
	if f.Verify == nil {
		return "", nil
	}
	kid, err := f.Verify.VerifyCard(ctx, raw)
	if err != nil {
		return "", fmt.Errorf("%w (%w)", ErrInvalidCard, err)
	}
	return kid, nil
}

func (f *Fetcher) timeout() time.Duration {
	if f.Timeout > 0 {
		return f.Timeout
	}
	return 30 * time.Second
}

// CardURLs returns the addresses to try for an agent at base: base itself
// when it already names a card (a path ending in .json), else the
// well-known path and then its older fallback.
func CardURLs(base string) ([]string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("discovery: %q is not an absolute http(s) URL", base)
	}
	if strings.HasSuffix(u.Path, ".json") {
		return []string{u.String()}, nil
	}
	u.RawQuery, u.Fragment = "", ""
	root := strings.TrimRight(u.String(), "/")
	return []string{root + WellKnownCard, root + WellKnownCardLegacy}, nil
}

// Fetch reads the card of the agent at base (see CardURLs): the
// well-known path first, then the older one when the first has no card
// (404 or 410) or answers something that is not JSON. etag, when not
// empty, makes the fetch conditional (If-None-Match); a 304 answer gives
// NotModified.
//
// A card that fails ParseCard, or Verify, or is larger than MaxBytes,
// gives an error wrapping ErrInvalidCard; an agent that cannot be reached, or answers
// another HTTP status, a *TransportError, but HTTP 401 or 403 an
// *AuthError; a refused address one wrapping ErrForbiddenAddress.
func (f *Fetcher) Fetch(ctx context.Context, base, etag string) (*Fetched, error) {
	urls, err := CardURLs(base)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout())
	defer cancel()
	hc, release := f.client()
	defer release()
	var best error
	bestMissing := false
	for _, u := range urls {
		fc, status, err := f.fetchOne(ctx, hc, u, etag)
		if err == nil {
			return fc, nil
		}
		missing := status == http.StatusNotFound || status == http.StatusGone
		// Report the most telling failure: a missing card only when no
		// address said more.
		if best == nil || bestMissing {
			best, bestMissing = err, missing
		}
		if !missing && !errors.Is(err, errNotJSON) {
			break
		}
	}
	return nil, best
}

// fetchOne fetches a card from u: without credentials first, as cards are
// public as a rule, and with them only when the agent refuses (401/403),
// so an agent whose card is public never sees them.
func (f *Fetcher) fetchOne(ctx context.Context, hc *http.Client, u, etag string) (*Fetched, int, error) {
	got, status, err := f.fetchAs(ctx, hc, u, etag, false)
	var ae *AuthError
	if f.Credentials != nil && errors.As(err, &ae) {
		return f.fetchAs(ctx, hc, u, etag, true)
	}
	return got, status, err
}

// client is the client the Fetcher's requests go through: its HTTP, or a
// guarded one of its own, whose connection pool release frees (cards
// are fetched once in a while).
func (f *Fetcher) client() (hc *http.Client, release func()) {
	if f.HTTP != nil {
		return f.HTTP, func() {}
	}
	hc = f.Policy.Client(f.timeout())
	return hc, hc.CloseIdleConnections
}

// get sends a GET of u as the Fetcher sends each of its requests: its
// Header, JSON accepted, its User-Agent, then extra, and its credentials
// when withCredentials. An answer 401 or 403 is an *AuthError (Refusal)
// beside the response; the caller drains any response it gets.
func (f *Fetcher) get(ctx context.Context, hc *http.Client, u string, extra http.Header, withCredentials bool) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	for k, vs := range f.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	for k, vs := range extra {
		req.Header[k] = vs
	}
	if withCredentials {
		if err := f.Credentials.Apply(ctx, req, nil); err != nil {
			return nil, err
		}
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, &TransportError{URL: redactRaw(u), Err: unwrapURLError(err)}
	}
	if ae := Refusal(u, res, nil); ae != nil {
		return res, ae
	}
	return res, nil
}

// maxBytes is the most of a body the Fetcher reads.
func (f *Fetcher) maxBytes() int64 {
	if f.MaxBytes > 0 {
		return f.MaxBytes
	}
	return 1 << 20
}

func (f *Fetcher) fetchAs(ctx context.Context, hc *http.Client, u, etag string, withCredentials bool) (*Fetched, int, error) {
	var extra http.Header
	if etag != "" {
		extra = http.Header{"If-None-Match": {etag}}
	}
	res, err := f.get(ctx, hc, u, extra, withCredentials)
	if res == nil {
		return nil, 0, err
	}
	defer drain(res.Body)
	if err != nil {
		return nil, res.StatusCode, err
	}
	now := time.Now()
	cc := cacheControl(res.Header.Get("Cache-Control"))
	if cc.hasMaxAge {
		// A cache on the way already held the answer for Age seconds.
		if age, err := strconv.Atoi(strings.TrimSpace(res.Header.Get("Age"))); err == nil && age > 0 {
			cc.maxAge = max(cc.maxAge-time.Duration(age)*time.Second, 0)
		}
	}
	if res.StatusCode == http.StatusNotModified {
		return &Fetched{URL: u, ETag: cmp.Or(res.Header.Get("ETag"), etag), MaxAge: cc.maxAge, HasMaxAge: cc.hasMaxAge,
			NoStore: cc.noStore, FetchedAt: now, NotModified: true}, res.StatusCode, nil
	}
	if res.StatusCode != http.StatusOK {
		return nil, res.StatusCode, &TransportError{URL: redactRaw(u), Status: res.StatusCode, RetryAfter: retryAfter(res),
			Err: fmt.Errorf("no agent card here (HTTP %d %s)", res.StatusCode, http.StatusText(res.StatusCode))}
	}
	max := f.maxBytes()
	body, err := io.ReadAll(io.LimitReader(res.Body, max+1))
	if err != nil {
		return nil, res.StatusCode, &TransportError{URL: redactRaw(u), Status: res.StatusCode, Err: fmt.Errorf("reading the card: %w", err)}
	}
	if int64(len(body)) > max {
		return nil, res.StatusCode, fmt.Errorf("discovery: %s: %w: larger than %d bytes", redactRaw(u), ErrInvalidCard, max)
	}
	card, err := ParseCard(body)
	if err != nil {
		return nil, res.StatusCode, fmt.Errorf("discovery: %s: %w", redactRaw(u), err)
	}
	kid, err := f.verify(ctx, body)
	if err != nil {
		return nil, res.StatusCode, fmt.Errorf("discovery: %s: %w", redactRaw(u), err)
	}
	return &Fetched{Card: *card, Raw: body, URL: u, ETag: res.Header.Get("ETag"), MaxAge: cc.maxAge, HasMaxAge: cc.hasMaxAge,
		NoStore: cc.noStore, FetchedAt: now, SignedBy: kid}, res.StatusCode, nil
}

// cachePolicy is what a Cache-Control header says about reusing a card.
type cachePolicy struct {
	maxAge    time.Duration
	hasMaxAge bool // Cache-Control gave a freshness (max-age, s-maxage, no-cache)
	noStore   bool
}

// cacheControl reads a Cache-Control header as a shared cache does (the
// card cache is shared by every process): s-maxage wins over max-age;
// no-cache means "store, but revalidate every time" (freshness zero);
// no-store means "do not keep". Malformed or negative ages are ignored.
func cacheControl(h string) cachePolicy {
	var p cachePolicy
	maxAge, shared, noCache := time.Duration(-1), time.Duration(-1), false
	for _, d := range strings.Split(h, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(strings.ToLower(d)), "=")
		k = strings.TrimSpace(k)
		switch k {
		case "no-store":
			p.noStore = true
		case "no-cache":
			noCache = true
		case "max-age", "s-maxage":
			n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(v), `"`), 10, 64)
			if err != nil || n < 0 {
				continue
			}
			age := time.Duration(min(n, int64(math.MaxInt64/time.Second))) * time.Second
			if k == "s-maxage" {
				shared = age
			} else {
				maxAge = age
			}
		}
	}
	switch {
	case noCache:
		p.maxAge, p.hasMaxAge = 0, true
	case shared >= 0:
		p.maxAge, p.hasMaxAge = shared, true
	case maxAge >= 0:
		p.maxAge, p.hasMaxAge = maxAge, true
	}
	return p
}

// ParseCard reads a card in the 1.0 or 0.3 shape and checks the fields a
// client relies on: name, description, version, skills, the default modes,
// capabilities, and at least one interface with an absolute http(s) URL.
// A 0.3 card (url + preferredTransport) gets the equivalent
// supportedInterfaces, so callers read one shape (CardSecurity reads its
// security in either shape).
//
// A card with a url but no supportedInterfaces is told apart by what it
// declares: a protocolVersion names its version ("0.3.0"); without one,
// any of the fields A2A 0.2 brought with message/send (preferredTransport,
// additionalInterfaces, securitySchemes, security,
// supportsAuthenticatedExtendedCard) makes it 0.3 too; a card with none of
// them, as OpenFang's and AgentOS's are, is taken for the older tasks/send
// dialect: its interface gets protocolVersion
// schemas.ProtocolVersionLegacy, and it needs no version (AgentOS's has
// none). The guess between the two is only a guess: the client tries the
// other when the agent does not know the method (see Client).
func ParseCard(b []byte) (*schemas.AgentCard, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, fmt.Errorf("%w: %w: %v", ErrInvalidCard, errNotJSON, err)
	}
	var c schemas.AgentCard
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCard, err)
	}
	legacy := len(c.SupportedInterfaces) == 0 && c.URL != "" && legacyCard(fields)
	var missing []string
	for _, k := range []string{"name", "description", "version", "skills", "capabilities", "defaultInputModes", "defaultOutputModes"} {
		if k == "version" && legacy {
			continue
		}
		if v, ok := fields[k]; !ok || string(v) == "null" {
			missing = append(missing, k)
		}
	}
	// The names above are the card's own; encoding/json also reads a key
	// that differs only in case into the same field, so a later
	// {"Skills":null} empties what {"skills":[]} set: what was decoded
	// decides too.
	for k, empty := range map[string]bool{"name": c.Name == "", "skills": c.Skills == nil,
		"defaultInputModes": c.DefaultInputModes == nil, "defaultOutputModes": c.DefaultOutputModes == nil} {
		if empty && !slices.Contains(missing, k) {
			missing = append(missing, k)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: missing %s", ErrInvalidCard, strings.Join(missing, ", "))
	}
	if len(c.SupportedInterfaces) == 0 && c.URL != "" {
		c.SupportedInterfaces = v03Interfaces(&c, legacy)
	}
	if len(c.SupportedInterfaces) == 0 {
		return nil, fmt.Errorf("%w: no interface (supportedInterfaces, or url for an A2A 0.3 card)", ErrInvalidCard)
	}
	for i, in := range c.SupportedInterfaces {
		if strings.EqualFold(in.ProtocolBinding, schemas.BindingGRPC) {
			// A gRPC address: host:port as a2abus's edge and the official
			// SDKs write it, or a URL (grpcAddress).
			if _, _, err := grpcAddress(in.URL); err != nil {
				return nil, fmt.Errorf("%w: supportedInterfaces[%d].url %q is not a gRPC address (host:port or an absolute URL)", ErrInvalidCard, i, in.URL)
			}
			continue
		}
		u, err := url.Parse(in.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "grpc" && u.Scheme != "grpcs") || u.Host == "" {
			return nil, fmt.Errorf("%w: supportedInterfaces[%d].url %q is not an absolute URL", ErrInvalidCard, i, in.URL)
		}
		if in.ProtocolBinding == "" {
			return nil, fmt.Errorf("%w: supportedInterfaces[%d].protocolBinding is required", ErrInvalidCard, i)
		}
	}
	return &c, nil
}

// legacyCard reports whether a card's fields (a card without
// supportedInterfaces) show none of the marks of A2A 0.2 and later: see
// ParseCard.
func legacyCard(fields map[string]json.RawMessage) bool {
	for _, k := range []string{"protocolVersion", "preferredTransport", "additionalInterfaces", "securitySchemes", "security", "supportsAuthenticatedExtendedCard"} {
		if v, ok := fields[k]; ok && string(v) != "null" {
			return false
		}
	}
	return true
}

// v03Interfaces lists a 0.3 card's url (in its preferred transport, JSONRPC
// when unnamed) and its additional interfaces as 1.0 interfaces; the url
// of a card of the older dialect (legacy) as its one JSONRPC interface.
func v03Interfaces(c *schemas.AgentCard, legacy bool) []schemas.AgentInterface {
	version := c.ProtocolVersion
	switch {
	case legacy:
		version = schemas.ProtocolVersionLegacy
	case version == "":
		version = "0.3"
	}
	transport := c.PreferredTransport
	if transport == "" {
		transport = schemas.BindingJSONRPC
	}
	out := []schemas.AgentInterface{{URL: c.URL, ProtocolBinding: transport, ProtocolVersion: version}}
	for _, ai := range c.AdditionalInterfaces {
		in := schemas.AgentInterface{URL: ai.URL, ProtocolBinding: ai.Transport, ProtocolVersion: version}
		if in != out[0] {
			out = append(out, in)
		}
	}
	return out
}

// Endpoints lists the interfaces of a card a2abus can speak, best first:
// 1.0 before 0.3 before the older tasks/send dialect, then in the order of
// prefer (default JSONRPC, then HTTP+JSON, then GRPC), then in the card's
// order. Bindings not in prefer are left out, and so is any binding
// a2abus does not speak, preferred or not (gRPC is 1.0's only). Endpoints
// of the older dialect carry the card's capabilities.streaming. A gRPC
// interface's host:port (or grpc://) URL is made http:// or https:// after
// the card's HTTP interfaces, when it has any (see grpcURL).
func Endpoints(c *schemas.AgentCard, prefer ...string) []Endpoint {
	if len(prefer) == 0 {
		prefer = []string{schemas.BindingJSONRPC, schemas.BindingHTTPJSON, schemas.BindingGRPC}
	}
	rank := func(in schemas.AgentInterface) int {
		if !slices.ContainsFunc([]string{schemas.BindingJSONRPC, schemas.BindingHTTPJSON, schemas.BindingGRPC}, func(b string) bool { return strings.EqualFold(in.ProtocolBinding, b) }) {
			return -1 // a binding preferred but not spoken
		}
		r := -1
		for i, b := range prefer {
			if strings.EqualFold(in.ProtocolBinding, b) {
				r = i
			}
		}
		if r < 0 {
			return -1
		}
		switch {
		case isV1(in.ProtocolVersion):
		case strings.EqualFold(in.ProtocolBinding, schemas.BindingGRPC):
			return -1
		case isV03(in.ProtocolVersion) && strings.EqualFold(in.ProtocolBinding, schemas.BindingJSONRPC):
			r += 100
		case isLegacy(in.ProtocolVersion) && strings.EqualFold(in.ProtocolBinding, schemas.BindingJSONRPC):
			r += 200
		default:
			return -1
		}
		return r
	}
	type cand struct {
		ep   Endpoint
		rank int
	}
	var cands []cand
	for _, in := range c.SupportedInterfaces {
		r := rank(in)
		if r < 0 {
			continue
		}
		ep := Endpoint{URL: in.URL, Binding: schemas.BindingJSONRPC, Version: schemas.ProtocolVersion03, Tenant: in.Tenant}
		switch {
		case isV1(in.ProtocolVersion):
			ep.Version = schemas.ProtocolVersion
		case isLegacy(in.ProtocolVersion):
			ep.Version = schemas.ProtocolVersionLegacy
			ep.Streaming = c.Capabilities.Streaming != nil && *c.Capabilities.Streaming
		}
		switch {
		case strings.EqualFold(in.ProtocolBinding, schemas.BindingHTTPJSON):
			ep.Binding = schemas.BindingHTTPJSON
		case strings.EqualFold(in.ProtocolBinding, schemas.BindingGRPC):
			ep.Binding, ep.URL = schemas.BindingGRPC, grpcURL(in.URL, httpScheme(c))
		}
		cands = append(cands, cand{ep, r})
	}
	// A stable insertion sort: cards list a handful of interfaces.
	for i := 1; i < len(cands); i++ {
		for j := i; j > 0 && cands[j].rank < cands[j-1].rank; j-- {
			cands[j], cands[j-1] = cands[j-1], cands[j]
		}
	}
	out := make([]Endpoint, len(cands))
	for i, c := range cands {
		out[i] = c.ep
	}
	return out
}

// httpScheme is the scheme of a card's HTTP interfaces (JSON-RPC and
// HTTP+JSON): "https" when any is, "http" when all are plain, "" when it
// has none.
func httpScheme(c *schemas.AgentCard) string {
	scheme := ""
	for _, in := range c.SupportedInterfaces {
		if strings.EqualFold(in.ProtocolBinding, schemas.BindingGRPC) {
			continue
		}
		switch u, err := url.Parse(in.URL); {
		case err != nil:
		case strings.EqualFold(u.Scheme, "https"):
			return "https"
		case strings.EqualFold(u.Scheme, "http"):
			scheme = "http"
		}
	}
	return scheme
}

// grpcURL is a card's gRPC URL as an endpoint's: a host:port or grpc://
// URL, which does not say whether the agent speaks TLS, made scheme://
// (the scheme of the card's HTTP interfaces: an a2abus edge serves gRPC
// over TLS exactly when it serves HTTP over TLS); any other form, or a
// card without HTTP interfaces, as it is (grpcAddress then decides).
func grpcURL(raw, scheme string) string {
	rest, isGRPC := cutPrefixFold(raw, "grpc://")
	if scheme == "" || (!isGRPC && strings.Contains(raw, "://")) {
		return raw
	}
	hostport, _, _ := strings.Cut(rest, "/")
	return scheme + "://" + hostport
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// ClientFor returns a client of the best interface of a card, with
// Options.Security read from the card (CardSecurity) unless set.
func ClientFor(c *schemas.AgentCard, opts Options, prefer ...string) (*Client, error) {
	if opts.Security == nil {
		sec := CardSecurity(c)
		opts.Security = &sec
	}
	eps := Endpoints(c, prefer...)
	if len(eps) == 0 {
		return nil, fmt.Errorf("discovery: agent %q offers no interface a2abus speaks (JSONRPC, HTTP+JSON or GRPC in A2A 1.0, JSONRPC in 0.3, or the tasks/send dialect)", c.Name)
	}
	return NewClient(eps[0], opts)
}
