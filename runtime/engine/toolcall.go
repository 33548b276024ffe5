package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdline/holdline/tools"
)

// ErrCallInterrupted is the cause a call's context carries when the cancel
// policy cancels it because the caller interrupted: it tells a body that
// returns context.Canceled apart from one that failed on its own.
var ErrCallInterrupted = errors.New("runtime: call cancelled because the user interrupted")

// ToolCall is the context one tool body runs in: the call's deadline, the
// cancel policy's cancellation, the turn's playout and the call's
// identity. The live session and the simulator both run bodies in it, so
// a body sees the same context, and its return is named the same way, in
// either.
type ToolCall struct {
	// Ctx is the body's context.
	Ctx context.Context
	// Deadline is done at the call's deadline or when the parent ends; a
	// body still running then is reported timed out (TimedOut).
	Deadline context.Context

	run        ToolRun
	interrupt  context.CancelCauseFunc
	stopExpiry context.CancelFunc
}

// NewToolCall starts r's deadline, from now, under parent. Release it when
// the body is done with.
func NewToolCall(parent context.Context, r ToolRun) *ToolCall {
	deadline, stop := context.WithTimeout(parent, r.Tool.Timeout())
	ctx, interrupt := context.WithCancelCause(deadline)
	ctx = tools.WithPlayout(ctx, r.Turn)
	ctx = tools.WithCallInfo(ctx, tools.CallInfo{ID: r.CallID, Name: r.Tool.Name(), Epoch: r.Epoch, IdempotencyKey: r.Key})
	return &ToolCall{Ctx: ctx, Deadline: deadline, run: r, interrupt: interrupt, stopExpiry: stop}
}

// Interrupt cancels the body's context with ErrCallInterrupted as its
// cause; the body decides how it ends.
func (c *ToolCall) Interrupt() { c.interrupt(ErrCallInterrupted) }

// Release frees the call's context and stops its deadline.
func (c *ToolCall) Release() {
	c.interrupt(nil)
	c.stopExpiry()
}

// Outcome names the state the body's return puts the call in.
func (c *ToolCall) Outcome(out string, err error) ToolOutcome {
	return ToolOutcomeOf(c.Ctx, c.run.CallID, out, err)
}

// TimedOut is the outcome reported when the call's deadline passes first.
func (c *ToolCall) TimedOut() ToolOutcome { return ToolTimedOut(c.run.CallID, c.run.Tool.Timeout()) }

// ToolOutcomeOf names the state a body's return puts call id in, given the
// context it ran in: cancelled if it gave up because the caller
// interrupted, timed out if its deadline stopped it, failed on any other
// error.
func ToolOutcomeOf(ctx context.Context, id, out string, err error) ToolOutcome {
	o := ToolOutcome{CallID: id, State: tools.StateSucceeded, Output: out, Err: err}
	switch {
	case err == nil:
	case errors.Is(context.Cause(ctx), ErrCallInterrupted) && errors.Is(err, context.Canceled):
		o.State = tools.StateCancelled
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		o.State = tools.StateTimedOut
	default:
		o.State = tools.StateFailed
	}
	return o
}

// ToolTimedOut is the outcome of call id when no result came within
// timeout: its outcome is unknown, and a body that returns later reports
// again.
func ToolTimedOut(id string, timeout time.Duration) ToolOutcome {
	return ToolOutcome{CallID: id, State: tools.StateTimedOut,
		Err: fmt.Errorf("%w: no result within %v", ErrWaitTimeout, timeout)}
}
