package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"

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
	// The exchange is registered in the very step that takes the text,
	// so nothing the agent does in answer can be missed.
	ex := &exchange{done: make(chan exchangeEnd, 1)}
	if err := s.send(ctx, askRequest{text: text, ex: ex}); err != nil {
		if ctx.Err() != nil {
			return Reply{}, fmt.Errorf("%w: ask: %w", ErrWaitTimeout, err)
		}
		return Reply{}, err
	}
	select {
	case r := <-ex.done:
		return r.reply, r.err
	case <-s.done:
		select {
		case r := <-ex.done:
			return r.reply, r.err
		default:
			return Reply{}, ErrSessionClosed
		}
	case <-ctx.Done():
		return Reply{}, fmt.Errorf("%w: ask: %w", ErrWaitTimeout, ctx.Err())
	}
}

// askRequest is Ask's text, with the exchange that follows it.
type askRequest struct {
	text string
	ex   *exchange
}

func (askRequest) input() {}

// exchange follows one Ask on the conductor goroutine: the turns that
// answer it, until the agent is idle.
type exchange struct {
	from  uint64       // the exchange's first epoch
	turns []*turnState // its turns, in epoch order; kept after they settle
	done  chan exchangeEnd
}

type exchangeEnd struct {
	reply Reply
	err   error
}

// take hands an input to the conductor and keeps the exchanges under way
// up to date; an exchange that has come to idle gets its reply.
func (s *Session) take(in Input) {
	c := s.c
	if a, ok := in.(askRequest); ok {
		a.ex.from = c.epoch + 1
		s.exchanges = append(s.exchanges, a.ex)
		in = UserText{Text: a.text}
	}
	c.handle(in)
	if len(s.exchanges) == 0 {
		return
	}
	// A turn starts in one input and settles in a later one, so looking
	// at the turns after every input sees each of them.
	for _, ex := range s.exchanges {
		for _, t := range c.turns {
			if t.epoch >= ex.from && (len(ex.turns) == 0 || t.epoch > ex.turns[len(ex.turns)-1].epoch) {
				ex.turns = append(ex.turns, t)
			}
		}
	}
	if c.idle {
		s.finishExchanges(nil)
	}
}

// closeExchanges gives the exchanges still under way when the session
// ends what they have, with ErrSessionClosed.
func (s *Session) closeExchanges() { s.finishExchanges(ErrSessionClosed) }

func (s *Session) finishExchanges(err error) {
	for _, ex := range s.exchanges {
		ex.done <- exchangeEnd{reply: ex.reply(s.c), err: err}
	}
	clear(s.exchanges)
	s.exchanges = s.exchanges[:0]
}

// reply reads the exchange's turns as they stand.
func (ex *exchange) reply(c *conductor) Reply {
	var r Reply
	var said, heard []string
	for _, t := range ex.turns {
		said = appendText(said, t.planned.String())
		played := t.handle.PlayedText()
		if !t.playoutDone {
			played = c.playedText(t, c.edges.Played(t.epoch))
		}
		heard = appendText(heard, played)
		r.Interrupted = r.Interrupted || t.interrupted
		for _, cs := range t.calls {
			r.Calls = append(r.Calls, copyCall(cs.rec))
		}
	}
	r.Said, r.Heard = strings.Join(said, " "), strings.Join(heard, " ")
	return r
}

func appendText(texts []string, text string) []string {
	if text = strings.TrimSpace(text); text != "" {
		texts = append(texts, text)
	}
	return texts
}

// copyCall copies a ledger record, so that the reply shares nothing with
// the conductor.
func copyCall(c *tools.Call) tools.Call {
	out := *c
	out.Args = slices.Clone(c.Args)
	if c.Late != nil {
		late := *c.Late
		out.Late = &late
	}
	return out
}
