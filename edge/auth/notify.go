package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejson "github.com/go-jose/go-jose/v4/json"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Signed push notifications. Every notification a2abus posts to a webhook
// carries a JWT (compact JWS) signed with the deployment's notification
// key: iss (the deployment), aud (the webhook URL), iat, exp (short), jti
// (the event id, the same on every redelivery), taskId and bodySha256
// (the base64url SHA-256 of the body, so the token vouches for this body
// only). The keys are a JWK set with private keys (Ed25519 or P-256): the
// first signs, the others are still published, so a rotation puts a new
// key first and keeps the old one until tokens signed with it have
// expired. Every edge serves the public half at /.well-known/jwks.json;
// a receiver verifies with NotificationVerifier.

// NotificationTTL is how long a notification's token is valid after it
// was signed: long enough for clock skew and a slow receiver, short enough
// that a captured one is soon useless (its jti, the event id, lets a
// receiver refuse a replay within it).
const NotificationTTL = 5 * time.Minute

// NotificationClaims are what a notification's token says.
type NotificationClaims struct {
	Issuer string
	// Audience is the webhook URL the notification was signed for.
	Audience string
	// EventID is the jti: the id of the notification's event.
	EventID  string
	TaskID   string
	IssuedAt time.Time
	Expiry   time.Time
	// BodySHA256 is the base64url (unpadded) SHA-256 of the body.
	BodySHA256 string
}

// notificationClaims is the token's payload beyond the registered claims.
type notificationClaims struct {
	TaskID     string `json:"taskId"`
	BodySHA256 string `json:"bodySha256"`
}

// BodyHash is the bodySha256 claim of a body.
func BodyHash(body []byte) string {
	sum := sha256.Sum256(body)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// SigningKeys sign notifications and agent cards (SignCard) with the
// first of a set of private keys and publish the public half of all of
// them. Immutable: a rotation loads a new one.
type SigningKeys struct {
	issuer     string
	kid        string
	signer     jose.Signer // notification tokens: typ JWT
	cardSigner jose.Signer // card signatures: typ JOSE (A2A §8.4.2)
	public     []byte      // the JWKS document
}

// MaxSigningKeys bounds a key file: the current key and the ones kept for
// the overlap of rotations.
const MaxSigningKeys = 8

// ParseSigningKeys reads a JWK set of private signing keys (Ed25519 "OKP"
// or P-256 "EC"; each with a kid, unique); the first signs.
func ParseSigningKeys(data []byte, issuer string) (*SigningKeys, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("%w: signing keys: not a JWK set: %v", ErrInvalidConfig, err)
	}
	if len(set.Keys) == 0 || len(set.Keys) > MaxSigningKeys {
		return nil, fmt.Errorf("%w: signing keys: %d keys; 1 to %d expected", ErrInvalidConfig, len(set.Keys), MaxSigningKeys)
	}
	keys := make([]jose.JSONWebKey, len(set.Keys))
	seen := map[string]bool{}
	for i, raw := range set.Keys {
		k := &keys[i]
		if err := k.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("%w: signing key %d: %v", ErrInvalidConfig, i, err)
		}
		alg, err := signingAlgorithm(k.Key)
		if err != nil {
			return nil, fmt.Errorf("%w: signing key %d (%q): %v", ErrInvalidConfig, i, k.KeyID, err)
		}
		switch {
		case k.KeyID == "":
			return nil, fmt.Errorf("%w: signing key %d has no kid", ErrInvalidConfig, i)
		case seen[k.KeyID]:
			return nil, fmt.Errorf("%w: signing keys: kid %q is used twice", ErrInvalidConfig, k.KeyID)
		case k.Algorithm != "" && k.Algorithm != string(alg):
			return nil, fmt.Errorf("%w: signing key %q: alg %q does not fit the key (%s)", ErrInvalidConfig, k.KeyID, k.Algorithm, alg)
		}
		seen[k.KeyID] = true
		k.Algorithm, k.Use = string(alg), "sig"
	}
	return newSigningKeys(keys, issuer)
}

