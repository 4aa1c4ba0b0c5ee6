package edge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/a2abus/a2abus/schemas"
)

// Agent cards. Workers register the descriptive part of a card (name,
// description, skills, version); the edge owns the parts that depend on
// where and how it is reached (interfaces, capabilities it implements) and
// fills required fields a worker left empty, so every served card is valid.

// resolveAgent returns the agent a request addresses: the {agent} path
// segment, or the default agent on the root routes. ok is false when that
// agent is not in the live registry.
func (s *Server) resolveAgent(r *http.Request) (string, bool) {
	return s.agentNamed(r.PathValue("agent"))
}

// agentNamed is the agent a call names ("": the edge's default agent) and
// whether it is served here.
func (s *Server) agentNamed(name string) (string, bool) {
	if name == "" {
		name = s.cfg.DefaultAgent
		if name == "" {
			if regs := s.agents.List(); len(regs) > 0 {
				name = regs[0].Agent
			}
		}
	}
	if !schemas.ValidAgentName(name) {
		return name, false
	}
	_, ok := s.agents.Get(name)
	return name, ok
}

// agentURL is the JSON-RPC endpoint of an agent.
func (s *Server) agentURL(agent string) string { return s.cfg.PublicURL + "/agents/" + agent }

// card returns the card served for a registered agent.
func (s *Server) card(reg schemas.AgentRegistration) schemas.AgentCard {
	c := reg.Card
	if c.Name == "" {
		c.Name = reg.Agent
	}
	if c.Description == "" {
		c.Description = "a2abus agent " + reg.Agent
	}
	if c.Version == "" {
		c.Version = "1.0.0"
	}
	// 1.0 interfaces first: clients take the first one they support.
	url := s.agentURL(reg.Agent)
	c.SupportedInterfaces = []schemas.AgentInterface{
		{URL: url, ProtocolBinding: schemas.BindingJSONRPC, ProtocolVersion: schemas.ProtocolVersion},
		{URL: url, ProtocolBinding: schemas.BindingHTTPJSON, ProtocolVersion: schemas.ProtocolVersion},
		{URL: url, ProtocolBinding: schemas.BindingJSONRPC, ProtocolVersion: schemas.ProtocolVersion03},
	}
	if a := s.cfg.GRPCAddress; a != "" {
		c.SupportedInterfaces = append(c.SupportedInterfaces, schemas.AgentInterface{URL: a, ProtocolBinding: schemas.BindingGRPC,
			ProtocolVersion: schemas.ProtocolVersion, Tenant: schemas.AgentTenant("", reg.Agent)})
	}
	c.Capabilities.Streaming = schemas.Bool(true)
	c.Capabilities.PushNotifications = schemas.Bool(s.cfg.Push)
	c.Capabilities.ExtendedAgentCard = nil
	if s.hasExtendedCard(reg.Agent) {
		c.Capabilities.ExtendedAgentCard = schemas.Bool(true)
	}
	if len(c.DefaultInputModes) == 0 {
		c.DefaultInputModes = []string{"text/plain"}
	}
	if len(c.DefaultOutputModes) == 0 {
		c.DefaultOutputModes = []string{"text/plain"}
	}
	if len(c.Skills) == 0 {
		c.Skills = []schemas.AgentSkill{{ID: reg.Agent, Name: c.Name, Description: c.Description, Tags: []string{reg.Agent}}}
	}
	// The registration's skills are shared with every other reader of the
	// registry cache: fill in tags on a copy.
	c.Skills = append([]schemas.AgentSkill(nil), c.Skills...)
	for i := range c.Skills {
		if c.Skills[i].Tags == nil {
			c.Skills[i].Tags = []string{reg.Agent}
		}
	}
	c = schemas.UnionCard(c)
	s.declareSecurity(&c)
	c.Signatures = nil // the edge's own, or none (signed)
	if s.cfg.Card10Only {
		c = s.card10(c)
	}
	return c
}

// servedRegistration is the registration of the agent a card route's
// request names, or false once it has answered 404.
func (s *Server) servedRegistration(w http.ResponseWriter, r *http.Request) (schemas.AgentRegistration, bool) {
	agent, ok := s.resolveAgent(r)
	if !ok {
		http.Error(w, fmt.Sprintf("no agent %q is served here; GET /a2a/agents lists the agents", agent), http.StatusNotFound)
		return schemas.AgentRegistration{}, false
	}
	reg, _ := s.agents.Get(agent)
	return reg, true
}

