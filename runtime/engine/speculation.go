package engine

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
)

// OutputHolder is implemented by Edges that can keep a turn's audio from
// the line until it is wanted, which speculative answers need: without it
// the core asks the model only once a turn has ended.
type OutputHolder interface {
	// HoldOutput keeps epoch's audio queued, unplayed, until
	// ReleaseOutput; FlushOutput drops it.
	HoldOutput(epoch uint64)
	ReleaseOutput(epoch uint64)
}

// speculation is an answer asked for before the caller's turn is
// committed: the caller's words are in, but the silence that ends the turn
// is still running. Its model stream and synthesis run with its audio
// held; what its edges report waits here. If the turn ends on the same
// words and the context is as the request showed it, the answer becomes
// the turn (promote); otherwise it is cancelled, with nothing of it played,
// in the context or in the ledger.
type speculation struct {
	epoch   uint64
	handle  *Turn
	text    string // the caller's words it answers
	items   []llm.Item
	started time.Time
	// inputs are what the edges reported for epoch, in order.
	inputs []Input
	// early are the calls of the answer started before the commit: reads
	// declared safe to (tools.WithSpeculative), by call id.
	early map[string]*earlyRun
}

// speculating is the speculative answer under way, if any, and the early
// reads of the last one used, until the ledger takes them over.
type speculating struct {
	cur   *speculation
	adopt map[string]*earlyRun
}

// earlyRun is a speculative read's body running before its turn is
// committed. Its outcome waits here until the call is in the ledger.
type earlyRun struct {
	outcome *ToolOutcome
}

// speculate asks the model for an answer to the caller's words while the
// silence that would end their turn runs, if nothing else is going on.
func (c *conductor) speculate() {
	h, ok := c.edges.(OutputHolder)
	text := c.chat.heard.words()
	if c.spec.cur != nil {
		if c.spec.cur.text == text {
			return
		}
		c.discardSpeculation("more_words")
	}
	if !ok || c.cfg.NoSpeculation || len(c.chat.heard.finals) == 0 || c.floor.userSpeaking || c.floor.endpointID == 0 || c.floor.transcriptID != 0 ||
		c.floor.paused || c.link.transportDown || c.speaking() {
		return
	}
	c.turns.epoch++
	s := &speculation{epoch: c.turns.epoch, handle: newTurn(c.turns.epoch), text: text, started: c.clock.Now()}
	// The request as the turn's would be, with the caller's words last;
	// nothing is marked as shown until the answer is used.
	s.items = append(c.render(true, false), c.userItem(text, c.chat.heard.confidence))
	req := llm.Request{Instructions: c.agent.Instructions, Context: llm.ChatContext{Items: s.items},
		Tools: c.agent.tools.Specs(), Reason: llm.ReasonUserTurn, New: unchangedPrefix(c.chat.sent, s.items)}
	c.spec.cur = s
	c.emit(events.Event{Kind: events.SpeculationStarted, Epoch: s.epoch, Text: text, Count: len(s.items)})
	h.HoldOutput(s.epoch)
	c.edges.StartGeneration(s.epoch, req)
}

// captured keeps what the edges report for the speculative answer until
// it is used or discarded; it reports whether in was kept.
func (c *conductor) captured(in Input) bool {
	s := c.spec.cur
	if s == nil {
		return false
	}
	var epoch uint64
	switch in := in.(type) {
	case ModelText:
		epoch = in.Epoch
	case ModelDone:
		epoch = in.Epoch
		if in.Epoch == s.epoch {
			c.startEarly(s, in.Calls)
		}
	case SpeechWords:
		epoch = in.Epoch
	case SpeechDone:
		epoch = in.Epoch
	case PlayoutStarted:
		epoch = in.Epoch
	case StageReached:
		epoch = in.Epoch
	case ModelUsage:
		epoch = in.Epoch
	case PlayoutFinished:
		epoch = in.Epoch
	case ToolOutcome:
		if r := s.early[in.CallID]; r != nil {
			if r.outcome == nil { // a late outcome after a timeout is not news
				r.outcome = &in
			}
			return true
		}
		return false
	default:
		return false
	}
	if epoch != s.epoch {
		return false
	}
	s.inputs = append(s.inputs, in)
	return true
}

