package handoff

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/store"
	"github.com/holdline/holdline/tools"
)

// DefaultLeaseTTL is how long a worker's hold on a session lasts without
// renewal: a dead worker's sessions are free for another after it.
const DefaultLeaseTTL = 10 * time.Second

// writeTimeout bounds one checkpoint write or lease renewal.
const writeTimeout = 2 * time.Second

// ErrLeaseLost is returned by Checkpointer.Run when another worker took the
// session over: this one must stop speaking for it.
var ErrLeaseLost = store.ErrLeaseLost

// Checkpointer writes one session's checkpoints to a store, sealed, under
// the session's lease, which it holds and renews. The session hands it
// states at its clean points (engine.WithCheckpoints with Offer); a state
// offered while a write is under way replaces any still waiting, so the
// store gets the newest and the session core never waits. Each write's
// result goes to the report function (runtime.Session.CheckpointDone), so
// the session's events say when checkpoints fail and when they are back;
// the call goes on in memory meanwhile.
type Checkpointer struct {
	st        store.Store
	key       Key
	owner     string
	session   string
	ttl       time.Duration
	transport map[string]string
	report    func(seq uint64, err error)

	mu      sync.Mutex
	pending *engine.State
	lease   store.Lease
	wake    chan struct{}

	// wmu orders writes: a state older than one written is not written.
	wmu     sync.Mutex
	written uint64 // Seq of the newest state written
}

// CheckpointerOption configures a Checkpointer.
type CheckpointerOption func(*Checkpointer)

// WithLeaseTTL sets the lease's time to live (default DefaultLeaseTTL); it
// is renewed every third of it.
func WithLeaseTTL(d time.Duration) CheckpointerOption { return func(c *Checkpointer) { c.ttl = d } }

// WithTransport sets the transport facts sealed with every checkpoint.
func WithTransport(t map[string]string) CheckpointerOption {
	return func(c *Checkpointer) { c.transport = t }
}

// WithReport sets the function told how each write went: the state's
// Seq, and the error (runtime.Session.CheckpointDone).
func WithReport(fn func(seq uint64, err error)) CheckpointerOption {
	return func(c *Checkpointer) { c.report = fn }
}

// NewCheckpointer returns a checkpointer for session, writing to st as
// owner (a name for this worker), sealed with key. Acquire the lease with
// Acquire before the session starts.
func NewCheckpointer(st store.Store, key Key, session, owner string, opts ...CheckpointerOption) *Checkpointer {
	c := &Checkpointer{st: st, key: key, owner: owner, session: session, ttl: DefaultLeaseTTL,
		report: func(uint64, error) {}, wake: make(chan struct{}, 1)}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Acquire takes the session's lease for this worker: ErrLeaseHeld (from
// package store) if another live worker has it.
func (c *Checkpointer) Acquire(ctx context.Context) error { return c.take(ctx, c.st.Acquire) }

// Takeover takes the session's lease for this worker whoever holds it:
// for a worker the caller came back to (with the session's resume token),
// while the old worker may be dead with its lease unexpired. Any writes
// the old worker still makes are refused from then on.
func (c *Checkpointer) Takeover(ctx context.Context) error { return c.take(ctx, c.st.Takeover) }

// Hold takes the lease for a session about to run here: Takeover for one
// taken over from a snapshot, Acquire for a new one.
func (c *Checkpointer) Hold(ctx context.Context, from *Snapshot) error {
	if from != nil {
		return c.Takeover(ctx)
	}
	return c.Acquire(ctx)
}

func (c *Checkpointer) take(ctx context.Context, fn func(context.Context, string, string, time.Duration) (store.Lease, error)) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	l, err := fn(ctx, c.session, c.owner, c.ttl)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.lease = l
	c.mu.Unlock()
	return nil
}

// SessionOptions are what a session needs to be checkpointed here: its
// states handed to Offer, its journal in the store, and, when it is taken
// over from a snapshot, the state to start from.
func (c *Checkpointer) SessionOptions(from *Snapshot) []runtime.Option {
	opts := []runtime.Option{engine.WithCheckpoints(c.Offer), runtime.WithJournal(c.Journal())}
	if from != nil {
		opts = append(opts, engine.WithState(from.State))
	}
	return opts
}

// Lease is the lease held now.
func (c *Checkpointer) Lease() store.Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lease
}

