package auth

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// keyStore holds the accepted API keys as SHA-256 digests, never in clear.
type keyStore struct {
	entries []keyEntry
}

type keyEntry struct {
	sum       [sha256.Size]byte
	principal Principal
}

// newKeyStore checks keys and keeps their digests. Errors name a key by
// its index only.
func newKeyStore(keys []APIKey, admins map[string]bool) (*keyStore, error) {
	ks := &keyStore{entries: make([]keyEntry, 0, len(keys))}
	seen := map[[sha256.Size]byte]int{}
	for i, k := range keys {
		switch {
		case len(k.Key) < MinAPIKeyLength:
			return nil, fmt.Errorf("%w: APIKeys[%d] (principal %q): a key must have at least %d bytes", ErrInvalidConfig, i, k.Principal, MinAPIKeyLength)
		case strings.IndexFunc(k.Key, notKeyRune) >= 0:
			return nil, fmt.Errorf("%w: APIKeys[%d] (principal %q): a key is printable ASCII without spaces", ErrInvalidConfig, i, k.Principal)
		case k.Principal == "" || strings.IndexFunc(k.Principal, unicode.IsControl) >= 0:
			return nil, fmt.Errorf("%w: APIKeys[%d]: the principal must be a non-empty name without control characters", ErrInvalidConfig, i)
		case strings.HasPrefix(k.Principal, PrefixJWT) || strings.HasPrefix(k.Principal, PrefixCert):
			return nil, fmt.Errorf("%w: APIKeys[%d] (principal %q): names starting with %q or %q are those of JWT and client certificate principals; name the key's principal otherwise", ErrInvalidConfig, i, k.Principal, PrefixJWT, PrefixCert)
		}
		sum := sha256.Sum256([]byte(k.Key))
		if j, dup := seen[sum]; dup {
			return nil, fmt.Errorf("%w: APIKeys[%d] (principal %q) repeats the key of APIKeys[%d]", ErrInvalidConfig, i, k.Principal, j)
		}
		seen[sum] = i
		p := Principal{Name: k.Principal, Scheme: SchemeAPIKey, Admin: k.Admin || admins[k.Principal]}
		if len(k.Tenants) > 0 {
			p.Tenant, p.Tenants = k.Tenants[0], append([]string(nil), k.Tenants[1:]...)
		}
		ks.entries = append(ks.entries, keyEntry{sum: sum, principal: p})
	}
	return ks, nil
}

// notKeyRune is true for what an API key may not contain: anything but
// printable ASCII without spaces (what a header value carries unchanged).
func notKeyRune(r rune) bool { return r <= ' ' || r > '~' }

// lookup returns the principal of the key whose digest is sum. It compares
// sum with every digest in constant time, whichever matches (or none), so
// the time taken says nothing about the keys held.
func (ks *keyStore) lookup(sum [sha256.Size]byte) (Principal, bool) {
	found := -1
	for i := range ks.entries {
		eq := subtle.ConstantTimeCompare(ks.entries[i].sum[:], sum[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return Principal{}, false
	}
	return ks.entries[found].principal, true
}

// ParseAPIKeys reads API keys in the form of the A2ABUS_API_KEYS
// environment variable: "key=principal,key2=principal2". Spaces around
// entries are ignored, and so are empty entries. A key may contain "="
// (base64 padding): the principal is what follows the last "=".
//
// It returns an error wrapping ErrInvalidConfig for an entry without a key
// or principal, naming the entry by its position, never its content.
func ParseAPIKeys(s string) ([]APIKey, error) {
	var keys []APIKey
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		at := strings.LastIndexByte(entry, '=')
		if at < 0 {
			return nil, fmt.Errorf("%w: API keys entry %d: want key=principal", ErrInvalidConfig, i+1)
		}
		key, principal := strings.TrimSpace(entry[:at]), strings.TrimSpace(entry[at+1:])
		if key == "" || principal == "" {
			return nil, fmt.Errorf("%w: API keys entry %d: want key=principal, both non-empty", ErrInvalidConfig, i+1)
		}
		keys = append(keys, APIKey{Key: key, Principal: principal})
	}
	return keys, nil
}

// ReadAPIKeys reads API keys, one per line: "key principal", then
// optionally "admin" for an admin and "tenants=t1,t2" for the tenants the
// principal may act in (the first by default). Blank lines and lines starting with
// "#" are skipped, and so is a "#" field and what follows it.
//
// It returns an error wrapping ErrInvalidConfig for a malformed line,
// naming the line by its number, never its content.
func ReadAPIKeys(r io.Reader) ([]APIKey, error) {
	var keys []APIKey
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		for i, f := range fields {
			if strings.HasPrefix(f, "#") {
				fields = fields[:i]
				break
			}
		}
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 2 {
			return nil, fmt.Errorf("%w: line %d: want \"key principal [admin] [tenants=t1,t2]\"", ErrInvalidConfig, n)
		}
		k := APIKey{Key: fields[0], Principal: fields[1]}
		for _, f := range fields[2:] {
			switch t, isTenants := strings.CutPrefix(f, "tenants="); {
			case f == "admin" && !k.Admin:
				k.Admin = true
			case isTenants && k.Tenants == nil && t != "":
				k.Tenants = strings.Split(t, ",")
			default:
				return nil, fmt.Errorf("%w: line %d: want \"key principal [admin] [tenants=t1,t2]\"", ErrInvalidConfig, n)
			}
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return keys, nil
}
