package auth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// tokenCache holds the principals of verified tokens, keyed by the SHA-256
// of the token (the token itself is not kept), until each token's expiry
// plus the clock skew. It holds at most max entries: when full, expired
// entries go first, then arbitrary ones, down to 7/8 of max, so a flood of
// new tokens costs amortised constant time.
type tokenCache struct {
	max int
	mu  sync.RWMutex
	m   map[[sha256.Size]byte]cachedToken
}

type cachedToken struct {
	p     Principal
	until time.Time
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, m: make(map[[sha256.Size]byte]cachedToken)}
}

// get returns the principal of a token verified before and still valid at
// now.
func (c *tokenCache) get(k [sha256.Size]byte, now time.Time) (Principal, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if !ok {
		return Principal{}, false
	}
	if now.After(e.until) {
		c.mu.Lock()
		if e2, ok := c.m[k]; ok && now.After(e2.until) {
			delete(c.m, k)
		}
		c.mu.Unlock()
		return Principal{}, false
	}
	return e.p, true
}

// put remembers a verified token until until.
func (c *tokenCache) put(k [sha256.Size]byte, p Principal, until, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for k2, e := range c.m {
			if now.After(e.until) {
				delete(c.m, k2)
			}
		}
		for k2 := range c.m {
			if len(c.m) < c.max-c.max/8 {
				break
			}
			delete(c.m, k2)
		}
	}
	c.m[k] = cachedToken{p: p, until: until}
}

// len returns the number of entries (tests).
func (c *tokenCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