// Journal is the session's journal of mutations in the store, written
// under this worker's lease: give it to the session (runtime.WithJournal).
func (c *Checkpointer) Journal() tools.Journal { return store.NewJournal(c.st, c.Lease) }

// Offer hands the checkpointer a state to write. It never blocks.
func (c *Checkpointer) Offer(s engine.State) {
	c.mu.Lock()
	c.pending = &s
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run writes offered states and renews the lease until ctx ends (nil) or
// the lease is lost to another worker (ErrLeaseLost). A write that failed
// is tried again at the next renewal, unless a newer state replaced it.
// When ctx ends it writes the last offered state.
func (c *Checkpointer) Run(ctx context.Context) error {
	renew := time.NewTicker(max(c.ttl/3, 10*time.Millisecond))
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			c.flush(context.WithoutCancel(ctx))
			return nil
		case <-c.wake:
			if err := c.flush(ctx); errors.Is(err, store.ErrLeaseLost) {
				return fmt.Errorf("handoff: session %s: %w", c.session, err)
			}
		case <-renew.C:
			if err := c.Acquire(ctx); err != nil {
				if errors.Is(err, store.ErrLeaseHeld) {
					return fmt.Errorf("handoff: session %s: %w", c.session, store.ErrLeaseLost)
				}
				c.report(0, fmt.Errorf("renewing the lease: %w", err))
				continue
			}
			if err := c.flush(ctx); errors.Is(err, store.ErrLeaseLost) {
				return fmt.Errorf("handoff: session %s: %w", c.session, err)
			}
		}
	}
}

// flush writes the pending state, if any.
func (c *Checkpointer) flush(ctx context.Context) error {
	c.mu.Lock()
	s, l := c.pending, c.lease
	c.pending = nil
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	err := c.save(ctx, l, *s)
	if err != nil && !errors.Is(err, store.ErrLeaseLost) {
		// Keep it for the next try, unless a newer one came meanwhile.
		c.mu.Lock()
		if c.pending == nil {
			c.pending = s
		}
		c.mu.Unlock()
	}
	c.report(s.Seq, err)
	return err
}

// Write seals and writes s at once, under the lease, and returns when it
// is in the store: for a handoff, whose receiver must find this state and
// no older one.
func (c *Checkpointer) Write(ctx context.Context, s engine.State) error {
	return c.save(ctx, c.Lease(), s)
}

// save seals and writes s under l, unless a newer state was written.
func (c *Checkpointer) save(ctx context.Context, l store.Lease, s engine.State) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if s.Seq < c.written {
		return nil
	}
	data, err := Seal(Snapshot{State: s, Transport: c.transport}, c.key)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := c.st.Save(ctx, l, data); err != nil {
		return err
	}
	c.written = s.Seq
	return nil
}

// SetFact sets the transport fact key to value in every checkpoint written
// from now on ("" removes it): a worker moving the call away marks the
// state it hands over.
func (c *Checkpointer) SetFact(key, value string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	next := make(map[string]string, len(c.transport)+1)
	for k, v := range c.transport {
		next[k] = v
	}
	if value == "" {
		delete(next, key)
	} else {
		next[key] = value
	}
	c.transport = next
}

// Release gives the session's lease up: a worker ending a call that may be
// resumed elsewhere (the caller redials) lets the next worker take it at
// once.
func (c *Checkpointer) Release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return c.st.Release(ctx, c.Lease())
}

// Resume loads session's latest checkpoint from st, verified with keys:
// the state to start a session from (engine.WithState) and the transport
// facts sealed with it.
func Resume(ctx context.Context, st store.Store, session string, keys ...Key) (Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	data, err := st.Load(ctx, session)
	if err != nil {
		return Snapshot{}, fmt.Errorf("handoff: loading session %s: %w", session, err)
	}
	return Open(data, keys...)
}

// CheckSetup says what is missing for checkpointing to st as worker with
// keys: a store, a worker name for the leases, and a signing key long
// enough (keys[0]).
func CheckSetup(st store.Store, worker string, keys []Key) error {
	switch {
	case st == nil:
		return errors.New("no store")
	case worker == "":
		return errors.New("a worker name is needed for the leases")
	case len(keys) == 0 || len(keys[0].Secret) < MinKeyLen:
		return fmt.Errorf("a snapshot key of at least %d bytes is needed", MinKeyLen)
	}
	return nil
}
