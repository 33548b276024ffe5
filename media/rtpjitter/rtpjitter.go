package rtpjitter

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Errors returned by Push. The packet is dropped and counted in Stats.
var (
	// ErrLate is returned for a packet whose playout time has passed: its
	// slot was played, recovered, concealed or silenced already.
	ErrLate = errors.New("rtpjitter: packet too late for its playout time")
	// ErrDuplicate is returned for a packet already held or played.
	ErrDuplicate = errors.New("rtpjitter: duplicate packet")
	// ErrOverflow is returned for a packet too far ahead of the playout
	// point to be held (more than the maximum delay), or too large.
	ErrOverflow = errors.New("rtpjitter: buffer overflow")
)

// Defaults and limits of the options.
const (
	DefaultClockRate      = 48000
	DefaultFrame          = 20 * time.Millisecond
	DefaultDelay          = 40 * time.Millisecond
	DefaultMinDelay       = 20 * time.Millisecond
	DefaultMaxDelay       = 200 * time.Millisecond
	DefaultMaxConcealment = 100 * time.Millisecond
	// MaxDelay bounds WithDelay's maximum: the ring holds 64 packets.
	MaxDelay = time.Second
	// MaxPayload is the largest payload held (an RTP packet on a 1500-byte
	// path).
	MaxPayload = 1500
)

const (
	capacity = 64 // packets; a power of two
	// resyncWindow: a packet further than this from the playout point
	// starts the stream afresh.
	resyncWindow = time.Second
	// baseBucket is how long each of the two buckets of the fastest
	// transit time lasts: the reference follows clock drift and route
	// changes within 2-4 s.
	baseBucket = 2 * time.Second
	// peakHold is how long the largest lateness seen holds the delay up
	// before it starts to fall, and peakDecay how fast it falls then (per
	// second): the delay shrinks slowly.
	peakHold  = 5 * time.Second
	peakDecay = 10 * time.Millisecond
	// shrinkEvery is how often, at most, a frame of sound is skipped to
	// shrink the delay; in a pause, silence is skipped at any tick.
	shrinkEvery = time.Second
	// runLimit is how many packets in a row may be dropped as late or as
	// overflow before the buffer restarts the stream on the next one: the
	// sender's timeline moved, and waiting would drop it all.
	runLimit = 10
)

// Kind says what an Item is.
type Kind int

const (
	// Silence is nothing to play: prebuffering, a pause of the sender, or
	// a loss longer than the concealment.
	Silence Kind = iota
	// Play is a packet to decode: Item.Payload.
	Play
	// Recover is a missing packet whose successor is held: decode the
	// missing audio from the successor's in-band FEC (Item.Payload is the
	// successor, which comes again as Play next).
	Recover
	// Conceal is missing audio with nothing to recover it from: the
	// decoder's loss concealment. Also the frame inserted to grow the
	// delay while the sender speaks.
	Conceal
)

