package events

import (
	"slices"
	"time"
)

// Kind names an event. The string values are stable: they appear in JSONL
// files and scenario expectations.
type Kind string

// Event kinds.
const (
	SessionStarted Kind = "session_started"
	SessionEnded   Kind = "session_ended"

	SpeechStarted Kind = "speech_started" // VAD: the user started speaking
	SpeechStopped Kind = "speech_stopped" // VAD: the user stopped speaking
	Transcript    Kind = "transcript"     // STT result (Final tells which)
	UserTurn      Kind = "user_turn"      // a user message was committed to the context (spoken or injected)

	BargeInSuspected  Kind = "barge_in_suspected" // speech over the agent: output paused while the arbiter listens (Reason)
	BargeInConfirmed  Kind = "barge_in_confirmed" // user input interrupted the agent (Reason)
	BargeInResumed    Kind = "barge_in_resumed"   // a suspicion was not confirmed: output resumed where it paused (Reason)
	TranscriptIgnored Kind = "transcript_ignored" // recognised words that are not the caller's turn: echo or a backchannel (Reason)

	TurnStarted Kind = "turn_started" // a new agent turn (epoch) began
	// A speculative answer: the model is asked as soon as the caller's
	// words are in, while the silence that ends their turn is still
	// running (Epoch: the answer's, Text: the words it answers). It is
	// used when the turn ends on the same words (Delay: how much sooner
	// the model was asked), or discarded (Reason) with nothing played,
	// run or kept of it.
	SpeculationStarted   Kind = "speculation_started"
	SpeculationUsed      Kind = "speculation_used"
	SpeculationDiscarded Kind = "speculation_discarded"
	InferenceSent        Kind = "inference_sent"    // a model request went out
	TurnInterrupted      Kind = "turn_interrupted"  // the turn was cut short
	PlayoutStarted       Kind = "playout_started"   // the turn's first audio reached the caller's line
	PlayoutDone          Kind = "playout_done"      // all of the turn's audio played (Text: what was said)
	PlayoutTruncate      Kind = "playout_truncated" // the turn's audio was cut (Text: what was played)
	TurnSettled          Kind = "turn_settled"      // nothing of the turn is still in flight
	Idle                 Kind = "idle"              // the agent has nothing left to do until the user acts

	ToolRequested Kind = "tool_requested" // the model asked for a call
	ToolDeferred  Kind = "tool_deferred"  // a mutation waits for its preamble to play out
	ToolStarted   Kind = "tool_started"   // the call's body began running
	// ToolCancelRequested: the user cut in and the call's policy is cancel.
	ToolCancelRequested Kind = "tool_cancel_requested"
	// ToolDeduped: a repeat of a mutation with the same idempotency key was
	// given the earlier outcome (Reason "reuse") or waits for the earlier
	// run (Reason "join") instead of running again; Text is the earlier call.
	ToolDeduped Kind = "tool_deduped"
	// ToolReconcile: a repeat found an earlier outcome unknown; Reason is
	// started, done, not_done or failed; Text is the earlier call.
	ToolReconcile Kind = "tool_reconcile"
	// ToolLateOutcome: a call that had already ended (abandoned at its
	// deadline) reported how its body really finished.
	ToolLateOutcome Kind = "tool_late_outcome"
	ToolTerminal    Kind = "tool_terminal"  // the call reached its terminal state (State)
	ToolCommitted   Kind = "tool_committed" // the call's result entered the chat context

	DTMF Kind = "dtmf" // the caller pressed a key on a phone (Text: the digit)

	TransportLost     Kind = "transport_lost"     // the caller's connection dropped
	TransportRestored Kind = "transport_restored" // the caller's connection is back

	SessionResumed   Kind = "session_resumed"   // the session started from another's state (Text: the agent)
	SessionMoved     Kind = "session_moved"     // a draining worker moved the call to another (Text: "from WORKER to WORKER" or where it was sent)
	Handoff          Kind = "handoff"           // another agent took over (Text: "from -> to", Reason: the context strategy, Count: items kept)
	CheckpointSaved  Kind = "checkpoint_saved"  // the session's state as of event Count reached the store (Reason "recovered" after failures)
	CheckpointFailed Kind = "checkpoint_failed" // a checkpoint could not be written; the call goes on in memory (Error)

	ProviderError    Kind = "provider_error"    // an LLM, STT or TTS error (Provider, Error)
	EchoPath         Kind = "echo_path"         // the echo canceller measured the line's echo (State: none or present; Delay, GainDB)
	ProviderFailover Kind = "provider_failover" // a provider failed and its backup took over (Provider, Error)
	EventsDropped    Kind = "events_dropped"    // a slow subscriber lost Count events

	TurnMetrics Kind = "turn_metrics" // an agent turn ended: when each of its stages was reached (Turn)

	// A warm transfer's steps (sip.WarmTransfer): the caller is put on
	// hold and the person called (Text: the target); the person answered
	// and hears the briefing (Text: the briefing); the person accepted and
	// the two are connected (Reason: "refer" or "bridge"); or the transfer
	// failed and the agent is back with the caller (Reason: declined,
	// no_answer, no_decision, hung_up or error; Error: why). Each is
	// checkpointed, with the transfer's state in the user data.
	TransferStarted   Kind = "transfer_started"
	TransferBriefing  Kind = "transfer_briefing"
	TransferConnected Kind = "transfer_connected"
	TransferFailed    Kind = "transfer_failed"
)

