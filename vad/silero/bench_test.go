package silero

import (
	"testing"
	"time"

	"github.com/holdline/holdline/media"
)

func BenchmarkDetect16k(b *testing.B) { benchmarkDetect(b, media.Rate16k) }
func BenchmarkDetect8k(b *testing.B)  { benchmarkDetect(b, media.Rate8k) }

// benchmarkDetect times Detect per 20 ms frame, as frames come in a call:
// at either rate the model runs for 5 frames in 8 (a window is 32 ms).
// %core is the share of one CPU core that a real-time stream takes.
func benchmarkDetect(b *testing.B, rate int) {
	const frame = 20 * time.Millisecond
	d := newDetector(b, rate)
	audio := pinkNoise(rate, 10*time.Second, -30, 4)
	n := media.SamplesFor(rate, frame)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i+n > len(audio) {
			i = 0
		}
		if _, err := d.Detect(media.Frame{Samples: audio[i : i+n], SampleRate: rate}); err != nil {
			b.Fatal(err)
		}
		i += n
	}
	perFrame := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perFrame/float64(frame.Nanoseconds())*100, "%core")
}
