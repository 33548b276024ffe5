package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/holdline/holdline/tools"
)

// Buckets of the file store. The journal bucket holds one nested bucket
// per session whose keys are big-endian sequence numbers, so that a cursor
// reads a session's records in the order they were appended.
var (
	bucketCheckpoints = []byte("checkpoints")
	bucketJournal     = []byte("journal")
	bucketLeases      = []byte("leases")
	bucketAliases     = []byte("aliases")
)

// File is a [Store] in one file, on bbolt: the store `holdline serve` uses
// when nothing else is configured. The file is locked while open, so one
// process at a time uses it; within that process every method is safe for
// concurrent use. Lease and alias expiry read the clock given by
// [WithClock].
type File struct {
	db   *bbolt.DB
	now  func() time.Time
	path string
}

var _ Store = (*File)(nil)

// leaseRecord is a session's lease as stored. A released lease keeps its
// Token with an empty Owner, so that the next holder's token is larger.
type leaseRecord struct {
	Owner   string `json:"owner,omitempty"`
	Token   uint64 `json:"token"`
	Expires int64  `json:"expires,omitempty"` // Unix nanoseconds
}

// aliasRecord is an alias as stored.
type aliasRecord struct {
	Session string `json:"session"`
	Expires int64  `json:"expires"` // Unix nanoseconds
}

// OpenFile opens the file store at path, creating it if absent, and drops
// the aliases that expired while it was closed. If another process has the
// file open, OpenFile gives up after a second with an error saying so
// rather than waiting for it.
func OpenFile(path string, opts ...Option) (*File, error) {
	if path == "" {
		return nil, errors.New("store: empty file path")
	}
	o := newOptions(opts)
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: o.lockTimeout, NoSync: !o.sync})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("store: %s is in use by another process (%w after %v)", path, err, o.lockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketCheckpoints, bucketJournal, bucketLeases, bucketAliases} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return sweepAliases(tx, o.now())
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: initialise %s: %w", path, err)
	}
	return &File{db: db, now: o.now, path: path}, nil
}

// Acquire takes or renews the lease on session for owner; see [Store].
func (f *File) Acquire(ctx context.Context, session, owner string, ttl time.Duration) (Lease, error) {
	return f.take(ctx, session, owner, ttl, false)
}

// Takeover takes the lease on session for owner whoever holds it; see
// [Store].
func (f *File) Takeover(ctx context.Context, session, owner string, ttl time.Duration) (Lease, error) {
	return f.take(ctx, session, owner, ttl, true)
}

func (f *File) take(ctx context.Context, session, owner string, ttl time.Duration, force bool) (Lease, error) {
	if err := checkAcquire(ctx, session, owner, ttl); err != nil {
		return Lease{}, err
	}
	var l Lease
	err := f.db.Update(func(tx *bbolt.Tx) error {
		now := f.now()
		cur, err := getLease(tx, session)
		if err != nil {
			return err
		}
		live := cur.Owner != "" && now.UnixNano() < cur.Expires
		switch {
		case force:
			cur.Token++ // fence off every earlier holder, this owner's too
			cur.Owner = owner
		case live && cur.Owner != owner:
			return fmt.Errorf("%w: session %q", ErrLeaseHeld, session)
		case !live:
			cur.Token++ // a fresh take: fence off every earlier holder
			cur.Owner = owner
		}
		cur.Expires = now.Add(ttl).UnixNano()
		l = Lease{Session: session, Owner: owner, Token: cur.Token, Expires: time.Unix(0, cur.Expires)}
		return putJSON(tx.Bucket(bucketLeases), []byte(session), cur)
	})
	if err != nil {
		return Lease{}, wrapFile("acquire", err)
	}
	return l, nil
}

// Release gives l up if it is still held; see [Store].
func (f *File) Release(ctx context.Context, l Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := f.db.Update(func(tx *bbolt.Tx) error {
		cur, err := getLease(tx, l.Session)
		if err != nil {
			return err
		}
		if cur.Owner == "" || cur.Owner != l.Owner || cur.Token != l.Token {
			return nil // lost already: nothing of ours to give up
		}
		return putJSON(tx.Bucket(bucketLeases), []byte(l.Session), leaseRecord{Token: cur.Token})
	})
	return wrapFile("release", err)
}

// Save replaces the session's checkpoint under l; see [Store].
func (f *File) Save(ctx context.Context, l Lease, data []byte) error {
	return f.underLease(ctx, "save", l, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketCheckpoints).Put([]byte(l.Session), data)
	})
}

// Load returns the session's latest checkpoint; see [Store].
func (f *File) Load(ctx context.Context, session string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var data []byte
	err := f.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketCheckpoints).Get([]byte(session))
		if v == nil {
			return fmt.Errorf("%w: checkpoint of session %q", ErrNotFound, session)
		}
		data = bytes.Clone(v) // v is valid only within the transaction
		return nil
	})
	if err != nil {
		return nil, wrapFile("load", err)
	}
	return data, nil
}

// Delete removes the session's checkpoint and journal under l; see
// [Store].
func (f *File) Delete(ctx context.Context, l Lease) error {
	return f.underLease(ctx, "delete", l, func(tx *bbolt.Tx) error {
		if err := tx.Bucket(bucketCheckpoints).Delete([]byte(l.Session)); err != nil {
			return err
		}
		err := tx.Bucket(bucketJournal).DeleteBucket([]byte(l.Session))
		if errors.Is(err, berrors.ErrBucketNotFound) {
			return nil
		}
		return err
	})
}

