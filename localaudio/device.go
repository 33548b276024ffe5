package localaudio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/gen2brain/malgo"

	"github.com/holdline/holdline/media"
)

// Errors callers branch on. Open wraps ErrNoMicrophone and ErrNoSpeaker
// with what it found; when both are missing its error matches both.
var (
	ErrNoMicrophone = errors.New("localaudio: no microphone")
	ErrNoSpeaker    = errors.New("localaudio: no speaker")
	// ErrClosed is returned by WriteFrame and Pump once the Device is
	// closed.
	ErrClosed = errors.New("localaudio: device closed")
)

// noDeviceHint is what to check when a machine has no audio device.
const noDeviceHint = "is a sound card or PulseAudio available?"

// noDevicesError is Open's error on a machine with neither a microphone nor
// a speaker: one sentence, matching both sentinels.
type noDevicesError struct{}

func (noDevicesError) Error() string {
	return "localaudio: no microphone or speaker found (" + noDeviceHint + ")"
}

func (noDevicesError) Is(target error) bool {
	return target == ErrNoMicrophone || target == ErrNoSpeaker
}

// Defaults of the options.
const (
	// DefaultRate is the speaker's rate without WithRate: what sound cards
	// usually run at natively, so the backend need not convert.
	DefaultRate = media.Rate48k
	// DefaultCaptureRate is the rate of Pump's frames without
	// WithCaptureRate: the session's caller-audio rate.
	DefaultCaptureRate = media.Rate16k
	// FrameDuration is the length of Pump's frames.
	FrameDuration = 20 * time.Millisecond
)

const (
	// playoutDuration bounds the audio between the session's player and
	// the speaker; primeDuration is what gathers before a turn starts
	// playing. See playout.
	playoutDuration = 60 * time.Millisecond
	primeDuration   = 40 * time.Millisecond
	// speakerPeriod is how often the backend asks for audio.
	speakerPeriod = 10 * time.Millisecond
	// captureQueue is how many microphone chunks (20 ms each) wait for Pump
	// before new ones are dropped.
	captureQueue = 8
	// captureStopGrace is how long Close waits for the microphone's
	// current read to end by itself (a live microphone delivers every
	// 20 ms) before closing the track under it. See microphone.close.
	captureStopGrace = 250 * time.Millisecond
)

// Option configures Open.
type Option func(*config)

type config struct {
	microphone  string
	backends    []malgo.Backend
	rate        int
	captureRate int
	log         *slog.Logger
	// onPlay, for tests, sees the audio of each speaker callback.
	onPlay func([]int16)
}

// WithMicrophone picks the microphone by its mediadevices label, name or
// device ID instead of the system's default one. A name that matches no
// microphone is ErrNoMicrophone.
func WithMicrophone(name string) Option {
	return func(c *config) { c.microphone = name }
}

// WithPlaybackBackends sets the audio backends the speaker may use, in
// order of preference (default: miniaudio's order for the platform).
// malgo.BackendNull plays into nothing at real-time pace, for tests.
func WithPlaybackBackends(backends ...malgo.Backend) Option {
	return func(c *config) { c.backends = backends }
}

// WithRate sets the sample rate of the audio written to the Device, which
// Rate reports (default DefaultRate): 8, 16, 24 or 48 kHz.
func WithRate(rate int) Option {
	return func(c *config) { c.rate = rate }
}

// WithCaptureRate sets the sample rate of the frames Pump delivers (default
// DefaultCaptureRate): 8, 16, 24 or 48 kHz.
func WithCaptureRate(rate int) Option {
	return func(c *config) { c.captureRate = rate }
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.log = l
		}
	}
}

