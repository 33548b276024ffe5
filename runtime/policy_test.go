package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
)

type tableArgs struct {
	Party int    `json:"party"`
	Time  string `json:"time"`
}

// resultOf returns the output of call id in cc.
func resultOf(cc llm.ChatContext, id string) (llm.Item, bool) {
	for _, it := range cc.Items {
		if it.Kind == llm.KindToolResult && it.CallID == id {
			return it, true
		}
	}
	return llm.Item{}, false
}

// A deferred mutation whose preamble is interrupted never runs, and the
// model is told it did not run.
func TestDeferredMutationInterruptedNeverRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		book := tools.MustNew("book_table", "Book.", func(ctx context.Context, a tableArgs) (string, error) {
			runs.Add(1)
			return "booked", nil
		})
		h := start(t, setup{
			tools: []*tools.Tool{book},
			responses: []scripted.Response{
				{TTFB: 100 * time.Millisecond, Text: "Sure, let me book that for you right away.",
					ToolCalls: []scripted.Call{{ID: "b1", Name: "book_table", Args: tableArgs{2, "19:00"}}}},
				{TTFB: 100 * time.Millisecond, Text: "Okay, I have not booked anything."},
			},
		})
		if err := h.s.Inject(context.Background(), "Book a table for two at seven."); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.ToolDeferred, nil, time.Second)
		time.Sleep(500 * time.Millisecond) // the preamble is playing
		if err := h.s.Inject(context.Background(), "Wait!"); err != nil {
			t.Fatal(err)
		}
		term := h.waitFor(events.ToolTerminal, nil, time.Second)
		if term.State != string(tools.StateCancelled) || term.Reason != "not_executed" {
			t.Errorf("book_table ended %s (%s); want cancelled, not_executed", term.State, term.Reason)
		}
		h.waitFor(events.Idle, nil, 10*time.Second)
		if n := runs.Load(); n != 0 {
			t.Errorf("the booking ran %d times; want never", n)
		}
		res, ok := resultOf(h.context(), "b1")
		if !ok || !res.IsError || !strings.Contains(res.Output, "not executed") {
			t.Errorf("result for b1 = %+v; want an error saying it was not executed", res)
		}
		if _, ok := h.find(events.ToolStarted, nil); ok {
			t.Error("the deferred call was started")
		}
	})
}

// Not interrupted, a deferred mutation starts once the preamble has played
// out, not before.
func TestDeferredMutationStartsAfterPreamble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		book := tools.MustNew("book_table", "Book.", func(ctx context.Context, a tableArgs) (string, error) {
			return `{"code":"ABC123"}`, nil
		})
		h := start(t, setup{
			tools: []*tools.Tool{book},
			responses: []scripted.Response{
				{Text: "Let me book that.", ToolCalls: []scripted.Call{{ID: "b1", Name: "book_table", Args: tableArgs{2, "19:00"}}}},
				{Text: "Done, code ABC123."},
			},
		})
		if err := h.s.Inject(context.Background(), "Book it."); err != nil {
			t.Fatal(err)
		}
		started := h.waitFor(events.ToolStarted, nil, 5*time.Second)
		played := h.waitFor(events.PlayoutDone, func(e events.Event) bool { return e.Epoch == started.Epoch }, time.Second)
		if started.Seq < played.Seq || !started.Time.Equal(played.Time) {
			t.Errorf("started at %v (seq %d), preamble done at %v (seq %d); want at once after it",
				started.Time.Sub(h.start), started.Seq, played.Time.Sub(h.start), played.Seq)
		}
		h.waitFor(events.PlayoutDone, func(e events.Event) bool { return strings.Contains(e.Text, "ABC123") }, 5*time.Second)
	})
}

