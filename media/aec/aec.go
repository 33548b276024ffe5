package aec

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdline/holdline/media/aec/levelrule"
)

// Defaults and limits of the options.
const (
	// DefaultFrameDuration is the frame length without WithFrameDuration.
	DefaultFrameDuration = 20 * time.Millisecond
	// DefaultTail is the adaptive filter's length without WithTail.
	DefaultTail = 128 * time.Millisecond
	// DefaultMaxDelay is the longest delay searched without WithMaxDelay.
	DefaultMaxDelay = 500 * time.Millisecond
	// MaxMaxDelay is the longest bulk delay WithMaxDelay accepts.
	MaxMaxDelay = time.Second
	// MaxTail is the longest filter WithTail accepts.
	MaxTail = 500 * time.Millisecond
)

// ErrClosed is returned by Process after Close.
var ErrClosed = errors.New("aec: canceller is closed")

const (
	// margin is how much earlier than the estimated bulk delay the
	// reference given to speex starts, so that the echo onset falls
	// inside the filter even if the estimate is a little long.
	margin = 10 * time.Millisecond
	// lead is how far the far end may be written ahead of the near end
	// before the oldest reference it still needs is overwritten.
	lead = 2 * time.Second
	// Residual echo suppression of the preprocessor, in dB: without and
	// with near-end speech (speex's defaults are -40 and -15).
	echoSuppress       = -40
	echoSuppressActive = -15
	// activeDBFS is the level above which the far end counts as audible,
	// measured over activeWindow.
	activeDBFS   = -50.0
	activeWindow = 10 * time.Millisecond
	// A frame is taken for echo alone when it is quieter than the
	// loudest far audio that can echo in it by the level rule
	// (levelrule.Rule). A louder frame is the caller, and is taken for
	// the caller for talkHangover after, so the quiet parts of their
	// words count.
	talkHangover = 200 * time.Millisecond
	// The filter counts as converged once the output has been
	// convergedDB below the input, over far-active frames, for
	// convergedFor: an echo return loss enhancement only a working
	// filter gives.
	convergedDB  = levelrule.ConvergedDB
	convergedFor = 200 * time.Millisecond
)

// Option configures a Canceller; see New.
type Option func(*config)

type config struct {
	frameDur time.Duration
	tail     time.Duration
	maxDelay time.Duration
	suppress bool
}

// WithFrameDuration sets the length of the frames Process takes: 10 or
// 20 ms (the default).
func WithFrameDuration(d time.Duration) Option {
	return func(c *config) { c.frameDur = d }
}

// WithTail sets the length of the adaptive filter, the echo path
// duration the canceller models after the bulk delay is taken out
// (default 128 ms, at least one frame and at most MaxTail). Longer tails
// cancel more reverberant echo but adapt more slowly and cost more.
func WithTail(d time.Duration) Option {
	return func(c *config) { c.tail = d }
}

// WithMaxDelay sets the longest bulk delay the delay estimator searches
// (default 500 ms, at most MaxMaxDelay). The delay is counted as Delay
// reports it, from the playout position at the first Process.
func WithMaxDelay(d time.Duration) Option {
	return func(c *config) { c.maxDelay = d }
}

// WithSuppression turns the residual echo suppressor on or off (default
// on). It is speex's preprocessor with only echo suppression enabled: it
// attenuates what the adaptive filter left, by up to 40 dB while the
// caller is silent and 15 dB while the caller talks over the echo. Noise
// suppression, AGC and VAD stay off. With it on, the output lags the input
// by one frame (the preprocessor's overlap-add).
func WithSuppression(on bool) Option {
	return func(c *config) { c.suppress = on }
}

