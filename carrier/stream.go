package carrier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/zaf/g711"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime/engine"
)

// Defaults of a Transport.
const (
	// DefaultMarkInterval is the most audio sent between two marks: the
	// playout clock's grain on a carrier's line.
	DefaultMarkInterval = 200 * time.Millisecond
	// DefaultStartTimeout is how long a stream may take to say start.
	DefaultStartTimeout = 10 * time.Second
	// maxMessage bounds one message from the carrier (a media message of
	// 20 ms is about 300 bytes).
	maxMessage = 64 << 10
	// maxQueued bounds the messages waiting for the socket: two seconds of
	// audio. A socket that stays this far behind drops frames, counted.
	maxQueued = 100
	// maxMalformed is how many malformed messages a stream is forgiven
	// before it is closed.
	maxMalformed = 50
	// writeTimeout bounds one write to the socket.
	writeTimeout = 5 * time.Second
	// rate is the phone line's: mu-law at 8 kHz, both ways.
	rate = media.Rate8k
)

// frameLen is a 20 ms frame at 8 kHz: a mu-law byte a sample.
var frameLen = media.SamplesFor(rate, media.DefaultFrameDuration)

// Transport runs carriers' media streams as calls on a calls.Host. It
// knows no carrier: each stream comes with its Codec, and with what its
// carrier's handler decided about it (Admit).
type Transport struct {
	host         *calls.Host
	log          *slog.Logger
	markEvery    int // samples
	startTimeout time.Duration
	dropped      atomic.Uint64
}

// Option configures a Transport.
type Option func(*Transport)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(t *Transport) { t.log = l } }

// WithMarkInterval sets the most audio sent between two marks (default
// DefaultMarkInterval; Twilio's guidance for playout tracking is a mark
// per phrase, and this keeps long phrases honest too).
func WithMarkInterval(d time.Duration) Option {
	return func(t *Transport) { t.markEvery = max(frameLen, media.SamplesFor(rate, d)) }
}

// WithStartTimeout sets how long a stream may take to say start before
// it is closed (default DefaultStartTimeout).
func WithStartTimeout(d time.Duration) Option { return func(t *Transport) { t.startTimeout = d } }

