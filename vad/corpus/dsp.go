package corpus

import (
	"math"
	"math/rand/v2"
	"time"
)

// Levels, in dBFS: decibels relative to the RMS of a full-scale square wave
// (32768), so a full-scale sine is at -3 dBFS.
const (
	speechLevelDB = -20.0 // active-speech RMS of every utterance, agent and user
	noiseLevelDB  = -50.0 // RMS of the background noise, when on
	ditherLevelDB = -70.0 // RMS of the dither added to every Near
	// onsetLevelDB is the sample magnitude at which speech counts as
	// started or ended: UserOnset, UserEnd and AgentSpan are measured with
	// it, and utterances are trimmed to it.
	onsetLevelDB = -45.0
	// activeRangeDB: frames more than this far below the loudest frame are
	// pauses and do not count towards the active-speech level.
	activeRangeDB = 35.0
)

const fullScale = 32768.0

// dbToAmp converts dBFS to a linear RMS or magnitude in int16 units.
func dbToAmp(db float64) float64 { return fullScale * math.Pow(10, db/20) }

// onsetThreshold is onsetLevelDB as a sample magnitude (about 184).
var onsetThreshold = dbToAmp(onsetLevelDB)

// activeRMS is the RMS of x over its active frames: 10 ms frames whose RMS
// is within activeRangeDB of the loudest frame. It is a simplified ITU-T
// P.56 active speech level: unlike a plain RMS it does not depend on how
// much silence surrounds or interrupts the speech. Zero for silence.
func activeRMS(x []float64, rate int) float64 {
	n := max(rate/100, 1)
	var frames []float64
	peak := 0.0
	for i := 0; i < len(x); i += n {
		e := 0.0
		end := min(i+n, len(x))
		for _, v := range x[i:end] {
			e += v * v
		}
		e /= float64(end - i)
		frames = append(frames, e)
		peak = max(peak, e)
	}
	if peak == 0 {
		return 0
	}
	floor := peak * math.Pow(10, -activeRangeDB/10)
	sum, cnt := 0.0, 0
	for _, e := range frames {
		if e >= floor {
			sum += e
			cnt++
		}
	}
	return math.Sqrt(sum / float64(cnt))
}

// scale multiplies x by g in place.
func scale(x []float64, g float64) {
	for i := range x {
		x[i] *= g
	}
}

// span returns the index of the first sample whose magnitude reaches thr and
// one past the last; ok is false when none does.
func span(x []float64, thr float64) (start, end int, ok bool) {
	start = -1
	for i, v := range x {
		if math.Abs(v) >= thr {
			start = i
			break
		}
	}
	if start < 0 {
		return 0, 0, false
	}
	for i := len(x) - 1; i >= start; i-- {
		if math.Abs(x[i]) >= thr {
			return start, i + 1, true
		}
	}
	return start, start + 1, true
}

// span16 is span for int16 samples.
func span16(x []int16, thr float64) (start, end int, ok bool) {
	f := make([]float64, len(x))
	for i, v := range x {
		f[i] = float64(v)
	}
	return span(f, thr)
}

// toInt16 rounds x to int16, saturating rather than wrapping.
func toInt16(x []float64) []int16 {
	out := make([]int16, len(x))
	for i, v := range x {
		out[i] = sat16(v)
	}
	return out
}

func sat16(v float64) int16 {
	v = math.Round(v)
	switch {
	case v >= math.MaxInt16:
		return math.MaxInt16
	case v <= math.MinInt16:
		return math.MinInt16
	}
	return int16(v)
}

func toFloat(x []int16) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// samples converts a duration to a sample count at rate, rounding down.
func samples(rate int, d time.Duration) int {
	return int(int64(rate) * int64(d) / int64(time.Second))
}

// dur converts a sample count at rate to a duration.
func dur(rate, n int) time.Duration {
	return time.Duration(int64(n) * int64(time.Second) / int64(rate))
}

// tap is one path of the room response: a gain at a delay (in samples)
// after the direct path.
type tap struct {
	lag  int
	gain float64
}

// roomResponse draws a short, decaying room response: the direct path (gain
// 1, lag 0) and three to five reflections between 10 and 30 ms later, whose
// gains decay with lag and never exceed 0.35, so the direct path dominates
// (it carries at least two thirds of the energy).
func roomResponse(rng *rand.Rand, rate int) []tap {
	taps := []tap{{0, 1}}
	n := 3 + rng.IntN(3)
	for range n {
		ms := 10 + 20*rng.Float64()
		g := (0.15 + 0.2*rng.Float64()) * math.Exp(-(ms-10)/15)
		if rng.IntN(2) == 0 {
			g = -g
		}
		taps = append(taps, tap{lag: max(1, int(ms*float64(rate)/1000)), gain: g})
	}
	return taps
}

// echoOf returns the echo of far as the caller's microphone picks it up, n
// samples long: far through the room response, delayed by delay samples and
// scaled so that the echo's energy is gainDB relative to far's (the
// reflections add energy, so the response is normalised first). Echo that
// would fall past n samples is cut off.
func echoOf(far []int16, taps []tap, delay int, gainDB float64, n int) []float64 {
	h := echoTaps(far, taps, gainDB)
	out := make([]float64, n)
	for lag, g := range h {
		if g == 0 {
			continue
		}
		for i, v := range far {
			j := i + lag + delay
			if j >= n {
				break
			}
			out[j] += g * float64(v)
		}
	}
	return out
}