// cardModified is when reg's card last changed, which every edge reads
// from the same registration (a registration of an older worker, without
// it: this edge's start): the Last-Modified of what the card routes serve.
func (s *Server) cardModified(reg schemas.AgentRegistration) time.Time {
	if reg.CardSince != nil {
		return reg.CardSince.Time
	}
	return s.started
}

func (s *Server) handleCard(w http.ResponseWriter, r *http.Request) {
	if reg, ok := s.servedRegistration(w, r); ok {
		s.writeCard(w, r, reg, s.card(reg))
	}
}

// handleLegacyCard serves the path only clients older than 1.0 fetch: the
// union card, whose url is where they find the endpoint, whatever form
// the other card routes serve (Config.Card10Only).
func (s *Server) handleLegacyCard(w http.ResponseWriter, r *http.Request) {
	if reg, ok := s.servedRegistration(w, r); ok {
		s.writeCard(w, r, reg, s.card03(s.card(reg)))
	}
}

// writeCard answers with reg's card c, signed, cacheable and conditional.
func (s *Server) writeCard(w http.ResponseWriter, r *http.Request, reg schemas.AgentRegistration, c schemas.AgentCard) {
	card, err := s.signed(c)
	if err != nil {
		s.log.Error("signing the card failed", "agent", reg.Agent, "err", err)
		http.Error(w, "signing the card failed", http.StatusInternalServerError)
		return
	}
	b, err := json.Marshal(card)
	if err != nil {
		http.Error(w, "encoding the card failed", http.StatusInternalServerError)
		return
	}
	// A signed card's Last-Modified is no earlier than when this edge
	// took its keys (a rotation re-signs it).
	modified := s.cardModified(reg)
	if len(card.Signatures) > 0 {
		if since := s.cardSigs.keysSince(); since.After(modified) {
			modified = since
		}
	}
	s.writeETagged(w, r, b, s.publicCacheControl(), modified)
}

// handleAgentList lists the live registry. Query parameters narrow it:
// skill=ID and tag=TAG (each repeatable; an agent must offer all of them),
// kind=local|remote, health=online|degraded|offline|maintenance and q=words
// (see schemas.AgentQuery). The list needs no credentials; what it shows
// depends on the caller (see seesOperations), so it is cacheable by the
// caller only.
func (s *Server) handleAgentList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "skill", "tag", "kind", "health", "q":
		default:
			http.Error(w, fmt.Sprintf("unknown query parameter %q; GET /a2a/agents takes skill, tag, kind, health and q", k), http.StatusBadRequest)
			return
		}
	}
	query := schemas.AgentQuery{Skills: q["skill"], Tags: q["tag"], Kind: q.Get("kind"), Health: q.Get("health"), Text: q.Get("q")}
	out := schemas.AgentList{Agents: s.agentList(query, s.seesOperations(r))}
	out.Total = len(out.Agents)
	b, err := json.Marshal(out)
	if err != nil {
		http.Error(w, "encoding the list failed", http.StatusInternalServerError)
		return
	}
	s.writeETagged(w, r, b, s.agentListCacheControl(), time.Time{})
}

// agentList is the live registry narrowed by q, as a caller sees it: with
// the operational side of remote agents when operator (seesOperations).
func (s *Server) agentList(q schemas.AgentQuery, operator bool) []schemas.AgentEntry {
	regs := s.agents.List()
	terms := strings.Fields(strings.ToLower(q.Text))
	out := make([]schemas.AgentEntry, 0, len(regs))
	for _, reg := range regs {
		e := schemas.AgentEntry{AgentCard: s.card(reg), Agent: reg.Agent, Kind: "local", Health: schemas.HealthOnline, Maintenance: reg.Maintenance,
			Workers: s.agents.Workers(reg.Agent)}
		if reg.Remote != nil {
			e.Kind, e.Health = "remote", reg.Remote.Health
			if operator {
				e.Remote = reg.Remote
			}
		}
		if reg.Maintenance != "" {
			e.Health = schemas.HealthMaintenance
		}
		if matches(e, q) && mentions(e, terms) {
			out = append(out, e)
		}
	}
	return out
}

