package scripted

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt"
)

// DefaultLatency is how long after EndOfSpeech the [STT] delivers a final.
const DefaultLatency = 150 * time.Millisecond

// STTOption configures an [STT].
type STTOption func(*sttConfig)

type sttConfig struct {
	latency  time.Duration
	partials bool
	failErr  error
}

// WithLatency sets how long after EndOfSpeech the final transcript arrives
// (default 150 ms).
func WithLatency(d time.Duration) STTOption { return func(c *sttConfig) { c.latency = d } }

// WithPartials turns the partial transcripts on or off (default on). The
// partial carries the first word of the utterance and arrives when its
// audio starts flowing.
func WithPartials(on bool) STTOption { return func(c *sttConfig) { c.partials = on } }

// WithSTTFailure makes every stream fail with err when its first utterance
// ends: the error comes, in place of that utterance's final, the latency
// after the first EndOfSpeech, and the stream stays failed.
func WithSTTFailure(err error) STTOption { return func(c *sttConfig) { c.failErr = err } }

// STT is a scripted [stt.Recognizer]: it does not listen to the audio but
// recognises the utterances queued with Say, one per EndOfSpeech. It is safe
// for concurrent use; streams open at the same time share the queue.
type STT struct {
	cfg    sttConfig
	frames atomic.Int64

	mu    sync.Mutex
	queue []string
}

var _ stt.Recognizer = (*STT)(nil)

// NewSTT returns a recogniser configured by opts.
func NewSTT(opts ...STTOption) *STT {
	cfg := sttConfig{latency: DefaultLatency, partials: true}
	for _, o := range opts {
		o(&cfg)
	}
	return &STT{cfg: cfg}
}

// Say queues text as the transcript of the next utterance. An empty text is
// delivered as an empty final, as a recogniser that heard only noise.
func (s *STT) Say(text string) {
	s.mu.Lock()
	s.queue = append(s.queue, text)
	s.mu.Unlock()
}

// Frames returns how many frames have been written to all streams.
func (s *STT) Frames() int { return int(s.frames.Load()) }

// peek returns the transcript of the next utterance, if one is queued.
func (s *STT) peek() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return "", false
	}
	return s.queue[0], true
}

func (s *STT) pop() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return "", false
	}
	text := s.queue[0]
	s.queue = s.queue[1:]
	return text, true
}

// Stream implements [stt.Recognizer].
func (s *STT) Stream(ctx context.Context, sampleRate int) (stt.Stream, error) {
	if err := media.CheckRate(sampleRate); err != nil {
		return nil, fmt.Errorf("scripted: stt: %w", err)
	}
	return &sttStream{
		stt:    s,
		ctx:    ctx,
		rate:   sampleRate,
		wake:   make(chan struct{}, 1),
		closed: make(chan struct{}),
	}, nil
}

// sttEvent is a transcript, or the scripted failure, and when it is due.
type sttEvent struct {
	at  time.Time
	tr  stt.Transcript
	err error
}

type sttStream struct {
	stt  *STT
	ctx  context.Context
	rate int
	wake chan struct{}

	mu          sync.Mutex
	events      []sttEvent // ordered by at
	speaking    bool       // audio has flowed since the last EndOfSpeech
	failPlanned bool
	err         error // sticky failure
	isClosed    bool
	closed      chan struct{}
}

// schedule inserts e in time order, after events due at the same time.
func (s *sttStream) schedule(e sttEvent) {
	i := len(s.events)
	for i > 0 && s.events[i-1].at.After(e.at) {
		i--
	}
	s.events = append(s.events, sttEvent{})
	copy(s.events[i+1:], s.events[i:])
	s.events[i] = e
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sttStream) check() error {
	if s.isClosed {
		return ErrClosed
	}
	if err := s.ctx.Err(); err != nil {
		return streamErr("stt", err)
	}
	return nil
}

// Write counts the frame; the first frame of an utterance brings the
// partial.
func (s *sttStream) Write(f media.Frame) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	if f.SampleRate != s.rate {
		return fmt.Errorf("scripted: stt: frame at %d Hz on a %d Hz stream", f.SampleRate, s.rate)
	}
	s.stt.frames.Add(1)
	if s.speaking {
		return nil
	}
	s.speaking = true
	if !s.stt.cfg.partials {
		return nil
	}
	if text, ok := s.stt.peek(); ok {
		if w := strings.Fields(text); len(w) > 0 {
			s.schedule(sttEvent{at: time.Now(), tr: stt.Transcript{Text: w[0]}})
		}
	}
	return nil
}

// EndOfSpeech schedules the final of the queued utterance, if any, Latency
// from now.
func (s *sttStream) EndOfSpeech() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	s.speaking = false
	text, ok := s.stt.pop()
	at := time.Now().Add(s.stt.cfg.latency)
	if s.stt.cfg.failErr != nil && !s.failPlanned {
		s.failPlanned = true
		s.schedule(sttEvent{at: at, err: s.stt.cfg.failErr})
		return nil
	}
	if ok {
		s.schedule(sttEvent{at: at, tr: stt.Transcript{Text: text, Final: true}})
	}
	return nil
}

// Recv returns the next transcript when it is due. After Close it returns
// the transcripts already due, then io.EOF; finals still pending are dropped.
func (s *sttStream) Recv() (stt.Transcript, error) {
	for {
		if err := s.ctx.Err(); err != nil {
			return stt.Transcript{}, streamErr("stt", err)
		}
		now := time.Now()
		s.mu.Lock()
		if s.err != nil {
			s.mu.Unlock()
			return stt.Transcript{}, s.err
		}
		if len(s.events) > 0 && !s.events[0].at.After(now) {
			e := s.events[0]
			s.events = s.events[1:]
			if e.err != nil {
				s.err = e.err
			}
			s.mu.Unlock()
			return e.tr, e.err
		}
		if s.isClosed {
			s.mu.Unlock()
			return stt.Transcript{}, io.EOF
		}
		var (
			t     *time.Timer
			timer <-chan time.Time
		)
		if len(s.events) > 0 {
			t = time.NewTimer(s.events[0].at.Sub(now))
			timer = t.C
		}
		s.mu.Unlock()
		select {
		case <-timer:
		case <-s.wake:
		case <-s.closed:
		case <-s.ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
	}
}

func (s *sttStream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.isClosed {
		s.isClosed = true
		close(s.closed)
	}
	return nil
}
