package runtime

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime/engine"
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
		// A cough is never dead air: the pause lasts the echo tail and
		// the quiet that rules the sound out, well under a second.
		if pause, most := res.Time.Sub(sus.Time), vad.DefaultEchoTail+vad.DefaultResumeQuiet; pause > most {
			t.Errorf("paused %v, want at most %v", pause, most)
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
		// The arbiter's verdict is due within the suspicion's bound in
		// audio time (a sound still going at ShortSound is a turn, then
		// the quiet that rules one out; no recogniser, no wait for
		// words); with no audio at all the pause ends a little after.
		// The core allows 200 ms past the verdict's bound.
		const verdictGrace = 200 * time.Millisecond
		want := vad.DefaultShortSound - vad.DefaultSpeakingMinSpeech + vad.DefaultResumeQuiet + verdictGrace
		if res.Reason != "verdict_timeout" || res.Time.Sub(sus.Time) != want {
			t.Errorf("resumed %v after the suspicion for %q, want %v for verdict_timeout", res.Time.Sub(sus.Time), res.Reason, want)
		}
		h.waitFor(events.PlayoutDone, nil, 15*time.Second)
		assertWholeGreeting(t, h)
	})
}

// echoLine is a phone line that sends the agent's output back at a delay
// and gain: what the sink got at time t reaches the caller's side at
// t+delay.
type echoLine struct {
	mu    sync.Mutex
	start time.Time
	rate  int
	line  []int16 // by sample index from start
}

func (l *echoLine) WriteFrame(f media.Frame) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	at := media.SamplesFor(l.rate, time.Since(l.start))
	if need := at + len(f.Samples); need > len(l.line) {
		l.line = append(l.line, make([]int16, need-len(l.line))...)
	}
	copy(l.line[at:], f.Samples)
	return nil
}

// heard returns n samples of what the line carried, ending delay ago,
// scaled by gain.
func (l *echoLine) heard(n int, delay time.Duration, gain float64) []int16 {
	l.mu.Lock()
	defer l.mu.Unlock()
	end := media.SamplesFor(l.rate, time.Since(l.start)-delay)
	out := make([]int16, n)
	for i := range out {
		if k := end - n + i; k >= 0 && k < len(l.line) {
			out[i] = int16(gain * float64(l.line[k]))
		}
	}
	return out
}

// The agent's own voice comes back on the line, loud: it must not
// interrupt itself, and the whole greeting plays (KNOWN_FAILURES F).
func TestAgentDoesNotInterruptItselfOnItsEcho(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input engine.InputConfig
		// maxPauses: the canceller removes the echo, so the output does
		// not even stutter; without it, pause and listen is all there is.
		maxPauses int
	}{
		{"with the echo canceller", engine.InputConfig{}, 1},
		{"without it", engine.InputConfig{NoEchoCancellation: true}, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				line := &echoLine{start: time.Now(), rate: media.Rate16k}
				h := start(t, setup{responses: []scripted.Response{{TTFB: 200 * time.Millisecond, Text: greeting}},
					opts: []Option{WithOutput(line, media.Rate16k), engine.WithInput(tc.input)}})
				if err := h.s.GenerateReply(context.Background(), ""); err != nil {
					t.Fatal(err)
				}
				n := media.SamplesFor(media.Rate16k, 20*time.Millisecond)
				for range 3000 {
					time.Sleep(20 * time.Millisecond)
					f := media.Frame{Samples: line.heard(n, 120*time.Millisecond, 0.5), SampleRate: media.Rate16k}
					if err := h.s.PushAudio(context.Background(), f); err != nil {
						t.Fatal(err)
					}
					if _, ok := h.find(events.PlayoutDone, nil); ok {
						break
					}
				}
				if e, ok := h.find(events.BargeInConfirmed, nil); ok {
					t.Fatalf("the agent interrupted itself (%s):\n%s", e.Reason, h.timeline())
				}
				pauses := len(h.all(events.BargeInSuspected))
				t.Logf("output paused %d times on its own echo", pauses)
				if pauses > tc.maxPauses {
					t.Errorf("output paused %d times on its own echo, want at most %d", pauses, tc.maxPauses)
				}
				done, ok := h.find(events.PlayoutDone, nil)
				if !ok || done.Text != greeting {
					t.Fatalf("the greeting did not play to its end:\n%s", h.timeline())
				}
			})
		})
	}
}