// A cancel tool that ignores the cancellation and completes is recorded
// succeeded, and the model sees its real result.
func TestCancelToolThatCompletesAnywayIsSucceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		send := tools.MustNew("send_sms", "Send.", func(ctx context.Context, _ struct{}) (string, error) {
			time.Sleep(2 * time.Second) // ignores ctx
			return "sent", nil
		}, tools.WithInterruptPolicy(tools.Cancel))
		h := start(t, setup{
			tools: []*tools.Tool{send},
			responses: []scripted.Response{
				{Text: "Sending it now, one moment please.", ToolCalls: []scripted.Call{{ID: "s1", Name: "send_sms"}}},
				{Text: "Stopping."},
				{Text: "It was sent after all."},
			},
		})
		if err := h.s.Inject(context.Background(), "Text me."); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.ToolStarted, nil, time.Second)
		time.Sleep(300 * time.Millisecond)
		if err := h.s.Inject(context.Background(), "No, stop."); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.ToolCancelRequested, nil, time.Second)
		term := h.waitFor(events.ToolTerminal, nil, 3*time.Second)
		if term.State != string(tools.StateSucceeded) || term.Reason != "completed_despite_cancel" {
			t.Errorf("send_sms ended %s (%s); want succeeded, completed_despite_cancel", term.State, term.Reason)
		}
		h.waitFor(events.Idle, nil, 10*time.Second)
		reqs := h.model.Requests()
		last := reqs[len(reqs)-1]
		if res, ok := resultOf(last.Context, "s1"); !ok || res.Output != "sent" {
			t.Errorf("the last request shows s1 as %+v; want its real result", res)
		}
	})
}

// A cancel tool that honours its context ends cancelled at once.
func TestCancelToolStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		search := tools.MustNew("search", "Search.", func(ctx context.Context, _ struct{}) (string, error) {
			select {
			case <-time.After(5 * time.Second):
				return "found", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}, tools.WithEffect(tools.Read), tools.WithInterruptPolicy(tools.Cancel))
		h := start(t, setup{
			tools: []*tools.Tool{search},
			responses: []scripted.Response{
				{Text: "Searching.", ToolCalls: []scripted.Call{{ID: "q1", Name: "search"}}},
				{Text: "Okay."},
			},
		})
		if err := h.s.Inject(context.Background(), "Find it."); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.ToolStarted, nil, time.Second)
		time.Sleep(time.Second)
		cutAt := time.Now()
		if err := h.s.Inject(context.Background(), "Never mind."); err != nil {
			t.Fatal(err)
		}
		term := h.waitFor(events.ToolTerminal, nil, time.Second)
		if term.State != string(tools.StateCancelled) || term.Time.Sub(cutAt) != 0 {
			t.Errorf("search ended %s %v after the interruption; want cancelled at once", term.State, term.Time.Sub(cutAt))
		}
		h.waitFor(events.Idle, nil, 5*time.Second)
		if n := len(h.all(events.InferenceSent)); n != 2 {
			t.Errorf("%d model requests; want 2 (the cancelled call gets no answer of its own)", n)
		}
	})
}

// A detached call does not hold its turn: the turn settles at once, the
// agent stays free to talk, and the result gets an inference of its own
// when it lands.
func TestDetachedCallGetsItsOwnInference(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		report := tools.MustNew("build_report", "Build a report.", func(ctx context.Context, _ struct{}) (string, error) {
			time.Sleep(5 * time.Second)
			return "report ready: 42 pages", nil
		}, tools.WithEffect(tools.Read), tools.WithInterruptPolicy(tools.Detach), tools.WithTimeout(time.Minute))
		h := start(t, setup{
			tools: []*tools.Tool{report},
			responses: []scripted.Response{
				{Text: "Starting it now.", ToolCalls: []scripted.Call{{ID: "r1", Name: "build_report"}}},
				{Text: "It is still running."},
				{Text: "Your report is ready."},
			},
		})
		if err := h.s.Inject(context.Background(), "Build my report."); err != nil {
			t.Fatal(err)
		}
		settled := h.waitFor(events.TurnSettled, nil, 4*time.Second)
		if _, ok := h.find(events.ToolTerminal, nil); ok {
			t.Fatal("the detached call finished before its turn settled; the test proves nothing")
		}
		if err := h.s.Inject(context.Background(), "How is it going?"); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.PlayoutDone, func(e events.Event) bool { return strings.Contains(e.Text, "still") }, 4*time.Second)
		reqs := h.model.Requests()
		if res, ok := resultOf(reqs[1].Context, "r1"); !ok || !strings.Contains(res.Output, "background") {
			t.Errorf("the second request shows r1 as %+v; want a provisional 'running in the background'", res)
		}
		h.waitFor(events.PlayoutDone, func(e events.Event) bool { return strings.Contains(e.Text, "ready.") }, 10*time.Second)
		reqs = h.model.Requests()
		if len(reqs) != 3 {
			t.Fatalf("%d requests; want 3", len(reqs))
		}
		if res, _ := resultOf(reqs[2].Context, "r1"); res.Output != "report ready: 42 pages" {
			t.Errorf("the last request shows r1 as %q; want the real result", res.Output)
		}
		if sent := h.all(events.InferenceSent); sent[2].Reason != "tool_result" || sent[2].Time.Before(settled.Time) {
			t.Errorf("the third request went out for %q; want tool_result", sent[2].Reason)
		}
	})
}