// seesOperations reports whether r's caller is shown the operational side
// of the registry in GET /a2a/agents — a remote agent's URL (an internal
// host, port and path, often) and how its checks went, lastError
// included: whoever may read the registry's admin API (/a2a/admin/agents),
// that is an admin principal of an edge that authenticates, or every
// caller of one that authenticates no one and serves its admin routes to
// all (Config.OpenAdmin, the local development serve). Everyone else sees
// the cards with each agent's name, kind and health. A caller whose
// credentials are refused is seen as one who sent none: the list needs
// none.
func (s *Server) seesOperations(r *http.Request) bool {
	if !s.authenticates() {
		return s.cfg.OpenAdmin
	}
	who, err := s.authenticate(r)
	return err == nil && who.admin
}

// agentListCacheControl is the Cache-Control of GET /a2a/agents: public
// when every caller is shown the same list, private (a shared cache must
// not hand an admin's list to another caller) when it depends on who asks.
func (s *Server) agentListCacheControl() string {
	if s.authenticates() {
		return fmt.Sprintf("private, max-age=%d", int(s.cfg.CardMaxAge.Seconds()))
	}
	return s.publicCacheControl()
}

// matches reports whether e is of q's kind and health and offers its
// skills and tags.
func matches(e schemas.AgentEntry, q schemas.AgentQuery) bool {
	if q.Kind != "" && e.Kind != q.Kind {
		return false
	}
	if q.Health != "" && e.Health != q.Health {
		return false
	}
	for _, id := range q.Skills {
		if !slices.ContainsFunc(e.Skills, func(sk schemas.AgentSkill) bool { return sk.ID == id }) {
			return false
		}
	}
	for _, tag := range q.Tags {
		if !slices.ContainsFunc(e.Skills, func(sk schemas.AgentSkill) bool { return slices.Contains(sk.Tags, tag) }) {
			return false
		}
	}
	return true
}

// mentions reports whether every word of terms (lowercase) is in the
// agent's name, description, or a skill's id, name, description, tags or
// examples: the text search of ?q= (and MCP's search_agents).
func mentions(e schemas.AgentEntry, terms []string) bool {
	if len(terms) == 0 {
		return true
	}
	texts := []string{e.Agent, e.Name, e.Description}
	for _, sk := range e.Skills {
		texts = append(texts, sk.ID, sk.Name, sk.Description)
		texts = append(texts, sk.Tags...)
		texts = append(texts, sk.Examples...)
	}
	text := strings.ToLower(strings.Join(texts, "\n"))
	for _, t := range terms {
		if !strings.Contains(text, t) {
			return false
		}
	}
	return true
}

// handleJWKS serves the public keys push notifications and cards are
// signed with, as cacheable as a card: a receiver that meets a key it does
// not hold (a rotation) fetches again.
func (s *Server) handleJWKS(w http.ResponseWriter, r *http.Request) {
	b, err := s.publishedKeys()
	if err != nil {
		s.log.Error("publishing the signing keys failed", "err", err)
		http.Error(w, "publishing the signing keys failed", http.StatusInternalServerError)
		return
	}
	s.writeETagged(w, r, b, s.publicCacheControl(), time.Time{})
}

// publicCacheControl is the Cache-Control of what every caller is shown
// alike: the cards' max-age, for any cache.
func (s *Server) publicCacheControl() string {
	return fmt.Sprintf("public, max-age=%d", int(s.cfg.CardMaxAge.Seconds()))
}

