package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/holdline/holdline/tools"
)

// NewJournal returns a [tools.Journal] that keeps a session's write-ahead
// log in s, so that an intent without an outcome survives the worker that
// wrote it. Writes go under the lease that lease returns when they are
// made (the session's current one, renewed or not) and fail with
// ErrLeaseLost once the session has been taken over.
func NewJournal(s Store, lease func() Lease) tools.Journal {
	return &journal{s: s, lease: lease}
}

type journal struct {
	s     Store
	lease func() Lease
}

// WriteIntent appends r, which must carry no State: a record without one
// is an intent.
func (j *journal) WriteIntent(ctx context.Context, r tools.Record) error {
	if r.State != "" {
		return fmt.Errorf("store: intent of call %q carries state %q", r.CallID, r.State)
	}
	return j.s.Append(ctx, j.lease(), r)
}

// WriteOutcome appends r, which must carry the call's State: that is
// what tells it from an intent.
func (j *journal) WriteOutcome(ctx context.Context, r tools.Record) error {
	if r.State == "" {
		return fmt.Errorf("store: outcome of call %q carries no state", r.CallID)
	}
	return j.s.Append(ctx, j.lease(), r)
}

// Unresolved returns the session's intents that no later record with the
// same CallID resolves, in the order they were written.
func (j *journal) Unresolved(ctx context.Context, session string) ([]tools.Record, error) {
	recs, err := j.s.Journal(ctx, session)
	if err != nil {
		return nil, err
	}
	// Walk backwards so that "an outcome follows" is a set lookup; an
	// outcome resolves only the intents before it.
	resolved := map[string]bool{}
	var out []tools.Record
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		switch {
		case r.State != "":
			resolved[r.CallID] = true
		case !resolved[r.CallID]:
			out = append(out, r)
		}
	}
	slices.Reverse(out)
	return out, nil
}

// recordFor returns r as it is appended under l: a record names its
// session, and a record for another session is refused.
func recordFor(l Lease, r tools.Record) (tools.Record, error) {
	switch {
	case l.Session == "":
		return r, errors.New("store: append: lease names no session")
	case r.Session == "":
		r.Session = l.Session
	case r.Session != l.Session:
		return r, fmt.Errorf("store: append: record of session %q under the lease of session %q", r.Session, l.Session)
	}
	return r, nil
}