// kinds lists every Kind above, in the order declared. A test holds it to
// the constants, so a kind added there and not here fails the build's tests.
var kinds = []Kind{
	SessionStarted, SessionEnded,
	SpeechStarted, SpeechStopped, Transcript, UserTurn,
	BargeInSuspected, BargeInConfirmed, BargeInResumed, TranscriptIgnored,
	TurnStarted, SpeculationStarted, SpeculationUsed, SpeculationDiscarded, InferenceSent,
	TurnInterrupted, PlayoutStarted, PlayoutDone, PlayoutTruncate, TurnSettled, Idle,
	ToolRequested, ToolDeferred, ToolStarted, ToolCancelRequested, ToolDeduped,
	ToolReconcile, ToolLateOutcome, ToolTerminal, ToolCommitted,
	DTMF,
	TransportLost, TransportRestored,
	SessionResumed, SessionMoved, Handoff, CheckpointSaved, CheckpointFailed,
	ProviderError, EchoPath, ProviderFailover, EventsDropped,
	TurnMetrics,
	TransferStarted, TransferBriefing, TransferConnected, TransferFailed,
}

// Kinds returns every event kind, in the order declared: what a scenario's
// expectations or a reader of JSONL files can check names against.
func Kinds() []Kind { return slices.Clone(kinds) }

// Known reports whether k is one of Kinds.
func (k Kind) Known() bool { return slices.Contains(kinds, k) }

// Event is one decision of the session core. Fields beyond the header are
// set only where they mean something for the kind.
type Event struct {
	Seq     uint64        `json:"seq"`
	Session string        `json:"session"`
	Epoch   uint64        `json:"epoch"`
	Time    time.Time     `json:"time"`
	At      time.Duration `json:"at_ns"` // since the session started, on the session clock
	Kind    Kind          `json:"kind"`

	Text     string `json:"text,omitempty"`
	Final    bool   `json:"final,omitempty"`
	Reason   string `json:"reason,omitempty"`
	CallID   string `json:"call_id,omitempty"`
	Tool     string `json:"tool,omitempty"`
	State    string `json:"state,omitempty"`
	Provider string `json:"provider,omitempty"`
	// Policy and Key are a tool call's interrupt policy and idempotency
	// key, for tool_requested: what a trace or a log needs to tell a
	// repeated mutation from a new one without the arguments.
	Policy string `json:"policy,omitempty"`
	Key    string `json:"key,omitempty"`
	Error  string `json:"error,omitempty"`
	Count  int    `json:"count,omitempty"`
	// Played is how much of the turn's audio had been played, for playout
	// events.
	Played time.Duration `json:"played_ns,omitempty"`
	// Delay and GainDB are the line's echo path, for echo_path events;
	// Delay is also the time a speculative answer won (speculation_used)
	// and, for a spoken user_turn, the endpointing silence it waited
	// after the detector heard the speech end.
	Delay  time.Duration `json:"delay_ns,omitempty"`
	GainDB float64       `json:"gain_db,omitempty"`
	// Turn is the turn's latency breakdown, for turn_metrics events.
	Turn *Turn `json:"turn,omitempty"`
}

