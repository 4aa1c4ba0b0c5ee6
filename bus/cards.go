package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// The card cache store: discovered external agent cards in the A2A_CARDS
// bucket, shared by every process. What is fresh, stale or too old to serve
// is decided by discovery's resolver; this file only stores and reads.

// ErrCardNotCached is returned by GetCard when the bucket holds no card for
// the URL.
var ErrCardNotCached = errors.New("bus: card not cached")

// GetCard returns the cached card of the agent at baseURL, or an error
// matching ErrCardNotCached.
func (b *Bus) GetCard(ctx context.Context, baseURL string) (*schemas.CachedCard, error) {
	e, err := b.cards.Get(ctx, schemas.CardCacheKey(baseURL))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, ErrCardNotCached
	}
	if err != nil {
		return nil, errUnavailable("bus: get card", err)
	}
	var c schemas.CachedCard
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		// A value this version cannot read is as good as none.
		return nil, ErrCardNotCached
	}
	return &c, nil
}

// PutCard stores a card (replacing the previous one of its URL).
func (b *Bus) PutCard(ctx context.Context, c *schemas.CachedCard) error {
	val, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("bus: encode card: %w", err)
	}
	if _, err := b.cards.Put(ctx, schemas.CardCacheKey(c.URL), val); err != nil {
		return errUnavailable("bus: put card", err)
	}
	return nil
}

// DeleteCard forgets the card of the agent at baseURL.
func (b *Bus) DeleteCard(ctx context.Context, baseURL string) error {
	if err := b.cards.Delete(ctx, schemas.CardCacheKey(baseURL)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return errUnavailable("bus: delete card", err)
	}
	return nil
}
