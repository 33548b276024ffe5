package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/tools"
)

// Defaults. Every wait in a session has a bound; these are the bounds used
// when no option says otherwise.
const (
	DefaultEndpointing       = 500 * time.Millisecond
	DefaultTranscriptTimeout = 2 * time.Second
	DefaultMailbox           = 1024
	DefaultStallTimeout      = 10 * time.Second
)

// ErrSessionClosed is returned by calls on a session that has stopped.
var ErrSessionClosed = errors.New("runtime: session closed")

type config struct {
	id                string
	clock             Clock
	sink              media.Sink
	rate              int
	frame             time.Duration
	endpointing       time.Duration
	transcriptTimeout time.Duration
	mailbox           int
	stallTimeout      time.Duration
	log               *slog.Logger
	input             InputConfig
	journal           tools.Journal
	continuous        bool
	state             *State // to start from (WithState)
	checkpoint        func(State)
	transfer          Transferer // WithTransferer; nil: the transport cannot transfer
	eventSinks        []func(events.Event)
	hangups           []func(reason string) // WithHangup
}

func defaultConfig() config {
	return config{
		clock:             WallClock(),
		rate:              media.Rate16k,
		frame:             media.DefaultFrameDuration,
		endpointing:       DefaultEndpointing,
		transcriptTimeout: DefaultTranscriptTimeout,
		mailbox:           DefaultMailbox,
		stallTimeout:      DefaultStallTimeout,
		log:               slog.Default(),
		input:             DefaultInputConfig(),
	}
}

func (c *config) ensureID() {
	if c.id == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		c.id = "s_" + hex.EncodeToString(b[:])
	}
}

// Option configures a Session.
type Option func(*config) error

// WithID sets the session id (default: random).
func WithID(id string) Option {
	return func(c *config) error {
		if id == "" {
			return errors.New("runtime: empty session id")
		}
		c.id = id
		return nil
	}
}

// WithClock sets the session clock (default: the wall clock).
func WithClock(clk Clock) Option {
	return func(c *config) error { c.clock = clk; return nil }
}

// WithOutput sends the agent's paced audio to sink at rate (8, 16, 24 or
// 48 kHz). Without it audio is paced and discarded, which still gives the
// playout clock a speaking pace.
func WithOutput(sink media.Sink, rate int) Option {
	return func(c *config) error {
		if err := media.CheckRate(rate); err != nil {
			return err
		}
		c.sink, c.rate = sink, rate
		return nil
	}
}

// WithContinuousOutput makes the sink get a frame every period, silence
// included (Epoch 0), instead of only the agent's speech: for transports
// whose far end must hear silence rather than nothing. A WebRTC or RTP
// receiver that stops getting packets conceals the gap by stretching the
// last sounds it had, so an agent cut off mid-word would fade out over a
// few hundred milliseconds instead of stopping.
func WithContinuousOutput() Option {
	return func(c *config) error { c.continuous = true; return nil }
}

// WithFrameDuration sets the output frame size: 10 or 20 ms (default 20).
func WithFrameDuration(d time.Duration) Option {
	return func(c *config) error {
		if d != 10*time.Millisecond && d != 20*time.Millisecond {
			return fmt.Errorf("runtime: frame duration %v: want 10ms or 20ms", d)
		}
		c.frame = d
		return nil
	}
}

// WithEndpointing sets how long the caller must be silent before their turn
// ends (default DefaultEndpointing).
func WithEndpointing(d time.Duration) Option {
	return positive("endpointing", d, func(c *config) { c.endpointing = d })
}

// WithTranscriptTimeout bounds the wait for a final transcript once the
// caller's turn has ended (default DefaultTranscriptTimeout).
func WithTranscriptTimeout(d time.Duration) Option {
	return positive("transcript timeout", d, func(c *config) { c.transcriptTimeout = d })
}

// WithStallTimeout bounds how long a model or synthesis stream may send
// nothing (before its first chunk or between two) before the turn gives up
// on it with ErrProviderStalled (default DefaultStallTimeout).
func WithStallTimeout(d time.Duration) Option {
	return positive("stall timeout", d, func(c *config) { c.stallTimeout = d })
}

