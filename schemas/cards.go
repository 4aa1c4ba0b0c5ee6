package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// CachedCard is the value stored in BucketCards: one external agent's card
// as a2abus last fetched it, with what HTTP said about its freshness. Every
// process that talks to the agent shares it, so a fleet fetches a card once
// per max-age, not once per process.
type CachedCard struct {
	// URL is the agent's base URL, the source of the entry's key
	// (CardCacheKey). discovery's resolver normalises it first (lower-case
	// scheme and host; no trailing slash, query or fragment), so spellings
	// of one agent share one entry.
	URL string `json:"url"`
	// CardURL is where the card was read (after any fallback).
	CardURL string `json:"cardUrl"`
	// Card is the parsed, validated card; Raw is the body as served.
	Card AgentCard       `json:"card"`
	Raw  json.RawMessage `json:"raw,omitempty"`
	// ETag makes the next fetch conditional.
	ETag string `json:"etag,omitempty"`
	// FreshUntil is when the card must be revalidated (fetch time plus
	// max-age).
	FreshUntil Timestamp `json:"freshUntil"`
	// FetchedAt is when the card body was last read; CheckedAt when the
	// agent last answered (a 304 counts).
	FetchedAt Timestamp `json:"fetchedAt"`
	CheckedAt Timestamp `json:"checkedAt"`
	// LastError and LastErrorAt describe the last failed refresh, while the
	// card was served stale.
	LastError   string     `json:"lastError,omitempty"`
	LastErrorAt *Timestamp `json:"lastErrorAt,omitempty"`
	// Capabilities is what the agent answered at GET {endpoint}/capabilities
	// (Aleph's discovery), asked only when its card declares no skills, with
	// the card and as often: kept here so it is fresh as long as the card.
	Capabilities []Capability `json:"capabilities,omitempty"`
}

// CardCacheKey is the BucketCards key of an agent base URL: the hex of the
// first 16 bytes of its SHA-256, since URLs hold characters KV keys may
// not. It hashes the string as given: callers normalise the URL first.
func CardCacheKey(baseURL string) string {
	sum := sha256.Sum256([]byte(baseURL))
	return hex.EncodeToString(sum[:16])
}
