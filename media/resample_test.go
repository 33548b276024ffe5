package media

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// sine returns n samples of a sine of freq Hz and peak amp at rate.
func sine(rate int, freq, amp float64, n int) []int16 {
	s := make([]int16, n)
	for i := range s {
		s[i] = int16(math.Round(amp * math.Sin(2*math.Pi*freq*float64(i)/float64(rate))))
	}
	return s
}

// toneFit least-squares fits a sinusoid of freq Hz to x (by correlation,
// exact for whole-ish numbers of cycles) and returns its peak amplitude and
// the RMS of what the fit leaves over: noise, distortion, aliases and
// anything at another frequency.
func toneFit(x []int16, rate int, freq float64) (amp, residual float64) {
	var s, c float64
	for i, v := range x {
		w := 2 * math.Pi * freq * float64(i) / float64(rate)
		s += float64(v) * math.Sin(w)
		c += float64(v) * math.Cos(w)
	}
	n := float64(len(x))
	a, b := 2*s/n, 2*c/n
	var r float64
	for i, v := range x {
		w := 2 * math.Pi * freq * float64(i) / float64(rate)
		d := float64(v) - a*math.Sin(w) - b*math.Cos(w)
		r += d * d
	}
	return math.Hypot(a, b), math.Sqrt(r / n)
}

func rms(x []int16) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s / float64(len(x)))
}

func dB(ratio float64) float64 { return 20 * math.Log10(ratio) }

// settled drops the filter's start-up transient (and a little of the end,
// so the analysis window is not an exact multiple of anything).
func settled(x []int16) []int16 { return x[len(x)/8 : len(x)-len(x)/16] }

