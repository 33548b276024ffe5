package calls

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
)

// DrainState says whether a host takes new calls.
type DrainState int32

const (
	// Serving: the host takes calls.
	Serving DrainState = iota
	// Draining: the host takes no new calls and is emptying.
	Draining
	// Drained: the host holds no call and takes none.
	Drained
)

func (s DrainState) String() string {
	switch s {
	case Draining:
		return "draining"
	case Drained:
		return "drained"
	}
	return "serving"
}

// ErrDraining: Start refused a call because the host is draining; a
// transport answers 503 with Retry-After, so that a front door sends the
// call to another worker.
var ErrDraining = errors.New("calls: the worker is draining")

// DefaultDrainTimeout is how long Drain waits for calls to move or end
// before it releases the rest to other workers.
const DefaultDrainTimeout = 10 * time.Minute

// FactMovedFrom is the transport fact a moving call's checkpoint carries:
// the worker it moved from. The worker that takes the call over goes on
// without a word (Moved) rather than as after a cut.
const FactMovedFrom = "moved_from"

// Mover is a Line that can send its caller to another worker: a WebRTC
// client told to re-offer through the front door, a phone REFERred to
// the SIP proxy.
type Mover interface {
	Line
	// Movable reports whether the call can be moved now (its connection
	// is up, the line knows where to send it).
	Movable() bool
	// Move sends the caller on with token, which leads to the call's
	// session in the store, and returns once the caller is on their way:
	// the host then ends the call here and leaves its checkpoint for the
	// worker the caller reaches. An error leaves the call here.
	Move(ctx context.Context, token string) error
}

// DrainOption configures Drain.
type DrainOption func(*drainConfig)

type drainConfig struct {
	timeout time.Duration
	moves   bool
}

