package espeak

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/tts"
)

// Stream is the audio of one utterance, as espeak-ng writes it. Recv and
// Close may be called from different goroutines.
//
// Word timings are estimated once the audio is complete, and come in a
// last chunk without audio: the words of the text are spread over the
// speech, leading and trailing silence left out, each in proportion to its
// estimated syllables, and when espeak-ng's pauses line up one to one with
// the text's clause punctuation, each clause over its own stretch of
// speech.
type Stream struct {
	ctx context.Context

	// mu serialises Recv with the reaping in Close.
	mu      sync.Mutex
	cmd     *exec.Cmd // nil for an utterance without audio
	cleanup runtime.Cleanup
	out     *bufio.Reader
	stderr  *capBuffer
	text    string
	rate    int // output rate; 0: as espeak-ng writes it
	reaped  bool
	final   error // sticky: io.EOF, ErrClosed or a failure
	closed  bool
	// closing is set by Close before it kills the process, so that a Recv
	// that sees the output end reports ErrClosed, not the killing.
	closing atomic.Bool

	header  bool
	native  int              // rate in the header
	left    int64            // data bytes left, or -1: until EOF
	rs      *media.Resampler // nil when no resampling is needed
	raw     []byte
	samples []int16
	out16   []int16

	// For the word timings: whether each window of audio has speech in
	// it, and the window being measured.
	voiced  []bool
	winPeak int16
	winN    int
	total   int // native samples
	timed   bool
}

// capBuffer keeps the first max bytes written to it: espeak-ng's error
// output, for error messages.
type capBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.TrimSpace(string(c.b))
}

// start runs espeak-ng on text.
func start(ctx context.Context, bin string, args []string, text string, rate int) (*Stream, error) {
	// CommandContext kills espeak-ng when ctx is done, which ends a read
	// blocked on its output.
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(text)
	stderr := &capBuffer{max: 4096}
	cmd.Stderr = stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("espeak: %w", err)
	}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, exec.ErrDot) {
			return nil, fmt.Errorf("%w: %w", ErrMissingBinary, err)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("espeak: %w", ctx.Err())
		}
		return nil, fmt.Errorf("espeak: starting %s: %w", bin, err)
	}
	s := &Stream{
		ctx:    ctx,
		cmd:    cmd,
		out:    bufio.NewReaderSize(pipe, 8192),
		stderr: stderr,
		text:   text,
		rate:   rate,
		left:   -1,
	}
	// A stream dropped without Close must not leave espeak-ng blocked on
	// a full pipe, or a zombie.
	s.cleanup = runtime.AddCleanup(s, reap, cmd)
	return s, nil
}

// reap kills and reaps a process whose stream was dropped unclosed.
func reap(cmd *exec.Cmd) {
	cmd.Process.Kill()
	cmd.Wait()
}

// Recv returns the next chunk: audio of ChunkDuration (the last may be
// shorter), then the word timings, then io.EOF. After ctx is cancelled it
// returns an error wrapping ctx.Err(); after Close, ErrClosed.
func (s *Stream) Recv() (tts.Chunk, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return tts.Chunk{}, ErrClosed
	}
	if err := s.ctx.Err(); err != nil {
		s.kill()
		return tts.Chunk{}, fmt.Errorf("espeak: %w", err)
	}
	if s.final != nil {
		return tts.Chunk{}, s.final
	}
	c, err := s.next()
	if err != nil {
		s.kill()
		if ctxErr := s.ctx.Err(); ctxErr != nil {
			err = fmt.Errorf("espeak: %w", ctxErr)
		} else if s.closing.Load() {
			err = ErrClosed
		}
		if s.final == nil {
			s.final = err
		}
		return tts.Chunk{}, err
	}
	return c, nil
}

// next reads the next chunk, or returns io.EOF once the process has ended
// well and the timings have been delivered.
func (s *Stream) next() (tts.Chunk, error) {
	if !s.header {
		err := s.readHeader()
		if err == io.EOF {
			// No output at all: espeak-ng writes nothing, not even a
			// header, for empty input.
			return tts.Chunk{}, s.end()
		}
		if err != nil {
			return tts.Chunk{}, s.failure(err)
		}
		s.header = true
	}
	if s.reaped {
		return s.timings()
	}

	want := len(s.raw)
	if s.left >= 0 {
		want = int(min(int64(want), s.left))
	}
	n, err := io.ReadFull(s.out, s.raw[:want])
	n -= n % 2 // a killed writer may leave half a sample
	if s.left >= 0 {
		s.left -= int64(n)
	}
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF || s.left == 0:
		// The last of the audio: the process's exit decides whether it
		// counts. Whatever follows a data chunk of known size is not
		// audio, but must be read for the writer to finish.
		if s.left == 0 {
			io.Copy(io.Discard, s.out)
		}
		if err := s.end(); err != io.EOF {
			return tts.Chunk{}, err
		}
	case err != nil:
		return tts.Chunk{}, s.failure(err)
	}
	if n == 0 {
		return s.timings()
	}
	x := s.samples[:n/2]
	for i := range x {
		x[i] = int16(binary.LittleEndian.Uint16(s.raw[2*i:]))
	}
	s.measure(x)
	if s.rs != nil {
		s.out16 = s.rs.Process(s.out16[:0], x)
		x = s.out16
	}
	return tts.Chunk{Audio: media.Frame{Samples: x, SampleRate: s.rate}}, nil
}

