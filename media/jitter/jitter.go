package jitter

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/holdline/holdline/media"
)

// Errors returned by Push. The packet is dropped and counted in Stats.
var (
	// ErrLate is returned for a packet whose audio is entirely before the
	// playout point: its slot has already been played or concealed.
	ErrLate = errors.New("jitter: packet too late for its playout time")
	// ErrDuplicate is returned for a packet whose first unplayed sample is
	// already held, normally the same packet received twice.
	ErrDuplicate = errors.New("jitter: duplicate packet")
	// ErrOverflow is returned for a packet that would make the buffer hold
	// more than its depth plus one second of audio.
	ErrOverflow = errors.New("jitter: buffer overflow")
)

// Defaults and limits of the options.
const (
	DefaultDepth          = 60 * time.Millisecond
	DefaultMaxConcealment = 60 * time.Millisecond
	MaxDepth              = time.Second
	MaxConcealment        = time.Second
)

// Status says what Pop wrote.
type Status int

const (
	// Silence is a frame of zeros: nothing to play, because the buffer is
	// prebuffering (no packet yet, or less than the depth held since the
	// stream started or resynced), or a loss outlasted the concealment.
	Silence Status = iota
	// Played is a frame of received audio. Samples of the frame that no
	// packet covered are concealed from the previous frame.
	Played
	// Concealed is the previous frame repeated 6 dB quieter, for a frame no
	// packet covered.
	Concealed
)

