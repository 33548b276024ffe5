package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/tts"
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

// OutputPauser is implemented by Edges whose output can pause in place, for
// a suspected barge-in.
type OutputPauser interface {
	PauseOutput()
	ResumeOutput()
}

// Barge-in bounds.
const (
	// maxPause bounds a pause for a suspected barge-in: without a verdict
	// by then (the caller's audio stopped coming) the output resumes. A
	// suspicion that says when its verdict is due is bounded by that plus
	// verdictGrace instead, so a cough on a line that then goes quiet
	// costs about a second of silence, not three.
	maxPause     = 3 * time.Second
	verdictGrace = 200 * time.Millisecond
	// echoMemory is how long played words count as possible echo.
	echoMemory = 5 * time.Second
)

type entry struct {
	item llm.Item
	// turn is set on an assistant message whose audio may still be
	// playing: requests show its planned text until playout settles it.
	turn *turnState
	call *callState // tool_call entries
	drop bool
}

type turnState struct {
	handle  *Turn
	epoch   uint64
	planned strings.Builder
	words   []tts.WordTiming

	modelDone bool
	// synthDone: all of the turn's audio is queued. A follow-up waits for
	// it, because the output plays audio in the order it was queued: a
	// follow-up's words must not land between the preamble's phrases.
	synthDone bool
	// unspoken: no voice could speak the end of the answer; what will be
	// heard is the words queued, not the text planned.
	unspoken bool
	// played: some of the turn's audio has played.
	played      bool
	playoutDone bool
	interrupted bool
	// superseded: newer user input came after this turn began, so its tool
	// results must not trigger a follow-up of their own.
	superseded bool
	followUp   bool
	settled    bool

	assistant *entry
	calls     []*callState

	// stages is the turn's latency breakdown so far.
	stages events.Turn
}

// holdsFloor reports whether the turn's model stream or audio is still going.
func (t *turnState) holdsFloor() bool {
	return !t.interrupted && (!t.modelDone || !t.playoutDone)
}

// awaitsFollowUp reports whether the turn will ask the model about its own
// results once they are in: nobody has cut in since it began.
func (t *turnState) awaitsFollowUp() bool {
	return !t.interrupted && !t.superseded && !t.followUp
}

// callState is the core's side of a ledger entry: where the call sits in
// the conversation and what the model has been shown of it.
type callState struct {
	rec  *tools.Call
	tool *tools.Tool // nil for a tool the agent does not have
	turn *turnState
	// seen: a model request has shown the real result.
	seen bool
	// shownRunning: a model request showed the call as still running, so
	// the model is owed its real result, however it ends.
	shownRunning bool
	// moot: the call ended only because the user cut in (never started,
	// or cancelled); the newer input is being answered and the result
	// rides along with it rather than getting an answer of its own.
	moot bool
	// joiners are calls with the same idempotency key waiting for this
	// running call's outcome.
	joiners []*callState
	// reconciling: the Reconciler is finding out what an earlier call with
	// this key did.
	reconciling bool
}

func (cs *callState) id() string { return cs.rec.ID }

func (cs *callState) detached() bool { return cs.rec.Policy == tools.Detach }

// answered reports whether the call is done with: its result is in the
// context.
func (cs *callState) answered() bool { return cs.rec.Committed }

