package runtime

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
)

// crashTools are a read that answers at once and a booking that runs
// until release is closed, counting its runs.
func crashTools(runs *atomic.Int32, release <-chan struct{}) []*tools.Tool {
	lookup := tools.MustNew("check_availability", "Check.", func(ctx context.Context, a tableArgs) (string, error) {
		return `{"free":true}`, nil
	})
	book := tools.MustNew("book_table", "Book.", func(ctx context.Context, a tableArgs) (string, error) {
		runs.Add(1)
		<-release // a worker that dies mid-booking never sees this return
		return `{"code":"HB1900"}`, nil
	}, tools.WithEffect(tools.Mutation), tools.WithInterruptPolicy(tools.Complete), tools.WithTimeout(time.Minute))
	return []*tools.Tool{lookup, book}
}

func callByID(st engine.State, id string) (tools.Call, bool) {
	for _, c := range st.Calls {
		if c.ID == id {
			return c, true
		}
	}
	return tools.Call{}, false
}

// A session taken over mid-booking (its state, and the journal the old
// worker wrote) keeps what was said and the finished lookup, calls the
// booking's outcome unknown because its intent was written, and refuses to
// run it again when the model asks.
func TestResumedSessionNeverRunsAMutationTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		journal := tools.NewMemoryJournal()
		var runsA, runsB atomic.Int32
		release := make(chan struct{})
		defer close(release)
		a := start(t, setup{
			tools: crashTools(&runsA, release),
			opts:  []Option{WithJournal(journal)},
			responses: []scripted.Response{{Text: "One moment.", ToolCalls: []scripted.Call{
				{ID: "l1", Name: "check_availability", Args: tableArgs{2, "19:00"}},
				{ID: "b1", Name: "book_table", Args: tableArgs{2, "19:00"}},
			}}},
		})
		if err := a.s.Inject(context.Background(), "Book a table for two at seven."); err != nil {
			t.Fatal(err)
		}
		a.waitFor(events.ToolStarted, func(e events.Event) bool { return e.CallID == "b1" }, 5*time.Second)
		a.waitFor(events.ToolTerminal, func(e events.Event) bool { return e.CallID == "l1" }, 5*time.Second)
		st, err := a.s.State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		a.cancel() // the worker dies; the booking's body never reports

		b := start(t, setup{
			tools: crashTools(&runsB, release),
			opts:  []Option{WithJournal(journal), engine.WithState(st)},
			responses: []scripted.Response{{Text: "Let me try again.", ToolCalls: []scripted.Call{
				{ID: "b2", Name: "book_table", Args: tableArgs{2, "19:00"}},
			}}, {Text: "I could not confirm it."}},
		})
		now, err := b.s.State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if c, _ := callByID(now, "l1"); c.State != tools.StateSucceeded || !c.Committed {
			t.Errorf("the finished lookup came back as %+v", c)
		}
		if c, _ := callByID(now, "b1"); c.State != tools.StateUnknown || !c.IsError {
			t.Errorf("the booking cut off mid-run came back as %+v; want unknown", c)
		}
		cc := b.context()
		if it := cc.Items[0]; it.Role != llm.RoleUser || !strings.Contains(it.Text, "two at seven") {
			t.Errorf("first item %+v; want the caller's request", it)
		}
		if res, ok := resultOf(cc, "b1"); !ok || !strings.Contains(res.Output, "unknown") {
			t.Errorf("the model is shown %+v for the booking; want that its outcome is unknown", res)
		}
		if err := b.s.Inject(context.Background(), "Did it work? Book it again."); err != nil {
			t.Fatal(err)
		}
		term := b.waitFor(events.ToolTerminal, func(e events.Event) bool { return e.CallID == "b2" }, 5*time.Second)
		if runsB.Load() != 0 {
			t.Errorf("the resumed session ran the booking %d times; want never, its first run's outcome is unknown", runsB.Load())
		}
		t.Logf("the repeat ended %s: %s", term.State, term.Reason)
	})
}

