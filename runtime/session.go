package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/tools"
)

// Defaults, and the name the model calls EndCallTool by.
const (
	// DefaultApology is what an agent says when its model fails before
	// saying anything (Agent.Apology).
	DefaultApology = engine.DefaultApology
	// DefaultEndpointing is how long the caller must be silent before
	// their turn ends (WithEndpointing).
	DefaultEndpointing = engine.DefaultEndpointing
	// DefaultWaitTimeout bounds a wait whose context has no deadline of
	// its own: Ask, End, a tool's tools.WaitPlayout.
	DefaultWaitTimeout = engine.DefaultWaitTimeout
	// DefaultEndReason is the reason of an End given none.
	DefaultEndReason = "ended"
	// DefaultTransferTimeout bounds how long Transfer waits for the
	// target to answer.
	DefaultTransferTimeout = 30 * time.Second
	// EndCallName is the name the model calls EndCallTool by.
	EndCallName = "end_call"
)

// Errors.
var (
	// ErrSessionClosed is returned by calls on a session that has stopped.
	ErrSessionClosed = errors.New("runtime: session closed")
	// ErrAlreadyRunning is returned by a second call to Run.
	ErrAlreadyRunning = errors.New("runtime: session already run")
	// ErrInterrupted is returned by waits on a turn that the caller (or
	// injected input) interrupted: a tool's tools.WaitPlayout, for one.
	ErrInterrupted = engine.ErrInterrupted
	// ErrWaitTimeout is returned when a wait reaches its deadline first.
	ErrWaitTimeout = engine.ErrWaitTimeout
	// ErrProviderStalled ends a model or synthesis stream that sent
	// nothing for longer than the session's stall timeout
	// (engine.WithStallTimeout).
	ErrProviderStalled = engine.ErrProviderStalled
	// ErrHandoff wraps why a handoff could not happen; the session goes
	// on with its current agent.
	ErrHandoff = errors.New("runtime: handoff refused")
	// ErrStateMismatch is returned by New when a restored state
	// (engine.WithState) does not fit the session: another session id,
	// or another agent's state without a handoff.
	ErrStateMismatch = engine.ErrStateMismatch
	// ErrTransferUnsupported is returned by Transfer for a call whose
	// transport cannot hand it to another party (a browser call, the
	// console), or outside a session's tool.
	ErrTransferUnsupported = errors.New("runtime: this call's transport cannot transfer it")
)

// Option configures a Session: the options here, which an agent's author
// may want, and package engine's, which whoever carries the call sets
// (how the caller's audio comes, hang-up and transfer, the state a
// session starts from and where its states go, the clock).
type Option func(*engine.Settings) error

// WithID sets the session id (default: random).
func WithID(id string) Option {
	return func(c *engine.Settings) error {
		if id == "" {
			return errors.New("runtime: empty session id")
		}
		c.ID = id
		return nil
	}
}

// WithOutput sends the agent's paced audio to sink at rate (8, 16, 24 or
// 48 kHz). Without it audio is paced and discarded, which still gives the
// playout clock a speaking pace.
func WithOutput(sink media.Sink, rate int) Option {
	return func(c *engine.Settings) error {
		if err := media.CheckRate(rate); err != nil {
			return err
		}
		c.Output, c.OutputRate = sink, rate
		return nil
	}
}

// WithEndpointing sets how long the caller must be silent before their turn
// ends (default DefaultEndpointing).
func WithEndpointing(d time.Duration) Option {
	return positive("endpointing", d, func(c *engine.Settings) { c.Endpointing = d })
}

// WithEndpointingRange lets the caller's words choose how long a silence
// ends their turn, from min to max: min after words that make a complete
// request (one of the agent's Phrases, or a sentence the recogniser
// ended), max after words that leave it open (a last "and", "um", "so",
// "the"), and the endpointing of WithEndpointing (kept within the range)
// otherwise and until the recogniser has the words. A caller who says what
// they want is answered sooner; one who pauses mid-thought is not cut off.
func WithEndpointingRange(min, max time.Duration) Option {
	return func(c *engine.Settings) error {
		if min <= 0 || max < min {
			return fmt.Errorf("runtime: endpointing range %v..%v: want 0 < min <= max", min, max)
		}
		c.EndpointingMin, c.EndpointingMax = min, max
		return nil
	}
}

