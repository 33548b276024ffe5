package aec

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestXcorrMatchesDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, tc := range []struct{ na, nout, n int }{{10, 7, 16}, {1000, 1001, 2048}, {1000, 2001, 4096}, {3, 1, 4}} {
		a := make([]float32, tc.na)
		b := make([]float32, tc.na+tc.nout-1)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		for i := range b {
			b[i] = float32(rng.NormFloat64())
		}
		f := newFFT(tc.n)
		got := make([]float64, tc.nout)
		f.xcorr(got, a, b, make([]complex128, tc.n))
		for s := range got {
			var want float64
			for i := range a {
				want += float64(a[i]) * float64(b[i+s])
			}
			if math.Abs(got[s]-want) > 1e-9*float64(tc.na) {
				t.Fatalf("n=%d: out[%d] = %v, want %v", tc.n, s, got[s], want)
			}
		}
	}
}
