package cli

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
)

// lineRate is the rate of the console's simulated phone line.
const lineRate = media.Rate16k

// line is a live audio line into a session: a frame every 20 ms, in real
// time, of the caller's queued speech or else the line's quiet, as a
// transport delivers it.
type line struct {
	sess *runtime.Session

	mu      sync.Mutex
	pending []int16
	drained chan struct{} // closed when pending runs out; nil while idle
}

// loadCaller reads a WAV of the caller's speech at the line's rate.
func loadCaller(path string) ([]int16, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("caller audio: %w", err)
	}
	defer f.Close()
	samples, rate, err := media.ReadWAV(f)
	if err != nil {
		return nil, fmt.Errorf("caller audio %s: %w", path, err)
	}
	if rate != lineRate {
		rs, err := media.NewResampler(rate, lineRate)
		if err != nil {
			return nil, fmt.Errorf("caller audio %s: %w", path, err)
		}
		samples = rs.Process(nil, samples)
	}
	return samples, nil
}

// say queues speech and returns a channel closed once it has all been sent.
func (l *line) say(samples []int16) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = append(l.pending, samples...)
	if l.drained == nil {
		l.drained = make(chan struct{})
	}
	return l.drained
}

// run sends frames until ctx ends.
func (l *line) run(ctx context.Context) error {
	n := media.SamplesFor(lineRate, 20*time.Millisecond)
	frame := make([]int16, n)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		clear(frame)
		// A faint hiss, as a real line has: detectors learn their noise
		// floor from it.
		for i := range frame {
			frame[i] = int16((i*7919)%9 - 4)
		}
		l.mu.Lock()
		k := copy(frame, l.pending)
		l.pending = l.pending[k:]
		if len(l.pending) == 0 && l.drained != nil {
			close(l.drained)
			l.drained = nil
		}
		l.mu.Unlock()
		if err := l.sess.PushAudio(ctx, media.Frame{Samples: frame, SampleRate: lineRate}); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
