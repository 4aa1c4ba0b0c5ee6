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
// policy that matches, and the level decides what the call may do: which
// agents and skills it may call, and the limits it is held to. The level
// is decided once per call, by the front door's admitCaller right after
// authentication (every door carrying A2A calls makes it: serve and the
// in-process door), because the level's rate and body bound apply there,
// before anything is decoded; it is decided again only when the call
// moves to another tenant and a rule names tenants (moveToTenant). The
// admitTrust interceptor of the service's chain then enforces what the
// level allows, so no binding or dialect decides anything for itself. The
// level is recorded on the task a call creates (agents read it), in the
// call's log line, its span and the metrics.

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
	// Skills, if set, are the only skills the level may call: a message
	// (new task or follow-up) is admitted only for a skill on this list
	// that the agent offers, named in its metadata (schemas.MetaSkill),
	// or, when it names none, the one skill of an agent whose card offers
	// exactly one (see callSkill).
	Skills []string
	// Limits are the level's own defaults for the limits of its calls.
	Limits LevelLimits
	// Approval holds every task the level creates for an approver
	// (approval.go).
	Approval bool
	// Audit records every call of the level in the audit record
	// (audit.go): before it runs, refusing it if that record cannot be
	// stored, and its outcome after. A level Levels does not name is
	// audited if it is TrustPublic ("Public: every action audited");
	// a level it names is audited only if this says so.
	Audit bool
}

