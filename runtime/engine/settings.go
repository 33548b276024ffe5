package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/tools"
)

// Defaults. Every wait in a session has a bound; these are the bounds used
// when nothing says otherwise.
const (
	DefaultEndpointing       = 500 * time.Millisecond
	DefaultTranscriptTimeout = 2 * time.Second
	DefaultMailbox           = 1024
	DefaultStallTimeout      = 10 * time.Second
)

// Config sets up a core (NewCore). Zero fields take the defaults.
type Config struct {
	// ID is the session id (default: a random one).
	ID string
	// Clock is the core's only source of time (default: WallClock).
	Clock Clock
	// Endpointing is how long the caller must be silent before their
	// turn ends (default DefaultEndpointing).
	Endpointing time.Duration
	// EndpointingMin and EndpointingMax, when set, let the caller's words
	// choose the silence: EndpointingMin after words that make a complete
	// request (one of the agent's Phrases, or a sentence's end),
	// EndpointingMax after words that leave it open ("and", "um", "so"),
	// and Endpointing, kept within them, otherwise and until the words are
	// in.
	EndpointingMin, EndpointingMax time.Duration
	// TranscriptTimeout bounds the wait for a final transcript once the
	// caller's silence has ended their turn (default
	// DefaultTranscriptTimeout); a turn whose words do not come in time is
	// dropped, and a provider_error event with reason TurnDropped says so.
	TranscriptTimeout time.Duration
	// Logger gets the core's log lines (none when nil).
	Logger *slog.Logger
	// Checkpoint, if set, is given the session's state at every clean
	// point (WithCheckpoints).
	Checkpoint func(State)
	// NoSpeculation turns speculative answers off: the model is asked
	// only once the caller's turn has ended (see events.SpeculationStarted).
	NoSpeculation bool
	// TextOnly says the agent has no voice: its text counts as played the
	// moment the model writes it, and word timings are not waited for.
	TextOnly bool
}

