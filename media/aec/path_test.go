package aec

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// callerShare is the share of far-active frames in [lo, hi) whose EchoOnly
// was want: taken for echo alone (true) or for the caller (false).
func callerShare(c *Canceller, tr trace, lo, hi time.Duration, want bool) float64 {
	f := c.FrameSize()
	var n, k int
	for i := samplesFor(c.rate, lo) / f; i < samplesFor(c.rate, hi)/f && i < len(tr.echoOnly); i++ {
		if !tr.active[i] {
			continue
		}
		n++
		if tr.echoOnly[i] == want {
			k++
		}
	}
	return float64(k) / float64(max(n, 1))
}

// On a line that returns no echo, a caller quieter than the agent is the
// caller, not echo: once the agent's first second has come back as
// nothing, the level rule is off, and the path says there is no echo.
func TestCleanLineQuietCallerIsNotEcho(t *testing.T) {
	for _, rate := range []int{8000, 16000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			t.Parallel()
			c := newCanceller(t, rate)
			far := speechLike(rate, 6*time.Second, agentVoice)
			quiet := voice{seed: 2, f0: 210, level: agentVoice.level - 6}
			from, to := samplesFor(rate, 2*time.Second), samplesFor(rate, 5*time.Second)
			user := make([]float64, len(far))
			copy(user[from:to], float(speechLike(rate, 3*time.Second, quiet)))
			near := mix(user, noise(len(far), noiseDBFS, 3))
			tr := run(t, c, far, near)
			got := callerShare(c, tr, 2*time.Second+100*time.Millisecond, 5*time.Second, false)
			t.Logf("caller 6 dB quieter than the agent taken for the caller in %.0f%% of far-active frames", 100*got)
			if got < 0.9 {
				t.Errorf("caller taken for the caller in %.0f%% of frames, want 90%%", 100*got)
			}
			if p := c.EchoPath(); p.State != EchoNone {
				t.Errorf("echo path = %+v; want none", p)
			}
		})
	}
}

// On a line that echoes, the path is measured: the delay the estimator
// locked and the echo's gain, within a few dB.
func TestEchoPathMeasured(t *testing.T) {
	for _, tc := range []struct {
		delay time.Duration
		gain  float64
	}{{120 * time.Millisecond, -6}, {60 * time.Millisecond, -10}, {250 * time.Millisecond, -20}} {
		t.Run(fmt.Sprint(tc.delay, tc.gain), func(t *testing.T) {
			t.Parallel()
			rate := 8000
			c := newCanceller(t, rate)
			far := speechLike(rate, 4*time.Second, agentVoice)
			p := path{delay: tc.delay, gainDB: tc.gain}
			near := mix(p.echo(far, rate), noise(len(far), noiseDBFS, 3))
			run(t, c, far, near)
			got := c.EchoPath()
			t.Logf("measured %+v", got)
			if got.State != EchoPresent {
				t.Fatalf("echo path = %+v; want present", got)
			}
			if d := got.Delay - tc.delay; d < -5*time.Millisecond || d > 25*time.Millisecond {
				t.Errorf("delay %v; want about %v (one frame more is how Delay counts)", got.Delay, tc.delay)
			}
			if math.Abs(got.GainDB-tc.gain) > 3 {
				t.Errorf("gain %.1f dB; want %.0f dB within 3 dB", got.GainDB, tc.gain)
			}
		})
	}
}

// A caller quieter than the agent but louder than the measured echo is
// the caller even before the filter converges: a line returning echo at
// -20 dB does not hide a caller 6 dB below the agent.
func TestMeasuredEchoGainSetsTheLevelRule(t *testing.T) {
	rate := 8000
	c := newCanceller(t, rate)
	far := speechLike(rate, 6*time.Second, agentVoice)
	quiet := voice{seed: 2, f0: 210, level: agentVoice.level - 6}
	from, to := samplesFor(rate, 2*time.Second), samplesFor(rate, 5*time.Second)
	user := make([]float64, len(far))
	copy(user[from:to], float(speechLike(rate, 3*time.Second, quiet)))
	p := path{delay: 250 * time.Millisecond, gainDB: -20, room: true}
	near := mix(p.echo(far, rate), user, noise(len(far), noiseDBFS, 3))
	tr := run(t, c, far, near)
	got := callerShare(c, tr, 2*time.Second+100*time.Millisecond, 5*time.Second, false)
	t.Logf("caller 6 dB quieter taken for the caller in %.0f%% of far-active frames; path %+v", 100*got, c.EchoPath())
	if got < 0.9 {
		t.Errorf("caller taken for the caller in %.0f%% of frames, want 90%%", 100*got)
	}
}
