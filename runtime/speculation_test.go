package runtime

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
)

// firstAnswerDelay runs one spoken turn (final transcript 100 ms after the
// speech stops, 400 ms endpointing, a model with 300 ms to its first token)
// and returns how long after the user_turn event the answer's first audio
// left, with the harness.
func firstAnswerDelay(t *testing.T, opts ...Option) (time.Duration, *harness) {
	rec := scripted.NewSTT(scripted.WithLatency(100 * time.Millisecond))
	rec.Say("book a table for two")
	h := start(t, setup{
		stt:       rec,
		opts:      append([]Option{WithEndpointing(400 * time.Millisecond)}, opts...),
		responses: []scripted.Response{{TTFB: 300 * time.Millisecond, Text: "For what time?"}},
	})
	h.hush(200 * time.Millisecond)
	h.speak(600 * time.Millisecond)
	h.hush(1500 * time.Millisecond)
	turn := h.waitFor(events.UserTurn, nil, time.Second)
	h.waitFor(events.PlayoutDone, func(e events.Event) bool { return e.Text == "For what time?" }, 5*time.Second)
	var first time.Time
	for _, f := range h.out.sent() {
		if f.epoch != 0 {
			first = f.at
			break
		}
	}
	if first.Before(turn.Time) {
		t.Fatalf("the answer's audio left %v before the caller's turn ended", turn.Time.Sub(first))
	}
	return first.Sub(turn.Time), h
}

// The model is asked when the caller's words are in, not after the
// endpointing delay; the answer waits, unplayed, for the turn to end, and
// then plays at once: sooner than the model's first token after the turn.
func TestSpeculativeAnswerPlaysOnlyOnceTheTurnEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		delay, h := firstAnswerDelay(t)
		started, ok := h.find(events.SpeculationStarted, nil)
		if !ok {
			t.Fatalf("no speculation_started; events:\n%s", h.timeline())
		}
		turn, _ := h.find(events.UserTurn, nil)
		used, ok := h.find(events.SpeculationUsed, nil)
		if !ok || used.Epoch != started.Epoch || started.Text != "book a table for two" {
			t.Fatalf("speculation %+v not used (%+v); events:\n%s", started, used, h.timeline())
		}
		if won := turn.Time.Sub(started.Time); used.Delay != won || won < 250*time.Millisecond {
			t.Errorf("speculation_used says %v won, the model was asked %v before the turn ended; want equal, about 300 ms", used.Delay, won)
		}
		if delay >= 300*time.Millisecond {
			t.Errorf("first audio %v after the turn ended, want less than the model's 300 ms to its first token", delay)
		}
		if reqs := h.model.Requests(); len(reqs) != 1 {
			t.Errorf("%d model requests, want 1", len(reqs))
		}
		if it, ok := lastAssistant(h.context()); !ok || it.Text != "For what time?" {
			t.Errorf("last assistant message %+v", it)
		}
	})
}

// With speculation off, the model is asked at the end of the turn, and the
// first audio comes after its first token.
func TestWithoutSpeculationTheModelIsAskedAtTheEndOfTheTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		delay, h := firstAnswerDelay(t, WithSpeculation(false))
		if _, ok := h.find(events.SpeculationStarted, nil); ok {
			t.Errorf("speculation with WithSpeculation(false); events:\n%s", h.timeline())
		}
		if delay < 300*time.Millisecond {
			t.Errorf("first audio %v after the turn ended, want at least the model's 300 ms", delay)
		}
	})
}

