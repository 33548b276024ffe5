package vad

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/holdline/holdline/media"
)

const (
	rate  = 16000
	frame = 20 * time.Millisecond
)

// signal builds test audio piece by piece, at 16 kHz.
type signal struct {
	samples []int16
	rng     *rand.Rand
}

func newSignal() *signal { return &signal{rng: rand.New(rand.NewPCG(1, 2))} }

func (s *signal) add(d time.Duration, gen func(n int) float64) *signal {
	start := len(s.samples)
	for i := range media.SamplesFor(rate, d) {
		v := math.Round(gen(start + i))
		s.samples = append(s.samples, int16(max(min(v, math.MaxInt16), math.MinInt16)))
	}
	return s
}

func (s *signal) silence(d time.Duration) *signal {
	return s.add(d, func(int) float64 { return 0 })
}

// noise adds white noise at an RMS level of dBFS.
func (s *signal) noise(d time.Duration, dBFS float64) *signal {
	rms := 32768 * math.Pow(10, dBFS/20)
	return s.add(d, func(int) float64 { return s.rng.NormFloat64() * rms })
}

// tone adds a 440 Hz sine at an RMS level of dBFS over a noise background.
func (s *signal) tone(d time.Duration, dBFS, noiseDBFS float64) *signal {
	amp := 32768 * math.Pow(10, dBFS/20) * math.Sqrt2
	rms := 32768 * math.Pow(10, noiseDBFS/20)
	return s.add(d, func(n int) float64 {
		return amp*math.Sin(2*math.Pi*440*float64(n)/rate) + s.rng.NormFloat64()*rms
	})
}

type event struct {
	tr     Transition
	at     time.Duration // when decided
	factAt time.Duration // SpeechStartedAt or SpeechStoppedAt
}

// run feeds the signal in 20 ms frames through an Energy detector and a
// default segmenter.
func run(t *testing.T, s *signal, opts ...EnergyOption) []event {
	t.Helper()
	det := NewEnergy(opts...)
	seg := NewSegmenter(SegmenterConfig{})
	n := media.SamplesFor(rate, frame)
	var events []event
	for i := 0; i+n <= len(s.samples); i += n {
		p, err := det.Detect(media.Frame{Samples: s.samples[i : i+n], SampleRate: rate})
		if err != nil {
			t.Fatal(err)
		}
		if p < 0 || p > 1 {
			t.Fatalf("probability %v", p)
		}
		switch tr := seg.Push(p, frame); tr {
		case Started:
			events = append(events, event{tr, seg.Elapsed(), seg.SpeechStartedAt()})
		case Stopped:
			events = append(events, event{tr, seg.Elapsed(), seg.SpeechStoppedAt()})
		}
	}
	return events
}

func TestLevel(t *testing.T) {
	square := make([]int16, 320)
	for i := range square {
		square[i] = math.MaxInt16
		if i%2 == 1 {
			square[i] = math.MinInt16
		}
	}
	if l := Level(square); math.Abs(l) > 0.001 {
		t.Errorf("full-scale square at %.3f dBFS, want 0", l)
	}
	if l := Level(make([]int16, 320)); l != -120 {
		t.Errorf("silence at %v dBFS, want -120", l)
	}
	sine := newSignal().tone(time.Second, -20, -200).samples
	if l := Level(sine); math.Abs(l+20) > 0.01 {
		t.Errorf("-20 dBFS RMS sine measured at %.3f", l)
	}
}

func TestEnergyQuietSignals(t *testing.T) {
	for name, s := range map[string]*signal{
		"silence":   newSignal().silence(5 * time.Second),
		"low noise": newSignal().noise(5*time.Second, -55),
		// A level the floor starts at is background, however loud.
		"loud steady noise": newSignal().noise(5*time.Second, -25),
		// Digital silence, then line noise below the threshold over the
		// absolute floor.
		"faint hiss after silence": newSignal().silence(time.Second).noise(4*time.Second, -50),
	} {
		if ev := run(t, s); len(ev) != 0 {
			t.Errorf("%s: %v, want no speech", name, ev)
		}
	}
}

func TestEnergyBursts(t *testing.T) {
	const lead = 500 * time.Millisecond
	for _, tc := range []struct {
		name       string
		background float64 // dBFS, below -150 for digital silence
		tone       bool
		level      float64
		length     time.Duration
		detect     bool
	}{
		{"tone over silence", -200, true, -30, time.Second, true},
		{"quiet tone over silence", -200, true, -45, 400 * time.Millisecond, true},
		{"too quiet over silence", -200, true, -52, time.Second, false},
		{"tone over noise", -55, true, -20, 2 * time.Second, true},
		{"loud tone over noise", -55, true, -3, 300 * time.Millisecond, true},
		{"noise burst over noise", -55, false, -35, 700 * time.Millisecond, true},
		{"tone over loud noise", -35, true, -20, time.Second, true},
		{"tone within threshold of noise", -35, true, -27, time.Second, false},
		{"exactly MinSpeech", -55, true, -25, 100 * time.Millisecond, true},
		{"shorter than MinSpeech", -55, true, -10, 80 * time.Millisecond, false},
		{"click", -55, false, -6, 20 * time.Millisecond, false},
	} {
		s := newSignal()
		bg := func(d time.Duration) {
			if tc.background < -150 {
				s.silence(d)
			} else {
				s.noise(d, tc.background)
			}
		}
		bg(lead)
		if tc.tone {
			s.tone(tc.length, tc.level, max(tc.background, -200))
		} else {
			s.noise(tc.length, tc.level)
		}
		bg(2 * time.Second)

		ev := run(t, s)
		if !tc.detect {
			if len(ev) != 0 {
				t.Errorf("%s: %v, want nothing", tc.name, ev)
			}
			continue
		}
		want := []event{
			{Started, lead + DefaultMinSpeech, lead},
			{Stopped, lead + tc.length + DefaultMinSilence, lead + tc.length},
		}
		if len(ev) != 2 || ev[0] != want[0] || ev[1] != want[1] {
			t.Errorf("%s: %v, want %v", tc.name, ev, want)
		}
	}
}

