package auth

import (
	"net/http"
	"testing"
)

// BenchmarkAuthenticate measures the hot path of each scheme: an API key
// (among 100), and a JWT already verified once (served from the cache),
// next to the cost of verifying a JWT the cache does not hold:
//
//	go test -run '^$' -bench Authenticate -benchmem ./edge/auth/
func BenchmarkAuthenticate(b *testing.B) {
	keys := make([]APIKey, 100)
	for i := range keys {
		keys[i] = APIKey{Key: "bench-key-0123456789-" + string(rune('A'+i%26)) + string(rune('a'+i/26)), Principal: "p"}
	}
	b.Run("anonymous", func(b *testing.B) {
		a := newAuth(b, Config{}, nil)
		benchAuthenticate(b, a, request())
	})
	b.Run("apiKey-bearer", func(b *testing.B) {
		a := newAuth(b, Config{APIKeys: keys}, nil)
		benchAuthenticate(b, a, request(bearer(keys[99].Key)...))
	})
	b.Run("apiKey-header", func(b *testing.B) {
		a := newAuth(b, Config{APIKeys: keys}, nil)
		benchAuthenticate(b, a, request("X-API-Key", keys[99].Key))
	})
	for _, alg := range []string{"ES256", "RS256"} {
		k := ecKey(b, "ec")
		if alg == "RS256" {
			k = rsaKey(b, "rsa")
		}
		is := newTestIssuer(b, k)
		clock := newFakeClock()
		a := newAuth(b, Config{JWT: &JWTConfig{Issuer: is.url(), Audience: []string{testAudience}}}, clock)
		tok := sign(b, k, claims(is.url(), clock.Now(), set("tenant", "acme")))
		b.Run("jwt-"+alg+"-cached", func(b *testing.B) {
			benchAuthenticate(b, a, request(bearer(tok)...))
		})
		b.Run("jwt-"+alg+"-cached-parallel", func(b *testing.B) {
			r := request(bearer(tok)...)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := a.Authenticate(r); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		b.Run("jwt-"+alg+"-verify", func(b *testing.B) {
			ctx, now := b.Context(), clock.Now()
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := a.jwt.verify(ctx, tok, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchAuthenticate(b *testing.B, a *Authenticator, r *http.Request) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Authenticate(r); err != nil {
			b.Fatal(err)
		}
	}
}
