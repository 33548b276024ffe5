package media

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Sink receives paced audio, one frame per frame period, from the Player's
// goroutine. It must not keep f.Samples after returning.
type Sink interface {
	WriteFrame(f Frame) error
}

// SinkFunc adapts an ordinary function to a Sink.
type SinkFunc func(Frame) error

// WriteFrame calls fn(f).
func (fn SinkFunc) WriteFrame(f Frame) error { return fn(f) }

// PlayerOption configures a Player; see NewPlayer.
type PlayerOption func(*playerConfig)

type playerConfig struct {
	reporter    PlayoutReporter
	clearer     OutputClearer
	rate        int
	frameDur    time.Duration
	bufferDur   time.Duration
	epochDone   func(epoch uint64)
	epochStart  func(epoch uint64)
	idleSilence bool
}

// WithPlayerRate sets the sample rate of the queued and written audio
// (default 16000). It must be one CheckRate accepts.
func WithPlayerRate(rate int) PlayerOption {
	return func(c *playerConfig) { c.rate = rate }
}

// WithFrameDuration sets the frame period: 10 or 20 ms (the default).
func WithFrameDuration(d time.Duration) PlayerOption {
	return func(c *playerConfig) { c.frameDur = d }
}

// WithBufferDuration sets how much audio can be queued before Enqueue blocks
// (default 10 s). The buffer is allocated once, in NewPlayer.
func WithBufferDuration(d time.Duration) PlayerOption {
	return func(c *playerConfig) { c.bufferDur = d }
}

// WithEpochDone sets a function called, from the Player's goroutine, once all
// audio of an epoch ended with EndEpoch has been handed to the sink. It must
// not block: the next frame waits for it.
func WithEpochDone(fn func(epoch uint64)) PlayerOption {
	return func(c *playerConfig) { c.epochDone = fn }
}

// WithEpochStart sets a function called, from the Player's goroutine, once
// the first frame of an epoch has been handed to the sink: the moment the
// caller starts hearing a turn. It must not block.
func WithEpochStart(fn func(epoch uint64)) PlayerOption {
	return func(c *playerConfig) { c.epochStart = fn }
}

// WithIdleSilence makes the Player write a silent frame (Epoch 0) every
// period while nothing is queued, for sinks that expect a continuous stream
// (an RTP sender keeping its timestamps, a sound card), instead of writing
// nothing.
func WithIdleSilence(on bool) PlayerOption {
	return func(c *playerConfig) { c.idleSilence = on }
}

// PlayoutReporter is implemented by a Sink whose audio plays at the far end
// of a buffer the Player does not see (a carrier's media stream, which
// buffers what it is sent): handing a frame to such a sink is not playing
// it. PlayedOut reports how much of epoch the far end has said it played;
// ok is false when the sink cannot tell (nothing known yet of the line),
// and the Player's own count stands.
type PlayoutReporter interface {
	PlayedOut(epoch uint64) (played time.Duration, ok bool)
}

// OutputClearer is implemented by a Sink whose far end holds audio it was
// sent but has not played: ClearOutput asks it to drop that audio now,
// because the Player flushed or paused what the caller should hear. It is
// called on the goroutine that flushes or pauses, and must not block.
type OutputClearer interface {
	ClearOutput()
}

// WithPlayoutReporter makes Played report, for each epoch, the lesser of
// what the Player handed to its sink and what r says the far end played:
// the caller heard what was played, not what was sent. The WithEpochDone
// callback of an epoch then comes once r reports all of it played (or
// FarEndWait after it was handed over, whichever is first).
func WithPlayoutReporter(r PlayoutReporter) PlayerOption {
	return func(c *playerConfig) { c.reporter = r }
}

// WithOutputClearer makes Flush and Pause call c.ClearOutput (the sink
// knows whether it has anything outstanding), so that a far end that buffers drops what it holds at once
// rather than playing it after the agent was interrupted.
func WithOutputClearer(c OutputClearer) PlayerOption {
	return func(cfg *playerConfig) { cfg.clearer = c }
}

