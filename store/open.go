package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Open opens the store a URL names, so that a deployment picks its store
// with one setting:
//
//	file:PATH                 an embedded file store ([OpenFile])
//	redis://HOST:PORT[/DB]    a Redis server ([OpenRedis])
//
// Anything else is an error that lists these forms.
func Open(ctx context.Context, url string, opts ...Option) (Store, error) {
	switch {
	case strings.HasPrefix(url, "file:"):
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return OpenFile(strings.TrimPrefix(url, "file:"), opts...)
	case strings.HasPrefix(url, "redis://"):
		return OpenRedis(ctx, url, opts...)
	}
	// Name only the scheme: the rest of a URL may hold a password.
	scheme, _, ok := strings.Cut(url, ":")
	if !ok || scheme == "" {
		return nil, errors.New("store: no store URL scheme: want file:PATH or redis://HOST:PORT[/DB]")
	}
	return nil, fmt.Errorf("store: unsupported store URL scheme %q: want file:PATH or redis://HOST:PORT[/DB]", scheme)
}

// An Option configures a store at open.
type Option func(*options)

type options struct {
	now         func() time.Time
	prefix      string
	lockTimeout time.Duration
	sync        bool
}

func newOptions(opts []Option) options {
	o := options{now: time.Now, prefix: "holdline:", lockTimeout: time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithClock makes the file store read the time from now instead of
// [time.Now] for lease and alias expiry, so that tests can move time
// without sleeping. Redis expires keys on its own clock and ignores it.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithSync makes the file store sync the file to disk on every write, so
// that checkpoints survive the machine losing power, at the price of a
// disk flush per write (milliseconds at p99 on the development machine's
// disk, against well under one without). Without it a write is in the
// operating system's cache when it returns: it survives the worker
// crashing or being killed, which is what a checkpoint is for, but not the
// machine going down. Redis ignores it (its persistence is its own
// configuration).
func WithSync() Option { return func(o *options) { o.sync = true } }

// WithPrefix puts the Redis store's keys under p instead of "holdline:",
// so that several deployments, or tests, can share one Redis database.
// The file store ignores it.
func WithPrefix(p string) Option {
	return func(o *options) { o.prefix = p }
}

// withLockTimeout bounds how long OpenFile waits for another process to
// let go of the file (one second by default); tests shorten it.
func withLockTimeout(d time.Duration) Option {
	return func(o *options) { o.lockTimeout = d }
}

// checkAcquire checks Acquire's arguments, the same for every store.
func checkAcquire(ctx context.Context, session, owner string, ttl time.Duration) error {
	switch {
	case session == "":
		return errors.New("store: acquire: empty session")
	case owner == "":
		return errors.New("store: acquire: empty owner")
	case ttl <= 0:
		return fmt.Errorf("store: acquire: lease ttl %v is not positive", ttl)
	}
	return ctx.Err()
}

// checkAlias checks PutAlias's arguments, the same for every store.
func checkAlias(ctx context.Context, name, session string, ttl time.Duration) error {
	switch {
	case name == "":
		return errors.New("store: put alias: empty name")
	case session == "":
		return errors.New("store: put alias: empty session")
	case ttl <= 0:
		return fmt.Errorf("store: put alias: ttl %v is not positive", ttl)
	}
	return ctx.Err()
}

// errAliasNotFound names no alias: an alias may be a secret token.
var errAliasNotFound = fmt.Errorf("%w: alias", ErrNotFound)
