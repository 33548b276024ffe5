package calls

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/store"
)

// ErrUnknownToken: the store has no session for a token (it was used, it
// lapsed, or it never was).
var ErrUnknownToken = errors.New("calls: no session has this token")

// ErrCheckpoint: the session's checkpoint could not be resumed (corrupt,
// sealed with a key this worker lacks, or gone).
var ErrCheckpoint = errors.New("the session's checkpoint could not be resumed")

// Resume returns the snapshot a resume or handoff token leads to, taking
// the token (it leads nowhere after). Without a store, or for a token the
// store does not know, it returns ErrUnknownToken; a checkpoint that
// cannot be opened (corrupt, or sealed with a key this worker lacks) is
// refused with the reason.
func (h *Host) Resume(ctx context.Context, token string) (*handoff.Snapshot, error) {
	st := h.cfg.store
	if st == nil || token == "" {
		return nil, ErrUnknownToken
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	id, err := st.TakeAlias(ctx, token)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrUnknownToken
	}
	if err != nil {
		return nil, fmt.Errorf("the session store did not answer: %w", err)
	}
	snap, err := handoff.Resume(ctx, st, id, h.cfg.keys...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	return &snap, nil
}

// GiveBack makes token lead to snap's session again, for another worker:
// a transport that took a token with Resume and then could not start the
// call (the host began to drain in between) must not leave the caller
// with a token that leads nowhere.
func (h *Host) GiveBack(ctx context.Context, token string, snap *handoff.Snapshot) {
	if h.cfg.store == nil || token == "" || snap == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := h.cfg.store.PutAlias(ctx, token, snap.State.SessionID, handoffTTL); err != nil {
		h.cfg.log.Warn("a taken token could not be given back: the caller's next try will not find the session", "session", snap.State.SessionID, "err", err)
	}
}

// leaseWaitStep is how often PickUp tries for the session's lease while a
// dead worker's hold runs out.
const leaseWaitStep = 200 * time.Millisecond

// PickUp returns the conversation an alias (a caller's line, kept with
// KeepAlias) leads to, when its checkpoint is still in the store (the call
// was cut off, not ended) and no live worker holds it. While another
// worker's lease runs, it waits up to leaseTTL for it to lapse: a dead
// worker's does, and a live worker's means the same line has another call
// in progress there, so nil is returned and the call is answered afresh.
// Failures are logged and give nil too: the caller is on the line either
// way.
//
// The session stays claimed on this host until unclaim is called (once
// the call has started), so that two calls from the line at once do not
// both pick it up.
func (h *Host) PickUp(ctx context.Context, alias string, leaseTTL time.Duration) (snap *handoff.Snapshot, unclaim func()) {
	unclaim = func() {}
	st := h.cfg.store
	if st == nil || alias == "" {
		return nil, unclaim
	}
	ctx, cancel := context.WithTimeout(ctx, leaseTTL+storeTimeout)
	defer cancel()
	id, err := st.GetAlias(ctx, alias)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			h.cfg.log.Warn("pick-up lookup failed: answering afresh", "err", err)
		}
		return nil, unclaim
	}
	if _, err := st.Load(ctx, id); err != nil {
		return nil, unclaim // that call ended normally (or never checkpointed)
	}
	if !h.claim(id) {
		return nil, unclaim // the same line's other call, on this worker
	}
	unclaim = func() { h.unclaim(id) }
	var lease store.Lease
	for {
		if lease, err = st.Acquire(ctx, id, h.cfg.worker, leaseTTL); err == nil {
			break
		}
		if !errors.Is(err, store.ErrLeaseHeld) {
			h.cfg.log.Warn("call not picked up: answering afresh", "session", id, "err", err)
			return nil, unclaim
		}
		select {
		case <-ctx.Done():
			h.cfg.log.Info("the line's earlier call is live on another worker: answering afresh", "session", id)
			return nil, unclaim
		case <-time.After(leaseWaitStep):
		}
	}
	resumed, err := handoff.Resume(ctx, st, id, h.cfg.keys...)
	if err != nil {
		h.cfg.log.Warn("call not picked up: answering afresh", "session", id, "err", err)
		_ = st.Release(ctx, lease)
		return nil, unclaim
	}
	h.cfg.log.Info("call picks up its conversation", "session", id)
	return &resumed, unclaim
}

// claim marks session id as being picked up here; false if a call of
// this host runs it or is picking it up.
func (h *Host) claim(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.picking[id]; ok || h.calls[id] != nil || h.starting[id] {
		return false
	}
	h.picking[id] = struct{}{}
	return true
}

func (h *Host) unclaim(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.picking, id)
}
