package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// The streams and buckets of the bus contract, each declared once: its
// configuration (subjects, limits, replicas, storage), where a bucket's
// handle goes, which roles write it, whether edges and workers follow it
// with consumers of their own, and whether an edge must be able to write it
// to serve. Provisioning and binding (provision, bind), the NATS
// permissions of each role (Role.permissions) and the write probe
// (checkWritable) are derived from this table, so a new stream or bucket is
// a row here and its names in schemas/names.go; its byte-level contract is
// schemas/README.md.

// store is one stream or bucket of the contract.
type store struct {
	stream string // a stream's name; "" for a bucket
	bucket string // a bucket's name; "" for a stream

	streamConfig func(c Config, st jetstream.StorageType) jetstream.StreamConfig
	kvConfig     func(c Config, st jetstream.StorageType) jetstream.KeyValueConfig
	// kv is where a bucket's handle is kept.
	kv func(b *Bus) *jetstream.KeyValue

	// writers are the roles that publish to a stream's subjects or write
	// a bucket's keys; every other role is denied both (admins may do
	// anything).
	writers []Role
	// followed: edges and workers read it with consumers of their own
	// (followers, event readers, KV watchers, the dead-letter listing),
	// which they create, pull from and delete.
	followed bool
	// serves: an edge writes it to serve at all (task records, work,
	// events) or its agents stay listed by it; the write probe asks its
	// leader (checkWritable).
	serves bool
	// lazy: a process that binds (Config.BindOnly) does not look it up at
	// start-up but on first use, so a process of a release that predates
	// it still starts.
	lazy bool
	// appendOnly: its writers append and never change what is stored;
	// only an admin user may change its configuration. Provisioning
	// creates it, and updates an existing one that differs only as far
	// as the user may (provisionAppendOnly); Role.permissions denies
	// every other role its updates and message deletes.
	appendOnly bool
}

// name is the stream's name: a bucket's is KV_<bucket>.
func (s store) name() string {
	if s.bucket != "" {
		return kvStream(s.bucket)
	}
	return s.stream
}

// subjects are what a store's writers publish to.
func (s store) subjects() []string {
	if s.bucket != "" {
		return []string{kvPrefix(s.bucket) + ">"}
	}
	return s.streamConfig(Config{}, jetstream.MemoryStorage).Subjects
}

// writtenBy reports whether r writes the store.
func (s store) writtenBy(r Role) bool { return slices.Contains(s.writers, r) }

var (
	everyRole = []Role{RoleEdge, RoleAdminEdge, RoleWorker}
	edges     = []Role{RoleEdge, RoleAdminEdge}
)

