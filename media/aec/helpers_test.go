package aec

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/need"
)

// newCanceller returns a Canceller closed when the test ends. Without
// libspeexdsp the test is skipped, or fails under HOLDLINE_REQUIRE_MODELS=1
// (as with "make test", which installs it).
func newCanceller(t testing.TB, rate int, opts ...Option) *Canceller {
	t.Helper()
	c, err := New(rate, opts...)
	if errors.Is(err, ErrUnavailable) {
		need.Missing(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func samplesFor(rate int, d time.Duration) int {
	return int(int64(rate) * int64(d) / int64(time.Second))
}

// voice describes a synthetic talker.
type voice struct {
	seed  uint64
	f0    float64 // mean pitch, Hz
	level float64 // RMS over the whole signal, dBFS
}

var (
	agentVoice = voice{seed: 1, f0: 130, level: -20}
	userVoice  = voice{seed: 2, f0: 210, level: -20}
)

// speechLike synthesises d of something with speech's statistics:
// syllables of 120–320 ms under a smooth envelope, separated by short gaps
// and now and then a pause; three in four voiced (harmonics of a gliding
// pitch shaped by two formants), the rest noise (fricatives). It is band
// limited to 3.4 kHz, as a phone line is.
func speechLike(rate int, d time.Duration, v voice) []int16 {
	rng := rand.New(rand.NewPCG(v.seed, 0x5eec))
	n := samplesFor(rate, d)
	x := make([]float64, n)
	const top = 3400.0
	var phase, prevNoise float64
	for i := 0; i < n; {
		syl := samplesFor(rate, time.Duration(120+rng.IntN(200))*time.Millisecond)
		voiced := rng.Float64() < 0.75
		p0 := v.f0 * (0.85 + 0.3*rng.Float64())
		p1 := v.f0 * (0.85 + 0.3*rng.Float64())
		f1 := 300 + 500*rng.Float64()
		f2 := 900 + 1600*rng.Float64()
		for j := 0; j < syl && i < n; j, i = j+1, i+1 {
			frac := float64(j) / float64(syl)
			env := math.Pow(math.Sin(math.Pi*frac), 0.7)
			var s float64
			if voiced {
				f := p0 + (p1-p0)*frac
				phase += 2 * math.Pi * f / float64(rate)
				for h := 1; float64(h)*f < top; h++ {
					hf := float64(h) * f
					a := 1/(1+sq((hf-f1)/120)) + 0.6/(1+sq((hf-f2)/200)) + 0.03
					s += a * math.Sin(float64(h)*phase)
				}
			} else {
				w := rng.NormFloat64()
				s = 0.8 * (w - 0.6*prevNoise)
				prevNoise = w
			}
			x[i] = env * s
		}
		gap := 30 + rng.IntN(120)
		if rng.Float64() < 0.12 {
			gap = 300 + rng.IntN(300)
		}
		i += samplesFor(rate, time.Duration(gap)*time.Millisecond)
	}
	if rate > 8000 {
		x = lowpass(x, rate, top)
	}
	return toPCM(x, v.level)
}

func sq(x float64) float64 { return x * x }

// lowpass is a windowed-sinc FIR at cutoff Hz.
func lowpass(x []float64, rate int, cutoff float64) []float64 {
	const taps = 63
	h := make([]float64, taps)
	fc := cutoff / float64(rate)
	for k := range h {
		m := float64(k - taps/2)
		sinc := 2 * fc
		if m != 0 {
			sinc = math.Sin(2*math.Pi*fc*m) / (math.Pi * m)
		}
		h[k] = sinc * (0.54 - 0.46*math.Cos(2*math.Pi*float64(k)/(taps-1)))
	}
	y := make([]float64, len(x))
	for i := range y {
		var s float64
		for k, hk := range h {
			if j := i - k + taps/2; j >= 0 && j < len(x) {
				s += hk * x[j]
			}
		}
		y[i] = s
	}
	return y
}

// toPCM scales x to an RMS of dBFS and rounds it to PCM16.
func toPCM(x []float64, dBFS float64) []int16 {
	var e float64
	for _, v := range x {
		e += v * v
	}
	g := 0.0
	if e > 0 {
		g = 32768 * math.Pow(10, dBFS/20) / math.Sqrt(e/float64(len(x)))
	}
	out := make([]int16, len(x))
	for i, v := range x {
		out[i] = sat(v * g)
	}
	return out
}

func sat(v float64) int16 {
	return int16(max(min(math.Round(v), math.MaxInt16), math.MinInt16))
}

// path is an echo path: a bulk delay, a gain, and optionally a little
// room (a short decaying FIR after the direct sound).
type path struct {
	delay  time.Duration
	gainDB float64
	room   bool
	harsh  bool // a harsher room, see roomIR
}

// roomIR is a unit direct path followed by 20 ms of diffuse reflections
// decaying with a time constant of 3 ms, 6 dB weaker than the direct path
// in all (harsh: 8 ms of them, 3 dB stronger than the direct path at
// 16 kHz).
func roomIR(rate int, harsh bool) []float64 {
	rng := rand.New(rand.NewPCG(99, 7))
	if harsh {
		h := make([]float64, samplesFor(rate, 8*time.Millisecond))
		h[0] = 1
		for k := 1; k < len(h); k++ {
			h[k] = 0.35 * rng.NormFloat64() * math.Exp(-float64(k)/float64(samplesFor(rate, 2*time.Millisecond)))
		}
		return h
	}
	tau := float64(samplesFor(rate, 3*time.Millisecond))
	a := math.Sqrt(0.25 / (tau / 2)) // Σ a²·e^(-2k/τ) ≈ a²τ/2 = 1/4
	h := make([]float64, samplesFor(rate, 20*time.Millisecond))
	h[0] = 1
	for k := 1; k < len(h); k++ {
		h[k] = a * rng.NormFloat64() * math.Exp(-float64(k)/tau)
	}
	return h
}

// echo returns far through p: y[i] = g·Σ h[k]·far[i-D-k].
func (p path) echo(far []int16, rate int) []float64 {
	d := samplesFor(rate, p.delay)
	g := math.Pow(10, p.gainDB/20)
	h := []float64{1}
	if p.room || p.harsh {
		h = roomIR(rate, p.harsh)
	}
	y := make([]float64, len(far))
	for i := range y {
		var s float64
		for k, hk := range h {
			if j := i - d - k; j >= 0 {
				s += hk * float64(far[j])
			}
		}
		y[i] = g * s
	}
	return y
}

// noise returns n samples of white noise at dBFS.
func noise(n int, dBFS float64, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0x401e))
	a := 32768 * math.Pow(10, dBFS/20)
	out := make([]float64, n)
	for i := range out {
		out[i] = a * rng.NormFloat64()
	}
	return out
}

// mix sums signals sample by sample into PCM16, to the shortest length.
func mix(parts ...[]float64) []int16 {
	n := len(parts[0])
	for _, p := range parts {
		n = min(n, len(p))
	}
	out := make([]int16, n)
	for i := range out {
		var s float64
		for _, p := range parts {
			s += p[i]
		}
		out[i] = sat(s)
	}
	return out
}

func float(x []int16) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// energy is the sum of squares of x.
func energy(x []int16) float64 {
	var e float64
	for _, v := range x {
		e += float64(v) * float64(v)
	}
	return e
}

// ratioDB is 10·log10(a/b).
func ratioDB(a, b float64) float64 { return 10 * math.Log10(a/b) }

// trace is what run observed.
type trace struct {
	out []int16
	// delay and ok are Delay's answers after each frame.
	delay []time.Duration
	ok    []bool
	// active is FarActive after each frame, echoOnly EchoOnly.
	active, echoOnly []bool
}

// run feeds far and near through c one frame at a time, in step, each far
// frame played (Playback) before the near frame captured while it played
// is processed. far may be nil for no reference.
func run(t testing.TB, c *Canceller, far, near []int16) trace {
	t.Helper()
	f := c.FrameSize()
	var tr trace
	tr.out = make([]int16, len(near)/f*f)
	for i := 0; i+f <= len(near); i += f {
		if far != nil {
			c.Playback(far[i : i+f])
		}
		if err := c.Process(near[i:i+f], tr.out[i:i+f]); err != nil {
			t.Fatal(err)
		}
		d, ok := c.Delay()
		tr.delay = append(tr.delay, d)
		tr.ok = append(tr.ok, ok)
		tr.active = append(tr.active, c.FarActive())
		tr.echoOnly = append(tr.echoOnly, c.EchoOnly())
	}
	return tr
}
