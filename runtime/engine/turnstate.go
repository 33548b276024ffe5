package engine

import (
	"strings"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/tts"
)

// agentTurns are the agent's turns: the epoch counter, and the turns not
// yet settled.
type agentTurns struct {
	epoch uint64
	// agentEpoch is the epoch at which the current agent took over: a
	// reply asked for while no turn has started since is its greeting.
	agentEpoch uint64
	live       []*turnState // not yet settled, in epoch order
}

type turnState struct {
	handle  *Turn
	epoch   uint64
	planned strings.Builder
	words   []tts.WordTiming

	// phase is where the turn is; standing, what its results lead to.
	phase    phase
	standing standing
	// synthDone: all of the turn's audio is queued. A follow-up waits for
	// it, because the output plays audio in the order it was queued: a
	// follow-up's words must not land between the preamble's phrases.
	synthDone bool
	// unspoken: no voice could speak the end of the answer; what will be
	// heard is the words queued, not the text planned.
	unspoken bool
	// played: some of the turn's audio has played.
	played bool

	assistant *entry
	calls     []*callState

	// stages is the turn's latency breakdown so far.
	stages events.Turn
}

func (c *conductor) interrupt(t *turnState, reason string) {
	t.overtake(interrupted)
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
	if !t.playoutDone() {
		c.settleAssistant(t, text, true)
		if t.assistant != nil {
			t.assistant.item.Played = played
		}
		c.emit(events.Event{Kind: events.PlayoutTruncate, Epoch: t.epoch, Text: text, Played: played})
		c.stopPlayout(t, text)
	}
	t.finish(modelFinished)
	c.maybeSettle(t)
}

func (c *conductor) onModelDone(d ModelDone) {
	t := c.liveTurn(d.Epoch)
	if t == nil {
		// A call from an interrupted generation never runs.
		return
	}
	t.finish(modelFinished)
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
	if t.playoutDone() {
		c.settleAssistant(t, c.allWords(t), false)
		c.startDeferred(t)
	}
	c.maybeSettle(t)
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
	if t == nil || t.playoutDone() {
		return
	}
	text := c.allWords(t)
	c.stopPlayout(t, text)
	if t.modelDone() {
		c.settleAssistant(t, text, false)
	}
	c.emit(events.Event{Kind: events.PlayoutDone, Epoch: epoch, Text: text, Played: c.edges.Played(epoch)})
	c.startDeferred(t)
	c.maybeSettle(t)
}

// liveTurn returns the unsettled, uninterrupted turn of epoch; anything an
// interrupted or finished epoch still produces is stale and dropped.
func (c *conductor) liveTurn(epoch uint64) *turnState {
	for _, t := range c.turns.live {
		if t.epoch == epoch && !t.wasCut() {
			return t
		}
	}
	return nil
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

func (c *conductor) stopPlayout(t *turnState, text string) {
	t.finish(playoutFinished)
	c.floor.lastPlayed, c.floor.lastPlayedAt = text, c.clock.Now()
	t.handle.mu.Lock()
	t.handle.played = text
	t.handle.mu.Unlock()
	close(t.handle.playoutStopped)
}

func (c *conductor) maybeSettle(t *turnState) {
	if t.phase != answered {
		return
	}
	for _, cs := range t.calls {
		if !cs.answered() && !cs.detached() {
			return
		}
	}
	t.finish(callsIn)
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
