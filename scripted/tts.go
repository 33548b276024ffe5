package scripted

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/tts"
)

// TTS defaults.
const (
	DefaultWordsPerSecond = 2.5
	// ToneHz and ToneDBFS describe the audio the TTS produces: a quiet
	// tone rather than silence, so that level meters, VADs and echo paths
	// see something.
	ToneHz   = 220
	ToneDBFS = -20
)

// TTSOption configures a [TTS].
type TTSOption func(*ttsConfig)

type ttsConfig struct {
	rate           int
	ttfb           time.Duration
	wordsPerSecond float64
	frame          time.Duration
	failErr        error
	failAfter      int
	failStreams    []int // 1-based; empty: every stream fails
	zeroAudio      bool
	noTimings      bool
	realtime       float64
}

// WithTTSRate sets the output sample rate (default 16000).
func WithTTSRate(rate int) TTSOption { return func(c *ttsConfig) { c.rate = rate } }

// WithTTFB sets the delay from Synthesize to the first chunk (default 0).
func WithTTFB(d time.Duration) TTSOption { return func(c *ttsConfig) { c.ttfb = d } }

// WithWordsPerSecond sets the speaking rate (default 2.5): every word lasts
// 1/w seconds of audio, so the audio length follows the word count.
func WithWordsPerSecond(w float64) TTSOption {
	return func(c *ttsConfig) { c.wordsPerSecond = w }
}

// WithFrameDuration sets the length of the audio chunks (default 20 ms); the
// last chunk of an utterance may be shorter.
func WithFrameDuration(d time.Duration) TTSOption { return func(c *ttsConfig) { c.frame = d } }

// WithTTSFailure makes every stream fail with err once the audio of
// afterWords words has been delivered; with afterWords 0 the failure takes
// the place of the first chunk. If the text has fewer words, err replaces
// io.EOF.
func WithTTSFailure(err error, afterWords int) TTSOption {
	return func(c *ttsConfig) { c.failErr, c.failAfter = err, afterWords }
}

// WithTTSFailingStreams limits WithTTSFailure to the streams numbered (from
// 1, in the order Synthesize was called); the others succeed, as a provider
// does once a passing fault clears.
func WithTTSFailingStreams(n ...int) TTSOption {
	return func(c *ttsConfig) { c.failStreams = n }
}

// WithZeroAudio makes every stream end with io.EOF after the TTFB without
// yielding any chunk, as some providers do for text they cannot speak. It
// overrides WithTTSFailure.
func WithZeroAudio() TTSOption { return func(c *ttsConfig) { c.zeroAudio = true } }

// WithoutWordTimings makes the chunks carry audio only, as providers without
// timestamps do.
func WithoutWordTimings() TTSOption { return func(c *ttsConfig) { c.noTimings = true } }

// WithRealtimeFactor paces production at f times real time after the TTFB:
// with f = 1 each chunk arrives when its audio would start playing, with
// f = 4 four times sooner. The default 0 yields all audio at once.
func WithRealtimeFactor(f float64) TTSOption { return func(c *ttsConfig) { c.realtime = f } }

// TTS is a scripted [tts.Synthesizer] that speaks a tone lasting as long as
// the words would. It is safe for concurrent use.
type TTS struct {
	cfg        ttsConfig
	frameLen   int // samples per chunk
	amplitude  float64
	radPerSamp float64

	mu    sync.Mutex
	texts []string
}

var _ tts.Synthesizer = (*TTS)(nil)

// NewTTS returns a synthesizer configured by opts. It fails on an
// unsupported rate or a non-positive speaking rate or frame duration.
func NewTTS(opts ...TTSOption) (*TTS, error) {
	cfg := ttsConfig{
		rate:           media.Rate16k,
		wordsPerSecond: DefaultWordsPerSecond,
		frame:          media.DefaultFrameDuration,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if err := media.CheckRate(cfg.rate); err != nil {
		return nil, fmt.Errorf("scripted: tts: %w", err)
	}
	if !(cfg.wordsPerSecond > 0) || math.IsInf(cfg.wordsPerSecond, 1) {
		return nil, fmt.Errorf("scripted: tts: words per second must be positive and finite, got %v", cfg.wordsPerSecond)
	}
	if !(cfg.realtime >= 0) {
		return nil, fmt.Errorf("scripted: tts: negative realtime factor %v", cfg.realtime)
	}
	n := media.SamplesFor(cfg.rate, cfg.frame)
	if n <= 0 {
		return nil, fmt.Errorf("scripted: tts: frame duration %v is shorter than a sample", cfg.frame)
	}
	if cfg.ttfb < 0 {
		return nil, errors.New("scripted: tts: negative TTFB")
	}
	return &TTS{
		cfg:        cfg,
		frameLen:   n,
		amplitude:  math.MaxInt16 * math.Pow(10, ToneDBFS/20.0),
		radPerSamp: 2 * math.Pi * ToneHz / float64(cfg.rate),
	}, nil
}

// Texts returns every text Synthesize was asked to speak, in order.
func (t *TTS) Texts() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.texts...)
}

