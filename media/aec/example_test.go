//go:build cgo

// The example needs libspeexdsp, which needs cgo.

package aec_test

import (
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"time"

	"github.com/holdline/holdline/media/aec"
)

// agentSpeech stands in for the agent's voice: syllables of a few
// harmonics at a wandering pitch, with a little breath noise.
func agentSpeech(rate int, d time.Duration) []int16 {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]int16, int(int64(rate)*int64(d)/int64(time.Second)))
	syllable := rate / 5
	phase := 0.0
	for i := range out {
		k, j := i/syllable, i%syllable
		pitch := 110 + 30*math.Sin(float64(k)*1.7) + 20*float64(j)/float64(syllable)
		phase += 2 * math.Pi * pitch / float64(rate)
		env := math.Sin(math.Pi * float64(j) / float64(syllable))
		v := math.Sin(phase) + 0.5*math.Sin(2*phase) + 0.3*math.Sin(3*phase) + 0.1*rng.NormFloat64()
		out[i] = int16(3000 * env * v)
	}
	return out
}

func Example() {
	const rate = 8000
	c, err := aec.New(rate)
	if err != nil {
		// Without libspeexdsp the error wraps aec.ErrUnavailable and
		// says what to install.
		log.Fatal(err)
	}
	defer c.Close()

	// The agent talks for 4 s; the caller's line returns it 100 ms later,
	// 6 dB down.
	far := agentSpeech(rate, 4*time.Second)
	echoDelay := rate / 10
	near := make([]int16, len(far))
	for i := echoDelay; i < len(near); i++ {
		near[i] = far[i-echoDelay] / 2
	}

	frame := c.FrameSize()
	out := make([]int16, frame)
	var before, after float64
	for i := 0; i+frame <= len(far); i += frame {
		// What the caller heard during this frame, then what their
		// microphone picked up meanwhile.
		c.Playback(far[i : i+frame])
		if err := c.Process(near[i:i+frame], out); err != nil {
			log.Fatal(err)
		}
		if i >= 2*rate { // the last 2 s
			for k, v := range out {
				before += float64(near[i+k]) * float64(near[i+k])
				after += float64(v) * float64(v)
			}
		}
	}

	// The delay counts from the first Process, when one frame had already
	// been played: 100 ms on the line plus that 20 ms frame.
	d, ok := c.Delay()
	fmt.Println("delay found:", ok, d.Round(time.Millisecond))
	fmt.Println("echo down by 20 dB or more:", 10*math.Log10(before/after) >= 20)
	// Output:
	// delay found: true 120ms
	// echo down by 20 dB or more: true
}