// Parallel calls run at once; their results are committed in call order
// whatever order they finish in.
func TestParallelCallsConcurrentResultsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slowFast := func(d time.Duration, out string) *tools.Tool {
			return tools.MustNew("t"+out, "", func(ctx context.Context, _ struct{}) (string, error) {
				time.Sleep(d)
				return out, nil
			}, tools.WithEffect(tools.Read))
		}
		h := start(t, setup{
			tools: []*tools.Tool{slowFast(900*time.Millisecond, "a"), slowFast(100*time.Millisecond, "b"), slowFast(500*time.Millisecond, "c")},
			responses: []scripted.Response{
				{ToolCalls: []scripted.Call{{ID: "1", Name: "ta"}, {ID: "2", Name: "tb"}, {ID: "3", Name: "tc"}}},
				{Text: "All three."},
			},
		})
		if err := h.s.Inject(context.Background(), "Do all three."); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.Idle, nil, 5*time.Second)
		started := h.all(events.ToolStarted)
		ended := h.all(events.ToolTerminal)
		if len(started) != 3 || len(ended) != 3 {
			t.Fatalf("started %d, ended %d; want 3 and 3", len(started), len(ended))
		}
		if span := ended[2].Time.Sub(started[0].Time); span != 900*time.Millisecond {
			t.Errorf("the three calls took %v together; want 900ms (concurrent)", span)
		}
		var order []string
		for _, it := range h.model.Requests()[1].Context.Items {
			if it.Kind == llm.KindToolResult {
				order = append(order, it.CallID+"="+it.Output)
			}
		}
		if strings.Join(order, ",") != "1=a,2=b,3=c" {
			t.Errorf("results in the follow-up: %v; want call order 1=a,2=b,3=c", order)
		}
	})
}

// A repeated mutation after the first timed out is reconciled: the
// Reconciler says whether it happened, and the body never runs again.
func TestTimedOutMutationIsReconciledNotRerun(t *testing.T) {
	for _, tc := range []struct {
		name     string
		found    tools.Reconciliation
		err      error
		runs     int32
		contains string
	}{
		{"reconciler finds it done", tools.Reconciliation{Done: true, Output: "booked ABC123"}, nil, 1, "booked ABC123"},
		{"reconciler finds it not done", tools.Reconciliation{}, nil, 2, "booked"},
		{"reconciler fails", tools.Reconciliation{}, errors.New("booking system down"), 1, "checking failed (booking system down)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var runs atomic.Int32
				var asked sync.Map
				release := make(chan struct{})
				defer close(release)
				book := tools.MustNew("book_table", "Book.", func(ctx context.Context, a tableArgs) (string, error) {
					if runs.Add(1) == 1 {
						<-release // the first attempt hangs past its deadline, ignoring ctx
					}
					return "booked", nil
				}, tools.WithTimeout(time.Second), tools.WithInterruptPolicy(tools.Complete),
					tools.WithReconcile(func(ctx context.Context, ci tools.CallInfo, args json.RawMessage) (tools.Reconciliation, error) {
						asked.Store(ci.ID, ci.IdempotencyKey)
						return tc.found, tc.err
					}))
				call := scripted.Call{Name: "book_table", Args: tableArgs{2, "19:00"}}
				h := start(t, setup{
					tools: []*tools.Tool{book},
					responses: []scripted.Response{
						{ToolCalls: []scripted.Call{call}},
						{Text: "That took too long."},
						{ToolCalls: []scripted.Call{call}},
						{Text: "Here is where it stands."},
					},
				})
				if err := h.s.Inject(context.Background(), "Book it."); err != nil {
					t.Fatal(err)
				}
				h.waitFor(events.PlayoutDone, func(e events.Event) bool { return strings.Contains(e.Text, "too long") }, 5*time.Second)
				if err := h.s.Inject(context.Background(), "Try again."); err != nil {
					t.Fatal(err)
				}
				h.waitFor(events.PlayoutDone, func(e events.Event) bool { return strings.Contains(e.Text, "stands") }, 5*time.Second)
				if n := runs.Load(); n != tc.runs {
					t.Errorf("the body ran %d times; want %d", n, tc.runs)
				}
				if _, ok := h.find(events.ToolReconcile, func(e events.Event) bool { return e.Reason == "started" }); !ok {
					t.Error("no reconciliation")
				}
				calls := 0
				asked.Range(func(k, v any) bool { calls++; return true })
				if calls != 1 {
					t.Errorf("the Reconciler was asked %d times; want once", calls)
				}
				reqs := h.model.Requests()
				last := reqs[len(reqs)-1].Context.Items
				if out := last[len(last)-1].Output; !strings.Contains(out, tc.contains) {
					t.Errorf("the repeat's result = %q; want it to contain %q", out, tc.contains)
				}
			})
		})
	}
}