const (
	defaultBufferDuration = 10 * time.Second
	maxBufferDuration     = time.Hour

	// playerEpochs is how many recent epochs Played remembers.
	playerEpochs = 32
	// playerSegments bounds the queued runs of audio. Runs of one epoch
	// merge, so only interleaved epochs use more than one; Enqueue waits
	// when they are all in use, like when the samples are.
	playerSegments = 256
)

// segment is a run of queued samples of one epoch. end marks the last run
// EndEpoch was called for: consuming it completes the epoch.
type segment struct {
	epoch uint64
	count int
	end   bool
}

// epochSlot is what the Player remembers about a recent epoch.
type epochSlot struct {
	epoch   uint64
	played  int64 // samples handed to the sink
	ended   bool  // EndEpoch seen: it fires at most once
	pending bool  // ended with nothing queued: fire at the next tick
}

// Player is the paced output queue: producers Enqueue audio tagged with an
// epoch (an agent turn) and Run hands it to a Sink one frame per frame
// period, in real time. Flush drops an epoch's audio at once, for barge-in;
// Played is the playout clock, telling how much of an epoch was actually
// handed out, so a turn can be truncated at what the listener heard.
//
// Epochs increase over a session. Epoch 0 is reserved for silence: audio
// queued for it is dropped, as if it had been flushed.
//
// A written frame never mixes epochs: when an epoch's audio ends mid-frame,
// the rest of the frame is silence. The Samples of written frames point
// into a buffer the Player reuses.
//
// All methods are safe for concurrent use. Enqueue and one frame period
// allocate nothing.
type Player struct {
	sink       Sink
	reporter   PlayoutReporter
	clearer    OutputClearer
	rate       int
	frameDur   time.Duration
	frameLen   int
	epochDone  func(uint64)
	epochStart func(uint64)
	missed     atomic.Uint64
	late       atomic.Uint64
	// started is the last epoch epochStart was called for.
	started     uint64
	idleSilence bool

	running atomic.Bool
	// paused holds the queue where it is: ticks write silence (or
	// nothing) and Played stands still until Resume.
	paused atomic.Bool
	// pausedTicks counts the ticks of the current pause; skip is how many
	// silent frames may still be skipped after it (see Resume). Both are
	// the Run goroutine's.
	pausedTicks, skip int
	// flushed is the flush watermark: epochs <= flushed are dropped. It
	// changes under mu; the atomic lets Run check it once more, without
	// the lock, right before a frame or callback leaves the Player.
	flushed atomic.Uint64
	// held is the epoch whose audio, and every later epoch's, waits in
	// the queue until Release: 0 when nothing is held. It changes under mu.
	held uint64
	// wake hands a wake-up to one blocked Enqueue. A woken waiter that
	// returns passes it on, so that one send after a Flush releases every
	// waiter that can go, without waking all of them on every tick.
	wake chan struct{}
	// kick asks Run to write a frame at once: audio came to an idle
	// output, which need not wait up to a frame period for the next tick.
	kick chan struct{}
	// wrote: the last tick handed audio to the sink (Run's goroutine).
	wrote bool

	mu       sync.Mutex
	ring     []int16 // queued samples: count of them from head, wrapping
	head     int
	count    int
	segs     []segment // queued runs: segCount of them from segHead, wrapping
	segHead  int
	segCount int
	slots    [playerEpochs]epochSlot // indexed by epoch % playerEpochs
	pending  int                     // slots with pending set
	waiters  int                     // Enqueue calls blocked on a full queue

	// Owned by the goroutine running tick.
	frame   []int16
	dones   []uint64
	waiting []awaiting // WithPlayoutReporter: done here, not yet there
}

