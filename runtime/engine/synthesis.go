package engine

import (
	"errors"
	"strings"
	"time"

	"github.com/holdline/holdline/tts"
)

// Synthesis is one answer's way through its voices, phrase by phrase: which
// voice says the next phrase, what to do when it fails (PhraseTries), where
// its audio goes on the turn's audio timeline, and what the caller never
// heard once no voice could go on. It waits for
// nothing and keeps no clock: the live generation edge and the simulator
// each do the waiting and the speaking, and both ask it what comes next, so
// a scenario proves what a call does.
type Synthesis struct {
	tries    PhraseTries
	queued   time.Duration
	failed   error
	unspoken []string
}

// NewSynthesis starts an answer's synthesis over voices voices (1, or 2
// with a backup).
func NewSynthesis(voices int) Synthesis {
	return Synthesis{tries: PhraseTries{Voices: voices}}
}

// Say starts the next phrase, with its own retry on the voice in use. It
// reports false once the answer's speech has failed: the phrase is then
// not to be spoken, and is reported unspoken.
func (s *Synthesis) Say(text string) bool {
	if s.failed != nil {
		s.unspoken = append(s.unspoken, text)
		return false
	}
	s.tries.Next()
	return true
}

// Voice is the voice to ask for the phrase, from 0. A failover carries over
// to the answer's later phrases.
func (s *Synthesis) Voice() int { return s.tries.Voice }

// ErrProviderStalled ends a model or synthesis stream that sent nothing for
// longer than the session's stall timeout (WithStallTimeout).
var ErrProviderStalled = errors.New("runtime: provider stalled")

// Offset is where the answer's next audio goes on the turn's audio
// timeline: how much of it has been queued.
func (s *Synthesis) Offset() time.Duration { return s.queued }

// Queued notes that d more of the answer's audio was queued.
func (s *Synthesis) Queued(d time.Duration) { s.queued += d }

// Failed records that the attempt at the phrase text failed with err, and
// says what to do next, as PhraseTries.Failed does. When no voice is left
// (ok false) the answer's speech has failed: text and every later phrase
// are unspoken.
func (s *Synthesis) Failed(text string, err error) (wait time.Duration, failover, ok bool) {
	wait, failover, ok = s.tries.Failed(worthRetrying(err))
	if !ok {
		s.Fail(err)
		s.unspoken = append(s.unspoken, text)
	}
	return wait, failover, ok
}

// Fail records that the answer's audio failed for a reason of its own (the
// output refused it): later phrases are unspoken. The first failure is the
// one reported.
func (s *Synthesis) Fail(err error) {
	if s.failed == nil {
		s.failed = err
	}
}

// Done is the answer's SpeechDone: the failure, if any, and what the
// caller never heard.
func (s *Synthesis) Done(epoch uint64) SpeechDone {
	return SpeechDone{Epoch: epoch, Err: s.failed, Unspoken: strings.TrimSpace(strings.Join(s.unspoken, " "))}
}

// worthRetrying reports whether asking the same voice again may help. A
// voice that stalled has already cost the caller the stall timeout, and
// one that says its error is not temporary (a 404, a wrong key: the
// Temporary method of the providers' API errors) would only fail again.
func worthRetrying(err error) bool {
	if errors.Is(err, ErrProviderStalled) {
		return false
	}
	if t, ok := errors.AsType[interface {
		error
		Temporary() bool
	}](err); ok {
		return t.Temporary()
	}
	return true
}

// WordsFrom places a phrase's word timings, given from the start of its
// audio, on the turn's audio timeline, where the phrase's audio starts at
// start.
func WordsFrom(start time.Duration, words []tts.WordTiming) []tts.WordTiming {
	out := make([]tts.WordTiming, len(words))
	for i, w := range words {
		out[i] = tts.WordTiming{Word: w.Word, Start: start + w.Start, End: start + w.End}
	}
	return out
}
