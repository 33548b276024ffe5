package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/tools"
)

// ContextStrategy is what of the conversation a handoff gives the next
// agent. Tool calls and their results always go along, whatever the
// strategy: a booking code or a ticket number is a fact the next agent
// needs, and a call still running delivers its result to the next agent.
type ContextStrategy struct {
	kind     string
	turns    int
	deadline time.Duration
}

// FullContext gives the next agent the whole conversation.
func FullContext() ContextStrategy { return ContextStrategy{kind: "full"} }

// LastTurns gives the next agent the messages from the caller's n-th
// latest turn on.
func LastTurns(n int) ContextStrategy { return ContextStrategy{kind: "last_turns", turns: max(n, 1)} }

// ResetContext gives the next agent no messages at all.
func ResetContext() ContextStrategy { return ContextStrategy{kind: "reset"} }

// Summarize gives the next agent a summary of the messages, written by the
// current agent's model within deadline; if the model fails or is late,
// the last four turns go instead.
func Summarize(deadline time.Duration) ContextStrategy {
	return ContextStrategy{kind: "summary", deadline: deadline, turns: summaryFallbackTurns}
}

// summaryFallbackTurns is what Summarize gives when no summary comes.
const summaryFallbackTurns = 4

// String names the strategy, as handoff events give it.
func (cs ContextStrategy) String() string {
	if cs.kind == "" {
		return "full"
	}
	return cs.kind
}

// HandoffOption configures a handoff.
type HandoffOption func(*handoffConfig)

type handoffConfig struct {
	strategy ContextStrategy
	greet    bool
}

// WithContext sets what of the conversation the next agent gets (default
// FullContext).
func WithContext(s ContextStrategy) HandoffOption {
	return func(c *handoffConfig) { c.strategy = s }
}

// WithGreeting makes the next agent speak first, as soon as the floor is
// free, instead of waiting for the caller.
func WithGreeting() HandoffOption { return func(c *handoffConfig) { c.greet = true } }

// summaryInstructions ask the outgoing model for what the next agent needs.
const summaryInstructions = "Summarise this conversation for a colleague who takes over the call: who the caller is, " +
	"what they want, what has been done and what is still open. Plain sentences, at most 80 words."

// Handoff hands the session to agent `to`: from the next model request on,
// `to` answers with its instructions, tools and voice, over the context the
// strategy leaves. Calls still running go on and deliver their results to
// `to`; finished results stay in the context. A handoff event records it,
// and a checkpoint follows. The recogniser stays the first agent's: it
// listens to the same line. Handoff may be called from a tool's body (the
// tool's context has the session: SessionFrom) or from the application;
// `to`'s OnEnter runs once the handoff is done.
func (s *Session) Handoff(ctx context.Context, to *Agent, opts ...HandoffOption) error {
	if to == nil || to.Model == nil {
		return fmt.Errorf("%w: the next agent needs a Model", ErrHandoff)
	}
	if _, err := tools.NewSet(to.Tools...); err != nil {
		return fmt.Errorf("%w: %s's tools: %v", ErrHandoff, to.Name, err)
	}
	cfg := handoffConfig{strategy: FullContext()}
	for _, o := range opts {
		o(&cfg)
	}
	done := make(chan struct{})
	in := engine.Handoff{To: to.describe(), Strategy: cfg.strategy.String(), Greet: cfg.greet, Done: done}
	switch cfg.strategy.kind {
	case "summary":
		summary, err := s.summarize(ctx, cfg.strategy.deadline)
		if err != nil {
			s.log.Warn("handoff: no summary, the last turns go instead", "err", err)
			in.KeepTurns, in.Strategy = cfg.strategy.turns, in.Strategy+":fallback"
		} else {
			in.Reset, in.Summary = true, summary
		}
	case "last_turns":
		in.KeepTurns = cfg.strategy.turns
	case "reset":
		in.Reset = true
	}
	if err := s.send(ctx, handoffRequest{to: to, in: in}); err != nil {
		return err
	}
	select {
	case <-done:
	case <-s.life.done:
		return ErrSessionClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	if to.OnEnter != nil {
		return to.OnEnter(ctx, s)
	}
	return nil
}

// Summary asks the current agent's model for a summary of the
// conversation so far, as Summarize does for a handoff, within deadline (3
// seconds when not positive): for briefing a person the call is passed to
// (sip.WarmTransfer).
func (s *Session) Summary(ctx context.Context, deadline time.Duration) (string, error) {
	return s.summarize(ctx, deadline)
}

// Agent returns the agent answering now (after a handoff, the one taken
// over to): its providers, for what the session's owner speaks or hears
// outside the conversation (a warm transfer's briefing).
func (s *Session) Agent() *Agent { return s.currentAgent() }

// summarize asks the current agent's model for a summary of the context.
func (s *Session) summarize(ctx context.Context, deadline time.Duration) (string, error) {
	cc, err := s.ChatContext(ctx)
	if err != nil {
		return "", err
	}
	if deadline <= 0 {
		deadline = 3 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	stream, err := s.currentAgent().Model.Stream(ctx, llm.Request{Instructions: summaryInstructions, Context: cc, Reason: llm.ReasonSummary})
	if err != nil {
		return "", err
	}
	defer stream.Close()
	var b strings.Builder
	for {
		ch, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		b.WriteString(ch.Text)
	}
	if strings.TrimSpace(b.String()) == "" {
		return "", errors.New("the model gave an empty summary")
	}
	return strings.TrimSpace(b.String()), nil
}

// handoffRequest asks the conductor to change agents: in is the core's
// part, to the session's (the providers the edges use).
type handoffRequest struct {
	to *Agent
	in engine.Handoff
}

// sessionKey finds the session in a tool's context.
type sessionKey struct{}

// SessionFrom returns the session whose tool call or OnEnter ctx belongs
// to, for a tool that hands the call over (Session.Handoff, Transfer).
func SessionFrom(ctx context.Context) (*Session, bool) {
	s, ok := ctx.Value(sessionKey{}).(*Session)
	return s, ok
}
