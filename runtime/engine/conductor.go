package engine

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/tools"
)

// conductor owns all session state. Only its goroutine touches it, and
// nothing it does waits: edges are told what to do and answer later.
//
// It keeps the mailbox's order of things; what each input means is a
// handler here, and how it is done lives with the part of the state it
// changes: the floor (floor.go), the agent's turns (turnstate.go), the tool
// calls (calls.go), the chat context and what the caller said (chat.go).
type conductor struct {
	cfg     Config
	agent   agentOn
	clock   sessionClock
	edges   Edges
	publish func(events.Event)
	post    func(Input)
	log     *slog.Logger
	seq     uint64 // the latest event's

	turns agentTurns
	floor floor
	calls toolCalls
	chat  chat
	link  link
	spec  speculating
	// exchanges are the answers being followed (Follow).
	exchanges []*Exchange
}

// agentOn is the agent the session talks as, with its tools by name.
type agentOn struct {
	Agent
	tools *tools.Set
}

// sessionClock is the session's clock and the instant the session began,
// from which events count.
type sessionClock struct {
	Clock
	start time.Time
}

// link is the state of the session's connection to the caller and to its
// checkpoints, and whether it has said it is idle.
type link struct {
	transportDown bool
	idle          bool
	// checkpointFailing: the latest checkpoint write failed.
	checkpointFailing bool
}

func (c *conductor) emit(e events.Event) {
	c.seq++
	e.Seq = c.seq
	e.Session = c.cfg.ID
	e.Time = c.clock.Now()
	e.At = e.Time.Sub(c.clock.start)
	if c.log.Enabled(context.Background(), slog.LevelDebug) {
		c.log.Debug("event", "kind", e.Kind, "epoch", e.Epoch, "text", e.Text, "tool", e.Tool, "state", e.State, "reason", e.Reason)
	}
	c.publish(e)
	if c.cfg.Checkpoint != nil && checkpointKinds[e.Kind] {
		c.cfg.Checkpoint(c.state())
	}
}

func (c *conductor) handle(in Input) {
	if c.captured(in) {
		return
	}
	switch in := in.(type) {
	case UserText:
		c.onUserText(in.Text)
	case DTMF:
		c.restoreTransport()
		c.emit(events.Event{Kind: events.DTMF, Epoch: c.turns.epoch, Text: string(in.Digit)})
		if !c.agent.DTMFEventOnly {
			c.onUserText(DTMFText(in.Digit))
		}
	case ReplyRequest:
		c.link.idle = false
		reason := llm.ReasonReply
		if c.turns.epoch == c.turns.agentEpoch {
			reason = llm.ReasonGreeting
		}
		// "Speak now": a turn still answering stops here, as it does for
		// new input, and the reply sees everything it was answering. Two
		// turns answering at once would say the same thing twice (a
		// greeting requested just after the caller's first words).
		c.preempt("reply")
		c.startTurn("reply", reason, in.Instructions)
	case UserSpeechStarted:
		c.onSpeechStarted()
	case UserSpeechStopped:
		c.onSpeechStopped(in)
	case UserTranscript:
		c.onTranscript(in)
	case BargeInSuspected:
		c.onSuspected(in)
	case BargeInConfirmed:
		c.onBargeIn(in.Reason)
	case BargeInResumed:
		c.resumeOutput(in.Reason)
	case TranscriptIgnored:
		c.emit(events.Event{Kind: events.TranscriptIgnored, Epoch: c.turns.epoch, Text: in.Text, Final: in.Final, Reason: in.Reason})
	case EchoPathMeasured:
		c.emit(events.Event{Kind: events.EchoPath, Epoch: c.turns.epoch, State: in.State, Delay: in.Delay, GainDB: in.GainDB})
	case timerFired:
		c.onTimer(in.id)
	case ModelText:
		if t := c.liveTurn(in.Epoch); t != nil {
			t.planned.WriteString(in.Text)
		}
	case ModelDone:
		c.onModelDone(in)
	case SpeechWords:
		if t := c.liveTurn(in.Epoch); t != nil {
			t.words = append(t.words, in.Words...)
		}
	case SpeechDone:
		c.onSpeechDone(in)
	case StageReached:
		if t := c.liveTurn(in.Epoch); t != nil {
			t.reached(in, c.clock.start)
		}
	case ModelUsage:
		if t := c.liveTurn(in.Epoch); t != nil {
			t.stages.TokensIn += in.TokensIn
			t.stages.TokensOut += in.TokensOut
		}
	case PlayoutStarted:
		if t := c.liveTurn(in.Epoch); t != nil && !t.playoutDone() {
			t.played = true
			t.stages.FirstPlayed = stamp(c.at())
			c.emit(events.Event{Kind: events.PlayoutStarted, Epoch: in.Epoch})
		}
	case PlayoutFinished:
		c.onPlayoutFinished(in.Epoch)
	case ToolOutcome:
		c.onToolOutcome(in)
	case ReconcileOutcome:
		c.onReconciled(in)
	case TransportLost:
		c.onTransportLost()
	case TransportRestored:
		if c.link.transportDown {
			c.link.transportDown = false
			c.emit(events.Event{Kind: events.TransportRestored, Epoch: c.turns.epoch})
		}
	case ProviderFailure:
		c.emit(events.Event{Kind: events.ProviderError, Provider: in.Provider, Error: in.Err.Error()})
	case ProviderFailover:
		c.emit(events.Event{Kind: events.ProviderFailover, Epoch: c.turns.epoch, Provider: in.Provider, Error: in.Err.Error()})
	case CheckpointDone:
		c.onCheckpointDone(in)
	case Handoff:
		c.onHandoff(in)
	}
	c.checkFloor()
}

