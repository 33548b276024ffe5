package media

import (
	"fmt"
	"math"
)

// Filter design parameters. The kernel spans resampleHalfWidth sample
// periods of the lower of the two rates each side of its centre (32 taps
// when upsampling), so downsampling by k costs k times the taps: that is
// what it takes for the stop band to start at the output Nyquist frequency
// rather than k times higher.
const (
	resampleHalfWidth = 16
	// resampleCutoff puts the -6 dB point at this fraction of the lower
	// Nyquist frequency. With 32 taps the transition band is wide; this keeps
	// the telephone band (to 3.4 kHz at 8 kHz) within 0.5 dB while images
	// and aliases of tones near Nyquist stay around 40 dB down.
	resampleCutoff = 0.94
	// resampleBeta is the Kaiser window shape: about 70 dB side lobes.
	resampleBeta = 7.0

	// Bounds on the precomputed bank. Exact polyphase needs one phase per
	// output position in the reduced ratio; past maxResamplePhases the
	// fractional position is quantised to that many phases (timing error
	// below 1/1024 of an input sample), so odd rate pairs cost bounded memory.
	maxResamplePhases = 1024
	maxResampleTaps   = 1024
	maxResampleRate   = 1 << 22
)

// Resampler converts a stream of PCM16 samples from one sample rate to
// another with a polyphase windowed-sinc filter. It keeps the filter history
// between calls, so a signal processed in pieces comes out the same as if it
// had been processed whole.
//
// The output is delayed by the filter's group delay (1 ms upsampling from
// 16 kHz, about 2 ms from 48 kHz down to 8 kHz) and the total output count
// tracks the input exactly: after n input samples in any number of calls,
// ceil(n*to/from) samples have come out.
//
// A Resampler is not safe for concurrent use.
type Resampler struct {
	from, to int
	l, m     int // to/from reduced: each output advances the input by m/l

	phases int       // filter phases: l, or maxResamplePhases if l is larger
	taps   int       // taps per phase
	bank   []float32 // phases*taps, phase-major, taps in input order

	// buf holds the last taps-1 input samples followed by the current
	// input, so the filter window never has to straddle two slices. It is
	// float32 so each sample is converted once, not once per tap.
	buf []float32
	// next is the position of the next output relative to the start of the
	// current input: next + frac/l input samples.
	next, frac int
}

// NewResampler returns a Resampler from rate from to rate to (Hz). Any
// positive rates up to 4 MHz are accepted; from == to copies.
func NewResampler(from, to int) (*Resampler, error) {
	if from <= 0 || to <= 0 || from > maxResampleRate || to > maxResampleRate {
		return nil, fmt.Errorf("media: NewResampler: invalid rates %d -> %d Hz", from, to)
	}
	r := &Resampler{from: from, to: to}
	if from == to {
		return r, nil
	}
	g := gcd(from, to)
	r.l, r.m = to/g, from/g
	r.phases = min(r.l, maxResamplePhases)

	// Work in units of input samples: the cutoff as a fraction of the input
	// rate, and the kernel half-width needed for the wanted number of lobes.
	ratio := min(1, float64(to)/float64(from))
	fc := 0.5 * ratio * resampleCutoff
	half := min(int(math.Ceil(resampleHalfWidth/ratio)), maxResampleTaps/2)
	r.taps = 2 * half
	r.bank = make([]float32, r.phases*r.taps)

	// The output at input time i+f (0 <= f < 1) is the weighted sum of
	// x[i-taps+1 .. i]: centring the kernel half samples back makes the
	// filter causal, at the price of a constant delay of half samples.
	i0 := besselI0(resampleBeta)
	h := make([]float64, r.taps)
	for p := 0; p < r.phases; p++ {
		f := float64(p) / float64(r.phases)
		coef := r.bank[p*r.taps : (p+1)*r.taps]
		sum := 0.0
		for k := range h {
			t := f + float64(r.taps-1-k) - float64(half) // kernel time of x[i-taps+1+k]
			h[k] = 2 * fc * sinc(2*fc*t) * kaiser(t/float64(half), resampleBeta, i0)
			sum += h[k]
		}
		// Unity gain at DC in every phase; otherwise phase-dependent gain
		// ripple turns a constant into a tone at the phase rate.
		for k := range h {
			coef[k] = float32(h[k] / sum)
		}
	}
	r.Reset()
	return r, nil
}

