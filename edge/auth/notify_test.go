package auth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// jwksServer serves whatever JWKS document it is given, on 127.0.0.1.
type jwksServer struct {
	*httptest.Server
	mu   sync.Mutex
	doc  []byte
	hits int
}

func newJWKSServer(t *testing.T, doc []byte) *jwksServer {
	s := &jwksServer{doc: doc}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.hits++
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.doc)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(doc []byte) {
	s.mu.Lock()
	s.doc = doc
	s.mu.Unlock()
}

// A notification's token verifies against the published keys for its
// body, audience and lifetime only, and a rotation keeps tokens of the
// previous key valid while it is published.
func TestNotificationTokensSignAndVerifyAcrossARotation(t *testing.T) {
	ctx := context.Background()
	file, err := RotateSigningKeys(nil, "EdDSA", 2)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ParseSigningKeys(file, "https://a2abus.example")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(keys.JWKS()), `"d"`) {
		t.Fatalf("the published JWKS holds a private key: %s", keys.JWKS())
	}
	srv := newJWKSServer(t, keys.JWKS())
	v, err := NewNotificationVerifier(ctx, srv.URL+"/.well-known/jwks.json", "https://a2abus.example", nil)
	if err != nil {
		t.Fatal(err)
	}
	const hook = "https://hooks.example/a2a?x=1"
	body := []byte(`{"statusUpdate":{"taskId":"t1"}}`)
	now := time.Now()
	tok, err := keys.Sign(hook, "t1", "e1", body, now)
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(ctx, tok, body, hook)
	if err != nil {
		t.Fatal(err)
	}
	if c.TaskID != "t1" || c.EventID != "e1" || c.Issuer != "https://a2abus.example" || c.Expiry.Sub(c.IssuedAt) != NotificationTTL {
		t.Fatalf("claims %+v", c)
	}
	refused := func(what, tok string, body []byte, aud string) {
		t.Helper()
		if _, err := v.Verify(ctx, tok, body, aud); !errors.Is(err, ErrNotificationRefused) {
			t.Errorf("%s: %v, want a refusal", what, err)
		}
	}
	refused("another body", tok, []byte(`{"statusUpdate":{"taskId":"t2"}}`), hook)
	refused("another webhook", tok, body, "https://hooks.example/other")
	old, _ := keys.Sign(hook, "t1", "e1", body, now.Add(-NotificationTTL-time.Minute))
	refused("an expired token", old, body, hook)
	refused("a tampered token", tok[:len(tok)-4]+"AAAA", body, hook)
	refused("no token", "", body, hook)
	other, _ := ParseSigningKeys(file, "https://someone.else")
	forged, _ := other.Sign(hook, "t1", "e1", body, now)
	refused("another issuer", forged, body, hook)
	stranger, _ := EphemeralSigningKeys("https://a2abus.example")
	fake, _ := stranger.Sign(hook, "t1", "e1", body, now)
	refused("a key the sender does not publish", fake, body, hook)

	// Rotation: a new key signs, the old one is still published.
	rotated, err := RotateSigningKeys(file, "ES256", 2)
	if err != nil {
		t.Fatal(err)
	}
	keys2, err := ParseSigningKeys(rotated, "https://a2abus.example")
	if err != nil {
		t.Fatal(err)
	}
	srv.serve(keys2.JWKS())
	// Past the fetch rate limit (a minute), as the sender's retries of a
	// refused notification would be.
	v.keys.now = func() time.Time { return now.Add(2 * time.Minute) }
	tok2, _ := keys2.Sign(hook, "t1", "e2", body, now)
	if _, err := v.Verify(ctx, tok2, body, hook); err != nil {
		t.Fatalf("a token of the new key, after the rotation: %v", err)
	}
	if _, err := v.Verify(ctx, tok, body, hook); err != nil {
		t.Fatalf("a token of the previous key, still published: %v", err)
	}
	// A third rotation keeping two drops the first key.
	again, _ := RotateSigningKeys(rotated, "EdDSA", 2)
	if strings.Count(string(again), `"kid"`) != 2 {
		t.Fatalf("kept keys: %s", again)
	}
}

func TestNotificationSigningKeysRefuseWhatCannotSign(t *testing.T) {
	for name, doc := range map[string]string{
		"not JSON":   `nope`,
		"no keys":    `{"keys":[]}`,
		"public key": `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"a"}]}`,
		"no kid":     `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}]}`,
		"HMAC":       `{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"}]}`,
	} {
		if _, err := ParseSigningKeys([]byte(doc), "iss"); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
}

// BenchmarkNotificationSign: the cost of signing one notification, what
// the sender adds to each POST.
//
//	go test ./edge/auth -run '^$' -bench NotificationSign
func BenchmarkNotificationSign(b *testing.B) {
	for _, alg := range []string{"EdDSA", "ES256"} {
		b.Run(alg, func(b *testing.B) {
			file, err := RotateSigningKeys(nil, alg, 1)
			if err != nil {
				b.Fatal(err)
			}
			keys, err := ParseSigningKeys(file, "a2abus")
			if err != nil {
				b.Fatal(err)
			}
			body := []byte(`{"statusUpdate":{"taskId":"0e4f6b8a-7c1d-4b9e-9a57-1f2e3d4c5b6a","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`)
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := keys.Sign("https://hooks.example/a2a", "t", "e", body, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