// A mutation's intent is journaled before its body runs and its outcome
// after; a session restarted on the journal treats an intent without an
// outcome as unknown and never runs it blindly.
func TestJournalWriteAheadAndRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := tools.NewMemoryJournal()
		var sawIntent atomic.Bool
		book := tools.MustNew("book_table", "Book.", func(ctx context.Context, a tableArgs) (string, error) {
			recs, _ := j.Unresolved(ctx, "test")
			sawIntent.Store(len(recs) == 1)
			return "booked", nil
		})
		call := scripted.Call{ID: "b1", Name: "book_table", Args: tableArgs{2, "19:00"}}
		h := start(t, setup{
			tools:     []*tools.Tool{book},
			opts:      []Option{WithJournal(j)},
			responses: []scripted.Response{{ToolCalls: []scripted.Call{call}}, {Text: "Booked."}},
		})
		if err := h.s.Inject(context.Background(), "Book it."); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.Idle, nil, 5*time.Second)
		if !sawIntent.Load() {
			t.Error("the intent was not in the journal while the body ran")
		}
		if out, ok := j.Outcome("test", "b1"); !ok || out.State != tools.StateSucceeded || out.Key == "" {
			t.Errorf("journaled outcome = %+v, %v; want succeeded with a key", out, ok)
		}

		// A crash between intent and outcome, then a new session on the
		// same journal: the repeat is refused as unknown.
		crashed := tools.NewMemoryJournal()
		key := tools.IdempotencyKey("test", "book_table", json.RawMessage(`{"party":2,"time":"19:00"}`))
		if err := crashed.WriteIntent(context.Background(), tools.Record{Session: "test", CallID: "b0", Tool: "book_table", Key: key}); err != nil {
			t.Fatal(err)
		}
		var runs atomic.Int32
		book2 := tools.MustNew("book_table", "Book.", func(ctx context.Context, a tableArgs) (string, error) {
			runs.Add(1)
			return "booked", nil
		})
		h2 := start(t, setup{
			tools:     []*tools.Tool{book2},
			opts:      []Option{WithJournal(crashed)},
			responses: []scripted.Response{{ToolCalls: []scripted.Call{call}}, {Text: "I can't tell."}},
		})
		if err := h2.s.Inject(context.Background(), "Book it."); err != nil {
			t.Fatal(err)
		}
		term := h2.waitFor(events.ToolTerminal, nil, 5*time.Second)
		if runs.Load() != 0 || term.State != string(tools.StateFailed) || term.Reason != "outcome_unknown" {
			t.Errorf("after the crash the repeat ran %d times and ended %s (%s); want never run, failed, outcome_unknown",
				runs.Load(), term.State, term.Reason)
		}
	})
}
