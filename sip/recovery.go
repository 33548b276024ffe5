package sip

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	sipmsg "github.com/emiago/sipgo/sip"

	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/store"
)

// WithStore makes calls outlive this worker and move between workers: each
// call's session is checkpointed to st under a lease held as worker,
// sealed with keys[0] (the others verify older snapshots), and its
// mutations journaled there.
//
// A call transferred with Transfer carries a handoff token
// (X-Holdline-Handoff) that leads to its last checkpoint: a Holdline
// worker sharing st that answers the transferred call takes the
// conversation over, and its agent speaks first, from where it was.
//
// A call cut off by a dead worker is picked up when the caller redials
// the same number from the same line within the redial window
// (WithRedialWindow): whichever worker answers loads its last checkpoint.
func WithStore(st store.Store, worker string, keys ...handoff.Key) Option {
	return func(c *config) error {
		if err := handoff.CheckSetup(st, worker, keys); err != nil {
			return fmt.Errorf("sip: WithStore: %w", err)
		}
		c.store, c.worker, c.keys = st, worker, keys
		return nil
	}
}

// DefaultRedialWindow is how long after its worker died a call can be
// picked up by the caller dialling again (WithStore).
const DefaultRedialWindow = 2 * time.Minute

// WithRedialWindow sets how long after its worker died a call can be
// picked up by the caller dialling again (default DefaultRedialWindow; 0
// turns it off). The caller is recognised by the number it calls from
// (P-Asserted-Identity when the trunk sends it, else From) and the number
// it calls: as far as the trunk vouches for those, since anyone who can
// send that caller's number reaches its conversation within the window.
// A call that ended normally is never picked up again.
func WithRedialWindow(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("sip: redial window %v", d)
		}
		c.redial = d
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

// Instructions for the agent's first words on a call that picks up an
// earlier conversation: put through from another worker, or redialled
// after the call was cut off.
const (
	resumeInstructions = "The caller has just been put through to you; the conversation so far is above. " +
		"Greet them briefly and carry on from where it was; if a tool's outcome is unknown, say you are checking."
	redialInstructions = "The call was cut off and the caller has called back; the conversation so far is above. " +
		"Pick up where it was, in a sentence; if a tool's outcome is unknown, say you are checking."
)

// leaseWaitStep is how often a redialled call tries for the session's
// lease while the dead worker's hold runs out.
const leaseWaitStep = 200 * time.Millisecond

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

// lineKey names the caller's line in the store, for picking a cut-off call
// up again: the number called from and the number called, hashed (the
// store needs no phone numbers in clear). ok is false for a caller who
// withholds its number.
func lineKey(req *sipmsg.Request) (key string, ok bool) {
	var from sipmsg.Uri
	if h := req.GetHeader("P-Asserted-Identity"); h != nil {
		v := h.Value()
		if i, j := strings.IndexByte(v, '<'), strings.IndexByte(v, '>'); i >= 0 && j > i {
			v = v[i+1 : j]
		}
		_ = sipmsg.ParseUri(strings.TrimSpace(v), &from)
	}
	if from.User == "" {
		if f := req.From(); f != nil {
			from = f.Address
		}
	}
	to := req.Recipient
	if t := req.To(); t != nil {
		to = t.Address
	}
	caller := strings.ToLower(from.User)
	if caller == "" || caller == "anonymous" || strings.EqualFold(from.Host, "anonymous.invalid") {
		return "", false
	}
	// A telephone number names the caller wherever the call comes in
	// from (a carrier's gateways differ); any other user only with its
	// domain.
	if n, ok := phoneNumber(caller); ok {
		caller = n
	} else {
		caller += "@" + strings.ToLower(from.Host)
	}
	called := strings.ToLower(to.User)
	if n, ok := phoneNumber(called); ok {
		called = n
	}
	sum := sha256.Sum256([]byte(caller + ">" + called))
	return "sip-line:" + hex.EncodeToString(sum[:16]), true
}