// NewTransport returns a Transport whose calls run on host.
func NewTransport(host *calls.Host, opts ...Option) *Transport {
	t := &Transport{host: host, log: slog.Default(), markEvery: media.SamplesFor(rate, DefaultMarkInterval), startTimeout: DefaultStartTimeout}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Dropped counts the agent's frames dropped because a socket fell behind.
func (t *Transport) Dropped() uint64 { return t.dropped.Load() }

// Admission is what a carrier's handler says of a stream whose start it
// accepted.
type Admission struct {
	// Facts are sealed with the call's checkpoints (caller, callee, the
	// carrier's call id).
	Facts map[string]string
	// Transfer, if set, hands the call to target through the carrier; the
	// stream then ends. Nil: the line cannot transfer.
	Transfer func(ctx context.Context, req engine.TransferRequest) error
}

// Stream is one stream to serve: the carrier's codec, and Admit, which
// checks its start message (a one-time token, say) and refuses it with
// an error that says why.
type Stream struct {
	Codec Codec
	Admit func(ctx context.Context, start Event) (Admission, error)
}

// ErrRefused wraps the reasons a stream is refused before its call
// starts.
var ErrRefused = errors.New("carrier: stream refused")

// closeWith closes the socket with a status and a reason (which a
// WebSocket close frame bounds at 123 bytes).
func closeWith(conn *websocket.Conn, code websocket.StatusCode, reason string) {
	if len(reason) > 120 {
		reason = reason[:120]
	}
	_ = conn.Close(code, reason)
}

// Serve runs one stream on conn until it ends: the carrier's stop, the
// socket dropping, the call ending (the agent hung up) or ctx ending. It
// closes conn, and returns why the stream ended when it was not the
// usual way (a refusal wraps ErrRefused).
func (t *Transport) Serve(ctx context.Context, conn *websocket.Conn, s Stream) error {
	conn.SetReadLimit(maxMessage)
	log := t.log.With("carrier", s.Codec.Name())
	start, err := t.awaitStart(ctx, conn, s.Codec, log)
	if err != nil {
		log.Warn("stream refused", "err", err)
		closeWith(conn, websocket.StatusPolicyViolation, err.Error())
		return err
	}
	log = log.With("stream", start.StreamID, "call", start.CallID)
	if !strings.EqualFold(start.Encoding, "audio/x-mulaw") && !strings.EqualFold(start.Encoding, "PCMU") || start.Rate != 0 && start.Rate != rate {
		err := fmt.Errorf("%w: media format %s at %d Hz, want mu-law at 8000", ErrRefused, start.Encoding, start.Rate)
		log.Warn("stream refused", "err", err)
		closeWith(conn, websocket.StatusPolicyViolation, err.Error())
		return err
	}
	adm, err := s.Admit(ctx, start)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrRefused, err)
		log.Warn("stream refused", "err", err)
		closeWith(conn, websocket.StatusPolicyViolation, err.Error())
		return err
	}
	l := &line{t: t, conn: conn, codec: s.Codec, streamID: start.StreamID, log: log,
		wake: make(chan struct{}, 1), markBack: make(chan struct{}, 1), hungUp: make(chan struct{}),
		sent: map[uint64]int64{}, played: map[uint64]int64{}, cancelled: map[string]bool{}}
	var ln calls.Line = l
	if adm.Transfer != nil {
		ln = transferLine{l, adm.Transfer}
	}
	facts := map[string]string{"carrier": s.Codec.Name(), "stream": start.StreamID, "call": start.CallID}
	for k, v := range adm.Facts {
		facts[k] = v
	}
	hc, err := t.host.Start(ctx, calls.Spec{
		Kind: s.Codec.Name(),
		// The caller's audio is judged and recognised at 8 kHz, as it
		// came; the echo canceller runs on it as on any phone line.
		Input:      engine.InputConfig{Rate: rate},
		OutputRate: rate,
		// A carrier's stream does not come back once dropped: the call
		// ends when it does (a caller who rings again is a new call).
		Recovery: calls.Recovery{},
		Facts:    facts,
	}, ln)
	if err != nil {
		reason := "the agent cannot take the call"
		if errors.Is(err, calls.ErrFull) {
			reason = "too many calls on this worker"
		}
		log.Warn("stream refused: the call did not start", "err", err)
		closeWith(conn, websocket.StatusTryAgainLater, reason)
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	l.hc = hc
	log.Info("call started", "session", hc.ID())
	hc.Connected()

	// The writer is the socket's only writer; it ends with the stream.
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { l.write(wctx) })
	reason, err := l.read(ctx)
	stop()
	wg.Wait()
	switch {
	case errors.Is(err, errDropped):
		// The socket dropped without a stop: the agent stops speaking
		// (what the caller heard is what was played), then the call ends.
		log.Warn("the stream dropped", "err", err)
		hc.Lost()
		hc.End(reason)
	default:
		hc.End(reason)
	}
	<-hc.Done()
	l.mu.Lock()
	code, why := l.closeCode, l.closeReason
	l.mu.Unlock()
	if code == 0 {
		code, why = websocket.StatusNormalClosure, reason
	}
	closeWith(conn, code, why)
	log.Info("stream ended", "reason", reason, "session", hc.ID())
	if errors.Is(err, errDropped) || errors.Is(err, errProtocol) {
		return err
	}
	return nil
}

// awaitStart reads until the start message: connected may come first;
// anything else is an error that says what came.
func (t *Transport) awaitStart(ctx context.Context, conn *websocket.Conn, codec Codec, log *slog.Logger) (Event, error) {
	ctx, cancel := context.WithTimeout(ctx, t.startTimeout)
	defer cancel()
	malformed := 0
	for {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			return Event{}, fmt.Errorf("%w: no start: %w", ErrRefused, err)
		}
		if typ != websocket.MessageText {
			log.Warn("a binary message before start: ignored")
			continue
		}
		ev, err := codec.Decode(msg)
		switch {
		case errors.Is(err, ErrUnknownEvent):
			log.Warn("an unknown event before start: ignored", "err", err)
			continue
		case err != nil:
			log.Warn("a malformed message before start: ignored", "err", err)
			if malformed++; malformed > maxMalformed {
				return Event{}, fmt.Errorf("%w: malformed messages and no start", ErrRefused)
			}
			continue
		}
		switch ev.Kind {
		case Connected:
			continue
		case Start:
			return ev, nil
		case Stop:
			return Event{}, fmt.Errorf("%w: stop before start", ErrRefused)
		default:
			return Event{}, fmt.Errorf("%w: %s before start", ErrRefused, kindName(ev.Kind))
		}
	}
}

