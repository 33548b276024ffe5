package calls_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/calls/callstest"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/store"
	"github.com/holdline/holdline/tools"
)

func fileStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.OpenFile(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// awaitEvent waits for the call's event matching match.
func awaitEvent(t *testing.T, c *calls.Call, what string, match func(events.Event) bool) events.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var seq uint64
	for {
		evs, wake, closed := c.Events(seq)
		for _, e := range evs {
			if match(e) {
				return e
			}
			seq = e.Seq
		}
		if closed {
			t.Fatalf("the call ended before %s", what)
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("no %s in 10 s", what)
		}
	}
}

func kindIs(k events.Kind) func(events.Event) bool {
	return func(e events.Event) bool { return e.Kind == k }
}

func drainAsync(h *calls.Host, opts ...calls.DrainOption) <-chan calls.DrainReport {
	out := make(chan calls.DrainReport, 1)
	go func() {
		rep, _ := h.Drain(context.Background(), opts...)
		out <- rep
	}()
	return out
}

func waitDrained(t *testing.T, done <-chan calls.DrainReport) calls.DrainReport {
	t.Helper()
	select {
	case rep := <-done:
		return rep
	case <-time.After(15 * time.Second):
		t.Fatal("Drain did not return")
	}
	return calls.DrainReport{}
}

// A draining host takes no new call, lets the calls it has run to their
// end when they cannot move, and is drained once they have.
func TestDrainRefusesNewCallsAndWaitsForTheRestToEnd(t *testing.T) {
	h := newHost(t, fileStore(t), "worker-a")
	c, err := callstest.Dial(context.Background(), h, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.DrainRequested():
		t.Fatal("DrainRequested is closed before any drain")
	default:
	}
	done := drainAsync(h)
	<-h.DrainRequested()
	if s := h.DrainState(); s != calls.Draining {
		t.Errorf("drain state %v; want draining", s)
	}
	if _, err := callstest.Dial(context.Background(), h, nil); !errors.Is(err, calls.ErrDraining) {
		t.Errorf("a new call on a draining host: %v; want ErrDraining", err)
	}
	select {
	case <-done:
		t.Fatal("Drain returned while a call was in progress")
	case <-time.After(300 * time.Millisecond):
	}
	c.End("the caller hung up")
	rep := waitDrained(t, done)
	if rep.Calls != 1 || rep.Moved != 0 || rep.Released != 0 {
		t.Errorf("report %+v; want 1 call that ended on its own", rep)
	}
	if s := h.DrainState(); s != calls.Drained {
		t.Errorf("drain state %v; want drained", s)
	}
}

// A call at a clean point moves: the host writes its state, hands the
// line a token, and ends the call here with its checkpoint kept and its
// lease released. The worker the caller reaches picks it up without a
// word (no greeting, no "we were cut off"), and its events say where it
// came from.
func TestDrainMovesAQuietCallToAnotherWorkerSilently(t *testing.T) {
	st := fileStore(t)
	a, b := newHost(t, st, "worker-a"), newHost(t, st, "worker-b")
	c, err := callstest.Dial(context.Background(), a, nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, c.Call, "the greeting's end", kindIs(events.Idle))
	rep := waitDrained(t, drainAsync(a, calls.WithMoves(true)))
	if rep.Calls != 1 || rep.Moved != 1 {
		t.Fatalf("report %+v; want the one call moved", rep)
	}
	moves := c.Moves()
	if len(moves) != 1 {
		t.Fatalf("the line was asked to move %d times; want once", len(moves))
	}
	<-c.Done()
	if _, err := st.Load(context.Background(), c.ID()); err != nil {
		t.Fatalf("the moved call's checkpoint: %v; want it kept for the next worker", err)
	}
	if l, err := st.Acquire(context.Background(), c.ID(), "someone", time.Second); err != nil {
		t.Fatalf("the moved call's lease: %v; want it released, not left to expire", err)
	} else {
		_ = st.Release(context.Background(), l)
	}
	snap, err := b.Resume(context.Background(), moves[0])
	if err != nil {
		t.Fatalf("the next worker resuming the move's token: %v", err)
	}
	// The transport says how the caller came back (a reconnect); the
	// checkpoint says it was a move.
	moved, err := callstest.Dial(context.Background(), b, &calls.Resumed{Snapshot: snap, Origin: calls.Reconnected})
	if err != nil {
		t.Fatal(err)
	}
	defer moved.End("done")
	if o := moved.Info().Origin; o != "moved" {
		t.Errorf("origin %q on the new worker; want moved", o)
	}
	e := awaitEvent(t, moved.Call, "session_moved", kindIs(events.SessionMoved))
	if e.Text != "from worker-a to worker-b" {
		t.Errorf("session_moved says %q; want from worker-a to worker-b", e.Text)
	}
	time.Sleep(300 * time.Millisecond) // room for a wrong greeting to start
	evs, _, _ := moved.Events(0)
	if slices.ContainsFunc(evs, kindIs(events.TurnStarted)) {
		t.Errorf("the agent spoke after the move; want it silent (events %v)", kinds(evs))
	}
}

