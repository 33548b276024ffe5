package pocketsphinx

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt"
)

// Stream is a recognition stream: an stt.Stream and stt.SpeechStarter. It
// has a goroutine of its own, which Write, StartOfSpeech and EndOfSpeech
// hand audio and events to through a bounded queue, in order, and which
// takes a decoder from the Recognizer's pool when an utterance is to be
// decoded; the goroutine ends at Close or when the context is cancelled.
//
// An utterance opens at StartOfSpeech, with the last stretch of audio
// before it (WithPreRoll), and ends at EndOfSpeech, which yields its final
// transcript, empty if nothing was recognised. A session whose voice
// activity detector never calls StartOfSpeech still works: until the first
// StartOfSpeech, an utterance opens at the first Write and at the first
// Write after each EndOfSpeech. The first StartOfSpeech drops the utterance
// open then and opens a new one at its pre-roll.
type Stream struct {
	ctx  context.Context
	rate int

	in     chan event    // to the decoder goroutine
	free   chan []int16  // recycled frame buffers
	quit   chan struct{} // closed by Close
	done   chan struct{} // closed when the goroutine has ended
	closed atomic.Bool   // Close was called
	once   sync.Once     // closes quit
	queued time.Duration // the queue's capacity in audio, for errors
	wait   time.Duration // WithQueue's write timeout
	dec    *decoderState // the goroutine's, never touched elsewhere

	mu      sync.Mutex
	results []stt.Transcript
	ended   bool          // the goroutine has ended
	err     error         // why it ended, nil after Close
	changed chan struct{} // closed and replaced when results or ended change
}

var (
	_ stt.Stream        = (*Stream)(nil)
	_ stt.SpeechStarter = (*Stream)(nil)
)

type eventKind uint8

const (
	evAudio eventKind = iota
	evStart
	evEnd
)

type event struct {
	kind eventKind
	buf  []int16 // evAudio: samples at the stream's rate
}

// decoderState is what the decoder goroutine works with.
type decoderState struct {
	pool *pool
	// d is the decoder of an utterance decoded as it is spoken, from
	// the pool; nil while none is open, or while the open one is kept in
	// held, to be decoded whole when it ends (the pool had no decoder to
	// spare when it opened).
	d    *decoder
	held []int16
	cfg  config

	rs  *media.Resampler // nil at 16 kHz
	x16 []int16          // resampled frame

	noise    *rand.Rand // for the noise floor; nil: none
	noiseRMS float64

	preRoll []int16 // the last cfg.preRoll of audio outside utterances
	preMax  int

	open      bool // an utterance is open
	explicit  bool // StartOfSpeech has been called
	armed     bool // without StartOfSpeech: open at the next audio
	fed       int  // samples in the open utterance
	maxFed    int
	sinceHyp  int
	every     int // samples between partials; 0: none
	partial   string
	triedLive bool            // the held utterance asked the pool for a decoder
	shapes    map[string]bool // the phrases' shapes, for confidence
}

func newStream(ctx context.Context, cfg config, sampleRate int, p *pool) (*Stream, error) {
	st := &decoderState{
		pool:   p,
		cfg:    cfg,
		preMax: media.SamplesFor(rate, cfg.preRoll),
		armed:  true,
		maxFed: media.SamplesFor(rate, cfg.maxUtterance),
		every:  media.SamplesFor(rate, cfg.partials),
		shapes: phraseShapes(cfg.phrases),
	}
	if sampleRate != rate {
		rs, err := media.NewResampler(sampleRate, rate)
		if err != nil {
			return nil, fmt.Errorf("pocketsphinx: Stream: %w", err)
		}
		st.rs = rs
	}
	if !math.IsInf(cfg.noiseFloor, -1) {
		// A fixed seed: the same audio decodes the same way every time.
		st.noise = rand.New(rand.NewPCG(0x5eed, 0x401e))
		st.noiseRMS = 32768 * math.Pow(10, cfg.noiseFloor/20)
	}
	st.preRoll = make([]int16, 0, st.preMax)
	// The queue holds cfg.queue of 10 ms frames; longer frames make it
	// hold more audio, which only delays ErrOverrun.
	n := max(1, int(cfg.queue/(10*time.Millisecond)))
	s := &Stream{
		ctx:     ctx,
		rate:    sampleRate,
		in:      make(chan event, n),
		free:    make(chan []int16, n),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		queued:  cfg.queue,
		wait:    cfg.writeTimeout,
		dec:     st,
		changed: make(chan struct{}),
	}
	go s.run()
	return s, nil
}

