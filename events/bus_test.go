package events_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
)

// recvTimeout reads one event or fails the test after a generous timeout.
func recvTimeout(t *testing.T, s *events.Subscription) (events.Event, bool) {
	t.Helper()
	select {
	case e, ok := <-s.C():
		return e, ok
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for an event")
		return events.Event{}, false
	}
}

// expectEmpty fails if s has an event (or is closed) right now.
func expectEmpty(t *testing.T, s *events.Subscription) {
	t.Helper()
	select {
	case e, ok := <-s.C():
		if ok {
			t.Fatalf("unexpected event %+v", e)
		}
		t.Fatal("subscription unexpectedly closed")
	default:
	}
}

// expectClosed fails unless s's channel is closed with nothing left in it.
func expectClosed(t *testing.T, s *events.Subscription) {
	t.Helper()
	e, ok := recvTimeout(t, s)
	if ok {
		t.Fatalf("got event %+v, want closed channel", e)
	}
}

func TestPublishNeverBlocksAndReportsDrops(t *testing.T) {
	const buf = 4
	b := events.NewBus()
	// No deferred b.Close: if Publish blocks while holding the bus lock, Close
	// would hang too and turn a failure into a test timeout.
	s := b.Subscribe(buf)

	const n = 10 * buf
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= n; i++ {
			b.Publish(events.Event{Seq: uint64(i), Session: "s1", Kind: events.Transcript})
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked on a subscriber that never reads")
	}

	// The buffer holds the first buf events, in order.
	for i := 1; i <= buf; i++ {
		e, ok := recvTimeout(t, s)
		if !ok {
			t.Fatal("channel closed early")
		}
		if e.Seq != uint64(i) || e.Kind != events.Transcript {
			t.Fatalf("event %d: got seq=%d kind=%s", i, e.Seq, e.Kind)
		}
	}
	// Nothing else is queued: the lost events are reported on the next publish.
	expectEmpty(t, s)

	at := 123 * time.Millisecond
	b.Publish(events.Event{Seq: n + 1, Session: "s1", At: at, Kind: events.Idle})

	e, _ := recvTimeout(t, s)
	if e.Kind != events.EventsDropped {
		t.Fatalf("got %s, want %s", e.Kind, events.EventsDropped)
	}
	if want := n - buf; e.Count != want {
		t.Fatalf("dropped count = %d, want %d", e.Count, want)
	}
	if e.Session != "s1" || e.At != at {
		t.Fatalf("dropped notice header = session %q at %v, want s1 at %v", e.Session, e.At, at)
	}

	// Later events flow again, in order.
	e, _ = recvTimeout(t, s)
	if e.Seq != n+1 || e.Kind != events.Idle {
		t.Fatalf("after drop notice got seq=%d kind=%s, want seq=%d idle", e.Seq, e.Kind, n+1)
	}
	for i := n + 2; i <= n+1+buf; i++ {
		b.Publish(events.Event{Seq: uint64(i), Kind: events.Transcript})
	}
	for i := n + 2; i <= n+1+buf; i++ {
		e, _ := recvTimeout(t, s)
		if e.Seq != uint64(i) || e.Kind != events.Transcript {
			t.Fatalf("got seq=%d kind=%s, want seq=%d transcript", e.Seq, e.Kind, i)
		}
	}
	expectEmpty(t, s)
	b.Close()
}

// When the buffer is still full at the next publish, the notice cannot be
// sent either, and the count keeps growing until there is room.
func TestDropCountAccumulatesUntilRoom(t *testing.T) {
	b := events.NewBus()
	defer b.Close()
	s := b.Subscribe(2)

	for i := 1; i <= 7; i++ { // 2 delivered, 5 lost
		b.Publish(events.Event{Seq: uint64(i)})
	}
	<-s.C()                         // one slot free
	b.Publish(events.Event{Seq: 8}) // notice fits, event 8 does not

	if e := <-s.C(); e.Seq != 2 {
		t.Fatalf("got seq %d, want 2", e.Seq)
	}
	e := <-s.C()
	if e.Kind != events.EventsDropped || e.Count != 5 {
		t.Fatalf("got %s count %d, want %s count 5", e.Kind, e.Count, events.EventsDropped)
	}
	expectEmpty(t, s)

	b.Publish(events.Event{Seq: 9})
	e = <-s.C()
	if e.Kind != events.EventsDropped || e.Count != 1 {
		t.Fatalf("got %s count %d, want %s count 1 (event 8)", e.Kind, e.Count, events.EventsDropped)
	}
	if e := <-s.C(); e.Seq != 9 {
		t.Fatalf("got seq %d, want 9", e.Seq)
	}
}

