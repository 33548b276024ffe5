package runtime

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/scripted"
)

// With an endpointing range the caller's words choose the silence that
// ends their turn: the shortest after a complete request, the longest
// after words that leave it open, the usual one otherwise.
func TestEndpointingRangeListensToTheWords(t *testing.T) {
	for _, tc := range []struct {
		said string
		want time.Duration
	}{
		{"Book a table for two.", 250 * time.Millisecond},
		{"what's on the menu", 250 * time.Millisecond}, // one of the agent's phrases
		{"I'd like a table and", 1200 * time.Millisecond},
		{"book a table for two", 500 * time.Millisecond},
	} {
		synctest.Test(t, func(t *testing.T) {
			rec := scripted.NewSTT(scripted.WithLatency(100 * time.Millisecond))
			rec.Say(tc.said)
			h := start(t, setup{
				stt:       rec,
				agent:     func(a *Agent) { a.Phrases = []string{"What's on the menu?"} },
				opts:      []Option{WithEndpointing(500 * time.Millisecond), WithEndpointingRange(250*time.Millisecond, 1200*time.Millisecond)},
				responses: []scripted.Response{{Text: "Sure."}},
			})
			h.hush(200 * time.Millisecond)
			h.speak(600 * time.Millisecond)
			h.hush(2 * time.Second)
			stopped := h.waitFor(events.SpeechStopped, nil, time.Second)
			turn := h.waitFor(events.UserTurn, nil, 3*time.Second)
			if d := turn.Time.Sub(stopped.Time); d != tc.want || turn.Delay != tc.want {
				t.Errorf("%q: the turn ended %v after the speech stopped (its event says %v); want %v", tc.said, d, turn.Delay, tc.want)
			}
		})
	}
	if _, err := New(&Agent{Name: "a", Model: scripted.NewLLM()}, WithEndpointingRange(time.Second, time.Millisecond)); err == nil {
		t.Error("a range whose max is below its min was accepted")
	}
}
