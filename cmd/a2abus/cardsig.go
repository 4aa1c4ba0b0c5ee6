package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/a2abus/a2abus/discovery"
	"github.com/a2abus/a2abus/edge/auth"
)

// What a process believes of external agents' card signatures (A2A §8.4):
// the operator's trusted keys (--card-trust-keys, --card-trust-jwks-url)
// and whether a card must be signed (--card-require-signed). The edge's
// own signing key is --card-keys (prepare, edgeConfig).

// cardTrust makes the process's card verifier (p.cardVerify) from
// Outbound.CardTrust, for its remote agents, and returns the pinned keys
// it reads, re-read when their file changes (nil when none are pinned).
// Without trusted keys it makes none, and cards are not checked.
func (p *process) cardTrust(ctx context.Context) (*reloaded[auth.CardKeys], error) {
	v, pinned, err := newCardVerifier(ctx, p.cfg.Outbound.CardTrust, p.outboundURL)
	if err != nil || v == nil {
		return nil, err
	}
	p.cardVerify = v
	return pinned, nil
}

// newCardVerifier is the verifier of t, nil when t names no keys, and the
// pinned keys it reads. A JWKS URL must be one the outbound policy
// (outbound) lets this process reach, and is fetched through its guard.
func newCardVerifier(ctx context.Context, t CardTrustConfig, outbound func(what, raw string) (discovery.Policy, error)) (*auth.CardVerifier, *reloaded[auth.CardKeys], error) {
	if t.KeysFile == "" && t.JWKSURL == "" {
		if t.RequireSigned {
			return nil, nil, errors.New("requiring signed cards needs the keys they must be signed with: --card-trust-keys FILE or --card-trust-jwks-url URL")
		}
		return nil, nil, nil
	}
	trust := auth.CardTrust{JWKSURL: t.JWKSURL, RequireSigned: t.RequireSigned}
	var pinned *reloaded[auth.CardKeys]
	if t.KeysFile != "" {
		var err error
		if pinned, err = loadReloaded(t.KeysFile, "card trust keys", loadCardTrustKeys); err != nil {
			return nil, nil, err
		}
		trust.Keys = pinned.get
	}
	if t.JWKSURL != "" {
		pol, err := outbound("card trust JWKS URL", t.JWKSURL)
		if err != nil {
			return nil, nil, err
		}
		trust.Client = pol.Client(auth.DefaultFetchTimeout)
	}
	v, err := auth.NewCardVerifier(ctx, trust)
	if err != nil {
		return nil, nil, err
	}
	return v, pinned, nil
}

// cardRefused reports whether err is a card refused for its signatures:
// an agent that must not be called, with or without its card.
func cardRefused(err error) bool { return errors.Is(err, auth.ErrCardRefused) }

// signatureLine says how a fetched card's signatures stood, for the card
// command: verified by which key, or not checked (a card checked and
// signed either verified or was refused), or none.
func signatureLine(f *discovery.Fetched) string {
	switch {
	case f.SignedBy != "":
		return fmt.Sprintf("verified (kid %s)", f.SignedBy)
	case len(f.Card.Signatures) > 0:
		return fmt.Sprintf("%d, not checked (give --card-trust-keys FILE or --card-trust-jwks-url URL)", len(f.Card.Signatures))
	}
	return "none"
}
