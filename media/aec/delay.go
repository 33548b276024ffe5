package aec

import (
	"math"
	"time"
)

// Delay estimation. Both ends are decimated to decRate by averaging blocks
// of samples. Every estEvery of near audio the last estWindow of it is
// cross-correlated with the far end at every lag up to the maximum delay
// (by FFT). The sums are added to those of the searches before, decayed by
// accDecay, and normalised into a correlation coefficient per lag. The
// best lag, interpolated to a fraction of a block, is accepted when its
// coefficient is at least nccThreshold and the search before found the
// same lag (within agreeMs). Once a lag is accepted, a peak elsewhere must
// beat the accepted lag's coefficient by switchMargin to count at all.
const (
	decRate   = 2000 // Hz
	estWindow = 500 * time.Millisecond
	estEvery  = 250 * time.Millisecond
	// nccThreshold is the lowest peak of the normalised cross-correlation
	// that counts as finding the echo. TestNoLockWithoutEcho checks that
	// independent speech on both ends stays below it.
	nccThreshold = 0.4
	// agreeMs is how close, in ms, two consecutive estimates must be.
	agreeMs = 1
	// accDecay is the weight of the previous searches' correlation sums:
	// the curve then covers about a second of audio for the cost of half
	// a second, and a voiced stretch whose peak one pitch period away
	// from the true lag beats it over half a second rarely does over a
	// second.
	accDecay = 0.5
	// switchMargin is how much higher than the accepted lag's the
	// coefficient at a lag more than sameLagMs away must be to count.
	switchMargin = 0.05
	sameLagMs    = 2
	// realignMs is the least distance, in ms, between the echo onset at
	// an accepted delay and the start of the filter (see accept).
	realignMs = 2
	// Searches are skipped, as carrying no information, when the far
	// history or the near window is quieter than these levels (dBFS of
	// the decimated signal).
	farGateDBFS  = -50.0
	nearGateDBFS = -70.0
)

var (
	farGate  = math.Pow(10, farGateDBFS/10)  // mean square, full scale 1
	nearGate = math.Pow(10, nearGateDBFS/10) // mean square, full scale 1
)

// estimator holds the near end's decimated history and the buffers of the
// search, all allocated by init.
type estimator struct {
	dec    int   // samples per block
	fb     int64 // blocks per frame
	maxLag int   // blocks
	win    int   // blocks in the correlation window
	every  int64 // blocks between searches
	a0     int64 // anchor / dec: far block aligned with near block 0
	frac   int64 // anchor % dec, in samples

	near     []float32 // ring of decimated near audio, scaled to ±1
	nearMask int64
	nearN    int64 // blocks written
	nextAt   int64 // end() at which to search next

	nearW []float32 // the window searched
	farW  []float32 // far blocks [farStart(), +win+maxLag)
	cum   []float64 // prefix sums of farW²
	ncc   []float64 // |normalised correlation| by window offset
	corr  []float64 // this search's correlation by window offset
	fft   *fft
	buf   []complex128

	// Correlation sums accumulated over searches: numerator and far
	// energy by window offset, near energy.
	accC []float64
	accF []float64
	accN float64

	cand     int64 // last estimate, samples
	candOK   bool
	locked   bool
	lockedAt int64 // last accepted estimate, samples
}

func (e *estimator) init(dec, frameBlocks, maxLag int) {
	e.dec = dec
	e.fb = int64(frameBlocks)
	e.maxLag = maxLag
	e.win = int(int64(decRate) * int64(estWindow) / int64(time.Second))
	e.every = int64(decRate) * int64(estEvery) / int64(time.Second)
	n := nextPow2(int64(e.win + 2*frameBlocks))
	e.near = make([]float32, n)
	e.nearMask = n - 1
	e.nextAt = int64(e.win) // the first search once there is a window
	e.nearW = make([]float32, e.win)
	e.farW = make([]float32, e.win+maxLag)
	e.cum = make([]float64, e.win+maxLag+1)
	e.ncc = make([]float64, maxLag+1)
	e.corr = make([]float64, maxLag+1)
	e.fft = newFFT(int(nextPow2(int64(e.win + maxLag))))
	e.buf = make([]complex128, e.fft.n)
	e.accC = make([]float64, maxLag+1)
	e.accF = make([]float64, maxLag+1)
}

// anchor records the far sample aligned with near sample 0.
func (e *estimator) anchor(w int64) {
	e.a0 = w / int64(e.dec)
	e.frac = w % int64(e.dec)
}