// An outcome the old worker journaled after its last checkpoint is the
// one the resumed session uses.
func TestResumedSessionTakesTheJournaledOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		journal := tools.NewMemoryJournal()
		var runs atomic.Int32
		release := make(chan struct{})
		a := start(t, setup{
			tools: crashTools(&runs, release),
			opts:  []Option{WithJournal(journal)},
			responses: []scripted.Response{{Text: "Booking.", ToolCalls: []scripted.Call{
				{ID: "b1", Name: "book_table", Args: tableArgs{2, "19:00"}},
			}}, {Text: "Booked."}},
		})
		if err := a.s.Inject(context.Background(), "Book it."); err != nil {
			t.Fatal(err)
		}
		a.waitFor(events.ToolStarted, func(e events.Event) bool { return e.CallID == "b1" }, 5*time.Second)
		st, err := a.s.State(context.Background()) // the last checkpoint: b1 running
		if err != nil {
			t.Fatal(err)
		}
		close(release)
		a.waitFor(events.ToolTerminal, func(e events.Event) bool { return e.CallID == "b1" }, 5*time.Second)
		a.cancel()

		b := start(t, setup{tools: crashTools(new(atomic.Int32), nil), opts: []Option{WithJournal(journal), engine.WithState(st)}})
		now, err := b.s.State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if c, _ := callByID(now, "b1"); c.State != tools.StateSucceeded || c.Output != `{"code":"HB1900"}` {
			t.Errorf("the booking came back as %+v; want the journaled success", c)
		}
	})
}

// A state is refused by a session with another id.
func TestStateForAnotherSessionIsRefused(t *testing.T) {
	_, err := New(&Agent{Model: scripted.NewLLM()}, WithID("other"), engine.WithState(engine.State{SessionID: "sess_1", Agent: "a"}))
	if err == nil || !strings.Contains(err.Error(), "sess_1") {
		t.Fatalf("New: %v; want a mismatch naming the state's session", err)
	}
}

// Checkpoints come at clean points with the state as it is then, and
// failing writes are reported once until one succeeds again.
func TestCheckpointsAtCleanPointsAndFailuresReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var saved []engine.State
		lookup := tools.MustNew("check_availability", "Check.", func(ctx context.Context, a tableArgs) (string, error) {
			return `{"free":true}`, nil
		})
		h := start(t, setup{
			tools: []*tools.Tool{lookup},
			opts: []Option{engine.WithCheckpoints(func(st engine.State) {
				mu.Lock()
				saved = append(saved, st)
				mu.Unlock()
			})},
			responses: []scripted.Response{
				{Text: "Checking.", ToolCalls: []scripted.Call{{ID: "l1", Name: "check_availability", Args: tableArgs{2, "19:00"}}}},
				{Text: "It is free."},
			},
		})
		if err := h.s.Inject(context.Background(), "Is there a table?"); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.Idle, nil, 10*time.Second)
		mu.Lock()
		n, last := len(saved), saved[len(saved)-1]
		mu.Unlock()
		if n < 3 {
			t.Fatalf("%d checkpoints for a turn with a tool call; want one at the start, at the call and at the turn's end", n)
		}
		if c, ok := callByID(last, "l1"); !ok || c.State != tools.StateSucceeded {
			t.Errorf("the last checkpoint has the lookup as %+v", c)
		}
		if it := last.Chat[len(last.Chat)-1]; it.Role != llm.RoleAssistant || it.Text != "It is free." || it.Interrupted {
			t.Errorf("the last checkpoint ends with %+v; want the played answer", it)
		}

		ctx := context.Background()
		for _, err := range []error{errors.New("store down"), errors.New("store down"), nil, nil} {
			if err := h.s.CheckpointDone(ctx, 1, err); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		var kinds []string
		h.mu.Lock()
		for _, e := range h.events {
			if e.Kind == events.CheckpointFailed || e.Kind == events.CheckpointSaved {
				kinds = append(kinds, string(e.Kind)+":"+e.Reason)
			}
		}
		h.mu.Unlock()
		if want := []string{"checkpoint_failed:", "checkpoint_saved:recovered", "checkpoint_saved:"}; !slices.Equal(kinds, want) {
			t.Errorf("checkpoint events %v; want %v", kinds, want)
		}
	})
}
