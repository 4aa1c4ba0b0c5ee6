package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// The card resolver: agent cards through the shared cache.
//
// Every process that talks to an external agent — the remote agent kind,
// its health checks, the client commands — needs the agent's card, and a
// fleet of them must not fetch it on every call nor all stop working the
// moment the agent's card server hiccups. The Resolver owns that policy:
// when a cached card may be served as is, when it must be revalidated,
// when a stale one may still be served, and what is never cached. The
// cache itself (the A2A_CARDS bucket) belongs to bus; the HTTP fetch and
// the validation of cards to Fetcher and ParseCard.

// CardStore is where the resolver keeps cards: the A2A_CARDS bucket
// (*bus.Bus), shared by every process of a deployment. GetCard returns an
// error matching bus.ErrCardNotCached when it holds no card for baseURL.
type CardStore interface {
	GetCard(ctx context.Context, baseURL string) (*schemas.CachedCard, uint64, error)
	PutCard(ctx context.Context, c *schemas.CachedCard) error
	DeleteCard(ctx context.Context, baseURL string) error
}

var _ CardStore = (*bus.Bus)(nil)

// Source says where a resolved card came from.
type Source string

const (
	// FromCache: the cached card was fresh; the agent was not asked.
	FromCache Source = "cache"
	// FromAgent: the agent sent its card.
	FromAgent Source = "fetched"
	// Revalidated: the agent said the cached card is still good (304).
	Revalidated Source = "revalidated"
	// Stale: the agent could not be reached; the cached card, confirmed
	// less than the hard TTL ago, is served anyway (stale-if-error).
	Stale Source = "stale"
)

// Resolved is a card and how it was obtained.
type Resolved struct {
	Card   schemas.AgentCard
	Source Source
	// Entry is the cache entry after this resolution: when the card was
	// fetched (FetchedAt), when the agent last answered (CheckedAt), until
	// when it is fresh, and the last failed refresh (LastError,
	// LastErrorAt). It is not stored when the agent said no-store.
	Entry *schemas.CachedCard
	// Err is the error of the failed refresh when Source is Stale (within
	// ErrorBackoff of that failure, an error carrying its recorded text).
	Err error
}

// ErrNoCard is wrapped when there is no card to serve: the agent could not
// be reached (or served an invalid card) and no usable cached copy exists.
var ErrNoCard = errors.New("no usable agent card")

// Resolver resolves agent cards through the shared cache:
//
//   - a cached card within its max-age is served without a request;
//   - a stale one is revalidated with a conditional GET (If-None-Match):
//     a 304 renews it, a 200 replaces it;
//   - when the agent cannot be reached (a transport error, 5xx or 429) the
//     cached card is served, marked Stale and with the error recorded in
//     the cache, until HardTTL after the agent last answered; after a
//     failure, Resolve serves it stale without asking again for
//     ErrorBackoff, so calls do not each wait for a dead agent;
//   - an invalid card is an error wrapping ErrInvalidCard and ErrNoCard: it
//     is never cached, nor does it replace a good cached card;
//   - with Fetcher.Verify set, a cached card is checked as a fetched one is
//     before it is served (the cache is shared by processes that may trust
//     other keys, or none): one that fails is not served, and the agent is
//     asked again;
//   - Cache-Control no-store is honoured (the card is served, not kept, and
//     an older cached copy is dropped); no-cache means revalidate every
//     time.
//   - a card that declares no skills is fetched with the agent's answer to
//     GET {endpoint}/capabilities (Fetcher.Capabilities), kept in its
//     entry: asked again whenever the card is (fetched or revalidated), so
//     never while the card is fresh; an agent without that route resolves
//     as before, without capabilities.
//
// Fetcher and Store are required. A Resolver holds no state of its own
// (everything is in Store), so any number of them, in any process, share
// one cache; it is safe for concurrent use.
type Resolver struct {
	Fetcher *Fetcher
	Store   CardStore
	// DefaultMaxAge is the freshness of a card served without max-age.
	// Default 5 minutes.
	DefaultMaxAge time.Duration
	// HardTTL is how long after the agent last answered its cached card may
	// still be served while it is unreachable. Default 24h.
	HardTTL time.Duration
	// ErrorBackoff is how long after a failed refresh Resolve serves the
	// stale card without asking the agent again (Refresh always asks).
	// Default 10s.
	ErrorBackoff time.Duration
	// Now is the clock; default time.Now (tests move it).
	Now func() time.Time
	// Metrics, when set, counts resolutions by result.
	Metrics *bus.Metrics
}

