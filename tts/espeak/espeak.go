package espeak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/tts"
)

// Sentinel errors. The returned errors wrap them with detail, so test with
// errors.Is.
var (
	// ErrMissingBinary means the espeak-ng program was not found. The
	// message names the Debian package to install.
	ErrMissingBinary = errors.New("espeak: espeak-ng not found (apt-get install " + aptPackage + ")")
	// ErrClosed is returned by Recv after Close.
	ErrClosed = errors.New("espeak: stream closed")
)

// aptPackage provides the espeak-ng program.
const aptPackage = "espeak-ng"

// NativeRate is the sample rate espeak-ng synthesises at, which streams
// deliver unless WithSampleRate asks for another. (Its mbrola voices speak
// at 16 kHz, and are delivered at that rate.)
const NativeRate = 22050

// Defaults of the options.
const (
	DefaultVoice          = "en-us"
	DefaultWordsPerMinute = 175
	// ChunkDuration is the length of the audio chunks streams yield (the
	// last one may be shorter).
	ChunkDuration = 20 * time.Millisecond
)

// Option configures a Synthesizer; see New.
type Option func(*config)

type config struct {
	voice string
	wpm   int
	pitch int // -1: the voice's own
	bin   string
	rate  int // 0: espeak-ng's own, no resampling
}

// WithVoice sets the espeak-ng voice (default "en-us"), with an optional
// variant: "en-us+f3". espeak-ng --voices lists them.
func WithVoice(name string) Option { return func(c *config) { c.voice = name } }

// WithWordsPerMinute sets the speaking rate, 80 to 450 (default 175).
func WithWordsPerMinute(wpm int) Option { return func(c *config) { c.wpm = wpm } }

// WithPitch sets the pitch, 0 to 99 (espeak-ng's default is 50).
func WithPitch(pitch int) Option { return func(c *config) { c.pitch = pitch } }

// WithBinary runs the espeak-ng program at path instead of the one found
// in PATH.
func WithBinary(path string) Option { return func(c *config) { c.bin = path } }

// WithSampleRate makes streams deliver audio at rate (8, 16, 24 or
// 48 kHz), resampled from espeak-ng's. Without it they deliver espeak-ng's
// own rate, NativeRate, which the session resamples to its output rate
// itself: asking here for that rate saves nothing, asking for another
// costs a second resampling.
func WithSampleRate(rate int) Option { return func(c *config) { c.rate = rate } }

// Synthesizer is a tts.Synthesizer that runs espeak-ng, one process per
// utterance, and streams its output as it is produced. It is safe for
// concurrent use.
type Synthesizer struct {
	bin  string
	args []string // before the text
	rate int      // output rate; 0: espeak-ng's own
}

var _ tts.Synthesizer = (*Synthesizer)(nil)

// New finds espeak-ng and checks that it has the voice. The error wraps
// ErrMissingBinary when the program is missing.
func New(opts ...Option) (*Synthesizer, error) {
	cfg := config{voice: DefaultVoice, wpm: DefaultWordsPerMinute, pitch: -1}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case cfg.voice == "" || strings.ContainsAny(cfg.voice, " \t\n") || strings.HasPrefix(cfg.voice, "-"):
		return nil, fmt.Errorf("espeak: invalid voice name %q", cfg.voice)
	case cfg.wpm < 80 || cfg.wpm > 450:
		return nil, fmt.Errorf("espeak: words per minute %d out of range 80 to 450", cfg.wpm)
	case cfg.pitch != -1 && (cfg.pitch < 0 || cfg.pitch > 99):
		return nil, fmt.Errorf("espeak: pitch %d out of range 0 to 99", cfg.pitch)
	}
	if cfg.rate != 0 {
		if err := media.CheckRate(cfg.rate); err != nil {
			return nil, fmt.Errorf("espeak: %w", err)
		}
	}
	bin, err := lookBinary(cfg.bin)
	if err != nil {
		return nil, err
	}
	args := []string{"--stdout", "-v", cfg.voice, "-s", strconv.Itoa(cfg.wpm)}
	if cfg.pitch >= 0 {
		args = append(args, "-p", strconv.Itoa(cfg.pitch))
	}
	// The text goes to standard input rather than the command line, where
	// any user of the machine could read it.
	args = append(args, "--stdin")

	// A voice espeak-ng lacks only shows when it runs: check now, with a
	// quiet run over no text (a few milliseconds).
	check := exec.Command(bin, "-q", "-v", cfg.voice, "")
	var stderr bytes.Buffer
	check.Stderr = &stderr
	if err := check.Run(); err != nil {
		return nil, fmt.Errorf("espeak: voice %q: %w: %s", cfg.voice, err, strings.TrimSpace(stderr.String()))
	}
	return &Synthesizer{bin: bin, args: args, rate: cfg.rate}, nil
}

// lookBinary resolves the espeak-ng program.
func lookBinary(path string) (string, error) {
	name := path
	if name == "" {
		name = "espeak-ng"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrMissingBinary, err)
	}
	return p, nil
}

// SampleRate is the rate of the audio streams deliver: the one given
// WithSampleRate, else NativeRate.
func (s *Synthesizer) SampleRate() int {
	if s.rate == 0 {
		return NativeRate
	}
	return s.rate
}

// Synthesize implements tts.Synthesizer: it starts espeak-ng on text and
// returns a stream of its audio in chunks of ChunkDuration, each yielded
// as soon as espeak-ng has written it. The word timings come last, in a
// chunk of their own without audio: espeak-ng's program does not report
// where words fall, so they are estimated over the speech actually
// produced (see Stream). Text without a letter or digit yields no audio
// and starts no process.
//
// The stream must be closed; cancelling ctx kills espeak-ng as well.
func (s *Synthesizer) Synthesize(ctx context.Context, text string) (tts.Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("espeak: %w", err)
	}
	if !speakable(text) {
		return &Stream{ctx: ctx, final: io.EOF}, nil
	}
	return start(ctx, s.bin, s.args, text, s.rate)
}

// speakable reports whether text has something espeak-ng would say.
func speakable(text string) bool {
	return strings.IndexFunc(text, func(r rune) bool {
		return r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 0x7f && !isSpaceOrPunct(r)
	}) >= 0
}

func isSpaceOrPunct(r rune) bool {
	return strings.ContainsRune("\u00a0\u2000\u2001\u2002\u2003\u2009\u200b\u2013\u2014\u2018\u2019\u201c\u201d\u2026\u3000", r)
}
