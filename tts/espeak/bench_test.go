package espeak

import (
	"context"
	"io"
	"testing"
	"time"
)

// BenchmarkFirstAudio measures the latency to the first audio chunk of a
// typical agent sentence, espeak-ng's start-up included: ns/op is the time
// from Synthesize to the first chunk. total-ms is the time to the end of
// the stream, audio-ms the audio's duration.
func BenchmarkFirstAudio(b *testing.B) {
	for _, bc := range []struct {
		name string
		text string
	}{
		{"short", "Sure. For how many people?"},
		{"sentence", "Good news, a table for two at seven thirty is free. Shall I book it?"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := newSynth(b)
			var total, audio time.Duration
			var first time.Duration
			for b.Loop() {
				start := time.Now()
				st, err := s.Synthesize(context.Background(), bc.text)
				if err != nil {
					b.Fatal(err)
				}
				c, err := st.Recv()
				if err != nil {
					b.Fatal(err)
				}
				first += time.Since(start)
				audio += c.Audio.Duration()
				for {
					c, err := st.Recv()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					audio += c.Audio.Duration()
				}
				total += time.Since(start)
				st.Close()
			}
			b.ReportMetric(float64(first.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "total-ms")
			b.ReportMetric(float64(audio.Milliseconds())/float64(b.N), "audio-ms")
		})
	}
}
