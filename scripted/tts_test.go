package scripted

import (
	"context"
	"errors"
	"io"
	"math"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/tts"
)

type ttsResult struct {
	frames  []time.Duration // arrival of each chunk with audio
	samples []int16         // all audio, copied
	chunks  int
	words   []tts.WordTiming
	wordAt  []int // index of the chunk that carried each word
	rate    int
	end     time.Duration
	err     error
}

func drainTTS(t *testing.T, s tts.Stream) ttsResult {
	t.Helper()
	start := time.Now()
	var r ttsResult
	for {
		c, err := s.Recv()
		if err != nil {
			r.end, r.err = time.Since(start), err
			return r
		}
		if len(c.Audio.Samples) > 0 {
			r.frames = append(r.frames, time.Since(start))
			r.samples = append(r.samples, c.Audio.Samples...)
			r.rate = c.Audio.SampleRate
		}
		for _, w := range c.Words {
			r.words = append(r.words, w)
			r.wordAt = append(r.wordAt, r.chunks)
		}
		r.chunks++
	}
}

func newTTS(t *testing.T, opts ...TTSOption) *TTS {
	t.Helper()
	s, err := NewTTS(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func synth(ctx context.Context, t *testing.T, s *TTS, text string) ttsResult {
	t.Helper()
	st, err := s.Synthesize(ctx, text)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return drainTTS(t, st)
}

func TestTTSDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTTS(t, WithTTFB(200*time.Millisecond))
		r := synth(t.Context(), t, s, "one  two\nthree")
		if r.err != io.EOF {
			t.Fatalf("ended with %v", r.err)
		}
		// 3 words at 2.5 words/s: 1.2 s, in 60 frames of 20 ms at 16 kHz.
		if r.rate != 16000 || len(r.samples) != 19200 || len(r.frames) != 60 {
			t.Fatalf("rate %d, %d samples in %d frames; want 16000, 19200, 60", r.rate, len(r.samples), len(r.frames))
		}
		for i, at := range r.frames {
			if at != 200*time.Millisecond {
				t.Fatalf("frame %d at %v, want every frame at the 200ms TTFB", i, at)
			}
		}
		if r.end != 200*time.Millisecond {
			t.Errorf("EOF at %v", r.end)
		}
		ms := time.Millisecond
		want := []tts.WordTiming{
			{Word: "one", Start: 0, End: 400 * ms},
			{Word: "two", Start: 400 * ms, End: 800 * ms},
			{Word: "three", Start: 800 * ms, End: 1200 * ms},
		}
		if !reflect.DeepEqual(r.words, want) {
			t.Errorf("timings %v, want %v", r.words, want)
		}
		if !reflect.DeepEqual(r.wordAt, []int{0, 20, 40}) {
			t.Errorf("words in chunks %v, want each in the chunk of its first sample: [0 20 40]", r.wordAt)
		}
		if got := s.Texts(); !reflect.DeepEqual(got, []string{"one  two\nthree"}) {
			t.Errorf("Texts() = %q", got)
		}
	})
}

func TestTTSTimingsCoverAudio(t *testing.T) {
	for _, tc := range []struct {
		rate  int
		wps   float64
		frame time.Duration
		text  string
	}{
		{16000, 2.5, 20 * time.Millisecond, "a b c d e f g"},
		{8000, 3, 10 * time.Millisecond, "the quick brown fox jumps over the lazy dog"},
		{24000, 7, 30 * time.Millisecond, "x y z w"},
		{48000, 40, 20 * time.Millisecond, "many short words in a very quick burst of speech here"},
	} {
		synctest.Test(t, func(t *testing.T) {
			s := newTTS(t, WithTTSRate(tc.rate), WithWordsPerSecond(tc.wps), WithFrameDuration(tc.frame))
			r := synth(t.Context(), t, s, tc.text)
			if r.err != io.EOF || r.rate != tc.rate {
				t.Fatalf("%v at %d Hz", r.err, r.rate)
			}
			audio := time.Duration(len(r.samples)) * time.Second / time.Duration(tc.rate)
			var sum time.Duration
			for i, w := range r.words {
				sum += w.End - w.Start
				if i > 0 && w.Start != r.words[i-1].End {
					t.Errorf("gap before word %d: %v", i, w)
				}
				// The word is in the chunk with its first sample.
				first := media.SamplesFor(tc.rate, w.Start)
				n := media.SamplesFor(tc.rate, tc.frame)
				if r.wordAt[i] != first/n {
					t.Errorf("word %d starting at sample %d in chunk %d, want %d", i, first, r.wordAt[i], first/n)
				}
			}
			if sum != audio || r.words[len(r.words)-1].End != audio {
				t.Errorf("timings sum to %v, audio lasts %v", sum, audio)
			}
			wantAudio := time.Duration(float64(len(r.words)) / tc.wps * float64(time.Second))
			if d := audio - wantAudio; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("%d words last %v, want %v", len(r.words), audio, wantAudio)
			}
		})
	}
}

func TestTTSRealtime(t *testing.T) {
	for _, f := range []float64{1, 2} {
		synctest.Test(t, func(t *testing.T) {
			s := newTTS(t, WithTTFB(100*time.Millisecond), WithRealtimeFactor(f))
			r := synth(t.Context(), t, s, "hello world")
			if len(r.frames) != 40 {
				t.Fatalf("%d frames", len(r.frames))
			}
			for i, at := range r.frames {
				want := 100*time.Millisecond + time.Duration(float64(time.Duration(i)*20*time.Millisecond)/f)
				if at != want {
					t.Fatalf("×%v: frame %d at %v, want %v", f, i, at, want)
				}
			}
			if want := 100*time.Millisecond + time.Duration(float64(800*time.Millisecond)/f); r.end != want {
				t.Errorf("×%v: EOF at %v, want %v", f, r.end, want)
			}
		})
	}
}

