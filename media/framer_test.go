package media

import (
	"errors"
	"testing"
	"time"
)

func TestFramerCutsAnyChunksIntoWholeFrames(t *testing.T) {
	f, err := NewFramer(Rate16k, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var frames, samples int
	emit := func(fr Frame) error {
		if len(fr.Samples) != 320 || fr.SampleRate != Rate16k {
			t.Fatalf("frame of %d samples at %d Hz", len(fr.Samples), fr.SampleRate)
		}
		frames++
		samples += len(fr.Samples)
		return nil
	}
	// One second at 48 kHz, in chunks of odd sizes.
	in := make([]int16, Rate48k)
	for i := range in {
		in[i] = int16(i % 1000)
	}
	for len(in) > 0 {
		n := min(len(in), 7+len(in)%211)
		if err := f.Write(in[:n], Rate48k, emit); err != nil {
			t.Fatal(err)
		}
		in = in[n:]
	}
	// The resampler's filter delay may hold back part of a frame.
	if frames < 49 || frames > 50 {
		t.Errorf("%d frames from 1 s of audio; want 49 or 50", frames)
	}
}

func TestFramerStopsAtTheFirstEmitError(t *testing.T) {
	f, _ := NewFramer(Rate8k, 10*time.Millisecond)
	stop := errors.New("stop")
	calls := 0
	err := f.Write(make([]int16, 800), Rate8k, func(Frame) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("err %v after %d calls; want stop after 1", err, calls)
	}
	if err := f.Write(nil, 0, func(Frame) error { return nil }); err == nil {
		t.Error("an input rate of 0 was accepted")
	}
}
