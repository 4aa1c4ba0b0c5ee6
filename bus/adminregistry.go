package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/a2abus/a2abus/schemas"
)

// The run-time registry: what admins set for agents without a restart,
// RegistryEntry by agent name in BucketRegistry — remote agents that serve
// and worker processes run, and maintenance, which readers of the agent
// registry (AgentDirectory) show as the agent's health.

func (b *Bus) registry(ctx context.Context) (jetstream.KeyValue, error) {
	return b.reg.get(ctx, b.js, schemas.BucketRegistry)
}

// PutRegistryEntry stores an agent's entry (replacing it). It returns
// ErrNotPermitted (classified as schemas.ErrPermissionDenied) at once when
// the server refuses the write to this connection's NATS user (a role
// other than RoleAdminEdge or RoleAdmin).
func (b *Bus) PutRegistryEntry(ctx context.Context, e schemas.RegistryEntry) error {
	if !schemas.ValidAgentName(e.Agent) {
		return schemas.Errorf(schemas.ErrInvalidParams, "%q is not an agent name (lowercase letters, digits, '-', '_')", e.Agent)
	}
	kv, err := b.registry(ctx)
	if err != nil {
		return err
	}
	val, err := json.Marshal(e)
	if err != nil {
		return err
	}
	wctx, stop := b.refusals.watch(ctx, kvPrefix(schemas.BucketRegistry)+e.Agent)
	defer stop()
	if _, err := kv.Put(wctx, e.Agent, val); err != nil {
		return errRegistryChange("bus: store registry entry", wctx, err)
	}
	return nil
}

// errRegistryChange classifies a failed change of the registry: refused
// to this connection's user (the refusal that ended wctx), or a bus that
// cannot take it now.
func errRegistryChange(op string, wctx context.Context, err error) error {
	if cause := refusedCause(wctx); cause != nil {
		return fmt.Errorf("%s: %w: %w", op, schemas.Errorf(schemas.ErrPermissionDenied,
			"this process's NATS user may not change the agent registry (it needs the %s role)", RoleAdminEdge), cause)
	}
	return errUnavailable(op, err)
}

// RegistryEntry reads an agent's entry; ok is false when there is none.
func (b *Bus) RegistryEntry(ctx context.Context, agent string) (schemas.RegistryEntry, bool, error) {
	kv, err := b.registry(ctx)
	if err != nil {
		return schemas.RegistryEntry{}, false, err
	}
	v, err := kv.Get(ctx, agent)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return schemas.RegistryEntry{}, false, nil
	}
	if err != nil {
		return schemas.RegistryEntry{}, false, errUnavailable("bus: read registry entry", err)
	}
	var e schemas.RegistryEntry
	if err := json.Unmarshal(v.Value(), &e); err != nil {
		return e, false, fmt.Errorf("bus: registry entry of %s: %w", agent, err)
	}
	return e, true, nil
}

// DeleteRegistryEntry removes an agent's entry (nothing to remove is not
// an error). Like PutRegistryEntry, it returns ErrNotPermitted at once
// when the server refuses the change to this connection's NATS user.
func (b *Bus) DeleteRegistryEntry(ctx context.Context, agent string) error {
	kv, err := b.registry(ctx)
	if err != nil {
		return err
	}
	wctx, stop := b.refusals.watch(ctx, kvPrefix(schemas.BucketRegistry)+agent)
	defer stop()
	if err := kv.Delete(wctx, agent); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return errRegistryChange("bus: delete registry entry", wctx, err)
	}
	return nil
}

// RegistryEntries lists every entry, by agent name.
func (b *Bus) RegistryEntries(ctx context.Context) ([]schemas.RegistryEntry, error) {
	kv, err := b.registry(ctx)
	if err != nil {
		return nil, err
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, errUnavailable("bus: list registry", err)
	}
	var out []schemas.RegistryEntry
	for k := range lister.Keys() {
		e, ok, err := b.RegistryEntry(ctx, k)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Agent < out[j].Agent })
	return out, nil
}

// WatchRegistry calls fn with every entry as it is now and with each
// change after, until ctx ends (then it returns nil): a deleted entry
// comes with only its Agent set and deleted true. It is a follower of the
// bucket's stream, so a lost consumer or connection is replaced as for
// the other buckets followed.
func (b *Bus) WatchRegistry(ctx context.Context, fn func(e schemas.RegistryEntry, deleted bool)) error {
	prefix := kvPrefix(schemas.BucketRegistry)
	f := b.newFollower("registry", kvStream(schemas.BucketRegistry), jetstream.DeliverLastPerSubjectPolicy, prefix+">")
	return f.run(ctx, func(m followMsg) {
		if m.Op != jetstream.KeyValuePut {
			fn(schemas.RegistryEntry{Agent: strings.TrimPrefix(m.Subject, prefix)}, true)
			return
		}
		var e schemas.RegistryEntry
		if json.Unmarshal(m.Value, &e) == nil {
			fn(e, false)
		}
	}, func() {})
}

// UnregisterAgent removes an agent's registration at once (its workers
// are stopped for good), instead of letting it expire.
func (b *Bus) UnregisterAgent(ctx context.Context, agent string) error {
	if err := b.agents.Delete(ctx, agent); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return errUnavailable("bus: unregister agent", err)
	}
	return nil
}