// writeETagged writes a JSON document with cacheControl, a content ETag
// and, when modified is set, Last-Modified, and answers a conditional GET
// as RFC 9110 §13.2.2 orders it: If-None-Match, when sent, decides alone
// (304 when it holds the ETag, compared weakly, or *); otherwise
// If-Modified-Since gives 304 when the document is unchanged since. What
// this edge adds to a document is unchanged since it started (but a
// card's signature, which the caller's modified covers), so the 304 also
// needs the date at or after the edge's start: a client whose copy is
// older may hold what an edge configured otherwise served, and gets the
// document again.
func (s *Server) writeETagged(w http.ResponseWriter, r *http.Request, b []byte, cacheControl string, modified time.Time) {
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	h := w.Header()
	h.Set("Cache-Control", cacheControl)
	h.Set("ETag", etag)
	if !modified.IsZero() {
		h.Set("Last-Modified", modified.UTC().Format(http.TimeFormat))
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		for _, m := range strings.Split(inm, ",") {
			if m = strings.TrimPrefix(strings.TrimSpace(m), "W/"); m == etag || m == "*" {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
	} else if ims, err := http.ParseTime(r.Header.Get("If-Modified-Since")); err == nil && !modified.IsZero() {
		// HTTP dates have whole seconds.
		since := modified.Truncate(time.Second)
		if started := s.started.Truncate(time.Second); started.After(since) {
			since = started
		}
		if !since.After(ims) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// declareSecurity fills the card's security from the authenticator the
// front door enforces, so the card can only say what is checked: the
// schemes in both card versions' shapes at once, 1.0's requirements,
// 0.3's security list, and the older dialect's authentication member.
// What a worker registered there is replaced, never trusted.
func (s *Server) declareSecurity(c *schemas.AgentCard) {
	c.SecuritySchemes, c.SecurityRequirements, c.Security, c.Authentication = nil, nil, nil, nil
	if !s.authenticates() {
		return
	}
	a := s.cfg.Auth
	c.SecuritySchemes = a.UnionSecuritySchemes()
	c.SecurityRequirements = s.requirements()
	_, c.Security = a.CardSecurity03()
	c.Authentication = &schemas.LegacyAuthentication{Schemes: a.LegacySchemes()}
}

// hasExtendedCard reports whether agent shows authenticated callers more
// than its public card.
func (s *Server) hasExtendedCard(agent string) bool {
	return s.authenticates() && len(s.cfg.ExtendedSkills[agent]) > 0
}

// extendedCard is the card of the called agent for an authenticated
// caller: the public card with the agent's extended skills, as A2A 1.0
// alone defines a card (see card10), signed as the public card is: only
// 1.0 clients call GetExtendedAgentCard, and the 1.0 card schema they
// check it against has none of the union card's other fields. The front
// door has authenticated the caller before any method runs.
func (s *Server) extendedCard(c *call) (schemas.AgentCard, error) {
	reg, ok := s.agents.Get(c.agent)
	if !ok || !s.hasExtendedCard(c.agent) {
		return schemas.AgentCard{}, schemas.Errorf(schemas.ErrExtendedCardNotConfigured, "agent %s has no extended agent card (its card does not declare capabilities.extendedAgentCard)", c.agent)
	}
	card := s.card10(s.card(reg))
	card.Skills = append(append([]schemas.AgentSkill(nil), card.Skills...), s.cfg.ExtendedSkills[c.agent]...)
	card, err := s.signed(card)
	if err != nil {
		return schemas.AgentCard{}, schemas.Errorf(schemas.ErrInternal, "signing the extended card failed: %v", err)
	}
	return card, nil
}

// card10 is served card c as A2A 1.0 alone defines a card: without the
// 0.3 fields UnionCard added and the older dialect's authentication, and
// with its security schemes in 1.0's shape only (a union card gives each
// in both shapes side by side).
func (s *Server) card10(c schemas.AgentCard) schemas.AgentCard {
	c.URL, c.PreferredTransport, c.ProtocolVersion = "", "", ""
	c.AdditionalInterfaces, c.SupportsAuthenticatedExtendedCard = nil, nil
	c.Security, c.Authentication = nil, nil
	c.SecuritySchemes, c.SecurityRequirements = nil, nil
	if s.authenticates() {
		c.SecuritySchemes, _ = s.cfg.Auth.CardSecurity()
		c.SecurityRequirements = s.requirements()
	}
	return c
}

// requirements are the cards' 1.0 securityRequirements: the spec's
// ProtoJSON form, or with Config.CardScopesAsArrays each scheme's scopes
// as a bare array.
func (s *Server) requirements() []json.RawMessage {
	_, reqs := s.cfg.Auth.CardSecurity()
	if !s.cfg.CardScopesAsArrays {
		return reqs
	}
	out := make([]json.RawMessage, 0, len(reqs))
	for _, raw := range reqs {
		var r struct {
			Schemes map[string]struct {
				List []string `json:"list"`
			} `json:"schemes"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			panic("edge: a requirement of edge/auth's CardSecurity does not decode: " + err.Error())
		}
		bare := make(map[string][]string, len(r.Schemes))
		for name, l := range r.Schemes {
			bare[name] = append([]string{}, l.List...)
		}
		b, _ := json.Marshal(map[string]any{"schemes": bare})
		out = append(out, b)
	}
	return out
}

// card03 is a 1.0 card as 0.3's agent/getAuthenticatedExtendedCard
// answers it: the union card, whose 0.3 fields 0.3 clients read.
func (s *Server) card03(c schemas.AgentCard) schemas.AgentCard {
	c = schemas.UnionCard(c)
	s.declareSecurity(&c)
	return c
}
