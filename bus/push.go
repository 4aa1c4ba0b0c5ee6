package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// The push-notification configs of tasks live in BucketPush, all of a
// task's in one value under its id (schemas.PushConfigSet: at most
// MaxPushConfigsPerTask, changed by compare-and-swap, read in one get). A
// config belongs to its task: every operation
// reads the task through Task first, so only the task's owner (or an admin
// of its tenant) creates, reads, lists or deletes one, and a stranger's
// task is not found, as everywhere. The task record's Push flag is set
// before the first config is stored, so whatever writes the task's events
// knows, from the record it already holds, whether anyone is to be told
// (tasks without configs cost nothing).

// MaxPushConfigsPerTask bounds the configs of one task.
const MaxPushConfigsPerTask = 16

// pushSetMaxValueSize bounds a task's set of configs: MaxPushConfigsPerTask
// configs at their largest, with room for their JSON.
const pushSetMaxValueSize = MaxPushConfigsPerTask * (maxPushURL + maxPushToken + maxPushCredentials + maxPushConfigID + 1024)

// Bounds of a config's fields: a URL, a token and credentials sent as
// header values with every notification.
const (
	maxPushURL         = 2048
	maxPushToken       = 1024
	maxPushCredentials = 4096
	maxPushConfigID    = 128
)

// lazyBucket is a KV bucket bound on first use: one a process of an
// earlier release did not provision, which processes that never touch it
// should not fail to start for (BucketPush, BucketRegistry).
type lazyBucket struct {
	mu sync.Mutex
	kv jetstream.KeyValue
}

func (l *lazyBucket) get(ctx context.Context, js jetstream.JetStream, name string) (jetstream.KeyValue, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kv != nil {
		return l.kv, nil
	}
	kv, err := js.KeyValue(ctx, name)
	if err != nil {
		return nil, errUnavailable("bus: bind bucket "+name, err)
	}
	l.kv = kv
	return kv, nil
}

func (b *Bus) pushConfigs(ctx context.Context) (jetstream.KeyValue, error) {
	return b.push.get(ctx, b.js, schemas.BucketPush)
}

// CheckPushConfig checks a config's fields as a client sent them: a
// url that is an absolute http(s) URL with a host, an authentication
// scheme that is an HTTP auth scheme token, no line breaks or control
// characters in what becomes a header value, and the size bounds. Where
// the URL may point (HTTPS only, no private addresses) is the caller's
// policy, checked beside this.
func CheckPushConfig(c *schemas.TaskPushNotificationConfig) error {
	bad := func(field, format string, args ...any) error {
		return schemas.Errorf(schemas.ErrInvalidParams, "%s: %s", field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.URL == "":
		return bad("url", "is required")
	case len(c.URL) > maxPushURL:
		return bad("url", "is longer than %d bytes", maxPushURL)
	case len(c.ID) > maxPushConfigID:
		return bad("id", "is longer than %d bytes", maxPushConfigID)
	case len(c.Token) > maxPushToken:
		return bad("token", "is longer than %d bytes", maxPushToken)
	case !schemas.HeaderValueSafe(c.Token):
		return bad("token", "holds a control character")
	case !schemas.HeaderValueSafe(c.ID):
		return bad("id", "holds a control character")
	}
	// The URL is not echoed: it may carry a secret (user info, a token in
	// its query), and the caller knows what it sent.
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return bad("url", "is not an absolute http or https URL without user credentials")
	}
	if a := c.Authentication; a != nil {
		switch {
		case a.Scheme == "":
			return bad("authentication.scheme", "is required")
		case !schemas.HTTPToken(a.Scheme):
			return bad("authentication.scheme", "%q is not an HTTP authentication scheme name", a.Scheme)
		case len(a.Credentials) > maxPushCredentials:
			return bad("authentication.credentials", "are longer than %d bytes", maxPushCredentials)
		case !schemas.HeaderValueSafe(a.Credentials):
			return bad("authentication.credentials", "hold a control character")
		}
	}
	return nil
}