// failure turns a read error into the stream's error: the process's exit
// status and error output say more than a broken pipe.
func (s *Stream) failure(err error) error {
	if end := s.end(); end != nil && end != io.EOF {
		return end
	}
	return fmt.Errorf("espeak: reading espeak-ng's output: %w", err)
}

// end reaps the process at the end of its output and reports how it
// ended: io.EOF for a clean exit.
func (s *Stream) end() error {
	if s.reaped {
		return io.EOF
	}
	s.reaped = true
	s.cleanup.Stop()
	err := s.cmd.Wait()
	if ctxErr := s.ctx.Err(); ctxErr != nil {
		return fmt.Errorf("espeak: %w", ctxErr)
	}
	if err != nil {
		if msg := s.stderr.String(); msg != "" {
			return fmt.Errorf("espeak: espeak-ng: %w: %s", err, msg)
		}
		return fmt.Errorf("espeak: espeak-ng: %w", err)
	}
	return io.EOF
}

// kill stops and reaps the process, if it is still there.
func (s *Stream) kill() {
	if s.cmd == nil || s.reaped {
		return
	}
	s.cmd.Process.Kill()
	s.reaped = true
	s.cleanup.Stop()
	s.cmd.Wait()
}

// Close kills espeak-ng if it is still running and reaps it. It is safe to
// call more than once, and while another goroutine is in Recv: that Recv
// returns ErrClosed.
func (s *Stream) Close() error {
	// Kill first, without the lock: a Recv holding it may be blocked
	// reading the output, and only the process's end unblocks it.
	s.closing.Store(true)
	if s.cmd != nil {
		s.cmd.Process.Kill()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.kill()
	return nil
}

// readHeader parses the WAV header as it arrives. espeak-ng cannot seek
// back on a pipe to fill in sizes, so the RIFF and data sizes it writes
// are placeholders (0x7ffff000 in 1.51; 0 or 0xffffffff elsewhere): those
// mean "until the end of the output".
func (s *Stream) readHeader() error {
	var hdr [12]byte
	if _, err := io.ReadFull(s.out, hdr[:]); err != nil {
		if err == io.EOF {
			return io.EOF
		}
		return err
	}
	if string(hdr[0:4]) != "RIFF" || string(hdr[8:12]) != "WAVE" {
		return fmt.Errorf("espeak: output is not a WAV stream (starts %q)", hdr[:])
	}
	format := false
	for {
		var ch [8]byte
		if _, err := io.ReadFull(s.out, ch[:]); err != nil {
			return fmt.Errorf("espeak: truncated WAV header: %w", noEOF(err))
		}
		id, size := string(ch[0:4]), binary.LittleEndian.Uint32(ch[4:8])
		switch id {
		case "fmt ":
			if size < 16 || size > 1024 {
				return fmt.Errorf("espeak: WAV fmt chunk of %d bytes", size)
			}
			b := make([]byte, size+size&1)
			if _, err := io.ReadFull(s.out, b); err != nil {
				return fmt.Errorf("espeak: truncated WAV header: %w", noEOF(err))
			}
			le := binary.LittleEndian
			tag, channels, rate, bits := le.Uint16(b[0:2]), le.Uint16(b[2:4]), le.Uint32(b[4:8]), le.Uint16(b[14:16])
			if tag != 1 || channels != 1 || bits != 16 || rate == 0 || rate > 1<<20 {
				return fmt.Errorf("espeak: unexpected WAV format: tag %d, %d channels, %d bits, %d Hz", tag, channels, bits, rate)
			}
			s.native = int(rate)
			format = true
		case "data":
			if !format {
				return errors.New("espeak: WAV data before its format")
			}
			if size != 0 && size != math.MaxUint32 && size != 0x7ffff000 {
				s.left = int64(size)
			}
			return s.setup()
		default:
			if _, err := s.out.Discard(int(size + size&1)); err != nil {
				return fmt.Errorf("espeak: truncated WAV header: %w", noEOF(err))
			}
		}
	}
}

// setup sizes the buffers for the rate found in the header.
func (s *Stream) setup() error {
	n := max(1, media.SamplesFor(s.native, ChunkDuration))
	s.raw = make([]byte, 2*n)
	s.samples = make([]int16, n)
	if s.rate == 0 {
		s.rate = s.native
	}
	if s.rate != s.native {
		rs, err := media.NewResampler(s.native, s.rate)
		if err != nil {
			return fmt.Errorf("espeak: %w", err)
		}
		s.rs = rs
		s.out16 = make([]int16, 0, rs.OutputLen(n))
	}
	return nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Speech detection for the timings: a window is speech when its peak
// reaches speechPeak (-40 dBFS; espeak-ng's pauses are digital silence or
// close to it), and a run of quiet windows at least pauseMin long is a
// pause.
const (
	window     = 10 * time.Millisecond
	speechPeak = 328
	pauseMin   = 60 * time.Millisecond
)

// measure records which windows of x have speech.
func (s *Stream) measure(x []int16) {
	winLen := media.SamplesFor(s.native, window)
	for _, v := range x {
		if v < 0 {
			v = -max(v, -math.MaxInt16)
		}
		s.winPeak = max(s.winPeak, v)
		if s.winN++; s.winN == winLen {
			s.voiced = append(s.voiced, s.winPeak >= speechPeak)
			s.winPeak, s.winN = 0, 0
		}
	}
	s.total += len(x)
}

// timings returns the word timings chunk once, then io.EOF.
func (s *Stream) timings() (tts.Chunk, error) {
	if s.timed {
		return tts.Chunk{}, io.EOF
	}
	s.timed = true
	if s.winN > 0 {
		s.voiced = append(s.voiced, s.winPeak >= speechPeak)
		s.winN = 0
	}
	words := estimate(s.text, s.voiced, window)
	if len(words) == 0 {
		return tts.Chunk{}, io.EOF
	}
	return tts.Chunk{Words: words}, nil
}

// span is a stretch of speech, in windows [from, to).
type span struct{ from, to int }

// estimate spreads the words of text over the speech in voiced (one flag
// per window of length win).
func estimate(text string, voiced []bool, win time.Duration) []tts.WordTiming {
	words := strings.Fields(text)
	if len(words) == 0 {
		return nil
	}
	// Stretches of speech between pauses.
	var spans []span
	minGap := int(pauseMin / win)
	start, quiet := -1, 0
	for i, v := range voiced {
		switch {
		case v && start < 0:
			start, quiet = i, 0
		case v:
			if quiet >= minGap {
				spans = append(spans, span{start, i - quiet})
				start = i
			}
			quiet = 0
		case start >= 0:
			quiet++
		}
	}
	if start >= 0 {
		spans = append(spans, span{start, len(voiced) - quiet})
	}
	if len(spans) == 0 {
		return nil
	}

	// Clauses: runs of words ending in clause punctuation.
	var clauses [][]string
	from := 0
	for i, w := range words {
		if strings.ContainsAny(w[len(w)-1:], ",.;:!?") || i == len(words)-1 {
			clauses = append(clauses, words[from:i+1])
			from = i + 1
		}
	}

	var out []tts.WordTiming
	at := func(i int) time.Duration { return time.Duration(i) * win }
	if len(clauses) == len(spans) {
		for i, c := range clauses {
			out = append(out, spread(c, at(spans[i].from), at(spans[i].to))...)
		}
		return out
	}
	// Otherwise the whole text over the whole speech.
	return spread(words, at(spans[0].from), at(spans[len(spans)-1].to))
}

// spread divides [start, end) among words in proportion to their weights.
func spread(words []string, start, end time.Duration) []tts.WordTiming {
	total := 0.0
	weights := make([]float64, len(words))
	for i, w := range words {
		weights[i] = weight(w)
		total += weights[i]
	}
	out := make([]tts.WordTiming, len(words))
	acc := 0.0
	for i, w := range words {
		a := start + time.Duration(float64(end-start)*acc/total)
		acc += weights[i]
		b := start + time.Duration(float64(end-start)*acc/total)
		out[i] = tts.WordTiming{Word: w, Start: a, End: b}
	}
	return out
}

// weight estimates how long a word takes to say: its syllables (vowel
// groups), plus one for the consonants around them; a number as its digits
// read out.
func weight(w string) float64 {
	digits, groups := 0, 0
	inVowel := false
	for _, r := range strings.ToLower(w) {
		switch {
		case r >= '0' && r <= '9':
			digits++
			inVowel = false
		case strings.ContainsRune("aeiouy", r):
			if !inVowel {
				groups++
			}
			inVowel = true
		default:
			inVowel = false
		}
	}
	if digits > 0 {
		return float64(2*digits + 1)
	}
	return float64(max(groups, 1) + 1)
}
