package aec

import (
	"testing"
	"time"
)

// benchProcess measures one frame: the Playback of a far frame and the
// Process of the near frame that echoes it, in steady state (delay locked,
// speech on both ends), so that the delay search runs as in a call, once
// every 250 ms, its cost spread over the frames. %core is the share of
// one core the canceller takes in real time: ns per frame over the frame.
func benchProcess(b *testing.B, rate int, opts ...Option) {
	c := newCanceller(b, rate, opts...)
	far := speechLike(rate, 8*time.Second, agentVoice)
	p := path{delay: 120 * time.Millisecond, gainDB: -6, room: true}
	near := mix(p.echo(far, rate), noise(len(far), noiseDBFS, 3))
	f := c.FrameSize()
	frames := len(far) / f
	out := make([]int16, f)
	step := func(i int) {
		k := i * f
		c.Playback(far[k : k+f])
		if err := c.Process(near[k:k+f], out); err != nil {
			b.Fatal(err)
		}
	}
	// Warm up through the lock.
	for i := range frames / 2 {
		step(i)
	}
	if _, ok := c.Delay(); !ok {
		b.Fatal("no delay locked while warming up")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Loop over the second half: the first one again would read as a
		// jump in the echo path.
		step(frames/2 + i%(frames/2))
	}
	b.StopTimer()
	frameNs := float64(time.Duration(f) * time.Second / time.Duration(rate))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/frameNs*100, "%core")
}

func BenchmarkProcess8k(b *testing.B)  { benchProcess(b, 8000) }
func BenchmarkProcess16k(b *testing.B) { benchProcess(b, 16000) }

// Without the residual echo suppressor (speex's preprocessor).
func BenchmarkProcess16kNoSuppression(b *testing.B) {
	benchProcess(b, 16000, WithSuppression(false))
}

// BenchmarkDelaySearch16k measures one search of the delay estimator at
// the default maximum delay, the part of Process that is this package's
// own; it runs once every 250 ms of audio.
func BenchmarkDelaySearch16k(b *testing.B) {
	c := newCanceller(b, 16000)
	far := speechLike(16000, 2*time.Second, agentVoice)
	near := mix(path{delay: 120 * time.Millisecond, gainDB: -6}.echo(far, 16000))
	f := c.FrameSize()
	out := make([]int16, f)
	for k := 0; k+f <= len(far); k += f {
		c.Playback(far[k : k+f])
		if err := c.Process(near[k:k+f], out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.mu.Lock()
		c.readFarDec(c.est.farW, c.est.farStart())
		c.mu.Unlock()
		c.est.estimate()
	}
	b.StopTimer()
	perFrame := float64(b.Elapsed().Nanoseconds()) / float64(b.N) * float64(f) / float64(16000*estEvery/time.Second)
	b.ReportMetric(perFrame, "ns/frame")
}
