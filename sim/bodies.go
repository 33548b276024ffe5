package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/tools"
)

// bodies runs a Go agent's tool bodies (WithRealTools) on goroutines inside
// a testing/synctest bubble. The run's virtual clock and the bubble's fake
// clock are kept in step: while a body runs, the run sleeps in the bubble
// until its next piece of work, and a body that returns first wakes it, so
// its outcome lands at the virtual time its body took. synctest.Wait before
// every step lets each body go as far as it can at that instant, which
// keeps a run a function of its seed as long as the bodies are (no I/O
// outside the bubble).
type bodies struct {
	r       *run
	tools   map[string]*tools.Tool // this run's agent's, by name
	release func()
	base    time.Time // bubble time at the run's time 0
	ctx     context.Context
	stop    context.CancelFunc
	done    chan landing
	running int
	calls   map[string]*engine.ToolCall // running bodies', by call id
}

// landing is a body's return.
type landing struct {
	src uint64 // the call's scheduling source, which also orders landings
	tr  *toolRun
	o   engine.ToolOutcome
}

// newBodies makes this run's agent; it fails outside a bubble, where a
// body's sleep would take wall-clock time.
func newBodies(r *run, fn runtime.AgentFunc) (*bodies, error) {
	if !inBubble(r.sc.realTools) {
		return nil, errors.New("Go tool bodies (WithRealTools) run only inside a testing/synctest bubble: " +
			"call RunScenario or RunOnce from synctest.Test, or use simtest.RealTools")
	}
	ctx, stop := context.WithCancel(context.Background())
	agent, release, err := fn(ctx)
	if err == nil && agent == nil {
		err = errors.New("its AgentFunc returned no agent")
	}
	if err != nil {
		if release != nil {
			release()
		}
		stop()
		return nil, fmt.Errorf("Go agent %q: %w", r.sc.Agent.Go, err)
	}
	b := &bodies{r: r, tools: map[string]*tools.Tool{}, release: release, ctx: ctx, stop: stop,
		done: make(chan landing, 8), calls: map[string]*engine.ToolCall{}}
	for _, t := range agent.Tools {
		if t != nil {
			b.tools[t.Name()] = t
		}
	}
	// The run's time 0 is now, in the bubble.
	b.base = time.Now().Add(-r.sched.now())
	return b, nil
}

// inBubble reports whether the caller runs inside a synctest bubble:
// synctest.Wait panics outside one.
func inBubble(wait func()) (in bool) {
	defer func() {
		if recover() != nil {
			in = false
		}
	}()
	wait()
	return true
}

// elapsed is the bubble's time as the run's.
func (b *bodies) elapsed() time.Duration { return time.Since(b.base) }

// start runs r's body on a goroutine in the context a live session gives
// it (engine.NewToolCall): its deadline, its turn's playout and the call's
// identity.
func (b *bodies) start(r engine.ToolRun, tr *toolRun, src uint64) {
	// The bubble may lag the run while no body runs; catch it up, so the
	// deadline and the body's sleeps start at the run's now.
	if d := b.r.sched.now() - b.elapsed(); d > 0 {
		time.Sleep(d)
	}
	call := engine.NewToolCall(b.ctx, r)
	b.calls[r.CallID] = call
	b.running++
	go func() {
		defer call.Release()
		out, err := r.Tool.Run(call.Ctx, r.Args)
		l := landing{src: src, tr: tr, o: call.Outcome(out, err)}
		select {
		case b.done <- l:
		case <-b.ctx.Done(): // the run is over
		}
	}()
}

// cancel interrupts a body, as the live session's cancel policy does.
func (b *bodies) cancel(id string) {
	if c := b.calls[id]; c != nil {
		c.Interrupt()
	}
}

// advance lets the bubble's time run to the run's next piece of work (due
// at next, when ok), or to the scenario's timeout when there is none, and
// schedules the bodies that return by then. It reports whether any did:
// the run then looks again at what comes first. Without running bodies it
// does nothing.
func (b *bodies) advance(next time.Duration, ok bool) bool {
	if b == nil || b.running == 0 {
		return false
	}
	to := b.r.sc.Timeout
	if ok {
		to = min(to, next)
	}
	var landed []landing
	if d := to - b.elapsed(); d > 0 {
		t := time.NewTimer(d)
		select {
		case l := <-b.done:
			landed = append(landed, l)
		case <-t.C:
		}
		t.Stop()
	}
	// Every body woken at this instant goes as far as it can.
	b.r.sc.realTools()
	for more := true; more; {
		select {
		case l := <-b.done:
			landed = append(landed, l)
		default:
			more = false
		}
	}
	// In call order: the channel's order is the goroutines'.
	slices.SortFunc(landed, func(x, y landing) int { return cmp.Compare(x.src, y.src) })
	at := b.elapsed()
	for _, l := range landed {
		b.running--
		delete(b.calls, l.o.CallID)
		b.r.sched.at(at, l.src, func() { b.r.edges.landed(l.tr, l.o) })
	}
	return len(landed) > 0
}

// close ends the run's bodies' contexts and releases its agent. A body
// still running is abandoned, as a session abandons one at its end.
func (b *bodies) close() {
	if b == nil {
		return
	}
	b.stop()
	if b.release != nil {
		b.release()
	}
}