// sinkDrain bounds how long Run waits, at its end, for the event sinks to
// take the last events.
const sinkDrain = 2 * time.Second

// WithEventSink calls sink with every event of the session, from the
// first (session_started) to the last (session_ended), in order, on a
// goroutine of its own, so that an app's log, metrics or screen miss
// nothing of a call, not even what comes before OnEnter. Given to a host
// (calls.WithSessionOptions), it sees every call of every transport; the
// events' Session field tells them apart. A sink that falls more than
// events.DefaultBuffer events behind loses some and is told so by an
// events_dropped event; Run returns once the sink has had the last, or
// after 2 s if it has not.
func WithEventSink(sink func(events.Event)) Option {
	return func(c *config) error {
		if sink == nil {
			return errors.New("runtime: nil event sink")
		}
		c.eventSinks = append(c.eventSinks, sink)
		return nil
	}
}

// WithJournal sets the write-ahead journal of mutations (default: a
// tools.MemoryJournal). When the session starts, the journal's unresolved
// intents for its id are restored as calls of unknown outcome; a repeat of
// one is reconciled, never run blindly.
func WithJournal(j tools.Journal) Option {
	return func(c *config) error {
		if j == nil {
			return errors.New("runtime: nil journal")
		}
		c.journal = j
		return nil
	}
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error { c.log = l; return nil }
}

// positive makes an option that sets a duration which must be positive.
func positive(what string, d time.Duration, set func(*config)) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("runtime: %s %v must be positive", what, d)
		}
		set(c)
		return nil
	}
}

// Session runs one conversation between a caller and an agent.
type Session struct {
	cfg   config
	agent *Agent // the first agent
	// current is the agent answering now; a handoff changes it.
	current atomic.Pointer[Agent]
	bus     *events.Bus
	mailbox chan Input
	done    chan struct{}
	// stopped is closed once Run has stopped taking inputs: the session
	// has ended (session_ended is out), though Run may still be winding
	// its edges down. End waits for it, which a tool may do: Run waits
	// for the tools only after.
	stopped chan struct{}
	c       *conductor
	edges   *liveEdges
	player  *media.Player
	in      *audioInput
	running atomic.Bool
	// agentTurn: a turn of the agent's holds the floor (see
	// conductor.speaking), as of the last input the conductor handled.
	agentTurn atomic.Bool
	// agentPlayed: that turn has played some of its audio.
	agentPlayed atomic.Bool
	// ownAEC: the session made the echo canceller and closes it.
	ownAEC EchoCanceller
	// sinkSubs feed the event sinks (WithEventSink), one each, subscribed
	// at New so that they miss nothing.
	sinkSubs []*events.Subscription
	// exchanges are the Asks under way (conductor goroutine only).
	exchanges []*exchange
}

// echoCanceller returns the configured canceller, or makes the default one.
// Without libspeexdsp the session still runs, judging barge-in without it.
func (s *Session) echoCanceller() (EchoCanceller, error) {
	in := s.cfg.input
	switch {
	case in.NoEchoCancellation:
		return nil, nil
	case in.EchoCanceller != nil:
		return in.EchoCanceller, nil
	case in.Rate != media.Rate8k && in.Rate != media.Rate16k:
		s.cfg.log.Warn("echo cancellation off: it works at 8 or 16 kHz input", "rate", in.Rate)
		return nil, nil
	}
	aec, err := newDefaultCanceller(in.Rate)
	if err != nil {
		s.cfg.log.Warn("echo cancellation off", "err", err)
		return nil, nil
	}
	s.ownAEC = aec
	return aec, nil
}

