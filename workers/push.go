package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/a2abus/a2abus/bus"
	"github.com/a2abus/a2abus/bus/tracing"
	"github.com/a2abus/a2abus/schemas"
)

// The push sender: delivers the events of tasks with push-notification
// configs to their webhooks. Any number of senders, in any processes,
// share one durable consumer of the tasks' wake-ups (bus.PushConsumer),
// which holds at most one per task, so one sender at a time works a task:
// per config it posts the task's events after the config's cursor, in
// order, and stores the cursor it reached. A webhook that fails is tried
// again with exponential back-off and jitter (the wake-up is handed back
// with a delay); after MaxAttempts or MaxAge the event goes to the
// dead-letter stream and the config is marked failing; 410 Gone disables
// the config. A sender that dies loses nothing: its wake-up is redelivered
// and the cursors say where to resume (the event in flight may be posted
// twice; its A2A-Notification-Id header is the same both times).

// Notification is one webhook request as the signer sees it.
type Notification struct {
	TaskID  string
	EventID string
	// URL is the webhook: the audience of the signature.
	URL  string
	Body []byte
}

// PushOptions configure a PushSender. Zero fields take the defaults.
type PushOptions struct {
	// Client posts the notifications. It is the outbound guard's client
	// (cmd builds it from discovery.Policy): the resolved address checked
	// at dial time, and redirects not followed. Required.
	Client *http.Client
	// Sign, when set, returns the compact JWS sent in
	// schemas.HeaderNotificationSignature (and as the bearer credentials of
	// a config whose authentication is Bearer without credentials).
	Sign func(Notification) (string, error)
	// Timeout bounds one attempt; default 10s (the specification
	// recommends 10 to 30).
	Timeout time.Duration
	// Concurrency bounds the tasks worked at once; default 64.
	Concurrency int
	// MaxAttempts and MaxAge bound the attempts at one event (and the time
	// since its first failure) before it is dead-lettered; defaults 10 and
	// 1h.
	MaxAttempts int
	MaxAge      time.Duration
	// Backoff is the delay before the second attempt, doubled each attempt
	// up to MaxBackoff, ±20% jitter; defaults 1s and 2m.
	Backoff, MaxBackoff time.Duration
	// AckWait is how long a wake-up may be held without a heartbeat before
	// another sender takes it (the sender heartbeats while it works);
	// default the bus's AckWait.
	AckWait time.Duration
	// BatchLimit bounds the events one wake-up delivers per config; the
	// rest are delivered after a new wake-up. Default 512.
	BatchLimit int
	// Stored, when set, is called after a wake-up's outcome (cursors,
	// failure marks) is stored: an observer for instrumentation and tests.
	Stored func(taskID string)
	Logger *slog.Logger
}

