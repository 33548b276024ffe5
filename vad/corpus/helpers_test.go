package corpus

import (
	"context"
	"fmt"
	"math"
	"math/cmplx"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/need"
)

// testCache is shared by the tests of one run, so that each utterance is
// synthesised once per run, and removed afterwards.
var testCache string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "holdline-corpus-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testCache = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needTools skips the test when the programs it needs are missing
// (espeak-ng and sox to synthesise, pocketsphinx to transcribe), or fails
// it when HOLDLINE_REQUIRE_MODELS=1.
func needTools(t *testing.T, synth, pocketsphinx bool) {
	t.Helper()
	var err error
	if synth {
		_, err = findSynthTools(context.Background())
	}
	if err == nil && pocketsphinx {
		_, err = findPocketsphinx()
	}
	if err != nil {
		need.Missing(t, err)
	}
}

// smallOptions is a corpus small enough for tests under -race: one sentence
// per echo condition (32 echo clips, and 2 on a line without echo), 8
// barge-ins (2 on a line without echo), 5 backchannels.
func smallOptions(rate int) Options {
	return Options{Rate: rate, Seed: 7, CacheDir: testCache, EchoSentences: 1, BargeIns: 8, Backchannels: 5}
}

type generated struct {
	once  sync.Once
	clips []Clip
	err   error
}

var (
	corporaMu sync.Mutex
	corpora   = map[Options]*generated{}
)

// corpusFor generates the corpus for o once per test run.
func corpusFor(t *testing.T, o Options) []Clip {
	t.Helper()
	needTools(t, true, false)
	corporaMu.Lock()
	g, ok := corpora[o]
	if !ok {
		g = &generated{}
		corpora[o] = g
	}
	corporaMu.Unlock()
	g.once.Do(func() { g.clips, g.err = Generate(context.Background(), o) })
	if g.err != nil {
		t.Fatal(g.err)
	}
	return g.clips
}

// fft transforms x in place (radix 2; len(x) a power of two); inverse
// without the 1/n scaling.
func fft(x []complex128, inverse bool) {
	n := len(x)
	for i, j := 1, 0; i < n; i++ {
		bit := n >> 1
		for ; j&bit != 0; bit >>= 1 {
			j ^= bit
		}
		j ^= bit
		if i < j {
			x[i], x[j] = x[j], x[i]
		}
	}
	sign := -1.0
	if inverse {
		sign = 1
	}
	for size := 2; size <= n; size <<= 1 {
		w := cmplx.Exp(complex(0, sign*2*math.Pi/float64(size)))
		for start := 0; start < n; start += size {
			wk := complex(1, 0)
			for k := 0; k < size/2; k++ {
				a, b := x[start+k], x[start+k+size/2]*wk
				x[start+k], x[start+k+size/2] = a+b, a-b
				wk *= w
			}
		}
	}
}

func pow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// xcorr returns c[k] = sum_t a[t] b[t-k] for 0 <= k < maxLag.
func xcorr(a, b []float64, maxLag int) []float64 {
	n := pow2(len(a) + len(b))
	fa, fb := make([]complex128, n), make([]complex128, n)
	for i, v := range a {
		fa[i] = complex(v, 0)
	}
	for i, v := range b {
		fb[i] = complex(v, 0)
	}
	fft(fa, false)
	fft(fb, false)
	for i := range fa {
		fa[i] *= cmplx.Conj(fb[i])
	}
	fft(fa, true)
	out := make([]float64, maxLag)
	for k := range out {
		out[k] = real(fa[k]) / float64(n)
	}
	return out
}

// convolve returns the full convolution of x and h.
func convolve(x, h []float64) []float64 {
	n := pow2(len(x) + len(h))
	fx, fh := make([]complex128, n), make([]complex128, n)
	for i, v := range x {
		fx[i] = complex(v, 0)
	}
	for i, v := range h {
		fh[i] = complex(v, 0)
	}
	fft(fx, false)
	fft(fh, false)
	for i := range fx {
		fx[i] *= fh[i]
	}
	fft(fx, true)
	out := make([]float64, len(x)+len(h)-1)
	for i := range out {
		out[i] = real(fx[i]) / float64(n)
	}
	return out
}