// phoneNumber returns user's digits when user is a telephone number: an
// optional +, digits, and the visual separators RFC 3966 allows.
func phoneNumber(user string) (string, bool) {
	var b strings.Builder
	for i, r := range user {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '+' && i == 0:
			b.WriteRune(r)
		case r == '-' || r == '.' || r == '(' || r == ')':
		default:
			return "", false
		}
	}
	return b.String(), b.Len() > 0 && strings.Trim(b.String(), "+") != ""
}

// pickUp returns the conversation a redialled INVITE picks up: the
// session the caller's line last had, when its checkpoint is still in the
// store (the call was cut off, not ended) and no live worker holds it.
// While another worker's lease runs, the call waits (ringing) for it to
// lapse: a dead worker's does within callLeaseTTL, and a live worker's
// means the same line has another call in progress there, so this one is
// answered afresh.
//
// The session stays claimed on this server until unclaim is called (after
// the call joined the server's calls), so that two INVITEs from the line
// at once do not both pick it up.
func (s *Server) pickUp(req *sipmsg.Request, line string) (snap *handoff.Snapshot, unclaim func()) {
	unclaim = func() {}
	st := s.cfg.store
	if st == nil || s.cfg.redial <= 0 || line == "" {
		return nil, unclaim
	}
	ctx, cancel := context.WithTimeout(s.ctx, callLeaseTTL+storeTimeout)
	defer cancel()
	id, err := st.GetAlias(ctx, line)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.cfg.log.Warn("redial lookup failed: answering afresh", "call_id", callID(req), "err", err)
		}
		return nil, unclaim
	}
	if _, err := st.Load(ctx, id); err != nil {
		return nil, unclaim // that call ended normally (or never checkpointed)
	}
	if !s.claim(id) {
		return nil, unclaim // the same line's other call, on this worker
	}
	unclaim = func() { s.unclaim(id) }
	var lease store.Lease
	for {
		if lease, err = st.Acquire(ctx, id, s.cfg.worker, callLeaseTTL); err == nil {
			break
		}
		if !errors.Is(err, store.ErrLeaseHeld) {
			s.cfg.log.Warn("redialled call not picked up: answering afresh", "call_id", callID(req), "session", id, "err", err)
			return nil, unclaim
		}
		select {
		case <-ctx.Done():
			s.cfg.log.Info("the line's earlier call is live on another worker: answering afresh", "call_id", callID(req), "session", id)
			return nil, unclaim
		case <-time.After(leaseWaitStep):
		}
	}
	resumed, err := handoff.Resume(ctx, st, id, s.cfg.keys...)
	if err != nil {
		s.cfg.log.Warn("redialled call not picked up: answering afresh", "call_id", callID(req), "session", id, "err", err)
		_ = st.Release(ctx, lease)
		return nil, unclaim
	}
	s.cfg.log.Info("redialled call picks up its conversation", "call_id", callID(req), "session", id)
	return &resumed, unclaim
}

// claim marks session id as being picked up here; false if a call of
// this server runs it or is picking it up.
func (s *Server) claim(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.picking[id]; ok {
		return false
	}
	for _, c := range s.calls {
		if c.session == id {
			return false
		}
	}
	s.picking[id] = struct{}{}
	return true
}

func (s *Server) unclaim(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.picking, id)
}

// keepLine keeps the caller's line leading to the call's session while
// the call runs, so that a redial within the window after this worker dies
// picks it up. It returns when ctx ends.
func (c *call) keepLine(ctx context.Context) {
	window := c.s.cfg.redial
	put := func() {
		pctx, cancel := context.WithTimeout(ctx, storeTimeout)
		defer cancel()
		if err := c.s.cfg.store.PutAlias(pctx, c.line, c.session, window); err != nil && ctx.Err() == nil {
			c.s.cfg.log.Warn("caller's line not kept for a redial", "call_id", c.id, "err", err)
		}
	}
	put()
	t := time.NewTicker(window / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			put()
		}
	}
}