// Write queues f for the decoder. The samples are copied. If the queue
// stays full for the write timeout (WithQueue) the frame is dropped and
// the error wraps ErrOverrun; the stream goes on.
func (s *Stream) Write(f media.Frame) error {
	if err := s.usable(); err != nil {
		return err
	}
	if len(f.Samples) == 0 {
		return nil
	}
	if f.SampleRate != s.rate {
		return fmt.Errorf("pocketsphinx: Write: frame at %d Hz on a %d Hz stream", f.SampleRate, s.rate)
	}
	var buf []int16
	select {
	case buf = <-s.free:
	default:
	}
	return s.send(event{kind: evAudio, buf: append(buf[:0], f.Samples...)})
}

// StartOfSpeech opens an utterance, starting with the pre-roll. It
// implements stt.SpeechStarter.
func (s *Stream) StartOfSpeech() error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.send(event{kind: evStart})
}

// EndOfSpeech ends the open utterance: its final transcript follows from
// Recv once the audio before it is decoded.
func (s *Stream) EndOfSpeech() error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.send(event{kind: evEnd})
}

// usable returns why the stream can take no more input, if it cannot.
func (s *Stream) usable() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.ctx.Err(); err != nil {
		return fmt.Errorf("pocketsphinx: %w", err)
	}
	select {
	case <-s.done:
		s.mu.Lock()
		err := s.err
		s.mu.Unlock()
		if err == nil {
			err = ErrClosed
		}
		return err
	default:
	}
	return nil
}

// send queues ev, waiting at most s.wait for room.
func (s *Stream) send(ev event) error {
	select {
	case s.in <- ev:
		return nil
	default:
	}
	t := time.NewTimer(s.wait)
	defer t.Stop()
	select {
	case s.in <- ev:
		return nil
	case <-s.done:
		return s.usable()
	case <-t.C:
		what := "frame dropped"
		if ev.kind != evAudio {
			what = "event dropped"
		}
		return fmt.Errorf("%w: its queue (%v of audio) stayed full for %v; %s", ErrOverrun, s.queued, s.wait, what)
	}
}

// Recv returns the next transcript. After Close it returns those already
// made, then io.EOF; after the context is cancelled, an error wrapping
// ctx.Err(); after a decoder failure, that failure.
func (s *Stream) Recv() (stt.Transcript, error) {
	for {
		if err := s.ctx.Err(); err != nil {
			return stt.Transcript{}, fmt.Errorf("pocketsphinx: %w", err)
		}
		s.mu.Lock()
		if len(s.results) > 0 {
			tr := s.results[0]
			s.results = s.results[1:]
			s.mu.Unlock()
			return tr, nil
		}
		if s.ended {
			err := s.err
			s.mu.Unlock()
			if err == nil {
				err = io.EOF
			}
			return stt.Transcript{}, err
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-s.ctx.Done():
		}
	}
}

// Close ends the stream: audio and events already queued are decoded (so an
// EndOfSpeech just before Close still yields its final), an utterance left
// open is dropped, and the decoder is freed. Close waits for that, and is
// safe to call more than once and concurrently with the other methods.
func (s *Stream) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		close(s.quit)
	})
	<-s.done
	return nil
}

// run is the decoder goroutine.
func (s *Stream) run() {
	st := s.dec
	var err error
	defer func() {
		st.release()
		st.pool.done()
		s.mu.Lock()
		s.ended, s.err = true, err
		s.notify()
		s.mu.Unlock()
		close(s.done)
	}()
	for err == nil {
		select {
		case ev := <-s.in:
			err = s.handle(ev)
		case <-s.quit:
			// Decode what was queued before Close.
			for err == nil {
				select {
				case ev := <-s.in:
					err = s.handle(ev)
				default:
					return
				}
			}
		case <-s.ctx.Done():
			err = fmt.Errorf("pocketsphinx: %w", s.ctx.Err())
		}
	}
}