// Device is an open microphone and speaker. It is a media.Sink at Rate for
// the session's player; Pump feeds the microphone to the session. Close
// releases both.
type Device struct {
	rate        int
	captureRate int

	spk *speaker
	mic *microphone

	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Open opens the microphone and the speaker and starts them: from its
// return the speaker plays what is written to the Device and the
// microphone's audio waits for Pump. ctx bounds opening only; Close ends
// the Device.
func Open(ctx context.Context, opts ...Option) (*Device, error) {
	c := config{rate: DefaultRate, captureRate: DefaultCaptureRate, log: slog.Default()}
	for _, o := range opts {
		o(&c)
	}
	if err := media.CheckRate(c.rate); err != nil {
		return nil, fmt.Errorf("localaudio: speaker: %w", err)
	}
	if err := media.CheckRate(c.captureRate); err != nil {
		return nil, fmt.Errorf("localaudio: capture: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("localaudio: %w", err)
	}

	// Find both devices before starting either, so that a machine with
	// neither hears about both at once.
	backend, speakerErr := newSpeakerContext(c)
	micDriver, micErr := findMicrophone(c.microphone, c.log)
	if errors.Is(speakerErr, ErrNoSpeaker) && errors.Is(micErr, ErrNoMicrophone) && c.microphone == "" {
		return nil, noDevicesError{}
	}
	if err := errors.Join(micErr, speakerErr); err != nil {
		if backend != nil {
			backend.free()
		}
		return nil, err
	}

	d := &Device{
		rate:        c.rate,
		captureRate: c.captureRate,
		closing:     make(chan struct{}),
	}
	var err error
	if d.spk, err = startSpeaker(backend, c, d.closing); err != nil {
		backend.free()
		return nil, err
	}
	if err = ctx.Err(); err != nil {
		err = fmt.Errorf("localaudio: %w", err)
	} else {
		d.mic, err = startMicrophone(micDriver, c.log)
	}
	if err != nil {
		close(d.closing) // the speaker stopping now is no news
		d.spk.close()
		return nil, err
	}
	c.log.Debug("localaudio: open", "microphone", d.mic.name, "speaker", d.spk.name, "rate", d.rate)
	return d, nil
}

// Rate is the sample rate WriteFrame expects.
func (d *Device) Rate() int { return d.rate }

// Microphone names the microphone in use.
func (d *Device) Microphone() string { return d.mic.name }

// Speaker names the speaker in use.
func (d *Device) Speaker() string { return d.spk.name }

// WriteFrame implements media.Sink: it queues f for the speaker. f must be
// at Rate. When the speaker is behind by more than its buffer, the oldest
// queued audio is dropped (Stats counts it), so WriteFrame never blocks the
// session's player.
func (d *Device) WriteFrame(f media.Frame) error {
	select {
	case <-d.closing:
		return ErrClosed
	default:
	}
	if f.SampleRate != d.rate {
		return fmt.Errorf("localaudio: frame at %d Hz, the speaker plays %d Hz (see WithRate)", f.SampleRate, d.rate)
	}
	if d.spk.stopped.Load() {
		return errSpeakerStopped
	}
	d.spk.out.write(f.Samples, f.Epoch)
	return nil
}

// Pump reads the microphone and hands push frames of FrameDuration at the
// capture rate, mono, until ctx ends, push fails, the microphone stops or
// the Device is closed. It returns ctx's error, push's error, the
// microphone's (wrapped) or ErrClosed. Audio captured while no Pump runs is
// dropped. Only one Pump may run at a time; push is called from Pump's
// goroutine, as Session.PushAudio wants.
func (d *Device) Pump(ctx context.Context, push func(context.Context, media.Frame) error) error {
	return d.mic.pump(ctx, d.closing, d.captureRate, push)
}

// Stats counts what happened to the audio so far.
type Stats struct {
	// Played is how many samples (at Rate) of written audio the speaker
	// took.
	Played int64
	// Underruns counts the times the speaker ran out of audio in the
	// middle of a turn: the listener heard a gap.
	Underruns int64
	// Overruns counts the writes that found the speaker's buffer full, and
	// Dropped the samples dropped to make room, oldest first.
	Overruns, Dropped int64
	// Captured is how many samples (at the microphone's rate) were read
	// from the microphone, and Lost how many of them were dropped because
	// no Pump took them.
	Captured, Lost int64
}

// Stats returns the Device's counters.
func (d *Device) Stats() Stats {
	var s Stats
	d.spk.out.stats(&s)
	s.Captured, s.Lost = d.mic.captured.Load(), d.mic.lost.Load()
	return s
}

// Close stops the microphone and the speaker and releases them. Audio still
// queued for the speaker is dropped. It waits for the Device's goroutine and
// the backend's audio threads to end; a running Pump returns ErrClosed.
// Calling it again returns the first call's result.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		close(d.closing)
		d.closeErr = errors.Join(d.mic.close(), d.spk.close())
	})
	return d.closeErr
}

// isNullDevice says whether a backend's device only pretends to be one:
// miniaudio's null backend, or the "null" PCM ALSA lists on a machine
// without a sound card (PulseAudio's null sink is named so too).
func isNullDevice(id []byte, name string) bool {
	if name == "NULL Playback Device" || name == "NULL Capture Device" {
		return true
	}
	return string(trimZeros(id)) == "null"
}

func trimZeros(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// miniaudioNull is miniaudio's ma_backend_null. malgo v0.11.24 numbers
// its Backend constants as if miniaudio had no custom backend, so its
// BackendNull is miniaudio's ma_backend_custom, the one before:
// InitContext with it fails with "No backend". The tests, which play
// through the null backend, pin this down.
const miniaudioNull = malgo.Backend(malgo.BackendNull + 1)

// miniaudioBackends translates the caller's malgo backends to miniaudio's.
func miniaudioBackends(backends []malgo.Backend) []malgo.Backend {
	out := slices.Clone(backends)
	for i, b := range out {
		if b == malgo.BackendNull {
			out[i] = miniaudioNull
		}
	}
	return out
}

// wantsNull says whether the caller asked for miniaudio's null backend.
func wantsNull(backends []malgo.Backend) bool {
	return slices.Contains(backends, malgo.BackendNull)
}

// withPlayHook makes the speaker's callback hand fn the audio it plays,
// silence left out: for tests, which see exactly what was drained.
func withPlayHook(fn func([]int16)) Option {
	return func(c *config) { c.onPlay = fn }
}
