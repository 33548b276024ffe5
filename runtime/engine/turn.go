package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrInterrupted is returned by waits on a turn that the user (or injected
// input) interrupted.
var ErrInterrupted = errors.New("runtime: turn interrupted")

// ErrWaitTimeout is returned when a wait reaches its deadline first.
var ErrWaitTimeout = errors.New("runtime: wait timed out")

// DefaultWaitTimeout bounds a wait whose context has no deadline of its own.
const DefaultWaitTimeout = 30 * time.Second

// Turn is the public handle of one agent turn (one epoch). Its three signals
// are separate because they happen at different times and mean different
// things: Interrupted (the user took the floor), PlayoutStopped (no more of
// the turn's audio will play, whether it finished or was cut) and Settled
// (nothing of the turn is in flight any more: model stream, synthesis, its
// tool calls).
type Turn struct {
	epoch uint64

	interrupted    chan struct{}
	playoutStopped chan struct{}
	settled        chan struct{}

	mu     sync.Mutex
	played string // what was played, once playout stopped
}

func newTurn(epoch uint64) *Turn {
	return &Turn{
		epoch:          epoch,
		interrupted:    make(chan struct{}),
		playoutStopped: make(chan struct{}),
		settled:        make(chan struct{}),
	}
}

// Epoch is the turn's epoch number.
func (t *Turn) Epoch() uint64 { return t.epoch }

// Interrupted is closed when the turn is interrupted.
func (t *Turn) Interrupted() <-chan struct{} { return t.interrupted }

// PlayoutStopped is closed when no more of the turn's audio will play.
func (t *Turn) PlayoutStopped() <-chan struct{} { return t.playoutStopped }

// Settled is closed when nothing of the turn is in flight any more.
func (t *Turn) Settled() <-chan struct{} { return t.settled }

// IsInterrupted reports whether the turn was interrupted.
func (t *Turn) IsInterrupted() bool {
	select {
	case <-t.interrupted:
		return true
	default:
		return false
	}
}

// PlayedText is what the user heard of the turn, once playout has stopped.
func (t *Turn) PlayedText() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.played
}

// WaitPlayout waits until the turn's audio has finished playing. It returns
// ErrInterrupted the moment the turn is interrupted — even if the audio it
// would wait for was never produced — and an error wrapping ErrWaitTimeout
// and the context's error when ctx ends first. Without a deadline on ctx it
// waits at most DefaultWaitTimeout.
func (t *Turn) WaitPlayout(ctx context.Context) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	select {
	case <-t.interrupted:
		return ErrInterrupted
	case <-t.playoutStopped:
		// Interruption closes interrupted before playoutStopped; look again
		// so a cut turn never reports a finished playout.
		if t.IsInterrupted() {
			return ErrInterrupted
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: turn %d playout: %w", ErrWaitTimeout, t.epoch, ctx.Err())
	}
}

// WaitSettled waits until the turn has settled, with the same deadline rule
// as WaitPlayout. Interruption does not end this wait: an interrupted turn
// still settles once its in-flight work ends under its own deadlines.
func (t *Turn) WaitSettled(ctx context.Context) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	select {
	case <-t.settled:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: turn %d settle: %w", ErrWaitTimeout, t.epoch, ctx.Err())
	}
}

// bounded gives ctx the default wait deadline unless it has one already.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultWaitTimeout)
}