func mustResampler(t testing.TB, from, to int) *Resampler {
	t.Helper()
	r, err := NewResampler(from, to)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkTone asserts that x is a tone of freq Hz and peak amp within 1 dB,
// with everything else at least 40 dB below it.
func checkTone(t *testing.T, x []int16, rate int, freq, amp float64) {
	t.Helper()
	got, residual := toneFit(settled(x), rate, freq)
	if d := dB(got / amp); math.Abs(d) > 1 {
		t.Errorf("%v Hz tone at %d Hz: amplitude %.0f, want %.0f (%.2f dB off)", freq, rate, got, amp, d)
	}
	if snr := dB(got / (residual * math.Sqrt2)); snr < 40 {
		t.Errorf("%v Hz tone at %d Hz: only %.1f dB above everything else", freq, rate, snr)
	}
}

func TestResampleTone(t *testing.T) {
	const amp = 10000.0
	for _, tc := range []struct{ from, to int }{
		{Rate16k, Rate24k},
		{Rate48k, Rate16k},
		{Rate8k, Rate16k},
		{Rate24k, Rate48k},
		{22050, Rate16k},
		{44100, Rate48k},
		{Rate16k, 44100},
		{8001, Rate16k}, // reduced ratio too large for exact phases
	} {
		in := sine(tc.from, 1000, amp, tc.from/2)
		out := mustResampler(t, tc.from, tc.to).Process(nil, in)
		checkTone(t, out, tc.to, 1000, amp)
	}
}

func TestResampleRoundTrip(t *testing.T) {
	const amp = 10000.0
	in := sine(Rate8k, 1000, amp, Rate8k/2)
	up := mustResampler(t, Rate8k, Rate48k).Process(nil, in)
	checkTone(t, up, Rate48k, 1000, amp)
	down := mustResampler(t, Rate48k, Rate8k).Process(nil, up)
	checkTone(t, down, Rate8k, 1000, amp)
}

func TestResampleAntiAlias(t *testing.T) {
	// 6 kHz is above the 4 kHz Nyquist frequency at 8 kHz: without the
	// low-pass it would fold down to 2 kHz at nearly full level.
	const amp = 20000.0
	in := sine(Rate48k, 6000, amp, Rate48k/2)
	out := mustResampler(t, Rate48k, Rate8k).Process(nil, in)
	if att := dB(amp / math.Sqrt2 / rms(settled(out))); att < 40 {
		t.Errorf("6 kHz tone attenuated by %.1f dB, want >= 40", att)
	}
	// Also the same through 22.05 kHz -> 16 kHz: 9 kHz folds to 7 kHz.
	in = sine(22050, 9000, amp, 22050/2)
	out = mustResampler(t, 22050, Rate16k).Process(nil, in)
	if att := dB(amp / math.Sqrt2 / rms(settled(out))); att < 40 {
		t.Errorf("22.05k->16k: 9 kHz tone attenuated by %.1f dB, want >= 40", att)
	}
}

func TestResampleLength(t *testing.T) {
	for _, tc := range []struct{ from, to int }{
		{Rate8k, Rate48k}, {Rate48k, Rate8k}, {Rate16k, Rate24k}, {Rate24k, Rate16k},
		{22050, Rate16k}, {Rate16k, 22050}, {44100, Rate8k}, {8001, Rate16k}, {Rate16k, Rate16k},
	} {
		r := mustResampler(t, tc.from, tc.to)
		rng := rand.New(rand.NewPCG(1, 2))
		total, out := 0, 0
		for range 200 {
			n := rng.IntN(700)
			got := len(r.Process(nil, make([]int16, n)))
			if bound := r.OutputLen(n); got > bound {
				t.Errorf("%d->%d: %d outputs for %d inputs, OutputLen says at most %d", tc.from, tc.to, got, n, bound)
			}
			total += n
			out += got
			// Exactly ceil(total*to/from) so far: the output never drifts.
			if want := (total*tc.to + tc.from - 1) / tc.from; out != want {
				t.Fatalf("%d->%d: %d outputs after %d inputs, want %d", tc.from, tc.to, out, total, want)
			}
		}
	}
}

func TestResampleFrameSizes(t *testing.T) {
	// The common case: every 20 ms frame maps to exactly one 20 ms frame.
	for _, tc := range []struct{ from, to int }{{Rate16k, Rate48k}, {Rate48k, Rate8k}, {22050, Rate16k}} {
		r := mustResampler(t, tc.from, tc.to)
		in := make([]int16, SamplesFor(tc.from, DefaultFrameDuration))
		want := SamplesFor(tc.to, DefaultFrameDuration)
		for i := range 10 {
			if got := len(r.Process(nil, in)); got != want {
				t.Errorf("%d->%d frame %d: %d samples, want %d", tc.from, tc.to, i, got, want)
			}
		}
	}
}

func TestResampleSplitCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	in := make([]int16, 5000)
	for i := range in {
		in[i] = int16(rng.IntN(40000) - 20000)
	}
	for _, tc := range []struct{ from, to int }{
		{Rate8k, Rate48k}, {Rate48k, Rate8k}, {Rate16k, Rate24k}, {22050, Rate16k}, {8001, Rate16k},
	} {
		whole := mustResampler(t, tc.from, tc.to).Process(nil, in)

		r := mustResampler(t, tc.from, tc.to)
		var split []int16
		for rest := in; len(rest) > 0; {
			n := min(rng.IntN(400), len(rest)) // includes empty and 1-sample calls
			split = r.Process(split, rest[:n])
			rest = rest[n:]
		}
		if len(split) != len(whole) {
			t.Fatalf("%d->%d: split calls gave %d samples, one call %d", tc.from, tc.to, len(split), len(whole))
		}
		for i := range whole {
			if d := int(split[i]) - int(whole[i]); d < -1 || d > 1 {
				t.Fatalf("%d->%d: sample %d is %d split, %d whole", tc.from, tc.to, i, split[i], whole[i])
			}
		}
	}
}

func TestResampleReset(t *testing.T) {
	in := sine(Rate16k, 440, 8000, 800)
	r := mustResampler(t, Rate16k, Rate48k)
	first := r.Process(nil, in)
	r.Process(nil, sine(Rate16k, 3000, 30000, 123))
	r.Reset()
	if again := r.Process(nil, in); !slices.Equal(again, first) {
		t.Error("output after Reset differs from a fresh Resampler's")
	}
}

