package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/a2abus/a2abus/schemas"
)

// Capability discovery the way Aleph asks for it (seed 004): GET
// {endpoint}/capabilities, a JSON array of capabilities named by `name`
// (the entries of LiteLLM-RS's agent_capabilities, schemas.Capability).
// It is not A2A, so not every agent serves it: a client asks only when
// the card declares no skills (nothing else says what the agent does),
// and an agent that does not answer it simply has none. The Resolver asks
// with the card and keeps the answer in the card's cache entry.

// CapabilitiesPath is where Aleph's clients, and an a2abus edge, serve an
// agent's capabilities, below its endpoint.
const CapabilitiesPath = "/capabilities"

// Capabilities asks the agent at base (an agent's base URL, as Fetch takes
// it; a card's URL is replaced by the card's first HTTP interface) for its
// capabilities, through the Fetcher's SSRF-guarded client, with the
// credentials only if the agent refuses without them. An agent that does
// not serve them (any 4xx but 408 and 429, a body that is not a JSON array
// of capabilities) has none: nil, nil. An error is returned only when the
// agent could not tell (unreachable, 5xx, 408, 429, a refused address),
// so a caller holding an earlier answer may keep it. Entries without a
// name are left out; the body is bounded by MaxBytes.
func (f *Fetcher) Capabilities(ctx context.Context, base string, card *schemas.AgentCard) ([]schemas.Capability, error) {
	u, err := capabilitiesURL(base, card)
	if err != nil {
		return nil, nil // nothing to ask: no HTTP endpoint
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout())
	defer cancel()
	hc, release := f.client()
	defer release()
	caps, err := f.capabilitiesAs(ctx, hc, u, false)
	var ae *AuthError
	if f.Credentials != nil && errors.As(err, &ae) {
		caps, err = f.capabilitiesAs(ctx, hc, u, true)
	}
	switch {
	case errors.As(err, &ae):
		return nil, nil // not for us: as good as none
	case err != nil && !staleIfError(err) && !errors.Is(err, ErrForbiddenAddress):
		return nil, nil
	}
	return caps, err
}

func (f *Fetcher) capabilitiesAs(ctx context.Context, hc *http.Client, u string, withCredentials bool) ([]schemas.Capability, error) {
	res, err := f.get(ctx, hc, u, nil, withCredentials)
	if res == nil {
		return nil, err
	}
	defer drain(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, &TransportError{URL: redactRaw(u), Status: res.StatusCode, RetryAfter: retryAfter(res),
			Err: fmt.Errorf("no capabilities here (HTTP %d %s)", res.StatusCode, http.StatusText(res.StatusCode))}
	}
	max := f.maxBytes()
	body, err := io.ReadAll(io.LimitReader(res.Body, max+1))
	if err != nil {
		return nil, &TransportError{URL: redactRaw(u), Status: res.StatusCode, Err: fmt.Errorf("reading the capabilities: %w", err)}
	}
	var caps []schemas.Capability
	if int64(len(body)) > max || json.Unmarshal(body, &caps) != nil {
		return nil, nil // too large, or not Aleph's array: none
	}
	out := caps[:0]
	for _, c := range caps {
		if c.Name != "" {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// capabilitiesURL is where the agent at base serves its capabilities:
// below base, or, when base names a card file, below the card's first
// HTTP interface (an a2abus edge's card names the agent's endpoint).
func capabilitiesURL(base string, card *schemas.AgentCard) (string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("discovery: %q is not an absolute http(s) URL", base)
	}
	if strings.HasSuffix(u.Path, ".json") {
		u = nil
		for _, ep := range Endpoints(card, schemas.BindingJSONRPC, schemas.BindingHTTPJSON) {
			if v, err := url.Parse(ep.URL); err == nil && (v.Scheme == "http" || v.Scheme == "https") && v.Host != "" {
				u = v
				break
			}
		}
		if u == nil {
			return "", errors.New("discovery: the card names no HTTP endpoint")
		}
	}
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	u.Path = strings.TrimRight(u.Path, "/") + CapabilitiesPath
	if u.RawPath != "" {
		u.RawPath = strings.TrimRight(u.RawPath, "/") + CapabilitiesPath
	}
	return u.String(), nil
}

// WithCapabilities is card with a skill per capability (the capability's
// name its id and name) when the card declares no skills of its own, so
// what reads skills (the agent list, routing by skill, a person reading
// the card) sees what the agent said it does. A card with skills is
// returned as it is.
func WithCapabilities(card schemas.AgentCard, caps []schemas.Capability) schemas.AgentCard {
	if len(card.Skills) == 0 && len(caps) > 0 {
		card.Skills = schemas.CapabilitySkills(caps)
	}
	return card
}