// String returns "Silence", "Played" or "Concealed".
func (s Status) String() string {
	switch s {
	case Silence:
		return "Silence"
	case Played:
		return "Played"
	case Concealed:
		return "Concealed"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Stats counts what a Buffer did since New. Received counts every Push;
// Late, Duplicate and Overflow count the packets dropped with the matching
// error. Played, Concealed and Silence count Pops by the Status returned, so
// their sum is the number of Pops.
type Stats struct {
	Received  uint64
	Played    uint64
	Late      uint64
	Duplicate uint64
	Overflow  uint64
	Concealed uint64
	Resyncs   uint64
	Silence   uint64
}

type config struct {
	depth      time.Duration
	maxConceal time.Duration
}

// Option configures a Buffer; see New.
type Option func(*config)

// WithDepth sets how much audio the buffer holds before it starts playing
// (default 60 ms, at most 1 s). It is the delay the buffer adds and the
// lateness it absorbs.
func WithDepth(d time.Duration) Option {
	return func(c *config) { c.depth = d }
}

// WithMaxConcealment sets how long a loss is concealed by repeating the last
// frame before the buffer plays silence (default 60 ms, at most 1 s; 0 turns
// concealment off). Repeats are cut short at whole frames: a loss is
// concealed for the smallest number of frames lasting at least d.
func WithMaxConcealment(d time.Duration) Option {
	return func(c *config) { c.maxConceal = d }
}

// Buffer reorders decoded RTP audio by timestamp and hands out one frame per
// period. Push and Pop may be called from different goroutines.
//
// The buffer holds audio in a ring indexed by RTP timestamp relative to the
// playout point, the timestamp of the next sample Pop will play. Before it
// plays it prebuffers: it starts when the audio held from the first packet
// is contiguous for the depth, or when the depth of time (counted in Pops)
// has passed since the first packet arrived and the held audio spans the
// depth, so one lost packet cannot stall the start. Once playing, every Pop
// advances the playout point by one frame whether or not audio arrived; the
// buffer prebuffers again only after a resync.
type Buffer struct {
	mu sync.Mutex

	rate     int // RTP clock and PCM rate
	frameN   int // samples per frame
	depthN   int // samples to hold before playing
	concealN int // samples a loss may be concealed for
	window   int // a timestamp further than this from the playout point resyncs
	size     int // ring length: depthN + 1 s

	ring []int16 // samples, ring[playPos] is at playTS
	have []bool  // which ring slots hold received audio
	last []int16 // the last frame output, attenuated while concealing

	synced   bool   // a packet has set the playout point
	playing  bool   // prebuffering is over
	anchored bool   // the playout point was set by a marker packet
	haveLast bool   // last holds audio of this stream
	playTS   uint32 // timestamp of ring[playPos]
	playPos  int
	end      int    // offset from the playout point just past the last held sample
	syncTS   uint32 // timestamp the playout point was last (re)started at
	waited   int    // samples of Silence popped while prebuffering
	hidden   int    // samples concealed since the last Played frame

	stats Stats
}

// New returns a Buffer for audio at rate (the RTP clock rate, which for the
// PCM codecs equals the sample rate; one of those media.CheckRate accepts)
// handed out in frames of frame (at most 1 s; 20 ms is usual).
func New(rate int, frame time.Duration, opts ...Option) (*Buffer, error) {
	if err := media.CheckRate(rate); err != nil {
		return nil, fmt.Errorf("jitter: %w", err)
	}
	c := config{depth: DefaultDepth, maxConceal: DefaultMaxConcealment}
	for _, o := range opts {
		o(&c)
	}
	frameN := media.SamplesFor(rate, frame)
	if frameN <= 0 || frame > time.Second {
		return nil, fmt.Errorf("jitter: frame duration %v out of range (one sample to 1s)", frame)
	}
	if c.depth < 0 || c.depth > MaxDepth {
		return nil, fmt.Errorf("jitter: depth %v out of range [0, %v]", c.depth, MaxDepth)
	}
	if c.maxConceal < 0 || c.maxConceal > MaxConcealment {
		return nil, fmt.Errorf("jitter: max concealment %v out of range [0, %v]", c.maxConceal, MaxConcealment)
	}
	depthN := media.SamplesFor(rate, c.depth)
	size := depthN + rate
	return &Buffer{
		rate:     rate,
		frameN:   frameN,
		depthN:   depthN,
		concealN: media.SamplesFor(rate, c.maxConceal),
		window:   rate,
		size:     size,
		ring:     make([]int16, size),
		have:     make([]bool, size),
		last:     make([]int16, frameN),
	}, nil
}

// FrameLen returns the number of samples in a frame, the length Pop expects.
func (b *Buffer) FrameLen() int { return b.frameN }

// Push stores a packet's audio at its RTP timestamp ts. The samples are
// copied: the caller may reuse pcm. seq, the RTP sequence number, is not
// needed (the timestamp says where the audio goes and what is missing) and is
// ignored. A packet without samples is counted and otherwise ignored.
//
// The first packet sets the playout point. A packet with marker set (an RFC
// 3550 talkspurt start, unless it is the packet the playout point was last
// restarted at) or with a timestamp more than 1 s either side of the playout
// point resyncs: the playout point restarts at this packet, audio before it
// is dropped and the buffer prebuffers again. While prebuffering, a packet
// from before the first one moves the playout point back to it, unless the
// first one was a talkspurt start.
//
// Push returns ErrLate, ErrDuplicate or ErrOverflow for a packet it drops; a
// packet that is only partly late keeps its samples from the playout point on.
func (b *Buffer) Push(seq uint16, ts uint32, marker bool, pcm []int16) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stats.Received++
	n := len(pcm)
	if n == 0 {
		return nil
	}
	if n > b.size {
		b.stats.Overflow++
		return ErrOverflow
	}
	if !b.synced {
		b.restart(ts, marker, false)
	} else {
		d := int(int32(ts - b.playTS))
		switch {
		case d > b.window || d < -b.window:
			b.restart(ts, marker, false)
			b.stats.Resyncs++
		case marker && ts != b.syncTS:
			if !b.playing && d < 0 && b.extendBack(-d) {
				// The talkspurt start arrived after later packets
				// of the same talkspurt: keep them and the
				// prebuffering clock.
				b.anchored, b.syncTS = true, ts
			} else {
				b.restart(ts, marker, true)
			}
			b.stats.Resyncs++
		}
	}

	d := int(int32(ts - b.playTS))
	if d < 0 {
		switch {
		case !b.playing && !b.anchored && b.extendBack(-d):
			d = 0
		case d+n <= 0:
			b.stats.Late++
			return ErrLate
		default:
			pcm = pcm[-d:]
			d = 0
		}
	}
	pos := b.wrap(b.playPos + d)
	if b.have[pos] {
		b.stats.Duplicate++
		return ErrDuplicate
	}
	if d+len(pcm) > b.size {
		b.stats.Overflow++
		return ErrOverflow
	}
	k := copy(b.ring[pos:], pcm)
	setTrue(b.have[pos : pos+k])
	if k < len(pcm) {
		copy(b.ring, pcm[k:])
		setTrue(b.have[:len(pcm)-k])
	}
	b.end = max(b.end, d+len(pcm))
	return nil
}

// Pop writes the next frame into out and reports what it is. It is meant to
// be called once per frame period with len(out) == FrameLen(); it always
// writes all of out, zeroing samples past the frame, and a shorter out loses
// the rest of the frame. Once playing has started, every Pop advances the
// playout point by one frame.
func (b *Buffer) Pop(out []int16) Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.next()
	n := 0
	switch st {
	case Played:
		b.stats.Played++
		n = copy(out, b.last)
	case Concealed:
		b.stats.Concealed++
		n = copy(out, b.last)
	default:
		b.stats.Silence++
	}
	clear(out[n:])
	return st
}