// New prepares a session for agent. Nothing runs until Run.
func New(agent *Agent, opts ...Option) (*Session, error) {
	if agent == nil || agent.Model == nil {
		return nil, errors.New("runtime: agent needs a Model")
	}
	cfg := defaultConfig()
	cfg.journal = tools.NewMemoryJournal()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	cfg.ensureID()
	if cfg.state != nil && cfg.state.SessionID != cfg.id {
		return nil, fmt.Errorf("%w: state of session %q given to session %q", ErrStateMismatch, cfg.state.SessionID, cfg.id)
	}
	if cfg.sink == nil {
		cfg.sink = media.SinkFunc(func(media.Frame) error { return nil })
	}
	var err error
	s := &Session{
		cfg:     cfg,
		agent:   agent,
		bus:     events.NewBus(),
		mailbox: make(chan Input, cfg.mailbox),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	canceller, err := s.echoCanceller()
	if err != nil {
		return nil, err
	}
	tap, err := newEchoTap(cfg.sink, canceller, cfg.clock, cfg.rate, cfg.input.Rate)
	tap.continuous = cfg.continuous
	if err != nil {
		return nil, fmt.Errorf("runtime: echo reference: %w", err)
	}
	s.player, err = media.NewPlayer(tap,
		media.WithPlayerRate(cfg.rate),
		media.WithFrameDuration(cfg.frame),
		media.WithEpochDone(func(epoch uint64) { s.post(PlayoutFinished{Epoch: epoch}) }),
		media.WithEpochStart(func(epoch uint64) { s.post(PlayoutStarted{Epoch: epoch}) }),
		// The canceller's reference must be continuous: what was played,
		// silence included. The tap keeps idle silence from the sink.
		media.WithIdleSilence(canceller != nil || cfg.continuous),
	)
	if err != nil {
		return nil, fmt.Errorf("runtime: output: %w", err)
	}
	// A restored session talks as the agent its state names, if agent
	// knows it (Agent.Peers); the recogniser stays agent's, as it does
	// across a handoff.
	current := agent
	if st := cfg.state; st != nil && st.Agent != agent.Name {
		if a := agent.find(st.Agent); a != nil && a.Model != nil {
			current = a
		}
	}
	s.current.Store(current)
	s.edges = &liveEdges{s: s, gens: map[uint64]context.CancelFunc{}, tools: map[string]context.CancelCauseFunc{}}
	s.c, err = newConductor(current, s.edges, s.post, s.bus.Publish, cfg, s.textOnly())
	if err != nil {
		return nil, err
	}
	s.c.onAgent = func(a *Agent) { s.current.Store(a) }
	s.in, err = newAudioInput(s, cfg.input, canceller, tap)
	if err != nil {
		return nil, err
	}
	for range cfg.eventSinks {
		s.sinkSubs = append(s.sinkSubs, s.bus.Subscribe(events.DefaultBuffer))
	}
	return s, nil
}

// textOnly says whether the agent has no voice at all: no synthesiser and a
// model that does not speak for itself. Its text then counts as played the
// moment the model produces it.
func (s *Session) textOnly() bool {
	a := s.currentAgent()
	return a.TTS == nil && a.BackupTTS == nil && !llm.IsVoiced(a.Model)
}

// ID is the session id.
func (s *Session) ID() string { return s.cfg.id }

// Restored reports whether the session was started from a State
// (WithState): taken over after a crash or a transfer, rather than new.
// An OnEnter that greets skips its greeting then.
func (s *Session) Restored() bool { return s.cfg.state != nil }

// currentAgent is the agent answering now.
func (s *Session) currentAgent() *Agent { return s.current.Load() }

// Subscribe returns a subscription to the session's events with a buffer of
// n (events.DefaultBuffer if n <= 0). Subscribe before Run to see every
// event.
func (s *Session) Subscribe(n int) *events.Subscription { return s.bus.Subscribe(n) }

// ErrAlreadyRunning is returned by a second call to Run.
var ErrAlreadyRunning = errors.New("runtime: session already run")

// Run runs the session until ctx ends or End ends it, and returns nil
// when either did. A session runs once.
func (s *Session) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer close(s.done)
	// The sinks see every event, session_ended last: they are waited
	// for once the bus is closed (defers run last first), but not for
	// longer than sinkDrain, so that a sink that hangs cannot keep the
	// call from ending.
	var sinks sync.WaitGroup
	defer func() {
		if len(s.sinkSubs) == 0 {
			return
		}
		drained := make(chan struct{})
		go func() {
			sinks.Wait()
			close(drained)
		}()
		select {
		case <-drained:
		case <-time.After(sinkDrain):
			s.cfg.log.Warn("an event sink did not take the session's last events in time", "session", s.cfg.id, "waited", sinkDrain)
		}
	}()
	for i, sub := range s.sinkSubs {
		sink := s.cfg.eventSinks[i]
		sinks.Go(func() {
			for e := range sub.C() {
				sink(e)
			}
		})
	}
	defer s.bus.Close()
	if s.ownAEC != nil {
		defer s.ownAEC.Close()
	}
	// OnEnter and the edges run under ctx: SessionFrom finds the session
	// there (Transfer, Handoff).
	ctx, cancel := context.WithCancel(context.WithValue(ctx, sessionKey{}, s))
	defer cancel()

	g, gctx := errgroup.WithContext(ctx)
	s.edges.ctx = gctx
	g.Go(func() error { return s.player.Run(gctx) })
	if err := s.in.start(gctx, g); err != nil {
		return err
	}
	c := s.c
	if err := s.restore(gctx); err != nil {
		c.log.Warn("journal: unresolved calls not restored", "err", err)
	}
	(&Core{c: c}).Start()
	if s.cfg.state != nil {
		c.emit(events.Event{Kind: events.SessionResumed, Epoch: c.epoch, Text: s.cfg.state.Agent})
	}
	if enter := s.currentAgent().OnEnter; enter != nil {
		g.Go(func() error {
			if err := enter(gctx, s); err != nil && gctx.Err() == nil {
				c.log.Warn("agent OnEnter failed", "err", err)
			}
			return nil
		})
	}

	// The session ends when ctx does (its owner ended the call) or when
	// End asks (the agent or the app ended it: the owner is told to hang
	// up).
	var reason string
loop:
	for {
		select {
		case <-gctx.Done():
			break loop
		case in := <-s.mailbox:
			if end, ok := in.(endRequest); ok {
				reason = s.ending(end)
				break loop
			}
			s.take(in)
			// The caller-audio path reads this without asking the
			// conductor: a turn under way is what speech interrupts.
			s.agentTurn.Store(c.speaking())
			s.agentPlayed.Store(c.played())
		}
	}
	c.emit(events.Event{Kind: events.SessionEnded, Epoch: c.epoch, Reason: reason})
	s.closeExchanges()
	close(s.stopped)
	cancel()
	if reason != "" {
		for _, hangup := range s.cfg.hangups {
			hangup(reason)
		}
	}
	s.edges.wait()
	err := g.Wait()
	if ctx.Err() != nil && errors.Is(err, context.Canceled) || err == nil {
		return nil
	}
	return err
}