// WithSpeculation turns speculative answers on (the default) or off. On,
// the model is asked as soon as the caller's final words are in, while the
// silence that ends their turn still runs; the answer is prepared, its
// audio held, and it plays the moment the turn ends on the same words.
// If the caller goes on instead, the answer is discarded: nothing of it is
// played or kept, and none of its tool calls has run, except reads declared
// tools.WithSpeculative. Off, the model is asked only once the turn has
// ended, which costs the caller the endpointing delay on every turn.
func WithSpeculation(on bool) Option {
	return func(c *engine.Settings) error {
		c.NoSpeculation = !on
		return nil
	}
}

// WithFirstPhrase sets how many words the first phrase of an answer needs
// before it may go to the voice at a comma, colon, semicolon or dash
// rather than at the end of its sentence (default
// tts.DefaultMinFirstPhraseWords, 4). Fewer words start the first audio
// sooner, by a token's time per word, but a very short phrase is spoken on
// its own, with the voice's intonation of a whole utterance; words < 0
// waits for the end of the first sentence.
func WithFirstPhrase(words int) Option {
	return func(c *engine.Settings) error {
		if words == 0 {
			return errors.New("runtime: WithFirstPhrase(0): a phrase needs a word; a negative count waits for the sentence's end")
		}
		c.FirstPhraseWords = words
		return nil
	}
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
	return func(c *engine.Settings) error {
		if sink == nil {
			return errors.New("runtime: nil event sink")
		}
		c.EventSinks = append(c.EventSinks, sink)
		return nil
	}
}

// WithJournal sets the write-ahead journal of mutations (default: a
// tools.MemoryJournal). When the session starts, the journal's unresolved
// intents for its id are restored as calls of unknown outcome; a repeat of
// one is reconciled, never run blindly.
func WithJournal(j tools.Journal) Option {
	return func(c *engine.Settings) error {
		if j == nil {
			return errors.New("runtime: nil journal")
		}
		c.Journal = j
		return nil
	}
}

// WithLogger sets the logger (default slog.Default(); nil logs nothing).
func WithLogger(l *slog.Logger) Option {
	return func(c *engine.Settings) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		c.Logger = l
		return nil
	}
}

// positive makes an option that sets a duration which must be positive.
func positive(what string, d time.Duration, set func(*engine.Settings)) Option {
	return func(c *engine.Settings) error {
		if d <= 0 {
			return fmt.Errorf("runtime: %s %v must be positive", what, d)
		}
		set(c)
		return nil
	}
}

// Session runs one conversation between a caller and an agent.
type Session struct {
	cfg engine.Settings
	// log has the session's id.
	log   *slog.Logger
	agent *Agent // the first agent
	// current is the agent answering now; a handoff changes it.
	current atomic.Pointer[Agent]
	bus     *events.Bus
	// mailbox holds the core's inputs (engine.Input) and the session's own
	// requests (query, askRequest, endRequest, handoffRequest), in order.
	mailbox chan any
	life    lifecycle
	core    *engine.Core
	edges   *liveEdges
	player  *media.Player
	in      *audioInput
	// floor is the agent's hold on it, as of the last input the core
	// handled, for the caller-audio path, which runs on its own goroutine.
	floor agentFloor
	// ownAEC: the session made the echo canceller and closes it.
	ownAEC engine.EchoCanceller
	// sinkSubs feed the event sinks (WithEventSink), one each, subscribed
	// at New so that they miss nothing.
	sinkSubs []*events.Subscription
	// asks are the Asks under way (conductor goroutine only).
	asks []*askRequest
}

// lifecycle is where a session is in its life.
type lifecycle struct {
	running atomic.Bool
	// done is closed when the session is over.
	done chan struct{}
	// stopped is closed once Run has stopped taking inputs: the session
	// has ended (session_ended is out), though Run may still be winding
	// its edges down. End waits for it, which a tool may do: Run waits
	// for the tools only after.
	stopped chan struct{}
}