func (r *Resolver) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Resolve returns the card of the agent at baseURL, from the cache when it
// is fresh. It returns an error wrapping ErrNoCard when there is no card
// to serve (wrapping ErrInvalidCard too when the agent served an invalid
// one), and a plain error when baseURL is not an absolute http(s) URL.
func (r *Resolver) Resolve(ctx context.Context, baseURL string) (*Resolved, error) {
	return r.counted(r.resolve(ctx, baseURL, false))
}

// counted records a resolution in a2a_discovery_cache_total by its source
// (cache, fetched, revalidated, stale) or "error".
func (r *Resolver) counted(res *Resolved, err error) (*Resolved, error) {
	if r.Metrics != nil {
		result := "error"
		if err == nil {
			result = string(res.Source)
		}
		r.Metrics.Counter("a2a_discovery_cache_total", "Agent card resolutions through the shared cache, by where the card came from (error: no card to serve).", "result").Inc(result)
	}
	return res, err
}

// Refresh asks the agent even if the cached card is fresh (conditionally,
// when there is one): the periodic health check. Its results and errors
// are those of Resolve; a Stale result says the agent is unreachable.
func (r *Resolver) Refresh(ctx context.Context, baseURL string) (*Resolved, error) {
	return r.counted(r.resolve(ctx, baseURL, true))
}

func (r *Resolver) resolve(ctx context.Context, baseURL string, force bool) (*Resolved, error) {
	base, err := canonicalBase(baseURL)
	if err != nil {
		return nil, err
	}
	cached, _, err := r.Store.GetCard(ctx, base)
	if err != nil {
		// Not cached, or the cache cannot be read now: either way, ask the
		// agent (writing the answer back is still worth a try).
		cached = nil
	}
	if cached != nil && r.Fetcher.Verify != nil {
		if _, err := r.Fetcher.verify(ctx, cached.Raw); err != nil {
			cached = nil
		}
	}
	now := r.now()
	if cached != nil && !force {
		if now.Before(cached.FreshUntil.Time) {
			return &Resolved{Card: cached.Card, Source: FromCache, Entry: cached}, nil
		}
		if cached.LastErrorAt != nil && now.Sub(cached.LastErrorAt.Time) < r.errorBackoff() &&
			now.Sub(cached.CheckedAt.Time) < r.hardTTL() {
			return &Resolved{Card: cached.Card, Source: Stale, Entry: cached, Err: errors.New(cached.LastError)}, nil
		}
	}

	// Revalidate where the cached card was found; fall back to discovery
	// from the base URL when it is no longer there.
	target, etag := base, ""
	if cached != nil {
		etag = cached.ETag
		if cached.CardURL != "" {
			target = cached.CardURL
		}
	}
	f, ferr := r.Fetcher.Fetch(ctx, target, etag)
	if ferr != nil && target != base && missing(ferr) {
		etag = ""
		f, ferr = r.Fetcher.Fetch(ctx, base, etag)
	}
	if ferr != nil {
		if cached != nil && ctx.Err() == nil && staleIfError(ferr) && now.Sub(cached.CheckedAt.Time) < r.hardTTL() {
			cached.LastError, cached.LastErrorAt = ferr.Error(), &schemas.Timestamp{Time: now}
			_ = r.Store.PutCard(ctx, cached)
			return &Resolved{Card: cached.Card, Source: Stale, Entry: cached, Err: ferr}, nil
		}
		// An invalid card leaves a good cached copy alone, for when the
		// agent serves a valid one again, but it is not served as current.
		return nil, fmt.Errorf("%w for %s: %w", ErrNoCard, base, ferr)
	}

	ts := func(t time.Time) schemas.Timestamp { return schemas.Timestamp{Time: t} }
	fresh := r.defaultMaxAge()
	if f.HasMaxAge {
		fresh = f.MaxAge
	}
	if f.NotModified {
		if cached == nil || etag == "" {
			return nil, fmt.Errorf("%w for %s: %w", ErrNoCard, base, &TransportError{URL: redactRaw(f.URL), Status: http.StatusNotModified,
				Err: errors.New("answered 304 Not Modified to a request that was not conditional")})
		}
		entry := *cached
		entry.CardURL, entry.FreshUntil, entry.CheckedAt = f.URL, ts(now.Add(fresh)), ts(now)
		entry.LastError, entry.LastErrorAt = "", nil
		if f.ETag != "" {
			entry.ETag = f.ETag
		}
		if caps, ok := r.capabilities(ctx, base, &entry.Card); ok {
			entry.Capabilities = caps
		}
		r.keep(ctx, &entry, f.NoStore, true)
		return &Resolved{Card: entry.Card, Source: Revalidated, Entry: &entry}, nil
	}
	entry := &schemas.CachedCard{
		URL: base, CardURL: f.URL, Card: f.Card, Raw: f.Raw, ETag: f.ETag,
		FreshUntil: ts(now.Add(fresh)), FetchedAt: ts(now), CheckedAt: ts(now),
	}
	entry.Capabilities, _ = r.capabilities(ctx, base, &entry.Card)
	r.keep(ctx, entry, f.NoStore, cached != nil)
	return &Resolved{Card: f.Card, Source: FromAgent, Entry: entry}, nil
}

