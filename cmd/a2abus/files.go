package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/a2abus/a2abus/edge/auth"
)

// What cmd reads for the other packages. cmd is the one package that
// reads the environment and files (TestOnlyCmdReadsTheEnvironmentAndFiles):
// edge/auth parses the credentials it is handed, agents and MCP servers
// get the environment cmd gives them.

// loadAPIKeyFile reads an API key file (auth.ReadAPIKeys says its lines);
// an error names the file and a line by its number, never a key.
func loadAPIKeyFile(path string) ([]auth.APIKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := auth.ReadAPIKeys(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}

// loadSigningKeys reads a JWK set of private keys push notifications or
// cards are signed with (auth.ParseSigningKeys); an error names the file.
func loadSigningKeys(path, issuer string) (*auth.SigningKeys, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: signing keys: %v", auth.ErrInvalidConfig, err)
	}
	k, err := auth.ParseSigningKeys(data, issuer)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// loadCardTrustKeys reads the JWK set of keys trusted to sign the cards
// of external agents (auth.ParseCardKeys); an error names the file.
func loadCardTrustKeys(path string) (*auth.CardKeys, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: card trust keys: %v", auth.ErrInvalidConfig, err)
	}
	k, err := auth.ParseCardKeys(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// reloaded holds what a file says, read again when the file changes, so a
// key rotation needs no restart. A change is told by the file's content
// (a digest, which watch compares): a modification time would miss a file
// rewritten within the file system's timestamp granularity of the last
// load, and key files are small. A file that changes and no longer loads
// is logged, and what was loaded is kept.
type reloaded[T any] struct {
	cur  atomic.Pointer[T]
	path string // "" for a value no file holds (fixed)
	what string // what the file holds, for logs: "push notification keys"
	load func(path string) (*T, error)
	sum  [sha256.Size]byte // of the content as last loaded, or last refused; watch's alone
}

// loadReloaded reads the file at path with load.
func loadReloaded[T any](path, what string, load func(string) (*T, error)) (*reloaded[T], error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	v, err := load(path)
	if err != nil {
		return nil, err
	}
	r := &reloaded[T]{path: path, what: what, load: load, sum: sha256.Sum256(b)}
	r.cur.Store(v)
	return r, nil
}

// fixed holds v for good: what no file holds (serve's push key made at
// start-up).
func fixed[T any](v *T) *reloaded[T] {
	r := &reloaded[T]{}
	r.cur.Store(v)
	return r
}

// get is what the file says now.
func (r *reloaded[T]) get() *T { return r.cur.Load() }

// watch reads the file again when it changes, looking every every, until
// ctx ends, and tells audit (if set) of each change it took or refused: a
// key rotation is an admin action. One watch runs per reloaded.
func (r *reloaded[T]) watch(ctx context.Context, every time.Duration, log *slog.Logger, audit func(ctx context.Context, what string, err error)) {
	if r.path == "" {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b, err := os.ReadFile(r.path)
		if err != nil {
			continue // being replaced, perhaps: looked at again next time
		}
		sum := sha256.Sum256(b)
		if sum == r.sum {
			continue
		}
		r.sum = sum // a refused content is refused once, not every tick
		v, err := r.load(r.path)
		if err != nil {
			log.Warn("the "+r.what+" file changed but does not load; keeping what was loaded", "err", err)
			if audit != nil {
				audit(ctx, r.what, err)
			}
			continue
		}
		r.cur.Store(v)
		log.Info(r.what+" reloaded", "file", r.path)
		if audit != nil {
			audit(ctx, r.what, nil)
		}
	}
}

// environ is the "NAME=value" of each variable of names this process's
// environment sets: what a child process given only those gets.
func environ(names []string) []string {
	env := []string{}
	for _, name := range names {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}