// WithDrainTimeout bounds the drain (default DefaultDrainTimeout): calls
// still here then are checkpointed and released for other workers to
// pick up (a caller who reconnects or redials lands there).
func WithDrainTimeout(d time.Duration) DrainOption {
	return func(c *drainConfig) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithMoves moves calls whose Line is a Mover to other workers at their
// next clean point, rather than waiting for them to end. Only for a host
// whose store other workers share, behind a front door that sends the
// moved callers to them.
func WithMoves(on bool) DrainOption { return func(c *drainConfig) { c.moves = on } }

// DrainReport says how a drain went.
type DrainReport struct {
	// Calls were in progress when the drain began; Moved of them moved to
	// other workers, Released were left for others at the deadline, and
	// the rest ended on their own.
	Calls, Moved, Released int
	// Took is how long the drain took.
	Took time.Duration
}

const (
	// drainStep is how often Drain looks for calls at a clean point.
	drainStep = 50 * time.Millisecond
	// moveTimeout bounds one move: the state written, the caller told
	// (a REFER's target answering).
	moveTimeout = 15 * time.Second
	// maxMovesAtOnce spreads the moves out, so that the workers taking
	// them over are not hit by every call of this one at once.
	maxMovesAtOnce = 8
	// reasonMoved ends a call moved to another worker.
	reasonMoved = "moved to another worker"
	// reasonDrained ends a call still here at the drain's deadline.
	reasonDrained = "the worker drained: released for another worker"
	// reasonDrainedDown ends a call whose caller was away when the drain
	// began: it resumes wherever the caller comes back.
	reasonDrainedDown = "the worker drained while the caller was away: released for the caller's return"
)

// BeginDrain stops the host taking calls (Start fails with ErrDraining)
// without waiting for anything; Drain does the rest. It may be called
// more than once.
func (h *Host) BeginDrain() {
	h.drainOnce.Do(func() {
		h.drain.CompareAndSwap(int32(Serving), int32(Draining))
		close(h.drainC)
		h.cfg.log.Info("draining: taking no new calls", "worker", h.cfg.worker, "calls", h.Len())
	})
}

// DrainRequested is closed once the host begins to drain (BeginDrain,
// Drain): for the process that runs it to wind down when an operator
// asked through the API.
func (h *Host) DrainRequested() <-chan struct{} { return h.drainC }

// DrainState says whether the host takes calls.
func (h *Host) DrainState() DrainState { return DrainState(h.drain.Load()) }

// Draining reports whether the host has stopped taking calls.
func (h *Host) Draining() bool { return h.DrainState() != Serving }

// Moving reports whether a drain is moving calls to other workers: a
// transport then refuses a resume of one of this host's calls too, so
// that the caller lands on another worker.
func (h *Host) Moving() bool { return h.moving.Load() }

// Drain stops the host taking calls and empties it: calls that can move
// (WithMoves) move at their next clean point — nothing in flight: no
// turn, no tool call between intent and outcome, the caller not speaking
// — the rest run to their end, and those still here at the deadline are
// checkpointed and released for other workers. It returns when the host
// holds no call, or when ctx ends (the calls are then still here: Close
// releases them).
func (h *Host) Drain(ctx context.Context, opts ...DrainOption) (DrainReport, error) {
	cfg := drainConfig{timeout: DefaultDrainTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.moves && h.cfg.store == nil {
		return DrainReport{}, errors.New("calls: moving calls needs a store the other workers share")
	}
	start := time.Now()
	h.BeginDrain()
	h.moving.Store(cfg.moves)
	rep := DrainReport{Calls: h.Len()}
	deadline := time.NewTimer(cfg.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(drainStep)
	defer tick.Stop()
	moved := make(chan bool, maxMovesAtOnce)
	inFlight := 0
	for h.Len() > 0 {
		// A call whose connection is down waits for its caller to come
		// back: it is on no line here, and the caller, back through the
		// front door, finds it in the store on any worker (or on this
		// one after its restart). Nothing is lost by letting it go now.
		rep.Released += h.releaseDown()
		if cfg.moves {
			for _, c := range h.movable(maxMovesAtOnce - inFlight) {
				inFlight++
				h.spawn(func() { moved <- c.moveOut(context.WithoutCancel(ctx)) })
			}
		}
		select {
		case ok := <-moved:
			inFlight--
			if ok {
				rep.Moved++
			}
		case <-tick.C:
		case <-deadline.C:
			rep.Released = h.releaseAll(reasonDrained)
			h.waitEmpty(ctx, 2*storeTimeout)
			h.drain.Store(int32(Drained))
			rep.Took = time.Since(start)
			return rep, nil
		case <-ctx.Done():
			return rep, ctx.Err()
		}
	}
	// A moved call leaves the host before its move reports back: count
	// the moves still reporting, or the last ones go uncounted.
	for ; inFlight > 0; inFlight-- {
		select {
		case ok := <-moved:
			if ok {
				rep.Moved++
			}
		case <-ctx.Done():
			return rep, ctx.Err()
		}
	}
	h.drain.Store(int32(Drained))
	rep.Took = time.Since(start)
	h.cfg.log.Info("drained", "worker", h.cfg.worker, "calls", rep.Calls, "moved", rep.Moved, "released", rep.Released, "took", rep.Took.Round(time.Millisecond))
	return rep, nil
}

// movable returns up to n calls at a clean point that can move, marking
// them as moving.
func (h *Host) movable(n int) []*Call {
	if n <= 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*Call
	for _, c := range h.calls {
		if len(out) == n {
			break
		}
		if c.readyToMove() {
			out = append(out, c)
		}
	}
	return out
}

// releaseDown releases the calls waiting for their connection to come
// back, and returns how many there were.
func (h *Host) releaseDown() int {
	h.mu.Lock()
	var down []*Call
	for _, c := range h.calls {
		c.mu.Lock()
		if c.running && c.down && !c.ended && !c.moving.Load() && c.leaving.CompareAndSwap(false, true) {
			down = append(down, c)
		}
		c.mu.Unlock()
	}
	h.mu.Unlock()
	for _, c := range down {
		h.spawn(func() { c.Release(reasonDrainedDown) })
	}
	return len(down)
}

// releaseAll releases every call: their checkpoints stay for other
// workers. It returns how many there were.
func (h *Host) releaseAll(reason string) int {
	h.mu.Lock()
	calls := make([]*Call, 0, len(h.calls))
	for _, c := range h.calls {
		calls = append(calls, c)
	}
	h.mu.Unlock()
	for _, c := range calls {
		h.spawn(func() { c.Release(reason) })
	}
	return len(calls)
}

// waitEmpty waits up to d for the host to hold no call.
func (h *Host) waitEmpty(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for h.Len() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-time.After(drainStep):
		}
	}
}

// quietAfter says whether event kind leaves the session at a clean point
// (true), breaks one (false), or leaves it as it was (not listed).
var quietAfter = map[events.Kind]bool{
	events.Idle:             true,
	events.SpeechStarted:    false,
	events.Transcript:       false,
	events.UserTurn:         false,
	events.TurnStarted:      false,
	events.InferenceSent:    false,
	events.ToolRequested:    false,
	events.ToolStarted:      false,
	events.BargeInSuspected: false,
	events.DTMF:             false,
	events.TransferStarted:  false,
	events.TransportLost:    false,
}

// Moving reports whether a draining host is moving the call to another
// worker: a transport forwarding the session's events to the caller's
// client stops, because the next worker numbers its events on from the
// state handed over.
func (c *Call) Moving() bool { return c.moving.Load() }

// readyToMove reports whether the call can move now, and if so marks it
// as moving. Called under h.mu.
func (c *Call) readyToMove() bool {
	m, ok := c.line.(Mover)
	if !ok || c.cp == nil || !c.quiet.Load() || c.moveFailed.Load() || c.moving.Load() {
		return false
	}
	c.mu.Lock()
	up := c.running && !c.down && !c.ended
	c.mu.Unlock()
	if !up || !m.Movable() {
		return false
	}
	c.moving.Store(true)
	return true
}

// moveOut moves the call to another worker: its state as of now is
// written and marked as moving, a handoff token made, the caller sent on
// with it, and the call ended here with its checkpoint left for the next
// worker. On failure the call stays, and is not tried again.
func (c *Call) moveOut(ctx context.Context) bool {
	m := c.line.(Mover)
	ctx, cancel := context.WithTimeout(ctx, moveTimeout)
	defer cancel()
	c.cp.SetFact(FactMovedFrom, c.h.cfg.worker)
	c.Transferred()
	// The worker taking over numbers the session's events on from the
	// state written here, and says where the call came from
	// (session_moved); this one adds nothing the caller's client would
	// see (Moving stops the transports forwarding events).
	tok, err := c.HandoffToken(ctx)
	if err == nil {
		err = m.Move(ctx, tok)
	}
	if err != nil {
		// The state written for the move says it moved: write it again
		// without, so that a crash later is not taken for a move.
		c.cp.SetFact(FactMovedFrom, "")
		if st, serr := c.sess.State(ctx); serr == nil {
			_ = c.cp.Write(ctx, st)
		}
		c.mu.Lock()
		c.handover = false
		c.mu.Unlock()
		if tok != "" {
			c.DropAlias(tok)
		}
		c.moveFailed.Store(true)
		c.moving.Store(false)
		c.h.cfg.log.Info("call not moved: it stays until it ends or the drain's deadline", "session", c.id, "transport", c.kind, "err", err)
		return false
	}
	c.h.cfg.log.Info("call moved to another worker", "session", c.id, "transport", c.kind)
	c.h.metrics.moves.WithLabelValues(c.kind).Inc()
	c.finish(reasonMoved, endRelease)
	return true
}

// movedIn says what a call taken over from a moving worker does first:
// it tells its events where it came from, and answers only if the caller
// had spoken and not been answered (the move waits for a clean point, so
// that is rare).
func (c *Call) movedIn(ctx context.Context) {
	_ = c.sess.Emit(ctx, events.Event{Kind: events.SessionMoved, Reason: "drain",
		Text: fmt.Sprintf("from %s to %s", c.movedFrom, c.h.cfg.worker)})
	chat := c.resumed.State.Chat
	if n := len(chat); n > 0 && chat[n-1].Kind == llm.KindMessage && chat[n-1].Role == llm.RoleUser {
		_ = c.sess.GenerateReply(ctx, "")
	}
}
