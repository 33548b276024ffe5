package engine

import (
	"strconv"
	"strings"
	"time"
)

// SpeechRetryBackoff is how long a generation waits before it asks the same
// voice again for a phrase it failed on: long enough for a provider's
// momentary refusal (a 429, a dropped connection) to pass, short enough that
// the caller hears a pause rather than the end of the answer. It is bounded
// by the session's stall timeout.
const SpeechRetryBackoff = 250 * time.Millisecond

// PhraseTries is the order in which a phrase the voice failed on is tried
// again: once more on the same voice after SpeechRetryBackoff, then once on
// each further voice (runtime.Agent.BackupTTS), each with its own retry. The
// live generation edge and the simulator both follow it, so a scenario
// proves what a call does.
type PhraseTries struct {
	// Voices is how many voices there are (1, or 2 with a backup).
	Voices int
	// Voice is the voice in use, from 0. A failover carries over to the
	// answer's later phrases.
	Voice   int
	retried bool
}

// Failed records that the current attempt failed and says what to do next:
// wait and try the same voice again (retry), move on to the next voice
// (failover; no wait, it is another provider), or give up (ok false): no
// voice can speak the phrase. A failure not worth repeating on the same
// voice (retry false: it stalled for the whole stall timeout already, or
// says it is not temporary) goes straight to the next voice.
func (p *PhraseTries) Failed(retry bool) (wait time.Duration, failover, ok bool) {
	if retry && !p.retried {
		p.retried = true
		return SpeechRetryBackoff, false, true
	}
	if p.Voice+1 < p.Voices {
		p.Voice++
		p.retried = false
		return 0, true, true
	}
	return 0, false, false
}

// Next starts a new phrase: it gets its own retry on the voice in use.
func (p *PhraseTries) Next() { p.retried = false }

// The system note the context gets when no voice could speak the rest of an
// answer: the caller heard the message before it, and the model learns what
// was lost so it can say it again.
const (
	undeliveredPrefix = "[not delivered] The voice failed, so the caller did not hear the rest of your last answer: "
	undeliveredSuffix = ". Say it again if it still matters."
)

func undeliveredNote(text string) string {
	return undeliveredPrefix + strconv.Quote(strings.TrimSpace(text)) + undeliveredSuffix
}

// IsUndeliveredNote reports whether a system message is the note a session
// adds when an answer could not be spoken, and which words it names as lost.
func IsUndeliveredNote(text string) (lost string, ok bool) {
	rest, found := strings.CutPrefix(text, undeliveredPrefix)
	if !found {
		return "", false
	}
	if rest, found = strings.CutSuffix(rest, undeliveredSuffix); !found {
		return "", false
	}
	lost, err := strconv.Unquote(rest)
	return lost, err == nil
}
