package runtime

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
)

// A reply asked for while a turn is still answering (a greeting requested
// just after the caller's first typed words) preempts that turn: the
// caller is answered once, not twice, and the reply's request holds the
// caller's words.
func TestReplyRequestedDuringATurnPreemptsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, setup{
			textOnly: true,
			responses: []scripted.Response{
				{TTFB: 300 * time.Millisecond, Text: "First answer."},
				{TTFB: 300 * time.Millisecond, Text: "Hello! Two pepperoni, coming up."},
			},
		})
		ctx := context.Background()
		if err := h.s.Inject(ctx, "Two pepperoni please"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := h.s.GenerateReply(ctx, "Greet the caller."); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.Idle, nil, 10*time.Second)
		done := h.all(events.PlayoutDone)
		if len(done) != 1 || done[0].Text != "Hello! Two pepperoni, coming up." {
			t.Errorf("answers played: %v; want only the reply's\n%s", done, h.timeline())
		}
		if _, ok := h.find(events.TurnInterrupted, func(e events.Event) bool { return e.Epoch == 1 && e.Reason == "reply" }); !ok {
			t.Errorf("the first turn was not preempted by the reply\n%s", h.timeline())
		}
		ctxText := h.context().String()
		if strings.Count(ctxText, "Two pepperoni please") != 1 || strings.Contains(ctxText, "First answer.") {
			t.Errorf("context:\n%s\nwant the caller's words once and no trace of the preempted answer", ctxText)
		}
	})
}

// The text before a tool call goes to the voice when the call begins, not
// when its arguments have finished streaming: "Let me check that for you."
// plays while the model is still writing the call.
func TestTextBeforeAToolCallIsSpokenBeforeTheCallEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lookup := tools.MustNew("lookup", "Looks something up.",
			func(context.Context, struct{}) (string, error) { return "found", nil }, tools.WithEffect(tools.Read))
		h := start(t, setup{
			tools: []*tools.Tool{lookup},
			responses: []scripted.Response{
				// Six words, then the call's two deltas, two tokens a second.
				{TTFB: 300 * time.Millisecond, TokensPerSecond: 2, Text: "Let me check that for you.",
					ToolCalls: []scripted.Call{{ID: "c1", Name: "lookup"}}},
				{TTFB: 300 * time.Millisecond, Text: "Found it."},
			},
		})
		if err := h.s.Inject(context.Background(), "Look it up"); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.Idle, nil, 20*time.Second)
		started, ok := h.find(events.PlayoutStarted, func(e events.Event) bool { return e.Epoch == 1 })
		requested, ok2 := h.find(events.ToolRequested, nil)
		if !ok || !ok2 {
			t.Fatalf("no playout or no tool call\n%s", h.timeline())
		}
		if started.At >= requested.At {
			t.Errorf("the text before the call started playing at %v, after the call was complete at %v; want it spoken while the call streams\n%s",
				started.At, requested.At, h.timeline())
		}
	})
}