// levinson solves the symmetric Toeplitz system T x = b, T[i][j] = r[|i-j|].
func levinson(r, b []float64) []float64 {
	n := len(b)
	x := make([]float64, n)
	f := make([]float64, n) // forward vector
	f[0] = 1 / r[0]
	x[0] = b[0] / r[0]
	for k := 1; k < n; k++ {
		ef := 0.0
		for i := 0; i < k; i++ {
			ef += r[k-i] * f[i]
		}
		// Backward vector is f reversed (symmetric T).
		den := 1 - ef*ef
		nf := make([]float64, k+1)
		for i := 0; i <= k; i++ {
			var fi, bi float64
			if i < k {
				fi = f[i]
			}
			if i > 0 {
				bi = f[k-i]
			}
			nf[i] = (fi - ef*bi) / den
		}
		copy(f, nf)
		ex := 0.0
		for i := 0; i < k; i++ {
			ex += r[k-i] * x[i]
		}
		// The new backward vector is nf reversed.
		for i := 0; i <= k; i++ {
			x[i] += (b[k] - ex) * nf[k-i]
		}
	}
	return x
}

// echoResidual models Near as Far through an unknown filter covering lags
// [lo, lo+taps), fitted by least squares (with a little ridge) over Near's
// samples [from, to), and returns Near minus the modelled echo: an oracle
// echo canceller, trained where the test says there is nothing but echo.
func echoResidual(far, near []float64, lo, taps, from, to int) []float64 {
	// Far segment that feeds the fitted outputs: far[t-lo-k] for t in
	// [from, to), k in [0, taps).
	s0 := max(0, from-lo-taps+1)
	seg := far[s0:max(s0, to-lo)]
	r := xcorr(seg, seg, taps)
	r[0] *= 1.001
	r[0] += 1e-3
	// p[k] = sum_t near[t] far[t-lo-k] over the fit region.
	masked := make([]float64, len(near))
	copy(masked[from:to], near[from:to])
	cr := xcorr(masked, far, lo+taps)
	p := cr[lo:]
	h := levinson(r, p)
	full := make([]float64, lo+taps)
	copy(full[lo:], h)
	echo := convolve(far, full)
	res := make([]float64, len(near))
	for i := range res {
		res[i] = near[i] - echo[i]
	}
	return res
}

func power(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	e := 0.0
	for _, v := range x {
		e += v * v
	}
	return e / float64(len(x))
}

func db(p float64) float64 { return 10 * math.Log10(p) }

// medianPitch estimates the median fundamental frequency of the voiced
// frames of x by normalised autocorrelation over 60-400 Hz.
func medianPitch(x []float64, rate int) float64 {
	frame := rate * 40 / 1000
	lagMin, lagMax := rate/400, rate/60
	thr := dbToAmp(-35)
	var f0s []float64
	for s := 0; s+frame+lagMax <= len(x); s += frame / 2 {
		w := x[s : s+frame]
		if math.Sqrt(power(w)) < thr {
			continue
		}
		best, bestLag := 0.0, 0
		for lag := lagMin; lag <= lagMax; lag++ {
			var xy, xx, yy float64
			for i := range w {
				a, b := w[i], x[s+i+lag]
				xy += a * b
				xx += a * a
				yy += b * b
			}
			if c := xy / math.Sqrt(xx*yy+1e-9); c > best {
				best, bestLag = c, lag
			}
		}
		if best > 0.7 {
			f0s = append(f0s, float64(rate)/float64(bestLag))
		}
	}
	if len(f0s) == 0 {
		return 0
	}
	sort.Float64s(f0s)
	return f0s[len(f0s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
