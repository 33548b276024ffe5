package runtime

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/scripted"
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
