package aec

import (
	"math"
	"math/bits"
)

// fft is an in-place iterative radix-2 complex FFT of one power-of-two
// size, with its tables computed once.
type fft struct {
	n   int
	rev []int32      // bit-reversal permutation
	tw  []complex128 // e^(-2πik/n), k < n/2
	twi []complex128 // their conjugates, for the inverse
}

func newFFT(n int) *fft {
	if n < 2 || n&(n-1) != 0 {
		panic("aec: FFT size must be a power of two")
	}
	f := &fft{n: n, rev: make([]int32, n), tw: make([]complex128, n/2), twi: make([]complex128, n/2)}
	shift := bits.UintSize - bits.TrailingZeros(uint(n))
	for i := range f.rev {
		f.rev[i] = int32(bits.Reverse(uint(i)) >> shift)
	}
	for k := range f.tw {
		s, c := math.Sincos(-2 * math.Pi * float64(k) / float64(n))
		f.tw[k] = complex(c, s)
		f.twi[k] = complex(c, -s)
	}
	return f
}

// transform computes the forward DFT of x in place, or the inverse
// without the 1/n scaling when inverse is set.
func (f *fft) transform(x []complex128, inverse bool) {
	x = x[:f.n]
	for i, j := range f.rev {
		if int(j) > i {
			x[i], x[j] = x[j], x[i]
		}
	}
	tw := f.tw
	if inverse {
		tw = f.twi
	}
	// The first stage's twiddle is 1.
	for i := 0; i+1 < f.n; i += 2 {
		a, b := x[i], x[i+1]
		x[i], x[i+1] = a+b, a-b
	}
	for size := 4; size <= f.n; size <<= 1 {
		half, step := size/2, f.n/size
		for start := 0; start < f.n; start += size {
			a := x[start : start+half : start+half]
			b := x[start+half : start+size : start+size]
			for k := range a {
				w := tw[k*step]
				wr, wi := real(w), imag(w)
				br, bi := real(b[k]), imag(b[k])
				tr, ti := wr*br-wi*bi, wr*bi+wi*br
				ar, ai := real(a[k]), imag(a[k])
				a[k] = complex(ar+tr, ai+ti)
				b[k] = complex(ar-tr, ai-ti)
			}
		}
	}
}

// xcorr sets out[s] = Σ_i a[i]·b[i+s] for s < len(out), where a and b are
// real, using buf (length n) as scratch. len(b) must be at most n and
// len(a)+len(out)-1 at most len(b).
func (f *fft) xcorr(out []float64, a, b []float32, buf []complex128) {
	n := f.n
	buf = buf[:n]
	// Both real inputs in one complex transform: z = a + i·b.
	for i := range buf {
		var re, im float64
		if i < len(a) {
			re = float64(a[i])
		}
		if i < len(b) {
			im = float64(b[i])
		}
		buf[i] = complex(re, im)
	}
	f.transform(buf, false)
	// A[k] = (Z[k] + conj Z[n-k])/2, B[k] = (Z[k] - conj Z[n-k])/2i, and
	// the correlation's spectrum is conj(A[k])·B[k]. Pairs k and n-k are
	// computed together since each needs the other's Z.
	for k := 0; k <= n/2; k++ {
		j := (n - k) & (n - 1)
		zk, zj := buf[k], buf[j]
		cj := complex(real(zj), -imag(zj))
		ck := complex(real(zk), -imag(zk))
		// x/2i = -i·x/2; the 1/4 of both halves is left for the end.
		ak, dk := zk+cj, zk-cj
		aj, dj := zj+ck, zj-ck
		bk := complex(imag(dk), -real(dk))
		bj := complex(imag(dj), -real(dj))
		buf[k] = complex(real(ak), -imag(ak)) * bk
		buf[j] = complex(real(aj), -imag(aj)) * bj
	}
	f.transform(buf, true)
	inv := 1 / (4 * float64(n))
	for s := range out {
		out[s] = real(buf[s]) * inv
	}
}