// Canceller removes the echo of the far end (what was played to the
// caller) from the near end (the caller's microphone stream).
//
// All methods are safe for concurrent use: Playback and Process typically
// run on different goroutines (the playout and the input), and Delay,
// FarActive and Close may be called from any. Frames must reach Process in
// order, so it is normally called from one goroutine.
type Canceller struct {
	rate     int
	frame    int   // samples per frame
	dec      int   // samples per decimated sample
	margin   int64 // samples
	tailLen  int64 // samples
	maxDelay int64 // samples

	sp      speexState
	cleanup runtime.Cleanup

	// The far end, written by Playback, read by Process.
	mu        sync.Mutex
	farClosed bool
	far       []int16 // ring of the last len(far) samples, by absolute index
	farMask   int64
	w         int64 // far samples written so far
	// Far end decimated to decRate: the mean of each block of dec samples
	// (scaled to ±1) and its energy (sum of squares, in sample units).
	// Block b covers far samples [b*dec, (b+1)*dec).
	farDec  []float32
	farPow  []float32
	decMask int64
	farDecN int64 // complete blocks, w/dec
	accSum  float32
	accPow  float32
	accN    int

	// Process side, guarded by procMu.
	procMu  sync.Mutex
	closed  bool
	started bool
	anchor  int64 // w at the first Process
	n       int64 // near samples processed
	delay   int64 // bulk delay in use for the reference, samples
	nearBuf []int16
	ref     []int16
	est     estimator

	// Double-talk, Process side: the input and output powers smoothed
	// over far-active frames, how long the filter has looked converged,
	// and the caller's hangover, in frames.
	nearS, outS   float64
	convergedRun  int
	converged     bool
	talkHold      int
	holdFrames    int
	convergeNeeds int

	// Echo path evidence, Process side (see path.go): near and far
	// powers smoothed over far-active frames, how many there were, and
	// how many are needed before a line can be judged echo-free.
	pathNear, pathFar     float64
	pathFrames, pathNeeds int

	// Read from any goroutine.
	delayEst  atomic.Int64 // accepted estimate in samples, -1 before one
	farActive atomic.Bool
	echoOnly  atomic.Bool
	pathState atomic.Int32  // EchoState
	pathGain  atomic.Uint64 // float64 bits, dB
}

// New returns a Canceller for audio at rate (8000 or 16000 Hz). It loads
// libspeexdsp on first use; if that fails the error wraps ErrUnavailable.
func New(rate int, opts ...Option) (*Canceller, error) {
	cfg := config{
		frameDur: DefaultFrameDuration,
		tail:     DefaultTail,
		maxDelay: DefaultMaxDelay,
		suppress: true,
	}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("aec: nil Option")
		}
		o(&cfg)
	}
	if rate != 8000 && rate != 16000 {
		return nil, fmt.Errorf("aec: unsupported sample rate %d (want 8000 or 16000)", rate)
	}
	if cfg.frameDur != 10*time.Millisecond && cfg.frameDur != 20*time.Millisecond {
		return nil, fmt.Errorf("aec: frame duration %v (want 10ms or 20ms)", cfg.frameDur)
	}
	if cfg.tail < cfg.frameDur || cfg.tail > MaxTail {
		return nil, fmt.Errorf("aec: tail %v (want %v to %v)", cfg.tail, cfg.frameDur, MaxTail)
	}
	if cfg.maxDelay <= 0 || cfg.maxDelay > MaxMaxDelay {
		return nil, fmt.Errorf("aec: max delay %v (want more than 0, at most %v)", cfg.maxDelay, MaxMaxDelay)
	}

	l, err := loadLib()
	if err != nil {
		return nil, err
	}

	samples := func(d time.Duration) int64 { return int64(rate) * int64(d) / int64(time.Second) }
	c := &Canceller{
		rate:     rate,
		frame:    int(samples(cfg.frameDur)),
		dec:      rate / decRate,
		margin:   samples(margin),
		tailLen:  samples(cfg.tail),
		maxDelay: samples(cfg.maxDelay),
	}
	c.sp, err = newSpeex(l, c.frame, int(c.tailLen), rate, cfg.suppress, echoSuppress, echoSuppressActive)
	if err != nil {
		return nil, err
	}
	c.cleanup = runtime.AddCleanup(c, speexState.free, c.sp)

	farLen := nextPow2(c.maxDelay + samples(lead) + int64(2*c.frame))
	c.far = make([]int16, farLen)
	c.farMask = farLen - 1

	// Decimated history: the estimator's window plus the longest lag, or
	// the span FarActive looks at, whichever is longer, plus the lead.
	span := max(estWindow, cfg.tail+cfg.frameDur+margin) + cfg.maxDelay + lead
	decLen := nextPow2(int64(decRate)*int64(span)/int64(time.Second) + 1)
	c.farDec = make([]float32, decLen)
	c.farPow = make([]float32, decLen)
	c.decMask = decLen - 1

	c.nearBuf = make([]int16, c.frame)
	c.ref = make([]int16, c.frame)
	c.holdFrames = int(talkHangover / cfg.frameDur)
	c.convergeNeeds = int(convergedFor / cfg.frameDur)
	c.pathNeeds = int((cfg.maxDelay + noEchoAfter) / cfg.frameDur)
	// Before an estimate is locked, take the shortest delay at which the
	// reference is already written when Process and Playback run in step
	// (one frame plus the margin): echo arriving within the tail after
	// that is cancelled from the start.
	c.delay = int64(c.frame) + c.margin
	c.delayEst.Store(-1)
	c.est.init(c.dec, c.frame/c.dec, int(int64(decRate)*int64(cfg.maxDelay)/int64(time.Second)))
	return c, nil
}