// Reset clears the filter history, as if the Resampler were new.
func (r *Resampler) Reset() {
	if r.from == r.to {
		return
	}
	r.buf = r.buf[:0]
	for range r.taps - 1 {
		r.buf = append(r.buf, 0)
	}
	r.next, r.frac = 0, 0
}

// OutputLen returns an upper bound on the samples Process produces for n
// input samples, whatever came before: use it to size dst.
func (r *Resampler) OutputLen(n int) int {
	if n <= 0 {
		return 0
	}
	if r.from == r.to {
		return n
	}
	return int((int64(n)*int64(r.l) + int64(r.m) - 1) / int64(r.m))
}

// Process appends the resampled output for src to dst and returns the
// extended slice. With enough capacity in dst (see OutputLen) it does not
// allocate: out = r.Process(out[:0], in).
func (r *Resampler) Process(dst, src []int16) []int16 {
	if r.from == r.to {
		return append(dst, src...)
	}
	if len(src) == 0 {
		return dst
	}
	// buf grows to the largest src seen and then stays put.
	for _, v := range src {
		r.buf = append(r.buf, float32(v))
	}

	stepInt, stepFrac := r.m/r.l, r.m%r.l
	taps, n := r.taps, len(src)
	next, frac := r.next, r.frac
	for next < n {
		p := frac
		if r.phases != r.l {
			p = int(int64(frac) * int64(r.phases) / int64(r.l))
		}
		dst = append(dst, clamp16(dot(r.bank[p*taps:(p+1)*taps], r.buf[next:next+taps])))

		next += stepInt
		frac += stepFrac
		if frac >= r.l {
			frac -= r.l
			next++
		}
	}
	r.next, r.frac = next-n, frac

	// Keep the history for the next call.
	keep := copy(r.buf, r.buf[len(r.buf)-(taps-1):])
	r.buf = r.buf[:keep]
	return dst
}

// dot returns the inner product of coef and x, which must be as long.
func dot(coef, x []float32) float32 {
	x = x[:len(coef)]
	// Four accumulators: a single one would make every multiply-add wait
	// for the previous addition to finish.
	var a0, a1, a2, a3 float32
	k := 0
	for ; k+4 <= len(coef); k += 4 {
		c, v := coef[k:k+4:k+4], x[k:k+4:k+4]
		a0 += c[0] * v[0]
		a1 += c[1] * v[1]
		a2 += c[2] * v[2]
		a3 += c[3] * v[3]
	}
	for ; k < len(coef); k++ {
		a0 += coef[k] * x[k]
	}
	return (a0 + a1) + (a2 + a3)
}

func clamp16(v float32) int16 {
	// Round half away from zero, then saturate: overshoot (Gibbs) on a
	// full-scale square wave must not wrap around.
	if v >= 0 {
		v += 0.5
	} else {
		v -= 0.5
	}
	switch {
	case v >= math.MaxInt16:
		return math.MaxInt16
	case v <= math.MinInt16:
		return math.MinInt16
	}
	return int16(v)
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	x *= math.Pi
	return math.Sin(x) / x
}

// kaiser evaluates the Kaiser window at x in [-1, 1]; i0 is besselI0(beta).
func kaiser(x, beta, i0 float64) float64 {
	if x < -1 || x > 1 {
		return 0
	}
	return besselI0(beta*math.Sqrt(1-x*x)) / i0
}

// besselI0 is the modified Bessel function of the first kind, order 0, by
// its power series (converges fast for the arguments a window needs).
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	q := x * x / 4
	for k := 1; k < 200; k++ {
		term *= q / float64(k*k)
		sum += term
		if term < sum*1e-17 {
			break
		}
	}
	return sum
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
