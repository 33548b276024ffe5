package localaudio

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/holdline/holdline/media"
)

// ramp returns n samples counting up from start: audio whose order and
// losses show.
func ramp(start, n int) []int16 {
	s := make([]int16, n)
	for i := range s {
		s[i] = int16(start + i)
	}
	return s
}

// A turn starts once two frames are in and then plays them in order, the
// buffer wrapping around.
func TestPlayoutPrimesThenPlaysInOrder(t *testing.T) {
	p := newPlayout(6, 4, 100)
	out := make([]int16, 2)
	next := 1
	write := func() {
		p.write(ramp(next, 2), 1)
		next += 2
	}
	write()
	if k := p.read(out); k != 0 || !slices.Equal(out, []int16{0, 0}) {
		t.Fatalf("with one frame in: played %d %v; want silence while priming", k, out)
	}
	write()
	var got []int16
	for range 10 {
		k := p.read(out)
		got = append(got, out[:k]...)
		write()
	}
	if !slices.Equal(got, ramp(1, 20)) {
		t.Fatalf("played %v; want the written ramp in order", got)
	}
	var s Stats
	p.stats(&s)
	if s.Overruns != 0 || s.Dropped != 0 || s.Underruns != 0 {
		t.Fatalf("stats %+v; want no overrun, drop or underrun", s)
	}
}

// A turn shorter than the priming threshold still plays, one frame period
// late.
func TestPlayoutPlaysALoneFrameAfterWaiting(t *testing.T) {
	p := newPlayout(6, 4, 2)
	out := make([]int16, 2)
	p.write(ramp(1, 2), 1)
	if k := p.read(out); k != 0 {
		t.Fatalf("first period played %d; want it waiting", k)
	}
	if k := p.read(out); k != 2 || !slices.Equal(out, ramp(1, 2)) {
		t.Fatalf("second period played %d %v; want the frame", k, out)
	}
}

// Running dry inside a turn is an underrun; the end of a turn is not.
func TestPlayoutCountsGapsInsideATurnOnly(t *testing.T) {
	p := newPlayout(8, 2, 2)
	out := make([]int16, 4)
	p.write(ramp(1, 2), 1)
	p.read(out) // plays 2, then runs dry
	p.write(ramp(3, 2), 1)
	p.read(out)
	p.write(ramp(1, 2), 2) // the next turn
	var s Stats
	p.stats(&s)
	if s.Underruns != 1 {
		t.Fatalf("underruns %d; want 1 (the gap inside turn 1)", s.Underruns)
	}
	if s.Played != 4 {
		t.Fatalf("played %d; want 4", s.Played)
	}
}

// A full buffer drops its oldest audio, so what plays stays recent.
func TestPlayoutOverrunDropsOldest(t *testing.T) {
	p := newPlayout(4, 1, 1)
	p.write(ramp(1, 3), 1)
	p.write(ramp(4, 3), 1)
	out := make([]int16, 4)
	if k := p.read(out); k != 4 || !slices.Equal(out, ramp(3, 4)) {
		t.Fatalf("played %d %v; want the newest 4 samples", k, out)
	}
	var s Stats
	p.stats(&s)
	if s.Overruns != 1 || s.Dropped != 2 {
		t.Fatalf("overruns %d, dropped %d; want 1, 2", s.Overruns, s.Dropped)
	}
}

// The buffer absorbs the session player's ticker firing late and the audio
// thread calling late, each by up to 15 ms, without a gap or a drop: ten
// seconds in virtual time, one millisecond a step, at 16 kHz with the
// Device's sizes and 10 ms callbacks.
func TestPlayoutAbsorbsLateFramesAndCallbacks(t *testing.T) {
	const (
		rate     = media.Rate16k
		frames   = 500
		lateness = 15 // ms, at most, for either side
	)
	frame := media.SamplesFor(rate, FrameDuration)
	period := media.SamplesFor(rate, speakerPeriod)
	p := newPlayout(media.SamplesFor(rate, playoutDuration), media.SamplesFor(rate, primeDuration), frame)
	r := rand.New(rand.NewPCG(1, 2))
	// Frame k is written at 20k ms plus its lateness; callback i runs at
	// 10i ms plus its own, never before the one before it.
	writes := make([]int, frames)
	for k := range writes {
		writes[k] = 20*k + r.IntN(lateness+1)
	}
	calls := make([]int, 2*frames+10)
	for i := range calls {
		calls[i] = 10*i + r.IntN(lateness+1)
		if i > 0 {
			calls[i] = max(calls[i], calls[i-1])
		}
	}
	out := make([]int16, period)
	w, c := 0, 0
	for ms := 0; w < frames || c < len(calls); ms++ {
		for ; w < frames && writes[w] <= ms; w++ {
			p.write(ramp(1+w*frame, frame), 1)
		}
		for ; c < len(calls) && calls[c] <= ms; c++ {
			p.read(out)
		}
	}
	var s Stats
	p.stats(&s)
	if s.Played != int64(frames*frame) || s.Underruns != 0 || s.Overruns != 0 {
		t.Fatalf("stats %+v; want all %d samples played without underrun or overrun", s, frames*frame)
	}
}