// FrameSize returns the number of samples Process takes per call.
func (c *Canceller) FrameSize() int { return c.frame }

// Playback appends samples to the far-end reference: exactly what was
// played to the caller, in order, silence included, as the playout clock
// counts it. Any length is accepted. It may be called from a different
// goroutine than Process, and does nothing after Close.
//
// Process reads the far end up to the sample aligned, at zero delay, with
// the start of the frame it is given (see Process; further only for an
// echo delay under one frame plus 10 ms): with the two in step,
// each far frame written before the near frame captured while it played,
// that has always been written. Far audio not yet written when it is
// needed is taken as silence, and so is audio written more than 2 s plus
// the maximum delay ahead of the near end, which the ring has forgotten
// by the time it is needed.
func (c *Canceller) Playback(samples []int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.farClosed {
		return
	}
	// Copy into the ring, in at most two pieces; only the last len(far)
	// samples of a longer write can survive anyway.
	src := samples
	if int64(len(src)) > int64(len(c.far)) {
		src = src[int64(len(src))-int64(len(c.far)):]
	}
	start := (c.w + int64(len(samples)) - int64(len(src))) & c.farMask
	k := copy(c.far[start:], src)
	copy(c.far, src[k:])
	c.w += int64(len(samples))

	// Decimate.
	const scale = 1.0 / 32768
	inv := float32(scale) / float32(c.dec)
	sum, pow, n := c.accSum, c.accPow, c.accN
	for _, s := range samples {
		v := float32(s)
		sum += v
		pow += v * v
		n++
		if n == c.dec {
			i := c.farDecN & c.decMask
			c.farDec[i] = sum * inv
			c.farPow[i] = pow
			c.farDecN++
			sum, pow, n = 0, 0, 0
		}
	}
	c.accSum, c.accPow, c.accN = sum, pow, n
}