// journalTimeout bounds a journal read or write: a slow store must not hold
// a call or the session's start.
const journalTimeout = 2 * time.Second

// restore loads the journal's intents without outcome, before the
// conductor starts; with a state to start from (WithState), it rebuilds
// the conductor from it, settling unfinished calls by the journal.
func (s *Session) restore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, journalTimeout)
	defer cancel()
	if st := s.cfg.state; st != nil {
		recs, err := journalRecords(ctx, s.cfg.journal, s.cfg.id)
		if err != nil {
			// Without the journal an unfinished mutation is unknown
			// all the same: settling never runs one again.
			s.c.log.Warn("journal unreadable: unfinished calls settled without it", "err", err)
		}
		s.c.restoreState(*st, recs)
		s.c.log.Info("session restored", "state", describeState(*st))
		return nil
	}
	recs, err := s.cfg.journal.Unresolved(ctx, s.cfg.id)
	if err != nil {
		return err
	}
	s.c.ledger.Restore(recs)
	return nil
}

// journalRecords reads every record of the session's journal when the
// journal can list them (tools.JournalReader), else its unresolved
// intents.
func journalRecords(ctx context.Context, j tools.Journal, session string) ([]tools.Record, error) {
	if r, ok := j.(tools.JournalReader); ok {
		return r.Records(ctx, session)
	}
	return j.Unresolved(ctx, session)
}

// post hands an input to the conductor. Edges call it from their own
// goroutines; it gives up when the session ends.
func (s *Session) post(in Input) {
	select {
	case s.mailbox <- in:
	case <-s.done:
	}
}