// owed reports whether the model must be given this result in a request of
// its own.
func (cs *callState) owed() bool { return !cs.moot }

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
		if t := c.liveTurn(in.Epoch); t != nil && !t.playoutDone {
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

// liveTurn returns the unsettled, uninterrupted turn of epoch; anything an
// interrupted or finished epoch still produces is stale and dropped.
func (c *conductor) liveTurn(epoch uint64) *turnState {
	for _, t := range c.turns.live {
		if t.epoch == epoch && !t.interrupted {
			return t
		}
	}
	return nil
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

func (c *conductor) onSpeechStarted() {
	c.link.idle = false
	c.restoreTransport()
	c.floor.userSpeaking, c.chat.heard.wordsSinceSpeech = true, false
	c.stopEndpoint()
	c.discardSpeculation("speech")
	c.emit(events.Event{Kind: events.SpeechStarted, Epoch: c.turns.epoch})
	if c.speaking() {
		c.emit(events.Event{Kind: events.BargeInConfirmed, Epoch: c.turns.epoch, Reason: "speech"})
		c.preempt("barge_in")
	}
}

// onSuspected pauses the output while the arbiter listens: the agent's echo
// stops with it, a caller does not.
func (c *conductor) onSuspected(in BargeInSuspected) {
	p, ok := c.edges.(OutputPauser)
	if !ok || c.floor.paused || !c.speaking() {
		return
	}
	p.PauseOutput()
	c.floor.paused = true
	c.emit(events.Event{Kind: events.BargeInSuspected, Epoch: c.turns.epoch, Reason: in.Reason})
	c.floor.timerID++
	id := c.floor.timerID
	c.floor.pauseID = id
	limit := maxPause
	if in.Verdict > 0 {
		limit = min(in.Verdict+verdictGrace, maxPause)
	}
	c.floor.pauseTimer = c.clock.AfterFunc(limit, func() { c.post(timerFired{id: id}) })
}

// onBargeIn: the arbiter confirmed the caller is talking over the agent.
func (c *conductor) onBargeIn(reason string) {
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
	// The flush above dropped the paused audio: the next turn plays.
	c.unpause()
}

// resumeOutput ends a pause for a suspicion that was not confirmed: the
// output goes on from the sample where it stopped.
func (c *conductor) resumeOutput(reason string) {
	if c.unpause() {
		c.emit(events.Event{Kind: events.BargeInResumed, Epoch: c.turns.epoch, Reason: reason})
	}
}

func (c *conductor) unpause() bool {
	if !c.floor.paused {
		return false
	}
	c.floor.paused = false
	c.floor.pauseID = 0
	if c.floor.pauseTimer != nil {
		c.floor.pauseTimer.Stop()
		c.floor.pauseTimer = nil
	}
	c.edges.(OutputPauser).ResumeOutput()
	return true
}

// recentlyPlayed is what the caller may still hear as echo: the words played
// so far of the turns in flight and of the latest turn that stopped.
func (c *conductor) recentlyPlayed() string {
	var b strings.Builder
	if c.floor.lastPlayed != "" && c.clock.Now().Sub(c.floor.lastPlayedAt) <= echoMemory {
		b.WriteString(c.floor.lastPlayed)
	}
	for _, t := range c.turns.live {
		if !t.playoutDone {
			b.WriteByte(' ')
			b.WriteString(c.playedText(t, c.edges.Played(t.epoch)))
		}
	}
	return b.String()
}

func (c *conductor) onSpeechStopped(in UserSpeechStopped) {
	c.floor.userSpeaking = false
	c.emit(events.Event{Kind: events.SpeechStopped, Epoch: c.turns.epoch})
	c.startEndpoint(in.Ago)
	c.chat.heard.stages.SpeechEnd = stamp(c.floor.silentSince.Add(-in.Silence).Sub(c.clock.start))
	if c.chat.heard.wordsSinceSpeech {
		// The words came before the detector heard the silence. (Finals
		// from before the caller spoke again are not all their words.)
		c.speculate()
	}
}

// startEndpoint starts the silence that ends the caller's turn, of which
// heard has passed already.
func (c *conductor) startEndpoint(heard time.Duration) {
	c.floor.silentSince = c.clock.Now().Add(-heard)
	c.armEndpoint()
}

// armEndpoint (re)starts the wait for the end of the caller's turn: the
// silence their words call for (endpointFor), counted from silentSince.
func (c *conductor) armEndpoint() {
	c.stopEndpoint()
	c.floor.timerID++
	id := c.floor.timerID
	c.floor.endpointID = id
	wait := c.floor.silentSince.Add(c.endpointFor()).Sub(c.clock.Now())
	c.floor.endpointTimer = c.clock.AfterFunc(max(wait, 0), func() { c.post(timerFired{id: id}) })
}

func (c *conductor) stopEndpoint() {
	if c.floor.endpointTimer != nil {
		c.floor.endpointTimer.Stop()
		c.floor.endpointTimer = nil
	}
	c.floor.endpointID = 0
	c.floor.transcriptID = 0
}

func (c *conductor) onTranscript(tr UserTranscript) {
	if strings.TrimSpace(tr.Text) != "" {
		c.emit(events.Event{Kind: events.Transcript, Text: tr.Text, Final: tr.Final})
	}
	if !tr.Final {
		return
	}
	if strings.TrimSpace(tr.Text) == "" {
		if c.floor.transcriptID != 0 && len(c.chat.heard.finals) == 0 {
			// The final the turn waited for came, and held nothing:
			// noise, or a sound without words. No turn, and nothing
			// lost; a later final with words still makes one.
			c.stopEndpoint()
			c.emit(events.Event{Kind: events.TranscriptIgnored, Epoch: c.turns.epoch, Final: true, Reason: NoWords})
		}
		return
	}
	c.restoreTransport()
	c.chat.heard.stages.Transcript = stamp(c.at())
	c.chat.heard.finals = append(c.chat.heard.finals, strings.TrimSpace(tr.Text))
	c.chat.heard.wordsSinceSpeech = true
	if tr.Confidence > 0 && (c.chat.heard.confidence == 0 || tr.Confidence < c.chat.heard.confidence) {
		c.chat.heard.confidence = tr.Confidence
	}
	switch {
	case c.floor.userSpeaking:
	case c.floor.transcriptID != 0:
		if c.endpointRanged() && c.clock.Now().Sub(c.floor.silentSince) < c.endpointFor() {
			// Words that leave the turn open ("and…") still get the
			// longer silence.
			c.armEndpoint()
			break
		}
		c.finishUserTurn()
	case c.floor.endpointID == 0:
		// Words the VAD did not catch as speech: they still make a turn,
		// once the usual silence has passed.
		c.startEndpoint(0)
	case c.endpointRanged():
		// The words choose how long the silence must last.
		c.armEndpoint()
	}
	if !c.floor.userSpeaking && c.floor.endpointID != 0 {
		c.speculate()
	}
}

func (c *conductor) onTimer(id uint64) {
	switch id {
	case 0:
		return
	case c.floor.pauseID:
		c.floor.pauseTimer = nil
		c.resumeOutput("verdict_timeout")
	case c.floor.endpointID:
		c.floor.endpointTimer = nil
		c.floor.endpointID = 0
		if len(c.chat.heard.finals) > 0 {
			c.finishUserTurn()
			return
		}
		// Silence says the turn is over but the recogniser has not
		// answered yet: wait for it, but not forever.
		c.floor.timerID++
		tid := c.floor.timerID
		c.floor.transcriptID = tid
		c.floor.endpointTimer = c.clock.AfterFunc(c.cfg.TranscriptTimeout, func() { c.post(timerFired{id: tid}) })
	case c.floor.transcriptID:
		c.floor.endpointTimer = nil
		c.stopEndpoint()
		c.emit(events.Event{Kind: events.ProviderError, Provider: "stt", Reason: TurnDropped,
			Error: fmt.Sprintf("no final transcript within %v of the caller's silence; user turn dropped (is the recogniser over capacity?)", c.cfg.TranscriptTimeout)})
	}
}

func (c *conductor) finishUserTurn() {
	text := strings.Join(c.chat.heard.finals, " ")
	conf := c.chat.heard.confidence
	c.chat.heard.finals, c.chat.heard.confidence, c.chat.heard.wordsSinceSpeech = nil, 0, false
	c.stopEndpoint()
	c.chat.heard.stages.Endpoint = stamp(c.at())
	ev := events.Event{Kind: events.UserTurn, Text: text, Reason: "speech"}
	if !c.floor.silentSince.IsZero() {
		ev.Delay = c.clock.Now().Sub(c.floor.silentSince)
	}
	c.emit(ev)
	c.cut("user_turn")
	c.chat.entries = append(c.chat.entries, &entry{item: c.userItem(text, conf)})
	if c.useSpeculation(text) {
		return
	}
	c.startTurn("user_turn", llm.ReasonUserTurn, "")
}

// userBusy reports whether the caller holds the floor: speaking, in the
// silence that may still be part of their turn, or making a sound over the
// agent that is being judged (the output is paused on it): a follow-up
// started then would talk over a caller who may be taking the floor.
func (c *conductor) userBusy() bool {
	return c.floor.userSpeaking || c.floor.paused || c.floor.endpointID != 0 || c.floor.transcriptID != 0 || len(c.chat.heard.finals) > 0
}

// played reports whether a turn that holds the floor has played some of its
// audio: whether the caller has heard anything of the agent's to answer.
func (c *conductor) played() bool {
	for _, t := range c.turns.live {
		if t.holdsFloor() && t.played {
			return true
		}
	}
	return false
}

// speaking reports whether some turn still holds the floor: its model
// stream or its audio is still going.
func (c *conductor) speaking() bool {
	for _, t := range c.turns.live {
		if t.holdsFloor() {
			return true
		}
	}
	return false
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
		t.superseded = true
		if t.holdsFloor() {
			c.interrupt(t, reason)
			cut = true
		}
		c.applyPolicies(t)
	}
	// A turn can settle (audio done, calls in) before its follow-up goes
	// out; it is no longer in c.turns.live, but the new input supersedes it too.
	for _, t := range c.calls.pendingFollowUps {
		t.superseded = true
	}
	if cut {
		upTo := c.turns.epoch
		if c.spec.cur != nil {
			upTo = c.spec.cur.epoch - 1
		}
		c.edges.FlushOutput(upTo)
	}
}

func (c *conductor) interrupt(t *turnState, reason string) {
	t.interrupted = true
	now := stamp(c.at())
	t.stages.Interrupted = true
	if t.stages.ModelDone == 0 {
		t.stages.ModelDone = now
	}
	if t.stages.SynthDone == 0 && t.stages.FirstPhrase != 0 {
		t.stages.SynthDone = now
	}
	close(t.handle.interrupted)
	c.edges.CancelGeneration(t.epoch)
	c.emit(events.Event{Kind: events.TurnInterrupted, Epoch: t.epoch, Reason: reason})

	played := c.edges.Played(t.epoch)
	text := c.playedText(t, played)
	if !t.playoutDone {
		c.settleAssistant(t, text, true)
		if t.assistant != nil {
			t.assistant.item.Played = played
		}
		c.emit(events.Event{Kind: events.PlayoutTruncate, Epoch: t.epoch, Text: text, Played: played})
		c.stopPlayout(t, text)
	}
	t.modelDone = true
	c.maybeSettle(t)
}

// applyPolicies treats the calls of a turn the user cut into: a deferred
// mutation never runs, a cancel tool is cancelled, the rest go on.
func (c *conductor) applyPolicies(t *turnState) {
	for _, cs := range t.calls {
		switch {
		case cs.rec.State.Terminal():
		case cs.rec.State == tools.StateDeferred:
			cs.moot = true
			c.finishCall(cs, tools.Outcome{State: tools.StateCancelled, IsError: true,
				Output: "not executed: the user interrupted before this call started, so nothing was done"}, "not_executed")
		case cs.rec.State == tools.StateRunning && cs.rec.Policy == tools.Cancel:
			if c.calls.ledger.RequestCancel(cs.id()) {
				c.emit(events.Event{Kind: events.ToolCancelRequested, Epoch: t.epoch, CallID: cs.id(), Tool: cs.rec.Tool})
				c.edges.CancelTool(cs.id())
			}
		}
	}
}

// playedText is the words of t whose audio had started by played.
func (c *conductor) playedText(t *turnState, played time.Duration) string {
	if c.cfg.TextOnly {
		return strings.TrimSpace(t.planned.String())
	}
	var b strings.Builder
	for _, w := range t.words {
		if w.Start >= played {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w.Word)
	}
	return b.String()
}

func (c *conductor) allWords(t *turnState) string {
	if c.cfg.TextOnly {
		return strings.TrimSpace(t.planned.String())
	}
	words := make([]string, len(t.words))
	for i, w := range t.words {
		words[i] = w.Word
	}
	return strings.Join(words, " ")
}

// settleAssistant records what the user actually heard of t in the chat
// context. An entry is created if the turn had none yet; an empty one with
// no tool calls is dropped rather than kept as noise.
func (c *conductor) settleAssistant(t *turnState, text string, interrupted bool) {
	e := t.assistant
	if e == nil {
		if text == "" {
			return
		}
		e = &entry{item: llm.Item{Kind: llm.KindMessage, Role: llm.RoleAssistant}}
		c.chat.entries = append(c.chat.entries, e)
		t.assistant = e
	}
	e.turn = nil
	e.item.Text = text
	e.item.Interrupted = interrupted
	if text == "" && len(t.calls) == 0 {
		e.drop = true
	}
}

func (c *conductor) stopPlayout(t *turnState, text string) {
	t.playoutDone = true
	c.floor.lastPlayed, c.floor.lastPlayedAt = text, c.clock.Now()
	t.handle.mu.Lock()
	t.handle.played = text
	t.handle.mu.Unlock()
	close(t.handle.playoutStopped)
}

func (c *conductor) onModelDone(d ModelDone) {
	t := c.liveTurn(d.Epoch)
	if t == nil {
		// A call from an interrupted generation never runs.
		return
	}
	t.modelDone = true
	t.stages.ModelDone = stamp(c.at())
	if d.Err != nil {
		c.emit(events.Event{Kind: events.ProviderError, Epoch: t.epoch, Provider: "llm", Error: d.Err.Error()})
	}
	if t.planned.Len() > 0 || len(d.Calls) > 0 {
		e := &entry{item: llm.Item{Kind: llm.KindMessage, Role: llm.RoleAssistant}, turn: t}
		c.chat.entries = append(c.chat.entries, e)
		t.assistant = e
	}
	for _, call := range d.Calls {
		c.requestCall(t, call)
	}
	if len(t.calls) > 0 {
		c.calls.pendingFollowUps = append(c.calls.pendingFollowUps, t)
	}
	if t.playoutDone {
		c.settleAssistant(t, c.allWords(t), false)
		c.startDeferred(t)
	}
	c.maybeSettle(t)
}

func (c *conductor) requestCall(t *turnState, call llm.ToolCall) {
	c.calls.n++
	if call.ID == "" {
		call.ID = fmt.Sprintf("call_%s_%d", c.cfg.ID, c.calls.n)
	}
	if _, dup := c.calls.ledger.Get(call.ID); dup {
		call.ID = fmt.Sprintf("%s_%d", call.ID, c.calls.n)
	}
	tool, known := c.agent.tools.Lookup(call.Name)
	effect, policy := tools.Read, tools.Complete
	if known {
		effect, policy = tool.Effect(), tool.Policy()
	}
	rec, err := c.calls.ledger.Request(call.ID, call.Name, call.Arguments, effect, policy, t.epoch)
	if err != nil { // ids are made unique above; this is a bug, not input
		c.log.Error("tool ledger", "err", err)
		return
	}
	cs := &callState{rec: rec, turn: t}
	if known {
		cs.tool = tool
	}
	c.calls.byID[rec.ID] = cs
	c.calls.inflight++
	t.calls = append(t.calls, cs)
	c.chat.entries = append(c.chat.entries, &entry{
		item: llm.Item{Kind: llm.KindToolCall, CallID: rec.ID, Name: rec.Tool, Arguments: rec.Args},
		call: cs,
	})
	c.emit(events.Event{Kind: events.ToolRequested, Epoch: t.epoch, CallID: rec.ID, Tool: rec.Tool, Text: string(rec.Args),
		Policy: string(rec.Policy), Key: rec.Key})

	if !known {
		c.finishCall(cs, tools.Outcome{State: tools.StateFailed, IsError: true,
			Output: fmt.Sprintf("error: no tool named %q; available tools: %s", rec.Tool, c.toolNames())}, "unknown_tool")
		return
	}
	if err := tool.Validate(rec.Args); err != nil {
		c.finishCall(cs, tools.Outcome{State: tools.StateFailed, IsError: true, Output: "error: " + err.Error()}, "invalid_arguments")
		return
	}
	if policy == tools.Defer {
		c.calls.ledger.Defer(rec.ID)
		c.emit(events.Event{Kind: events.ToolDeferred, Epoch: t.epoch, CallID: rec.ID, Tool: rec.Tool})
		return
	}
	c.dispatch(cs)
}

// startDeferred runs the turn's deferred calls: its response is complete
// and its preamble has played out, both without interruption.
func (c *conductor) startDeferred(t *turnState) {
	if t.interrupted || t.superseded || !t.modelDone || !t.playoutDone {
		return
	}
	for _, cs := range t.calls {
		if cs.rec.State == tools.StateDeferred {
			c.dispatch(cs)
		}
	}
}

// dispatch runs a call, unless at-most-once says its key was already seen
// to: then the call gets the earlier outcome, waits for the earlier run, or
// has the outcome reconciled first.
func (c *conductor) dispatch(cs *callState) {
	if cs.tool.Dedupe() {
		switch d, prior := c.calls.ledger.Decide(cs.id()); d {
		case tools.Reuse:
			c.emit(events.Event{Kind: events.ToolDeduped, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool, Reason: "reuse", Text: prior.ID})
			c.calls.ledger.Reuse(cs.id(), prior)
			c.ended(cs, "deduped")
			return
		case tools.Join:
			p := c.calls.byID[prior.ID]
			c.emit(events.Event{Kind: events.ToolDeduped, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool, Reason: "join", Text: prior.ID})
			p.joiners = append(p.joiners, cs)
			return
		case tools.Reconcile:
			if r := cs.tool.Reconciler(); r != nil {
				cs.reconciling = true
				c.emit(events.Event{Kind: events.ToolReconcile, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool, Reason: "started", Text: prior.ID})
				c.edges.Reconcile(c.toolRun(cs, prior.ID))
				return
			}
			c.finishCall(cs, tools.Outcome{State: tools.StateFailed, IsError: true, Output: fmt.Sprintf(
				"error: not run: an identical earlier call (%s) may have taken effect but its outcome is unknown; "+
					"check with the user before trying again", prior.ID)}, "outcome_unknown")
			return
		}
	}
	if c.adopted(cs) {
		return
	}
	c.calls.ledger.Start(cs.id())
	c.emit(events.Event{Kind: events.ToolStarted, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool})
	c.edges.RunTool(c.toolRun(cs, ""))
}

func (c *conductor) toolRun(cs *callState, of string) ToolRun {
	return ToolRun{CallID: cs.id(), Key: cs.rec.Key, Tool: cs.tool, Args: cs.rec.Args, Epoch: cs.turn.epoch, Turn: cs.turn.handle, Of: of}
}

func (c *conductor) toolNames() string {
	names := make([]string, 0, c.agent.tools.Len())
	for _, t := range c.agent.tools.All() {
		names = append(names, t.Name())
	}
	return strings.Join(names, ", ")
}

func (c *conductor) onToolOutcome(o ToolOutcome) {
	cs := c.calls.byID[o.CallID]
	if cs == nil || !o.State.Terminal() {
		return
	}
	out := tools.Outcome{State: o.State, Output: o.Output}
	reason := ""
	if o.Err != nil {
		out.IsError = true
		out.Output = "error: " + o.Err.Error()
		switch {
		case errors.Is(o.Err, ErrInterrupted):
			out.State = tools.StateCancelled
			out.Output = "error: the user interrupted before this call could finish; it did not complete"
			cs.moot = true
			reason = "interrupted"
		case o.State == tools.StateCancelled:
			out.Output = "cancelled: the user interrupted and the call stopped before it completed"
			cs.moot = true
			reason = "cancelled"
		}
	} else if cs.rec.CancelRequested {
		// The body ignored the cancel and finished: that is what happened,
		// and what the model must hear.
		reason = "completed_despite_cancel"
	}
	if cs.rec.State.Terminal() {
		before := cs.rec.Late
		if c.calls.ledger.Finish(cs.id(), out); cs.rec.Late != before {
			c.emit(events.Event{Kind: events.ToolLateOutcome, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool,
				State: string(out.State), Text: out.Output})
			c.amend(cs, out)
		}
		return
	}
	c.finishCall(cs, out, reason)
}

// amend tells the model what a call abandoned at its deadline really did:
// its one result is updated in place and is owed an answer again, because
// a caller told "it timed out" while their card was charged has been told
// something false.
func (c *conductor) amend(cs *callState, late tools.Outcome) {
	if !cs.answered() {
		return
	}
	note := fmt.Sprintf("%s\nupdate: the call finished after its deadline after all: %s: %s", cs.rec.Output, late.State, late.Output)
	c.calls.ledger.Amend(cs.id(), note)
	cs.seen, cs.moot = false, false
	c.calls.unseen = append(c.calls.unseen, cs)
	c.emit(events.Event{Kind: events.ToolCommitted, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool,
		State: string(cs.rec.State), Reason: "late_outcome"})
}

func (c *conductor) onReconciled(r ReconcileOutcome) {
	cs := c.calls.byID[r.CallID]
	if cs == nil || !cs.reconciling || cs.rec.State.Terminal() {
		return
	}
	cs.reconciling = false
	prior, _ := c.calls.ledger.Get(r.Of)
	ev := events.Event{Kind: events.ToolReconcile, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool, Text: r.Of}
	switch {
	case r.Err != nil || prior == nil:
		ev.Reason, ev.Error = "failed", fmt.Sprint(r.Err)
		c.emit(ev)
		c.finishCall(cs, tools.Outcome{State: tools.StateFailed, IsError: true, Output: fmt.Sprintf(
			"error: not run: an identical earlier call (%s) may have taken effect, and checking failed (%v); "+
				"check with the user before trying again", r.Of, r.Err)}, "outcome_unknown")
	case r.Done:
		ev.Reason = "done"
		c.emit(ev)
		c.calls.ledger.Resolve(prior.ID, tools.Outcome{State: tools.StateSucceeded, Output: r.Output})
		c.calls.ledger.Reuse(cs.id(), prior)
		c.ended(cs, "reconciled")
	default:
		ev.Reason = "not_done"
		c.emit(ev)
		c.calls.ledger.Resolve(prior.ID, tools.Outcome{State: tools.StateFailed, IsError: true, Output: "error: it did not take effect"})
		c.dispatch(cs)
	}
}

// finishCall records a call's end in the ledger and moves on from it.
func (c *conductor) finishCall(cs *callState, o tools.Outcome, reason string) {
	if !c.calls.ledger.Finish(cs.id(), o) {
		return
	}
	c.ended(cs, reason)
}

// ended follows a call that just reached its terminal state: the event, the
// calls that waited on it, the commit, and what the turn does next.
func (c *conductor) ended(cs *callState, reason string) {
	c.calls.inflight--
	ev := events.Event{Kind: events.ToolTerminal, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool,
		State: string(cs.rec.State), Reason: reason}
	if cs.rec.IsError {
		ev.Error = cs.rec.Output
	}
	c.emit(ev)
	c.commit(cs)
	c.releaseJoiners(cs)
	c.maybeSettle(cs.turn)
}

// releaseJoiners gives the calls that waited on cs its outcome, when it did
// the thing; otherwise each decides afresh (and usually runs).
func (c *conductor) releaseJoiners(cs *callState) {
	joiners := cs.joiners
	cs.joiners = nil
	for _, j := range joiners {
		if j.rec.State.Terminal() {
			continue
		}
		if cs.rec.Outcome().State == tools.StateSucceeded {
			c.calls.ledger.Reuse(j.id(), cs.rec)
			c.ended(j, "deduped")
			continue
		}
		c.dispatch(j)
	}
}

// commit puts a finished result into the context. Results are rendered in
// call order next to their calls (see render), so a result is never held
// back behind a slower sibling.
func (c *conductor) commit(cs *callState) {
	c.calls.ledger.Commit(cs.id())
	c.calls.unseen = append(c.calls.unseen, cs)
	c.emit(events.Event{Kind: events.ToolCommitted, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool, State: string(cs.rec.State)})
}

// onSpeechDone: all of a turn's audio is queued. If no voice could speak
// the end of the answer, the caller must not be left guessing: the answer
// as requests show it from now on is what will be heard, and a system note
// tells the model what was lost, so its next answer can say it again.
func (c *conductor) onSpeechDone(d SpeechDone) {
	t := c.liveTurn(d.Epoch)
	if t == nil {
		return
	}
	t.synthDone = true
	t.stages.SynthDone = stamp(c.at())
	if d.Err == nil {
		return
	}
	c.emit(events.Event{Kind: events.ProviderError, Epoch: d.Epoch, Provider: "tts", Error: d.Err.Error(), Text: d.Unspoken})
	if d.Unspoken == "" {
		return
	}
	t.unspoken = true
	c.chat.entries = append(c.chat.entries, &entry{item: llm.Item{Kind: llm.KindMessage, Role: llm.RoleSystem, Text: undeliveredNote(d.Unspoken)}})
}

func (c *conductor) onPlayoutFinished(epoch uint64) {
	t := c.liveTurn(epoch)
	if t == nil || t.playoutDone {
		return
	}
	text := c.allWords(t)
	c.stopPlayout(t, text)
	if t.modelDone {
		c.settleAssistant(t, text, false)
	}
	c.emit(events.Event{Kind: events.PlayoutDone, Epoch: epoch, Text: text, Played: c.edges.Played(epoch)})
	c.startDeferred(t)
	c.maybeSettle(t)
}

func (c *conductor) maybeSettle(t *turnState) {
	if t.settled || !t.modelDone || !t.playoutDone {
		return
	}
	for _, cs := range t.calls {
		if !cs.answered() && !cs.detached() {
			return
		}
	}
	t.settled = true
	c.edges.CancelGeneration(t.epoch) // releases the finished generation
	close(t.handle.settled)
	c.emitTurnMetrics(t)
	c.emit(events.Event{Kind: events.TurnSettled, Epoch: t.epoch})
	for i, x := range c.turns.live {
		if x == t {
			c.turns.live = append(c.turns.live[:i], c.turns.live[i+1:]...)
			break
		}
	}
}

// readyForFollowUp reports whether t's results are all in (detached calls
// aside), at least one is news to the model, and t may now ask about them.
func (c *conductor) readyForFollowUp(t *turnState) bool {
	if !t.awaitsFollowUp() || !t.modelDone || !(t.synthDone || t.playoutDone) || len(t.calls) == 0 {
		return false
	}
	news := false
	for _, cs := range t.calls {
		if !cs.answered() && !cs.detached() {
			return false
		}
		news = news || cs.answered() && !cs.seen
	}
	// A turn whose calls are all detached has nothing to tell the model
	// until one of them lands.
	return news
}

// owedResult reports whether a committed result still needs a request of
// its own: no request has shown it, none is coming for it (its turn was cut
// into or has had its follow-up), and it is not moot.
func (c *conductor) owedResult() bool {
	keep := c.calls.unseen[:0]
	owed := false
	for _, cs := range c.calls.unseen {
		if cs.seen {
			continue
		}
		keep = append(keep, cs)
		if cs.owed() && !cs.turn.awaitsFollowUp() {
			owed = true
		}
	}
	clear(c.calls.unseen[len(keep):])
	c.calls.unseen = keep
	return owed
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
			t.followUp = true
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

func (c *conductor) appendUser(text string) {
	c.chat.entries = append(c.chat.entries, &entry{item: c.userItem(text, 0)})
}

// userItem is the caller's message, with the recogniser's confidence in it
// (0: none given).
func (c *conductor) userItem(text string, confidence float64) llm.Item {
	return llm.Item{Kind: llm.KindMessage, Role: llm.RoleUser, Text: text, Confidence: confidence}
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

// buildRequest renders the context for the model and records what the
// model has now been shown.
func (c *conductor) buildRequest(reason llm.Reason, extra string) llm.Request {
	instr := c.agent.Instructions
	if extra != "" {
		instr = strings.TrimSpace(instr + "\n\n" + extra)
	}
	items := c.render(true, true)
	req := llm.Request{Instructions: instr, Context: llm.ChatContext{Items: items}, Tools: c.agent.tools.Specs(),
		Reason: reason, New: unchangedPrefix(c.chat.sent, items)}
	// A copy: the model may hold on to the request, and must not be able
	// to change what the next request is compared with.
	c.chat.sent = slices.Clone(items)
	return req
}

// unchangedPrefix is how many items b begins with that a began with, item
// for item.
func unchangedPrefix(a, b []llm.Item) int {
	n := 0
	for n < len(a) && n < len(b) && sameItem(a[n], b[n]) {
		n++
	}
	return n
}

// sameItem reports whether a and b are the same item, field for field.
func sameItem(a, b llm.Item) bool {
	return a.Kind == b.Kind && a.Role == b.Role && a.Text == b.Text &&
		a.Interrupted == b.Interrupted && a.Played == b.Played && a.Confidence == b.Confidence &&
		a.CallID == b.CallID && a.Name == b.Name && bytes.Equal(a.Arguments, b.Arguments) &&
		a.Output == b.Output && a.IsError == b.IsError
}

// context renders the chat context as it stands: what was said, what was
// played, and every committed result.
func (c *conductor) context() llm.ChatContext {
	return llm.ChatContext{Items: c.render(false, false)}
}

// render lists the chat: an assistant message still playing shows its
// planned text, and each run of tool calls is followed by their results in
// call order. For a request (forModel), calls still in flight get a
// provisional output and, if mark, the results shown are marked seen (and
// calls shown running, shownRunning); otherwise they have none yet.
func (c *conductor) render(forModel, mark bool) []llm.Item {
	items := make([]llm.Item, 0, len(c.chat.entries)*2)
	var run []*callState
	flush := func() {
		for _, cs := range run {
			it := llm.Item{Kind: llm.KindToolResult, CallID: cs.id(), Name: cs.rec.Tool}
			switch {
			case cs.answered():
				it.Output, it.IsError = cs.rec.Output, cs.rec.IsError
				if forModel && mark {
					cs.seen = true
				}
			case !forModel:
				continue
			case cs.detached():
				it.Output = llm.ProvisionalDetached
				cs.shownRunning = cs.shownRunning || mark
			case cs.rec.State == tools.StateDeferred:
				it.Output = llm.ProvisionalDeferred
				cs.shownRunning = cs.shownRunning || mark
			default:
				it.Output = llm.ProvisionalRunning
				cs.shownRunning = cs.shownRunning || mark
			}
			items = append(items, it)
		}
		run = run[:0]
	}
	for _, e := range c.chat.entries {
		if e.drop {
			continue
		}
		if e.call == nil {
			flush()
		}
		it := e.item
		if t := e.turn; t != nil {
			if t.unspoken {
				it.Text = c.allWords(t)
			} else {
				it.Text = strings.TrimSpace(t.planned.String())
			}
		}
		if it.Arguments != nil {
			it.Arguments = append(json.RawMessage(nil), it.Arguments...)
		}
		items = append(items, it)
		if e.call != nil {
			run = append(run, e.call)
		}
	}
	flush()
	return items
}

// at is the session clock's reading, as an offset from the session's start.
func (c *conductor) at() time.Duration { return c.clock.Now().Sub(c.clock.start) }

// stamp is a stage's instant as events.Turn holds it, where zero means
// not reached: a stage reached as the session starts (a greeting's
// request, on a virtual clock) is put a nanosecond after.
func stamp(at time.Duration) time.Duration { return max(at, time.Nanosecond) }

// reached records the first time the turn's answer reached a stage.
func (t *turnState) reached(in StageReached, start time.Time) {
	var at *time.Duration
	switch in.Stage {
	case StageRequest:
		at = &t.stages.Request
		if t.stages.Model == "" {
			t.stages.Model = in.Provider
		}
	case StageFirstToken:
		at = &t.stages.FirstToken
	case StageFirstPhrase:
		at = &t.stages.FirstPhrase
		if t.stages.Voice == "" {
			t.stages.Voice = in.Provider
		}
	case StageVoiceFirstAudio:
		at = &t.stages.VoiceFirstAudio
	case StageQueued:
		at = &t.stages.Queued
		if !in.VoiceFirstAudio.IsZero() && t.stages.VoiceFirstAudio == 0 {
			t.stages.VoiceFirstAudio = stamp(in.VoiceFirstAudio.Sub(start))
		}
	default:
		return
	}
	if *at == 0 {
		*at = stamp(in.At.Sub(start))
	}
}

// emitTurnMetrics reports the settled turn's latency breakdown.
func (c *conductor) emitTurnMetrics(t *turnState) {
	m := t.stages
	if m.Agent == "" {
		m.Agent = c.agent.Name
	}
	// Holdline's own time: the endpoint to the request (none when a
	// speculative request left before the endpoint), and the voice's
	// first audio to the line's queue.
	if m.Endpoint > 0 && m.Request > m.Endpoint {
		m.Overhead += m.Request - m.Endpoint
	}
	if m.VoiceFirstAudio > 0 && m.Queued > m.VoiceFirstAudio {
		m.Overhead += m.Queued - m.VoiceFirstAudio
	}
	c.emit(events.Event{Kind: events.TurnMetrics, Epoch: t.epoch, Turn: &m})
}