// String returns "Silence", "Play", "Recover" or "Conceal".
func (k Kind) String() string {
	switch k {
	case Silence:
		return "Silence"
	case Play:
		return "Play"
	case Recover:
		return "Recover"
	case Conceal:
		return "Conceal"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Packet is an RTP packet as the buffer needs it.
type Packet struct {
	Seq       uint16
	Timestamp uint32
	Marker    bool
	Payload   []byte
	// Duration is the audio the packet holds, in RTP clock ticks; 0 means
	// one frame.
	Duration uint32
}

// Item is one piece of the playout: what to decode (or not) next.
type Item struct {
	Kind Kind
	// Payload is the packet to decode (Play) or to recover from (Recover),
	// in the buffer given to Next.
	Payload []byte
	// Duration is the audio the item covers, in RTP clock ticks.
	Duration uint32
	// Skip is set on the audio dropped to shrink the delay: decode it to
	// keep the decoder's state, but do not play it.
	Skip bool
}

// Stats counts what a Buffer did since New.
type Stats struct {
	// Received counts every Push; Late, Duplicate and Overflow count the
	// packets dropped with the matching error.
	Received, Late, Duplicate, Overflow uint64
	// Played counts the packets handed out as Play. Lost counts packets
	// missing at their playout time (they never came, or came late); of
	// those, Recover counts the ones handed out for recovery from their
	// successor.
	Played, Lost, Recover uint64
	// Concealed counts Conceal items; Stretched the frames inserted to
	// grow the delay, Skipped the frames dropped to shrink it.
	Concealed, Stretched, Skipped uint64
	// Resyncs counts restarts of the stream on a timeline jump.
	Resyncs uint64
}

type config struct {
	clock                     int
	frame                     time.Duration
	delay, minDelay, maxDelay time.Duration
	maxConceal                time.Duration
}

// Option configures a Buffer; see New.
type Option func(*config)

// WithClockRate sets the RTP clock rate (default 48000, Opus's).
func WithClockRate(hz int) Option { return func(c *config) { c.clock = hz } }

// WithFrame sets the playout period: how much audio each Tick plays
// (default 20 ms).
func WithFrame(d time.Duration) Option { return func(c *config) { c.frame = d } }

// WithDelay sets the delay the buffer starts at and the range it adapts
// in (defaults 40 ms, 20 ms and 200 ms; the maximum at most MaxDelay).
func WithDelay(initial, min, max time.Duration) Option {
	return func(c *config) { c.delay, c.minDelay, c.maxDelay = initial, min, max }
}

// WithMaxConcealment sets how long a loss is concealed before the buffer
// plays silence (default 100 ms; 0 turns concealment off).
func WithMaxConcealment(d time.Duration) Option { return func(c *config) { c.maxConceal = d } }

type slot struct {
	used    bool
	seq     uint16
	ext     int64 // timestamp, unwrapped
	dur     int64
	payload []byte
}

type passed struct {
	valid, got bool
	seq        uint16
}

// Buffer reorders the RTP packets of one stream and hands them out on a
// playout clock. Push is called as packets arrive; Tick once per frame
// period, followed by Next until it returns false. Push and Tick/Next may
// be called from different goroutines.
//
// Timestamps are unwrapped to a 64-bit timeline (ext). The playout point
// playExt is the end of the audio handed out so far; clockExt is where the
// playout clock says it should be, one frame on per Tick. The delay is
// measured as in RFC 3550's jitter: a packet's transit time is its arrival
// less its timestamp, the fastest transit of the last 2-4 s is the
// reference (base), and a packet's lateness is its transit less the base.
// The clock is kept so that the fastest packets wait the target delay:
// cur, the wait of a packet of transit base whose audio starts at
// clockExt, stays within half a frame below and a frame above the target,
// which is the largest lateness seen (peak) plus half a frame.
type Buffer struct {
	mu sync.Mutex

	clock      int
	frame      int64 // ticks
	frameDur   time.Duration
	initDelay  time.Duration
	minDelay   time.Duration
	maxDelay   time.Duration
	concealMax int64 // ticks

	slots [capacity]slot
	hist  [capacity]passed
	held  int

	synced, playing bool
	nextSeq         uint16
	lastTS          uint32
	lastExt         int64
	playExt         int64
	clockExt        int64
	lastDur         int64

	epoch                time.Time
	minCur, minPrev      time.Duration
	haveCur, havePrev    bool
	bucketStart          time.Time
	base                 time.Duration
	peak                 time.Duration
	peakAt, decayedAt    time.Time
	target               time.Duration
	lastShrink           time.Time
	inAudio              bool  // the last item was sound (played, recovered, concealed)
	concealRun           int64 // ticks concealed since the last sound
	fill, skip           int64 // ticks owed: inserted (stretch, prebuffer) and to skip (shrink)
	lateRun, overflowRun int

	stats Stats
}

// New returns a Buffer.
func New(opts ...Option) (*Buffer, error) {
	c := config{
		clock: DefaultClockRate, frame: DefaultFrame,
		delay: DefaultDelay, minDelay: DefaultMinDelay, maxDelay: DefaultMaxDelay,
		maxConceal: DefaultMaxConcealment,
	}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case c.clock < 1000 || c.clock > 192000:
		return nil, fmt.Errorf("rtpjitter: clock rate %d out of range [1000, 192000]", c.clock)
	case c.frame < time.Millisecond || c.frame > 120*time.Millisecond:
		return nil, fmt.Errorf("rtpjitter: frame %v out of range [1ms, 120ms]", c.frame)
	case c.minDelay < 0 || c.minDelay > c.delay || c.delay > c.maxDelay || c.maxDelay > MaxDelay:
		return nil, fmt.Errorf("rtpjitter: delays %v (min %v, max %v): want 0 <= min <= initial <= max <= %v", c.delay, c.minDelay, c.maxDelay, MaxDelay)
	case c.maxConceal < 0 || c.maxConceal > time.Second:
		return nil, fmt.Errorf("rtpjitter: max concealment %v out of range [0, 1s]", c.maxConceal)
	}
	b := &Buffer{
		clock: c.clock, frameDur: c.frame,
		initDelay: c.delay, minDelay: c.minDelay, maxDelay: c.maxDelay,
	}
	b.frame = b.ticks(c.frame)
	b.concealMax = b.ticks(c.maxConceal)
	b.lastDur = b.frame
	b.target = c.delay
	b.peak = max(c.delay-c.frame/2, 0)
	return b, nil
}

func (b *Buffer) ticks(d time.Duration) int64 { return int64(d) * int64(b.clock) / int64(time.Second) }
func (b *Buffer) dur(ticks int64) time.Duration {
	return time.Duration(ticks * int64(time.Second) / int64(b.clock))
}

// Delay returns the delay the buffer currently aims at: how late a packet
// may be, against the fastest, and still play.
func (b *Buffer) Delay() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.target
}