// With continuous output the line carries silence whenever the agent does
// not speak, the pause of a suspected barge-in included: a WebRTC or RTP
// receiver then plays silence at once instead of stretching the last
// sounds it had.
func TestContinuousOutputCarriesSilenceThroughAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, setup{
			responses: []scripted.Response{{TTFB: 200 * time.Millisecond, Text: greeting}},
			opts:      []Option{engine.WithContinuousOutput(), engine.WithInput(engine.InputConfig{NoEchoCancellation: true})},
		})
		greetAndWait(t, h)
		h.speak(200 * time.Millisecond)
		h.hush(1500 * time.Millisecond)
		sus := h.waitFor(events.BargeInSuspected, nil, time.Second)
		res := h.waitFor(events.BargeInResumed, nil, time.Second)
		var silent, gaps int
		var last time.Time
		for _, f := range h.out.sent() {
			if !last.IsZero() && f.at.Sub(last) > 20*time.Millisecond {
				gaps++
			}
			last = f.at
			if f.epoch == 0 && f.at.After(sus.Time) && f.at.Before(res.Time) {
				silent++
			}
		}
		if gaps != 0 {
			t.Errorf("%d gaps in the output: want a frame every 20 ms", gaps)
		}
		if want := int(res.Time.Sub(sus.Time)/(20*time.Millisecond)) - 1; silent < want {
			t.Errorf("%d silent frames during a %v pause; want at least %d", silent, res.Time.Sub(sus.Time), want)
		}
	})
}

// A caller interrupts with a word as short as "wait", on a browser and on
// a phone line alike: its words ask for the floor. A sound as short that
// the recogniser makes nothing of (a cough) only pauses the agent.
func TestCallerInterruptsWithAShortWord(t *testing.T) {
	for _, tc := range []struct {
		name, said        string
		echoFree, confirm bool
	}{
		{"wait, echo free", "wait", true, true},
		{"wait, on a line that may echo", "wait", false, true},
		{"a cough, echo free", "", true, false},
		{"a cough, on a line that may echo", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := scripted.NewSTT()
				if tc.said != "" {
					rec.Say(tc.said)
				}
				h := start(t, setup{
					responses: []scripted.Response{{TTFB: 200 * time.Millisecond, Text: greeting}},
					stt:       rec,
					opts:      []Option{engine.WithContinuousOutput(), engine.WithInput(engine.InputConfig{NoEchoCancellation: true, EchoFree: tc.echoFree})},
				})
				greetAndWait(t, h)
				h.speak(400 * time.Millisecond)
				h.hush(1500 * time.Millisecond)
				_, confirmed := h.find(events.BargeInConfirmed, nil)
				_, resumed := h.find(events.BargeInResumed, nil)
				if confirmed != tc.confirm || resumed == tc.confirm {
					t.Errorf("confirmed %v, resumed %v; want confirmed %v:\n%s", confirmed, resumed, tc.confirm, h.timeline())
				}
			})
		})
	}
}

// The canceller's finding about the line is an event: on a line that
// returns the agent's voice, present with its delay and gain; on one that
// returns nothing, none.
func TestEchoPathIsReported(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gain  float64
		state string
	}{{"echoing line", 0.5, "present"}, {"clean line", 0, "none"}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				line := &echoLine{start: time.Now(), rate: media.Rate16k}
				h := start(t, setup{responses: []scripted.Response{{TTFB: 200 * time.Millisecond, Text: greeting}},
					opts: []Option{WithOutput(line, media.Rate16k)}})
				if err := h.s.GenerateReply(context.Background(), ""); err != nil {
					t.Fatal(err)
				}
				n := media.SamplesFor(media.Rate16k, 20*time.Millisecond)
				for range 3000 {
					time.Sleep(20 * time.Millisecond)
					f := media.Frame{Samples: line.heard(n, 120*time.Millisecond, tc.gain), SampleRate: media.Rate16k}
					if err := h.s.PushAudio(context.Background(), f); err != nil {
						t.Fatal(err)
					}
					if _, ok := h.find(events.PlayoutDone, nil); ok {
						break
					}
				}
				e, ok := h.find(events.EchoPath, nil)
				if !ok {
					t.Fatalf("no echo_path event:\n%s", h.timeline())
				}
				if e.State != tc.state {
					t.Errorf("echo_path %s; want %s", e.State, tc.state)
				}
				if tc.state == "present" && (e.Delay < 100*time.Millisecond || e.Delay > 200*time.Millisecond || e.GainDB < -9 || e.GainDB > -3) {
					t.Errorf("echo_path delay %v gain %.1f dB; want about 120 ms (plus the frames in flight) and -6 dB", e.Delay, e.GainDB)
				}
			})
		})
	}
}
