package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
)

// Ask returns at the very moment the agent is idle, after the answer to
// its tool's result has played to the end, and not before; the reply
// holds both turns, as said and as heard, and the call.
func TestAskReturnsWhenTheAgentIsIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lookup := tools.MustNew("lookup", "Look something up.", func(ctx context.Context, a lookupArgs) (string, error) {
			time.Sleep(2 * time.Second) // longer than the preamble
			return "open until 23:00", nil
		}, tools.WithEffect(tools.Read))
		h := start(t, setup{
			tools: []*tools.Tool{lookup},
			responses: []scripted.Response{
				{TTFB: 100 * time.Millisecond, Text: "Let me look that up.", ToolCalls: []scripted.Call{{ID: "c1", Name: "lookup", Args: lookupArgs{Query: "hours"}}}},
				{TTFB: 100 * time.Millisecond, Text: "We are open until eleven tonight."},
			},
		})
		r, err := h.s.Ask(context.Background(), "How late are you open?")
		returned := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		idle, ok := h.find(events.Idle, nil)
		if !ok || !idle.Time.Equal(returned) {
			t.Errorf("Ask returned at %v; the agent was idle at %v (found %v):\n%s", returned.Sub(h.start), idle.At, ok, h.timeline())
		}
		frames := h.out.sent()
		if len(frames) == 0 || frames[len(frames)-1].at.After(returned) {
			t.Errorf("Ask returned before the answer's last frame had played")
		}
		const said = "Let me look that up. We are open until eleven tonight."
		if r.Said != said || r.Heard != said || r.Interrupted {
			t.Errorf("reply said %q, heard %q, interrupted %v; want %q said and heard in full", r.Said, r.Heard, r.Interrupted, said)
		}
		if len(r.Calls) != 1 {
			t.Fatalf("reply has calls %+v; want the lookup", r.Calls)
		}
		if c := r.Calls[0]; c.ID != "c1" || c.Tool != "lookup" || string(c.Args) != `{"query":"hours"}` ||
			c.State != tools.StateSucceeded || c.Output != "open until 23:00" || c.IsError {
			t.Errorf("reply's call = %+v; want lookup {\"query\":\"hours\"} succeeded with its output", c)
		}
		// The reply is the caller's copy: changing it changes nothing.
		r.Calls[0].Args[0] = 'x'
		again, err := h.s.State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := string(again.Calls[0].Args); got != `{"query":"hours"}` {
			t.Errorf("the ledger's arguments became %s after the reply's were changed", got)
		}
	})
}

// A turn cut short is heard only as far as it played: the reply says so,
// and holds the answer to what cut in, which is part of the exchange.
func TestAskCountsWhatWasHeard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, setup{responses: []scripted.Response{
			{TTFB: 100 * time.Millisecond, Text: greeting},
			{TTFB: 100 * time.Millisecond, Text: "Sure, I will stop."},
		}})
		replies := make(chan Reply, 1)
		go func() {
			r, err := h.s.Ask(context.Background(), "Tell me about the bistro.")
			if err != nil {
				t.Error(err)
			}
			replies <- r
		}()
		time.Sleep(1500 * time.Millisecond) // the greeting is playing
		if err := h.s.Inject(context.Background(), "Stop, please."); err != nil {
			t.Fatal(err)
		}
		r := <-replies
		synctest.Wait()
		cut, ok := h.find(events.PlayoutTruncate, nil)
		if !ok || cut.Text == "" || !strings.HasPrefix(greeting, cut.Text) || cut.Text == greeting {
			t.Fatalf("the greeting was not cut mid-sentence (%v %q):\n%s", ok, cut.Text, h.timeline())
		}
		if want := greeting + " Sure, I will stop."; r.Said != want {
			t.Errorf("reply said %q; want %q", r.Said, want)
		}
		if want := cut.Text + " Sure, I will stop."; r.Heard != want {
			t.Errorf("reply heard %q; want %q", r.Heard, want)
		}
		if !r.Interrupted {
			t.Error("reply not marked interrupted")
		}
	})
}

// Ask is bounded: by ctx, by DefaultWaitTimeout when ctx has no deadline,
// and by the session's end.
func TestAskIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, setup{
			opts:      []Option{engine.WithStallTimeout(time.Hour)},
			responses: []scripted.Response{{Hang: true}, {Hang: true}},
		})
		t0 := time.Now()
		_, err := h.s.Ask(context.Background(), "Hello?")
		if !errors.Is(err, ErrWaitTimeout) || !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != DefaultWaitTimeout {
			t.Errorf("Ask of a model that never answers = %v after %v; want ErrWaitTimeout after %v", err, time.Since(t0), DefaultWaitTimeout)
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		t0 = time.Now()
		_, err = h.s.Ask(ctx, "Anyone there?")
		if !errors.Is(err, ErrWaitTimeout) || !errors.Is(err, context.Canceled) || time.Since(t0) != time.Second {
			t.Errorf("Ask cancelled after 1s = %v after %v; want ErrWaitTimeout wrapping context.Canceled", err, time.Since(t0))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		s, err := New(&Agent{Name: "a", Model: scripted.NewLLM(scripted.Response{Hang: true})}, engine.WithStallTimeout(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- s.Run(ctx) }()
		time.AfterFunc(time.Second, cancel)
		if _, err := s.Ask(context.Background(), "Hello?"); !errors.Is(err, ErrSessionClosed) {
			t.Errorf("Ask over a session that ended = %v; want ErrSessionClosed", err)
		}
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
		if _, err := s.Ask(context.Background(), "Hello?"); !errors.Is(err, ErrSessionClosed) {
			t.Errorf("Ask after the session ended = %v; want ErrSessionClosed", err)
		}
	})
}