// NewPlayer returns a Player writing to sink. Call Run to start playout.
func NewPlayer(sink Sink, opts ...PlayerOption) (*Player, error) {
	if sink == nil {
		return nil, errors.New("media: NewPlayer: nil sink")
	}
	c := playerConfig{
		rate:      Rate16k,
		frameDur:  DefaultFrameDuration,
		bufferDur: defaultBufferDuration,
	}
	for _, o := range opts {
		o(&c)
	}
	if err := CheckRate(c.rate); err != nil {
		return nil, fmt.Errorf("media: NewPlayer: %w", err)
	}
	if c.frameDur != 10*time.Millisecond && c.frameDur != 20*time.Millisecond {
		return nil, fmt.Errorf("media: NewPlayer: frame duration %v, want 10ms or 20ms", c.frameDur)
	}
	if c.bufferDur < c.frameDur || c.bufferDur > maxBufferDuration {
		return nil, fmt.Errorf("media: NewPlayer: buffer duration %v, want %v to %v", c.bufferDur, c.frameDur, maxBufferDuration)
	}
	frameLen := SamplesFor(c.rate, c.frameDur)
	return &Player{
		sink:        sink,
		reporter:    c.reporter,
		clearer:     c.clearer,
		rate:        c.rate,
		frameDur:    c.frameDur,
		frameLen:    frameLen,
		epochDone:   c.epochDone,
		epochStart:  c.epochStart,
		idleSilence: c.idleSilence,
		wake:        make(chan struct{}, 1),
		kick:        make(chan struct{}, 1),
		ring:        make([]int16, SamplesFor(c.rate, c.bufferDur)),
		segs:        make([]segment, playerSegments),
		frame:       make([]int16, frameLen),
		dones:       make([]uint64, 0, playerEpochs+1),
		waiting:     make([]awaiting, 0, playerEpochs+1),
	}, nil
}

// Rate returns the sample rate the Player expects and writes.
func (p *Player) Rate() int { return p.rate }

// FrameDuration returns the frame period.
func (p *Player) FrameDuration() time.Duration { return p.frameDur }

// Enqueue copies samples, at the Player's rate, to the end of the queue as
// audio of epoch. While the queue is full it blocks until Run makes room,
// the epoch is flushed or ctx is done; in the last case it returns ctx's
// error, wrapped, and a prefix of samples may have been queued.
//
// Audio of an epoch at or below the flush watermark is dropped and Enqueue
// returns nil, so a producer racing a barge-in needs no special case.
func (p *Player) Enqueue(ctx context.Context, epoch uint64, samples []int16) error {
	woken := false
	for {
		p.mu.Lock()
		if woken {
			p.waiters--
		}
		done := epoch <= p.flushed.Load()
		if !done {
			idle := p.count == 0
			samples = samples[p.push(epoch, samples):]
			done = len(samples) == 0
			if idle && p.count > 0 {
				p.kickLocked()
			}
		}
		if done {
			if woken && p.waiters > 0 {
				// The wake-up may have been meant for everyone (a Flush)
				// or left room this call did not use.
				p.notifyLocked()
			}
			p.mu.Unlock()
			return nil
		}
		p.waiters++
		p.mu.Unlock()

		select {
		case <-p.wake:
			woken = true
		case <-ctx.Done():
			p.mu.Lock()
			p.waiters--
			p.mu.Unlock()
			return fmt.Errorf("media: Player.Enqueue: %w", ctx.Err())
		}
	}
}

// push queues as much of s as fits and returns how many samples that was.
func (p *Player) push(epoch uint64, s []int16) int {
	n := min(len(p.ring)-p.count, len(s))
	if n == 0 {
		return 0
	}
	merged := false
	if p.segCount > 0 {
		tail := &p.segs[(p.segHead+p.segCount-1)%len(p.segs)]
		if tail.epoch == epoch && !tail.end {
			tail.count += n
			merged = true
		}
	}
	if !merged {
		if p.segCount == len(p.segs) {
			return 0
		}
		p.segs[(p.segHead+p.segCount)%len(p.segs)] = segment{epoch: epoch, count: n}
		p.segCount++
	}
	w := (p.head + p.count) % len(p.ring)
	c := copy(p.ring[w:], s[:n])
	copy(p.ring, s[c:n])
	p.count += n
	return n
}