// notify wakes Recv; s.mu must be held.
func (s *Stream) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Stream) emit(tr stt.Transcript) {
	s.mu.Lock()
	s.results = append(s.results, tr)
	s.notify()
	s.mu.Unlock()
}

// handle runs one event on the decoder.
func (s *Stream) handle(ev event) error {
	st := s.dec
	switch ev.kind {
	case evStart:
		implicit := !st.explicit
		st.explicit = true
		if st.open {
			if !implicit {
				return nil
			}
			// Opened at the first Write, before anything said where
			// speech starts: on a call that is the whole greeting's line
			// noise and echo, seconds of it, too long to decode again
			// whole. Reopen at the pre-roll, like every later utterance.
			st.abandon()
		}
		if err := st.start(); err != nil {
			return err
		}
		pre := st.preRoll
		st.preRoll = st.preRoll[:0]
		return st.feed(s, pre)
	case evEnd:
		st.armed = true
		if !st.open {
			return nil
		}
		return st.finish(s, true)
	}

	x := ev.buf
	if st.rs != nil {
		st.x16 = st.rs.Process(st.x16[:0], x)
		x = st.x16
	}
	st.addNoise(x)
	var err error
	switch {
	case st.open:
		if !st.explicit {
			st.keep(x) // the pre-roll, should StartOfSpeech reopen it
		}
		err = st.feed(s, x)
	case !st.explicit && st.armed:
		st.armed = false
		if err = st.start(); err == nil {
			err = st.feed(s, x)
		}
	default:
		st.keep(x)
	}
	// Recycle the frame's buffer for Write.
	select {
	case s.free <- ev.buf:
	default:
	}
	return err
}

// start opens an utterance, decoded as it comes on a decoder from the
// pool if one is spare, else kept in held and decoded whole when it ends.
// An utterance decoded as it comes is kept too, up to wholeMax: one that
// lasts wholeMin or more (a sentence, not a short sound whose words a
// barge-in waits on) is decoded again, whole, when it ends, and that is
// its final. Decoded whole, it has its own cepstral mean rather than one
// carried over from earlier audio or another call (or, in a fresh
// decoder, the model's initial one, far from a telephone line's): on a
// fresh stream, booking sentences by four espeak-ng voices at 8 kHz came
// out at 53% word accuracy decoded as they came, 84% decoded whole.
func (st *decoderState) start() error {
	st.open, st.fed, st.sinceHyp, st.partial, st.triedLive = true, 0, 0, "", false
	st.held = st.held[:0]
	if st.d == nil {
		d, err := st.pool.takeStreaming()
		if err != nil {
			return err
		}
		st.d = d
	}
	return st.startLive()
}

// startLive opens the utterance on st.d, if it has one.
func (st *decoderState) startLive() error {
	if st.d == nil {
		return nil
	}
	if err := st.d.start(); err != nil {
		st.d.free() // in an unknown state: not for the pool
		st.pool.putStreaming(st.d)
		st.d = nil
		return err
	}
	return nil
}

// goLive moves a held utterance longer than wholeMax onto a decoder of its
// own, if the pool has one spare: decoding a long one whole at its end
// would hold up the final.
func (st *decoderState) goLive() error {
	d, err := st.pool.takeStreaming()
	if err != nil || d == nil {
		return err
	}
	st.d = d
	if err := st.startLive(); err != nil {
		return err
	}
	err = st.d.process(st.held)
	st.held = st.held[:0]
	return err
}

