package events

import (
	"context"
	"sync"
)

// DefaultBuffer is the per-subscriber buffer when none is given.
const DefaultBuffer = 4096

// Bus fans events out to subscribers without ever blocking the publisher.
// The zero value is not usable; use NewBus.
type Bus struct {
	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	closed bool
}

// NewBus returns an empty bus.
func NewBus() *Bus {
	return &Bus{subs: map[*Subscription]struct{}{}}
}

// Subscription is one subscriber's view of the stream.
type Subscription struct {
	bus     *Bus
	ch      chan Event
	dropped int // guarded by bus.mu
}

// C yields events in publication order. It is closed when the bus closes or
// the subscription is cancelled.
func (s *Subscription) C() <-chan Event { return s.ch }

// Close cancels the subscription.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	if _, ok := s.bus.subs[s]; ok {
		delete(s.bus.subs, s)
		close(s.ch)
	}
}

// Subscribe returns a subscription with a buffer of n events (DefaultBuffer
// if n <= 0). Events published before Subscribe are not delivered.
func (b *Bus) Subscribe(n int) *Subscription {
	if n <= 0 {
		n = DefaultBuffer
	}
	s := &Subscription{bus: b, ch: make(chan Event, n)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(s.ch)
		return s
	}
	b.subs[s] = struct{}{}
	return s
}

// Publish hands e to every subscriber that has room. A subscriber whose
// buffer is full loses the event; the loss is reported to it as an
// EventsDropped event once it has room again.
func (b *Bus) Publish(e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if s.dropped > 0 {
			select {
			case s.ch <- Event{Session: e.Session, Time: e.Time, At: e.At, Kind: EventsDropped, Count: s.dropped}:
				s.dropped = 0
			default:
				s.dropped++
				continue
			}
		}
		select {
		case s.ch <- e:
		default:
			s.dropped++
		}
	}
}

// Close ends every subscription; later Publish calls do nothing.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for s := range b.subs {
		close(s.ch)
		delete(b.subs, s)
	}
}

// Drain calls fn for every event of s until the subscription ends or ctx is
// done. It is the usual body of a sink goroutine.
func Drain(ctx context.Context, s *Subscription, fn func(Event) error) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-s.C():
			if !ok {
				return nil
			}
			if err := fn(e); err != nil {
				return err
			}
		}
	}
}