// EndEpoch marks epoch's audio complete: once everything queued for it so
// far has been handed to the sink, the WithEpochDone function is called for
// it, exactly once. With nothing of it queued (an utterance without audio)
// that happens at the next frame period at the latest. Audio enqueued for
// the epoch afterwards still plays but does not call it again.
//
// It does nothing for a flushed epoch, and the callback does not come for an
// epoch flushed before the callback is due, even if the epoch's last frame
// was already in the sink at the time.
func (p *Player) EndEpoch(epoch uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch <= p.flushed.Load() {
		return
	}
	s := p.slot(epoch)
	if s != nil {
		if s.ended {
			return
		}
		s.ended = true
	}
	for i := p.segCount - 1; i >= 0; i-- {
		seg := &p.segs[(p.segHead+i)%len(p.segs)]
		if seg.epoch == epoch {
			seg.end = true
			return
		}
	}
	// Nothing queued. An epoch so old that its slot has been reused
	// (playerEpochs newer ones seen since) is forgotten.
	if s != nil {
		s.pending = true
		p.pending++
	}
}

// slot returns the record for epoch, taking over the slot from an older
// epoch, or nil if a newer epoch holds it.
func (p *Player) slot(epoch uint64) *epochSlot {
	s := &p.slots[epoch%playerEpochs]
	if s.epoch == epoch {
		return s
	}
	if s.epoch > epoch {
		return nil
	}
	if s.pending {
		p.pending--
	}
	*s = epochSlot{epoch: epoch}
	return s
}

// Flush drops all queued audio of epochs up to and including epoch and
// raises the flush watermark, so that later Enqueue and EndEpoch calls for
// them do nothing; blocked Enqueue calls for them return. It takes effect
// before the next frame is written: once Flush returns, the only audio of a
// flushed epoch the sink can still get is a frame already being handed to
// it. The watermark never goes down.
func (p *Player) Flush(epoch uint64) {
	p.mu.Lock()
	if epoch <= p.flushed.Load() {
		p.mu.Unlock()
		return
	}
	defer func() {
		p.mu.Unlock()
		if p.clearer != nil {
			p.clearer.ClearOutput()
		}
	}()
	p.flushed.Store(epoch)
	if p.held != 0 && p.held <= epoch {
		p.held = 0
	}
	p.dropThrough(epoch)
	for i := range p.slots {
		if s := &p.slots[i]; s.pending && s.epoch <= epoch {
			s.pending = false
			p.pending--
		}
	}
	if p.waiters > 0 {
		p.notifyLocked()
	}
}

// dropThrough removes the queued audio of epochs <= w.
func (p *Player) dropThrough(w uint64) {
	// Usual case: the flushed audio is at the head of the queue.
	for p.segCount > 0 && p.segs[p.segHead].epoch <= w {
		p.discardHead()
	}
	interleaved := false
	for i := 0; i < p.segCount; i++ {
		if p.segs[(p.segHead+i)%len(p.segs)].epoch <= w {
			interleaved = true
			break
		}
	}
	if !interleaved {
		return
	}
	// Epochs were queued out of order: close the gaps, moving the audio
	// that stays towards the head. Rare, so done sample by sample.
	rn, sn := len(p.ring), len(p.segs)
	src, dst, kept := 0, 0, 0
	for i := 0; i < p.segCount; i++ {
		seg := p.segs[(p.segHead+i)%sn]
		if seg.epoch <= w {
			src += seg.count
			continue
		}
		if src != dst {
			for j := 0; j < seg.count; j++ {
				p.ring[(p.head+dst+j)%rn] = p.ring[(p.head+src+j)%rn]
			}
		}
		src += seg.count
		dst += seg.count
		p.segs[(p.segHead+kept)%sn] = seg
		kept++
	}
	p.segCount = kept
	p.count = dst
}

