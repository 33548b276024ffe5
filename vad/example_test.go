package vad_test

import (
	"fmt"
	"log"
	"math"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/vad"
)

func Example() {
	// 300 ms of silence, half a second of a 300 Hz tone, then silence.
	const rate = media.Rate16k
	audio := make([]int16, rate*3/2)
	for i := rate * 3 / 10; i < rate*8/10; i++ {
		audio[i] = int16(3000 * math.Sin(2*math.Pi*300*float64(i)/rate))
	}

	det := vad.NewEnergy()
	seg := vad.NewSegmenter(vad.SegmenterConfig{})
	n := media.SamplesFor(rate, media.DefaultFrameDuration)
	for i := 0; i+n <= len(audio); i += n {
		f := media.Frame{Samples: audio[i : i+n], SampleRate: rate}
		p, err := det.Detect(f)
		if err != nil {
			log.Fatal(err)
		}
		switch seg.Push(p, f.Duration()) {
		case vad.Started:
			fmt.Printf("speech from %v, known at %v\n", seg.SpeechStartedAt(), seg.Elapsed())
		case vad.Stopped:
			fmt.Printf("speech until %v, known at %v\n", seg.SpeechStoppedAt(), seg.Elapsed())
		}
	}

	// Output:
	// speech from 300ms, known at 400ms
	// speech until 800ms, known at 1.1s
}
