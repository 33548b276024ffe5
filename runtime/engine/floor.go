package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
)

// floor is who holds the floor, from the caller's side: whether they are
// speaking, the silence that ends their turn (endpointing), a pause of the
// agent's output while a suspected barge-in is judged, and what the agent
// said last, which the caller may still hear as echo.
type floor struct {
	userSpeaking bool

	// paused: a suspected barge-in holds the output until a verdict, or
	// until pauseID's deadline.
	paused     bool
	pauseTimer Timer
	pauseID    uint64

	// endpointTimer runs the silence that ends the caller's turn
	// (endpointID), or then the wait for its final transcript
	// (transcriptID).
	endpointTimer Timer
	endpointID    uint64
	transcriptID  uint64
	// silentSince is when the caller's latest silence began.
	silentSince time.Time

	// timerID numbers the timers, so that one that fires after it was
	// stopped or replaced is known and ignored.
	timerID uint64

	// lastPlayed is the text of the latest turn whose playout stopped,
	// for telling the agent's echo from the caller.
	lastPlayed   string
	lastPlayedAt time.Time
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
	id := c.floor.newTimer()
	c.floor.pauseID = id
	limit := maxPause
	if in.Verdict > 0 {
		limit = min(in.Verdict+verdictGrace, maxPause)
	}
	c.floor.pauseTimer = c.clock.AfterFunc(limit, func() { c.post(timerFired{id: id}) })
}

// resumeOutput ends a pause for a suspicion that was not confirmed: the
// output goes on from the sample where it stopped.
func (c *conductor) resumeOutput(reason string) {
	if c.unpause() {
		c.emit(events.Event{Kind: events.BargeInResumed, Epoch: c.turns.epoch, Reason: reason})
	}
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
	c.chat.heard.add(tr)
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
		tid := c.floor.newTimer()
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
	text, conf := c.chat.heard.take()
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
		if !t.playoutDone() {
			b.WriteByte(' ')
			b.WriteString(c.playedText(t, c.edges.Played(t.epoch)))
		}
	}
	return b.String()
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
	id := c.floor.newTimer()
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

// newTimer numbers a new timer.
func (f *floor) newTimer() uint64 {
	f.timerID++
	return f.timerID
}