// Process cancels the echo in one frame of near-end audio, near, which
// must hold FrameSize samples, and writes the result to out, which must
// too. out may be near itself. With suppression on (the default) out lags
// near by exactly one frame, the preprocessor's overlap-add; without, it
// is aligned with near. Either way speex's canceller removes DC from the
// near audio with a notch filter: a gentle high-pass that leaves speech's
// level but shifts the phase of its lowest frequencies, up to its pitch
// at 8 kHz.
//
// The first call anchors the two streams: near sample n is taken to
// correspond, at zero delay, to the far sample Playback had written then
// plus n. From there on only sample counts matter, not when the calls are
// made.
func (c *Canceller) Process(near, out []int16) error {
	if len(near) != c.frame {
		return fmt.Errorf("aec: near frame of %d samples, want %d", len(near), c.frame)
	}
	if len(out) != c.frame {
		return fmt.Errorf("aec: output frame of %d samples, want %d", len(out), c.frame)
	}
	c.procMu.Lock()
	defer c.procMu.Unlock()
	if c.closed {
		return ErrClosed
	}
	copy(c.nearBuf, near)

	c.mu.Lock()
	if !c.started {
		c.started = true
		c.anchor = c.w
		c.est.anchor(c.anchor)
	}
	base := c.n + c.anchor // far index aligned with near[0] at zero delay
	refStart := base - c.delay + c.margin
	c.readFar(c.ref, refStart)
	// The far audio that can be in this frame: what the filter sees once
	// a delay is locked, anything within the search range before (up to
	// the far sample aligned with the frame's start, the last one written
	// when Playback and Process run in step).
	var from, to int64
	if c.delayEst.Load() >= 0 {
		from, to = refStart-c.tailLen, refStart+int64(c.frame)
	} else {
		from, to = base-c.maxDelay-c.tailLen, base
	}
	active, farPow := c.audible(from, to)
	c.mu.Unlock()
	c.farActive.Store(active)

	c.sp.cancel(c.nearBuf, c.ref, out)
	c.n += int64(c.frame)
	c.judgeTalk(active, farPow, out)

	if c.est.addNear(c.nearBuf) {
		c.mu.Lock()
		c.readFarDec(c.est.farW, c.est.farStart())
		c.mu.Unlock()
		if d, ok := c.est.estimate(); ok {
			c.accept(d)
		}
		if c.est.locked {
			c.measureGain(c.est.lockedAt)
		}
	}
	return nil
}

// accept takes a new delay estimate (in samples) that two consecutive
// searches agreed on. The reference is realigned, and the filter reset,
// only if the echo onset at d would leave the part of the filter that
// models it well: less than 2 ms after its start (the margin is 10 ms) or
// past the first quarter of the tail. A move of a few ms, whether the echo
// path changed a little or the estimate hesitates between peaks of a
// dispersive path, is left to the adaptive filter, which covers it, rather
// than thrown away with a reset.
func (c *Canceller) accept(d int64) {
	c.delayEst.Store(d)
	lo := c.delay - c.margin + int64(c.rate)*realignMs/1000
	hi := c.delay + c.tailLen/4
	if d < lo || d > hi {
		c.delay = d
		c.sp.reset()
		c.converged, c.convergedRun = false, 0
	}
}

// readFar copies far samples [start, start+len(dst)) into dst: zeros for
// those not written yet or already overwritten. c.mu must be held.
func (c *Canceller) readFar(dst []int16, start int64) {
	readRing(dst, c.far, c.farMask, c.w, start)
}

// readFarDec copies decimated far blocks [start, start+len(dst)) into
// dst, zeros where there is none. c.mu must be held.
func (c *Canceller) readFarDec(dst []float32, start int64) {
	readRing(dst, c.farDec, c.decMask, c.farDecN, start)
}

// readRing copies items [start, start+len(dst)) of a power-of-two ring
// that has had written items put in it: zeros for those not written yet
// or already overwritten.
func readRing[T int16 | float32](dst, ring []T, mask, written, start int64) {
	end := start + int64(len(dst))
	lo := max(start, written-int64(len(ring)), 0)
	hi := min(end, written)
	if lo >= hi {
		clear(dst)
		return
	}
	clear(dst[:lo-start])
	clear(dst[hi-start:])
	seg := dst[lo-start : hi-start]
	k := copy(seg, ring[lo&mask:])
	copy(seg[k:], ring)
}

// audible reports whether any activeWindow of far samples in [from, to),
// to block resolution, is louder than activeDBFS, and the mean square of
// the loudest. c.mu must be held.
func (c *Canceller) audible(from, to int64) (bool, float64) {
	d := int64(c.dec)
	b0 := max(floorDiv(from, d), c.farDecN-int64(len(c.farDec)), 0)
	b1 := min((to+d-1)/d, c.farDecN)
	win := int64(decRate) * int64(activeWindow) / int64(time.Second)
	var run, loudest float32
	for b := b0; b < b1; b++ {
		run += c.farPow[b&c.decMask]
		if b-b0 >= win {
			run -= c.farPow[(b-win)&c.decMask]
		}
		loudest = max(loudest, run)
	}
	ms := float64(loudest) / float64(win*d)
	return ms >= activeEnergy, ms
}