// contract is every stream and bucket, those an edge serves by first (the
// write probe asks them in this order).
var contract = []store{
	{
		bucket: schemas.BucketTasks, kv: func(b *Bus) *jetstream.KeyValue { return &b.tasks },
		writers: everyRole, followed: true, serves: true,
		kvConfig: func(c Config, st jetstream.StorageType) jetstream.KeyValueConfig {
			return jetstream.KeyValueConfig{
				Bucket:      schemas.BucketTasks,
				Description: "a2abus task records keyed by task id",
				// No bucket-wide TTL: only finished tasks expire, each by
				// its own message TTL set on the write that finished it
				// (see casTask). The marker makes an expiry visible to
				// watchers.
				LimitMarkerTTL: time.Minute,
				MaxBytes:       c.TaskMaxBytes,
				// The server counts the KV headers in the value size; the
				// record limit is checked (with a clear error) before
				// writing.
				MaxValueSize: c.TaskMaxValueSize + 4096,
				History:      1,
				Storage:      st,
				Replicas:     c.Replicas,
			}
		},
	},
	{
		stream: schemas.StreamIntake, writers: everyRole, serves: true,
		streamConfig: func(c Config, st jetstream.StorageType) jetstream.StreamConfig {
			return workQueue(c, st, schemas.StreamIntake, "a2abus submitted work waiting for its caller's turn, one subject per caller and task", schemas.SubjectIntakeAll)
		},
	},
	{
		// Edges move work here from the intake (dispatch.go).
		stream: schemas.StreamWork, writers: edges, serves: true,
		streamConfig: func(c Config, st jetstream.StorageType) jetstream.StreamConfig {
			return workQueue(c, st, schemas.StreamWork, "a2abus work items, one subject per agent", schemas.SubjectWorkAll)
		},
	},
	{
		stream: schemas.StreamEvents, writers: everyRole, followed: true, serves: true,
		streamConfig: func(c Config, st jetstream.StorageType) jetstream.StreamConfig {
			return jetstream.StreamConfig{
				Name:              schemas.StreamEvents,
				Description:       "a2abus task events, one subject per task",
				Subjects:          []string{schemas.SubjectEventsAll},
				Retention:         jetstream.LimitsPolicy,
				MaxAge:            c.EventsMaxAge,
				MaxBytes:          c.EventsMaxBytes,
				MaxMsgsPerSubject: c.EventsMaxPerTask,
				Discard:           jetstream.DiscardOld,
				Duplicates:        min(c.Duplicates, c.EventsMaxAge),
				Storage:           st,
				Replicas:          c.Replicas,
				// A deleted task's events are rolled up into one marker
				// that expires (see Bus.dropEvents), so the stream keeps
				// the events of stored tasks, not of every task within its
				// age and byte bounds.
				AllowRollup: true,
				AllowMsgTTL: true,
			}
		},
	},
	{
		// Registrations are the workers': a worker also removes those of
		// agents an admin removed, at once.
		bucket: schemas.BucketAgents, kv: func(b *Bus) *jetstream.KeyValue { return &b.agents },
		writers: []Role{RoleWorker}, followed: true, serves: true,
		kvConfig: func(c Config, st jetstream.StorageType) jetstream.KeyValueConfig {
			return jetstream.KeyValueConfig{
				Bucket:      schemas.BucketAgents,
				Description: "a2abus live agent registry",
				TTL:         c.AgentTTL,
				History:     1,
				Storage:     st,
				Replicas:    c.Replicas,
			}
		},
	},
	{
		stream: schemas.StreamDLQ, writers: []Role{RoleWorker}, followed: true,
		streamConfig: func(c Config, st jetstream.StorageType) jetstream.StreamConfig {
			return jetstream.StreamConfig{
				Name:        schemas.StreamDLQ,
				Description: "a2abus work that could not be processed",
				Subjects:    []string{schemas.SubjectDLQAll},
				Retention:   jetstream.LimitsPolicy,
				MaxAge:      7 * 24 * time.Hour,
				MaxBytes:    c.WorkMaxBytes,
				Discard:     jetstream.DiscardOld,
				Storage:     st,
				Replicas:    c.Replicas,
			}
		},
	},
	{
		// Wake-ups of push senders, after writes and new configs.
		stream: schemas.StreamNotify, writers: everyRole, lazy: true,
		streamConfig: func(c Config, st jetstream.StorageType) jetstream.StreamConfig {
			return jetstream.StreamConfig{
				Name:        schemas.StreamNotify,
				Description: "a2abus push-sender wake-ups, at most one per task",
				Subjects:    []string{schemas.SubjectNotifyAll},
				Retention:   jetstream.WorkQueuePolicy,
				// One per task: a pending wake-up covers every write after
				// it.
				MaxMsgsPerSubject:    1,
				Discard:              jetstream.DiscardNew,
				DiscardNewPerSubject: true,
				MaxAge:               c.EventsMaxAge,
				Storage:              st,
				Replicas:             c.Replicas,
			}
		},
	},
	{
		bucket: schemas.BucketCards, kv: func(b *Bus) *jetstream.KeyValue { return &b.cards },
		writers: everyRole, followed: true,
		kvConfig: func(c Config, st jetstream.StorageType) jetstream.KeyValueConfig {
			return jetstream.KeyValueConfig{
				Bucket:      schemas.BucketCards,
				Description: "a2abus cache of discovered external agent cards",
				// Cards of agents nobody asks about any more age out.
				TTL:          c.CardTTL,
				MaxBytes:     c.CardMaxBytes,
				MaxValueSize: cardMaxValueSize,
				History:      1,
				Storage:      st,
				Replicas:     c.Replicas,
			}
		},
	},
	{
		bucket: schemas.BucketContexts, kv: func(b *Bus) *jetstream.KeyValue { return &b.contexts },
		writers: everyRole,
		kvConfig: func(c Config, st jetstream.StorageType) jetstream.KeyValueConfig {
			return jetstream.KeyValueConfig{
				Bucket:      schemas.BucketContexts,
				Description: "a2abus owners of context ids",
				// A claim outlives the tasks of its context by at most
				// this; a context nobody uses any more is free again after
				// it.
				TTL:      c.TaskTTL,
				History:  1,
				Storage:  st,
				Replicas: c.Replicas,
			}
		},
	},
	{
		// The dispatch and sweep leases: edges dispatch and sweep.
		bucket: schemas.BucketLeases, kv: func(b *Bus) *jetstream.KeyValue { return &b.leases },
		writers: edges,
		kvConfig: func(c Config, st jetstream.StorageType) jetstream.KeyValueConfig {
			return jetstream.KeyValueConfig{
				Bucket:      schemas.BucketLeases,
				Description: "a2abus leases of work one process does at a time",
				// A lease its holder stopped renewing (it died) is free
				// after this, or after the shorter TTL of its own key (the
				// dispatch lease).
				TTL:            leaseTTL,
				LimitMarkerTTL: time.Minute,
				History:        1,
				Storage:        st,
				Replicas:       c.Replicas,
			}
		},
	},
	{
		bucket: schemas.BucketPush, kv: func(b *Bus) *jetstream.KeyValue { return &b.push.kv },
		writers: everyRole, lazy: true,
		kvConfig: func(c Config, st jetstream.StorageType) jetstream.KeyValueConfig {
			return jetstream.KeyValueConfig{
				Bucket:      schemas.BucketPush,
				Description: "a2abus push-notification configs, a task's under its id",
				// An emptied set is purged with a marker that expires.
				LimitMarkerTTL: time.Minute,
				MaxValueSize:   pushSetMaxValueSize,
				History:        1,
				Storage:        st,
				Replicas:       c.Replicas,
			}
		},
	},
	{
		// The run-time registry: every edge and worker reads and follows
		// it; only an admin edge writes it, serving its admin API.
		bucket: schemas.BucketRegistry, kv: func(b *Bus) *jetstream.KeyValue { return &b.reg.kv },
		writers: []Role{RoleAdminEdge}, followed: true, lazy: true,
		kvConfig: func(c Config, st jetstream.StorageType) jetstream.KeyValueConfig {
			return jetstream.KeyValueConfig{
				Bucket:      schemas.BucketRegistry,
				Description: "a2abus run-time registry: remote agents and maintenance set by admins",
				History:     1,
				Storage:     st,
				Replicas:    c.Replicas,
			}
		},
	},
	{
		// The audit record (audit.go): every process may append, none
		// but an admin user may change it, and nobody may delete or purge
		// what it holds.
		stream: schemas.StreamAudit, writers: everyRole, followed: true, lazy: true, appendOnly: true,
		streamConfig: func(c Config, st jetstream.StorageType) jetstream.StreamConfig {
			return jetstream.StreamConfig{
				Name:        schemas.StreamAudit,
				Description: "a2abus audit record: calls of audited trust levels and admin actions, append-only",
				Subjects:    []string{schemas.SubjectAuditAll},
				Retention:   jetstream.LimitsPolicy,
				MaxAge:      c.AuditMaxAge,
				MaxBytes:    c.AuditMaxBytes,
				// Full: the oldest records go, so a full record never
				// refuses the calls it audits.
				Discard:    jetstream.DiscardOld,
				DenyDelete: true,
				DenyPurge:  true,
				Storage:    st,
				Replicas:   c.Replicas,
			}
		},
	},
	{
		// Budgets' counters (budget.go): edges charge tasks, llm workers
		// add tokens. Each write carries its own TTL, past its window.
		bucket: schemas.BucketBudgets, kv: func(b *Bus) *jetstream.KeyValue { return &b.budgets.kv },
		writers: everyRole, lazy: true,
		kvConfig: func(c Config, st jetstream.StorageType) jetstream.KeyValueConfig {
			return jetstream.KeyValueConfig{
				Bucket:      schemas.BucketBudgets,
				Description: "a2abus budget counters, one key per budget and window",
				// Enables the per-key TTLs; the marker of an expired
				// counter goes after this.
				LimitMarkerTTL: time.Minute,
				History:        1,
				Storage:        st,
				Replicas:       c.Replicas,
			}
		},
	},
}