// echoTaps returns the echo path of echoOf as a dense impulse response
// from the delayed direct path on, with the level normalisation in it.
func echoTaps(far []int16, taps []tap, gainDB float64) []float64 {
	maxLag := 0
	for _, t := range taps {
		maxLag = max(maxLag, t.lag)
	}
	conv := make([]float64, len(far)+maxLag)
	for _, t := range taps {
		for i, v := range far {
			conv[i+t.lag] += t.gain * float64(v)
		}
	}
	var ef, ec float64
	for _, v := range far {
		ef += float64(v) * float64(v)
	}
	for _, v := range conv {
		ec += v * v
	}
	out := make([]float64, maxLag+1)
	if ec == 0 {
		return out
	}
	g := math.Sqrt(ef/ec) * math.Pow(10, gainDB/20)
	for _, t := range taps {
		out[t.lag] += g * t.gain
	}
	return out
}

// noise returns n samples of steady pink-ish background noise (a fan, a
// street) whose level drifts slowly by a couple of dB, at levelDB RMS over
// the whole run. At 8 kHz it is band-limited like the rest of a phone call.
func noise(rng *rand.Rand, n, rate int, levelDB float64) []float64 {
	out := make([]float64, n)
	if n == 0 {
		return out
	}
	// Paul Kellet's economy pink filter: three leaky integrators of white
	// noise give about -3 dB/octave over the speech band.
	var b0, b1, b2 float64
	// Slow level drift: a sine of a few seconds' period plus a random
	// wander (an Ornstein-Uhlenbeck process with a one-second time
	// constant, smoothed over half a second), together within ±2.5 dB.
	// The drift is slow, so its gain is updated once a millisecond.
	period := 3 + 4*rng.Float64()
	phase := 2 * math.Pi * rng.Float64()
	block := max(1, rate/1000)
	dt := float64(block) / float64(rate)
	leak := math.Exp(-dt)
	kick := math.Sqrt(1 - leak*leak)
	alpha := dt / 0.5
	walk, smooth := 0.0, 0.0
	gain := 1.0
	for i := range out {
		if i%block == 0 {
			walk = leak*walk + kick*rng.NormFloat64()
			smooth += alpha * (walk - smooth)
			t := float64(i) / float64(rate)
			db := 1.5*math.Sin(2*math.Pi*t/period+phase) + math.Max(-1, math.Min(1, smooth))
			gain = math.Pow(10, db/20)
		}
		w := rng.NormFloat64()
		b0 = 0.99765*b0 + w*0.0990460
		b1 = 0.96300*b1 + w*0.2965164
		b2 = 0.57000*b2 + w*1.0526913
		out[i] = gain * (b0 + b1 + b2 + w*0.1848)
	}
	if rate <= 8000 {
		out = biquad(out, highpass(300, rate))
		out = biquad(out, lowpass(3400, rate))
	}
	e := 0.0
	for _, v := range out {
		e += v * v
	}
	if e > 0 {
		scale(out, dbToAmp(levelDB)/math.Sqrt(e/float64(n)))
	}
	return out
}

// dither returns n samples of triangular (TPDF) noise at levelDB RMS: the
// sum of two independent uniform variables, one 64-bit draw per sample.
func dither(rng *rand.Rand, n int, levelDB float64) []float64 {
	// Two uniforms on [-1/2, 1/2) sum to variance 1/6.
	a := dbToAmp(levelDB) * math.Sqrt(6) / (1 << 32)
	out := make([]float64, n)
	for i := range out {
		u := rng.Uint64()
		out[i] = a * (float64(u>>32) + float64(u&0xffffffff) - (1 << 32))
	}
	return out
}

// biquadCoef holds normalised biquad coefficients (a0 = 1).
type biquadCoef struct{ b0, b1, b2, a1, a2 float64 }

// highpass and lowpass are second-order Butterworth sections (RBJ cookbook).
func highpass(fc float64, rate int) biquadCoef {
	w := 2 * math.Pi * fc / float64(rate)
	cw, alpha := math.Cos(w), math.Sin(w)/math.Sqrt2
	a0 := 1 + alpha
	return biquadCoef{(1 + cw) / 2 / a0, -(1 + cw) / a0, (1 + cw) / 2 / a0, -2 * cw / a0, (1 - alpha) / a0}
}

func lowpass(fc float64, rate int) biquadCoef {
	w := 2 * math.Pi * fc / float64(rate)
	cw, alpha := math.Cos(w), math.Sin(w)/math.Sqrt2
	a0 := 1 + alpha
	return biquadCoef{(1 - cw) / 2 / a0, (1 - cw) / a0, (1 - cw) / 2 / a0, -2 * cw / a0, (1 - alpha) / a0}
}

func biquad(x []float64, c biquadCoef) []float64 {
	out := make([]float64, len(x))
	var x1, x2, y1, y2 float64
	for i, v := range x {
		y := c.b0*v + c.b1*x1 + c.b2*x2 - c.a1*y1 - c.a2*y2
		x2, x1 = x1, v
		y2, y1 = y1, y
		out[i] = y
	}
	return out
}

// Cough returns a cough at rate: 180 ms of noise, as loud at its start as
// a word, falling away with a 60 ms time constant. It is a short sound over
// the agent that has no words: a barge-in arbiter must never take it for a
// turn, nor leave the line silent long after it.
func Cough(rate int) []int16 {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]int16, samples(rate, 180*time.Millisecond))
	for i := range out {
		env := math.Exp(-float64(i) / float64(rate) / 0.06)
		out[i] = sat16(rng.NormFloat64() * 9000 * env)
	}
	return out
}
