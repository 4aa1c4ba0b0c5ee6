package workers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/a2abus/a2abus/schemas"
)

// The router agent kind: a task goes to one of the live agents that offer
// the skill it needs — the healthy one with the least work queued or
// running — as a child task, exactly as a fan-out sends to one target.
// The skill is named in the message's metadata (schemas.MetaSkill, the key
// every a2abus caller names a skill with, or the older MetaRouterSkill), or found
// by matching the message's words against the agents' skills (names,
// descriptions, tags, examples). The choice is recorded in the task's
// metadata. No agent fits: the task is REJECTED saying why.

// Metadata keys of routing.
const (
	// MetaRouterSkill, in a message's metadata, names the skill (its id)
	// the task needs, as schemas.MetaSkill does (which wins when both are
	// given); in the task's metadata, the skill the router chose.
	MetaRouterSkill = "a2abus.router.skill"
	// MetaRouterAgent and MetaRouterBacklog, in the task's metadata, say
	// which agent was chosen and the backlog it had then.
	MetaRouterAgent   = "a2abus.router.agent"
	MetaRouterBacklog = "a2abus.router.backlog"
)

// Router routes tasks by skill and load, through its Request's Delegation
// (the live registry, the agents' backlogs, the child it forwards to).
type Router struct {
	// Name is the router's own agent name (never a candidate).
	Name string
	// Agents, when set, are the only agents routed to.
	Agents []string
	// ChildTimeout bounds the child; default as FanOut's.
	ChildTimeout time.Duration
}

// candidate is an agent a task may go to.
type candidate struct {
	agent   string
	skill   string
	score   int
	backlog uint64
}

// Execute picks the agent and forwards the task to it.
func (r Router) Execute(ctx context.Context, req *Request, out *Emitter) error {
	d := req.Delegation()
	regs, err := d.Agents(ctx)
	if err != nil {
		return err
	}
	want, _ := req.Message.Metadata[schemas.MetaSkill].(string)
	if want == "" {
		want, _ = req.Message.Metadata[MetaRouterSkill].(string)
	}
	cands := r.candidates(regs, want, wordsOf(req.Message.Text()))
	if len(cands) == 0 {
		if want != "" {
			return out.Reject(ctx, fmt.Sprintf("no live agent offers the skill %q", want))
		}
		return out.Reject(ctx, "no live agent offers a skill that matches the message; name one in the message's metadata ("+schemas.MetaSkill+")")
	}
	// Load decides only among the best matches: their backlogs are read,
	// no one else's.
	best := 0
	for _, c := range cands {
		best = max(best, c.score)
	}
	cands = slices.DeleteFunc(cands, func(c candidate) bool { return c.score < best })
	for i := range cands {
		n, err := d.AgentBacklog(ctx, cands[i].agent)
		if err != nil {
			return err
		}
		cands[i].backlog = n
	}
	// The least loaded, then by name (the same choice for the same
	// state).
	slices.SortStableFunc(cands, func(a, b candidate) int {
		switch {
		case a.backlog != b.backlog:
			if a.backlog < b.backlog {
				return -1
			}
			return 1
		}
		return strings.Compare(a.agent, b.agent)
	})
	pick := cands[0]
	if err := out.Annotate(ctx, map[string]any{MetaRouterAgent: pick.agent, MetaRouterSkill: pick.skill, MetaRouterBacklog: pick.backlog}); err != nil {
		return err
	}
	return FanOut{Agents: []string{pick.agent}, ChildTimeout: r.ChildTimeout}.Execute(ctx, req, out)
}

// candidates are the live, healthy agents offering skill want (by id), or
// when want is "", those whose skills share words with the message, each
// with its best skill's score.
func (r Router) candidates(regs []schemas.AgentRegistration, want string, words map[string]bool) []candidate {
	var out []candidate
	for _, reg := range regs {
		if reg.Agent == r.Name || (len(r.Agents) > 0 && !slices.Contains(r.Agents, reg.Agent)) {
			continue
		}
		if st := reg.Remote; reg.Maintenance != "" || (st != nil && st.Health != schemas.HealthOnline && st.Health != schemas.HealthDegraded) {
			continue // in maintenance, or offline
		}
		best := candidate{agent: reg.Agent}
		for _, sk := range reg.Card.Skills {
			if want != "" {
				if sk.ID == want {
					best.skill, best.score = sk.ID, 1
				}
				continue
			}
			text := strings.Join(append(append([]string{sk.ID, sk.Name, sk.Description}, sk.Tags...), sk.Examples...), " ")
			score := 0
			for w := range wordsOf(text) {
				if words[w] {
					score++
				}
			}
			if score > best.score {
				best.skill, best.score = sk.ID, score
			}
		}
		if best.score > 0 {
			out = append(out, best)
		}
	}
	return out
}

// wordsOf is the set of lowercase words of three letters or more.
func wordsOf(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len(w) >= 3 {
			out[w] = true
		}
	}
	return out
}