// LevelLimits are the limits a trust level holds its calls to in place of
// the edge's defaults (Config.Limits.Default): a zero field keeps the
// edge's. An entry of Config.Limits for the caller's principal or tenant
// still wins over the level's rate and unfinished-task quota, being the
// more specific. These are the bounds that differ by who calls: a
// partner's or the public's rate, quota and request size, and how many
// streams it may hold; the bounds that protect the edge as a whole
// (connections, body buffers, the agent's backlog, the task store) stay
// the edge's.
type LevelLimits struct {
	// Rate is the sustained requests per second one caller of the level
	// may send, and Burst how many at once (0: 1); a level that sets Rate
	// sets both. Negative Rate: no rate limit at this level.
	Rate  float64
	Burst int
	// MaxUnfinished and MaxUnfinishedBytes bound one caller's unfinished
	// tasks and their stored bytes, as Limits' do; negative: no bound at
	// this level.
	MaxUnfinished      int
	MaxUnfinishedBytes int64
	// MaxBodyBytes lowers, for the level's calls, the bound of an HTTP
	// request's body (Config.MaxBodyBytes) and, on every binding (gRPC and
	// MCP calls have no body of the edge's to bound), of a message's
	// content (Config.MaxMessageBytes). It never raises either.
	MaxBodyBytes int64
	// MaxStreams bounds the streams one caller of the level (counted as
	// its rate is: a principal in its tenant, an anonymous source address)
	// holds open on this edge at once, within the edge's own MaxStreams.
	MaxStreams int
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

// of is what level may do as the policy says it.
func (p *TrustPolicy) of(level string) TrustLevel {
	if l, ok := p.Levels[level]; ok {
		return l
	}
	return TrustLevel{Refuse: level == TrustUntrusted, Audit: level == TrustPublic}
}

// trustLevel is one level as the edge applies it, made once when the edge
// is built (compileTrust): a call's level is a pointer its rule leads to,
// with the limits already merged, so deciding and applying it costs no
// map lookup, merge or allocation per call.
type trustLevel struct {
	TrustLevel
	name string
	// limits are the edge's default limits with the level's over them.
	limits Limits
	// parts are the edge's part limits, MaxMessageBytes lowered to the
	// level's MaxBodyBytes; lowered says they differ from the edge's.
	parts   schemas.PartLimits
	lowered bool
}

// trustPolicy is a TrustPolicy as the edge applies it: its rules, then the
// default rules, each leading to its compiled level.
type trustPolicy struct {
	rules []compiledRule
	// byTenant: a rule names tenants, so moving a call to another tenant
	// may change its level.
	byTenant bool
}

type compiledRule struct {
	TrustRule
	level *trustLevel
}

// compileTrust makes the policy p applies, over the edge's default limits
// and part limits.
func compileTrust(p TrustPolicy, def Limits, parts schemas.PartLimits) *trustPolicy {
	levels := map[string]*trustLevel{}
	levelOf := func(name string) *trustLevel {
		if l, ok := levels[name]; ok {
			return l
		}
		l := &trustLevel{TrustLevel: p.of(name), name: name}
		l.limits, l.parts, l.lowered = mergeLimits(l.Limits, def, parts)
		levels[name] = l
		return l
	}
	tp := &trustPolicy{}
	for _, rs := range [][]TrustRule{p.Rules, defaultTrustRules} {
		for _, r := range rs {
			tp.rules = append(tp.rules, compiledRule{TrustRule: r, level: levelOf(r.Level)})
			tp.byTenant = tp.byTenant || len(r.Tenants) > 0
		}
	}
	return tp
}

// mergeLimits is def with the level's limits ll over it, and the part
// limits with the level's body bound over them (lowered: they changed).
func mergeLimits(ll LevelLimits, def Limits, parts schemas.PartLimits) (Limits, schemas.PartLimits, bool) {
	l := def
	switch {
	case ll.Rate < 0:
		l.Rate, l.Burst = 0, 0
	case ll.Rate > 0:
		l.Rate, l.Burst = ll.Rate, max(ll.Burst, 1)
	}
	switch {
	case ll.MaxUnfinished < 0:
		l.MaxUnfinished = 0
	case ll.MaxUnfinished > 0:
		l.MaxUnfinished = ll.MaxUnfinished
	}
	switch {
	case ll.MaxUnfinishedBytes < 0:
		l.MaxUnfinishedBytes = 0
	case ll.MaxUnfinishedBytes > 0:
		l.MaxUnfinishedBytes = ll.MaxUnfinishedBytes
	}
	lowered := ll.MaxBodyBytes > 0 && ll.MaxBodyBytes < int64(parts.MaxMessageBytes)
	if lowered {
		parts.MaxMessageBytes = int(ll.MaxBodyBytes)
		parts.MaxPartBytes = min(parts.MaxPartBytes, parts.MaxMessageBytes)
	}
	return l, parts, lowered
}

// level is the level of a call from src by who: the first rule's that
// matches (the default rules end with one that matches every call).
func (p *trustPolicy) level(src netip.Addr, who caller) *trustLevel {
	for i := range p.rules {
		if p.rules[i].matches(src, who) {
			return p.rules[i].level
		}
	}
	return p.rules[len(p.rules)-1].level
}

// decideTrust gives c its trust level, from its source and caller as the
// front door knows them (admitCaller; moveToTenant when the tenant changes
// a rule's match).
func (s *Server) decideTrust(c *call) {
	c.level = s.trust.level(c.source, c.caller)
	c.trust = c.level.name
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

// refuseLevel is the refusal of a call whose level is refused, counted:
// admitTrust's in the service's chain, and the side doors' admitted as
// A2A calls are (admitSideCaller).
func (s *Server) refuseLevel(c *call) *schemas.Error {
	s.m.trustRefused.Inc(c.trust, "level")
	return schemas.Errorf(schemas.ErrPermissionDenied, "calls of trust level %q are refused here", c.trust)
}

// admitTrust is the interceptor that enforces each call's trust level,
// which the front door decided (decideTrust): it refuses every call of a
// refused level (untrusted), a call of an agent the level's list leaves
// out, and a message for a skill the level's list leaves out
// (admitSkill).
func (s *Server) admitTrust(ctx context.Context, inv *invocation, next invoker) (any, error) {
	c := inv.call
	if c.level == nil {
		s.decideTrust(c) // a call no door admitted (the service's own tests)
	}
	l := c.level
	if tracing.Enabled() {
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("a2abus.trust.level", c.trust))
	}
	s.m.trustCalls.Inc(c.trust)
	c.audited = l.Audit
	var refused error
	switch {
	case l.Refuse:
		refused = s.refuseLevel(c)
	case len(l.Agents) > 0 && !slices.Contains(l.Agents, c.agent):
		s.m.trustRefused.Inc(c.trust, "agent")
		refused = schemas.Errorf(schemas.ErrPermissionDenied, "trust level %q may not call agent %q; it may call %s", c.trust, c.agent, strings.Join(l.Agents, ", "))
	case len(l.Skills) > 0 && (inv.op == opSendMessage || inv.op == opSendStreamingMessage):
		if req, _ := inv.req.(*schemas.SendMessageRequest); req != nil && req.Message != nil {
			if err := s.admitSkill(c, req.Message); err != nil {
				s.m.trustRefused.Inc(c.trust, "skill")
				refused = err
			}
		}
	}
	if refused == nil {
		return next(ctx, inv)
	}
	if c.audited {
		// Refused either way: a record that cannot be stored is only
		// logged and counted.
		s.auditAfter(ctx, inv, schemas.AuditRefused, refused)
	}
	return nil, refused
}

// callSkill is the skill (its id) msg calls at c's agent: the one its
// metadata names (schemas.MetaSkill), else the agent's only skill when
// its card — with its extended skills, for an authenticated caller —
// offers exactly one; "" when it names none and the agent offers none or
// several. It reads the edge's agent directory, never the bus, and does
// not check that the agent offers a skill named (admitSkill does).
func (s *Server) callSkill(c *call, msg *schemas.Message) string {
	if id, _ := msg.Metadata[schemas.MetaSkill].(string); id != "" {
		return id
	}
	reg, _ := s.agents.Get(c.agent)
	ext := s.shownSkills(c)
	if len(reg.Card.Skills)+len(ext) != 1 {
		return ""
	}
	if len(ext) == 1 {
		return ext[0].ID
	}
	return reg.Card.Skills[0].ID
}

// shownSkills are the extended skills c's agent shows c's caller (an
// authenticated one; see extendedCard).
func (s *Server) shownSkills(c *call) []schemas.AgentSkill {
	if c.caller.principal == "" || !s.hasExtendedCard(c.agent) {
		return nil
	}
	return s.cfg.ExtendedSkills[c.agent]
}

// offersSkill reports whether c's agent offers c's caller skill id.
func (s *Server) offersSkill(c *call, id string) bool {
	has := func(sk schemas.AgentSkill) bool { return sk.ID == id }
	reg, _ := s.agents.Get(c.agent)
	return slices.ContainsFunc(reg.Card.Skills, has) || slices.ContainsFunc(s.shownSkills(c), has)
}

// admitSkill refuses a message of a call whose level keeps it to some
// skills, unless the skill it calls (callSkill) is one of them and its
// agent offers it. The refusal names the skills the level may call.
func (s *Server) admitSkill(c *call, msg *schemas.Message) error {
	l := c.level
	if v, ok := msg.Metadata[schemas.MetaSkill]; ok {
		if id, _ := v.(string); id == "" {
			return schemas.Errorf(schemas.ErrInvalidParams, "message.metadata[%q] must name a skill: a skill id of the agent's card, as a string", schemas.MetaSkill).With("field", "message.metadata."+schemas.MetaSkill)
		}
	}
	allowed := strings.Join(l.Skills, ", ")
	id := s.callSkill(c, msg)
	switch {
	case id == "":
		return schemas.Errorf(schemas.ErrPermissionDenied, "trust level %q may call only the skills %s, and this message names none (agent %q offers more or fewer than one); name one in message.metadata[%q]", c.trust, allowed, c.agent, schemas.MetaSkill)
	case !slices.Contains(l.Skills, id):
		return schemas.Errorf(schemas.ErrPermissionDenied, "trust level %q may not call skill %q; it may call only %s", c.trust, id, allowed)
	case !s.offersSkill(c, id):
		return schemas.Errorf(schemas.ErrPermissionDenied, "agent %q offers no skill %q; trust level %q may call only %s, of those the agent's card offers", c.agent, id, c.trust, allowed)
	}
	return nil
}
