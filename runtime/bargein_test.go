package runtime

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/vad"
)

// greetAndWait starts the greeting and lets a second of it play.
func greetAndWait(t *testing.T, h *harness) {
	t.Helper()
	if err := h.s.GenerateReply(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	h.hush(300 * time.Millisecond)
}

// assertWholeGreeting checks the greeting played to its end, every frame
// once, and the context holds all of it.
func assertWholeGreeting(t *testing.T, h *harness) {
	t.Helper()
	done := h.waitFor(events.PlayoutDone, nil, 15*time.Second)
	if done.Text != greeting {
		t.Errorf("played %q, want the whole greeting", done.Text)
	}
	if _, ok := h.find(events.TurnInterrupted, nil); ok {
		t.Errorf("the turn was interrupted:\n%s", h.timeline())
	}
	var frames int
	for _, f := range h.out.sent() {
		if f.epoch == done.Epoch {
			frames++
		}
	}
	if got := time.Duration(frames) * 20 * time.Millisecond; got-done.Played >= 20*time.Millisecond || got < done.Played {
		t.Errorf("%v of frames for %v of audio: audio lost or repeated across the pause", got, done.Played)
	}
	msg, ok := lastAssistant(h.context())
	if !ok || msg.Text != greeting || msg.Interrupted {
		t.Errorf("context: %q (interrupted %v), want the whole greeting", msg.Text, msg.Interrupted)
	}
	if n := len(h.all(events.UserTurn)); n != 0 {
		t.Errorf("%d user turns, want none:\n%s", n, h.timeline())
	}
}

// A cough over the agent pauses it; the output resumes from the same sample
// when the sound does not outlive the echo.
func TestFalseInterruptionResumesWhereItPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, setup{responses: []scripted.Response{{TTFB: 200 * time.Millisecond, Text: greeting}}})
		greetAndWait(t, h)
		h.speak(200 * time.Millisecond)
		h.hush(1500 * time.Millisecond)
		sus := h.waitFor(events.BargeInSuspected, nil, time.Second)
		res := h.waitFor(events.BargeInResumed, nil, time.Second)
		if sus.Reason != vad.ReasonOverAgent || res.Reason != vad.ReasonNotConfirmed {
			t.Errorf("reasons: suspected %q, resumed %q", sus.Reason, res.Reason)
		}
		if pause := res.Time.Sub(sus.Time); pause > vad.DefaultResumeAfter {
			t.Errorf("paused %v, want at most %v", pause, vad.DefaultResumeAfter)
		}
		// Nothing of the turn played while paused.
		for _, f := range h.out.sent() {
			if f.epoch == sus.Epoch && f.at.After(sus.Time) && f.at.Before(res.Time) {
				t.Fatalf("a frame left at %v, inside the pause", f.at.Sub(h.start))
			}
		}
		for range 400 {
			h.hush(20 * time.Millisecond)
			if _, ok := h.find(events.PlayoutDone, nil); ok {
				break
			}
		}
		assertWholeGreeting(t, h)
	})
}

// The recogniser hears the agent's echo: its words are not the caller's
// turn, and neither is a backchannel.
func TestEchoAndBackchannelTranscriptsAreNotTurns(t *testing.T) {
	for _, tc := range []struct{ said, reason string }{
		{"Welcome to the bistro", vad.ReasonEchoTranscript},
		{"uh-huh", vad.ReasonBackchannel},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := scripted.NewSTT()
				rec.Say(tc.said)
				h := start(t, setup{responses: []scripted.Response{{TTFB: 200 * time.Millisecond, Text: greeting}}, stt: rec})
				greetAndWait(t, h)
				h.speak(200 * time.Millisecond)
				for range 400 {
					h.hush(20 * time.Millisecond)
					if _, ok := h.find(events.PlayoutDone, nil); ok {
						break
					}
				}
				ign := h.all(events.TranscriptIgnored)
				var final bool
				for _, e := range ign {
					if e.Reason != tc.reason {
						t.Errorf("%q ignored as %q, want %q", e.Text, e.Reason, tc.reason)
					}
					final = final || (e.Final && strings.EqualFold(e.Text, tc.said))
				}
				if !final {
					t.Errorf("the final %q was not ignored:\n%s", tc.said, h.timeline())
				}
				assertWholeGreeting(t, h)
			})
		})
	}
}

// A pause never outlives its deadline, even when the caller's audio stops
// coming and no verdict can be reached.
func TestPauseEndsAtItsDeadlineWithoutAudio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, setup{responses: []scripted.Response{{TTFB: 200 * time.Millisecond, Text: greeting}}})
		greetAndWait(t, h)
		h.speak(200 * time.Millisecond)
		sus := h.waitFor(events.BargeInSuspected, nil, time.Second)
		res := h.waitFor(events.BargeInResumed, nil, 5*time.Second)
		if res.Reason != "verdict_timeout" || res.Time.Sub(sus.Time) != maxPause {
			t.Errorf("resumed %v after the suspicion for %q, want %v for verdict_timeout", res.Time.Sub(sus.Time), res.Reason, maxPause)
		}
		h.waitFor(events.PlayoutDone, nil, 15*time.Second)
		assertWholeGreeting(t, h)
	})
}