// judgeTalk decides, for the frame just processed, whether it can be the
// far end's echo alone (see EchoOnly). active and farPow are whether the
// far audio that can echo in it was audible and its loudest mean square.
func (c *Canceller) judgeTalk(active bool, farPow float64, out []int16) {
	nearPow, outPow := meanSquare(c.nearBuf), meanSquare(out)
	if active {
		const a = 0.1 // about 200 ms at 20 ms frames
		c.nearS += a * (nearPow - c.nearS)
		c.outS += a * (outPow - c.outS)
		if c.nearS > c.outS*convergedRatio {
			c.convergedRun++
		} else {
			c.convergedRun = 0
		}
		if c.convergedRun >= c.convergeNeeds {
			c.converged = true
		}
	}
	c.weighPath(active, nearPow, farPow)
	talk := outPow > farPow*c.echoOnlyRatioFor()
	switch {
	case talk:
		c.talkHold = c.holdFrames
	case c.talkHold > 0:
		c.talkHold--
		talk = true
	}
	c.echoOnly.Store(active && !talk)
}

var convergedRatio = math.Pow(10, convergedDB/10)

func meanSquare(x []int16) float64 {
	var sum float64
	for _, v := range x {
		f := float64(v)
		sum += f * f
	}
	return sum / float64(max(len(x), 1))
}

// activeEnergy is the mean square of a sample at activeDBFS.
var activeEnergy = 32768 * 32768 * math.Pow(10, activeDBFS/10)

// Delay returns the bulk delay of the echo: how many samples after the
// far sample aligned with it (see Process) a near sample holds its echo,
// as a duration. ok is false until the estimator has locked on one.
//
// Counted from the playout position at the first Process, the delay
// includes whatever sat between the two streams then: when each far frame
// is written just before the near frame captured while it played, that is
// one frame on top of the acoustic delay. The reference is realigned, and
// the adaptive filter reset, only when the estimate moves by more than
// 2 ms.
func (c *Canceller) Delay() (d time.Duration, ok bool) {
	s := c.delayEst.Load()
	if s < 0 {
		return 0, false
	}
	return time.Duration(s) * time.Second / time.Duration(c.rate), true
}

// FarActive reports whether the far end that can echo into the last
// processed frame had audible audio (above -50 dBFS over 10 ms): once the
// delay is locked, the reference window the filter covers for that frame
// (tail plus frame); before, anything within the maximum delay plus tail.
// True means the agent may be audible in the caller's audio right now.
func (c *Canceller) FarActive() bool { return c.farActive.Load() }

// EchoOnly reports whether the frame just processed (its output) can hold
// nothing but the far end's echo: the far end was audible and the frame is
// quieter than the loudest far audio that can echo in it by 3 dB or more
// before the adaptive filter has converged, as echo on a line that returns
// it at least 6 dB down always is, or by 15 dB or more once it has
// (cancelled 12 dB over 200 ms of far audio). A caller at a level like the
// agent's is louder, and is then heard for 200 ms more, for the quiet parts
// of their words. A caller much quieter than the agent is taken for echo
// while the agent's voice is in the frame: until the filter converges,
// one more than 3 dB quieter; after, one more than 15 dB quieter.
func (c *Canceller) EchoOnly() bool { return c.echoOnly.Load() }

// Close frees the speex state. It is idempotent; Process afterwards
// returns ErrClosed and Playback does nothing.
func (c *Canceller) Close() error {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.mu.Lock()
	c.farClosed = true
	c.mu.Unlock()
	c.cleanup.Stop()
	c.sp.free()
	c.sp = speexState{}
	return nil
}

func nextPow2(n int64) int64 {
	p := int64(1)
	for p < n {
		p <<= 1
	}
	return p
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