func TestTTSTone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTTS(t)
		a := synth(t.Context(), t, s, "some words")
		b := synth(t.Context(), t, s, "some words")
		if !reflect.DeepEqual(a.samples, b.samples) {
			t.Fatal("audio is not deterministic")
		}
		var sum, peak float64
		for _, v := range a.samples {
			sum += float64(v) * float64(v)
			peak = max(peak, math.Abs(float64(v)))
		}
		rms := 20 * math.Log10(math.Sqrt(sum/float64(len(a.samples)))/32768)
		if rms < -24 || rms > -22 {
			t.Errorf("RMS %.1f dBFS, want a -20 dBFS sine (-23 dBFS RMS)", rms)
		}
		// Continuous across chunk boundaries: no jump larger than the
		// steepest step of the sine.
		maxStep := peak*2*math.Pi*ToneHz/16000 + 1
		for i := 1; i < len(a.samples); i++ {
			if d := math.Abs(float64(a.samples[i]) - float64(a.samples[i-1])); d > maxStep {
				t.Fatalf("discontinuity of %v at sample %d", d, i)
			}
		}
	})
}

func TestTTSReusesBuffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, _ := newTTS(t).Synthesize(t.Context(), "one two")
		c1, _ := st.Recv()
		p := &c1.Audio.Samples[0]
		c2, _ := st.Recv()
		if &c2.Audio.Samples[0] != p {
			t.Error("second chunk does not reuse the buffer")
		}
		if testing.AllocsPerRun(10, func() { st.Recv() }) != 0 {
			t.Error("Recv allocates")
		}
	})
}

func TestTTSNoAudio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name string
			opts []TTSOption
			text string
		}{
			{"zero audio", []TTSOption{WithZeroAudio()}, "plenty of words here"},
			{"zero audio despite failure", []TTSOption{WithTTSFailure(errBoom, 0), WithZeroAudio()}, "words"},
			{"empty", nil, ""},
			{"blank", nil, " \n\t "},
		} {
			s := newTTS(t, append(tc.opts, WithTTFB(80*time.Millisecond))...)
			r := synth(t.Context(), t, s, tc.text)
			if r.err != io.EOF || r.chunks != 0 || r.end != 80*time.Millisecond {
				t.Errorf("%s: %d chunks then %v at %v; want io.EOF at 80ms and nothing else", tc.name, r.chunks, r.err, r.end)
			}
		}
	})
}

func TestTTSWithoutWordTimings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := synth(t.Context(), t, newTTS(t, WithoutWordTimings()), "a b c")
		if len(r.words) != 0 || len(r.frames) != 60 || r.err != io.EOF {
			t.Errorf("%d words, %d frames, %v", len(r.words), len(r.frames), r.err)
		}
	})
}

func TestTTSFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTTS(t, WithTTSFailure(errBoom, 2), WithRealtimeFactor(1))
		st, _ := s.Synthesize(t.Context(), "one two three four")
		r := drainTTS(t, st)
		if !errors.Is(r.err, errBoom) || r.end != 800*time.Millisecond {
			t.Fatalf("got %v at %v, want errBoom at 800ms", r.err, r.end)
		}
		if len(r.samples) != 12800 || len(r.words) != 2 || r.words[1].Word != "two" {
			t.Errorf("before failing: %d samples, words %v; want the audio of two words", len(r.samples), r.words)
		}
		if _, err := st.Recv(); !errors.Is(err, errBoom) {
			t.Errorf("failure not sticky: %v", err)
		}

		// Failing at once.
		s = newTTS(t, WithTTSFailure(errBoom, 0), WithTTFB(time.Second))
		r = synth(t.Context(), t, s, "one two")
		if !errors.Is(r.err, errBoom) || r.chunks != 0 || r.end != time.Second {
			t.Errorf("got %d chunks then %v at %v, want errBoom at 1s", r.chunks, r.err, r.end)
		}

		// Fewer words than afterWords: the failure replaces io.EOF.
		s = newTTS(t, WithTTSFailure(errBoom, 10))
		r = synth(t.Context(), t, s, "one")
		if !errors.Is(r.err, errBoom) || len(r.samples) != 6400 {
			t.Errorf("got %d samples then %v", len(r.samples), r.err)
		}
	})
}

func TestTTSContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTTS(t, WithTTFB(time.Second))
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		r := synth(ctx, t, s, "words")
		if !errors.Is(r.err, context.DeadlineExceeded) || r.end != 300*time.Millisecond {
			t.Errorf("got %v at %v, want the deadline at 300ms", r.err, r.end)
		}

		st, _ := s.Synthesize(t.Context(), "words")
		time.AfterFunc(100*time.Millisecond, func() { st.Close() })
		if r := drainTTS(t, st); !errors.Is(r.err, ErrClosed) || r.end != 100*time.Millisecond {
			t.Errorf("after Close: %v at %v", r.err, r.end)
		}
	})
}

func TestTTSBadOptions(t *testing.T) {
	for name, o := range map[string]TTSOption{
		"rate":      WithTTSRate(44100),
		"wps":       WithWordsPerSecond(0),
		"frame":     WithFrameDuration(10 * time.Microsecond),
		"realtime":  WithRealtimeFactor(-1),
		"ttfb":      WithTTFB(-time.Second),
		"wps nan":   WithWordsPerSecond(math.NaN()),
		"realt nan": WithRealtimeFactor(math.NaN()),
	} {
		if _, err := NewTTS(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewTTS(WithTTSRate(44100)); !errors.Is(err, media.ErrUnsupportedRate) {
		t.Errorf("bad rate: %v", err)
	}
}
