package eval_test

import (
	"context"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"time"

	"github.com/holdline/holdline/vad"
	"github.com/holdline/holdline/vad/eval"
)

// passThrough stands in for media/aec's canceller (which needs
// libspeexdsp): it removes nothing, and says the agent is audible while it
// plays.
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

// Two call moments, each played through plain voice activity detection
// and through the whole arbiter: the agent's voice echoing back 6 dB down
// with the caller silent, and the caller talking over the agent. Plain
// detection takes the echo for the caller and interrupts the agent before
// the caller has said a word (so the real barge-in counts as missed: the
// agent was already silent). The arbiter pauses on the echo, hears it stop
// with the output, and goes on, while the real barge-in still stops the
// agent.
func ExampleRun() {
	const rate = 16000
	r := rand.New(rand.NewPCG(1, 2))
	scene := func(kind eval.Kind) eval.Scene {
		n := 4 * rate
		agent := make([]int16, n)
		copy(agent[rate/4:], syllables(r, 3*rate, rate, 0.1))
		sc := eval.Scene{Name: string(kind), Kind: kind, Rate: rate, Agent: agent,
			EchoDelay: rate / 10, EchoTaps: []float64{math.Pow(10, -6.0/20)}, GainDB: -6,
			User: make([]int16, n), Noise: make([]int16, n), UserOnset: -1}
		if kind == eval.BargeIn {
			sc.UserOnset = 1500 * time.Millisecond
			copy(sc.User[rate*3/2:], syllables(r, 2*rate, rate, 0.1))
		}
		return sc
	}
	cfg := eval.Config{
		Detector:  func(int) (vad.Detector, error) { return vad.NewEnergy(), nil },
		Canceller: func(int) (eval.Canceller, error) { return &passThrough{}, nil },
		Arbiter:   vad.ArbiterConfig{SpeakingMinSpeech: 160 * time.Millisecond},
	}
	scenes := []eval.Scene{scene(eval.Echo), scene(eval.BargeIn)}
	results, err := eval.Run(context.Background(), cfg, scenes, []eval.Mode{eval.None, eval.Full}, "energy")
	if err != nil {
		log.Fatal(err)
	}
	for _, res := range results {
		fmt.Printf("%-4s false barge-ins %.0f%%, missed barge-ins %.0f%%, echo pauses %.0f%%\n",
			res.Mode, 100*res.FalseBargeInRate, 100*res.MissRate, 100*res.PauseRate)
	}
	// Output:
	// none false barge-ins 100%, missed barge-ins 100%, echo pauses 0%
	// full false barge-ins 0%, missed barge-ins 0%, echo pauses 100%
}
