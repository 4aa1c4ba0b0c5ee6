package edge

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"github.com/a2abus/a2abus/edge/auth"
	"github.com/a2abus/a2abus/schemas"
)

// Signed cards. With Config.CardKeys the edge signs every card it serves
// (edge/auth.SigningKeys.SignCard: a JWS over the card's RFC 8785 form
// without its signatures); the signature is the edge's own, as its
// security declaration is: whatever a worker registered in signatures is
// dropped (card), since it could not sign the card the edge serves.

// maxCachedCardSignatures bounds the signatures an edge keeps: far more than
// the cards it serves (each agent's public and extended card).
const maxCachedCardSignatures = 1024

// cardSignatures holds the signature of each card content the edge served
// under the current keys, so a card is signed once, not on every request:
// a card served again (every request for it, the registration refreshed
// unchanged) is a map lookup. A rotation (new keys) empties it.
type cardSignatures struct {
	mu   sync.Mutex
	keys *auth.SigningKeys
	sigs map[[sha256.Size]byte]json.RawMessage
	// since is when this edge first signed with keys: a signed card's
	// Last-Modified is no earlier (handleCard), so a client that
	// revalidates by date gets the card a rotation re-signed.
	since time.Time
}

// keysSince is when the edge first signed with the keys it signs with now
// (zero before its first signature).
func (c *cardSignatures) keysSince() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.since
}

// sign returns keys' signature of card (JSON without signatures), made
// now or earlier.
func (c *cardSignatures) sign(keys *auth.SigningKeys, card []byte) (json.RawMessage, error) {
	sum := sha256.Sum256(card)
	c.mu.Lock()
	if c.keys == keys {
		if sig, ok := c.sigs[sum]; ok {
			c.mu.Unlock()
			return sig, nil
		}
	}
	c.mu.Unlock()
	// Signed without the lock: two requests that miss at once both sign,
	// and either signature is good.
	sig, err := keys.SignCard(card)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys != keys {
		c.since = time.Now()
	}
	if c.keys != keys || len(c.sigs) >= maxCachedCardSignatures {
		c.keys, c.sigs = keys, map[[sha256.Size]byte]json.RawMessage{}
	}
	c.sigs[sum] = sig
	return sig, nil
}

// signed returns c carrying the edge's signature, or c as it is when the
// edge signs no cards. Its error is an internal one: the keys could not
// sign.
func (s *Server) signed(c schemas.AgentCard) (schemas.AgentCard, error) {
	c.Signatures = nil
	if s.cfg.CardKeys == nil {
		return c, nil
	}
	keys := s.cfg.CardKeys()
	if keys == nil {
		return c, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return c, err
	}
	sig, err := s.cardSigs.sign(keys, b)
	if err != nil {
		return c, err
	}
	c.Signatures = []json.RawMessage{sig}
	return c, nil
}

// publishedKeys is the JWKS document of /.well-known/jwks.json: the public
// keys of push notifications and of cards, one set.
func (s *Server) publishedKeys() ([]byte, error) {
	var docs [][]byte
	if f := s.cfg.NotificationKeys; f != nil {
		docs = append(docs, f())
	}
	if f := s.cfg.CardKeys; f != nil {
		if k := f(); k != nil {
			docs = append(docs, k.JWKS())
		}
	}
	if len(docs) == 1 {
		return docs[0], nil
	}
	return auth.MergeJWKS(docs...)
}
