package vad

import (
	"testing"
	"time"
)

const ms = time.Millisecond

// push feeds probabilities in 10 ms frames and returns the transitions
// with the frame index they happened at.
func push(s *Segmenter, probs ...float32) map[int]Transition {
	out := map[int]Transition{}
	for i, p := range probs {
		if tr := s.Push(p, 10*ms); tr != None {
			out[i] = tr
		}
	}
	return out
}

func repeat(p float32, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = p
	}
	return out
}

func cat(parts ...[]float32) []float32 {
	var out []float32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestSegmenterOnsetAndOffset(t *testing.T) {
	s := NewSegmenter(SegmenterConfig{})
	got := push(s, cat(repeat(0, 20), repeat(0.9, 50), repeat(0.1, 40))...)
	// Speech from frame 20 (200 ms); Started once 100 ms of it is in, on
	// frame 29. Silence from frame 70 (700 ms); Stopped after 300 ms of it,
	// on frame 99.
	if len(got) != 2 || got[29] != Started || got[99] != Stopped {
		t.Fatalf("transitions %v", got)
	}
	if s.SpeechStartedAt() != 200*ms || s.SpeechStoppedAt() != 700*ms || s.Elapsed() != 1100*ms {
		t.Errorf("started %v, stopped %v, elapsed %v", s.SpeechStartedAt(), s.SpeechStoppedAt(), s.Elapsed())
	}
	if s.Speaking() {
		t.Error("still speaking")
	}
}

func TestSegmenterHysteresis(t *testing.T) {
	for _, tc := range []struct {
		name  string
		probs []float32
		want  map[int]Transition
	}{
		{"between thresholds never starts", repeat(0.45, 500), map[int]Transition{}},
		{"broken onset restarts the count",
			cat(repeat(0.9, 9), repeat(0.4, 1), repeat(0.9, 9), repeat(0, 1), repeat(0.9, 10)),
			map[int]Transition{29: Started}},
		{"dip into the band keeps speech",
			cat(repeat(0.9, 10), repeat(0.36, 200), repeat(0.9, 10)),
			map[int]Transition{9: Started}},
		{"short pauses keep speech",
			cat(repeat(0.9, 10), repeat(0.1, 29), repeat(0.9, 1), repeat(0.1, 29), repeat(0.6, 1)),
			map[int]Transition{9: Started}},
		{"flapping around activation",
			cat(repeat(0.55, 5), repeat(0.49, 1), repeat(0.55, 5), repeat(0.49, 1), repeat(0.55, 5), repeat(0.3, 100)),
			map[int]Transition{}},
		{"second utterance",
			cat(repeat(0.9, 10), repeat(0, 30), repeat(0.9, 10), repeat(0, 30)),
			map[int]Transition{9: Started, 39: Stopped, 49: Started, 79: Stopped}},
	} {
		s := NewSegmenter(SegmenterConfig{})
		got := push(s, tc.probs...)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i, tr := range tc.want {
			if got[i] != tr {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			}
		}
	}
}

func TestSegmenterConfig(t *testing.T) {
	c := NewSegmenter(SegmenterConfig{}).Config()
	want := SegmenterConfig{0.5, 0.35, 100 * ms, 300 * ms}
	if c != want {
		t.Errorf("defaults %+v, want %+v", c, want)
	}
	c = NewSegmenter(SegmenterConfig{ActivationThreshold: 0.3}).Config()
	if c.DeactivationThreshold != 0.3 {
		t.Errorf("deactivation %v above activation 0.3", c.DeactivationThreshold)
	}

	s := NewSegmenter(SegmenterConfig{ActivationThreshold: 0.8, DeactivationThreshold: 0.2, MinSpeech: 20 * ms, MinSilence: 50 * ms})
	got := push(s, cat(repeat(0.7, 10), repeat(0.8, 2), repeat(0.3, 10), repeat(0.19, 5))...)
	if len(got) != 2 || got[11] != Started || got[26] != Stopped {
		t.Errorf("transitions %v", got)
	}
	s.Reset()
	if s.Elapsed() != 0 || s.Speaking() || s.Config().MinSilence != 50*ms {
		t.Error("Reset did not reset the state or lost the config")
	}
}

func TestSegmenterLongFrame(t *testing.T) {
	// A frame as long as MinSpeech decides on its own.
	s := NewSegmenter(SegmenterConfig{})
	if tr := s.Push(1, 100*ms); tr != Started || s.SpeechStartedAt() != 0 {
		t.Errorf("%v at %v", tr, s.SpeechStartedAt())
	}
}

func TestTransitionString(t *testing.T) {
	for tr, want := range map[Transition]string{None: "none", Started: "started", Stopped: "stopped", 7: "Transition(7)"} {
		if tr.String() != want {
			t.Errorf("%d: %q", int(tr), tr.String())
		}
	}
}