func (c *conductor) onUserText(text string) {
	c.link.idle = false
	c.restoreTransport()
	c.chat.heard.stages = events.Turn{Endpoint: stamp(c.at())}
	c.emit(events.Event{Kind: events.UserTurn, Text: text, Reason: "injected"})
	c.preempt("user_input")
	c.appendUser(text)
	c.startTurn("injected", llm.ReasonUserTurn, "")
}

// restoreTransport: input from the caller proves the line is back.
func (c *conductor) restoreTransport() {
	if c.link.transportDown {
		c.link.transportDown = false
		c.emit(events.Event{Kind: events.TransportRestored, Epoch: c.turns.epoch})
	}
}

func (c *conductor) onTransportLost() {
	if c.link.transportDown {
		return
	}
	c.link.transportDown = true
	c.emit(events.Event{Kind: events.TransportLost, Epoch: c.turns.epoch})
	// Nothing more reaches the caller: what they heard is what was played.
	c.preempt("transport_drop")
}

func (c *conductor) onSpeechStarted() { c.callerSpeaks("speech") }

// onBargeIn: the arbiter confirmed the caller is talking over the agent.
func (c *conductor) onBargeIn(reason string) {
	c.callerSpeaks(reason)
	// The flush in callerSpeaks dropped the paused audio: the next turn
	// plays.
	c.unpause()
}

// callerSpeaks takes the floor for the caller: their words are to come,
// and an agent still speaking is cut (barge-in, for reason).
func (c *conductor) callerSpeaks(reason string) {
	c.link.idle = false
	c.restoreTransport()
	c.floor.userSpeaking, c.chat.heard.wordsSinceSpeech = true, false
	c.stopEndpoint()
	c.discardSpeculation("speech")
	c.emit(events.Event{Kind: events.SpeechStarted, Epoch: c.turns.epoch})
	if c.speaking() {
		c.emit(events.Event{Kind: events.BargeInConfirmed, Epoch: c.turns.epoch, Reason: reason})
		c.preempt("barge_in")
	}
}

