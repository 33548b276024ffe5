package corpus

import (
	"testing"
	"time"
)

// TestLinesLevelsVoices checks the conditions beyond delay×gain: barge-ins
// on lines without echo and from callers 6 dB quieter than the agent, on
// both kinds of line, and backchannels in three voices, 0.4-0.8 s long.
func TestLinesLevelsVoices(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	type cond struct {
		noEcho bool
		level  float64
	}
	bargeIns := map[cond]int{}
	var noEchoEcho int
	for _, p := range makePlans(o) {
		switch p.Kind {
		case BargeIn:
			bargeIns[cond{p.NoEcho, p.UserLevelDB}]++
			if p.NoEcho && (p.GainDB != NoEchoGainDB || p.Delay != 0) {
				t.Errorf("%s: no echo at delay %v gain %v", p.Name, p.Delay, p.GainDB)
			}
		case Echo:
			if p.NoEcho {
				noEchoEcho++
			}
		}
	}
	for _, noEcho := range []bool{true, false} {
		for _, l := range userLevels {
			if n := bargeIns[cond{noEcho, l}]; n < 20 {
				t.Errorf("%d default barge-ins with no echo %v, caller at %g dB: want at least 20", n, noEcho, l)
			}
		}
	}
	if noEchoEcho == 0 {
		t.Error("no echo-only clip on a line without echo")
	}

	clips := corpusFor(t, Options{Rate: 16000, Seed: 7, CacheDir: testCache, EchoSentences: 1, BargeIns: 6, Backchannels: 15})
	voices := map[string]bool{}
	for _, c := range clips {
		switch c.Kind {
		case Echo:
			if c.NoEcho {
				for i, v := range c.Near {
					if d := int(v) - int(c.Background[i]); d < -1 || d > 1 {
						t.Fatalf("%s: Near holds more than the background at %d", c.Name, i)
					}
				}
			}
		case Backchannel:
			voices[c.Voice] = true
			if d := c.UserEnd - c.UserOnset; d < 400*time.Millisecond || d > 800*time.Millisecond {
				t.Errorf("%s: %q in voice %s lasts %v, want 0.4-0.8 s", c.Name, c.UserText, c.Voice, d)
			} else {
				t.Logf("%s: %q in voice %s lasts %v", c.Name, c.UserText, c.Voice, d)
			}
		}
	}
	if len(voices) < 3 {
		t.Errorf("backchannels in voices %v, want at least 3", voices)
	}
}