func (s *Session) send(ctx context.Context, in Input) error {
	select {
	case s.mailbox <- in:
		return nil
	case <-s.done:
		return ErrSessionClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Inject adds user input through the API (an operator message, a typed
// line). It preempts whatever the agent is doing and is answered as a new
// turn at once; it never waits for the previous turn to settle.
func (s *Session) Inject(ctx context.Context, text string) error {
	return s.send(ctx, UserText{Text: text})
}

// PushDTMF tells the session the caller pressed a key (RFC 4733 or SIP
// INFO on a phone leg). It emits a dtmf event and, as Agent.DTMF says,
// becomes a user turn. Digits other than 0-9, *, # and A-D are refused.
func (s *Session) PushDTMF(ctx context.Context, digit rune) error {
	switch {
	case digit >= '0' && digit <= '9', digit == '*', digit == '#', digit >= 'A' && digit <= 'D':
	default:
		return fmt.Errorf("runtime: PushDTMF: %q is not a DTMF digit", digit)
	}
	return s.send(ctx, DTMF{Digit: digit})
}

// GenerateReply makes the agent speak now, with extra instructions for this
// reply only (may be empty). A greeting is the usual use.
func (s *Session) GenerateReply(ctx context.Context, instructions string) error {
	return s.send(ctx, ReplyRequest{Instructions: instructions})
}

// TransportLost tells the session the caller's connection dropped (a
// browser closed, ICE failed, a phone leg timed out). The agent stops
// speaking at once: nothing more can reach the caller, so what they heard
// is what was played. The session goes on; tools keep running.
func (s *Session) TransportLost(ctx context.Context) error {
	return s.send(ctx, TransportLost{})
}

// TransportRestored tells the session the caller is back on a new
// connection (a resumed browser session). Caller audio or text says so too.
func (s *Session) TransportRestored(ctx context.Context) error {
	return s.send(ctx, TransportRestored{})
}

// MissedFrames returns how many output frame periods went without a frame
// because the session ran late (see media.Player.Missed).
func (s *Session) MissedFrames() uint64 { return s.player.Missed() }

// LateFrames returns how many output frames went out a frame period or
// more behind their slot, caught up rather than lost (media.Player.Late).
func (s *Session) LateFrames() uint64 { return s.player.Late() }

// UnheardFrames returns how many of the caller's frames the recogniser
// refused, because it fell behind or failed: audio whose words are lost.
func (s *Session) UnheardFrames() uint64 {
	if s.in == nil {
		return 0
	}
	return s.in.unheard.Load()
}

// ChatContext returns a copy of the chat context as it stands.
func (s *Session) ChatContext(ctx context.Context) (llm.ChatContext, error) {
	return ask(ctx, s, func(c *conductor) llm.ChatContext { return c.context() })
}

// ask runs fn on the conductor goroutine and returns its answer: a
// consistent read of state that only the conductor may touch.
func ask[T any](ctx context.Context, s *Session, fn func(*conductor) T) (T, error) {
	out := make(chan T, 1) // buffered: the conductor never waits for the asker
	var zero T
	if err := s.send(ctx, query{fn: func(c *conductor) { out <- fn(c) }}); err != nil {
		return zero, err
	}
	select {
	case v := <-out:
		return v, nil
	case <-s.done:
		return zero, ErrSessionClosed
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// PushAudio feeds caller audio: voice activity decides barge-in and the end
// of the caller's turn, and the recogniser hears every frame. Call it from
// one goroutine (the transport's read loop); it does not keep f.
func (s *Session) PushAudio(ctx context.Context, f media.Frame) error {
	return s.in.push(ctx, f)
}

// Caption is what the caller has heard so far of the turn now playing.
type Caption struct {
	Epoch uint64
	Text  string
}

// NowPlaying returns the words of the playing turn that have been played so
// far (a zero Caption when nothing plays), for live captions.
func (s *Session) NowPlaying(ctx context.Context) (Caption, error) {
	return ask(ctx, s, func(c *conductor) Caption {
		for _, t := range c.turns {
			if !t.interrupted && !t.playoutDone {
				return Caption{Epoch: t.epoch, Text: c.playedText(t, c.edges.Played(t.epoch))}
			}
		}
		return Caption{}
	})
}
