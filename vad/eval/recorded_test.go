package eval

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/holdline/holdline/vad"
)

// recorded is sc as a recording of it would be: the microphone as it heard
// the agent play on, never paused.
func recorded(sc Scene) Scene {
	mic := make([]int16, len(sc.User))
	taps := echoPath(sc)
	for k := range mic {
		acc := float64(sc.User[k]) + float64(sc.Noise[k])
		for _, t := range taps {
			if p := k - t.lag; p >= 0 && p < len(sc.Agent) {
				acc += t.gain * float64(sc.Agent[p])
			}
		}
		mic[k] = clamp(acc)
	}
	r := Scene{Name: sc.Name, Kind: sc.Kind, Rate: sc.Rate, Agent: sc.Agent, AgentText: sc.AgentText,
		Mic: mic, UserOnset: sc.UserOnset, GainDB: sc.GainDB, Before: sc.Before}
	if sc.Before != nil {
		r.BeforeMic = sc.HeardBefore()
	}
	return r
}

func TestRecordedScenes(t *testing.T) {
	cfg := Config{
		Detector:  func(int) (vad.Detector, error) { return vad.NewEnergy(), nil },
		Canceller: func(int) (Canceller, error) { return &passThrough{}, nil },
		Arbiter:   vad.ArbiterConfig{SpeakingMinSpeech: 160 * time.Millisecond},
	}
	var sim, rec []Scene
	for _, k := range []Kind{Echo, BargeIn, Backchannel} {
		sc := scene(k, -6)
		sim, rec = append(sim, sc), append(rec, recorded(sc))
	}
	// Until the first barge-in is confirmed, the modes without pause and
	// listen play the agent on, so a recording is all they need: the
	// figures are the simulation's.
	modes := []Mode{None, Gating, AEC}
	want, err := Run(context.Background(), cfg, sim, modes, "energy")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Run(context.Background(), cfg, rec, modes, "energy")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("recorded %+v\nsimulated %+v", got, want)
	}

	// Pause and listen: on the line the echo stops with the output; in a
	// recording it goes on through the pause, and with no canceller to
	// remove it, it confirms the suspicion.
	sr, err := Run(context.Background(), cfg, sim[:1], []Mode{Full}, "energy")
	if err != nil {
		t.Fatal(err)
	}
	rr, err := Run(context.Background(), cfg, rec[:1], []Mode{Full}, "energy")
	if err != nil {
		t.Fatal(err)
	}
	if sr[0].FalseBargeInRate != 0 || rr[0].FalseBargeInRate != 1 {
		t.Errorf("full on a -6 dB echo: false barge-in rate %v simulated, %v recorded; want 0 and 1",
			sr[0].FalseBargeInRate, rr[0].FalseBargeInRate)
	}
}

// tape is a canceller that keeps what it was given.
type tape struct {
	passThrough
	played, heard []int16
}

func (c *tape) Playback(s []int16) { c.passThrough.Playback(s); c.played = append(c.played, s...) }
func (c *tape) Process(near, out []int16) error {
	c.heard = append(c.heard, near...)
	return c.passThrough.Process(near, out)
}

func TestRecordedSceneWarmsWithItsEarlierRecording(t *testing.T) {
	sc := scene(BargeIn, -6)
	sc.Before = slices.Clone(sc.Agent[:sc.Rate])
	rec := recorded(sc)
	n := sc.Rate / 50
	for _, tc := range []struct {
		name      string
		beforeMic []int16
		want      []int16 // what the canceller hears before the scene
	}{
		{"as long", rec.BeforeMic, rec.BeforeMic},
		{"longer", append(slices.Clone(rec.BeforeMic), 1, 2, 3), rec.BeforeMic},
		{"shorter", rec.BeforeMic[:n], append(slices.Clone(rec.BeforeMic[:n]), make([]int16, len(sc.Before)-n)...)},
		{"none", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rec
			r.BeforeMic = tc.beforeMic
			c := &tape{}
			if err := warm(c, r, n); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.heard, tc.want) {
				t.Errorf("the canceller heard %d samples (%v...), want %d", len(c.heard), c.heard[:min(len(c.heard), 4)], len(tc.want))
			}
			if tc.want != nil && !slices.Equal(c.played, sc.Before) {
				t.Errorf("the canceller was played %d samples, want Before's %d", len(c.played), len(sc.Before))
			}
		})
	}
	// A simulated scene warms with Before heard through its echo path: the
	// recording made of it above.
	c := &tape{}
	if err := warm(c, sc, n); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.heard, rec.BeforeMic) || !slices.Equal(sc.HeardBefore(), rec.BeforeMic) {
		t.Errorf("a simulated scene's canceller heard something other than its HeardBefore")
	}
	var echo bool
	for _, v := range c.heard {
		echo = echo || v != 0
	}
	if !echo {
		t.Errorf("the simulated earlier turn has no echo in it")
	}
}