// capabilities asks the agent at base for its capabilities when card
// declares no skills (see Fetcher.Capabilities). ok is false when the
// agent could not tell, so a revalidated entry keeps what it had.
func (r *Resolver) capabilities(ctx context.Context, base string, card *schemas.AgentCard) ([]schemas.Capability, bool) {
	if len(card.Skills) > 0 {
		return nil, true
	}
	caps, err := r.Fetcher.Capabilities(ctx, base, card)
	return caps, err == nil
}

// keep stores entry; with noStore it stores nothing and forgets the
// agent's older cached card, if there was one. A store that cannot be
// written only costs a later call a fetch, so its errors are dropped.
func (r *Resolver) keep(ctx context.Context, entry *schemas.CachedCard, noStore, wasCached bool) {
	switch {
	case !noStore:
		_ = r.Store.PutCard(ctx, entry)
	case wasCached:
		_ = r.Store.DeleteCard(ctx, entry.URL)
	}
}

// staleIfError reports whether a failed fetch is the agent being
// unreachable or overloaded, when a cached card may be served instead:
// no answer, 5xx, 408 or 429. A refused address, an invalid card or any
// other answer (404: the card is gone; 401: credentials) is not.
func staleIfError(err error) bool {
	if errors.Is(err, ErrForbiddenAddress) || errors.Is(err, ErrInvalidCard) {
		return false
	}
	var te *TransportError
	if !errors.As(err, &te) {
		return false
	}
	switch {
	case te.Status == 0, te.Status >= 500,
		te.Status == http.StatusRequestTimeout, te.Status == http.StatusTooManyRequests:
		return true
	}
	return false
}

// missing reports whether a failed fetch found no card at the address.
func missing(err error) bool {
	var te *TransportError
	return errors.As(err, &te) && (te.Status == http.StatusNotFound || te.Status == http.StatusGone)
}

// canonicalBase normalises an agent base URL so that spellings of one
// agent share one cache entry: lower-case scheme and host, no fragment,
// and — unless it names a card file (.json) — no query or trailing slash,
// which CardURLs ignores anyway.
func canonicalBase(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("discovery: %q is not an absolute http(s) URL", s)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("discovery: %q is not an absolute http(s) URL", s)
	}
	u.Host = strings.ToLower(u.Host)
	u.Fragment, u.RawFragment = "", ""
	if !strings.HasSuffix(u.Path, ".json") {
		u.RawQuery, u.ForceQuery = "", false
		u.Path = strings.TrimRight(u.Path, "/")
		u.RawPath = strings.TrimRight(u.RawPath, "/")
	}
	return u.String(), nil
}

func (r *Resolver) hardTTL() time.Duration {
	if r.HardTTL > 0 {
		return r.HardTTL
	}
	return 24 * time.Hour
}

func (r *Resolver) defaultMaxAge() time.Duration {
	if r.DefaultMaxAge > 0 {
		return r.DefaultMaxAge
	}
	return 5 * time.Minute
}

func (r *Resolver) errorBackoff() time.Duration {
	if r.ErrorBackoff > 0 {
		return r.ErrorBackoff
	}
	return 10 * time.Second
}