// addNear decimates one frame of near audio and reports whether a search
// is due; if so the caller fills farW from farStart and calls estimate.
func (e *estimator) addNear(x []int16) bool {
	inv := float32(1.0/32768) / float32(e.dec)
	for i := 0; i+e.dec <= len(x); i += e.dec {
		var s float32
		for _, v := range x[i : i+e.dec] {
			s += float32(v)
		}
		e.near[e.nearN&e.nearMask] = s * inv
		e.nearN++
	}
	if e.end() < e.nextAt {
		return false
	}
	e.nextAt += e.every
	return true
}

// end is the near block after the window searched. The window stops short
// of the frame just added: the far audio aligned with that frame at zero
// delay is, with Playback and Process in step, not yet written, and
// reading it as silence would make the result depend on timing.
func (e *estimator) end() int64 { return e.nearN - e.fb }

// farStart is the first far block the search needs: the one aligned with
// the start of the near window at the longest lag.
func (e *estimator) farStart() int64 {
	return e.end() - int64(e.win) + e.a0 - int64(e.maxLag)
}

// gainAt is the echo's gain, in dB, at delay d in samples: the
// least-squares fit of the near end to the far end at that lag, over the
// correlation sums accumulated (the caller's speech, uncorrelated with the
// far end, averages out of it).
func (e *estimator) gainAt(d int64) (float64, bool) {
	s := e.maxLag - int(math.Round(float64(d-e.frac)/float64(e.dec)))
	if s < 0 || s > e.maxLag || e.accF[s] <= 0 || e.accC[s] == 0 {
		return 0, false
	}
	return 20 * math.Log10(math.Abs(e.accC[s])/e.accF[s]), true
}

// estimate searches the current window, farW having been filled, and
// returns a delay in samples once two consecutive searches agree on it.
func (e *estimator) estimate() (int64, bool) {
	nw, m := e.win, e.maxLag
	start := e.end() - int64(nw)
	for i := range e.nearW {
		e.nearW[i] = e.near[(start+int64(i))&e.nearMask]
	}
	en := 0.0
	for _, v := range e.nearW {
		en += float64(v) * float64(v)
	}
	e.cum[0] = 0
	for i, v := range e.farW {
		e.cum[i+1] = e.cum[i] + float64(v)*float64(v)
	}
	if en < float64(nw)*nearGate || e.cum[len(e.farW)] < float64(len(e.farW))*farGate {
		// Nothing to find: neither confirms nor breaks the last estimate.
		return 0, false
	}

	// farW[s : s+nw] is the far end at lag m-s blocks.
	e.fft.xcorr(e.corr, e.nearW, e.farW, e.buf)
	e.accN = accDecay*e.accN + en
	floor := float64(nw) * 1e-10
	best, bestS := 0.0, -1
	for s := 0; s <= m; s++ {
		ef := e.cum[s+nw] - e.cum[s]
		e.accC[s] = accDecay*e.accC[s] + e.corr[s]
		e.accF[s] = accDecay*e.accF[s] + ef
		r := 0.0
		if e.accF[s] > floor {
			r = math.Abs(e.accC[s]) / math.Sqrt(e.accN*e.accF[s])
		}
		e.ncc[s] = r
		if r > best {
			best, bestS = r, s
		}
	}
	if best < nccThreshold {
		e.candOK = false
		return 0, false
	}
	// Parabolic interpolation of the peak to a fraction of a block.
	delta := 0.0
	if bestS > 0 && bestS < m {
		y0, y1, y2 := e.ncc[bestS-1], e.ncc[bestS], e.ncc[bestS+1]
		if den := y0 - 2*y1 + y2; den < 0 {
			delta = 0.5 * (y0 - y2) / den
		}
	}
	lag := float64(m) - (float64(bestS) + delta)
	d := int64(math.Round(lag*float64(e.dec))) + e.frac
	rate := int64(e.dec * decRate)

	// Once locked, a peak elsewhere must beat the locked lag's by
	// switchMargin to be a candidate at all.
	if e.locked && abs64(d-e.lockedAt) > rate*sameLagMs/1000 {
		s := m - int(math.Round(float64(e.lockedAt-e.frac)/float64(e.dec)))
		cur := 0.0
		for k := max(s-1, 0); k <= min(s+1, m); k++ {
			cur = max(cur, e.ncc[k])
		}
		if best < cur+switchMargin {
			e.cand, e.candOK = e.lockedAt, true
			return 0, false
		}
	}

	prev, had := e.cand, e.candOK
	e.cand, e.candOK = d, true
	if had && abs64(d-prev) <= rate*agreeMs/1000 {
		e.locked, e.lockedAt = true, d
		return d, true
	}
	return 0, false
}