// Stats returns the counters so far.
func (b *Buffer) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// next assembles the next frame in b.last and advances the playout point.
func (b *Buffer) next() Status {
	if !b.synced {
		return Silence
	}
	if !b.playing {
		if !b.ready() {
			b.waited += b.frameN
			return Silence
		}
		b.playing = true
	}
	pos := b.playPos
	n1 := min(b.frameN, b.size-pos)
	h1, h2 := b.have[pos:pos+n1], b.have[:b.frameN-n1]
	st := Silence
	switch {
	case b.end > 0 && (slices.Contains(h1, true) || slices.Contains(h2, true)):
		assemble(b.last[:n1], b.ring[pos:pos+n1], h1)
		assemble(b.last[n1:], b.ring[:len(h2)], h2)
		clear(h1)
		clear(h2)
		b.haveLast, b.hidden = true, 0
		st = Played
	case b.haveLast && b.hidden < b.concealN:
		for i, s := range b.last {
			b.last[i] = s / 2 // -6 dB, rounding toward zero so it dies out
		}
		b.hidden += b.frameN
		st = Concealed
	}
	b.playPos = b.wrap(pos + b.frameN)
	b.playTS += uint32(b.frameN)
	b.end = max(b.end-b.frameN, 0)
	return st
}

// ready reports whether prebuffering is over, counting the Pop being served.
func (b *Buffer) ready() bool {
	if b.contiguous(b.depthN) >= b.depthN {
		return true
	}
	return b.waited+b.frameN >= b.depthN && b.end >= b.depthN
}

// restart moves the playout point to ts and starts prebuffering. With keep,
// held audio that is still within the window after ts stays; otherwise all
// is dropped.
func (b *Buffer) restart(ts uint32, marker, keep bool) {
	if d := int(int32(ts - b.playTS)); keep && d >= -b.window && d <= b.window {
		if d >= 0 {
			b.clearRange(0, d) // before the new playout point
		} else {
			b.clearRange(b.size+d, -d) // past the new window's end
		}
		b.playPos = b.wrap(b.playPos + d)
		switch {
		case b.end == 0: // nothing held
		case b.end-d > b.size: // some of it was past the new window
			b.end = b.scanEnd()
		default:
			b.end = max(b.end-d, 0)
		}
	} else {
		clear(b.have)
		b.playPos, b.end = 0, 0
	}
	b.playTS, b.syncTS = ts, ts
	b.synced, b.anchored, b.playing = true, marker, false
	b.waited, b.hidden = 0, 0
	b.haveLast = false
	clear(b.last)
}

// extendBack moves the playout point k samples back if the held audio still
// fits the ring.
func (b *Buffer) extendBack(k int) bool {
	if b.end+k > b.size {
		return false
	}
	b.playPos = b.wrap(b.playPos - k)
	b.playTS -= uint32(k)
	if b.end > 0 {
		b.end += k
	}
	return true
}

// contiguous returns how many samples from the playout point are held
// without a gap, up to limit.
func (b *Buffer) contiguous(limit int) int {
	n1 := min(limit, b.size-b.playPos)
	if i := slices.Index(b.have[b.playPos:b.playPos+n1], false); i >= 0 {
		return i
	}
	if i := slices.Index(b.have[:limit-n1], false); i >= 0 {
		return n1 + i
	}
	return limit
}

// scanEnd finds the offset from the playout point just past the last held
// sample (0 when nothing is held).
func (b *Buffer) scanEnd() int {
	if i := lastTrue(b.have[:b.playPos]); i >= 0 {
		return b.size - b.playPos + i + 1
	}
	return lastTrue(b.have[b.playPos:]) + 1
}

// clearRange marks n slots from offset off (relative to the playout point)
// empty.
func (b *Buffer) clearRange(off, n int) {
	pos := b.wrap(b.playPos + off)
	k := min(n, b.size-pos)
	clear(b.have[pos : pos+k])
	clear(b.have[:n-k])
}

func (b *Buffer) wrap(p int) int {
	p %= b.size
	if p < 0 {
		p += b.size
	}
	return p
}

// assemble overwrites dst with the held samples of src; samples not held are
// concealed from the previous frame, 6 dB down.
func assemble(dst, src []int16, have []bool) {
	for i, ok := range have {
		if ok {
			dst[i] = src[i]
		} else {
			dst[i] /= 2
		}
	}
}

func setTrue(s []bool) {
	for i := range s {
		s[i] = true
	}
}

func lastTrue(s []bool) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] {
			return i
		}
	}
	return -1
}
