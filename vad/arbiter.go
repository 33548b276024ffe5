package vad

import (
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Action is what an [Arbiter] decided.
type Action int

// Actions.
const (
	// NoAction: nothing changed.
	NoAction Action = iota
	// SpeechStart: the caller started speaking while the agent was not
	// audible: ordinary turn-taking.
	SpeechStart
	// SpeechStop: the caller stopped speaking.
	SpeechStop
	// Suspect: speech while the agent is audible that may be the caller
	// or the agent's own echo. Pause the output and listen: the echo stops
	// with it, the caller does not.
	Suspect
	// Confirm: the caller is interrupting the agent (barge-in). Stop the
	// agent's turn. The caller's speech has started.
	Confirm
	// Resume: a suspicion was not confirmed (echo, a backchannel, a
	// cough): resume the output from where it paused.
	Resume
	// AwaitWords: a short sound over the agent has ended before its
	// length could make it a turn, so its words decide. Finalise the
	// recognition now: a Resume or a Confirm follows within WordsWait.
	AwaitWords
)

func (a Action) String() string {
	switch a {
	case NoAction:
		return "none"
	case SpeechStart:
		return "speech_start"
	case SpeechStop:
		return "speech_stop"
	case Suspect:
		return "suspect"
	case Confirm:
		return "confirm"
	case Resume:
		return "resume"
	case AwaitWords:
		return "await_words"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Agent is what the agent's output is doing, as far as the caller's
// audio is concerned.
type Agent uint8

// Agent states.
const (
	// AgentSilent: no turn of the agent's is under way; speech is
	// ordinary turn-taking.
	AgentSilent Agent = iota
	// AgentTurn: a turn is under way but nothing it played can be heard
	// in this frame (a pause between its words, or it has not begun to
	// play): speech interrupts it, and no echo can be mistaken for it.
	AgentTurn
	// AgentAudible: the agent's voice may be in this frame, as echo.
	AgentAudible
	// AgentThinking: a turn is under way and none of its audio has
	// played yet (the model or the voice is still coming). The caller has
	// heard nothing to answer with a backchannel, so speech is their turn
	// whatever its length: confirmed once ConfirmSpeech of it is heard,
	// without waiting for ShortSound or its words.
	AgentThinking
)

func (g Agent) String() string {
	switch g {
	case AgentSilent:
		return "silent"
	case AgentTurn:
		return "turn"
	case AgentAudible:
		return "audible"
	case AgentThinking:
		return "thinking"
	}
	return fmt.Sprintf("Agent(%d)", int(g))
}

// Decision is an Arbiter's verdict with the reason for it.
type Decision struct {
	Action Action
	// Reason says why, in a word or two (see the Reason constants).
	Reason string
	// Onset is when, in audio time, the speech the decision is about
	// began.
	Onset time.Duration
	// Within, for a Suspect, is the most audio time the verdict can
	// take: a confirmation or a resume comes by then.
	Within time.Duration
	// Ended, for a Confirm of a short sound by its words, is how long
	// ago the sound ended: the caller is not speaking any more, and the
	// silence that ends their turn has partly passed (the arbiter is
	// back to turn-taking, and no SpeechStop follows).
	Ended time.Duration
}

// Reasons given with decisions.
const (
	ReasonSpeech          = "speech"            // SpeechStart/Stop: plain voice activity
	ReasonOverAgent       = "speech_over_agent" // Suspect, or Confirm without resume: speech above the raised threshold for long enough
	ReasonSpeechContinued = "speech_continued"  // Confirm: speech went on after the output paused and its echo died
	ReasonTranscript      = "transcript"        // Confirm: the caller said words that ask for the floor (FloorWords, or with ConfirmWords enough words that are not the agent's)
	ReasonNotConfirmed    = "not_confirmed"     // Resume: speech died out with the output's echo, or a short sound brought no words
	ReasonShortSound      = "short_sound"       // AwaitWords, or Resume and the transcript dropped: a short sound whose words do not ask for the floor
	ReasonBackchannel     = "backchannel"       // Resume, or a transcript dropped: "uh-huh", "yeah"
	ReasonEchoTranscript  = "echo_transcript"   // Resume, or a transcript dropped: the words are what the agent just played
	ReasonUnconfirmed     = "unconfirmed_words" // a transcript dropped: words over the agent whose speech was not confirmed as a barge-in
)

// ArbiterConfig tunes an [Arbiter]. Zero fields take the defaults.
type ArbiterConfig struct {
	// Segmenter judges the caller's speech while the agent is not
	// audible, as in ordinary turn-taking.
	Segmenter SegmenterConfig
	// SpeakingThreshold is the probability a run of speech must start
	// with, while the agent is audible, to count as the caller (default
	// 0.7): echo left over by the canceller scores lower than a caller
	// close to the microphone. Once started, the run holds while frames
	// stay above the segmenter's activation threshold.
	SpeakingThreshold float32
	// SpeakingMinSpeech is how long speech during the agent's turn must
	// last, without a break, before the arbiter suspects a barge-in
	// (default 100 ms). In a pause between the agent's words the frames
	// need only the segmenter's activation threshold.
	SpeakingMinSpeech time.Duration
	// NoResume confirms a barge-in at once, on SpeakingThreshold and
	// SpeakingMinSpeech alone, with no pause and no transcript check.
	NoResume bool
	// EchoTail is how long echo may go on after the output paused: the
	// line's delay plus the room's decay (default 300 ms). An echo
	// canceller's delay estimate can set it per call with SetEchoTail.
	EchoTail time.Duration
	// ConfirmSpeech is how much speech, counted after EchoTail, a
	// suspicion needs before its length can confirm it (default 200 ms).
	ConfirmSpeech time.Duration
	// ShortSound is how long a sound over the agent lasts, from its
	// onset, before its length alone makes it a turn (default 1 s).
	// People say "uh-huh", "yeah" or "okay", cough and laugh in less; a
	// caller who takes the floor goes on. A sound that ends sooner is a
	// turn only if its words ask for the floor (FloorWords); otherwise
	// the output resumes.
	ShortSound time.Duration
	// ResumeQuiet is how long the caller must be quiet, once the echo
	// tail has passed, before a suspicion is ruled out (default 160 ms):
	// longer than the gap inside "uh-huh", short enough that the agent
	// takes up its sentence again without an awkward wait.
	ResumeQuiet time.Duration
	// WordsWait is how long, after a short sound ends, the verdict waits
	// for the recogniser's words (default 300 ms). A negative value means
	// no recogniser listens: a short sound resumes at once.
	WordsWait time.Duration
	// FloorWords are words that, said over the agent, ask for the floor
	// however short the sound (default DefaultFloorWords).
	FloorWords []string
	// ContinueWithin: a sound that starts this soon after a short sound
	// was ruled out on words that were not a backchannel (or on none)
	// continues it, and its length counts from the first one's onset
	// (default 1 s). A caller who pauses after "Just a moment," is
	// taking the floor; one who said "uh-huh" is not.
	ContinueWithin time.Duration
	// Backchannels are utterances that never interrupt (default
	// DefaultBackchannels). Matching ignores case and punctuation.
	Backchannels []string
	// EchoMatch is the share of a transcript's words, from 0 to 1, that
	// must be among the words the agent just played for the transcript
	// to count as echo (default 0.6).
	EchoMatch float64
	// ConfirmWords, if set, is how many recognised words that are
	// neither echo nor backchannel confirm a barge-in at once, before the
	// voice activity does. It is off by default: what a recogniser makes
	// of a cough, an "uh-huh" or the echo's remains is words too, and
	// confirming on them interrupts the agent for nothing. Without it a
	// transcript only rules a suspicion out (echo, backchannel).
	ConfirmWords int
	// DropAfterResume is how long after a Resume transcripts that are
	// only backchannel or echo are still dropped: the recogniser's final
	// for the speech that was ruled out comes late (default 2 s).
	DropAfterResume time.Duration
}

// DefaultFloorWords are the words that interrupt the agent by default,
// however briefly said. "No" and "what" are not among them: a recogniser
// hears a nasal "mm-hmm" as "no" often enough to cut the agent for a caller
// who meant "go on", and a caller who disagrees goes on talking ("no, I
// said six"), which is a turn by its length.
var DefaultFloorWords = []string{
	"stop", "wait", "hold", "hang", "sorry", "excuse", "pardon", "actually", "cancel", "help",
}

// DefaultBackchannels are the utterances that do not interrupt by default.
var DefaultBackchannels = []string{
	"uh-huh", "uh huh", "mm-hmm", "mhm", "mm", "hmm", "yeah", "yes", "yep", "ok", "okay",
	"right", "sure", "alright", "got it", "i see",
}

// Arbiter defaults.
const (
	DefaultSpeakingThreshold = 0.7
	DefaultSpeakingMinSpeech = 100 * time.Millisecond
	DefaultEchoTail          = 300 * time.Millisecond
	DefaultConfirmSpeech     = 200 * time.Millisecond
	DefaultShortSound        = time.Second
	DefaultResumeQuiet       = 160 * time.Millisecond
	DefaultWordsWait         = 300 * time.Millisecond
	DefaultContinueWithin    = time.Second
	DefaultEchoMatch         = 0.6
	DefaultDropAfterResume   = 2 * time.Second
)

// WithDefaults returns cfg with its zero fields set to the defaults.
func (cfg ArbiterConfig) WithDefaults() ArbiterConfig {
	if cfg.SpeakingThreshold == 0 {
		cfg.SpeakingThreshold = DefaultSpeakingThreshold
	}
	if cfg.SpeakingMinSpeech == 0 {
		cfg.SpeakingMinSpeech = DefaultSpeakingMinSpeech
	}
	if cfg.EchoTail == 0 {
		cfg.EchoTail = DefaultEchoTail
	}
	if cfg.ConfirmSpeech == 0 {
		cfg.ConfirmSpeech = DefaultConfirmSpeech
	}
	if cfg.ShortSound == 0 {
		cfg.ShortSound = DefaultShortSound
	}
	if cfg.ResumeQuiet == 0 {
		cfg.ResumeQuiet = DefaultResumeQuiet
	}
	if cfg.WordsWait == 0 {
		cfg.WordsWait = DefaultWordsWait
	}
	if cfg.FloorWords == nil {
		cfg.FloorWords = DefaultFloorWords
	}
	if cfg.ContinueWithin == 0 {
		cfg.ContinueWithin = DefaultContinueWithin
	}
	if cfg.Backchannels == nil {
		cfg.Backchannels = DefaultBackchannels
	}
	if cfg.EchoMatch == 0 {
		cfg.EchoMatch = DefaultEchoMatch
	}
	if cfg.DropAfterResume == 0 {
		cfg.DropAfterResume = DefaultDropAfterResume
	}
	cfg.Segmenter = NewSegmenter(cfg.Segmenter).Config()
	return cfg
}

type arbiterState int

const (
	stateQuiet     arbiterState = iota // the caller is not speaking
	stateSuspected                     // output paused, listening
	stateSpeaking                      // the caller holds the floor
)

// Arbiter decides barge-in. It takes, frame by frame, the speech
// probability of the caller's echo-cancelled audio and whether the agent
// may be audible in it, and, as they come, the recogniser's transcripts.
//
// While the agent is silent it segments speech like a [Segmenter]. While
// the agent is audible it asks more: a raised threshold held for a minimum
// duration. Then it suspects a barge-in and the output should pause: echo
// dies out with the output within EchoTail, a caller goes on. Speech that
// goes on past ShortSound confirms the barge-in, and so do words that ask
// for the floor; a sound that ends sooner (a backchannel, a cough, the
// echo) resumes the output from where it paused, once its words, if any
// come within WordsWait, say it was not a turn. The verdict comes within
// the Suspect decision's Within.
//
// Time is audio time, the sum of the frame durations pushed, so the
// Arbiter is deterministic and needs no clock. It allocates nothing per
// frame and is not safe for concurrent use.
type Arbiter struct {
	cfg   ArbiterConfig
	seg   *Segmenter
	back  map[string]bool // normalised backchannels, one or more words
	floor map[string]bool // words that ask for the floor

	elapsed time.Duration
	state   arbiterState
	// run is the current run of frames at or above the threshold while
	// a turn is under way; runStart when it began; runAudible whether the
	// agent was audible in any of them.
	run, runStart time.Duration
	runAudible    bool
	// needBreak: after a Resume, a new suspicion needs the probability to
	// fall first, so one long sound is not suspected over and over.
	needBreak bool
	// suspectedAt and onset of the pending suspicion; tail is how long
	// its echo may last (none if the agent was not audible); heard is the
	// speech counted after it.
	suspectedAt, onset, heard, tail time.Duration
	// deadline is when the pending suspicion's verdict is due; quiet is
	// the caller's silence since the last voiced frame; awaiting says the
	// sound ended and its words are awaited, for waited so far.
	deadline, quiet, waited time.Duration
	awaiting                bool
	// thinking: the suspicion came while the agent had played nothing of
	// its turn.
	thinking bool
	// carry: the last resume ruled out a short sound whose words were not
	// a backchannel, which began at carryOnset; a sound soon after it
	// continues it (ContinueWithin).
	carry      bool
	carryOnset time.Duration
	// carried: the pending suspicion continues an earlier short sound.
	carried bool
	// final: the transcript being judged is a final (see Final).
	final     bool
	resumedAt time.Duration
	resumed   bool
	// quietRun is silence while the caller holds the floor.
	quietRun time.Duration
	// segBase is the audio time at which seg was last reset: its times
	// count from there.
	segBase time.Duration
}

func (a *Arbiter) resetSeg() {
	a.seg.Reset()
	a.segBase = a.elapsed
}

// NewArbiter returns an arbiter with cfg, defaults filled in.
func NewArbiter(cfg ArbiterConfig) *Arbiter {
	cfg = cfg.WithDefaults()
	a := &Arbiter{cfg: cfg, seg: NewSegmenter(cfg.Segmenter), back: map[string]bool{}, floor: map[string]bool{}}
	for _, b := range cfg.Backchannels {
		a.back[strings.Join(Words(b), " ")] = true
	}
	for _, w := range cfg.FloorWords {
		for _, x := range Words(w) {
			a.floor[x] = true
		}
	}
	return a
}

// Config returns the configuration in use.
func (a *Arbiter) Config() ArbiterConfig { return a.cfg }

// SetEchoTail sets how long echo may last after the output pauses, for
// instance from an echo canceller's delay estimate plus the room's decay.
func (a *Arbiter) SetEchoTail(d time.Duration) {
	if d <= 0 {
		return
	}
	a.cfg.EchoTail = d
}

// SetWordsWait sets how long a short sound's verdict waits for its words;
// negative when no recogniser listens (see ArbiterConfig.WordsWait).
func (a *Arbiter) SetWordsWait(d time.Duration) { a.cfg.WordsWait = d }

// verdictWithin is how much audio time, from a suspicion, its verdict can
// take: the sound's length decides by ShortSound (and once ConfirmSpeech
// has been heard past the echo tail), then the caller's quiet and the
// wait for words. The deadline enforces it whatever the audio does.
func (a *Arbiter) verdictWithin() time.Duration {
	length := max(a.onset+a.cfg.ShortSound-a.suspectedAt, a.tail+a.cfg.ConfirmSpeech)
	return length + a.cfg.ResumeQuiet + max(a.cfg.WordsWait, 0)
}

// Elapsed returns the audio time pushed so far.
func (a *Arbiter) Elapsed() time.Duration { return a.elapsed }

// Suspecting reports whether a suspicion is pending (the output should be
// paused).
func (a *Arbiter) Suspecting() bool { return a.state == stateSuspected }

// Speaking reports whether the caller holds the floor.
func (a *Arbiter) Speaking() bool { return a.state == stateSpeaking }

// Frame takes the speech probability of a frame lasting d and what the
// agent's output is doing, and returns what changed.
func (a *Arbiter) Frame(prob float32, d time.Duration, agent Agent) Decision {
	at := a.elapsed
	a.elapsed += d
	switch a.state {
	case stateSuspected:
		return a.listen(prob, at, d)
	case stateSpeaking:
		return a.speaking(prob, d)
	}
	if agent == AgentSilent {
		a.run, a.needBreak = 0, false
		if a.seg.Push(prob, d) == Started {
			a.state, a.quietRun, a.onset = stateSpeaking, 0, a.segBase+a.seg.SpeechStartedAt()
			return Decision{Action: SpeechStart, Reason: ReasonSpeech, Onset: a.onset}
		}
		return Decision{}
	}
	// A turn is under way: speech interrupts it only if it holds, and
	// while the agent is audible its echo must not count.
	a.resetSeg()
	threshold := a.cfg.Segmenter.ActivationThreshold
	if agent == AgentAudible && a.run == 0 {
		// A run starts above the raised threshold; once started, it
		// holds above the plain one, through the quieter parts of words.
		threshold = a.cfg.SpeakingThreshold
	}
	if prob < threshold {
		a.run, a.needBreak = 0, false
		return Decision{}
	}
	if a.needBreak {
		return Decision{}
	}
	if a.run == 0 {
		a.runStart, a.runAudible = at, false
	}
	a.run += d
	a.runAudible = a.runAudible || agent == AgentAudible
	if a.run < a.cfg.SpeakingMinSpeech {
		return Decision{}
	}
	a.run = 0
	if a.cfg.NoResume {
		a.state, a.quietRun, a.onset = stateSpeaking, 0, a.runStart
		return Decision{Action: Confirm, Reason: ReasonOverAgent, Onset: a.onset}
	}
	a.state = stateSuspected
	a.suspectedAt, a.onset, a.heard, a.tail = a.elapsed, a.runStart, 0, 0
	a.carried = a.carry && a.runStart-a.resumedAt <= a.cfg.ContinueWithin
	if a.carried {
		a.onset = a.carryOnset
	}
	a.carry = false
	a.quiet, a.waited, a.awaiting, a.thinking = 0, 0, false, agent == AgentThinking
	if a.runAudible {
		a.tail = a.cfg.EchoTail
	}
	within := a.verdictWithin()
	a.deadline = a.elapsed + within
	return Decision{Action: Suspect, Reason: ReasonOverAgent, Onset: a.onset, Within: within}
}

// listen runs while a suspicion is pending and the output is paused.
func (a *Arbiter) listen(prob float32, at, d time.Duration) Decision {
	voiced := prob >= a.cfg.Segmenter.ActivationThreshold
	if a.elapsed >= a.deadline {
		// Never resume over the caller's voice: a sound still going at
		// the deadline has lasted long enough to be a turn.
		if voiced {
			return a.confirm(ReasonSpeechContinued)
		}
		return a.resume(ReasonNotConfirmed)
	}
	if voiced {
		// Sound again, after a quiet: its length counts on from the onset.
		a.quiet, a.awaiting = 0, false
		if at >= a.suspectedAt+a.tail {
			a.heard += d
		}
		// Without a recogniser no words can tell a short sound from the
		// start of a turn: speech that outlasts the echo tail is a turn,
		// as it is before the agent has played anything.
		if a.heard >= a.cfg.ConfirmSpeech && (a.thinking || a.cfg.WordsWait < 0 || a.elapsed-a.onset >= a.cfg.ShortSound) {
			return a.confirm(ReasonSpeechContinued)
		}
		return Decision{}
	}
	a.quiet += d
	if a.awaiting {
		if a.waited += d; a.waited >= a.cfg.WordsWait {
			// No words came, or none that decided: an unrecognised short
			// sound is not a turn.
			return a.resume(ReasonNotConfirmed)
		}
		return Decision{}
	}
	if a.elapsed < a.suspectedAt+a.tail || a.quiet < a.cfg.ResumeQuiet {
		return Decision{}
	}
	if a.cfg.WordsWait < 0 {
		// No recogniser listens: the length decides alone. A sound that
		// continued an earlier one has, with it, lasted a second.
		if a.carried && a.elapsed-a.onset >= a.cfg.ShortSound {
			return a.confirmWords(ReasonSpeechContinued)
		}
		return a.resume(ReasonNotConfirmed)
	}
	// The echo, or a short sound: a word as short as "wait" may have
	// ended inside the echo tail, so the words are asked for either way.
	a.awaiting, a.waited = true, 0
	return Decision{Action: AwaitWords, Reason: ReasonShortSound, Onset: a.onset}
}

// speaking runs while the caller holds the floor.
func (a *Arbiter) speaking(prob float32, d time.Duration) Decision {
	if prob >= a.cfg.Segmenter.DeactivationThreshold {
		a.quietRun = 0
		return Decision{}
	}
	a.quietRun += d
	if a.quietRun < a.cfg.Segmenter.MinSilence {
		return Decision{}
	}
	a.state, a.quietRun = stateQuiet, 0
	a.resetSeg()
	return Decision{Action: SpeechStop, Reason: ReasonSpeech, Onset: a.onset}
}

func (a *Arbiter) confirm(reason string) Decision {
	a.state, a.quietRun = stateSpeaking, 0
	return Decision{Action: Confirm, Reason: reason, Onset: a.onset}
}

// confirmWords confirms a suspicion on its words. If the caller has been
// quiet for MinSilence already, their speech has ended: the decision says
// how long ago and the arbiter goes back to turn-taking; otherwise the quiet
// so far counts towards the end of their speech.
func (a *Arbiter) confirmWords(reason string) Decision {
	d := a.confirm(reason)
	if a.quiet < a.cfg.Segmenter.MinSilence {
		a.quietRun = a.quiet
		return d
	}
	d.Ended = a.quiet
	a.state = stateQuiet
	a.resetSeg()
	return d
}

func (a *Arbiter) resume(reason string) Decision {
	a.carry = a.state == stateSuspected && (reason == ReasonShortSound || reason == ReasonNotConfirmed && a.heard > 0)
	a.carryOnset = a.onset
	// A sound still going when the output resumes (its words ruled it
	// out) must break before it can be suspected again; after a quiet,
	// the next sound is a new one from its first frame.
	a.needBreak = a.state != stateSuspected || a.quiet == 0
	a.state = stateQuiet
	a.run = 0
	a.resumed, a.resumedAt = true, a.elapsed
	a.resetSeg()
	return Decision{Action: Resume, Reason: reason, Onset: a.onset}
}

// Transcript takes a recognition result (interim or final), the words the
// agent played in the last few seconds and what the agent's output is
// doing. It returns what changed and whether the transcript is the
// caller's: a backchannel or the agent's own words heard during its turn
// (or just after a Resume) are not, and the caller's turn must not include
// them.
func (a *Arbiter) Transcript(text, played string, agent Agent) (d Decision, keep bool) {
	words := Words(text)
	if len(words) == 0 {
		return Decision{}, false
	}
	recent := a.resumed && a.elapsed-a.resumedAt <= a.cfg.DropAfterResume
	judging := a.state == stateSuspected || (a.state == stateQuiet && (agent != AgentSilent || recent))
	if !judging {
		return Decision{}, true
	}
	switch a.classify(words, played) {
	case ReasonBackchannel:
		if a.state == stateSuspected {
			return a.resume(ReasonBackchannel), false
		}
		return Decision{Reason: ReasonBackchannel}, false
	case ReasonEchoTranscript:
		if a.state == stateSuspected {
			return a.resume(ReasonEchoTranscript), false
		}
		return Decision{Reason: ReasonEchoTranscript}, false
	case ReasonTranscript:
		if a.state == stateQuiet {
			a.onset = a.elapsed
		}
		return a.confirm(ReasonTranscript), true
	}
	if a.state == stateSuspected {
		ended := a.awaiting || (a.final && a.quiet > 0)
		switch {
		case a.asksFloor(words):
			return a.confirmWords(ReasonTranscript), true
		case ended && (a.carried || a.heard > 0) && a.elapsed-a.onset >= a.cfg.ShortSound:
			// A sound that continued an earlier one (ContinueWithin) and
			// with it has lasted a second: a turn by its length, and its
			// words are neither a backchannel nor the agent's (they were
			// judged above), even if it was too short to outlast the
			// echo tail.
			return a.confirmWords(ReasonSpeechContinued), true
		case ended:
			// The short sound's words, all of them, and they do not ask
			// for the floor: a backchannel the recogniser misheard, a
			// cough it read as a word.
			return a.resume(ReasonShortSound), false
		}
	}
	// Words that are neither echo nor backchannel, over an agent that is
	// still speaking, of speech the voice activity did not take for a
	// barge-in (it never rose to a suspicion, or the suspicion was ruled
	// out): what a recogniser makes of noise and echo remains is words
	// too, and they must not interrupt where the voice did not.
	if a.state == stateQuiet && (agent == AgentAudible || (recent && agent != AgentSilent)) {
		return Decision{Reason: ReasonUnconfirmed}, false
	}
	// Too few words to tell: keep listening.
	return Decision{}, true
}

// NoWords tells the arbiter the recogniser finalised an utterance and found
// no words in it: a short sound whose words were awaited is not a turn.
func (a *Arbiter) NoWords() Decision {
	if a.state == stateSuspected && a.awaiting {
		return a.resume(ReasonNotConfirmed)
	}
	return Decision{}
}

// Final is Transcript for a recogniser's final result, the settled words of
// an utterance: one that comes once a short sound over the agent has ended
// decides it, even before the arbiter asks for it.
func (a *Arbiter) Final(text, played string, agent Agent) (d Decision, keep bool) {
	a.final = true
	defer func() { a.final = false }()
	return a.Transcript(text, played, agent)
}

// asksFloor reports whether words said over the agent ask for the floor,
// however short the sound: they begin with one of the floor words, after
// any backchannel, filler or "no" ("oh wait", "okay, stop", "no, wait"). People who take the
// floor in a word or two lead with it; other words do not ask for it: what
// a recogniser makes of an "uh-huh" it does not know is words too ("the
// a", "book the", even "are stop"), and a caller who means to take the
// floor goes on talking.
func (a *Arbiter) asksFloor(words []string) bool {
	for _, w := range words {
		if a.back[w] || leadIns[w] {
			continue
		}
		return a.floor[w]
	}
	return false
}

// AsksFloor reports whether text, said over the agent, asks for the floor
// however short the sound (see ArbiterConfig.FloorWords).
func (a *Arbiter) AsksFloor(text string) bool { return a.asksFloor(Words(text)) }

// leadIns are what people say before the word that takes the floor ("oh
// wait", "no, stop"): fillers, and "no", which alone does not.
var leadIns = map[string]bool{"uh": true, "um": true, "er": true, "oh": true, "ah": true, "mm": true, "hmm": true, "no": true}

// classify says what a transcript heard while the agent is audible is.
func (a *Arbiter) classify(words []string, played string) string {
	if a.back[strings.Join(words, " ")] {
		return ReasonBackchannel
	}
	agent := map[string]bool{}
	for _, w := range Words(played) {
		agent[w] = true
	}
	var echo, other int
	for _, w := range words {
		switch {
		case agent[w]:
			echo++
		case a.back[w]:
		default:
			other++
		}
	}
	if echo > 0 && float64(echo) >= a.cfg.EchoMatch*float64(len(words)) {
		return ReasonEchoTranscript
	}
	if a.cfg.ConfirmWords > 0 && other >= a.cfg.ConfirmWords {
		return ReasonTranscript
	}
	if echo+other == 0 {
		return ReasonBackchannel
	}
	return ""
}

// Words splits text into lower-case words without punctuation, keeping
// inner hyphens and apostrophes ("uh-huh", "don't").
func Words(text string) []string {
	f := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '\''
	})
	out := f[:0]
	for _, w := range f {
		if w = strings.Trim(w, "-'"); w != "" {
			out = append(out, w)
		}
	}
	return out
}
