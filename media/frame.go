package media

import (
	"fmt"
	"time"
)

// Supported sample rates. Every stage accepts these; anything else is an
// error at construction time, never in the frame path.
const (
	Rate8k  = 8000
	Rate16k = 16000
	Rate24k = 24000
	Rate48k = 48000
)

// DefaultFrameDuration is the frame size used when a stage is not told
// otherwise. 20 ms matches Opus and G.711 packetisation on the wire.
const DefaultFrameDuration = 20 * time.Millisecond

// Frame is a run of PCM16 mono samples at SampleRate. Producers usually emit
// 10 or 20 ms frames, but consumers must accept any length.
//
// Samples may point into a buffer the producer reuses: a consumer that keeps
// samples past the call that handed it the frame must copy them.
type Frame struct {
	Samples    []int16
	SampleRate int
	// Epoch is the agent turn the frame was made for (0 for input audio).
	// Outbound stages drop frames whose epoch has been flushed.
	Epoch uint64
}

// Duration is how long the frame plays.
func (f Frame) Duration() time.Duration {
	if f.SampleRate <= 0 {
		return 0
	}
	return time.Duration(len(f.Samples)) * time.Second / time.Duration(f.SampleRate)
}

// SamplesFor returns how many samples last d at rate.
func SamplesFor(rate int, d time.Duration) int {
	return int(int64(rate) * int64(d) / int64(time.Second))
}

// ErrUnsupportedRate is returned for sample rates outside 8/16/24/48 kHz.
var ErrUnsupportedRate = fmt.Errorf("media: unsupported sample rate (want 8000, 16000, 24000 or 48000)")

// CheckRate reports whether rate is one of the supported sample rates.
func CheckRate(rate int) error {
	switch rate {
	case Rate8k, Rate16k, Rate24k, Rate48k:
		return nil
	}
	return fmt.Errorf("%w: %d", ErrUnsupportedRate, rate)
}