func kindName(k Kind) string {
	switch k {
	case Connected:
		return "connected"
	case Start:
		return "start"
	case Media:
		return "media"
	case DTMF:
		return "dtmf"
	case Mark:
		return "mark"
	case Cleared:
		return "cleared"
	case Stop:
		return "stop"
	}
	return fmt.Sprintf("kind %d", int(k))
}

var (
	// errDropped: the socket ended without the carrier's stop.
	errDropped = errors.New("carrier: the stream dropped")
	// errProtocol: the carrier broke its protocol; the stream is closed.
	errProtocol = errors.New("carrier: protocol error")
)

// line is one stream's side of its call: the calls.Line the session
// writes to, the PlayoutReporter the session's playout clock reads, and
// the reader of the carrier's messages.
type line struct {
	t        *Transport
	conn     *websocket.Conn
	codec    Codec
	streamID string
	log      *slog.Logger
	hc       *calls.Call

	wake     chan struct{} // the writer has something to send
	markBack chan struct{} // a mark came back played
	hungUp   chan struct{} // the host ended the call
	hangOnce sync.Once

	// The reader's own.
	in          []int16
	odd         bool // warned of a payload that is not 20 ms
	malformed   int
	unknownSeen bool

	mu sync.Mutex
	// queue is what waits for the writer, in order; clear asks it to send
	// a clear first.
	queue   [][]byte
	spare   [][]byte
	clear   bool
	enc     []byte // WriteFrame's mu-law buffer
	cur     uint64 // the epoch being sent, 0 between turns
	since   int    // samples sent since the last mark
	markSeq uint64
	// sent is how much of each epoch went out, played how much the
	// carrier's returned marks say was played, in samples.
	sent, played map[uint64]int64
	// pending are the marks sent (or queued) not yet returned, in order;
	// cancelled are those a clear made void: returned, they were not
	// played.
	pending   []pendingMark
	cancelled map[string]bool
	clears    int
	// closeCode and closeReason are how the socket is to be closed.
	closeCode   websocket.StatusCode
	closeReason string
}

type pendingMark struct {
	name  string
	epoch uint64
	pos   int64
}

// maxPending bounds the marks awaited from a carrier that does not return
// them.
const maxPending = 1024

// WriteFrame takes the agent's audio, 20 ms at 8 kHz, on the Player's
// goroutine, which paces it at real time: so what the carrier buffers
// stays a frame or three ahead of its playout. Silence between turns is
// not sent: the carrier plays silence when it has nothing.
func (l *line) WriteFrame(f media.Frame) error {
	if f.Epoch == 0 {
		l.mu.Lock()
		if l.cur != 0 {
			l.markLocked() // the turn's audio stopped: a phrase ended
			l.cur = 0
		}
		l.mu.Unlock()
		l.kick()
		return nil
	}
	l.mu.Lock()
	defer l.kick()
	defer l.mu.Unlock()
	l.enc = l.enc[:0]
	for _, v := range f.Samples {
		l.enc = append(l.enc, g711.EncodeUlawFrame(v))
	}
	msg, err := l.codec.Media(l.streamID, l.enc)
	if err != nil {
		return fmt.Errorf("carrier: encoding media: %w", err)
	}
	if l.cur != f.Epoch {
		if l.cur != 0 {
			l.markLocked()
		}
		l.cur = f.Epoch
		for e := range l.sent {
			if e+32 < f.Epoch {
				delete(l.sent, e)
				delete(l.played, e)
			}
		}
	}
	if !l.pushLocked(msg) {
		return nil
	}
	l.sent[f.Epoch] += int64(len(f.Samples))
	if l.since += len(f.Samples); l.since >= l.t.markEvery {
		l.markLocked()
	}
	return nil
}

// pushLocked queues msg for the writer, or drops it (counted) when the
// socket is too far behind.
func (l *line) pushLocked(msg []byte) bool {
	if len(l.queue) >= maxQueued {
		l.t.dropped.Add(1)
		return false
	}
	l.queue = append(l.queue, msg)
	return true
}

// markLocked queues a mark at what has been sent of the current epoch.
func (l *line) markLocked() {
	if l.since == 0 || l.cur == 0 {
		return
	}
	l.since = 0
	l.markSeq++
	name := fmt.Sprintf("h%d.%d", l.cur, l.markSeq)
	msg, err := l.codec.Mark(l.streamID, name)
	if err != nil || !l.pushLocked(msg) {
		return
	}
	if len(l.pending) >= maxPending {
		l.pending = l.pending[1:]
	}
	l.pending = append(l.pending, pendingMark{name: name, epoch: l.cur, pos: l.sent[l.cur]})
}

