package sip

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/holdline/holdline/media"
)

// The comfort tone keeps its cadence (0.4 s on, 0.2 off, 0.4 on, 2 off)
// and pitch (425 Hz) whatever the rate and the frame size it is asked
// for.
func TestHoldToneCadence(t *testing.T) {
	for _, rate := range []int{8000, 48000} {
		p := &holdPlayer{h: &holdAudio{}}
		pcm := make([]int16, 0, 6*rate)
		frame := make([]int16, rate/50)
		for len(pcm) < 6*rate {
			p.fill(frame, rate)
			pcm = append(pcm, frame...)
		}
		ms := func(from, to int) []int16 { return pcm[from*rate/1000 : to*rate/1000] }
		loud := func(s []int16) bool {
			for _, v := range s {
				if v > 1000 || v < -1000 {
					return true
				}
			}
			return false
		}
		for _, span := range []struct {
			from, to int
			on       bool
		}{{0, 400, true}, {400, 600, false}, {600, 1000, true}, {1000, 3000, false}, {3000, 3400, true}, {3400, 3600, false}} {
			seg := ms(span.from, span.to)
			if span.on {
				// Every 20 ms of it is tone.
				for i := 0; i+rate/50 <= len(seg); i += rate / 50 {
					if !loud(seg[i : i+rate/50]) {
						t.Fatalf("%d Hz: %d-%d ms should be tone; quiet at %d ms", rate, span.from, span.to, span.from+i*1000/rate)
					}
				}
			} else if loud(seg) {
				t.Fatalf("%d Hz: %d-%d ms should be silent", rate, span.from, span.to)
			}
		}
		zc := 0
		seg := ms(0, 400)
		for i := 1; i < len(seg); i++ {
			if (seg[i-1] < 0) != (seg[i] < 0) {
				zc++
			}
		}
		if hz := zc * 10 / 8; hz < 415 || hz > 435 { // crossings in 0.4 s, halved, per second
			t.Errorf("%d Hz: the tone is %d Hz; want 425", rate, hz)
		}
	}
}

// A WAV file is played in a loop, at the line's rate.
func TestHoldAudioFromWAV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hold.wav")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	src := make([]int16, 16000) // 1 s at 16 kHz: a slow ramp
	for i := range src {
		src[i] = int16(i)
	}
	if err := media.WriteWAV(f, src, 16000); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var c config
	if err := WithHoldAudio(path)(&c); err != nil {
		t.Fatal(err)
	}
	p := &holdPlayer{h: c.hold}
	out := make([]int16, 12000) // 1.5 s at 8 kHz
	p.fill(out[:160], 8000)
	p.fill(out[160:], 8000)
	// Resampled to 8 kHz: 8000 samples a loop; the ramp, then again.
	if out[4000] < 7000 || out[4000] > 9000 {
		t.Errorf("half way through the file: %d; want about 8000", out[4000])
	}
	if out[8000+100] > 1000 {
		t.Errorf("after the file's end: %d; want its start again", out[8100])
	}
	for _, bad := range []string{filepath.Join(t.TempDir(), "missing.wav"), os.Args[0]} {
		if err := WithHoldAudio(bad)(&c); err == nil {
			t.Errorf("WithHoldAudio(%s): no error", bad)
		}
	}
	if err := WithHoldAudio("tone")(&c); err != nil || c.hold.wav != nil {
		t.Errorf("WithHoldAudio(tone): %v", err)
	}
}