// Turn is when each stage of one agent turn was reached, on the session
// clock (like Event.At); a stage the turn did not reach, or that does
// not apply (a greeting has no caller speech), is zero.
//
// The stages, in the order a spoken answer passes them: the caller's
// speech ends (the detector), the final transcript arrives, the endpoint
// is decided (the caller's turn is committed), the model request leaves,
// the model's first token comes back, the first phrase goes to the voice,
// the voice's first audio comes back, it is queued for the line, and it is
// played on the line. Voice-to-voice is SpeechEnd to FirstPlayed.
type Turn struct {
	Agent string `json:"agent,omitempty"`
	// Model and Voice name the providers that answered (their Name, or
	// their Go type when they have none).
	Model string `json:"model,omitempty"`
	Voice string `json:"voice,omitempty"`

	SpeechEnd       time.Duration `json:"speech_end_ns,omitempty"`
	Transcript      time.Duration `json:"transcript_ns,omitempty"`
	Endpoint        time.Duration `json:"endpoint_ns,omitempty"`
	Request         time.Duration `json:"request_ns,omitempty"`
	FirstToken      time.Duration `json:"first_token_ns,omitempty"`
	FirstPhrase     time.Duration `json:"first_phrase_ns,omitempty"`
	VoiceFirstAudio time.Duration `json:"voice_first_audio_ns,omitempty"`
	Queued          time.Duration `json:"queued_ns,omitempty"`
	FirstPlayed     time.Duration `json:"first_played_ns,omitempty"`
	// ModelDone is when the model's answer ended (or was cancelled, for
	// an interrupted turn); SynthDone when the last of its audio was
	// synthesised (or the synthesis was cancelled).
	ModelDone time.Duration `json:"model_done_ns,omitempty"`
	SynthDone time.Duration `json:"synth_done_ns,omitempty"`
	// Interrupted: the turn was cut short (a barge-in, newer input).
	Interrupted bool `json:"interrupted,omitempty"`

	// TokensIn and TokensOut are the model's own count of the request's
	// and the answer's tokens, where it reports them (0: not reported).
	TokensIn  int `json:"tokens_in,omitempty"`
	TokensOut int `json:"tokens_out,omitempty"`

	// Overhead is Holdline's own share of the turn's latency: from the
	// endpoint to the request leaving, plus from the voice's first audio
	// to its being queued for the line. What the providers take, the
	// endpointing silence and the line's frame clock are not in it.
	Overhead time.Duration `json:"overhead_ns,omitempty"`
}

// StageTime is how long one stage of a turn took: from the stage before
// it (From) to this one.
type StageTime struct {
	Name string
	From string
	Took time.Duration
}

// The stage names Breakdown uses, which are also the stage label of
// Prometheus' holdline_turn_stage_seconds.
const (
	StageTranscript      = "transcript"        // speech end → final transcript
	StageEndpoint        = "endpoint"          // speech end → endpoint decided
	StageRequest         = "request"           // endpoint → model request sent
	StageFirstToken      = "first_token"       // request → first token
	StageFirstPhrase     = "first_phrase"      // first token → first phrase to the voice
	StageVoiceFirstAudio = "voice_first_audio" // first phrase → the voice's first audio
	StageQueued          = "queued"            // the voice's first audio → queued for the line
	StagePlayed          = "played"            // queued → played on the line
	StageVoiceToVoice    = "voice_to_voice"    // speech end → played on the line
	StageOverhead        = "overhead"          // Holdline's own share (Turn.Overhead)
)

// Breakdown is the turn's stages that were reached, each with the time it
// took from the one before it; then voice-to-voice (for an answer to the
// caller's speech) and the overhead. A request that left before the
// endpoint (a speculative answer) took no time after it.
func (t Turn) Breakdown() []StageTime {
	var out []StageTime
	add := func(name, from string, a, b time.Duration) {
		if a != 0 && b != 0 {
			out = append(out, StageTime{Name: name, From: from, Took: max(b-a, 0)})
		}
	}
	add(StageTranscript, "speech_end", t.SpeechEnd, t.Transcript)
	add(StageEndpoint, "speech_end", t.SpeechEnd, t.Endpoint)
	add(StageRequest, StageEndpoint, t.Endpoint, t.Request)
	add(StageFirstToken, StageRequest, t.Request, t.FirstToken)
	add(StageFirstPhrase, StageFirstToken, t.FirstToken, t.FirstPhrase)
	add(StageVoiceFirstAudio, StageFirstPhrase, t.FirstPhrase, t.VoiceFirstAudio)
	add(StageQueued, StageVoiceFirstAudio, t.VoiceFirstAudio, t.Queued)
	add(StagePlayed, StageQueued, t.Queued, t.FirstPlayed)
	add(StageVoiceToVoice, "speech_end", t.SpeechEnd, t.FirstPlayed)
	if t.FirstPlayed != 0 {
		out = append(out, StageTime{Name: StageOverhead, Took: t.Overhead})
	}
	return out
}
