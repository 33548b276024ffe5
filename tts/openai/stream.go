package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/tts"
)

// stream reads one answer. Recv is called from one goroutine at a time;
// Close may come from another.
type stream struct {
	syn     *Synthesizer
	parent  context.Context // the caller's
	ctx     context.Context // parent's child, cancelled by Close; nil without a request
	cancel  context.CancelFunc
	text    string
	payload []byte
	rate    int

	attempts int // requests sent

	mu   sync.Mutex    // body, which Close may take at any time
	body io.ReadCloser // nil once closed

	raw       [maxChunkBytes]byte // raw[:have]: read, not yet delivered
	have      int
	src, out  []int16 // the chunk, decoded and resampled; reused
	rs        *media.Resampler
	samples   int // delivered, at rate
	eof       bool
	broken    error // why the body ended early, once its audio is out
	wordsDone bool
	err       error // sticky: how the stream ended
	closed    atomic.Bool
}

// Recv returns the next chunk of audio as soon as 20 ms of it are in (40 ms
// at most), then one chunk of estimated word timings, then io.EOF. A
// chunk's samples are reused by the next Recv.
func (s *stream) Recv() (tts.Chunk, error) {
	if s.closed.Load() {
		return tts.Chunk{}, ErrClosed
	}
	if s.err != nil {
		return tts.Chunk{}, s.err
	}
	if err := s.parent.Err(); err != nil {
		return tts.Chunk{}, s.fail(s.wrap(err))
	}
	for {
		for !s.eof && s.have < minChunkBytes {
			if err := s.read(); err != nil {
				return tts.Chunk{}, s.fail(s.wrap(err))
			}
		}
		n := s.have &^ 1 // an odd byte waits for its other half
		if n == 0 {
			break
		}
		s.src = s.src[:0]
		for i := 0; i < n; i += 2 {
			s.src = append(s.src, int16(uint16(s.raw[i])|uint16(s.raw[i+1])<<8))
		}
		s.have = copy(s.raw[:], s.raw[n:s.have])
		out := s.src
		if s.rs != nil {
			s.out = s.rs.Process(s.out[:0], s.src)
			out = s.out
		}
		if len(out) == 0 {
			continue // all of it still in the resampler's filter
		}
		s.samples += len(out)
		return tts.Chunk{Audio: media.Frame{Samples: out, SampleRate: s.rate}}, nil
	}
	// The body has ended. A dangling odd byte is half a sample: dropped.
	if s.broken != nil {
		return tts.Chunk{}, s.fail(s.wrap(s.broken))
	}
	if !s.wordsDone && s.samples > 0 {
		s.wordsDone = true
		dur := time.Duration(s.samples) * time.Second / time.Duration(s.rate)
		return tts.Chunk{Words: estimateWords(s.text, dur)}, nil
	}
	return tts.Chunk{}, s.fail(io.EOF)
}

// read reads more of the body into raw. An answer that breaks before any
// audio has been delivered is asked for again, as an error status would
// be; one that breaks later ends the stream once what did arrive has been
// delivered.
func (s *stream) read() error {
	s.mu.Lock()
	body := s.body
	s.mu.Unlock()
	if body == nil {
		return ErrClosed
	}
	n, err := body.Read(s.raw[s.have:])
	s.have += n
	switch {
	case err == nil:
		return nil
	case err == io.EOF:
		s.eof = true
		s.closeBody()
		return nil
	}
	if stop := s.stopped(); stop != nil {
		return stop
	}
	err = fmt.Errorf("reading audio: %w", err)
	s.closeBody()
	if s.samples > 0 {
		// The caller has heard the start: asking again would repeat it.
		s.eof, s.broken = true, err
		return nil
	}
	s.have = 0
	if s.rs != nil {
		s.rs.Reset()
	}
	return s.connect(err)
}

// connect sends the request, retrying temporary failures while attempts
// remain. prev, if not nil, is the failure that makes this a retry.
func (s *stream) connect(prev error) error {
	err, wait := prev, time.Duration(-1)
	for {
		if err != nil {
			if s.attempts > maxRetries || !retryable(err) {
				return err
			}
			if wait < 0 {
				wait = retryBackoff << (s.attempts - 1)
				wait = wait/2 + rand.N(wait/2+1) // jitter, so streams do not retry in step
			}
			if wait > maxRetryWait {
				return err // the caller cannot wait that long for speech
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
				return s.stopped()
			}
		}
		s.attempts++
		var body io.ReadCloser
		body, wait, err = s.syn.post(s.ctx, s.payload)
		if err == nil {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.closed.Load() {
				body.Close()
				return ErrClosed
			}
			s.body = body
			return nil
		}
		if stop := s.stopped(); stop != nil {
			return stop
		}
	}
}

// stopped reports why the stream must stop, if the caller cancelled or
// closed it.
func (s *stream) stopped() error {
	switch {
	case s.closed.Load():
		return ErrClosed
	case s.parent.Err() != nil:
		return s.parent.Err()
	case s.ctx != nil && s.ctx.Err() != nil:
		return ErrClosed
	}
	return nil
}

// wrap names the package in err, unless it is one of the stream's own
// ends.
func (s *stream) wrap(err error) error {
	if err == io.EOF || errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("openai: speech: %w", err)
}

// fail ends the stream with err, which later calls return too.
func (s *stream) fail(err error) error {
	s.err = err
	s.closeBody()
	if s.cancel != nil {
		s.cancel()
	}
	return err
}

func (s *stream) closeBody() {
	s.mu.Lock()
	body := s.body
	s.body = nil
	s.mu.Unlock()
	if body != nil {
		body.Close()
	}
}

// Close ends the stream; a Recv blocked reading returns ErrClosed. It is
// safe to call from another goroutine than Recv's, and more than once.
func (s *stream) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	// Cancel first: an HTTP body's Close waits for a Read in progress,
	// which the cancellation ends.
	if s.cancel != nil {
		s.cancel()
	}
	s.closeBody()
	return nil
}

// estimateWords spreads the words of text over dur, each in proportion to
// its length plus one (for the gap after it), as the runtime does for
// synthesisers without timings. Boundaries are computed from the running
// total, so the words tile [0, dur) exactly and never go backwards.
func estimateWords(text string, dur time.Duration) []tts.WordTiming {
	words := strings.Fields(text)
	total := 0
	for _, w := range words {
		total += utf8.RuneCountInString(w) + 1
	}
	out := make([]tts.WordTiming, len(words))
	at, sum := time.Duration(0), 0
	for i, w := range words {
		sum += utf8.RuneCountInString(w) + 1
		end := time.Duration(int64(dur) * int64(sum) / int64(total))
		out[i] = tts.WordTiming{Word: w, Start: at, End: end}
		at = end
	}
	return out
}