func (p *Player) discardHead() {
	seg := p.segs[p.segHead]
	p.head = (p.head + seg.count) % len(p.ring)
	p.count -= seg.count
	p.segHead = (p.segHead + 1) % len(p.segs)
	p.segCount--
}

// notifyLocked wakes one blocked Enqueue, if none is already due to wake.
func (p *Player) notifyLocked() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Hold keeps the audio of epoch, and of any later epoch, in the queue until
// Release: earlier epochs play on, and when they are done the sink gets
// silence (WithIdleSilence) or nothing. Played for a held epoch stays 0 and
// its WithEpochDone callback waits too. It is for an answer prepared before
// it is known to be wanted (a speculative answer, made while the caller may
// still go on speaking): Release plays it with no delay, Flush drops it.
// A later Hold replaces an earlier one.
func (p *Player) Hold(epoch uint64) {
	p.mu.Lock()
	p.held = epoch
	p.mu.Unlock()
}

// Release ends a Hold of epoch: its audio plays at once. It does nothing if
// epoch is not the one held.
func (p *Player) Release(epoch uint64) {
	p.mu.Lock()
	if p.held == epoch {
		p.held = 0
		if p.count > 0 {
			p.kickLocked()
		}
	}
	p.mu.Unlock()
}

// kickLocked asks Run for a frame now, if it is not already asked.
func (p *Player) kickLocked() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Pause holds playout where it is, from the next frame on: the queue keeps
// its audio, Played stands still and the sink gets silence (WithIdleSilence)
// or nothing. It is for a suspected barge-in: the agent stops talking at
// once, and Resume carries on from the same sample if it was a false alarm.
// Flush and EndEpoch work as usual while paused.
//
// With WithOutputClearer, the far end is told to drop what it holds: the
// agent stops at the caller's ear, not only at the Player. (If the pause
// was a false alarm, the little the far end held is skipped.)
func (p *Player) Pause() {
	if !p.paused.Swap(true) && p.clearer != nil {
		p.clearer.ClearOutput()
	}
}

// Resume ends a Pause. The caller has just heard silence for as long as the
// pause lasted, so if the audio it resumes into begins with silence (a
// pause between the agent's words), that silence is cut short by as much:
// the voice comes back at once rather than after the pause and the gap
// both. What was skipped counts as played.
func (p *Player) Resume() { p.paused.Store(false) }

// Paused reports whether playout is paused.
func (p *Player) Paused() bool { return p.paused.Load() }

// Played returns how much audio of epoch has been handed to the sink so far,
// silence padding not included: the playout clock, for truncating an
// interrupted turn at what was heard. A frame counts from the moment it is
// handed over, so right after Flush it includes the frame still in the sink.
// It remembers the last 32 epochs; older ones report 0.
//
// With WithPlayoutReporter it is the lesser of that and what the far end
// reported played: a carrier that buffers plays later than it was handed
// audio, and after a clear never plays the rest.
func (p *Player) Played(epoch uint64) time.Duration {
	p.mu.Lock()
	s := p.slots[epoch%playerEpochs]
	p.mu.Unlock()
	if s.epoch != epoch {
		return 0
	}
	r := int64(p.rate)
	d := time.Duration(s.played/r)*time.Second + time.Duration(s.played%r)*time.Second/time.Duration(r)
	if p.reporter != nil {
		if out, ok := p.reporter.PlayedOut(epoch); ok && out < d {
			d = max(out, 0)
		}
	}
	return d
}