// Append adds r to the session's journal under l; see [Store].
func (f *File) Append(ctx context.Context, l Lease, r tools.Record) error {
	r, err := recordFor(l, r)
	if err != nil {
		return err
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: append: %w", err)
	}
	return f.underLease(ctx, "append", l, func(tx *bbolt.Tx) error {
		b, err := tx.Bucket(bucketJournal).CreateBucketIfNotExists([]byte(l.Session))
		if err != nil {
			return err
		}
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		return b.Put(binary.BigEndian.AppendUint64(nil, seq), v)
	})
}

// Journal returns the session's records in the order appended; see
// [Store].
func (f *File) Journal(ctx context.Context, session string) ([]tools.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []tools.Record
	err := f.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketJournal).Bucket([]byte(session))
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var r tools.Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("record of session %q: %w", session, err)
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		return nil, wrapFile("journal", err)
	}
	return out, nil
}

// PutAlias makes name lead to session for ttl; see [Store].
func (f *File) PutAlias(ctx context.Context, name, session string, ttl time.Duration) error {
	if err := checkAlias(ctx, name, session, ttl); err != nil {
		return err
	}
	err := f.db.Update(func(tx *bbolt.Tx) error {
		rec := aliasRecord{Session: session, Expires: f.now().Add(ttl).UnixNano()}
		return putJSON(tx.Bucket(bucketAliases), []byte(name), rec)
	})
	return wrapFile("put alias", err)
}

// TakeAlias returns the session name leads to and removes the alias; see
// [Store].
func (f *File) TakeAlias(ctx context.Context, name string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	var (
		session string
		found   bool
	)
	err := f.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketAliases)
		var err error
		session, found, err = f.alias(b, name)
		if err != nil {
			return err
		}
		return b.Delete([]byte(name)) // used, or expired: gone either way
	})
	if err == nil && !found {
		err = errAliasNotFound
	}
	if err != nil {
		return "", wrapFile("take alias", err)
	}
	return session, nil
}

// GetAlias returns the session name leads to; see [Store].
func (f *File) GetAlias(ctx context.Context, name string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	var (
		session string
		found   bool
	)
	err := f.db.View(func(tx *bbolt.Tx) error {
		var err error
		session, found, err = f.alias(tx.Bucket(bucketAliases), name)
		return err
	})
	if err == nil && !found {
		err = errAliasNotFound
	}
	if err != nil {
		return "", wrapFile("get alias", err)
	}
	return session, nil
}

// Close closes the file, letting another process open it.
func (f *File) Close() error {
	if err := f.db.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", f.path, err)
	}
	return nil
}

// alias reads the session name's alias leads to, reporting an expired
// alias as absent. Expired aliases stay in the file until TakeAlias or
// PutAlias meets them, or the next OpenFile sweeps them away.
func (f *File) alias(b *bbolt.Bucket, name string) (string, bool, error) {
	v := b.Get([]byte(name))
	if v == nil {
		return "", false, nil
	}
	var rec aliasRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return "", false, err
	}
	if f.now().UnixNano() >= rec.Expires {
		return "", false, nil
	}
	return rec.Session, true, nil
}

// sweepAliases removes the expired aliases.
func sweepAliases(tx *bbolt.Tx, now time.Time) error {
	var expired [][]byte
	err := tx.Bucket(bucketAliases).ForEach(func(k, v []byte) error {
		var rec aliasRecord
		if json.Unmarshal(v, &rec) != nil || now.UnixNano() >= rec.Expires {
			expired = append(expired, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range expired {
		if err := tx.Bucket(bucketAliases).Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// underLease runs write in a transaction if l is the session's current,
// unexpired lease, and refuses it with ErrLeaseLost otherwise.
func (f *File) underLease(ctx context.Context, op string, l Lease, write func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := f.db.Update(func(tx *bbolt.Tx) error {
		cur, err := getLease(tx, l.Session)
		if err != nil {
			return err
		}
		if cur.Owner == "" || cur.Owner != l.Owner || cur.Token != l.Token || f.now().UnixNano() >= cur.Expires {
			return fmt.Errorf("%w: session %q, token %d", ErrLeaseLost, l.Session, l.Token)
		}
		return write(tx)
	})
	return wrapFile(op, err)
}

// getLease reads the session's lease; the zero record if it never had one.
func getLease(tx *bbolt.Tx, session string) (leaseRecord, error) {
	var rec leaseRecord
	v := tx.Bucket(bucketLeases).Get([]byte(session))
	if v == nil {
		return rec, nil
	}
	if err := json.Unmarshal(v, &rec); err != nil {
		return rec, fmt.Errorf("lease of session %q: %w", session, err)
	}
	return rec, nil
}

func putJSON(b *bbolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

// wrapFile prefixes err with the operation, leaving the package's own
// errors, which already say what failed, as they are.
func wrapFile(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrLeaseHeld), errors.Is(err, ErrLeaseLost):
		return err
	}
	return fmt.Errorf("store: %s: %w", op, err)
}