func (l *line) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// ClearOutput: the session flushed or paused its output (a barge-in). The
// audio waiting here is dropped, and the carrier is asked at once to drop
// what it holds; the marks pending are void.
func (l *line) ClearOutput() {
	l.mu.Lock()
	if len(l.queue) == 0 && len(l.pending) == 0 && l.since == 0 {
		// Everything sent has come back marked played (or nothing was
		// sent): the carrier holds nothing to clear.
		l.mu.Unlock()
		return
	}
	l.queue = l.queue[:0]
	for _, m := range l.pending {
		l.cancelled[m.name] = true
	}
	l.pending = l.pending[:0]
	l.since = 0
	l.clear = true
	l.clears++
	l.mu.Unlock()
	l.kick()
}

// PlayedOut is what the carrier's marks say was played of epoch.
func (l *line) PlayedOut(epoch uint64) (time.Duration, bool) {
	l.mu.Lock()
	n := l.played[epoch]
	l.mu.Unlock()
	return time.Duration(n) * time.Second / rate, true
}

// marked takes a mark the carrier returned.
func (l *line) marked(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancelled[name] {
		delete(l.cancelled, name) // returned by a clear: not played
		return
	}
	for i, m := range l.pending {
		if m.name != name {
			continue
		}
		for _, p := range l.pending[:i+1] {
			l.played[p.epoch] = max(l.played[p.epoch], p.pos)
		}
		l.pending = append(l.pending[:0], l.pending[i+1:]...)
		// Marks come back in order: those a clear voided have all come
		// back by now, or never will.
		clear(l.cancelled)
		select {
		case l.markBack <- struct{}{}:
		default:
		}
		return
	}
	l.log.Warn("a mark that was not sent (or came back twice): ignored", "mark", name)
}

// Hangup: the host ended the call; the writer closes the socket, which
// for a carrier ends its stream (and, with nothing after <Stream>, the
// call).
func (l *line) Hangup(reason string) {
	l.hangOnce.Do(func() {
		l.mu.Lock()
		if l.closeCode == 0 {
			l.closeCode, l.closeReason = websocket.StatusNormalClosure, reason
		}
		l.mu.Unlock()
		close(l.hungUp)
	})
}

// write sends what WriteFrame and ClearOutput queued until ctx ends or the
// host hangs up.
func (l *line) write(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.hungUp:
			l.drain(ctx)
			l.mu.Lock()
			code, why := l.closeCode, l.closeReason
			l.mu.Unlock()
			closeWith(l.conn, code, why)
			return
		case <-l.wake:
		}
		if !l.flush(ctx) {
			return
		}
	}
}

// drainTimeout bounds the wait, when the call ends, for the carrier to
// play what it holds: an agent's goodbye is heard to its end.
const drainTimeout = 3 * time.Second

// drain sends what is queued with a mark after it, and waits (at most
// drainTimeout) for the carrier to have played everything: a socket closed
// at once would cut the goodbye the carrier still holds.
func (l *line) drain(ctx context.Context) {
	l.mu.Lock()
	if l.closeCode != websocket.StatusNormalClosure {
		l.mu.Unlock()
		return // a broken stream is closed at once
	}
	l.markLocked()
	l.mu.Unlock()
	if !l.flush(ctx) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	for {
		l.mu.Lock()
		n := len(l.pending)
		l.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-l.markBack:
		case <-ctx.Done():
			return
		}
	}
}

// flush writes what is queued: a clear first if one was asked for. It
// reports whether the socket is still good.
func (l *line) flush(ctx context.Context) bool {
	l.mu.Lock()
	clr := l.clear
	l.clear = false
	batch := l.queue
	l.queue, l.spare = l.spare[:0], nil
	l.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	err := func() error {
		if clr {
			msg, err := l.codec.Clear(l.streamID)
			if err != nil {
				return err
			}
			if err := l.conn.Write(wctx, websocket.MessageText, msg); err != nil {
				return err
			}
		}
		for _, msg := range batch {
			if err := l.conn.Write(wctx, websocket.MessageText, msg); err != nil {
				return err
			}
		}
		return nil
	}()
	cancel()
	clear(batch)
	l.mu.Lock()
	l.spare = batch[:0]
	l.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("writing to the stream failed: closing it", "err", err)
			closeWith(l.conn, websocket.StatusInternalError, "write failed")
		}
		return false
	}
	return true
}