// Run writes one frame to the sink every frame period until ctx is done,
// then returns ctx's error. A sink error stops it and is returned wrapped.
// Only one Run may be active at a time.
//
// Frames keep to a fixed schedule from the start of Run: a wakeup that
// comes late (a busy CPU, a slow sink) writes the frames whose periods have
// begun, up to MaxCatchUp of them at once, so the line gets every frame and
// the playout clock stays on the wall clock. Periods later than that are
// skipped and counted by Missed; frames sent a period or more after their
// slot are counted by Late.
func (p *Player) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("media: Player.Run: already running")
	}
	defer p.running.Store(false)

	t := time.NewTicker(p.frameDur)
	defer t.Stop()
	start := time.Now()
	var written int64 // frame periods done since start
	select {
	case <-p.kick: // audio queued before Run plays on the schedule
	default:
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.kick:
			// Audio came to an output idle for a period: it leaves now, and the
			// schedule follows from here, rather than waiting up to a
			// frame period for the next tick. (The frame before was
			// silence or nothing; one sent early is within what a
			// jitter buffer takes.)
			if p.Paused() || p.wrote {
				// Mid-utterance (the last frame had audio) the next
				// frame keeps the period: a voice must not speed up.
				continue
			}
			if err := p.tick(); err != nil {
				return err
			}
			if p.wrote {
				written++
				start = time.Now().Add(-time.Duration(written) * p.frameDur)
				t.Reset(p.frameDur)
			}
		case <-t.C:
			due := int64(time.Since(start) / p.frameDur)
			if behind := due - written; behind > MaxCatchUp {
				p.missed.Add(uint64(behind - MaxCatchUp))
				written += behind - MaxCatchUp
			}
			for written < due {
				if due-written > 1 {
					p.late.Add(1)
				}
				if err := p.tick(); err != nil {
					return err
				}
				written++
			}
		}
	}
}

// MaxCatchUp is how many frames a late Player writes at once to catch up
// with its schedule: 60 ms, what a client's jitter buffer absorbs. Periods
// further behind are skipped (Missed).
const MaxCatchUp = 3

// Missed returns how many frame periods were skipped because the Player
// ran more than MaxCatchUp periods late: a starved CPU, a slow sink. It
// stays 0 on a healthy machine.
func (p *Player) Missed() uint64 { return p.missed.Load() }

// Late returns how many frames were written a frame period or more after
// their slot, to catch up: not lost, but later than the schedule.
func (p *Player) Late() uint64 { return p.late.Load() }

// tick writes at most one frame: the next frame's worth of the epoch at the
// head of the queue, or silence, and then reports the epochs it completed.
func (p *Player) tick() error {
	p.mu.Lock()
	p.dones = p.dones[:0]
	var n int
	var epoch uint64
	switch {
	case p.paused.Load():
		p.pausedTicks++
	default:
		if p.pausedTicks > 0 {
			p.skip, p.pausedTicks = p.pausedTicks, 0
		}
		n, epoch = p.pull()
		for p.skip > 0 && n == p.frameLen && silent(p.frame[:n]) && p.segCount > 0 && p.segs[p.segHead].epoch == epoch {
			// A silent frame right after a pause: count it as played
			// and take the next one in its place.
			p.skip--
			p.credit(epoch, int64(n))
			n, epoch = p.pull()
		}
		p.skip = 0
	}
	if n > 0 {
		p.credit(epoch, int64(n))
		if p.waiters > 0 {
			p.notifyLocked()
		}
	}
	if p.pending > 0 {
		for i := range p.slots {
			if s := &p.slots[i]; s.pending && (p.held == 0 || s.epoch < p.held) {
				s.pending = false
				p.pending--
				p.dones = append(p.dones, s.epoch)
			}
		}
	}
	p.mu.Unlock()

	// A Flush that came in since the frame was taken wins: the frame is
	// not yet in the sink.
	if n > 0 && epoch <= p.flushed.Load() {
		p.uncredit(epoch, int64(n))
		n = 0
	}
	p.wrote = n > 0
	var f Frame
	switch {
	case n > 0:
		clear(p.frame[n:])
		f = Frame{Samples: p.frame, SampleRate: p.rate, Epoch: epoch}
	case p.idleSilence:
		clear(p.frame)
		f = Frame{Samples: p.frame, SampleRate: p.rate}
	}
	if f.Samples != nil {
		if err := p.sink.WriteFrame(f); err != nil {
			if n > 0 {
				p.uncredit(epoch, int64(n))
			}
			return fmt.Errorf("media: Player sink: %w", err)
		}
	}
	if n > 0 && epoch != p.started {
		p.started = epoch
		if p.epochStart != nil {
			p.epochStart(epoch)
		}
	}
	if p.epochDone != nil {
		if p.reporter != nil {
			p.doneAtFarEnd()
			return nil
		}
		for _, e := range p.dones {
			if e > p.flushed.Load() {
				p.epochDone(e)
			}
		}
	}
	return nil
}

