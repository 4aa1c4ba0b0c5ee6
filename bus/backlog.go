package bus

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2abus/a2abus/schemas"
)

// The agents' backlog gauges: read from JetStream when /metrics is
// scraped, not kept by any process, since every edge sees the same
// queues. A scrape costs, per agent, the two consumer-info requests
// admission makes (agentQueue), plus one message read for each of the
// intake and the work stream that holds waiting work (the age of the
// oldest); a refresh serves every scrape for backlogScrapeEvery, so
// scrapers cannot multiply the load, and is bounded by backlogScrapeTime.
const (
	backlogScrapeEvery = 2 * time.Second
	backlogScrapeTime  = 3 * time.Second
	// backlogReaders is how many agents one refresh reads at once.
	backlogReaders = 4
)

// ReportBacklogs registers, in the bus's metrics registry, the backlog
// gauges of every agent d lists and every agent that has a work consumer
// (its workers all gone, its backlog is what matters most):
//
//	a2a_agent_backlog_pending{agent}             items no worker holds (intake and work stream)
//	a2a_agent_backlog_in_flight{agent}           delivered to a worker, not acknowledged
//	a2a_agent_backlog_redelivered{agent}         of those, delivered more than once
//	a2a_agent_backlog_oldest_age_seconds{agent}  since the oldest pending item was submitted (0: none)
//	a2a_agent_workers{agent}                     live workers (Workers)
//
// An agent whose reading failed is left out of that scrape. A second
// directory's call (two edges in one process) adds nothing: the first
// reports the same queues.
func (d *AgentDirectory) ReportBacklogs() {
	m := d.b.cfg.Metrics
	if m == nil {
		return
	}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"agent"}, nil)
	}
	m.collect("a2a_agent_backlog", &backlogCollector{
		d:           d,
		pending:     desc("a2a_agent_backlog_pending", "Work items of the agent no worker holds: waiting in the intake for their caller's turn, or in the work stream undelivered."),
		inFlight:    desc("a2a_agent_backlog_in_flight", "Work items of the agent delivered to a worker and not yet acknowledged (those handed back for redelivery among them)."),
		redelivered: desc("a2a_agent_backlog_redelivered", "Work items of the agent in flight that were delivered more than once."),
		oldest:      desc("a2a_agent_backlog_oldest_age_seconds", "Seconds since the oldest pending work item of the agent was submitted (0: none pending)."),
		workers:     desc("a2a_agent_workers", "Workers of the agent that refreshed its registration within the agent TTL."),
	})
}

// backlogCollector reads the backlogs at scrape time (see ReportBacklogs).
type backlogCollector struct {
	d                                               *AgentDirectory
	pending, inFlight, redelivered, oldest, workers *prometheus.Desc

	mu   sync.Mutex // one refresh at a time; scrapes meanwhile wait and share it
	at   time.Time
	last map[string]agentBacklog
}

// agentBacklog is one agent's reading.
type agentBacklog struct {
	q      queueState
	oldest time.Time // zero: nothing pending
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.inFlight, c.redelivered, c.oldest, c.workers} {
		ch <- d
	}
}

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if time.Since(c.at) >= backlogScrapeEvery {
		ctx, cancel := context.WithTimeout(context.Background(), backlogScrapeTime)
		c.last = c.d.b.readBacklogs(ctx, c.agents(ctx))
		cancel()
		c.at = time.Now()
	}
	last := c.last
	c.mu.Unlock()
	now := time.Now()
	gauge := func(d *prometheus.Desc, v float64, agent string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, agent)
	}
	for agent, r := range last {
		gauge(c.pending, float64(r.q.pending()), agent)
		gauge(c.inFlight, float64(r.q.inFlight), agent)
		gauge(c.redelivered, float64(r.q.redelivered), agent)
		age := 0.0
		if !r.oldest.IsZero() {
			age = max(now.Sub(r.oldest).Seconds(), 0)
		}
		gauge(c.oldest, age, agent)
	}
	// Workers of every agent listed or read: an agent whose workers are
	// all gone shows 0 beside its backlog.
	for _, reg := range c.d.List() {
		if _, ok := last[reg.Agent]; !ok {
			gauge(c.workers, float64(c.d.Workers(reg.Agent)), reg.Agent)
		}
	}
	for agent := range last {
		gauge(c.workers, float64(c.d.Workers(agent)), agent)
	}
}

// agents are the agents the directory lists and those with a work
// consumer (one request for the names); a failed listing leaves the
// directory's.
func (c *backlogCollector) agents(ctx context.Context) []string {
	set := map[string]bool{}
	for _, reg := range c.d.List() {
		set[reg.Agent] = true
	}
	if st, err := c.d.b.js.Stream(ctx, schemas.StreamWork); err == nil {
		names := st.ConsumerNames(ctx)
		for name := range names.Name() {
			if agent, ok := schemas.AgentFromConsumerWork(name); ok {
				set[agent] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// readBacklogs reads the agents' queues, backlogReaders at a time, until
// ctx ends; an agent whose reading failed is left out.
func (b *Bus) readBacklogs(ctx context.Context, agents []string) map[string]agentBacklog {
	var (
		mu  sync.Mutex
		out = make(map[string]agentBacklog, len(agents))
		wg  sync.WaitGroup
		sem = make(chan struct{}, backlogReaders)
	)
	for _, agent := range agents {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return out
		}
		wg.Go(func() {
			defer func() { <-sem }()
			r, err := b.readBacklog(ctx, agent)
			if err != nil {
				b.log.Debug("agent backlog not read", "agent", agent, "err", err)
				return
			}
			mu.Lock()
			out[agent] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// readBacklog reads one agent's queue and when its oldest pending item
// was submitted. Both streams keep work-queue retention, so what an
// agent's subjects hold is what is not done yet, in submission order:
// the oldest item of the intake is the first of the agent's intake
// subjects, the oldest undelivered one of the work stream the first of
// its work subjects after the consumer's delivered sequence. The older
// of the two, by the submission time its CloudEvent carries (an item
// moves unchanged from the intake), is the oldest pending.
func (b *Bus) readBacklog(ctx context.Context, agent string) (agentBacklog, error) {
	q, err := b.agentQueue(ctx, agent)
	if err != nil {
		return agentBacklog{}, err
	}
	r := agentBacklog{q: q}
	first := func(stream, subject string, from uint64) error {
		st, err := b.js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		m, err := st.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil // taken meanwhile
		}
		if err != nil {
			return err
		}
		at := m.Time
		if t, ok := eventTime(m.Header); ok {
			at = t
		}
		if r.oldest.IsZero() || at.Before(r.oldest) {
			r.oldest = at
		}
		return nil
	}
	if q.intake > 0 {
		if err := first(schemas.StreamIntake, schemas.SubjectIntakeAgent(agent), 1); err != nil {
			return agentBacklog{}, errUnavailable("bus: oldest pending work", err)
		}
	}
	if q.work > 0 {
		if err := first(schemas.StreamWork, schemas.SubjectWorkTasks(agent), q.workFloor+1); err != nil {
			return agentBacklog{}, errUnavailable("bus: oldest pending work", err)
		}
	}
	return r, nil
}
