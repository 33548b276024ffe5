package calls

import (
	"sync"

	"github.com/holdline/holdline/events"
)

// eventLog keeps a session's recent events for late and returning readers
// (an SSE client with Last-Event-ID, a reloaded page) and wakes those
// waiting for more. One goroutine appends; any number read.
type eventLog struct {
	mu     sync.Mutex
	max    int
	evs    []events.Event
	wake   chan struct{} // closed and replaced at every append
	closed bool
}

func newEventLog(max int) *eventLog {
	return &eventLog{max: max, wake: make(chan struct{})}
}

func (l *eventLog) append(e events.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.evs) == l.max {
		// Drop the oldest half at once rather than shifting every time.
		l.evs = append(l.evs[:0], l.evs[l.max/2:]...)
	}
	l.evs = append(l.evs, e)
	close(l.wake)
	l.wake = make(chan struct{})
}

// close marks the end of the session's events and wakes every reader.
func (l *eventLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.wake)
	}
}

// after returns the kept events with Seq > seq, a channel closed when more
// arrive, and whether the log has ended.
func (l *eventLog) after(seq uint64) ([]events.Event, <-chan struct{}, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := len(l.evs)
	for i > 0 && l.evs[i-1].Seq > seq {
		i--
	}
	return append([]events.Event(nil), l.evs[i:]...), l.wake, l.closed
}