// preempt hands the floor to new user input at once: turns still speaking
// are interrupted, no earlier turn may start a follow-up of its own, and
// each of their calls is treated by its interrupt policy. Nothing here
// waits for anything to settle.
func (c *conductor) preempt(reason string) {
	c.discardSpeculation(reason)
	c.cut(reason)
}

// cut is preempt but for a speculative answer, which the caller's
// committed turn may yet use: its held audio is kept.
func (c *conductor) cut(reason string) {
	cut := false
	// Settling removes turns from c.turns.live: walk a copy.
	for _, t := range slices.Clone(c.turns.live) {
		t.overtake(newerInput)
		if t.holdsFloor() {
			c.interrupt(t, reason)
			cut = true
		}
		c.applyPolicies(t)
	}
	// A turn can settle (audio done, calls in) before its follow-up goes
	// out; it is no longer in c.turns.live, but the new input supersedes it too.
	for _, t := range c.calls.pendingFollowUps {
		t.overtake(newerInput)
	}
	if cut {
		upTo := c.turns.epoch
		if c.spec.cur != nil {
			upTo = c.spec.cur.epoch - 1
		}
		c.edges.FlushOutput(upTo)
	}
}

// checkFloor runs after every input. A turn whose results are all in gets
// its follow-up (even while its own preamble still plays: the answer queues
// behind it); a result nobody has answered gets its inference as soon as the
// floor is free; and a session with nothing left to do says so once.
func (c *conductor) checkFloor() {
	if c.userBusy() || c.link.transportDown {
		return
	}
	keep := c.calls.pendingFollowUps[:0]
	for _, t := range c.calls.pendingFollowUps {
		switch {
		case !t.awaitsFollowUp():
		case c.readyForFollowUp(t):
			t.overtake(followedUp)
			c.startTurn("tool_result", llm.ReasonFollowUp, "")
		default:
			keep = append(keep, t)
		}
	}
	clear(c.calls.pendingFollowUps[len(keep):])
	c.calls.pendingFollowUps = keep
	if c.speaking() {
		return
	}
	// A follow-up still to come shows the owed result too.
	if len(c.calls.pendingFollowUps) == 0 && c.owedResult() {
		c.startTurn("tool_result", llm.ReasonToolResult, "")
		return
	}
	if !c.link.idle && c.idleNow() {
		c.link.idle = true
		c.emit(events.Event{Kind: events.Idle, Epoch: c.turns.epoch})
	}
}

// idleNow reports whether nothing is in flight: no turn, no call.
func (c *conductor) idleNow() bool {
	if len(c.turns.live) > 0 || c.userBusy() {
		return false
	}
	for _, cs := range c.calls.unseen {
		if !cs.seen && cs.owed() {
			return false
		}
	}
	return c.calls.inflight == 0
}

// startTurn starts a turn whose model request goes out for reason; why is
// the inference_sent event's reason, which tells typed input from speech.
func (c *conductor) startTurn(why string, reason llm.Reason, extra string) {
	c.discardSpeculation("new_turn")
	c.link.idle = false
	c.turns.epoch++
	t := &turnState{handle: newTurn(c.turns.epoch), epoch: c.turns.epoch}
	if reason == llm.ReasonUserTurn {
		t.stages, c.chat.heard.stages = c.chat.heard.stages, events.Turn{}
	}
	// The agent that answers, not the one there when the turn settles
	// (a handoff may come between).
	t.stages.Agent = c.agent.Name
	c.turns.live = append(c.turns.live, t)
	c.emit(events.Event{Kind: events.TurnStarted, Epoch: t.epoch})
	req := c.buildRequest(reason, extra)
	c.emit(events.Event{Kind: events.InferenceSent, Epoch: t.epoch, Count: len(req.Context.Items), Reason: why})
	c.edges.StartGeneration(t.epoch, req)
}

// at is the session clock's reading, as an offset from the session's start.
func (c *conductor) at() time.Duration { return c.clock.Now().Sub(c.clock.start) }