// Synthesize implements [tts.Synthesizer]. Words are split on whitespace;
// text without any yields no audio and ends with io.EOF after the TTFB.
//
// The stream fills one buffer, allocated here, for every chunk: a chunk's
// samples are valid only until the next Recv, as the tts.Chunk contract
// allows.
func (t *TTS) Synthesize(ctx context.Context, text string) (tts.Stream, error) {
	start := time.Now()
	t.mu.Lock()
	t.texts = append(t.texts, text)
	fails := t.cfg.failErr != nil && (len(t.cfg.failStreams) == 0 || slices.Contains(t.cfg.failStreams, len(t.texts)))
	t.mu.Unlock()

	cfg := &t.cfg
	words := strings.Fields(text)
	// Word boundaries are placed on samples, and timings derived from
	// them, so that consecutive words share their boundary exactly and
	// the timings add up to the audio duration.
	bound := func(i int) int {
		return int(math.Round(float64(i) * float64(cfg.rate) / cfg.wordsPerSecond))
	}
	s := &ttsStream{
		t:       t,
		ctx:     ctx,
		start:   start.Add(cfg.ttfb),
		final:   io.EOF,
		closed:  make(chan struct{}),
		starts:  make([]int, len(words)),
		timings: make([]tts.WordTiming, len(words)),
	}
	for i, w := range words {
		a, b := bound(i), bound(i+1)
		s.starts[i] = a
		s.timings[i] = tts.WordTiming{Word: w, Start: t.dur(a), End: t.dur(b)}
	}
	s.total = bound(len(words))
	if fails {
		s.final = cfg.failErr
		if cfg.failAfter < len(words) {
			s.total = bound(max(cfg.failAfter, 0))
		}
	}
	if cfg.zeroAudio {
		s.total, s.final = 0, io.EOF
	}
	if s.total > 0 {
		s.buf = make([]int16, t.frameLen)
	}
	return s, nil
}

// dur is the duration of n samples.
func (t *TTS) dur(n int) time.Duration {
	return time.Duration(n) * time.Second / time.Duration(t.cfg.rate)
}

type ttsStream struct {
	t       *TTS
	ctx     context.Context
	start   time.Time // when the first chunk is due
	starts  []int     // first sample of each word
	timings []tts.WordTiming
	total   int   // samples to deliver
	final   error // io.EOF or the scripted failure, after the last sample

	pos    int // samples delivered
	word   int // words delivered
	buf    []int16
	ended  bool
	closed chan struct{}
	once   sync.Once
}

// due is when the audio from sample n on is ready.
func (s *ttsStream) due(n int) time.Time {
	f := s.t.cfg.realtime
	if f == 0 {
		return s.start
	}
	return s.start.Add(time.Duration(float64(s.t.dur(n)) / f))
}

func (s *ttsStream) Recv() (tts.Chunk, error) {
	if err := s.ctx.Err(); err != nil {
		return tts.Chunk{}, streamErr("tts", err)
	}
	select {
	case <-s.closed:
		return tts.Chunk{}, ErrClosed
	default:
	}
	if s.ended {
		return tts.Chunk{}, s.final
	}
	if err := waitUntil(s.ctx, s.closed, s.due(s.pos)); err != nil {
		return tts.Chunk{}, streamErr("tts", err)
	}
	if s.pos >= s.total {
		s.ended = true
		return tts.Chunk{}, s.final
	}
	n := min(s.t.frameLen, s.total-s.pos)
	out := s.buf[:n]
	for i := range out {
		// From the absolute sample index, so the tone is continuous
		// across chunks.
		out[i] = int16(s.t.amplitude * math.Sin(s.t.radPerSamp*float64(s.pos+i)))
	}
	var c tts.Chunk
	c.Audio = media.Frame{Samples: out, SampleRate: s.t.cfg.rate}
	first := s.word
	for s.word < len(s.starts) && s.starts[s.word] < s.pos+n {
		s.word++
	}
	if s.word > first && !s.t.cfg.noTimings {
		c.Words = s.timings[first:s.word:s.word]
	}
	s.pos += n
	return c, nil
}

func (s *ttsStream) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}