// workQueue is the configuration of the work stream and the intake, which
// bound work alike: the intake holds it until its caller's turn, the work
// stream while it runs.
func workQueue(c Config, st jetstream.StorageType, name, description, subjects string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        name,
		Description: description,
		Subjects:    []string{subjects},
		Retention:   jetstream.WorkQueuePolicy,
		MaxAge:      c.WorkMaxAge,
		MaxBytes:    c.WorkMaxBytes,
		Discard:     jetstream.DiscardNew,
		Duplicates:  min(c.Duplicates, c.WorkMaxAge),
		Storage:     st,
		Replicas:    c.Replicas,
	}
}

// contractStreams are the names of the streams of the contract, buckets'
// included, that keep accepts.
func contractStreams(keep func(store) bool) []string {
	var out []string
	for _, s := range contract {
		if keep(s) {
			out = append(out, s.name())
		}
	}
	return out
}

var (
	// busStreams are every stream of the bus contract, buckets' included.
	busStreams = contractStreams(func(store) bool { return true })
	// followed are the streams edges and workers read with consumers of
	// their own.
	followed = contractStreams(func(s store) bool { return s.followed })
	// writableStreams are what an edge writes to serve (store.serves).
	writableStreams = contractStreams(func(s store) bool { return s.serves })
)