// MaxDelay returns the most the delay can grow to.
func (b *Buffer) MaxDelay() time.Duration { return b.maxDelay }

// Stats returns the counters so far.
func (b *Buffer) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// Push stores a packet that arrived at now. The payload is copied. It
// returns ErrLate, ErrDuplicate or ErrOverflow for a packet it drops.
func (b *Buffer) Push(p Packet, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stats.Received++
	if len(p.Payload) > MaxPayload {
		b.stats.Overflow++
		return ErrOverflow
	}
	dur := int64(p.Duration)
	if dur <= 0 {
		dur = b.frame
	}
	if !b.synced {
		b.epoch = now
		b.restart(p, now)
		return nil
	}
	d := int(int16(p.Seq - b.nextSeq))
	ext := b.unwrap(p.Timestamp)
	window := b.ticks(resyncWindow)
	switch {
	case d >= capacity || d <= -capacity,
		ext-b.playExt > window,
		d >= 0 && b.playing && b.playExt-ext > window,
		// A talkspurt that starts well before the playout point: the
		// sender's timeline went back.
		d >= 0 && p.Marker && b.playing && b.playExt-ext > b.ticks(b.maxDelay),
		b.lateRun >= runLimit || b.overflowRun >= runLimit:
		b.stats.Resyncs++
		b.restart(p, now)
		return nil
	}
	s := &b.slots[p.Seq%capacity]
	h := b.hist[p.Seq%capacity]
	if d >= 0 && s.used || d < 0 && h.valid && h.seq == p.Seq && h.got {
		b.stats.Duplicate++
		return ErrDuplicate
	}
	// Every packet but a repeat tells how late packets come, the late
	// ones most of all.
	b.observe(now.Sub(b.epoch)-b.dur(ext), now)

	if !b.playing && ext < b.playExt && d < 0 && b.playExt-ext <= b.ticks(b.maxDelay) {
		// Prebuffering, and an earlier packet than the first came:
		// start from it.
		for s := p.Seq; s != b.nextSeq; s++ {
			b.hist[s%capacity] = passed{}
		}
		b.nextSeq = p.Seq
		b.playExt, b.clockExt = ext, ext
		d = 0
	}
	if d < 0 {
		b.late()
		return ErrLate
	}
	if b.playing && ext < b.playExt {
		b.late()
		return ErrLate
	}
	b.lateRun = 0
	if ext-b.playExt > b.ticks(b.maxDelay)+2*b.frame {
		b.overflowRun++
		b.stats.Overflow++
		return ErrOverflow
	}
	b.overflowRun = 0
	b.store(s, p, ext, dur)
	return nil
}

