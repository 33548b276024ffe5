package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt"
)

// errStreamClosed is the cause given to the uploads' context by Close, so
// an upload can tell it was abandoned rather than failed.
var errStreamClosed = errors.New("openai: stream closed")

// stream cuts the audio into utterances and uploads each one on a goroutine
// of its own. Write, StartOfSpeech and EndOfSpeech come from the session's
// audio goroutine, Recv from its transcript relay, Close from either.
type stream struct {
	rec  *Recognizer
	ctx  context.Context // the caller's
	rate int

	preRoll, maxLen, minLen int // in samples

	// uctx is the parent of every upload; Close cancels it with
	// errStreamClosed as the cause.
	uctx   context.Context
	cancel context.CancelCauseFunc
	// wg counts the upload goroutines, which the stream owns: Close waits
	// for them.
	wg sync.WaitGroup

	wake     chan struct{} // a job was queued (capacity 1)
	closedCh chan struct{}

	mu sync.Mutex
	// hist is the audio outside an utterance: the pre-roll once the
	// session has called StartOfSpeech, before that everything since the
	// last EndOfSpeech (up to maxLen).
	hist    ring
	utt     []int16 // the open utterance
	open    bool
	starter bool // StartOfSpeech has been called: trust it
	seq     int  // utterances submitted
	jobs    []*job
	failed  error // sticky: set when Recv hands out an upload's error
	closed  bool
}

// job is one utterance's upload. Its fields are written by the upload
// goroutine before done is closed and read only after.
type job struct {
	seq  int
	done chan struct{}
	text string
	err  error
	// dropped: the upload was abandoned by Close; nothing to deliver.
	dropped bool
}

var _ stt.SpeechStarter = (*stream)(nil)

func newStream(ctx context.Context, r *Recognizer, rate int) *stream {
	s := &stream{
		rec:      r,
		ctx:      ctx,
		rate:     rate,
		preRoll:  media.SamplesFor(rate, r.cfg.preRoll),
		maxLen:   media.SamplesFor(rate, r.cfg.maxUtterance),
		minLen:   media.SamplesFor(rate, MinUtterance),
		wake:     make(chan struct{}, 1),
		closedCh: make(chan struct{}),
	}
	s.uctx, s.cancel = context.WithCancelCause(ctx)
	s.hist.limit = s.maxLen
	return s
}

// check reports why the stream takes no more audio; call with mu held.
func (s *stream) check() error {
	if s.closed {
		return ErrClosed
	}
	if err := s.ctx.Err(); err != nil {
		return fmt.Errorf("openai: transcription: %w", err)
	}
	return nil
}

// Write adds f to the open utterance, or to the audio kept for the next
// one. An utterance reaching the maximum length is sent, and the rest of
// the speech goes on as a new utterance.
func (s *stream) Write(f media.Frame) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	if f.SampleRate != s.rate {
		return fmt.Errorf("openai: frame at %d Hz on a %d Hz transcription stream", f.SampleRate, s.rate)
	}
	samples := f.Samples
	if !s.open {
		s.hist.write(samples)
		return nil
	}
	for len(samples) > 0 {
		n := min(len(samples), s.maxLen-len(s.utt))
		s.utt = append(s.utt, samples[:n]...)
		samples = samples[n:]
		if len(s.utt) == s.maxLen {
			s.submit(s.utt)
			s.utt = nil
		}
	}
	return nil
}

// StartOfSpeech opens an utterance, starting with the pre-roll. From the
// first call on, the stream relies on it: an EndOfSpeech with no utterance
// open sends nothing.
func (s *stream) StartOfSpeech() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	if !s.starter {
		s.starter = true
		s.hist.setLimit(s.preRoll)
	}
	if s.open {
		return nil
	}
	s.open = true
	s.utt = s.hist.appendTo(make([]int16, 0, min(s.maxLen, s.preRoll+s.rate)))
	s.hist.reset()
	return nil
}

// EndOfSpeech closes the open utterance and sends it. Without one, on a
// stream that has never had StartOfSpeech, it sends the audio since the
// previous EndOfSpeech, the last maximum length of it at most.
func (s *stream) EndOfSpeech() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	switch {
	case s.open:
		s.open = false
		s.submit(s.utt)
		s.utt = nil
	case !s.starter:
		s.submit(s.hist.appendTo(nil))
		s.hist.reset()
	}
	return nil
}