// CreatePushConfig stores a push-notification config for a task of o's and
// returns it as stored: with the task's id, and an id of its own when the
// client gave none. A config with the id of one the task has replaces it.
// dialect is the A2A version it came through ("1.0" or "0.3"); its
// notifications take that version's shape.
func (b *Bus) CreatePushConfig(ctx context.Context, o Owner, c schemas.TaskPushNotificationConfig, dialect string) (*schemas.PushConfigRecord, error) {
	pr, err := newPushConfig(c, c.TaskID, dialect)
	if err != nil {
		return nil, err
	}
	rec, rev, err := b.Task(ctx, o, c.TaskID)
	if err != nil {
		return nil, err
	}
	// The flag first: a config stored beside a task without it would never
	// be told anything.
	if !rec.Push {
		if rec, rev, err = b.update(ctx, rec.Task.ID, rec, rev, func(r *schemas.TaskRecord) error {
			r.Push = true
			return nil
		}, 0); err != nil {
			return nil, err
		}
	}
	// It is told of what happens from now: events stored before the record
	// read are not news to whoever registers it.
	pr.Delivered = RecordCursor(rec, rev)
	if last, err := b.LastStoredEvent(ctx, rec.Task.ID); err == nil {
		pr.DeliveredSeq = last.Seq // nothing before it is news
	}
	err = b.changePushConfigs(ctx, c.TaskID, func(set *schemas.PushConfigSet) error {
		if i := set.Index(pr.Config.ID); i >= 0 {
			pr.CreatedAt = set.Configs[i].CreatedAt
			set.Configs[i] = *pr
			return nil
		}
		if len(set.Configs) >= MaxPushConfigsPerTask {
			return schemas.Errorf(schemas.ErrInvalidParams, "task %s has %d push notification configs, the most a task may have; delete one first", c.TaskID, len(set.Configs))
		}
		set.Configs = append(set.Configs, *pr)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Events written between the record read and the config stored woke a
	// sender that found no config: wake it again.
	b.wakePush(ctx, c.TaskID)
	return pr, nil
}

// newPushConfig is c, checked, as stored for task taskID: with the task's
// id, an id of its own when the client gave none, and the A2A version it
// came through.
func newPushConfig(c schemas.TaskPushNotificationConfig, taskID, dialect string) (*schemas.PushConfigRecord, error) {
	if err := CheckPushConfig(&c); err != nil {
		return nil, err
	}
	c.TaskID = taskID
	if c.ID == "" {
		c.ID = schemas.NewID()
	}
	return &schemas.PushConfigRecord{Config: c, Dialect: dialect, CreatedAt: *schemas.Now()}, nil
}

// PushConfig reads one config of a task of o's; a config that does not
// exist is ErrTaskNotFound, as the specification asks.
func (b *Bus) PushConfig(ctx context.Context, o Owner, taskID, id string) (*schemas.PushConfigRecord, error) {
	if id == "" {
		return nil, schemas.Errorf(schemas.ErrInvalidParams, "id is required")
	}
	set, err := b.PushConfigs(ctx, o, taskID)
	if err != nil {
		return nil, err
	}
	for i := range set {
		if set[i].Config.ID == id {
			return &set[i], nil
		}
	}
	return nil, schemas.Errorf(schemas.ErrTaskNotFound, "task %s has no push notification config %q", taskID, id).With("taskId", taskID)
}

// PushConfigs lists the configs of a task of o's, in the order they were
// first created.
func (b *Bus) PushConfigs(ctx context.Context, o Owner, taskID string) ([]schemas.PushConfigRecord, error) {
	if _, _, err := b.Task(ctx, o, taskID); err != nil {
		return nil, err
	}
	set, _, err := b.readPushConfigs(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return set.Configs, nil
}

// DeletePushConfig deletes a config of a task of o's. Deleting one that is
// not there succeeds: the specification makes delete idempotent.
func (b *Bus) DeletePushConfig(ctx context.Context, o Owner, taskID, id string) error {
	if id == "" {
		return schemas.Errorf(schemas.ErrInvalidParams, "id is required")
	}
	if _, _, err := b.Task(ctx, o, taskID); err != nil {
		return err
	}
	return b.changePushConfigs(ctx, taskID, func(set *schemas.PushConfigSet) error {
		if i := set.Index(id); i >= 0 {
			set.Configs = slices.Delete(set.Configs, i, i+1)
		}
		return nil
	})
}

// readPushConfigs reads a task's configs and their revision (0: none).
func (b *Bus) readPushConfigs(ctx context.Context, taskID string) (*schemas.PushConfigSet, uint64, error) {
	kv, err := b.pushConfigs(ctx)
	if err != nil {
		return nil, 0, err
	}
	e, err := kv.Get(ctx, taskID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return &schemas.PushConfigSet{}, 0, nil
	}
	if err != nil {
		return nil, 0, errUnavailable("bus: read push configs", err)
	}
	var set schemas.PushConfigSet
	if err := readJSON(e.Value(), &set); err != nil {
		return nil, 0, fmt.Errorf("bus: decode push configs of task %s: %w", taskID, err)
	}
	return &set, e.Revision(), nil
}

// changePushConfigs applies change to a task's configs by compare-and-swap,
// reading again after a lost race; a set left empty is deleted.
func (b *Bus) changePushConfigs(ctx context.Context, taskID string, change func(*schemas.PushConfigSet) error) error {
	kv, err := b.pushConfigs(ctx)
	if err != nil {
		return err
	}
	for range casAttempts {
		set, rev, err := b.readPushConfigs(ctx, taskID)
		if err != nil {
			return err
		}
		if err := change(set); err != nil {
			return err
		}
		if _, err := storePushConfigs(ctx, kv, taskID, set, rev); !errors.Is(err, errPushConfigsRace) {
			return err
		}
	}
	return schemas.Errorf(schemas.ErrUnavailable, "the push notification configs of task %s are being changed concurrently; retry", taskID)
}

// errPushConfigsRace is storePushConfigs's lost compare-and-swap.
var errPushConfigsRace = errors.New("bus: push configs changed meanwhile")

// storePushConfigs stores a task's configs by compare-and-swap on rev (0:
// none stored): an empty set is purged (or, never stored, left alone). It
// returns the new revision (0 once purged), errPushConfigsRace when
// someone changed them since rev.
func storePushConfigs(ctx context.Context, kv jetstream.KeyValue, taskID string, set *schemas.PushConfigSet, rev uint64) (uint64, error) {
	var err error
	var nrev uint64
	switch {
	case len(set.Configs) == 0 && rev == 0:
		return 0, nil
	case len(set.Configs) == 0:
		err = kv.Purge(ctx, taskID, jetstream.LastRevision(rev), jetstream.PurgeTTL(time.Second))
	default:
		val, merr := json.Marshal(set)
		if merr != nil {
			return 0, fmt.Errorf("bus: encode push configs: %w", merr)
		}
		if rev == 0 {
			nrev, err = kv.Create(ctx, taskID, val)
		} else {
			nrev, err = kv.Update(ctx, taskID, val, rev)
		}
	}
	switch {
	case err == nil:
		return nrev, nil
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return 0, errPushConfigsRace
	default:
		return 0, errUnavailable("bus: store push configs", err)
	}
}