func kinds(evs []events.Event) []events.Kind {
	out := make([]events.Kind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

// A call is not moved between a mutation's intent and its outcome: the
// drain waits for the booking to finish and the agent to say so.
func TestDrainWaitsForTheToolInFlight(t *testing.T) {
	st := fileStore(t)
	release := make(chan struct{})
	var booked atomic.Int32
	book := tools.MustNew("book", "Book a table.", func(ctx context.Context, _ struct{}) (string, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		booked.Add(1)
		return "booked", nil
	})
	newAgent := func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := scripted.NewTTS(scripted.WithTTSRate(8000), scripted.WithWordsPerSecond(20))
		if err != nil {
			return nil, nil, err
		}
		model := scripted.NewLLMFunc(func(req llm.Request) scripted.Response {
			items := req.Context.Items
			if last := items[len(items)-1]; last.Kind == llm.KindMessage && last.Role == llm.RoleUser {
				return scripted.Response{Text: "Booking it.", ToolCalls: []scripted.Call{{Name: "book"}}}
			}
			return scripted.Response{Text: "Done."}
		})
		return &runtime.Agent{Name: "desk", Model: model, TTS: voice, STT: scripted.NewSTT(), Tools: []*tools.Tool{book}}, nil, nil
	}
	h, err := calls.New(newAgent, calls.WithStore(st, "worker-a", testKey))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := callstest.Dial(context.Background(), h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Inject(context.Background(), "Book a table."); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, c.Call, "the booking's start", kindIs(events.ToolStarted))
	done := drainAsync(h, calls.WithMoves(true))
	time.Sleep(500 * time.Millisecond)
	if n := len(c.Moves()); n != 0 {
		t.Fatalf("the call moved with the booking in flight")
	}
	close(release)
	rep := waitDrained(t, done)
	if rep.Moved != 1 || booked.Load() != 1 {
		t.Fatalf("report %+v, %d bookings; want the call moved after its one booking", rep, booked.Load())
	}
	<-c.Done()
	if r := c.Reason(); r != "moved to another worker" {
		t.Errorf("the call ended with %q; want moved", r)
	}
	snap, err := handoffLoad(st, c.ID())
	if err != nil {
		t.Fatal(err)
	}
	if calls := snap.State.Calls; len(calls) != 1 || !calls[0].State.Terminal() {
		t.Errorf("the state handed over holds calls %+v; want the booking with its outcome", calls)
	}
}

// A call that cannot move stays, is not tried again, and is released at
// the drain's deadline: its checkpoint stays and its lease is free for
// the worker the caller comes back to.
func TestDrainReleasesWhatIsLeftAtTheDeadline(t *testing.T) {
	st := fileStore(t)
	h := newHost(t, st, "worker-a")
	c, err := callstest.Dial(context.Background(), h, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.FailMoves(errors.New("the phone refused the REFER"))
	awaitEvent(t, c.Call, "the greeting's end", kindIs(events.Idle))
	rep := waitDrained(t, drainAsync(h, calls.WithMoves(true), calls.WithDrainTimeout(time.Second)))
	if rep.Calls != 1 || rep.Moved != 0 || rep.Released != 1 {
		t.Fatalf("report %+v; want the call released at the deadline", rep)
	}
	<-c.Done()
	if r := c.Reason(); r != "the worker drained: released for another worker" {
		t.Errorf("the call ended with %q", r)
	}
	snap, err := handoffLoad(st, c.ID())
	if err != nil {
		t.Fatalf("the released call's checkpoint: %v", err)
	}
	if from := snap.Transport[calls.FactMovedFrom]; from != "" {
		t.Errorf("the checkpoint of a call that did not move says it moved from %q", from)
	}
	if h.DrainState() != calls.Drained {
		t.Errorf("drain state %v; want drained", h.DrainState())
	}
}

func handoffLoad(st store.Store, id string) (handoff.Snapshot, error) {
	return handoff.Resume(context.Background(), st, id, testKey)
}

// A call whose caller is away (its connection dropped, waiting to be
// resumed) is released as soon as the drain begins: nothing of it is on
// a line here, and its caller picks it up wherever they come back. The
// drain does not wait out the resume window for it.
func TestDrainReleasesACallWhoseCallerIsAway(t *testing.T) {
	st := fileStore(t)
	h := newHost(t, st, "worker-a")
	c, err := callstest.Dial(context.Background(), h, nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, c.Call, "the greeting's end", kindIs(events.Idle))
	c.Drop()
	awaitEvent(t, c.Call, "the drop", kindIs(events.TransportLost))
	start := time.Now()
	rep := waitDrained(t, drainAsync(h))
	if rep.Released != 1 || time.Since(start) > 5*time.Second {
		t.Fatalf("report %+v after %v; want the away call released at once", rep, time.Since(start))
	}
	<-c.Done()
	if _, err := st.Load(context.Background(), c.ID()); err != nil {
		t.Fatalf("the released call's checkpoint: %v; want it kept for the caller's return", err)
	}
}