// FarEndWait bounds how long, with WithPlayoutReporter, an epoch whose
// audio has all been handed over waits for the far end to report it
// played before its WithEpochDone callback comes anyway: a far end that
// stopped reporting must not hold a turn open.
const FarEndWait = 2 * time.Second

// awaiting is an epoch handed over whole, not yet reported played.
type awaiting struct {
	epoch uint64
	since time.Time
}

// doneAtFarEnd calls WithEpochDone for the epochs completed here once the
// far end has reported them played: a turn has played out when the caller
// heard it, not when the carrier was sent it. (Run's goroutine.)
func (p *Player) doneAtFarEnd() {
	now := time.Now()
	for _, e := range p.dones {
		p.waiting = append(p.waiting, awaiting{epoch: e, since: now})
	}
	keep := p.waiting[:0]
	for _, w := range p.waiting {
		if w.epoch <= p.flushed.Load() {
			continue
		}
		p.mu.Lock()
		s := p.slots[w.epoch%playerEpochs]
		p.mu.Unlock()
		handed := time.Duration(0)
		if s.epoch == w.epoch {
			handed = time.Duration(s.played) * time.Second / time.Duration(p.rate)
		}
		out, ok := p.reporter.PlayedOut(w.epoch)
		if !ok || out >= handed || now.Sub(w.since) >= FarEndWait {
			p.epochDone(w.epoch)
			continue
		}
		keep = append(keep, w)
	}
	p.waiting = keep
}

// silent reports whether a frame holds nothing audible (below -54 dBFS).
func silent(frame []int16) bool {
	for _, v := range frame {
		if v > 64 || v < -64 {
			return false
		}
	}
	return true
}

// pull moves up to one frame of the head epoch's audio into p.frame and
// returns the sample count and epoch. It stops early at the end of an
// epoch's audio (recording the epoch in p.dones if it was ended) or where
// another epoch starts, so a frame never mixes epochs.
func (p *Player) pull() (n int, epoch uint64) {
	for n < p.frameLen && p.segCount > 0 {
		seg := &p.segs[p.segHead]
		if n > 0 && seg.epoch != epoch || p.held != 0 && seg.epoch >= p.held {
			break
		}
		epoch = seg.epoch
		k := min(p.frameLen-n, seg.count)
		c := copy(p.frame[n:n+k], p.ring[p.head:])
		copy(p.frame[n+c:n+k], p.ring)
		p.head = (p.head + k) % len(p.ring)
		p.count -= k
		seg.count -= k
		n += k
		if seg.count == 0 {
			end := seg.end
			p.segHead = (p.segHead + 1) % len(p.segs)
			p.segCount--
			if end {
				p.dones = append(p.dones, epoch)
				break
			}
		}
	}
	return n, epoch
}

func (p *Player) credit(epoch uint64, n int64) {
	if s := p.slot(epoch); s != nil {
		s.played += n
	}
}

func (p *Player) uncredit(epoch uint64, n int64) {
	p.mu.Lock()
	if s := &p.slots[epoch%playerEpochs]; s.epoch == epoch {
		s.played -= n
	}
	p.mu.Unlock()
}
