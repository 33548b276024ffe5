package engine

import (
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/tts"
)

// Input is something that happened, for the core to take (Core.Handle):
// what the caller did, what an edge reports, what the session's owner
// asks. The core stamps each with the session clock when it takes it.
type Input interface{ input() }

// UserText is user input injected through the API: no VAD, no audio. It
// preempts whatever the agent is doing.
type UserText struct{ Text string }

// DTMF is a key the caller pressed on a phone ('0'-'9', '*', '#', 'A'-'D').
type DTMF struct{ Digit rune }

// ReplyRequest asks the agent to speak now (a greeting, a prompt after
// silence) with optional extra instructions for this one reply.
type ReplyRequest struct{ Instructions string }

// UserSpeechStarted is posted by the input stage when voice activity is
// confirmed.
type UserSpeechStarted struct{}

// UserSpeechStopped is posted when voice activity ends. Ago, when set, says
// it ended that long before the input was posted (a short sound whose
// words were awaited): the silence that ends the turn counts from then.
// Silence is the quiet the detector needed before it called the end (its
// MinSilence), before Ago: the caller's voice ended Ago+Silence before the
// input, which is where the turn's voice-to-voice latency starts.
type UserSpeechStopped struct{ Ago, Silence time.Duration }

// BargeInSuspected says the caller may be talking over the agent: the
// output pauses while the arbiter listens. Verdict, when set, is how long
// the arbiter can take to confirm or resume while the caller's audio comes;
// the pause ends a little after it even if no audio comes (a line that
// goes quiet after a cough), and after 3 s when it is not set.
type BargeInSuspected struct {
	Reason  string
	Verdict time.Duration
}

// BargeInConfirmed says the caller is talking over the agent: the agent's
// turn stops and the caller's speech has started.
type BargeInConfirmed struct{ Reason string }

// BargeInResumed says a suspected barge-in was not one (echo, a
// backchannel): the output resumes where it paused.
type BargeInResumed struct{ Reason string }

// TranscriptIgnored is a recognition result that is not the caller's turn:
// the agent's own words heard as echo, or a backchannel.
type TranscriptIgnored struct {
	Text   string
	Final  bool
	Reason string
}

// Reasons the session gives in events about the caller's words.
const (
	// NoWords is the reason of a transcript_ignored event for a final
	// transcript without words that a turn was waiting for: the sound
	// was noise, and no turn follows.
	NoWords = "no_words"
	// TurnDropped is the reason of an stt provider_error event for a turn
	// whose final transcript did not come within the transcript timeout
	// (WithTranscriptTimeout): the caller spoke, and their words are
	// lost. A recogniser that falls behind, because the machine runs more
	// calls than it can decode, drops turns this way.
	TurnDropped = "turn_dropped"
)

// EchoPathMeasured says what the echo canceller found out about the line:
// State "none" (no echo comes back: nothing the caller says is taken for
// it) or "present" with the echo's Delay and GainDB.
type EchoPathMeasured struct {
	State  string
	Delay  time.Duration
	GainDB float64
}

// UserTranscript is a recognition result for the caller's speech.
type UserTranscript struct {
	Text  string
	Final bool
	// Confidence is the recogniser's (stt.Transcript.Confidence): 0 when
	// unknown.
	Confidence float64
}

// ModelText is a streamed piece of the model's reply for turn Epoch.
type ModelText struct {
	Epoch uint64
	Text  string
}

// ModelDone ends turn Epoch's model stream: the complete tool calls, or the
// error that ended it.
type ModelDone struct {
	Epoch uint64
	Calls []llm.ToolCall
	Err   error
}

// SpeechWords places words in turn Epoch's audio timeline (offsets from the
// turn's first sample).
type SpeechWords struct {
	Epoch uint64
	Words []tts.WordTiming
}

// SpeechDone says synthesis for turn Epoch has ended: all of its audio is
// queued for playout. Err says why it ended early, if it did; Unspoken is
// the answer's text no voice could speak (the phrase that failed and every
// phrase after it), which the caller will never hear.
type SpeechDone struct {
	Epoch    uint64
	Err      error
	Unspoken string
}

// PlayoutStarted says the first sample of turn Epoch has been played.
type PlayoutStarted struct{ Epoch uint64 }

// PlayoutFinished says the last queued sample of turn Epoch has been played.
type PlayoutFinished struct{ Epoch uint64 }

// Stage is a point an answer's pipeline reaches on its way to the line,
// for the turn's latency breakdown (events.Turn).
type Stage int