// startEarly starts the reads of a speculative answer that may run before
// their turn is committed. Calls are given their ids here, so that the
// ledger knows them by the same id once the turn commits.
func (c *conductor) startEarly(s *speculation, calls []llm.ToolCall) {
	for i := range calls {
		call := &calls[i]
		if call.ID == "" {
			c.calls.n++
			call.ID = fmt.Sprintf("call_%s_%d", c.cfg.ID, c.calls.n)
		}
		if _, dup := c.calls.ledger.Get(call.ID); dup {
			c.calls.n++
			call.ID = fmt.Sprintf("%s_%d", call.ID, c.calls.n)
		}
		tool, ok := c.agent.tools.Lookup(call.Name)
		if !ok || !tool.Speculative() || tool.Validate(call.Arguments) != nil {
			continue
		}
		if s.early == nil {
			s.early = map[string]*earlyRun{}
		}
		s.early[call.ID] = &earlyRun{}
		c.edges.RunTool(ToolRun{CallID: call.ID, Tool: tool, Args: call.Arguments, Epoch: s.epoch, Turn: s.handle})
	}
}

// useSpeculation makes the speculative answer the turn that answers the
// caller's words, just committed, if it answered the same words with the
// context as it now stands; it reports whether it did.
func (c *conductor) useSpeculation(text string) bool {
	s := c.spec.cur
	if s == nil {
		return false
	}
	if s.text != text {
		c.discardSpeculation("changed_words")
		return false
	}
	if !slices.EqualFunc(c.render(true, false), s.items, sameItem) {
		c.discardSpeculation("changed_context")
		return false
	}
	c.spec.cur = nil
	c.chat.sent = c.render(true, true) // marks what the request showed
	t := &turnState{handle: s.handle, epoch: s.epoch}
	t.stages, c.chat.heard.stages = c.chat.heard.stages, events.Turn{}
	t.stages.Agent = c.agent.Name
	c.turns.live = append(c.turns.live, t)
	c.emit(events.Event{Kind: events.SpeculationUsed, Epoch: s.epoch, Delay: c.clock.Now().Sub(s.started)})
	c.emit(events.Event{Kind: events.TurnStarted, Epoch: t.epoch})
	c.emit(events.Event{Kind: events.InferenceSent, Epoch: t.epoch, Count: len(s.items), Reason: "user_turn"})
	c.edges.(OutputHolder).ReleaseOutput(s.epoch)
	c.spec.adopt = s.early
	c.link.idle = false
	for _, in := range s.inputs {
		c.handle(in)
	}
	return true
}

// discardSpeculation drops the speculative answer, if there is one: its
// stream and synthesis stop, its held audio goes, its early reads are
// cancelled and their outcomes ignored.
func (c *conductor) discardSpeculation(reason string) {
	s := c.spec.cur
	if s == nil {
		return
	}
	c.spec.cur = nil
	c.edges.CancelGeneration(s.epoch)
	c.edges.FlushOutput(s.epoch)
	for _, id := range slices.Sorted(maps.Keys(s.early)) {
		if s.early[id].outcome == nil {
			c.edges.CancelTool(id)
		}
	}
	if c.turns.agentEpoch == s.epoch-1 {
		// No turn has been taken since the agent took over: a reply asked
		// for now is still its greeting.
		c.turns.agentEpoch = s.epoch
	}
	c.emit(events.Event{Kind: events.SpeculationDiscarded, Epoch: s.epoch, Reason: reason})
}

// adopted starts a call of a used speculative answer that began early: it
// is in the ledger now, and its outcome, if in, is taken at once. It
// reports whether cs was one.
func (c *conductor) adopted(cs *callState) bool {
	r := c.spec.adopt[cs.id()]
	if r == nil {
		return false
	}
	delete(c.spec.adopt, cs.id())
	c.calls.ledger.Start(cs.id())
	c.emit(events.Event{Kind: events.ToolStarted, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool, Reason: "speculative"})
	if r.outcome != nil {
		c.onToolOutcome(*r.outcome)
	}
	return true
}