func (o PushOptions) withDefaults() PushOptions {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Timeout, 10*time.Second)
	def(&o.MaxAge, time.Hour)
	def(&o.Backoff, time.Second)
	def(&o.MaxBackoff, 2*time.Minute)
	if o.Concurrency <= 0 {
		o.Concurrency = 64
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 10
	}
	if o.BatchLimit <= 0 {
		o.BatchLimit = 512
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// PushSender delivers push notifications; see the package comment above.
type PushSender struct {
	b   PushBus
	opt PushOptions
	log *slog.Logger
	m   pushMetrics
}

type pushMetrics struct {
	attempts bus.Counter   // a2a_push_attempts_total{outcome}
	latency  bus.Histogram // a2a_push_attempt_seconds
	failing  bus.Counter   // a2a_push_configs_failing_total
	disabled bus.Counter   // a2a_push_configs_disabled_total
}

// NewPushSender returns a sender on b.
func NewPushSender(b PushBus, opt PushOptions) (*PushSender, error) {
	if opt.Client == nil {
		return nil, errors.New("workers: push sender: no HTTP client")
	}
	opt = opt.withDefaults()
	m := b.Metrics()
	return &PushSender{b: b, opt: opt, log: opt.Logger.With("component", "push"), m: pushMetrics{
		attempts: m.Counter("a2a_push_attempts_total", "Push notification attempts, by outcome: delivered, failed (retried or dead-lettered), gone (410: the config is disabled).", "outcome"),
		latency:  m.Histogram("a2a_push_attempt_seconds", "Duration of push notification attempts, answered or not.", nil),
		failing:  m.Counter("a2a_push_configs_failing_total", "Times a push notification config was marked failing (its webhook failed where it had not)."),
		disabled: m.Counter("a2a_push_configs_disabled_total", "Push notification configs disabled because their webhook answered 410 Gone."),
	}}, nil
}

// Run delivers until ctx ends; wake-ups it holds then are handed back.
func (s *PushSender) Run(ctx context.Context) error {
	cons, err := s.b.PushConsumer(ctx, s.opt.AckWait)
	if err != nil {
		return err
	}
	sem := make(chan struct{}, s.opt.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		free := s.opt.Concurrency - len(sem)
		if free == 0 {
			select {
			case sem <- struct{}{}:
				<-sem
			case <-ctx.Done():
			}
			continue
		}
		wakes, err := cons.Fetch(ctx, free, 5*time.Second)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("fetching push wake-ups failed; retrying", "err", err)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
		for _, w := range wakes {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				s.work(ctx, w)
			})
		}
	}
	return nil
}

// pending is one notification to post to one config: the body, the event
// it stands for and the cursor (and stream sequence) it moves the config
// to.
type pending struct {
	eventID string
	cursor  uint64
	seq     uint64
	body    []byte
}

// outcome is what one wake-up did with a config.
type outcome struct {
	id, url   string
	createdAt schemas.Timestamp
	delivered uint64
	seq       uint64
	failing   *schemas.PushFailure
	disabled  string
	retryIn   time.Duration // > 0: try again after it
}

// work delivers one task's undelivered events to each of its configs.
func (s *PushSender) work(ctx context.Context, w *bus.Wake) {
	stop := s.heartbeat(w)
	defer stop()
	log := s.log.With("task_id", w.TaskID)
	if tracing.Enabled() {
		ctx = tracing.WithTraceparent(ctx, w.Traceparent)
	}
	d, err := s.deliverTask(ctx, w.TaskID, log)
	switch {
	case ctx.Err() != nil:
		_ = w.Retry(0)
		return
	case err != nil:
		log.Warn("push delivery could not be done; retrying", "err", err)
		_ = w.Retry(s.backoff(int(min(w.Attempt, 20))))
		return
	case d.retry > 0:
		_ = w.Retry(d.retry)
		return
	}
	if err := w.Done(ctx); err != nil {
		log.Debug("acknowledging a push wake-up", "err", err)
		return // redelivered: the cursors make it cheap
	}
	if d.waiting {
		s.rewake(ctx, w.TaskID, d.lowest, log)
	}
}

// rewake wakes the task again if its last stored event is after lowest,
// the least cursor of its active configs: a write while this sender
// worked found the wake-up pending and published none.
func (s *PushSender) rewake(ctx context.Context, taskID string, lowest uint64, log *slog.Logger) {
	last, err := s.b.LastStoredEvent(ctx, taskID)
	if err != nil {
		log.Warn("could not check a task for events written during delivery", "err", err)
		return
	}
	if last.LastCursor() > lowest {
		if err := s.b.WakePush(ctx, taskID); err != nil {
			log.Warn("could not wake the push sender again", "err", err)
		}
	}
}