// EphemeralSigningKeys are one Ed25519 key made now and kept in memory:
// for a single process (serve) started without a key file. Receivers
// must fetch the JWKS again after each restart.
func EphemeralSigningKeys(issuer string) (*SigningKeys, error) {
	k, err := NewSigningKey("EdDSA")
	if err != nil {
		return nil, err
	}
	return newSigningKeys([]jose.JSONWebKey{k}, issuer)
}

func newSigningKeys(keys []jose.JSONWebKey, issuer string) (*SigningKeys, error) {
	if issuer == "" {
		return nil, fmt.Errorf("%w: signing keys: an issuer is required", ErrInvalidConfig)
	}
	cur := keys[0]
	key := jose.SigningKey{Algorithm: jose.SignatureAlgorithm(cur.Algorithm), Key: cur}
	signer, err := jose.NewSigner(key, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, fmt.Errorf("notification signing key %q: %w", cur.KeyID, err)
	}
	cardSigner, err := jose.NewSigner(key, (&jose.SignerOptions{}).WithType("JOSE"))
	if err != nil {
		return nil, fmt.Errorf("card signing key %q: %w", cur.KeyID, err)
	}
	pub := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, len(keys))}
	for i, k := range keys {
		pub.Keys[i] = k.Public()
	}
	doc, err := json.Marshal(pub)
	if err != nil {
		return nil, err
	}
	return &SigningKeys{issuer: issuer, kid: cur.KeyID, signer: signer, cardSigner: cardSigner, public: doc}, nil
}

// signingAlgorithm is the JWS algorithm of a private key a2abus signs
// with, or why the key is not one.
func signingAlgorithm(key any) (jose.SignatureAlgorithm, error) {
	switch k := key.(type) {
	case ed25519.PrivateKey:
		return jose.EdDSA, nil
	case *ecdsa.PrivateKey:
		if k.Curve == elliptic.P256() {
			return jose.ES256, nil
		}
		return "", errors.New("an EC key must be on P-256 (ES256)")
	case ed25519.PublicKey, *ecdsa.PublicKey:
		return "", errors.New("a public key; the file needs the private key")
	}
	return "", errors.New("not an Ed25519 (OKP) or P-256 (EC) key")
}

// NewSigningKey makes a private key for alg ("EdDSA" or "ES256") with its
// RFC 7638 thumbprint as kid.
func NewSigningKey(alg string) (jose.JSONWebKey, error) {
	var key crypto.Signer
	var err error
	switch alg {
	case "EdDSA", "":
		_, key, err = ed25519.GenerateKey(rand.Reader)
		alg = "EdDSA"
	case "ES256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		return jose.JSONWebKey{}, fmt.Errorf("%w: signing algorithm %q: use EdDSA or ES256", ErrInvalidConfig, alg)
	}
	if err != nil {
		return jose.JSONWebKey{}, err
	}
	k := jose.JSONWebKey{Key: key, Algorithm: alg, Use: "sig"}
	pub := k.Public()
	tp, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return jose.JSONWebKey{}, err
	}
	k.KeyID = base64.RawURLEncoding.EncodeToString(tp)
	return k, nil
}

// RotateSigningKeys returns the key file data with a new key for alg
// first (it signs from the next load) and at most keep keys in all (the
// oldest dropped). data may be empty: a new file.
func RotateSigningKeys(data []byte, alg string, keep int) ([]byte, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &set); err != nil {
			return nil, fmt.Errorf("%w: signing keys: not a JWK set: %v", ErrInvalidConfig, err)
		}
	}
	k, err := NewSigningKey(alg)
	if err != nil {
		return nil, err
	}
	raw, err := k.MarshalJSON()
	if err != nil {
		return nil, err
	}
	keep = min(max(keep, 1), MaxSigningKeys)
	set.Keys = append([]json.RawMessage{raw}, set.Keys...)
	if len(set.Keys) > keep {
		set.Keys = set.Keys[:keep]
	}
	return json.MarshalIndent(set, "", "  ")
}