// provision creates or updates every stream and bucket. It never deletes:
// running it from every process at start-up is safe, and a changed bound is
// applied in place. With BindOnly it only looks them up (bind).
func (b *Bus) provision(ctx context.Context) error {
	if b.cfg.BindOnly {
		return b.bind(ctx)
	}
	st := b.storage()
	for _, s := range contract {
		if s.appendOnly {
			if err := b.provisionAppendOnly(ctx, s.streamConfig(b.cfg, st)); err != nil {
				return fmt.Errorf("bus: provision stream %s: %w", s.name(), err)
			}
			continue
		}
		if s.bucket == "" {
			if _, err := b.js.CreateOrUpdateStream(ctx, s.streamConfig(b.cfg, st)); err != nil {
				return fmt.Errorf("bus: provision stream %s: %w", s.name(), err)
			}
			continue
		}
		kv, err := b.js.CreateOrUpdateKeyValue(ctx, s.kvConfig(b.cfg, st))
		if err != nil {
			return fmt.Errorf("bus: provision bucket %s: %w", s.bucket, err)
		}
		*s.kv(b) = kv
	}
	return nil
}

// provisionAppendOnly creates an append-only stream (store.appendOnly),
// or, when it exists with another configuration, updates it if this
// connection's user may: an admin user (serve's own connection, an
// operator's) applies changed bounds; an edge's is refused the update by
// its permissions, and the stream keeps the bounds an admin gave it, which
// is logged, since the operator's configuration is then not what holds.
func (b *Bus) provisionAppendOnly(ctx context.Context, cfg jetstream.StreamConfig) error {
	_, err := b.js.CreateStream(ctx, cfg)
	if err == nil || !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return err
	}
	wctx, stop := b.refusals.watch(ctx, jsAPIPrefix+"STREAM.UPDATE."+cfg.Name)
	defer stop()
	_, err = b.js.UpdateStream(wctx, cfg)
	if refused := refusedCause(wctx); refused != nil {
		b.log.Info("the "+cfg.Name+" stream exists with other bounds than this process's, and this process's NATS user may not change them (only an admin may); keeping the stream's",
			"stream", cfg.Name)
		return nil
	}
	return err
}

// bind looks up every stream and bucket but the lazy ones, failing while
// one is missing.
func (b *Bus) bind(ctx context.Context) error {
	for _, s := range contract {
		switch {
		case s.lazy:
		case s.bucket == "":
			if _, err := b.js.Stream(ctx, s.name()); err != nil {
				return fmt.Errorf("bus: bind stream %s: %w", s.name(), err)
			}
		default:
			kv, err := b.js.KeyValue(ctx, s.bucket)
			if err != nil {
				return fmt.Errorf("bus: bind bucket %s: %w", s.bucket, err)
			}
			*s.kv(b) = kv
		}
	}
	return nil
}
