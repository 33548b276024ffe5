package calls_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/calls/callstest"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/media"
)

type watcher struct {
	mu     sync.Mutex
	kinds  []events.Kind
	closed chan struct{}
	w      calls.Watch
}

func (w *watcher) Observe(e events.Event) {
	w.mu.Lock()
	w.kinds = append(w.kinds, e.Kind)
	w.mu.Unlock()
}
func (w *watcher) Close() { close(w.closed) }

// An observer sees a call's events from its start, on a subscription of
// its own, and is closed when the call ends, whether its session ran or
// not.
func TestObserversWatchEveryCallToItsEnd(t *testing.T) {
	made := make(chan *watcher, 2)
	h, err := calls.New(newAgent, calls.WithObserver(func(w calls.Watch) (calls.Observer, map[string]string) {
		o := &watcher{closed: make(chan struct{}), w: w}
		made <- o
		return o, map[string]string{"observer": "yes"}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	c, err := callstest.Dial(ctx, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := <-made
	if o.w.ID != c.ID() || o.w.Kind != callstest.Kind || o.w.Seq != 0 || o.w.Facts != nil {
		t.Errorf("a fresh call's watch: %+v", o.w)
	}
	c.End("the caller hung up")
	select {
	case <-o.closed:
	case <-ctx.Done():
		t.Fatal("the observer was not closed when the call ended")
	}
	o.mu.Lock()
	if len(o.kinds) == 0 || o.kinds[0] != events.SessionStarted || o.kinds[len(o.kinds)-1] != events.SessionEnded {
		t.Errorf("observed %v; want session_started to session_ended", o.kinds)
	}
	o.mu.Unlock()

	// A call that never connected: its session never ran.
	c2, err := h.Start(ctx, calls.Spec{Kind: callstest.Kind, OutputRate: callstest.Rate}, &nopLine{})
	if err != nil {
		t.Fatal(err)
	}
	o2 := <-made
	c2.End("no connection")
	select {
	case <-o2.closed:
	case <-ctx.Done():
		t.Fatal("the observer of a call that never ran was not closed")
	}
}

type nopLine struct{}

func (*nopLine) WriteFrame(f media.Frame) error { return nil }
func (*nopLine) Hangup(string)                  {}