// The stages the edges report, in the order an answer reaches them.
const (
	StageRequest         Stage = iota + 1 // the model request is leaving
	StageFirstToken                       // the model's first text, call or audio came back
	StageFirstPhrase                      // the first phrase went to the voice
	StageVoiceFirstAudio                  // the voice's first audio came back
	StageQueued                           // the first audio was queued for the line
)

// StageReached says turn Epoch's answer reached Stage at At (on the
// session clock: the edge reads it when it happens, so the mailbox's delay
// is not counted). A stage reached again (a retry, a backup model, the
// next phrase) is ignored.
type StageReached struct {
	Epoch uint64
	Stage Stage
	At    time.Time
	// Provider names the model (StageRequest) or the voice
	// (StageFirstPhrase) that took the turn.
	Provider string
	// VoiceFirstAudio, with StageQueued, is when the audio queued came
	// back from the voice (StageVoiceFirstAudio, reported with it).
	VoiceFirstAudio time.Time
}

// ModelUsage is the model's own count of turn Epoch's request and answer
// tokens, added to what it reported before for the turn (a follow-up
// request counts in its own turn).
type ModelUsage struct {
	Epoch     uint64
	TokensIn  int
	TokensOut int
}

// ToolOutcome is the end of one tool run.
type ToolOutcome struct {
	CallID string
	State  tools.State
	Output string
	Err    error
}

// ReconcileOutcome is a Reconciler's finding about call Of's unknown
// outcome, reported for call CallID, the repeat that asked.
type ReconcileOutcome struct {
	CallID string
	Of     string
	Done   bool
	Output string
	Err    error
}

// TransportLost says the caller's connection dropped: nothing more can be
// played to them until it is back.
type TransportLost struct{}

// TransportRestored says the caller's connection is back. Any input from
// the caller implies it too.
type TransportRestored struct{}

// ProviderFailure reports an edge's provider error that ends no turn (a
// recogniser that broke, a journal write that failed): Provider names the
// role ("stt", "journal").
type ProviderFailure struct {
	Provider string
	Err      error
}

// ProviderFailover reports that a provider failed and the agent's backup
// for that role ("llm", "stt", "tts") took over.
type ProviderFailover struct {
	Provider string
	Err      error
}

type timerFired struct {
	id uint64
}

// CheckpointDone reports how writing the state taken at event Seq
// (State.Seq) went: the core emits checkpoint_failed on a failure (once,
// until one succeeds) and checkpoint_saved, whose Count is Seq, on
// success.
type CheckpointDone struct {
	Seq uint64
	Err error
}

// Handoff hands the session to another agent: from the next model request
// on, To answers with its instructions and tools, over the whole
// conversation unless KeepTurns or Reset says otherwise. Done, if not
// nil, is closed once the core has changed agents.
type Handoff struct {
	To Agent
	// KeepTurns, if positive, keeps only the messages from the caller's
	// KeepTurns-th latest turn on; Reset keeps none. Tool calls and their
	// results always go along.
	KeepTurns int
	Reset     bool
	// Summary, if not empty, is put before what is kept, as a summary of
	// the conversation so far by the agent handing over.
	Summary string
	// Strategy names what was kept, for the handoff event's reason.
	Strategy string
	// Greet makes To speak first, as soon as the floor is free.
	Greet bool
	Done  chan struct{}
}

func (UserText) input()          {}
func (DTMF) input()              {}
func (ReplyRequest) input()      {}
func (UserSpeechStarted) input() {}
func (UserSpeechStopped) input() {}
func (UserTranscript) input()    {}
func (EchoPathMeasured) input()  {}
func (BargeInSuspected) input()  {}
func (BargeInConfirmed) input()  {}
func (BargeInResumed) input()    {}
func (TranscriptIgnored) input() {}
func (ModelText) input()         {}
func (ModelDone) input()         {}
func (SpeechWords) input()       {}
func (SpeechDone) input()        {}
func (PlayoutFinished) input()   {}
func (PlayoutStarted) input()    {}
func (StageReached) input()      {}
func (ModelUsage) input()        {}
func (ToolOutcome) input()       {}
func (timerFired) input()        {}
func (ReconcileOutcome) input()  {}
func (TransportLost) input()     {}
func (TransportRestored) input() {}
func (ProviderFailure) input()   {}
func (ProviderFailover) input()  {}
func (CheckpointDone) input()    {}
func (Handoff) input()           {}
