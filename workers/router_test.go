package workers_test

import (
	"context"
	"testing"
	"time"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/bustest"
	"github.com/a2abus/a2abus/schemas"
	"github.com/a2abus/a2abus/workers"
)

// skilled is def with one skill.
func skilled(name string, a workers.Agent, skill schemas.AgentSkill) workers.Definition {
	d := def(name, a)
	d.Card.Skills = []schemas.AgentSkill{skill}
	return d
}

// submitMeta is submit with message metadata.
func submitMeta(t *testing.T, b *bus.Bus, agent, text string, md map[string]any) string {
	t.Helper()
	ctx := context.Background()
	msg := schemas.Message{MessageID: schemas.NewID(), Role: schemas.RoleUser, Parts: []schemas.Part{schemas.TextPart(text)}, Metadata: md}
	rec, _, err := b.Submit(ctx, bus.Submission{Agent: agent, Message: &msg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Task.ID
}

// A router sends a task to the live agent offering the skill with the
// least work queued or running, named in the message's metadata or found
// from its words, and records the choice; no such agent: REJECTED.
func TestRouterChoosesTheLessLoadedAgent(t *testing.T) {
	_, b := bustest.New(t, bustest.Options{})
	translate := schemas.AgentSkill{ID: "translate", Name: "Translate", Description: "translates text", Tags: []string{"language"}}
	busy := newHang()
	startRunner(t, b, skilled("alpha", busy, translate), workers.Options{Concurrency: 1})
	echo := workers.EchoDefinition("beta")
	echo.Card.Skills = []schemas.AgentSkill{translate}
	startRunner(t, b, echo, workers.Options{})
	dir := b.NewAgentDirectory()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = dir.Run(ctx) }()
	<-dir.Ready()
	startRunner(t, b, def("route", workers.Router{Name: "route"}), workers.Options{Registry: dir})
	waitListed(t, dir, "alpha", "beta", "route")

	// alpha is busy: one task running, two waiting.
	for range 3 {
		submit(t, b, "alpha", "hold")
	}
	recv(t, busy.started, "alpha's first task")
	waitBacklogAt(t, b, "alpha", 3)

	for name, md := range map[string]map[string]any{
		"by skill":              {schemas.MetaSkill: "translate"},
		"by skill, the old key": {workers.MetaRouterSkill: "translate"},
		"by words":              nil,
	} {
		id := submitMeta(t, b, "route", "please translate this into French", md)
		rec := waitSettled(t, b, id)
		if rec.Task.Status.State != schemas.TaskStateCompleted || rec.Task.Metadata[workers.MetaRouterAgent] != "beta" || rec.Task.Metadata[workers.MetaRouterSkill] != "translate" {
			t.Fatalf("%s: %s, routed to %v (%v)", name, rec.Task.Status.State, rec.Task.Metadata[workers.MetaRouterAgent], rec.Task.Metadata)
		}
	}
	// A message no skill fits, or a skill nobody offers: REJECTED.
	for _, c := range []struct{ text, skill string }{{"no words in common", ""}, {"x", "paint"}} {
		var md map[string]any
		if c.skill != "" {
			md = map[string]any{schemas.MetaSkill: c.skill}
		}
		rec := waitSettled(t, b, submitMeta(t, b, "route", c.text, md))
		if rec.Task.Status.State != schemas.TaskStateRejected {
			t.Fatalf("%q (skill %q): %s", c.text, c.skill, rec.Task.Status.State)
		}
	}
	close(busy.release)
}

// waitListed waits until the directory lists the agents.
func waitListed(t *testing.T, dir *bus.AgentDirectory, agents ...string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		missing := false
		for _, a := range agents {
			if _, ok := dir.Get(a); !ok {
				missing = true
			}
		}
		if !missing {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("the registry never listed %v", agents)
		case <-time.After(20 * time.Millisecond): // polling the directory
		}
	}
}

// waitBacklogAt waits until the agent's backlog is n.
func waitBacklogAt(t *testing.T, b *bus.Bus, agent string, n uint64) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		got, err := b.AgentBacklog(context.Background(), agent)
		if err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%s's backlog is %d, want %d", agent, got, n)
		case <-time.After(20 * time.Millisecond): // polling the consumer
		}
	}
}