func (b *Buffer) late() {
	b.lateRun++
	b.stats.Late++
}

func (b *Buffer) store(s *slot, p Packet, ext, dur int64) {
	s.used, s.seq, s.ext, s.dur = true, p.Seq, ext, dur
	s.payload = append(s.payload[:0], p.Payload...)
	b.held++
}

// unwrap places ts on the 64-bit timeline, near the newest timestamp seen.
func (b *Buffer) unwrap(ts uint32) int64 {
	ext := b.lastExt + int64(int32(ts-b.lastTS))
	if ext > b.lastExt {
		b.lastTS, b.lastExt = ts, ext
	}
	return ext
}

// restart (re)starts the stream at p: everything held is dropped, and the
// buffer prebuffers for its delay before it plays again. The timeline
// stays continuous (p lands where the clock is), and the delay learnt so
// far is kept.
func (b *Buffer) restart(p Packet, now time.Time) {
	for i := range b.slots {
		b.slots[i].used = false
	}
	b.hist = [capacity]passed{}
	b.held = 0
	b.synced, b.playing = true, false
	b.nextSeq = p.Seq
	b.lastTS, b.lastExt = p.Timestamp, b.clockExt
	b.playExt = b.clockExt
	b.lateRun, b.overflowRun = 0, 0
	b.haveCur, b.havePrev = false, false
	b.inAudio, b.concealRun, b.skip = false, 0, 0
	transit := now.Sub(b.epoch) - b.dur(b.clockExt)
	b.observe(transit, now)
	dur := int64(p.Duration)
	if dur <= 0 {
		dur = b.frame
	}
	b.store(&b.slots[p.Seq%capacity], p, b.clockExt, dur)
}

// observe takes a packet's transit time into the reference and the
// lateness estimate, and updates the target delay.
func (b *Buffer) observe(transit time.Duration, now time.Time) {
	if !b.haveCur || now.Sub(b.bucketStart) >= baseBucket {
		b.minPrev, b.havePrev = b.minCur, b.haveCur
		b.minCur, b.haveCur, b.bucketStart = transit, true, now
	}
	b.minCur = min(b.minCur, transit)
	b.base = b.minCur
	if b.havePrev {
		b.base = min(b.base, b.minPrev)
	}
	// Lateness beyond the maximum delay cannot be covered: it counts as
	// the maximum, so the delay falls from there.
	if j := min(transit-b.base, b.maxDelay-b.frameDur/2); j >= b.peak {
		b.peak, b.peakAt = j, now
	}
	b.retarget(now)
}

// retarget lets the peak lateness fall once it has held long enough, and
// sets the target from it.
func (b *Buffer) retarget(now time.Time) {
	if b.peakAt.IsZero() {
		b.peakAt = now
	}
	from := b.peakAt.Add(peakHold)
	if b.decayedAt.After(from) {
		from = b.decayedAt
	}
	if now.After(from) {
		fall := time.Duration(int64(now.Sub(from)) * int64(peakDecay) / int64(time.Second))
		b.peak = max(b.peak-fall, 0)
		b.decayedAt = now
	}
	b.target = min(max(b.peak+b.frameDur/2, b.minDelay), b.maxDelay)
}

// Tick moves the playout clock on by one frame period, at now. Call Next
// after it until it returns false.
func (b *Buffer) Tick(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.synced {
		return
	}
	b.retarget(now)
	// cur is how long the fastest packet holding the audio at clockExt
	// will have waited when it plays, now.
	cur := now.Sub(b.epoch) - b.base - b.dur(b.clockExt)
	switch {
	case !b.playing:
		if cur < b.target-b.frameDur/2 {
			b.fill = b.frame // prebuffering
			return
		}
		b.playing = true
		b.clockExt += b.frame
	case cur < b.target-b.frameDur/2:
		b.fill = b.frame
		b.stats.Stretched++
	case cur > b.target+b.frameDur && (!b.inAudio || now.Sub(b.lastShrink) >= shrinkEvery):
		b.clockExt += 2 * b.frame
		b.skip += b.frame
		b.lastShrink = now
		b.stats.Skipped++
	default:
		b.clockExt += b.frame
	}
}