// heartbeat keeps the wake-up this sender's while it works.
func (s *PushSender) heartbeat(w *bus.Wake) (stop func()) {
	every := s.opt.AckWait
	if every <= 0 {
		every = s.b.Config().AckWait
	}
	t := time.NewTicker(max(every/3, 10*time.Millisecond))
	done := make(chan struct{})
	go func() {
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = w.InProgress()
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}

// delivered is what one wake-up's delivery left: retry > 0 asks for the
// wake-up again after it (a webhook failed and has attempts left);
// waiting says configs remain, lowest the least cursor among the active
// ones.
type delivered struct {
	retry   time.Duration
	waiting bool
	lowest  uint64
}

// deliverTask delivers the task's events after each active config's
// cursor and stores where each got.
func (s *PushSender) deliverTask(ctx context.Context, taskID string, log *slog.Logger) (delivered, error) {
	cfgs, rev, err := s.b.PushConfigsOf(ctx, taskID)
	if err != nil || len(cfgs) == 0 {
		return delivered{}, err
	}
	var from, after uint64
	first, v03 := true, false
	for _, c := range cfgs {
		if c.Disabled != "" {
			continue
		}
		if first || c.DeliveredSeq < from {
			from = c.DeliveredSeq
		}
		if first || c.Delivered < after {
			after = c.Delivered
		}
		v03 = v03 || c.Dialect == "0.3"
		first = false
	}
	if first {
		return delivered{}, nil // all disabled
	}
	var evs []storedUpdate
	limit := s.opt.BatchLimit
	last, err := s.b.EventsAfter(ctx, taskID, from, after, func(e bus.StoredEvent) bool {
		for i, u := range e.Updates {
			if u.Cursor > after {
				next := e.Seq
				if i == len(e.Updates)-1 {
					next++ // the message is done with once this is
				}
				evs = append(evs, storedUpdate{u, next})
			}
		}
		return len(evs) < limit
	})
	if err != nil {
		return delivered{}, err
	}
	// The task has ended when its last stored event ends it: a terminal
	// status, or a direct reply.
	var final uint64
	if n := len(last.Updates); n > 0 {
		u := last.Updates[n-1]
		if u.Reply != nil || (u.Status != nil && u.Status.Status.State.Terminal()) {
			final = u.Cursor
		}
	}
	if len(evs) == 0 && final == 0 {
		return delivered{waiting: true, lowest: after}, nil
	}
	var rec *schemas.TaskRecord
	if v03 && len(evs) > 0 {
		// A 0.3 config is sent the task; the record read after the events
		// holds at least what they say (a write is stored before its
		// events are published).
		if rec, _, err = s.b.GetTask(ctx, taskID); err != nil {
			if errors.Is(err, schemas.ErrTaskNotFound) {
				return delivered{}, nil // deleted: its configs go with it (the sweep)
			}
			return delivered{}, err
		}
	}
	// Each config's progress is stored as it is made, so a sender that
	// dies repeats at most the notification it was posting; the configs
	// share the task's one value, so their stores take turns, each from the
	// set the last one stored. A finished task's configs are kept once
	// their last event is delivered: the specification has a config
	// created on a finished task succeed and be read back (Get, List,
	// Delete), so they stay until deleted or the task is (the sweep
	// deletes them with its events).
	var mu sync.Mutex
	set := &schemas.PushConfigSet{Configs: cfgs}
	save := func(o outcome) error {
		mu.Lock()
		defer mu.Unlock()
		next, nrev, err := s.store(ctx, taskID, set, rev, []outcome{o})
		if err == nil {
			set, rev = next, nrev
		}
		return err
	}
	out := make([]outcome, len(cfgs))
	var wg sync.WaitGroup
	for i := range cfgs {
		if cfgs[i].Disabled != "" {
			continue
		}
		wg.Go(func() { out[i] = s.deliverConfig(ctx, taskID, rec, &cfgs[i], evs, save, log) })
	}
	wg.Wait()
	if s.opt.Stored != nil {
		s.opt.Stored(taskID)
	}
	d := delivered{}
	first = true
	for i, o := range out {
		if cfgs[i].Disabled != "" || o.disabled != "" {
			continue
		}
		if o.retryIn > 0 && (d.retry == 0 || o.retryIn < d.retry) {
			d.retry = o.retryIn
		}
		if first || o.delivered < d.lowest {
			d.lowest = o.delivered
		}
		first = false
	}
	d.waiting = !first && (final == 0 || d.lowest < final)
	return d, nil
}

// store writes outcomes into the task's configs (set, at revision rev),
// skipping configs deleted or replaced meanwhile.
func (s *PushSender) store(ctx context.Context, taskID string, set *schemas.PushConfigSet, rev uint64, outs []outcome) (*schemas.PushConfigSet, uint64, error) {
	return s.b.ChangePushDelivery(ctx, taskID, set, rev, func(set *schemas.PushConfigSet) error {
		for _, o := range outs {
			i := set.Index(o.id)
			if i < 0 || set.Configs[i].Config.URL != o.url || !set.Configs[i].CreatedAt.Equal(o.createdAt.Time) {
				continue
			}
			c := &set.Configs[i]
			if o.delivered > c.Delivered {
				c.Delivered, c.DeliveredSeq = o.delivered, o.seq
			}
			c.Failing, c.Disabled = o.failing, o.disabled
		}
		return nil
	})
}

type storedUpdate struct {
	u   bus.TaskUpdate
	seq uint64
}

// deliverConfig posts a config's undelivered events in order, stopping at
// the first failure.
func (s *PushSender) deliverConfig(ctx context.Context, taskID string, rec *schemas.TaskRecord, c *schemas.PushConfigRecord, evs []storedUpdate, save func(outcome) error, log *slog.Logger) outcome {
	o := outcome{id: c.Config.ID, url: c.Config.URL, createdAt: c.CreatedAt, delivered: c.Delivered, seq: c.DeliveredSeq, failing: c.Failing}
	todo, err := notifications(rec, c, evs)
	if err != nil {
		log.Error("cannot encode a push notification", "config_id", c.Config.ID, "err", err)
		return o
	}
	// saved stores o; a store that fails has the wake-up tried again.
	saved := func() bool {
		if err := save(o); err != nil {
			log.Warn("could not store a push notification config's progress; retrying", "config_id", c.Config.ID, "err", err)
			o.retryIn = s.backoff(1)
			return false
		}
		return true
	}
	for k, n := range todo {
		status, err := s.attempt(ctx, taskID, c, o.failing, n)
		switch {
		case err == nil && status/100 == 2:
			s.m.attempts.Inc("delivered")
			o.delivered, o.seq, o.failing = n.cursor, n.seq, nil
			if !saved() {
				return o
			}
			continue
		case err == nil && status == http.StatusGone:
			s.m.attempts.Inc("gone")
			s.m.disabled.Inc()
			o.disabled = "the webhook answered 410 Gone"
			log.Info("push notification config disabled: its webhook answered 410 Gone", "config_id", c.Config.ID)
			saved()
			return o
		case ctx.Err() != nil:
			return o // shutting down: the wake-up is handed back
		}
		s.m.attempts.Inc("failed")
		why := describeFailure(status, err)
		now := *schemas.Now()
		f := schemas.PushFailure{Since: now, Attempts: 1, LastError: why}
		if o.failing != nil {
			f = *o.failing
			f.Attempts++
			f.LastError = why
		} else {
			s.m.failing.Inc()
		}
		o.failing = &f
		if f.Attempts < s.opt.MaxAttempts && time.Since(f.Since.Time) < s.opt.MaxAge {
			if saved() {
				o.retryIn = s.backoff(f.Attempts)
			}
			// The operator's log keeps what the network said (the owner
			// is shown why): the resolver or address is theirs to see.
			log.Warn("push notification failed; retrying", "config_id", c.Config.ID, "attempts", f.Attempts, "retry_in", o.retryIn.Round(time.Millisecond), "err", operatorCause(why, err))
			return o
		}
		// Given up on: this and the rest of the batch go to the
		// dead-letter stream, and the config goes on with what comes next.
		reason := fmt.Sprintf("gave up after %d attempts in %s: %s", f.Attempts, time.Since(f.Since.Time).Round(time.Second), why)
		for _, d := range todo[k:] {
			if err := s.b.DeadLetterPush(ctx, taskID, c.Config.ID, d.eventID, reason, d.body); err != nil {
				log.Warn("could not dead-letter a push notification; retrying", "config_id", c.Config.ID, "err", err)
				o.retryIn = s.backoff(f.Attempts)
				return o
			}
			o.delivered, o.seq = d.cursor, d.seq
			f.DeadLettered++
		}
		f.Attempts = 0
		log.Warn("push notifications dead-lettered", "config_id", c.Config.ID, "count", len(todo)-k, "reason", reason)
		saved()
		return o
	}
	return o
}

// notifications are the requests a config is owed for evs: one per event
// in A2A 1.0's shape (a StreamResponse), or, for a config registered
// through 0.3, one task snapshot (0.3's shape: a Task object) standing for
// all of them.
func notifications(rec *schemas.TaskRecord, c *schemas.PushConfigRecord, evs []storedUpdate) ([]pending, error) {
	var out []pending
	var last *storedUpdate
	for i := range evs {
		e := &evs[i]
		if e.u.Cursor <= c.Delivered {
			continue
		}
		last = e
		if c.Dialect == "0.3" {
			continue
		}
		var r schemas.StreamResponse
		switch {
		case e.u.Status != nil:
			r.StatusUpdate = e.u.Status
		case e.u.Artifact != nil:
			r.ArtifactUpdate = e.u.Artifact
		case e.u.Reply != nil:
			r.Message = e.u.Reply
		}
		body, err := json.Marshal(&r)
		if err != nil {
			return nil, err
		}
		out = append(out, pending{eventID: e.u.ID, cursor: e.u.Cursor, seq: e.seq, body: body})
	}
	if c.Dialect == "0.3" && last != nil {
		body, err := json.Marshal(schemas.TaskToV03(rec.Task))
		if err != nil {
			return nil, err
		}
		out = append(out, pending{eventID: last.u.ID, cursor: last.u.Cursor, seq: last.seq, body: body})
	}
	return out, nil
}

// errWebhookRefused stands for a webhook's non-2xx answer on its span
// (whose error.type is the status).
var errWebhookRefused = errors.New("the webhook refused the notification")

// attempt is one attempt at a notification, in a span of its own while
// the process traces: a child of the write that woke the sender (see
// bus.Wake), with the config and the attempt's number (1 the first, one
// more for each that failed before it), around the POST's client span.
func (s *PushSender) attempt(ctx context.Context, taskID string, c *schemas.PushConfigRecord, failing *schemas.PushFailure, n pending) (int, error) {
	if !tracing.Enabled() || !trace.SpanContextFromContext(ctx).IsValid() {
		return s.post(ctx, taskID, c, n)
	}
	attempt := 1
	if failing != nil {
		attempt = failing.Attempts + 1
	}
	ctx, span := tracing.Tracer().Start(ctx, "push notification", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(tracing.A2ATaskID.String(taskID), tracing.PushConfigID.String(c.Config.ID), tracing.PushAttempt.Int(attempt)))
	defer span.End()
	status, err := s.post(ctx, taskID, c, n)
	switch {
	case err != nil:
		tracing.Fail(span, "transport", err)
	case status/100 != 2:
		tracing.Fail(span, strconv.Itoa(status), errWebhookRefused)
	}
	return status, err
}

// post makes one attempt; the status, or the error of a request that got
// no answer.
func (s *PushSender) post(ctx context.Context, taskID string, c *schemas.PushConfigRecord, n pending) (int, error) {
	actx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, c.Config.URL, bytes.NewReader(n.body))
	if err != nil {
		return 0, err
	}
	ct := schemas.ContentTypeA2A
	if c.Dialect == "0.3" {
		ct = "application/json" // what 0.3 receivers expect
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("User-Agent", "a2abus-push")
	req.Header.Set(schemas.HeaderNotificationEventID, n.eventID)
	req.Header.Set(schemas.HeaderNotificationTaskID, taskID)
	if t := c.Config.Token; t != "" {
		req.Header.Set(schemas.HeaderNotificationToken, t)
		req.Header.Set(schemas.HeaderNotificationTokenX, t)
	}
	var jwt string
	if s.opt.Sign != nil {
		if jwt, err = s.opt.Sign(Notification{TaskID: taskID, EventID: n.eventID, URL: c.Config.URL, Body: n.body}); err != nil {
			return 0, fmt.Errorf("signing the notification: %w", err)
		}
		req.Header.Set(schemas.HeaderNotificationSignature, jwt)
	}
	if a := c.Config.Authentication; a != nil {
		switch {
		case a.Credentials != "":
			req.Header.Set("Authorization", a.Scheme+" "+a.Credentials)
		case jwt != "" && strings.EqualFold(a.Scheme, "bearer"):
			// Bearer without credentials asks for the sender's own token
			// (the specification's JWT + JWKS flow).
			req.Header.Set("Authorization", "Bearer "+jwt)
		}
	}
	start := time.Now()
	resp, err := s.opt.Client.Do(req)
	s.m.latency.Observe(time.Since(start).Seconds())
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// describeFailure says what an attempt met, as the config's lastError
// shows it to the task's owner: the one place a delivery's failure is put
// into words. It names neither the URL (which may carry a secret) nor
// what the network beneath said of itself — the resolver asked, the
// address a name resolved to, the local address — which net's errors
// repeat and which are the deployment's, not the owner's.
func describeFailure(status int, err error) string {
	if err == nil {
		return fmt.Sprintf("the webhook answered %d %s", status, http.StatusText(status))
	}
	var dns *net.DNSError
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.As(err, &dns) && dns.IsTimeout:
		return "the webhook's host name could not be resolved in time"
	case errors.As(err, &dns):
		return "the webhook's host name could not be resolved"
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "no answer within the attempt's timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the webhook's host refused the connection"
	case errors.Is(err, syscall.ECONNRESET):
		return "the webhook's host reset the connection"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "the webhook's host could not be reached"
	case errors.As(err, &op):
		// A refusal of the outbound guard, a TLS failure: what went
		// wrong, without the addresses the operation names.
		return withoutAddresses(fmt.Sprintf("%s: %v", op.Op, op.Err))
	}
	return withoutAddresses(unwrapURLError(err).Error())
}

// operatorCause is a failed attempt as the operator's log says it: the
// error itself (without the URL net/http repeats), or why when there is
// none.
func operatorCause(why string, err error) string {
	if err == nil {
		return why
	}
	return unwrapURLError(err).Error()
}

// addrLike finds what may be an IP address in an error's text: a run of
// the characters addresses and ports are written with.
var addrLike = regexp.MustCompile(`\[?[0-9A-Fa-f:.]*[:.][0-9A-Fa-f:.]*(%[0-9A-Za-z_-]+)?\]?(:[0-9]+)?`)

// withoutAddresses replaces the IP addresses an error's text names (the
// one a host name resolved to, a refused one, with or without a port)
// with a word: what is left still says what went wrong.
func withoutAddresses(msg string) string {
	return addrLike.ReplaceAllStringFunc(msg, func(m string) string {
		t := strings.TrimRight(m, ".:")
		if _, err := netip.ParseAddrPort(t); err == nil {
			return "an address" + m[len(t):]
		}
		if _, err := netip.ParseAddr(strings.Trim(t, "[]")); err == nil {
			return "an address" + m[len(t):]
		}
		return m
	})
}

// backoff is the delay before the attempt after attempt failures.
func (s *PushSender) backoff(attempt int) time.Duration {
	d := s.opt.Backoff
	for i := 1; i < attempt && d < s.opt.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, s.opt.MaxBackoff)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
