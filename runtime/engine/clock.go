package engine

import (
	"container/heap"
	"sync"
	"time"
)

// Clock is the only source of time for the session core. Production uses
// the wall clock; the simulator drives a VirtualClock so that the windows
// where interruption bugs live are exact and repeatable.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once d has passed, on a goroutine of the clock's
	// choosing (the caller's, for a VirtualClock).
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not happened yet and reports whether
	// it did so.
	Stop() bool
}

// WallClock returns the production clock. Under testing/synctest it follows
// the bubble's fake time.
func WallClock() Clock { return wallClock{} }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
func (wallClock) AfterFunc(d time.Duration, f func()) Timer {
	return time.AfterFunc(d, f)
}

// VirtualClock is a deterministic discrete-event clock. Time moves only when
// its driver calls Advance or RunNext; due callbacks run on the driver's
// goroutine in time order. Callbacks due at one instant run in scheduling
// order, unless the clock has a tie seed (WithTieSeed): then callbacks from
// one source (AfterFuncFrom) keep their order, as one goroutine's posts reach
// a mailbox in order, while different sources are ordered by a rank drawn
// from the seed, as racing goroutines would be. A sweep of seeds thus tries
// the arrival orders production shows only once in a while.
type VirtualClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	queue  timerHeap
	seed   uint64
	seeded bool
	ranks  map[uint64]uint64
}

// VirtualClockOption configures a VirtualClock.
type VirtualClockOption func(*VirtualClock)

// WithTieSeed orders callbacks of different sources due at one instant by
// ranks drawn from seed.
func WithTieSeed(seed int64) VirtualClockOption {
	return func(v *VirtualClock) { v.seed, v.seeded = uint64(seed), true }
}

// NewVirtualClock returns a clock reading start.
func NewVirtualClock(start time.Time, opts ...VirtualClockOption) *VirtualClock {
	v := &VirtualClock{now: start, ranks: map[uint64]uint64{}}
	for _, o := range opts {
		o(v)
	}
	return v
}

// rank is source's place among sources at one instant, fixed for the
// clock's life; without a tie seed every source ranks the same.
func (v *VirtualClock) rank(source uint64) uint64 {
	if !v.seeded {
		return 0
	}
	r, ok := v.ranks[source]
	if !ok {
		r = splitmix(v.seed ^ splitmix(source))
		v.ranks[source] = r
	}
	return r
}

// splitmix is the SplitMix64 finaliser: a cheap, well-spread hash.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Now returns the virtual time.
func (v *VirtualClock) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// AfterFunc schedules f at Now()+d, as source 0.
func (v *VirtualClock) AfterFunc(d time.Duration, f func()) Timer {
	return v.AfterFuncFrom(d, 0, f)
}

// AfterFuncFrom schedules f at Now()+d on behalf of source (see
// VirtualClock for how sources order callbacks due at one instant).
func (v *VirtualClock) AfterFuncFrom(d time.Duration, source uint64, f func()) Timer {
	v.mu.Lock()
	defer v.mu.Unlock()
	if d < 0 {
		d = 0
	}
	v.seq++
	t := &virtualTimer{clock: v, when: v.now.Add(d), rank: v.rank(source), seq: v.seq, f: f, index: -1}
	heap.Push(&v.queue, t)
	return t
}

// Next reports when the earliest pending callback is due.
func (v *VirtualClock) Next() (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.queue) == 0 {
		return time.Time{}, false
	}
	return v.queue[0].when, true
}

// RunNext moves time to the earliest pending callback and runs it. It
// reports false when nothing is pending.
func (v *VirtualClock) RunNext() bool {
	v.mu.Lock()
	if len(v.queue) == 0 {
		v.mu.Unlock()
		return false
	}
	t := heap.Pop(&v.queue).(*virtualTimer)
	if t.when.After(v.now) {
		v.now = t.when
	}
	v.mu.Unlock()
	t.f()
	return true
}

// Advance runs every callback due within d, in order, then sets the time to
// Now()+d.
func (v *VirtualClock) Advance(d time.Duration) {
	v.mu.Lock()
	end := v.now.Add(d)
	v.mu.Unlock()
	for {
		next, ok := v.Next()
		if !ok || next.After(end) {
			break
		}
		v.RunNext()
	}
	v.mu.Lock()
	if end.After(v.now) {
		v.now = end
	}
	v.mu.Unlock()
}

type virtualTimer struct {
	clock *VirtualClock
	when  time.Time
	rank  uint64
	seq   uint64
	f     func()
	index int
}

func (t *virtualTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.clock.queue, t.index)
	return true
}

type timerHeap []*virtualTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].when.Equal(h[j].when) {
		if h[i].rank != h[j].rank {
			return h[i].rank < h[j].rank
		}
		return h[i].seq < h[j].seq
	}
	return h[i].when.Before(h[j].when)
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*virtualTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	t.index = -1
	*h = old[:n-1]
	return t
}
