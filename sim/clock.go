package sim

import (
	"container/heap"
	"time"

	"github.com/holdline/holdline/runtime"
)

// Sources of scheduled work. Work from one source happens in the order it
// was scheduled, as a goroutine's posts reach a mailbox in order; work from
// different sources due at the same instant happens in an order drawn from
// the seed, as racing goroutines would. That is what lets a sweep of seeds
// try the arrival orders a production trace shows only once in a while.
const (
	srcUser uint64 = iota + 1
	srcTimer
	srcFault
	srcPlayer
	srcGeneration = 1 << 16 // + epoch
	srcTool       = 1 << 32 // + call number
)

// sched is a deterministic discrete-event scheduler in virtual time, and
// the clock the core reads. Only the run loop calls its callbacks, so nothing
// it runs is concurrent.
type sched struct {
	base  time.Time
	now   time.Duration
	seed  uint64
	seq   uint64
	queue itemHeap
	ranks map[uint64]uint64
}

type item struct {
	when  time.Duration
	rank  uint64
	seq   uint64
	fn    func()
	index int
}

func newSched(seed int64) *sched {
	return &sched{
		base:  time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		seed:  uint64(seed),
		ranks: map[uint64]uint64{},
	}
}

// rank is source's place among sources at one instant, fixed for the run.
func (s *sched) rank(source uint64) uint64 {
	if r, ok := s.ranks[source]; ok {
		return r
	}
	r := splitmix(s.seed ^ splitmix(source))
	s.ranks[source] = r
	return r
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// at schedules fn from source at virtual time when (never in the past).
func (s *sched) at(when time.Duration, source uint64, fn func()) *item {
	if when < s.now {
		when = s.now
	}
	s.seq++
	it := &item{when: when, rank: s.rank(source), seq: s.seq, fn: fn, index: -1}
	heap.Push(&s.queue, it)
	return it
}

func (s *sched) cancel(it *item) {
	if it != nil && it.index >= 0 {
		heap.Remove(&s.queue, it.index)
	}
}

// next reports when the earliest pending work is due.
func (s *sched) next() (time.Duration, bool) {
	if len(s.queue) == 0 {
		return 0, false
	}
	return s.queue[0].when, true
}

// step runs the earliest pending work.
func (s *sched) step() {
	it := heap.Pop(&s.queue).(*item)
	s.now = it.when
	it.fn()
}

// Now implements runtime.Clock.
func (s *sched) Now() time.Time { return s.base.Add(s.now) }

// AfterFunc implements runtime.Clock: the core's own timers.
func (s *sched) AfterFunc(d time.Duration, f func()) runtime.Timer {
	return timer{s: s, it: s.at(s.now+d, srcTimer, f)}
}

type timer struct {
	s  *sched
	it *item
}

func (t timer) Stop() bool {
	if t.it.index < 0 {
		return false
	}
	t.s.cancel(t.it)
	return true
}

type itemHeap []*item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.when != b.when {
		return a.when < b.when
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.seq < b.seq
}
func (h itemHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *itemHeap) Push(x any) {
	it := x.(*item)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *itemHeap) Pop() any {
	old := *h
	n := len(old)
	it := old[n-1]
	old[n-1] = nil
	it.index = -1
	*h = old[:n-1]
	return it
}