// feed decodes x, ending and reopening the utterance at the length limit
// and yielding partials when they are due.
func (st *decoderState) feed(s *Stream, x []int16) error {
	for len(x) > 0 {
		n := min(len(x), st.maxFed-st.fed)
		if st.d == nil {
			st.held = append(st.held, x[:n]...)
			if len(st.held) > wholeMaxSamples && !st.triedLive {
				st.triedLive = true
				if err := st.goLive(); err != nil {
					return err
				}
			}
		} else {
			if err := st.d.process(x[:n]); err != nil {
				return err
			}
			if len(st.held) == st.fed && st.fed+n <= wholeMaxSamples {
				st.held = append(st.held, x[:n]...)
			}
		}
		x = x[n:]
		st.fed += n
		st.sinceHyp += n
		if st.fed >= st.maxFed {
			// Long enough: finalise what there is and go on in a new
			// utterance.
			if err := st.finish(s, false); err != nil {
				return err
			}
			if err := st.start(); err != nil {
				return err
			}
			continue
		}
		if st.every > 0 && st.sinceHyp >= st.every && st.d != nil {
			st.sinceHyp = 0
			if h := st.d.hyp(); h != "" && h != st.partial {
				st.partial = h
				s.emit(stt.Transcript{Text: h})
			}
		}
	}
	return nil
}

// finish ends the utterance and yields its final: always at EndOfSpeech
// (an empty final says nothing was recognised), only if there is text
// when the length limit cut the utterance.
func (st *decoderState) finish(s *Stream, always bool) error {
	st.open = false
	var text string
	var err error
	switch {
	case st.d == nil:
		text, err = st.pool.decode(s.ctx, st.held)
		st.held = st.held[:0]
		if err != nil {
			return err
		}
	default:
		if text, err = st.d.end(); err != nil {
			st.d.free()
			st.pool.putStreaming(st.d)
			st.d = nil
			return err
		}
		if always {
			// The utterance is over: the decoder goes back to the pool
			// for whichever call speaks next.
			st.pool.putStreaming(st.d)
			st.d = nil
			if st.fed >= wholeMinSamples && len(st.held) == st.fed {
				if text, err = st.pool.decode(s.ctx, st.held); err != nil {
					return err
				}
			}
		}
		st.held = st.held[:0]
	}
	if always || text != "" {
		s.emit(stt.Transcript{Text: text, Final: true, Confidence: confidence(st.shapes, text)})
	}
	return nil
}

// abandon ends the open utterance without a final: its words are dropped.
func (st *decoderState) abandon() {
	st.open = false
	st.held = st.held[:0]
	if st.d == nil {
		return
	}
	if _, err := st.d.end(); err != nil {
		st.d.free() // in an unknown state: not for the pool
	}
	st.pool.putStreaming(st.d)
	st.d = nil
}

// release gives the decoder back at the end of the stream, ending an
// utterance left open (its words are dropped).
func (st *decoderState) release() {
	if st.open {
		st.abandon()
	}
	st.held = nil
	if st.d != nil {
		st.pool.putStreaming(st.d)
		st.d = nil
	}
}

// addNoise adds the noise floor to x, in place (x is the stream's own copy).
func (st *decoderState) addNoise(x []int16) {
	if st.noise == nil {
		return
	}
	for i, v := range x {
		y := float64(v) + st.noise.NormFloat64()*st.noiseRMS
		x[i] = int16(max(min(math.Round(y), math.MaxInt16), math.MinInt16))
	}
}

// keep adds x to the pre-roll, dropping the oldest audio beyond its length.
func (st *decoderState) keep(x []int16) {
	if st.preMax == 0 {
		return
	}
	if len(x) >= st.preMax {
		st.preRoll = append(st.preRoll[:0], x[len(x)-st.preMax:]...)
		return
	}
	if over := len(st.preRoll) + len(x) - st.preMax; over > 0 {
		st.preRoll = st.preRoll[:copy(st.preRoll, st.preRoll[over:])]
	}
	st.preRoll = append(st.preRoll, x...)
}

// wholeMax is how much of an utterance is held to be decoded whole (see
// start) before it asks for a decoder to go on as it comes: decoding it at
// the end takes about a tenth of its length in CPU time, which the final
// waits for. Without a spare decoder it stays held, up to the utterance
// limit.
const wholeMax = 5 * time.Second

// wholeMin is the shortest utterance decoded as it came that is decoded
// again whole (see start): shorter ones, pre-roll included, are the short
// sounds a barge-in waits on the words of, whose final must not wait.
const wholeMin = 1500 * time.Millisecond

var (
	wholeMaxSamples = media.SamplesFor(rate, wholeMax)
	wholeMinSamples = media.SamplesFor(rate, wholeMin)
)
