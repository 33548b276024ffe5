package runtime

import (
	"context"
	"fmt"

	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/tools"
)

// Reply is what came of one exchange with the agent (Session.Ask):
// everything the agent said and did from the caller's words until it had
// nothing left to do.
type Reply struct {
	// Said is the text of the agent's turns, one after another, as its
	// model wrote them; a turn cut short counts as far as the model had
	// written it.
	Said string
	// Heard is what the caller heard of those turns: the words that
	// played. It is Said unless a turn was cut short or its voice failed;
	// for an agent with no voice (text only) it is always Said.
	Heard string
	// Interrupted reports that a turn of the exchange was cut short (the
	// caller spoke over it, or newer input preempted it).
	Interrupted bool
	// Calls are the tool calls the agent made in the exchange, in the
	// order it made them, as the session's ledger records them: the tool,
	// its arguments, its state, and the output the model was shown (the
	// error's text when IsError).
	Calls []tools.Call
}

// Ask says text to the agent as the caller's typed turn, as Inject does,
// and waits until the agent is idle again: no turn speaking or playing, no
// tool call in flight, no result still owed an answer. It returns what the
// agent said and did in between, so that code driving a session turn by
// turn (a test, a chat front end, a console) need not read events to know
// when the answer is over.
//
// The exchange runs from text to the first idle after it; what else comes
// meanwhile (the caller speaking, another Inject) is part of it. When ctx
// ends first, the error wraps ErrWaitTimeout and ctx's error; without a
// deadline on ctx, Ask waits at most DefaultWaitTimeout. When the session
// ends first (the agent hung up with EndCallTool, or End was called), Ask
// returns the reply as far as it got, with ErrSessionClosed.
func (s *Session) Ask(ctx context.Context, text string) (Reply, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	a := &askRequest{text: text, done: make(chan askEnd, 1)}
	if err := s.send(ctx, a); err != nil {
		if ctx.Err() != nil {
			return Reply{}, fmt.Errorf("%w: ask: %w", ErrWaitTimeout, err)
		}
		return Reply{}, err
	}
	select {
	case r := <-a.done:
		return r.reply, r.err
	case <-s.life.done:
		select {
		case r := <-a.done:
			return r.reply, r.err
		default:
			return Reply{}, ErrSessionClosed
		}
	case <-ctx.Done():
		return Reply{}, fmt.Errorf("%w: ask: %w", ErrWaitTimeout, ctx.Err())
	}
}

// askRequest is Ask's text, and the exchange that follows it once the
// conductor has taken it.
type askRequest struct {
	text string
	ex   *engine.Exchange
	done chan askEnd
}

type askEnd struct {
	reply Reply
	err   error
}

// bounded gives ctx the default wait deadline unless it has one already.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultWaitTimeout)
}
