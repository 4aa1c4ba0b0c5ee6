package edge

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2abus/a2abus/bus/tracing"
	"github.com/a2abus/a2abus/schemas"
)

// Trust levels, Aleph's way: every call gets a level from where it comes
// from — its source network, its principal or tenant, its client
// certificate's identity (a cert: principal) — by the first rule of the
// policy that matches, and the level decides what the call may do. The
// level is decided once per call by the admitTrust interceptor of the
// service's chain, so no binding or dialect decides it for itself, and it
// is recorded on the task a call creates (agents read it), in the call's
// log line, its span and the metrics.

// The default levels' names. A policy may name its levels anything; these
// are the ones its default rules give.
const (
	TrustLocal     = "local"
	TrustPrivate   = "private"
	TrustPublic    = "public"
	TrustUntrusted = "untrusted"
)

// TrustPolicy maps each call to a trust level and says what each level
// may do. The zero policy is the defaults: loopback sources are local,
// private ranges private, everything else public; nothing is untrusted
// unless a rule says so, and an untrusted call is refused.
type TrustPolicy struct {
	// Rules are tried in order, before the default rules; the first that
	// matches gives the level.
	Rules []TrustRule
	// TrustedProxies are the peers whose X-Forwarded-For (else Forwarded)
	// header names the source: the nearest address in it that is not
	// itself a trusted proxy. Every other peer is the source itself,
	// whatever it sends.
	TrustedProxies []netip.Prefix
	// Levels says what each level may do; a level it does not name may
	// do everything, except TrustUntrusted, refused unless named.
	Levels map[string]TrustLevel
}

// TrustRule gives Level to a call that matches every criterion it sets:
// its source is in one of Sources, its principal (as the edge names it:
// an API key's name, jwt:ISSUER#SUB, cert:NAME) one of Principals, its
// tenant one of Tenants. A rule that sets none matches every call.
type TrustRule struct {
	Level      string
	Sources    []netip.Prefix
	Principals []string
	Tenants    []string
}

// TrustLevel is what the calls of one level may do.
type TrustLevel struct {
	// Refuse refuses every call of the level (the authorization error on
	// every binding).
	Refuse bool
	// Agents, if set, are the only agents the level may call.
	Agents []string
	// Audit records every call of the level in the audit record
	// (audit.go): before it runs, refusing it if that record cannot be
	// stored, and its outcome after. A level Levels does not name is
	// audited if it is TrustPublic ("Public: every action audited");
	// a level it names is audited only if this says so.
	Audit bool
}

// defaultTrustRules follow the policy's own rules.
var defaultTrustRules = []TrustRule{
	{Level: TrustLocal, Sources: prefixes("127.0.0.0/8", "::1/128")},
	{Level: TrustPrivate, Sources: prefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "169.254.0.0/16", "fe80::/10")},
	{Level: TrustPublic},
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// matches reports whether the rule gives its level to a call from src by
// who.
func (r *TrustRule) matches(src netip.Addr, who caller) bool {
	if len(r.Sources) > 0 && !slices.ContainsFunc(r.Sources, func(p netip.Prefix) bool { return src.IsValid() && p.Contains(src) }) {
		return false
	}
	if len(r.Principals) > 0 && !slices.Contains(r.Principals, who.principal) {
		return false
	}
	if len(r.Tenants) > 0 && !slices.Contains(r.Tenants, who.tenant) {
		return false
	}
	return true
}

// level is the level of a call from src by who.
func (p *TrustPolicy) level(src netip.Addr, who caller) string {
	for i := range p.Rules {
		if p.Rules[i].matches(src, who) {
			return p.Rules[i].Level
		}
	}
	for i := range defaultTrustRules {
		if defaultTrustRules[i].matches(src, who) {
			return defaultTrustRules[i].Level
		}
	}
	return TrustPublic
}

// of is what level may do.
func (p *TrustPolicy) of(level string) TrustLevel {
	if l, ok := p.Levels[level]; ok {
		return l
	}
	return TrustLevel{Refuse: level == TrustUntrusted, Audit: level == TrustPublic}
}

// source is the address a request comes from as the policy sees it: its
// peer's, or, from a trusted proxy, the nearest address its forwarding
// headers name that is not a trusted proxy too.
func (p *TrustPolicy) source(r *http.Request) netip.Addr {
	peer := peerAddr(r)
	if !p.trustedProxy(peer) {
		return peer
	}
	hops := forwardedFor(r.Header)
	for i := len(hops) - 1; i >= 0; i-- {
		if !p.trustedProxy(hops[i]) {
			return hops[i]
		}
	}
	return peer
}

func (p *TrustPolicy) trustedProxy(a netip.Addr) bool {
	return a.IsValid() && slices.ContainsFunc(p.TrustedProxies, func(pr netip.Prefix) bool { return pr.Contains(a) })
}

// peerAddr is r's peer's IP address (the zero address if it has none).
func peerAddr(r *http.Request) netip.Addr {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// forwardedFor is the chain of client addresses a request's proxies
// named, nearest the client first: X-Forwarded-For's, else the for=
// parameters of Forwarded (RFC 7239). An entry that is not an address
// (an obfuscated identifier, "unknown") ends the chain there: what came
// before it cannot be placed.
func forwardedFor(h http.Header) []netip.Addr {
	var out []netip.Addr
	add := func(s string) bool {
		s = strings.Trim(strings.TrimSpace(s), `"`)
		if ap, err := netip.ParseAddrPort(s); err == nil {
			out = append(out, ap.Addr().Unmap())
			return true
		}
		if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
			out = append(out, a.Unmap())
			return true
		}
		out = out[:0]
		return false
	}
	if xff := h.Values("X-Forwarded-For"); len(xff) > 0 {
		for _, v := range xff {
			for _, s := range strings.Split(v, ",") {
				add(s)
			}
		}
		return out
	}
	for _, v := range h.Values("Forwarded") {
		for _, elem := range strings.Split(v, ",") {
			for _, pair := range strings.Split(elem, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(k, "for") {
					add(val)
				}
			}
		}
	}
	return out
}

// admitTrust is the interceptor that gives each call its trust level and
// refuses what the level may not do: every call of a refused level
// (untrusted), and a call of an agent the level's list leaves out.
func (s *Server) admitTrust(ctx context.Context, inv *invocation, next invoker) (any, error) {
	c := inv.call
	p := &s.cfg.Trust
	c.trust = p.level(c.source, c.caller)
	if tracing.Enabled() {
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("a2abus.trust.level", c.trust))
	}
	s.m.trustCalls.Inc(c.trust)
	l := p.of(c.trust)
	c.audited = l.Audit
	var refused error
	switch {
	case l.Refuse:
		s.m.trustRefused.Inc(c.trust, "level")
		refused = schemas.Errorf(schemas.ErrPermissionDenied, "calls of trust level %q are refused here", c.trust)
	case len(l.Agents) > 0 && !slices.Contains(l.Agents, c.agent):
		s.m.trustRefused.Inc(c.trust, "agent")
		refused = schemas.Errorf(schemas.ErrPermissionDenied, "trust level %q may not call agent %q", c.trust, c.agent)
	default:
		return next(ctx, inv)
	}
	if c.audited {
		// Refused either way: a record that cannot be stored is only
		// logged and counted.
		s.auditAfter(ctx, inv, schemas.AuditRefused, refused)
	}
	return nil, refused
}