func TestOrderPreservedPerSubscriber(t *testing.T) {
	b := events.NewBus()
	defer b.Close()
	subs := []*events.Subscription{b.Subscribe(0), b.Subscribe(1000), b.Subscribe(500)}

	const n = 500
	for i := 1; i <= n; i++ {
		b.Publish(events.Event{Seq: uint64(i), Kind: events.Transcript})
	}
	for si, s := range subs {
		for i := 1; i <= n; i++ {
			e, ok := recvTimeout(t, s)
			if !ok {
				t.Fatalf("sub %d closed early", si)
			}
			if e.Seq != uint64(i) {
				t.Fatalf("sub %d: event %d has seq %d", si, i, e.Seq)
			}
		}
		expectEmpty(t, s)
	}
}

func TestSubscribeDefaultBuffer(t *testing.T) {
	b := events.NewBus()
	defer b.Close()
	for _, n := range []int{0, -1} {
		if got := cap(b.Subscribe(n).C()); got != events.DefaultBuffer {
			t.Errorf("Subscribe(%d) buffer = %d, want %d", n, got, events.DefaultBuffer)
		}
	}
	if got := cap(b.Subscribe(7).C()); got != 7 {
		t.Errorf("Subscribe(7) buffer = %d, want 7", got)
	}
}

func TestEventsBeforeSubscribeNotDelivered(t *testing.T) {
	b := events.NewBus()
	defer b.Close()
	b.Publish(events.Event{Seq: 1})
	s := b.Subscribe(4)
	expectEmpty(t, s)
	b.Publish(events.Event{Seq: 2})
	if e, _ := recvTimeout(t, s); e.Seq != 2 {
		t.Fatalf("got seq %d, want 2", e.Seq)
	}
}

func TestSubscribeAfterCloseIsClosed(t *testing.T) {
	b := events.NewBus()
	b.Close()
	b.Close() // idempotent
	s := b.Subscribe(4)
	expectClosed(t, s)
	b.Publish(events.Event{Seq: 1}) // no-op, no panic
	s.Close()                       // no-op, no panic
	s.Close()
}

func TestBusCloseClosesSubscriptions(t *testing.T) {
	b := events.NewBus()
	s := b.Subscribe(4)
	b.Publish(events.Event{Seq: 1})
	b.Close()
	b.Publish(events.Event{Seq: 2}) // after close: dropped silently

	if e, ok := recvTimeout(t, s); !ok || e.Seq != 1 {
		t.Fatalf("got %+v ok=%v, want buffered seq 1", e, ok)
	}
	expectClosed(t, s)
	s.Close() // after bus close: safe
	s.Close()
}

func TestSubscriptionCloseTwiceStopsDelivery(t *testing.T) {
	b := events.NewBus()
	defer b.Close()
	s := b.Subscribe(4)
	other := b.Subscribe(4)

	b.Publish(events.Event{Seq: 1})
	s.Close()
	s.Close() // must not panic (double close of the channel)
	b.Publish(events.Event{Seq: 2})

	// Events buffered before Close stay readable; nothing after Close arrives.
	if e, ok := recvTimeout(t, s); !ok || e.Seq != 1 {
		t.Fatalf("got %+v ok=%v, want seq 1", e, ok)
	}
	expectClosed(t, s)

	// Other subscribers are unaffected.
	for _, want := range []uint64{1, 2} {
		if e, ok := recvTimeout(t, other); !ok || e.Seq != want {
			t.Fatalf("other: got %+v ok=%v, want seq %d", e, ok, want)
		}
	}
}