// Next returns the next item of this period's playout, with a Play or
// Recover payload copied into buf (which should hold MaxPayload bytes; a
// shorter one cuts the payload), or false when the period is covered.
func (b *Buffer) Next(buf []byte) (Item, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fill > 0 {
		n := b.fill
		b.fill = 0
		return b.gap(n), true
	}
	if b.playExt >= b.clockExt {
		return Item{}, false
	}
	it := b.next(buf)
	if b.skip > 0 {
		it.Skip = true
		b.skip = max(b.skip-int64(it.Duration), 0)
	}
	return it, true
}

func (b *Buffer) next(buf []byte) Item {
	if s := &b.slots[b.nextSeq%capacity]; s.used && s.seq == b.nextSeq {
		if s.ext > b.playExt {
			// The timestamps jumped with no packet missing: the sender
			// paused.
			n := min(s.ext, b.clockExt) - b.playExt
			b.playExt += n
			b.inAudio = false
			return Item{Kind: Silence, Duration: uint32(n)}
		}
		it := Item{Kind: Play, Payload: buf[:copy(buf, s.payload)], Duration: uint32(s.dur)}
		b.playExt = max(b.playExt, s.ext+s.dur)
		b.lastDur = s.dur
		b.pass(true)
		b.inAudio, b.concealRun = true, 0
		b.stats.Played++
		return it
	}
	q := b.later()
	if q == nil {
		// Nothing held: a loss, a late packet or a pause; which, only
		// the next packet will tell. Conceal for a while, then silence.
		n := min(b.lastDur, b.clockExt-b.playExt)
		b.playExt += n
		return b.gap(n)
	}
	k := int64(q.seq - b.nextSeq)
	est := q.ext - k*b.lastDur // where the missing packet's audio starts
	for k > 0 && est+b.lastDur <= b.playExt {
		// Its time has passed (concealed or silenced already).
		b.stats.Lost++
		b.pass(false)
		k--
		est += b.lastDur
	}
	if k == 0 {
		return b.next(buf)
	}
	if est > b.playExt {
		// A pause before the missing packet.
		n := min(est, b.clockExt) - b.playExt
		b.playExt += n
		b.inAudio = false
		return Item{Kind: Silence, Duration: uint32(n)}
	}
	b.stats.Lost++
	b.pass(false)
	n := b.lastDur
	b.playExt += n
	if k == 1 {
		b.stats.Recover++
		b.inAudio, b.concealRun = true, 0
		return Item{Kind: Recover, Payload: buf[:copy(buf, q.payload)], Duration: uint32(n)}
	}
	return b.gap(n)
}

// gap is n ticks of nothing received: concealed while the concealment
// lasts after sound, silent after that.
func (b *Buffer) gap(n int64) Item {
	if b.inAudio && b.concealRun < b.concealMax {
		b.concealRun += n
		b.stats.Concealed++
		return Item{Kind: Conceal, Duration: uint32(n)}
	}
	b.inAudio = false
	return Item{Kind: Silence, Duration: uint32(n)}
}

// pass moves on from nextSeq, noting whether it was received.
func (b *Buffer) pass(got bool) {
	i := b.nextSeq % capacity
	if b.slots[i].used {
		b.slots[i].used = false
		b.held--
	}
	b.hist[i] = passed{valid: true, got: got, seq: b.nextSeq}
	b.nextSeq++
}

// later returns the first packet held after nextSeq, or nil.
func (b *Buffer) later() *slot {
	if b.held == 0 {
		return nil
	}
	for k := uint16(1); k < capacity; k++ {
		seq := b.nextSeq + k
		if s := &b.slots[seq%capacity]; s.used && s.seq == seq {
			return s
		}
	}
	return nil
}
