package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/holdline/holdline/tools"
)

// endRequest asks Run to end the session; callID is the tool call that
// asked, if a tool did.
type endRequest struct {
	reason string
	callID string
}

// End ends the call: the session stops taking input, emits session_ended
// with reason (DefaultEndReason if empty), tells its owner to hang up
// (engine.WithHangup; a host's transport then hangs up), and Run returns
// nil.
// Whatever the agent is saying is cut: to let it finish first, End after
// Ask returns, or give the agent EndCallTool, which hangs up once the
// goodbye has played.
//
// End returns once the session has stopped; ErrSessionClosed if it had
// stopped already; an error wrapping ErrWaitTimeout and ctx's error if ctx
// ends first (without a deadline on ctx, End waits at most
// DefaultWaitTimeout). A tool may call it with its ctx (Run waits for the
// tools only after the session has stopped): the tool's call is then
// recorded as succeeded, because ending the call is what it did.
func (s *Session) End(ctx context.Context, reason string) error {
	select {
	case <-s.life.stopped:
		return ErrSessionClosed
	default:
	}
	if reason == "" {
		reason = DefaultEndReason
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	req := endRequest{reason: reason}
	if from, ok := SessionFrom(ctx); ok && from == s {
		if ci, ok := tools.CallInfoFrom(ctx); ok {
			req.callID = ci.ID
		}
	}
	if err := s.send(ctx, req); err != nil {
		if errors.Is(err, ErrSessionClosed) {
			return err
		}
		return fmt.Errorf("%w: end: %w", ErrWaitTimeout, err)
	}
	select {
	case <-s.life.stopped:
		return nil
	case <-s.life.done:
		// Run returned without stopping the loop: it never started.
		return s.stoppedOr(ErrSessionClosed)
	case <-ctx.Done():
		// A tool's ctx ends as the session stops: stopping is what it
		// waited for.
		return s.stoppedOr(fmt.Errorf("%w: end: %w", ErrWaitTimeout, ctx.Err()))
	}
}

// stoppedOr returns nil if the session has stopped, else err.
func (s *Session) stoppedOr(err error) error {
	select {
	case <-s.life.stopped:
		return nil
	default:
		return err
	}
}

// ending records an end asked for by a tool's call: the call succeeded,
// whatever its body goes on to return once its context is cancelled.
// Nothing more is answered: the session is over.
func (s *Session) ending(end endRequest) string {
	s.core.EndedBy(end.callID, end.reason)
	return end.reason
}

type endCallArgs struct {
	Reason string `json:"reason,omitempty" jsonschema:"why the call ends, in a few words: the caller said goodbye, the caller asked to hang up"`
}

// EndCallTool returns a tool that lets the agent hang up: add it to the
// agent's Tools. When the model calls it, the call ends (Session.End,
// with the reason the model gives) once the reply that made the call has
// finished and its goodbye has played to the last word. It is deferred
// (tools.Defer): a caller who speaks over the goodbye ("wait, one more
// thing") stops the hangup, the call is recorded as not executed, and
// the agent answers them. Ending is a Read as far as the ledger goes:
// ending twice is ending once, and there is nothing to journal.
//
// On a transport that cannot hang up (no engine.WithHangup: a bare
// session) it ends Run.
func EndCallTool() *tools.Tool {
	return tools.MustNew(EndCallName,
		"Hang up: end the call. Say your goodbye in the same reply; the call ends once it has been heard.",
		endCall, tools.WithEffect(tools.Read), tools.WithInterruptPolicy(tools.Defer))
}

// errNoSession is end_call run outside a session.
var errNoSession = errors.New("runtime: end_call: no session to end")

func endCall(ctx context.Context, a endCallArgs) (string, error) {
	s, ok := SessionFrom(ctx)
	if !ok {
		return "", errNoSession
	}
	// Deferred, the call starts only after the goodbye has played; the
	// wait makes sure of it whatever the policy.
	if err := tools.WaitPlayout(ctx); err != nil {
		return "", err
	}
	reason := a.Reason
	if reason == "" {
		reason = "the agent ended the call"
	}
	if err := s.End(ctx, reason); err != nil {
		return "", err
	}
	return "the call has ended", nil
}
