package runtime

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
// goroutine in time order, ties in scheduling order.
type VirtualClock struct {
	mu    sync.Mutex
	now   time.Time
	seq   uint64
	queue timerHeap
}

// NewVirtualClock returns a clock reading start.
func NewVirtualClock(start time.Time) *VirtualClock {
	return &VirtualClock{now: start}
}

// Now returns the virtual time.
func (v *VirtualClock) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// AfterFunc schedules f at Now()+d.
func (v *VirtualClock) AfterFunc(d time.Duration, f func()) Timer {
	v.mu.Lock()
	defer v.mu.Unlock()
	if d < 0 {
		d = 0
	}
	v.seq++
	t := &virtualTimer{clock: v, when: v.now.Add(d), seq: v.seq, f: f, index: -1}
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
