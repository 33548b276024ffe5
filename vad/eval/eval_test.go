package eval

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/holdline/holdline/vad"
)

// passThrough is a canceller that removes nothing, to test the harness's
// modes apart from any real canceller.
type passThrough struct{ far int }

func (p *passThrough) Playback(s []int16) {
	for _, v := range s {
		if v != 0 {
			p.far = 20
			return
		}
	}
	p.far--
}
func (p *passThrough) Process(near, out []int16) error { copy(out, near); return nil }
func (p *passThrough) FarActive() bool                 { return p.far > 0 }
func (p *passThrough) Delay() (time.Duration, bool)    { return 0, false }
func (p *passThrough) Close() error                    { return nil }

// syllables is speech-like noise: 180 ms bursts with 80 ms gaps, at rms.
func syllables(r *rand.Rand, n, rate int, rms float64) []int16 {
	out := make([]int16, n)
	for i := range out {
		if (i*1000/rate)%260 < 180 {
			out[i] = int16(r.NormFloat64() * rms * math.MaxInt16)
		}
	}
	return out
}

func scene(kind Kind, gainDB float64) Scene {
	const rate = 16000
	r := rand.New(rand.NewPCG(1, uint64(-gainDB)))
	total := 4 * rate
	agent := make([]int16, total)
	copy(agent[rate/4:], syllables(r, 3*rate, rate, 0.1))
	sc := Scene{Name: string(kind), Kind: kind, Rate: rate, Agent: agent, AgentText: "one two three four",
		EchoDelay: rate / 10, EchoTaps: []float64{math.Pow(10, gainDB/20)},
		User: make([]int16, total), Noise: make([]int16, total), UserOnset: -1, GainDB: gainDB}
	switch kind {
	case BargeIn:
		sc.UserOnset = 1500 * time.Millisecond
		copy(sc.User[rate*3/2:], syllables(r, 2*rate, rate, 0.1))
	case Backchannel:
		sc.UserOnset = 1500 * time.Millisecond
		copy(sc.User[rate*3/2:], syllables(r, rate*3/10, rate, 0.1))
	}
	return sc
}

func TestModesOnSyntheticScenes(t *testing.T) {
	cfg := Config{
		Detector:  func(int) (vad.Detector, error) { return vad.NewEnergy(), nil },
		Canceller: func(int) (Canceller, error) { return &passThrough{}, nil },
		// The echo's 180 ms bursts each make a suspicion; with 160 ms
		// needed, the last one ends before the caller begins.
		Arbiter: vad.ArbiterConfig{SpeakingMinSpeech: 160 * time.Millisecond},
	}
	scenes := []Scene{scene(Echo, -6), scene(BargeIn, -6), scene(Backchannel, -6)}
	res, err := Run(context.Background(), cfg, scenes, Modes, "energy")
	if err != nil {
		t.Fatal(err)
	}
	byMode := map[Mode]Result{}
	for _, r := range res {
		byMode[r.Mode] = r
		t.Logf("%+v", r)
	}
	// Plain VAD takes the loud echo for the caller.
	if r := byMode[None]; r.FalseBargeInRate != 1 {
		t.Errorf("none: false barge-in rate %v on a -6 dB echo, want 1", r.FalseBargeInRate)
	}
	// Pause and listen: the echo stops with the output, the caller goes
	// on, the backchannel is too short to confirm.
	full := byMode[Full]
	if full.FalseBargeInRate != 0 || full.PauseRate != 1 {
		t.Errorf("full: false rate %v, pause rate %v; want 0 and 1", full.FalseBargeInRate, full.PauseRate)
	}
	if full.MissRate != 0 || full.BackchannelRate != 0 {
		t.Errorf("full: miss rate %v, backchannel rate %v; want 0 and 0", full.MissRate, full.BackchannelRate)
	}
	if full.DetectP95 <= 0 || full.DetectP95 > 250 {
		t.Errorf("full: detection p95 %v ms, want within (0, 250]", full.DetectP95)
	}
	if got := full.FalseBargeInByGain["-6"]; got != 0 {
		t.Errorf("by gain: %v", full.FalseBargeInByGain)
	}
}

// transcribed answers every piece of audio with fixed words.
type transcribed []Word

func (w transcribed) Transcribe(_ context.Context, _ int, audio [][]int16) ([][]Word, error) {
	out := make([][]Word, len(audio))
	for i := range out {
		out[i] = w
	}
	return out, nil
}

func TestTranscriptCheckResumesOnTheAgentsWords(t *testing.T) {
	// A -3 dB echo with a long tail: speech goes on after the pause, but
	// the recogniser hears the agent's own words.
	sc := scene(Echo, -3)
	sc.EchoTaps = make([]float64, 16000*6/10) // 600 ms of room
	for i := 0; i < len(sc.EchoTaps); i += 400 {
		sc.EchoTaps[i] = 0.7 * math.Exp(-float64(i)/4000)
	}
	cfg := Config{
		Detector:  func(int) (vad.Detector, error) { return vad.NewEnergy(), nil },
		Canceller: func(int) (Canceller, error) { return &passThrough{}, nil },
		// The echo outlasts the short-sound bound, so its length alone
		// would confirm it.
		Arbiter: vad.ArbiterConfig{EchoTail: 100 * time.Millisecond, ShortSound: 300 * time.Millisecond},
	}
	without, err := Run(context.Background(), cfg, []Scene{sc}, []Mode{Full}, "energy")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Transcriber = transcribed{{Text: "one", End: 100 * time.Millisecond}, {Text: "two", End: 200 * time.Millisecond}}
	cfg.STTLatency = 50 * time.Millisecond
	with, err := Run(context.Background(), cfg, []Scene{sc}, []Mode{Full}, "energy")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("without transcripts %+v\nwith %+v", without[0], with[0])
	if without[0].FalseBargeInByGain["-3"] != 1 || with[0].FalseBargeInByGain["-3"] != 0 {
		t.Errorf("false barge-in without transcripts %v, with %v; want 1 then 0", without[0].FalseBargeInByGain, with[0].FalseBargeInByGain)
	}
}