func TestEnergyNoFlapping(t *testing.T) {
	// The floor settles on the background, then a noise hovers around the
	// threshold above it: four frames over it, one under, again and again.
	// Frames above 0.5 come and go, but never for MinSpeech in a row.
	const background = -50
	s := newSignal().noise(time.Second, background)
	for range 40 {
		s.noise(4*frame, background+DefaultThreshold+3).noise(frame, background+DefaultThreshold-1)
	}
	det := NewEnergy()
	seg := NewSegmenter(SegmenterConfig{})
	n := media.SamplesFor(rate, frame)
	var high int
	for i := 0; i+n <= len(s.samples); i += n {
		p, _ := det.Detect(media.Frame{Samples: s.samples[i : i+n], SampleRate: rate})
		if p >= DefaultActivationThreshold {
			high++
		}
		if tr := seg.Push(p, frame); tr != None {
			t.Fatalf("%v at %v", tr, seg.Elapsed())
		}
	}
	if high < 100 {
		t.Errorf("only %d frames above the activation threshold: the test proves nothing", high)
	}

	// Speech whose level sags into the hysteresis band (p about 0.4) does
	// not stop until the level falls below it.
	det = NewEnergy()
	seg = NewSegmenter(SegmenterConfig{})
	s = newSignal().noise(time.Second, background).
		tone(time.Second, -20, background).
		noise(600*time.Millisecond, background+DefaultThreshold+0.5).
		noise(time.Second, background)
	var got []event
	for i := 0; i+n <= len(s.samples); i += n {
		p, _ := det.Detect(media.Frame{Samples: s.samples[i : i+n], SampleRate: rate})
		switch tr := seg.Push(p, frame); tr {
		case Started:
			got = append(got, event{tr, seg.Elapsed(), seg.SpeechStartedAt()})
		case Stopped:
			got = append(got, event{tr, seg.Elapsed(), seg.SpeechStoppedAt()})
		}
	}
	want := []event{{Started, 1100 * time.Millisecond, time.Second}, {Stopped, 2900 * time.Millisecond, 2600 * time.Millisecond}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("%v, want %v", got, want)
	}
}

func TestEnergyFloorAdapts(t *testing.T) {
	e := NewEnergy()
	f := func(s *signal) media.Frame {
		return media.Frame{Samples: s.samples[len(s.samples)-320:], SampleRate: rate}
	}
	s := newSignal()
	e.Detect(f(s.silence(frame)))
	if e.Floor() != DefaultFloor {
		t.Fatalf("floor %v after silence, want the %v minimum", e.Floor(), DefaultFloor)
	}
	for range 50 { // a second of noise 20 dB over the floor
		e.Detect(f(s.noise(frame, -40)))
	}
	if fl := e.Floor(); math.Abs(fl-(DefaultFloor+1)) > 0.01 {
		t.Errorf("floor %v after 1s of louder noise, want it to rise by 1 dB", fl)
	}
	e.Detect(f(s.noise(frame, -59)))
	if fl := e.Floor(); fl > -58.5 {
		t.Errorf("floor %v after a quiet frame, want it to fall at once", fl)
	}

	custom := NewEnergy(WithFloor(-40), WithThreshold(6))
	custom.Detect(f(s.silence(frame)))
	p, _ := custom.Detect(f(s.noise(frame, -34)))
	if math.Abs(float64(p)-0.5) > 0.05 {
		t.Errorf("probability %v at the threshold over the custom floor, want 0.5", p)
	}
}

func TestEnergyEmptyFrame(t *testing.T) {
	e := NewEnergy()
	for _, f := range []media.Frame{{SampleRate: rate}, {Samples: make([]int16, 10)}} {
		if _, err := e.Detect(f); !errors.Is(err, ErrEmptyFrame) {
			t.Errorf("%+v: %v", f, err)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	e := NewEnergy()
	seg := NewSegmenter(SegmenterConfig{})
	f := media.Frame{Samples: newSignal().noise(frame, -30).samples, SampleRate: rate}
	if n := testing.AllocsPerRun(100, func() {
		p, _ := e.Detect(f)
		seg.Push(p, frame)
	}); n != 0 {
		t.Errorf("%v allocations per frame", n)
	}
}

func BenchmarkEnergyDetect(b *testing.B) {
	e := NewEnergy()
	f := media.Frame{Samples: newSignal().noise(frame, -30).samples, SampleRate: rate}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Detect(f); err != nil {
			b.Fatal(err)
		}
	}
}