func TestResampleDCAndClipping(t *testing.T) {
	// Unity gain at DC in every phase, and full scale saturates instead of
	// wrapping around.
	for _, v := range []int16{math.MaxInt16, math.MinInt16, 1000} {
		for _, tc := range []struct{ from, to int }{{Rate16k, Rate48k}, {Rate48k, Rate8k}, {22050, Rate16k}} {
			in := make([]int16, tc.from/10)
			for i := range in {
				in[i] = v
			}
			out := mustResampler(t, tc.from, tc.to).Process(nil, in)
			for i, got := range settled(out) {
				if d := int(got) - int(v); d < -1 || d > 1 {
					t.Fatalf("%d->%d constant %d: output %d at %d", tc.from, tc.to, v, got, i)
				}
			}
		}
	}
	// A full-scale square wave overshoots next to its edges: the overshoot
	// must saturate, never wrap around to the other sign.
	const period = 80
	in := make([]int16, 1600)
	for i := range in {
		in[i] = math.MaxInt16
		if i%period >= period/2 {
			in[i] = math.MinInt16
		}
	}
	out := mustResampler(t, Rate16k, Rate48k).Process(nil, in)
	clipped := 0
	for o, v := range out {
		// The input position this output is centred on: o/3 input samples,
		// less the filter's delay.
		x := float64(o)/3 - resampleHalfWidth
		if x < 1 {
			continue
		}
		ph := math.Mod(x, period)
		edge := min(ph, math.Abs(ph-period/2), period-ph)
		if edge < 0.5 {
			continue // on the edge itself the sign is legitimately either
		}
		if high := ph < period/2; high != (v > 0) {
			t.Fatalf("square wave: output %d = %d at input position %.2f", o, v, x)
		}
		if v == math.MaxInt16 || v == math.MinInt16 {
			clipped++
		}
	}
	if clipped == 0 {
		t.Error("square wave: no sample saturated; the test does not exercise clamping")
	}
}

func TestResampleSameRate(t *testing.T) {
	r := mustResampler(t, Rate16k, Rate16k)
	in := []int16{1, 2, 3}
	out := r.Process([]int16{9}, in)
	if want := []int16{9, 1, 2, 3}; !slices.Equal(out, want) {
		t.Errorf("got %v, want %v", out, want)
	}
	if r.OutputLen(320) != 320 {
		t.Errorf("OutputLen(320) = %d", r.OutputLen(320))
	}
}

func TestResampleInvalidRates(t *testing.T) {
	for _, tc := range []struct{ from, to int }{{0, Rate16k}, {Rate16k, 0}, {-8000, Rate16k}, {Rate16k, -1}, {1 << 30, Rate16k}} {
		if r, err := NewResampler(tc.from, tc.to); err == nil || r != nil {
			t.Errorf("NewResampler(%d, %d) = %v, %v; want an error", tc.from, tc.to, r, err)
		}
	}
}

func TestResampleNoAllocs(t *testing.T) {
	r := mustResampler(t, Rate16k, Rate48k)
	in := sine(Rate16k, 1000, 8000, 320)
	out := make([]int16, 0, r.OutputLen(len(in)))
	out = r.Process(out[:0], in) // first call may size the history buffer
	if n := testing.AllocsPerRun(100, func() { out = r.Process(out[:0], in) }); n != 0 {
		t.Errorf("Process allocates %v times per 20 ms frame, want 0", n)
	}
}

func BenchmarkResample16kTo48k(b *testing.B) {
	r := mustResampler(b, Rate16k, Rate48k)
	in := sine(Rate16k, 1000, 8000, SamplesFor(Rate16k, DefaultFrameDuration))
	out := make([]int16, 0, r.OutputLen(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		out = r.Process(out[:0], in)
	}
}

func BenchmarkResample48kTo8k(b *testing.B) {
	r := mustResampler(b, Rate48k, Rate8k)
	in := sine(Rate48k, 1000, 8000, SamplesFor(Rate48k, DefaultFrameDuration))
	out := make([]int16, 0, r.OutputLen(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		out = r.Process(out[:0], in)
	}
}