// Sign returns the token of a notification of task taskID, event eventID,
// with body, to the webhook at audience.
func (k *SigningKeys) Sign(audience, taskID, eventID string, body []byte, now time.Time) (string, error) {
	return jwt.Signed(k.signer).Claims(jwt.Claims{
		Issuer:   k.issuer,
		Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now),
		Expiry:   jwt.NewNumericDate(now.Add(NotificationTTL)),
		ID:       eventID,
	}).Claims(notificationClaims{TaskID: taskID, BodySHA256: BodyHash(body)}).Serialize()
}

// JWKS is the public JWK set document (application/json).
func (k *SigningKeys) JWKS() []byte { return k.public }

// Issuer is the iss of the tokens.
func (k *SigningKeys) Issuer() string { return k.issuer }

// NotificationVerifier checks the tokens of notifications a webhook
// receives against the sender's JWKS, fetched on first need and again
// when a token names a key not held (a rotation), at most once per
// minute.
type NotificationVerifier struct {
	keys   *keySet
	issuer string
	skew   time.Duration
	now    func() time.Time
}

// NewNotificationVerifier verifies tokens of issuer (empty: any issuer),
// with the keys at jwksURL (https, or http on a loopback host), fetched
// with client (nil: a client with DefaultFetchTimeout); a redirect is
// followed only to https, or http on a loopback host, whatever client's
// own rule. ctx bounds the fetches.
func NewNotificationVerifier(ctx context.Context, jwksURL, issuer string, client *http.Client) (*NotificationVerifier, error) {
	if err := checkFetchURL(jwksURL); err != nil {
		return nil, fmt.Errorf("%w: JWKS URL: %v", ErrInvalidConfig, err)
	}
	if client == nil {
		client = &http.Client{Timeout: DefaultFetchTimeout}
	}
	return &NotificationVerifier{
		keys:   &keySet{ctx: ctx, client: keyFetchClient(client), jwksURL: jwksURL, minInterval: time.Minute, now: time.Now},
		issuer: issuer, skew: DefaultClockSkew, now: time.Now,
	}, nil
}

// ErrNotificationRefused is wrapped by every refusal of Verify.
var ErrNotificationRefused = errors.New("notification refused")

// Verify checks a notification's token: its signature against the JWKS,
// its issuer, that it was made for audience (the webhook's URL as
// registered) and is within its lifetime, and that body is the body it
// was signed with. The claims say which task and event it is of; the
// receiver checks that the task is one it expects.
func (v *NotificationVerifier) Verify(ctx context.Context, token string, body []byte, audience string) (NotificationClaims, error) {
	refuse := func(format string, args ...any) (NotificationClaims, error) {
		return NotificationClaims{}, fmt.Errorf("%w: %s", ErrNotificationRefused, fmt.Sprintf(format, args...))
	}
	if token == "" {
		return refuse("no token")
	}
	sig, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256})
	if err != nil {
		return refuse("not a JWT signed with EdDSA or ES256")
	}
	payload, err := v.keys.verify(ctx, sig)
	if errors.Is(err, errNoKeyVerifies) {
		return refuse("the signature does not verify with the sender's keys")
	}
	if err != nil {
		return refuse("%v", err)
	}
	var std jwt.Claims
	var extra notificationClaims
	if josejson.Unmarshal(payload, &std) != nil || josejson.Unmarshal(payload, &extra) != nil {
		return refuse("the claims are not a JSON object of JWT claims")
	}
	if std.Expiry == nil || std.IssuedAt == nil {
		return refuse("the token has no exp or iat")
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: v.issuer, AnyAudience: jwt.Audience{audience}, Time: v.now()}, v.skew); err != nil {
		return refuse("%v", err)
	}
	if subtle.ConstantTimeCompare([]byte(extra.BodySHA256), []byte(BodyHash(body))) != 1 {
		return refuse("the body is not the one the token was signed for")
	}
	if std.ID == "" || extra.TaskID == "" {
		return refuse("the token names no event (jti) or task (taskId)")
	}
	return NotificationClaims{Issuer: std.Issuer, Audience: audience, EventID: std.ID, TaskID: extra.TaskID,
		IssuedAt: std.IssuedAt.Time(), Expiry: std.Expiry.Time(), BodySHA256: extra.BodySHA256}, nil
}