// submit starts uploading samples, which the upload then owns. Too short
// an utterance is dropped, and so is everything once the stream has
// failed: nobody will read it. Call with mu held.
func (s *stream) submit(samples []int16) {
	if len(samples) < s.minLen || s.failed != nil {
		return
	}
	s.seq++
	j := &job{seq: s.seq, done: make(chan struct{})}
	s.jobs = append(s.jobs, j)
	s.wg.Add(1)
	go s.upload(j, samples)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// upload transcribes one utterance. It ends when the answer comes, the
// deadline passes, or the stream is closed or its context cancelled.
func (s *stream) upload(j *job, samples []int16) {
	defer s.wg.Done()
	defer close(j.done)
	timeout := s.rec.cfg.timeout
	ctx, cancel := context.WithTimeout(s.uctx, timeout)
	defer cancel()

	text, err := s.rec.transcribe(ctx, samples, s.rate)
	switch {
	case err == nil:
		j.text = text
	case context.Cause(s.uctx) == errStreamClosed:
		j.dropped = true
	case s.uctx.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		j.err = fmt.Errorf("openai: transcription of utterance %d: no answer within %v: %w", j.seq, timeout, err)
	default:
		j.err = fmt.Errorf("openai: transcription of utterance %d: %w", j.seq, err)
	}
}

// Recv returns the next utterance's transcript, in utterance order, once
// its upload is done; every transcript is final. After Close it returns
// the transcripts already received, then io.EOF. An upload's error is
// returned in its utterance's place and again by every later call.
func (s *stream) Recv() (stt.Transcript, error) {
	for {
		if err := s.ctx.Err(); err != nil {
			return stt.Transcript{}, fmt.Errorf("openai: transcription: %w", err)
		}
		s.mu.Lock()
		if s.failed != nil {
			err := s.failed
			s.mu.Unlock()
			return stt.Transcript{}, err
		}
		if len(s.jobs) == 0 {
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return stt.Transcript{}, io.EOF
			}
			select {
			case <-s.wake:
			case <-s.closedCh:
			case <-s.ctx.Done():
			}
			continue
		}
		j := s.jobs[0]
		s.mu.Unlock()

		// Close cancels the uploads, so done closes after it too.
		select {
		case <-j.done:
		case <-s.ctx.Done():
			continue
		}
		s.mu.Lock()
		if len(s.jobs) == 0 || s.jobs[0] != j {
			s.mu.Unlock() // a concurrent Recv took it
			continue
		}
		s.jobs = s.jobs[1:]
		if j.err != nil {
			s.failed = j.err
		}
		s.mu.Unlock()
		switch {
		case j.err != nil:
			return stt.Transcript{}, j.err
		case j.dropped:
			continue
		}
		text := strings.TrimSpace(j.text)
		if text == "" {
			continue // heard nothing worth saying
		}
		return stt.Transcript{Text: text, Final: true}, nil
	}
}

// Close discards the open utterance, cancels the uploads in flight and
// waits for their goroutines to end. Transcripts already received are
// still delivered by Recv.
func (s *stream) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closedCh)
		s.utt, s.open = nil, false
		s.hist = ring{}
	}
	s.mu.Unlock()
	s.cancel(errStreamClosed)
	s.wg.Wait()
	return nil
}

// ring keeps the most recent samples, up to limit. Its buffer grows as
// audio comes, so a long limit costs memory only when used.
type ring struct {
	buf   []int16 // grows to limit, then wraps
	start int     // the oldest sample, once full
	limit int
}

func (r *ring) write(s []int16) {
	if len(s) >= r.limit {
		r.buf = append(r.buf[:0], s[len(s)-r.limit:]...)
		r.start = 0
		return
	}
	if len(r.buf) < r.limit {
		n := min(r.limit-len(r.buf), len(s))
		r.buf = append(r.buf, s[:n]...)
		s = s[n:]
	}
	for len(s) > 0 {
		n := copy(r.buf[r.start:], s)
		s = s[n:]
		r.start = (r.start + n) % r.limit
	}
}

// appendTo appends the samples kept, oldest first, to dst.
func (r *ring) appendTo(dst []int16) []int16 {
	return append(append(dst, r.buf[r.start:]...), r.buf[:r.start]...)
}

func (r *ring) reset() {
	r.buf, r.start = r.buf[:0], 0
}

// setLimit changes the limit, keeping the most recent samples. The buffer
// is reallocated so that shrinking frees memory.
func (r *ring) setLimit(n int) {
	kept := r.appendTo(nil)
	if len(kept) > n {
		kept = kept[len(kept)-n:]
	}
	r.buf = append(make([]int16, 0, n), kept...)
	r.start, r.limit = 0, n
}