// read takes the carrier's messages until the stream ends, and returns
// the call's reason for ending and, when it did not end the usual way,
// why.
func (l *line) read(ctx context.Context) (string, error) {
	for {
		typ, msg, err := l.conn.Read(ctx)
		if err != nil {
			select {
			case <-l.hungUp:
				l.mu.Lock()
				defer l.mu.Unlock()
				return l.closeReason, nil
			default:
			}
			if ctx.Err() != nil {
				return "the worker closed", nil
			}
			// A carrier that ends its stream by closing the socket
			// (Plivo sends no stop) closes it normally: the caller hung
			// up. A socket that ends without a close frame dropped.
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				return "the caller hung up", nil
			}
			return "the carrier's stream dropped", fmt.Errorf("%w: %w", errDropped, err)
		}
		if typ != websocket.MessageText {
			l.log.Warn("a binary message: ignored (the carrier's messages are JSON text)")
			continue
		}
		ev, err := l.codec.Decode(msg)
		switch {
		case errors.Is(err, ErrUnknownEvent):
			if !l.unknownSeen {
				l.unknownSeen = true
				l.log.Warn("an unknown event: ignored (logged once a stream)", "err", err)
			}
			continue
		case err != nil:
			l.log.Warn("a malformed message: ignored", "err", err)
			if l.malformed++; l.malformed > maxMalformed {
				return l.protocolError("too many malformed messages")
			}
			continue
		}
		switch ev.Kind {
		case Media:
			l.media(ctx, ev.Audio)
		case DTMF:
			l.dtmf(ctx, ev.Digit)
		case Mark:
			l.marked(ev.Mark)
		case Stop:
			return "the caller hung up", nil
		case Start:
			return l.protocolError("a second start on the stream")
		case Cleared:
			// A carrier that says it cleared instead of returning the
			// pending marks (Plivo): none of them will come back.
			l.mu.Lock()
			clear(l.cancelled)
			l.mu.Unlock()
		case Connected:
		}
	}
}

// protocolError ends the stream for a broken protocol, with the reason in
// the close frame.
func (l *line) protocolError(reason string) (string, error) {
	l.log.Warn("closing the stream", "reason", reason)
	l.mu.Lock()
	l.closeCode, l.closeReason = websocket.StatusPolicyViolation, reason
	l.mu.Unlock()
	return "protocol error: " + reason, fmt.Errorf("%w: %s", errProtocol, reason)
}

// media decodes the caller's mu-law and pushes it in 20 ms frames. A
// carrier sends 20 ms a message; other sizes are cut into frames all the
// same (and logged once), as a phone line's packets would be.
func (l *line) media(ctx context.Context, audio []byte) {
	if len(audio) != frameLen && !l.odd {
		l.odd = true
		l.log.Warn("a media payload that is not 20 ms: reframed (logged once a stream)", "bytes", len(audio))
	}
	for _, b := range audio {
		l.in = append(l.in, g711.DecodeUlawFrame(b))
	}
	n := 0
	for ; len(l.in)-n >= frameLen; n += frameLen {
		_ = l.hc.PushAudio(ctx, media.Frame{Samples: l.in[n : n+frameLen], SampleRate: rate})
	}
	l.in = append(l.in[:0], l.in[n:]...)
}

// pushTimeout bounds handing a key press to the session.
const pushTimeout = 2 * time.Second

func (l *line) dtmf(ctx context.Context, digit string) {
	ctx, cancel := context.WithTimeout(ctx, pushTimeout)
	defer cancel()
	d := []rune(digit)
	if len(d) != 1 {
		return
	}
	if err := l.hc.Session().PushDTMF(ctx, d[0]); err != nil {
		l.log.Warn("DTMF lost", "digit", digit, "err", err)
	}
}

// transferLine is a line whose carrier can transfer the call.
type transferLine struct {
	*line
	transfer func(ctx context.Context, req engine.TransferRequest) error
}

// Transfer hands the call over through the carrier; once it is accepted
// the stream ends (the carrier moves the call on), the call with it.
func (l transferLine) Transfer(ctx context.Context, req engine.TransferRequest) error {
	if err := l.transfer(ctx, req); err != nil {
		return err
	}
	if req.Token != "" {
		l.hc.Transferred()
	}
	l.log.Info("call transferred", "target", req.Target)
	// The carrier moved the call on: the stream closes, and the call
	// ends with the transfer as its reason.
	l.Hangup("transferred to " + req.Target)
	return nil
}
