package engine

import (
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/vad"
)

// EchoCanceller removes the agent's own voice from the caller's audio. The
// session feeds it, with Playback, exactly what the output played, silence
// included, and passes each frame of caller audio through Process.
// media/aec's Canceller is one.
type EchoCanceller interface {
	// Playback appends played audio at the input rate.
	Playback(samples []int16)
	// Process cancels the echo in one frame of FrameSize samples.
	Process(near, out []int16) error
	FrameSize() int
	// FarActive reports whether the agent may be audible in the frame
	// just processed.
	FarActive() bool
	// Delay is the estimated delay of the echo, once known.
	Delay() (time.Duration, bool)
	Close() error
}

// InputConfig sets how caller audio is judged (WithInput).
type InputConfig struct {
	// Detector scores each frame (default: vad.NewEnergy()).
	Detector vad.Detector
	// Segmenter turns scores into speech start and stop while the agent
	// is silent (zero fields take the vad package's defaults).
	Segmenter vad.SegmenterConfig
	// BargeIn decides, while the agent is audible, whether the caller is
	// interrupting (zero fields take the vad package's defaults; its
	// Segmenter field is replaced by Segmenter above).
	BargeIn vad.ArbiterConfig
	// EchoCanceller cleans the caller's audio before anything judges it.
	// Nil uses media/aec when libspeexdsp can be loaded (a warning says
	// what to install when it cannot); NoEchoCancellation turns it off.
	EchoCanceller EchoCanceller
	// NoEchoCancellation turns echo cancellation off, for callers whose
	// device cancels echo already (a browser).
	NoEchoCancellation bool
	// EchoFree says the caller's device removes the agent's voice from
	// what it sends (a browser's own echo cancellation, a headset): speech
	// over the agent is the caller's, so barge-in is judged as in a pause
	// between the agent's words, with no raised threshold and no wait for
	// an echo tail. Leave it off for phone lines and loudspeakers.
	EchoFree bool
	// Rate is the caller audio rate the recogniser is opened at (default
	// 16 kHz). Echo cancellation works on frames at this rate, 8 or
	// 16 kHz.
	Rate int
}

// DefaultInputConfig is the input configuration used when none is given.
func DefaultInputConfig() InputConfig {
	return InputConfig{Rate: media.Rate16k}
}