func TestDrainStopsOnContextCancel(t *testing.T) {
	b := events.NewBus()
	defer b.Close()
	s := b.Subscribe(4)
	ctx, cancel := context.WithCancel(context.Background())

	got := make(chan uint64, 10)
	errc := make(chan error, 1)
	go func() {
		errc <- events.Drain(ctx, s, func(e events.Event) error {
			got <- e.Seq
			return nil
		})
	}()

	b.Publish(events.Event{Seq: 1})
	select {
	case seq := <-got:
		if seq != 1 {
			t.Fatalf("fn got seq %d, want 1", seq)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not deliver the event")
	}

	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Drain returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return after ctx cancel")
	}
}

func TestDrainStopsOnFnError(t *testing.T) {
	b := events.NewBus()
	defer b.Close()
	s := b.Subscribe(8)
	for i := 1; i <= 5; i++ {
		b.Publish(events.Event{Seq: uint64(i)})
	}

	errStop := errors.New("stop")
	var seen []uint64
	errc := make(chan error, 1)
	go func() {
		errc <- events.Drain(context.Background(), s, func(e events.Event) error {
			seen = append(seen, e.Seq)
			if e.Seq == 3 {
				return errStop
			}
			return nil
		})
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, errStop) {
			t.Fatalf("Drain returned %v, want %v", err, errStop)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return after fn failed")
	}
	if fmt.Sprint(seen) != "[1 2 3]" {
		t.Fatalf("fn saw %v, want [1 2 3]", seen)
	}
	// The remaining events were not consumed.
	if e, _ := recvTimeout(t, s); e.Seq != 4 {
		t.Fatalf("next event seq %d, want 4", e.Seq)
	}
}

func TestDrainStopsOnBusClose(t *testing.T) {
	b := events.NewBus()
	s := b.Subscribe(8)
	b.Publish(events.Event{Seq: 1})
	b.Publish(events.Event{Seq: 2})

	var seen []uint64
	errc := make(chan error, 1)
	go func() {
		errc <- events.Drain(context.Background(), s, func(e events.Event) error {
			seen = append(seen, e.Seq)
			return nil
		})
	}()
	b.Close()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Drain returned %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return after bus close")
	}
	// Buffered events are still delivered before Drain returns.
	if fmt.Sprint(seen) != "[1 2]" {
		t.Fatalf("fn saw %v, want [1 2]", seen)
	}
}

func TestDrainStopsOnSubscriptionClose(t *testing.T) {
	b := events.NewBus()
	defer b.Close()
	s := b.Subscribe(8)
	errc := make(chan error, 1)
	go func() {
		errc <- events.Drain(context.Background(), s, func(events.Event) error { return nil })
	}()
	s.Close()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Drain returned %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return after subscription close")
	}
}

// Publishers, subscribers and closers all run at once; run with -race. Each
// subscriber must see every publisher's events in increasing order (with
// possible gaps reported as EventsDropped), and nothing may panic or block.
func TestConcurrentPublishSubscribeClose(t *testing.T) {
	b := events.NewBus()

	const (
		publishers  = 4
		perPub      = 2000
		subscribers = 8
	)
	var pubWG, subWG sync.WaitGroup
	start := make(chan struct{})

	for p := 0; p < publishers; p++ {
		pubWG.Add(1)
		go func() {
			defer pubWG.Done()
			<-start
			sess := fmt.Sprintf("p%d", p)
			for i := 1; i <= perPub; i++ {
				b.Publish(events.Event{Session: sess, Seq: uint64(i), Kind: events.Transcript})
			}
		}()
	}

	errs := make(chan error, subscribers)
	for i := 0; i < subscribers; i++ {
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			<-start
			s := b.Subscribe(1 + i*8) // some tiny buffers to force drops
			last := map[string]uint64{}
			n := 0
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := events.Drain(ctx, s, func(e events.Event) error {
				n++
				if i%2 == 1 && n == 100 {
					s.Close() // close from inside the sink; Drain must still end
					s.Close()
				}
				if e.Kind == events.EventsDropped {
					if e.Count <= 0 {
						return fmt.Errorf("drop notice with count %d", e.Count)
					}
					return nil
				}
				if e.Seq <= last[e.Session] {
					return fmt.Errorf("session %s: seq %d after %d", e.Session, e.Seq, last[e.Session])
				}
				last[e.Session] = e.Seq
				return nil
			})
			if err != nil {
				errs <- err
			}
		}()
	}

	close(start)
	pubWG.Wait()
	b.Close()
	b.Publish(events.Event{Seq: 1}) // after close: no-op
	subWG.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