// withDefaults fills in c's zero fields.
func (c Config) withDefaults() Config {
	if c.ID == "" {
		c.ID = NewID()
	}
	if c.Clock == nil {
		c.Clock = WallClock()
	}
	if c.Endpointing <= 0 {
		c.Endpointing = DefaultEndpointing
	}
	if c.EndpointingMin > 0 && c.EndpointingMax >= c.EndpointingMin {
		c.Endpointing = min(max(c.Endpointing, c.EndpointingMin), c.EndpointingMax)
	} else {
		c.EndpointingMin, c.EndpointingMax = 0, 0
	}
	if c.TranscriptTimeout <= 0 {
		c.TranscriptTimeout = DefaultTranscriptTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Settings are a session's settings: what the options given to
// runtime.New set. Config is its core's.
type Settings struct {
	Config
	// Output gets the agent's paced audio at OutputRate, in frames of
	// FrameDuration; nil discards it (runtime.WithOutput).
	Output        media.Sink
	OutputRate    int
	FrameDuration time.Duration
	// ContinuousOutput sends silence too (WithContinuousOutput).
	ContinuousOutput bool
	// Input is how the caller's audio is judged (WithInput).
	Input InputConfig
	// Mailbox is how many inputs may wait for the core.
	Mailbox int
	// StallTimeout bounds a provider stream that sends nothing
	// (WithStallTimeout).
	StallTimeout time.Duration
	// FirstPhraseWords is how many words the first phrase of an answer
	// needs before it may go to the voice at a comma, colon, semicolon or
	// dash (runtime.WithFirstPhrase; 0: tts.DefaultMinFirstPhraseWords,
	// negative: only at a sentence's end).
	FirstPhraseWords int
	// Journal is the write-ahead journal of mutations (runtime.WithJournal;
	// default: a tools.MemoryJournal).
	Journal tools.Journal
	// State is the state the session starts from (WithState), if any.
	State *State
	// Transfer carries a transfer out on the call's transport
	// (WithTransferer); nil when the transport cannot transfer.
	Transfer Transferer
	// EventSinks each get every event (runtime.WithEventSink).
	EventSinks []func(events.Event)
	// Hangups are told when the session ends the call itself (WithHangup).
	Hangups []func(reason string)
}

// DefaultSettings are a session's settings before any option.
func DefaultSettings() Settings {
	return Settings{
		Config: Config{
			Clock:             WallClock(),
			Endpointing:       DefaultEndpointing,
			TranscriptTimeout: DefaultTranscriptTimeout,
			Logger:            slog.Default(),
		},
		OutputRate:    media.Rate16k,
		FrameDuration: media.DefaultFrameDuration,
		Mailbox:       DefaultMailbox,
		StallTimeout:  DefaultStallTimeout,
		Input:         DefaultInputConfig(),
	}
}

// SessionOption sets something of a session's Settings. runtime.Option,
// whose options an agent's author uses, is one; the options here are for
// whoever carries the call (a transport, a host, the simulator): how the
// caller's audio comes and the agent's goes out, how the call is hung up
// and transferred, which state it starts from and where its states go,
// and the clock.
type SessionOption = func(*Settings) error

// WithClock sets the session clock (default: the wall clock).
func WithClock(clk Clock) SessionOption {
	return func(s *Settings) error {
		if clk == nil {
			return errors.New("runtime: nil clock")
		}
		s.Clock = clk
		return nil
	}
}

// WithInput sets how caller audio is judged.
func WithInput(in InputConfig) SessionOption {
	return func(s *Settings) error {
		if in.Rate == 0 {
			in.Rate = media.Rate16k
		}
		if err := media.CheckRate(in.Rate); err != nil {
			return fmt.Errorf("runtime: input: %w", err)
		}
		s.Input = in
		return nil
	}
}

// WithContinuousOutput makes the sink get a frame every period, silence
// included (Epoch 0), instead of only the agent's speech: for transports
// whose far end must hear silence rather than nothing. A WebRTC or RTP
// receiver that stops getting packets conceals the gap by stretching the
// last sounds it had, so an agent cut off mid-word would fade out over a
// few hundred milliseconds instead of stopping.
func WithContinuousOutput() SessionOption {
	return func(s *Settings) error { s.ContinuousOutput = true; return nil }
}

// WithFrameDuration sets the output frame size: 10 or 20 ms (default 20).
func WithFrameDuration(d time.Duration) SessionOption {
	return func(s *Settings) error {
		if d != 10*time.Millisecond && d != 20*time.Millisecond {
			return fmt.Errorf("runtime: frame duration %v: want 10ms or 20ms", d)
		}
		s.FrameDuration = d
		return nil
	}
}

// WithTranscriptTimeout bounds the wait for a final transcript once the
// caller's turn has ended (default DefaultTranscriptTimeout).
func WithTranscriptTimeout(d time.Duration) SessionOption {
	return positive("transcript timeout", d, func(s *Settings) { s.TranscriptTimeout = d })
}

// WithStallTimeout bounds how long a model or synthesis stream may send
// nothing (before its first chunk or between two) before the turn gives up
// on it with runtime.ErrProviderStalled (default DefaultStallTimeout).
func WithStallTimeout(d time.Duration) SessionOption {
	return positive("stall timeout", d, func(s *Settings) { s.StallTimeout = d })
}

// positive makes an option that sets a duration which must be positive.
func positive(what string, d time.Duration, set func(*Settings)) SessionOption {
	return func(s *Settings) error {
		if d <= 0 {
			return fmt.Errorf("runtime: %s %v must be positive", what, d)
		}
		set(s)
		return nil
	}
}

// WithHangup tells the session's owner when the session ends the call
// itself (runtime.Session.End, runtime.EndCallTool), so that it hangs up its
// side: hangup is called once, with End's reason, on Run's goroutine as
// the session stops and before Run returns, and must not wait for the
// session. It is not called when Run's ctx ends: whoever ended ctx knows.
// A host (calls.Host) sets one for every call, so that the call's
// transport hangs up (a SIP BYE, the browser's connection closed); an app
// may add its own, and each is called, in order.
func WithHangup(hangup func(reason string)) SessionOption {
	return func(s *Settings) error {
		if hangup == nil {
			return errors.New("runtime: nil hangup")
		}
		s.Hangups = append(s.Hangups, hangup)
		return nil
	}
}

// TransferRequest is a transfer asked of a call's transport
// (runtime.Transfer).
type TransferRequest struct {
	// Target is where the call goes, as the transport takes it: a SIP
	// URI, a telephone number.
	Target string
	// Timeout bounds the wait for the target to answer.
	Timeout time.Duration
	// Token is a handoff token the transfer carries, so that a Holdline
	// worker answering the transferred call picks the conversation up; ""
	// for none (the host hands one out itself when it has a store).
	Token string
}

// Transferer carries a transfer out on the call's transport: it returns
// nil once the target has answered (the call is then handed over and the
// session ends), or an error when the transfer failed and the call goes
// on.
type Transferer func(ctx context.Context, req TransferRequest) error

// WithTransferer sets how the session's call is transferred
// (runtime.Transfer); a transport that can transfer sets it.
func WithTransferer(t Transferer) SessionOption {
	return func(s *Settings) error { s.Transfer = t; return nil }
}

// WithState starts the session from st, taken from another session with
// runtime.Session.State: the same id (unless runtime.WithID names it,
// which must match), its chat, its calls and its user data. Calls that
// were not finished are settled by the session's journal ([tools.Settle])
// when it runs: an outcome the journal has is used; a mutation that may
// have run is unknown, never run again blindly. The restored session does
// not speak until told to (runtime.Session.GenerateReply, or the caller's
// next turn).
func WithState(st State) SessionOption {
	return func(s *Settings) error {
		if st.SessionID == "" {
			return fmt.Errorf("%w: no session id", ErrStateMismatch)
		}
		if s.ID != "" && s.ID != st.SessionID {
			return fmt.Errorf("%w: state of session %q given to session %q", ErrStateMismatch, st.SessionID, s.ID)
		}
		s.ID = st.SessionID
		s.State = &st
		return nil
	}
}

// WithCheckpoints calls save with the session's state at every clean
// point: a turn settled, a tool call started, deferred or ended, and once
// at the start. save runs on the session core and must not block: hand the
// state to a writer of your own (handoff.Checkpointer) and report how the
// write went with runtime.Session.CheckpointDone.
func WithCheckpoints(save func(State)) SessionOption {
	return func(s *Settings) error { s.Checkpoint = save; return nil }
}

// Caption is what the caller has heard so far of the turn now playing
// (runtime.Session.NowPlaying).
type Caption struct {
	Epoch uint64
	Text  string
}
