package calls

import (
	"github.com/holdline/holdline/events"
)

// Observer watches one call's events: tracing, an audit log. It is told
// them on a goroutine of its own, through a subscription of its own, so
// that a slow observer loses events (an events_dropped event says how
// many) and never holds up the call, its event log or its metrics.
type Observer interface {
	Observe(e events.Event)
	// Close says the call's events have ended: nothing more will be
	// observed.
	Close()
}

// Watch is what an observer is told of the call it is made for.
type Watch struct {
	ID     string // the session's id, kept across a resume
	Kind   string // the transport's kind
	Origin Origin
	// Seq is the sequence number the call's events continue from: 0 for
	// a fresh call, the snapshot's for one that picks up an earlier
	// conversation.
	Seq uint64
	// Facts are what the observers of the call's earlier life sealed
	// with the checkpoint it resumes from (nil for a fresh call).
	Facts map[string]string
}

// ObserverFunc makes the observer of a new call. The facts it returns
// are sealed with the call's checkpoints (WithStore), so that the
// observer of the call on the worker that resumes it finds them in
// Watch.Facts: ids, never secrets. A nil Observer watches nothing.
type ObserverFunc func(Watch) (Observer, map[string]string)

// WithObserver has fn make an observer for every call.
func WithObserver(fn ObserverFunc) Option {
	return func(c *config) error { c.observers = append(c.observers, fn); return nil }
}

// makeObservers makes the call's observers (WithObserver), and
// returns the facts they want sealed with its checkpoints. It runs before
// the session exists; watch starts their goroutines once it does.
func (c *Call) makeObservers(spec Spec) map[string]string {
	if len(c.h.cfg.observers) == 0 {
		return nil
	}
	w := Watch{ID: c.id, Kind: c.kind, Origin: c.origin}
	if c.resumed != nil {
		w.Seq, w.Facts = c.resumed.State.Seq, c.resumed.Transport
	}
	facts := map[string]string{}
	for _, fn := range c.h.cfg.observers {
		o, f := fn(w)
		if o == nil {
			continue
		}
		c.observers = append(c.observers, o)
		for k, v := range f {
			facts[k] = v
		}
	}
	return facts
}

// watch subscribes the call's observers to its session's events.
func (c *Call) watch() {
	for _, o := range c.observers {
		sub := c.sess.Subscribe(eventBuffer)
		c.obsSubs = append(c.obsSubs, sub)
		c.h.wg.Go(func() {
			defer o.Close()
			for e := range sub.C() {
				o.Observe(e)
			}
		})
	}
}

// closeObservers ends the observers of a call whose session never ran
// (its bus never closes, so their subscriptions would not end) or was
// never made.
func (c *Call) closeObservers() {
	// Those made but never subscribed: no goroutine will close them.
	for _, o := range c.observers[len(c.obsSubs):] {
		o.Close()
	}
	// The others' goroutines close them once their subscriptions end.
	for _, s := range c.obsSubs {
		s.Close()
	}
}
