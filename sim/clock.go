package sim

import (
	"time"

	"github.com/holdline/holdline/runtime/engine"
)

// Sources of scheduled work, for engine.VirtualClock's tie order: work
// from one source happens in the order it was scheduled, work from
// different sources due at one instant in an order drawn from the run's
// seed. Source 0 is the core's own timers (engine.Clock.AfterFunc).
const (
	srcUser uint64 = iota + 1
	srcFault
	srcPlayer
	srcPosted               // inputs the core posts to itself
	srcSTT                  // the recogniser's transcripts
	srcGeneration = 1 << 16 // + epoch
	srcTool       = 1 << 32 // + call number
)

// sched drives a run: the virtual clock the core reads, in durations since
// the call started. Only the run loop runs its callbacks, so nothing it runs
// is concurrent.
type sched struct {
	clock *engine.VirtualClock
	base  time.Time
}

func newSched(seed int64) *sched {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &sched{clock: engine.NewVirtualClock(base, engine.WithTieSeed(seed)), base: base}
}

// now is the virtual time since the call started.
func (s *sched) now() time.Duration { return s.clock.Now().Sub(s.base) }

// at schedules fn from source at virtual time when (never in the past).
func (s *sched) at(when time.Duration, source uint64, fn func()) engine.Timer {
	return s.clock.AfterFuncFrom(when-s.now(), source, fn)
}

func (s *sched) cancel(t engine.Timer) {
	if t != nil {
		t.Stop()
	}
}

// next reports when the earliest pending work is due.
func (s *sched) next() (time.Duration, bool) {
	t, ok := s.clock.Next()
	return t.Sub(s.base), ok
}

// step runs the earliest pending work.
func (s *sched) step() { s.clock.RunNext() }
