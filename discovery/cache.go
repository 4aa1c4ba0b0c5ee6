package discovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/schemas"
)

// CardStore is where the resolver keeps cards: the A2A_CARDS bucket
// (*bus.Bus), shared by every process of a deployment.
type CardStore interface {
	GetCard(ctx context.Context, baseURL string) (*schemas.CachedCard, error)
	PutCard(ctx context.Context, c *schemas.CachedCard) error
}

// Source says where a resolved card came from.
type Source string

const (
	// FromCache: the cached card was fresh; the agent was not asked.
	FromCache Source = "cache"
	// FromAgent: the agent sent its card.
	FromAgent Source = "fetched"
	// Revalidated: the agent said the cached card is still good (304).
	Revalidated Source = "revalidated"
	// Stale: the agent could not be reached; the cached card, younger than
	// the hard TTL, is served anyway (stale-if-error).
	Stale Source = "stale"
)

// Resolved is a card and how it was obtained.
type Resolved struct {
	Card   schemas.AgentCard
	Source Source
	// Entry is the cache entry as stored after this resolution.
	Entry *schemas.CachedCard
	// Err is the error of the failed refresh when Source is Stale.
	Err error
}

// ErrNoCard is wrapped when there is no card to serve: the agent could not
// be reached (or served an invalid card) and no usable cached copy exists.
var ErrNoCard = errors.New("no usable agent card")

// Resolver resolves agent cards through the shared cache: a fresh cached
// card is served without a request; a stale one is revalidated with a
// conditional GET; when the agent cannot be reached the cached card is
// served until HardTTL after it was last confirmed; an invalid card is
// never cached (nor does it replace a good cached one); Cache-Control
// no-store is honoured.
type Resolver struct {
	Fetcher *Fetcher
	Store   CardStore
	// DefaultMaxAge is the freshness of a card served without max-age.
	// Default 5 minutes.
	DefaultMaxAge time.Duration
	// HardTTL is how long after the agent last answered its cached card may
	// still be served while it is unreachable. Default 24h.
	HardTTL time.Duration
	// Now is the clock; default time.Now (tests move it).
	Now func() time.Time
}

func (r *Resolver) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Resolve returns the card of the agent at baseURL, from the cache when it
// is fresh.
func (r *Resolver) Resolve(ctx context.Context, baseURL string) (*Resolved, error) {
	return r.resolve(ctx, baseURL, false)
}

// Refresh asks the agent even if the cached card is fresh (conditionally,
// when there is one): the periodic health check.
func (r *Resolver) Refresh(ctx context.Context, baseURL string) (*Resolved, error) {
	return r.resolve(ctx, baseURL, true)
}

func (r *Resolver) resolve(ctx context.Context, baseURL string, force bool) (*Resolved, error) {
	cached, err := r.Store.GetCard(ctx, baseURL)
	if err != nil && !errors.Is(err, bus.ErrCardNotCached) {
		// The cache is down: go to the agent, and do not store.
		cached = nil
	}
	now := r.now()
	if cached != nil && !force && now.Before(cached.FreshUntil.Time) {
		return &Resolved{Card: cached.Card, Source: FromCache, Entry: cached}, nil
	}
	etag := ""
	if cached != nil {
		etag = cached.ETag
	}
	f, ferr := r.Fetcher.Fetch(ctx, baseURL, etag)
	if ferr != nil {
		if cached != nil && !errors.Is(ferr, ErrInvalidCard) && now.Sub(cached.CheckedAt.Time) < r.hardTTL() {
			cached.LastError, cached.LastErrorAt = ferr.Error(), &schemas.Timestamp{Time: now}
			_ = r.Store.PutCard(ctx, cached)
			return &Resolved{Card: cached.Card, Source: Stale, Entry: cached, Err: ferr}, nil
		}
		if cached != nil && errors.Is(ferr, ErrInvalidCard) {
			// The agent now serves garbage: keep the good copy in the cache
			// for later, but say so rather than serve it as current.
			return nil, fmt.Errorf("%w: %w", ErrNoCard, ferr)
		}
		return nil, fmt.Errorf("%w: %w", ErrNoCard, ferr)
	}
	maxAge := f.MaxAge
	if maxAge <= 0 {
		maxAge = r.defaultMaxAge()
	}
	ts := func(t time.Time) schemas.Timestamp { return schemas.Timestamp{Time: t} }
	if f.NotModified && cached != nil {
		cached.FreshUntil, cached.CheckedAt = ts(now.Add(maxAge)), ts(now)
		cached.LastError, cached.LastErrorAt = "", nil
		if f.ETag != "" {
			cached.ETag = f.ETag
		}
		_ = r.Store.PutCard(ctx, cached)
		return &Resolved{Card: cached.Card, Source: Revalidated, Entry: cached}, nil
	}
	if f.NotModified {
		// A 304 to a request that was not conditional: the agent is
		// confused. Fetch unconditionally once.
		if f, ferr = r.Fetcher.Fetch(ctx, baseURL, ""); ferr != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoCard, ferr)
		}
	}
	entry := &schemas.CachedCard{
		URL: baseURL, CardURL: f.URL, Card: f.Card, Raw: f.Raw, ETag: f.ETag,
		FreshUntil: ts(now.Add(maxAge)), FetchedAt: ts(now), CheckedAt: ts(now),
	}
	if !f.NoStore {
		_ = r.Store.PutCard(ctx, entry)
	}
	return &Resolved{Card: f.Card, Source: FromAgent, Entry: entry}, nil
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
