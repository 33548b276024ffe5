package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/store"
)

// WithStore makes sessions outlive this worker: each session's state is
// checkpointed to st under a lease held as worker, sealed with keys[0]
// (keys verify: the others are older keys still accepted), its mutations
// are journaled there, and its resume token leads to it there. A caller
// whose worker died reconnects with its token to any worker sharing st:
// that worker takes the session over from the last checkpoint, settles
// what was unfinished by the journal (a mutation whose outcome is unknown
// is never run again blindly), and the agent speaks again.
func WithStore(st store.Store, worker string, keys ...handoff.Key) Option {
	return func(c *config) error {
		if err := handoff.CheckSetup(st, worker, keys); err != nil {
			return fmt.Errorf("server: WithStore: %w", err)
		}
		c.store, c.worker, c.keys = st, worker, keys
		return nil
	}
}

// resumeInstructions are the agent's extra instructions for its first
// words after a takeover.
const resumeInstructions = "The call was cut off and the caller is back. Pick up where the conversation was, in a sentence; " +
	"if a tool's outcome is unknown, say that you are checking rather than assuming it worked."

// storeTimeout bounds a store request made while answering an offer.
const storeTimeout = 2 * time.Second

// checkpointed adds the store's options to a session about to be made:
// its checkpointer, holding the lease (taken over when resuming), and its
// journal.
func (c *call) checkpointed(ctx context.Context, opts []runtime.Option) ([]runtime.Option, error) {
	cfg := &c.s.cfg
	if cfg.store == nil {
		return opts, nil
	}
	c.cp = handoff.NewCheckpointer(cfg.store, cfg.keys[0], c.id, cfg.worker,
		handoff.WithLeaseTTL(leaseTTL(cfg.resumeTTL)),
		handoff.WithTransport(map[string]string{"kind": "webrtc"}),
		handoff.WithReport(c.checkpointDone))
	if err := c.cp.Hold(ctx, c.resumed); err != nil {
		return nil, fmt.Errorf("holding the session in the store: %w", err)
	}
	opts = append(opts, c.cp.SessionOptions(c.resumed)...)
	return opts, nil
}

// leaseTTL is how long a worker's hold on a session lasts unrenewed: short,
// so that a session whose worker died is free soon even for a worker that
// has no token to take it over with.
func leaseTTL(resumeTTL time.Duration) time.Duration {
	return min(handoff.DefaultLeaseTTL, max(resumeTTL/4, time.Second))
}

// checkpointDone tells the session how a write went, and keeps the resume
// token's alias in the store alive while the session is.
func (c *call) checkpointDone(seq uint64, err error) {
	if c.sess != nil {
		ctx, cancel := context.WithTimeout(c.ctx, callTimeout)
		_ = c.sess.CheckpointDone(ctx, seq, err)
		cancel()
	}
	if err == nil {
		c.s.mu.Lock()
		tok := c.token
		c.s.mu.Unlock()
		if tok != "" {
			c.publishToken(tok)
		}
	}
}

// publishToken makes tok lead to the session in the store for the resume
// TTL past now.
func (c *call) publishToken(tok string) {
	st := c.s.cfg.store
	if st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, storeTimeout)
	defer cancel()
	if err := st.PutAlias(ctx, tok, c.id, c.s.cfg.resumeTTL+leaseTTL(c.s.cfg.resumeTTL)); err != nil {
		c.s.cfg.log.Warn("resume token not published to the store", "session", c.id, "err", err)
	}
}

// retireToken removes a used or dead token from the store.
func (c *call) retireToken(tok string) {
	st := c.s.cfg.store
	if st == nil || tok == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), storeTimeout)
	defer cancel()
	_, _ = st.TakeAlias(ctx, tok)
}

// runCheckpoints writes the session's checkpoints until the call ends; a
// worker that lost the session to another ends its call.
func (c *call) runCheckpoints() {
	if c.cp == nil {
		return
	}
	if err := c.cp.Run(c.ctx); errors.Is(err, handoff.ErrLeaseLost) {
		c.end(reasonTakenOver)
	}
}

// reasonTakenOver ends a call whose session another worker took over.
const reasonTakenOver = "another worker took the session over"

// endCheckpoints: a session that ended here is over everywhere.
func (c *call) endCheckpoints() {
	if c.cp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), storeTimeout)
	defer cancel()
	if err := c.s.cfg.store.Delete(ctx, c.cp.Lease()); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		c.s.cfg.log.Warn("checkpoint not deleted", "session", c.id, "err", err)
	}
}

// takeOver answers a resume token this worker does not know: if the store
// has it, the session moves here from its last checkpoint. It reports
// whether it answered.
func (s *Server) takeOver(w http.ResponseWriter, r *http.Request, tok, offer string) bool {
	if s.cfg.store == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	id, err := s.cfg.store.TakeAlias(ctx, tok)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		s.fail(w, http.StatusServiceUnavailable, "the session store did not answer: "+err.Error())
		return true
	}
	snap, err := handoff.Resume(ctx, s.cfg.store, id, s.cfg.keys...)
	if err != nil {
		s.cfg.log.Error("session not taken over", "session", id, "err", err)
		s.fail(w, http.StatusGone, "the session's checkpoint could not be resumed: "+err.Error())
		return true
	}
	s.mu.Lock()
	if s.closed || s.calls[id] != nil {
		s.mu.Unlock()
		s.fail(w, http.StatusConflict, "the session is already running here")
		return true
	}
	c := newCall(s, id)
	c.resumed = &snap
	s.calls[id] = c
	s.mu.Unlock()
	s.answerNew(w, r, c, offer, true)
	return true
}
