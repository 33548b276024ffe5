package sip

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	sipmsg "github.com/emiago/sipgo/sip"

	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/store"
)

// WithStore makes calls outlive this worker and move between workers: each
// call's session is checkpointed to st under a lease held as worker,
// sealed with keys[0] (the others verify older snapshots), and its
// mutations journaled there. A call transferred with Transfer carries a
// handoff token (X-Holdline-Handoff) that leads to its last checkpoint: a
// Holdline worker sharing st that answers the transferred call takes the
// conversation over, and its agent speaks first, from where it was.
func WithStore(st store.Store, worker string, keys ...handoff.Key) Option {
	return func(c *config) error {
		if err := handoff.CheckSetup(st, worker, keys); err != nil {
			return fmt.Errorf("sip: WithStore: %w", err)
		}
		c.store, c.worker, c.keys = st, worker, keys
		return nil
	}
}

// Store timings.
const (
	storeTimeout = 2 * time.Second
	// handoffTTL is how long a handoff token is good for: the transfer
	// target has to answer within it.
	handoffTTL = 2 * time.Minute
	// callLeaseTTL is how long a worker's hold on a call lasts unrenewed.
	callLeaseTTL = 5 * time.Second
)

// resumeInstructions are the agent's extra instructions for its first
// words on a call taken over from another worker.
const resumeInstructions = "The caller has just been put through to you; the conversation so far is above. " +
	"Greet them briefly and carry on from where it was; if a tool's outcome is unknown, say you are checking."

// takeOver returns the snapshot an INVITE's handoff token leads to, or nil
// when it has none or the store does not know it (the call is then
// answered afresh: the caller is on the line either way).
func (s *Server) takeOver(req *sipmsg.Request) *handoff.Snapshot {
	h := req.GetHeader(HandoffHeader)
	if s.cfg.store == nil || h == nil || h.Value() == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, storeTimeout)
	defer cancel()
	id, err := s.cfg.store.TakeAlias(ctx, h.Value())
	if err != nil {
		s.cfg.log.Warn("handoff token not taken up: answering afresh", "call_id", callID(req), "err", err)
		return nil
	}
	snap, err := handoff.Resume(ctx, s.cfg.store, id, s.cfg.keys...)
	if err != nil {
		s.cfg.log.Warn("handed-over session not resumed: answering afresh", "call_id", callID(req), "session", id, "err", err)
		return nil
	}
	return &snap
}

// checkpointed adds the store's options to a call's session about to be
// made: its checkpointer, holding the lease (taken over for a handed-over
// call), its journal, and the state it resumes from.
func (c *call) checkpointed(opts []runtime.Option, sessionID string) ([]runtime.Option, error) {
	cfg := &c.s.cfg
	if cfg.store == nil {
		return opts, nil
	}
	c.cp = handoff.NewCheckpointer(cfg.store, cfg.keys[0], sessionID, cfg.worker,
		handoff.WithLeaseTTL(callLeaseTTL),
		handoff.WithTransport(map[string]string{"kind": "sip"}),
		handoff.WithReport(func(seq uint64, err error) {
			if c.sess == nil {
				return
			}
			ctx, cancel := context.WithTimeout(c.ctx(), storeTimeout)
			defer cancel()
			_ = c.sess.CheckpointDone(ctx, seq, err)
		}))
	ctx, cancel := context.WithTimeout(c.s.ctx, storeTimeout)
	defer cancel()
	if err := c.cp.Hold(ctx, c.resumed); err != nil {
		return nil, fmt.Errorf("holding the call's session in the store: %w", err)
	}
	opts = append(opts, c.cp.SessionOptions(c.resumed)...)
	return opts, nil
}

// handoffToken checkpoints the session as it is now and returns a token
// that leads to it, for a transfer target that is a Holdline worker.
func (c *call) handoffToken(ctx context.Context) (string, error) {
	st, err := c.sess.State(ctx)
	if err != nil {
		return "", err
	}
	if err := c.cp.Write(ctx, st); err != nil {
		return "", err
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	tok := base64.RawURLEncoding.EncodeToString(b)
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if err := c.s.cfg.store.PutAlias(ctx, tok, st.SessionID, handoffTTL); err != nil {
		return "", err
	}
	return tok, nil
}

// finishCheckpoints ends the call's place in the store: a transferred
// call's session is left for the worker that takes it over; any other
// ended call's is deleted.
func (c *call) finishCheckpoints(transferred bool) {
	if c.cp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if transferred {
		_ = c.cp.Release(ctx)
		return
	}
	if err := c.s.cfg.store.Delete(ctx, c.cp.Lease()); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		c.s.cfg.log.Warn("checkpoint not deleted", "call_id", c.id, "err", err)
	}
}
