package media

import (
	"fmt"
	"time"
)

// Framer turns audio arriving in chunks of any size and rate into frames of
// one size at one rate, the shape the session's detector and recogniser
// expect. Transports use it between their codec and Session.PushAudio:
// a browser's 48 kHz Opus packets, a sound card's 10 ms periods, an RTP
// leg's 8 kHz payloads.
//
// A Framer is not safe for concurrent use; its frames point into a buffer
// it reuses (see Frame).
type Framer struct {
	rate    int
	size    int
	rs      *Resampler
	from    int
	pending []int16
	scratch []int16
}

// NewFramer returns a Framer emitting frames of d at rate.
func NewFramer(rate int, d time.Duration) (*Framer, error) {
	if err := CheckRate(rate); err != nil {
		return nil, err
	}
	n := SamplesFor(rate, d)
	if n <= 0 {
		return nil, fmt.Errorf("media: NewFramer: frame duration %v too short", d)
	}
	return &Framer{rate: rate, size: n, pending: make([]int16, 0, 2*n)}, nil
}

// Write resamples samples (at rate from) and calls emit with every whole
// frame that is now ready. A change of input rate starts a new resampler;
// an error from emit stops the run and is returned.
func (f *Framer) Write(samples []int16, from int, emit func(Frame) error) error {
	if from <= 0 {
		return fmt.Errorf("media: Framer: invalid input rate %d", from)
	}
	if f.rs == nil || f.from != from {
		rs, err := NewResampler(from, f.rate)
		if err != nil {
			return err
		}
		f.rs, f.from = rs, from
	}
	f.scratch = f.rs.Process(f.scratch[:0], samples)
	in := f.scratch
	for len(in) > 0 {
		n := min(f.size-len(f.pending), len(in))
		f.pending = append(f.pending, in[:n]...)
		in = in[n:]
		if len(f.pending) < f.size {
			break
		}
		if err := emit(Frame{Samples: f.pending, SampleRate: f.rate}); err != nil {
			f.pending = f.pending[:0]
			return err
		}
		f.pending = f.pending[:0]
	}
	return nil
}

// Reset drops any partial frame and the resampler's history, for a stream
// that starts over (a new connection).
func (f *Framer) Reset() {
	f.pending = f.pending[:0]
	f.rs = nil
}
