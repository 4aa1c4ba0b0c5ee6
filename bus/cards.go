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
// bucket, shared by every process, under schemas.CardCacheKey of the
// agent's base URL. What is fresh, stale or too old to serve is decided by
// discovery's resolver; this file only stores and reads. Writes are
// last-writer-wins: two processes refreshing one card at once both write
// what the agent told them, and the next revalidation settles any
// difference (the ETag of an older copy no longer matches).

// ErrCardNotCached is returned by GetCard when the bucket holds no card for
// the URL.
var ErrCardNotCached = errors.New("bus: card not cached")

// cardMaxValueSize bounds one entry of the card bucket; cardHeadroom is
// left below it (and below the connection's maximum payload) for the KV
// headers of a write.
const (
	cardMaxValueSize = 2 << 20
	cardHeadroom     = 4 << 10
)

// GetCard returns the cached card of the agent at baseURL and the revision
// of its entry. It returns an error matching ErrCardNotCached when the
// bucket holds no card for baseURL (or one this version cannot read), and
// one matching schemas.ErrUnavailable when the bucket cannot be read now.
func (b *Bus) GetCard(ctx context.Context, baseURL string) (*schemas.CachedCard, uint64, error) {
	e, err := b.cards.Get(ctx, schemas.CardCacheKey(baseURL))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, ErrCardNotCached
	}
	if err != nil {
		return nil, 0, errUnavailable("bus: get card", err)
	}
	var c schemas.CachedCard
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		// A value this version cannot read is as good as none: the next
		// fetch replaces it.
		return nil, 0, ErrCardNotCached
	}
	return &c, e.Revision(), nil
}

// PutCard stores a card under its URL, replacing the previous one. A card
// too large for one message is stored without its Raw copy (the parsed
// Card is what readers use); one too large even so is refused with an
// error matching schemas.ErrInvalidAgentResponse. A bucket that cannot be
// written now gives an error matching schemas.ErrUnavailable.
func (b *Bus) PutCard(ctx context.Context, c *schemas.CachedCard) error {
	val, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("bus: encode card: %w", err)
	}
	limit := min(b.nc.MaxPayload(), cardMaxValueSize) - cardHeadroom
	if int64(len(val)) > limit && len(c.Raw) > 0 {
		slim := *c
		slim.Raw = nil
		if val, err = json.Marshal(&slim); err != nil {
			return fmt.Errorf("bus: encode card: %w", err)
		}
	}
	if int64(len(val)) > limit {
		return fmt.Errorf("bus: put card of %s: %w", c.URL,
			schemas.Errorf(schemas.ErrInvalidAgentResponse, "the card is too large to cache (%d bytes, at most %d)", len(val), limit))
	}
	if _, err := b.cards.Put(ctx, schemas.CardCacheKey(c.URL), val); err != nil {
		return errUnavailable("bus: put card", err)
	}
	return nil
}

// DeleteCard forgets the card of the agent at baseURL. Deleting a card that
// is not cached is not an error.
func (b *Bus) DeleteCard(ctx context.Context, baseURL string) error {
	if err := b.cards.Delete(ctx, schemas.CardCacheKey(baseURL)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return errUnavailable("bus: delete card", err)
	}
	return nil
}