// agentFloor mirrors the core's view of the agent's hold on the floor.
type agentFloor struct {
	// speaking: a turn of the agent's holds the floor (see
	// engine.Core.Speaking).
	speaking atomic.Bool
	// played: that turn has played some of its audio.
	played atomic.Bool
}

// echoCanceller returns the configured canceller, or makes the default one.
// Without libspeexdsp the session still runs, judging barge-in without it.
func (s *Session) echoCanceller() (engine.EchoCanceller, error) {
	in := s.cfg.Input
	switch {
	case in.NoEchoCancellation:
		return nil, nil
	case in.EchoCanceller != nil:
		return in.EchoCanceller, nil
	case in.Rate != media.Rate8k && in.Rate != media.Rate16k:
		s.cfg.Logger.Warn("echo cancellation off: it works at 8 or 16 kHz input", "rate", in.Rate)
		return nil, nil
	}
	aec, err := newDefaultCanceller(in.Rate)
	if err != nil {
		s.cfg.Logger.Warn("echo cancellation off", "err", err)
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
	cfg := engine.DefaultSettings()
	cfg.Journal = tools.NewMemoryJournal()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.ID == "" {
		cfg.ID = engine.NewID()
	}
	if cfg.State != nil && cfg.State.SessionID != cfg.ID {
		return nil, fmt.Errorf("%w: state of session %q given to session %q", ErrStateMismatch, cfg.State.SessionID, cfg.ID)
	}
	if cfg.Output == nil {
		cfg.Output = media.SinkFunc(func(media.Frame) error { return nil })
	}
	var err error
	s := &Session{
		cfg:     cfg,
		log:     cfg.Logger.With("session", cfg.ID),
		agent:   agent,
		bus:     events.NewBus(),
		mailbox: make(chan any, cfg.Mailbox),
		life:    lifecycle{done: make(chan struct{}), stopped: make(chan struct{})},
	}
	canceller, err := s.echoCanceller()
	if err != nil {
		return nil, err
	}
	tap, err := newEchoTap(cfg.Output, canceller, cfg.Clock, cfg.OutputRate, cfg.Input.Rate)
	if err != nil {
		return nil, fmt.Errorf("runtime: echo reference: %w", err)
	}
	tap.continuous = cfg.ContinuousOutput
	var remote []media.PlayerOption
	// A line whose far end buffers (a carrier's media stream) says what
	// was played, and drops what it holds on a barge-in.
	if r, ok := cfg.Output.(media.PlayoutReporter); ok {
		remote = append(remote, media.WithPlayoutReporter(r))
	}
	if c, ok := cfg.Output.(media.OutputClearer); ok {
		remote = append(remote, media.WithOutputClearer(c))
	}
	s.player, err = media.NewPlayer(tap, append(remote,
		media.WithPlayerRate(cfg.OutputRate),
		media.WithFrameDuration(cfg.FrameDuration),
		media.WithEpochDone(func(epoch uint64) { s.post(engine.PlayoutFinished{Epoch: epoch}) }),
		media.WithEpochStart(func(epoch uint64) { s.post(engine.PlayoutStarted{Epoch: epoch}) }),
		// The canceller's reference must be continuous: what was played,
		// silence included. The tap keeps idle silence from the sink.
		media.WithIdleSilence(canceller != nil || cfg.ContinuousOutput),
	)...)
	if err != nil {
		return nil, fmt.Errorf("runtime: output: %w", err)
	}
	// A restored session talks as the agent its state names, if agent
	// knows it (Agent.Peers); the recogniser stays agent's, as it does
	// across a handoff.
	current := agent
	if st := cfg.State; st != nil && st.Agent != agent.Name {
		if a := agent.find(st.Agent); a != nil && a.Model != nil {
			current = a
		}
	}
	s.current.Store(current)
	s.edges = &liveEdges{s: s, gens: map[uint64]context.CancelFunc{}, tools: map[string]*engine.ToolCall{}}
	core := cfg.Config
	core.TextOnly = s.textOnly()
	s.core, err = engine.NewCore(current.describe(), s.edges, s.post, s.bus.Publish, core)
	if err != nil {
		return nil, err
	}
	s.in, err = newAudioInput(s, cfg.Input, canceller, tap)
	if err != nil {
		return nil, err
	}
	for range cfg.EventSinks {
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
func (s *Session) ID() string { return s.cfg.ID }

// Restored reports whether the session was started from a state
// (engine.WithState): taken over after a crash or a transfer, rather than
// new. An OnEnter that greets skips its greeting then.
func (s *Session) Restored() bool { return s.cfg.State != nil }

// currentAgent is the agent answering now.
func (s *Session) currentAgent() *Agent { return s.current.Load() }

// Subscribe returns a subscription to the session's events with a buffer of
// n (events.DefaultBuffer if n <= 0). Subscribe before Run to see every
// event.
func (s *Session) Subscribe(n int) *events.Subscription { return s.bus.Subscribe(n) }

// Run runs the session until ctx ends or End ends it, and returns nil
// when either did. A session runs once.
func (s *Session) Run(ctx context.Context) error {
	if !s.life.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer close(s.life.done)
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
			s.cfg.Logger.Warn("an event sink did not take the session's last events in time", "session", s.cfg.ID, "waited", sinkDrain)
		}
	}()
	for i, sub := range s.sinkSubs {
		sink := s.cfg.EventSinks[i]
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
	core := s.core
	if err := s.restore(gctx); err != nil {
		s.log.Warn("journal: unresolved calls not restored", "err", err)
	}
	core.Start()
	if s.cfg.State != nil {
		core.Emit(events.Event{Kind: events.SessionResumed, Epoch: core.Epoch(), Text: s.cfg.State.Agent})
	}
	if enter := s.currentAgent().OnEnter; enter != nil {
		g.Go(func() error {
			if err := enter(gctx, s); err != nil && gctx.Err() == nil {
				s.log.Warn("agent OnEnter failed", "err", err)
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
		case msg := <-s.mailbox:
			if end, ok := msg.(endRequest); ok {
				reason = s.ending(end)
				break loop
			}
			s.take(msg)
			// The caller-audio path reads this without asking the
			// core: a turn under way is what speech interrupts.
			s.floor.speaking.Store(core.Speaking())
			s.floor.played.Store(core.Played())
		}
	}
	core.Emit(events.Event{Kind: events.SessionEnded, Epoch: core.Epoch(), Reason: reason})
	s.closeAsks()
	close(s.life.stopped)
	cancel()
	if reason != "" {
		for _, hangup := range s.cfg.Hangups {
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

// take handles one message from the mailbox on the conductor goroutine:
// an input for the core, or one of the session's own requests.
func (s *Session) take(msg any) {
	switch m := msg.(type) {
	case query:
		m.fn(s.core)
	case *askRequest:
		// The exchange is registered in the very step that takes the
		// text, so nothing the agent does in answer can be missed.
		m.ex = s.core.Follow()
		s.asks = append(s.asks, m)
		s.handle(engine.UserText{Text: m.text})
	case handoffRequest:
		// The edges speak as the new agent from the turn the handoff
		// may start on.
		s.current.Store(m.to)
		s.handle(m.in)
	case engine.Input:
		s.handle(m)
	}
}

// handle hands an input to the core, and answers the Asks whose exchange
// it completed.
func (s *Session) handle(in engine.Input) {
	s.core.Handle(in)
	if len(s.asks) == 0 {
		return
	}
	keep := s.asks[:0]
	for _, a := range s.asks {
		if a.ex.Done() {
			a.done <- askEnd{reply: Reply(a.ex.Answer())}
			continue
		}
		keep = append(keep, a)
	}
	clear(s.asks[len(keep):])
	s.asks = keep
}

// closeAsks gives the Asks still under way when the session ends what
// they have, with ErrSessionClosed.
func (s *Session) closeAsks() {
	for _, a := range s.asks {
		a.done <- askEnd{reply: Reply(a.ex.Answer()), err: ErrSessionClosed}
	}
	clear(s.asks)
	s.asks = s.asks[:0]
}

// journalTimeout bounds a journal read or write: a slow store must not hold
// a call or the session's start.
const journalTimeout = 2 * time.Second

// restore loads the journal's intents without outcome, before the
// core starts; with a state to start from (engine.WithState), it rebuilds
// the core from it, settling unfinished calls by the journal.
func (s *Session) restore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, journalTimeout)
	defer cancel()
	if st := s.cfg.State; st != nil {
		recs, err := journalRecords(ctx, s.cfg.Journal, s.cfg.ID)
		if err != nil {
			// Without the journal an unfinished mutation is unknown
			// all the same: settling never runs one again.
			s.log.Warn("journal unreadable: unfinished calls settled without it", "err", err)
		}
		s.core.RestoreState(*st, recs)
		s.log.Info("session restored", "state", describeState(*st))
		return nil
	}
	recs, err := s.cfg.Journal.Unresolved(ctx, s.cfg.ID)
	if err != nil {
		return err
	}
	s.core.Restore(recs)
	return nil
}

// describeState is a one-line account of a state, for logs.
func describeState(st engine.State) string {
	var open []string
	for _, call := range st.Calls {
		if !call.State.Terminal() {
			open = append(open, call.ID+" "+string(call.State))
		}
	}
	return fmt.Sprintf("agent %s, epoch %d, %d items, %d calls (unfinished: %s)", st.Agent, st.Epoch, len(st.Chat), len(st.Calls), strings.Join(open, ", "))
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

// post hands an input to the core. Edges call it from their own
// goroutines; it gives up when the session ends.
func (s *Session) post(in engine.Input) {
	select {
	case s.mailbox <- in:
	case <-s.life.done:
	}
}

// send puts msg, an input or a request of the session's own, in the
// mailbox.
func (s *Session) send(ctx context.Context, msg any) error {
	select {
	case s.mailbox <- msg:
		return nil
	case <-s.life.done:
		return ErrSessionClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// query runs fn on the conductor goroutine, for consistent reads.
type query struct{ fn func(*engine.Core) }

// Inject adds user input through the API (an operator message, a typed
// line). It preempts whatever the agent is doing and is answered as a new
// turn at once; it never waits for the previous turn to settle.
func (s *Session) Inject(ctx context.Context, text string) error {
	return s.send(ctx, engine.UserText{Text: text})
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
	return s.send(ctx, engine.DTMF{Digit: digit})
}

// GenerateReply makes the agent speak now, with extra instructions for this
// reply only (may be empty). A greeting is the usual use. A turn still
// answering is cut where the caller stopped hearing it, as new input cuts
// it, and the reply sees everything that turn was answering: a greeting
// asked for just after the caller's first words answers them once.
func (s *Session) GenerateReply(ctx context.Context, instructions string) error {
	return s.send(ctx, engine.ReplyRequest{Instructions: instructions})
}

// TransportLost tells the session the caller's connection dropped (a
// browser closed, ICE failed, a phone leg timed out). The agent stops
// speaking at once: nothing more can reach the caller, so what they heard
// is what was played. The session goes on; tools keep running.
func (s *Session) TransportLost(ctx context.Context) error {
	return s.send(ctx, engine.TransportLost{})
}

// TransportRestored tells the session the caller is back on a new
// connection (a resumed browser session). Caller audio or text says so too.
func (s *Session) TransportRestored(ctx context.Context) error {
	return s.send(ctx, engine.TransportRestored{})
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
	return onCore(ctx, s, (*engine.Core).ChatContext)
}

// onCore runs fn on the conductor goroutine and returns its answer: a
// consistent read of state that only the core may touch.
func onCore[T any](ctx context.Context, s *Session, fn func(*engine.Core) T) (T, error) {
	out := make(chan T, 1) // buffered: the conductor never waits for the asker
	var zero T
	if err := s.send(ctx, query{fn: func(k *engine.Core) { out <- fn(k) }}); err != nil {
		return zero, err
	}
	select {
	case v := <-out:
		return v, nil
	case <-s.life.done:
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

// NowPlaying returns the words of the playing turn that have been played so
// far (a zero engine.Caption when nothing plays), for live captions.
func (s *Session) NowPlaying(ctx context.Context) (engine.Caption, error) {
	return onCore(ctx, s, (*engine.Core).NowPlaying)
}