// A caller who goes on speaking after their words were in: the answer to
// the first words is discarded before any of it plays, its mutation never
// runs, a read declared speculative may have run (and its result is not
// kept), and nothing of it reaches the context or the ledger. The answer
// to the whole turn is the one heard.
func TestSpeculationDiscardedWhenTheCallerGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var booked, looked atomic.Int32
		book, err := tools.New("book", "Book a table.", func(ctx context.Context, a struct {
			People int `json:"people"`
		}) (string, error) {
			booked.Add(1)
			return "booked", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		hours, err := tools.New("hours", "Opening hours.", func(ctx context.Context, a struct{}) (string, error) {
			looked.Add(1)
			return "open 6 to 11 pm", nil
		}, tools.WithEffect(tools.Read), tools.WithSpeculative())
		if err != nil {
			t.Fatal(err)
		}
		rec := scripted.NewSTT(scripted.WithLatency(100 * time.Millisecond))
		rec.Say("book a table")
		rec.Say("no wait, what are your hours")
		h := start(t, setup{
			stt:   rec,
			tools: []*tools.Tool{book, hours},
			opts:  []Option{WithEndpointing(400 * time.Millisecond)},
			responses: []scripted.Response{
				{TTFB: 10 * time.Millisecond, TokensPerSecond: math.Inf(1), Text: "Booking it now.", ToolCalls: []scripted.Call{
					{ID: "c1", Name: "book", Args: map[string]int{"people": 2}}, {ID: "c2", Name: "hours"}}},
				{TTFB: 50 * time.Millisecond, Text: "Let me look.", ToolCalls: []scripted.Call{{ID: "c3", Name: "hours"}}},
				{TTFB: 50 * time.Millisecond, Text: "We open at six."},
			},
		})
		h.hush(200 * time.Millisecond)
		h.speak(600 * time.Millisecond)
		h.hush(450 * time.Millisecond) // the words are in; the turn has not ended
		h.speak(800 * time.Millisecond)
		h.hush(2 * time.Second)
		h.waitFor(events.PlayoutDone, func(e events.Event) bool { return e.Text == "We open at six." }, 10*time.Second)

		discarded := h.all(events.SpeculationDiscarded)
		if len(discarded) != 1 || discarded[0].Reason != "speech" {
			t.Fatalf("discarded %+v, want one, for the caller's speech; events:\n%s", discarded, h.timeline())
		}
		if n := booked.Load(); n != 0 {
			t.Errorf("the booking ran %d times for words the caller went on from", n)
		}
		if n := looked.Load(); n != 2 {
			t.Errorf("hours ran %d times, want twice: early for each answer; events:\n%s", n, h.timeline())
		}
		for _, e := range h.all(events.ToolRequested) {
			if e.Epoch == discarded[0].Epoch {
				t.Errorf("the discarded answer's call reached the ledger: %+v", e)
			}
		}
		for _, e := range h.all(events.PlayoutStarted) {
			if e.Epoch == discarded[0].Epoch {
				t.Errorf("the discarded answer played: %+v", e)
			}
		}
		for _, f := range h.out.sent() {
			if f.epoch == discarded[0].Epoch {
				t.Fatalf("a frame of the discarded answer left at %v", f.at.Sub(h.start))
			}
		}
		turn, _ := h.find(events.UserTurn, nil)
		if turn.Text != "book a table no wait, what are your hours" {
			t.Errorf("user turn %q", turn.Text)
		}
		early, ok := h.find(events.ToolStarted, func(e events.Event) bool { return e.Reason == "speculative" })
		if !ok || early.Time.After(turn.Time) || early.CallID != "c3" {
			t.Errorf("the used answer's read did not start early (%+v); events:\n%s", early, h.timeline())
		}
		for _, it := range h.context().Items {
			if strings.Contains(it.Text, "Booking") || it.CallID == "c1" || it.CallID == "c2" {
				t.Errorf("the discarded answer is in the context: %+v", it)
			}
		}
		var results int
		for _, it := range h.context().Items {
			if it.Kind == llm.KindToolResult && it.CallID == "c3" && it.Output == "open 6 to 11 pm" {
				results++
			}
		}
		if results != 1 {
			t.Errorf("the early read's result is in the context %d times, want once", results)
		}
	})
}

// A handoff while a speculative answer waits for the turn to end: the old
// agent's answer is discarded, and the caller's words are answered by the
// agent that took over.
func TestHandoffDiscardsASpeculativeAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := scripted.NewSTT(scripted.WithLatency(100 * time.Millisecond))
		rec.Say("my bill is wrong")
		h := start(t, setup{
			stt:       rec,
			opts:      []Option{WithEndpointing(400 * time.Millisecond)},
			responses: []scripted.Response{{TTFB: 50 * time.Millisecond, Text: "Front desk here."}},
		})
		billingModel := scripted.NewLLM(scripted.Response{TTFB: 50 * time.Millisecond, Text: "Billing here, let me look."})
		billing := &Agent{Name: "billing", Instructions: "Billing.", Model: billingModel, TTS: h.voice}
		h.hush(200 * time.Millisecond)
		h.speak(600 * time.Millisecond)
		h.hush(350 * time.Millisecond)
		spec := h.waitFor(events.SpeculationStarted, nil, time.Second)
		if _, ok := h.find(events.UserTurn, nil); ok {
			t.Fatalf("the turn ended before the handoff could come in the speculation window; events:\n%s", h.timeline())
		}
		if err := h.s.Handoff(context.Background(), billing); err != nil {
			t.Fatal(err)
		}
		h.hush(time.Second)
		h.waitFor(events.PlayoutDone, func(e events.Event) bool { return e.Text == "Billing here, let me look." }, 5*time.Second)
		d, ok := h.find(events.SpeculationDiscarded, nil)
		if !ok || d.Epoch != spec.Epoch || d.Reason != "handoff" {
			t.Errorf("discarded %+v, want the speculation of epoch %d, for the handoff; events:\n%s", d, spec.Epoch, h.timeline())
		}
		for _, e := range h.all(events.PlayoutStarted) {
			if e.Epoch == spec.Epoch {
				t.Errorf("the old agent's speculative answer played")
			}
		}
		if reqs := billingModel.Requests(); len(reqs) != 1 || !strings.Contains(reqs[0].Context.Items[len(reqs[0].Context.Items)-1].Text, "my bill is wrong") {
			t.Errorf("billing's requests %+v, want one answering the caller's words", reqs)
		}
	})
}
