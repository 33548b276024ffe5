package store

import (
	"context"
	"errors"
	"time"

	"github.com/holdline/holdline/tools"
)

// Errors callers branch on. Implementations wrap them.
var (
	// ErrNotFound: no checkpoint, or no alias, under that name.
	ErrNotFound = errors.New("store: not found")
	// ErrLeaseHeld: another owner holds an unexpired lease on the session.
	ErrLeaseHeld = errors.New("store: session leased by another owner")
	// ErrLeaseLost: the lease given expired or was taken over; the write
	// was refused so that a worker that lost a session cannot overwrite
	// the new owner's state.
	ErrLeaseLost = errors.New("store: lease lost")
)

// Lease says that Owner may write Session's checkpoints until Expires.
// Token grows every time the session changes hands (a fencing token):
// writes under an older token are refused even if the clocks disagree.
type Lease struct {
	Session string
	Owner   string
	Token   uint64
	Expires time.Time
}

// Store keeps sessions' checkpoints, their journal of mutations and the
// aliases (resume tokens, handoff tokens, a caller's number) that lead to
// them, with leases so that one worker at a time owns a live session.
//
// Every method is safe for concurrent use and honours ctx.
type Store interface {
	// Acquire takes the lease on session for owner for ttl, or renews it
	// if owner holds it (same Token, later Expires). It fails with
	// ErrLeaseHeld while another owner's lease is unexpired; taking an
	// expired or released lease increments Token.
	Acquire(ctx context.Context, session, owner string, ttl time.Duration) (Lease, error)
	// Takeover takes the lease on session for owner whoever holds it, with
	// a new Token, so that every earlier holder's writes are refused from
	// then on. It is for a worker that has proof the session moved to it
	// (a caller resuming with its token): the old worker may be dead with
	// its lease unexpired, or alive and about to find it lost.
	Takeover(ctx context.Context, session, owner string, ttl time.Duration) (Lease, error)
	// Release gives the lease up if it is still the one held; releasing a
	// lost lease is not an error.
	Release(ctx context.Context, l Lease) error

	// Save replaces the session's checkpoint with data, if l is still the
	// session's current, unexpired lease (ErrLeaseLost otherwise).
	Save(ctx context.Context, l Lease, data []byte) error
	// Load returns the session's latest checkpoint (ErrNotFound if none).
	Load(ctx context.Context, session string) ([]byte, error)
	// Delete removes the session's checkpoint and journal (the session
	// ended); its aliases expire on their own.
	Delete(ctx context.Context, l Lease) error

	// Append adds a journal record (a mutation's intent, or its outcome)
	// to the session's journal under l (ErrLeaseLost otherwise).
	Append(ctx context.Context, l Lease, r tools.Record) error
	// Journal returns the session's records in the order appended.
	Journal(ctx context.Context, session string) ([]tools.Record, error)

	// PutAlias makes name lead to session for ttl, replacing any earlier
	// value.
	PutAlias(ctx context.Context, name, session string, ttl time.Duration) error
	// TakeAlias returns the session name leads to and removes the alias
	// in the same step, so that a token is used once (ErrNotFound if
	// absent or expired).
	TakeAlias(ctx context.Context, name string) (string, error)
	// GetAlias returns the session name leads to, leaving it in place.
	GetAlias(ctx context.Context, name string) (string, error)

	// Close releases the store's resources.
	Close() error
}
