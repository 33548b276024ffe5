package runtime

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/media/aec"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/vad"
	"github.com/holdline/holdline/vad/silero"
)

// BenchmarkCallerAudio measures what one call's caller audio costs on the
// frame path the session runs for every PushAudio: echo cancellation
// (with its delay estimation and the echo tap feeding it what was played),
// voice activity and the barge-in arbiter. One op is one 20 ms frame of
// played and captured audio; core% is the share of one core a call takes.
// The caller is silent and the line echoes the agent at -6 dB after
// 120 ms, so the canceller works on every frame.
//
//	go test -run '^$' -bench BenchmarkCallerAudio -benchmem ./runtime
func BenchmarkCallerAudio(b *testing.B) {
	for _, vadName := range []string{"energy", "silero"} {
		for _, rate := range []int{media.Rate8k, media.Rate16k} {
			b.Run(vadName+"/"+rateName(rate), func(b *testing.B) {
				benchCallerAudio(b, vadName, rate)
			})
		}
	}
}

func rateName(rate int) string {
	if rate == media.Rate8k {
		return "8k"
	}
	return "16k"
}

func benchCallerAudio(b *testing.B, vadName string, rate int) {
	canceller, err := newDefaultCanceller(rate)
	if errors.Is(err, aec.ErrUnavailable) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer canceller.Close()
	var det vad.Detector = vad.NewEnergy()
	if vadName == "silero" {
		s, err := silero.New(rate)
		if errors.Is(err, silero.ErrUnavailable) {
			b.Skip(err)
		}
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		det = s
	}
	s := &Session{mailbox: make(chan any, 64), life: lifecycle{done: make(chan struct{})}}
	defer close(s.life.done)
	go func() {
		for {
			select {
			case <-s.mailbox:
			case <-s.life.done:
				return
			}
		}
	}()
	s.floor.speaking.Store(true)
	tap, err := newEchoTap(media.SinkFunc(func(media.Frame) error { return nil }), canceller, engine.WallClock(), rate, rate)
	if err != nil {
		b.Fatal(err)
	}
	in, err := newAudioInput(s, engine.InputConfig{Detector: det, Rate: rate}, canceller, tap)
	if err != nil {
		b.Fatal(err)
	}

	// Four seconds of syllable-like tones played, and their echo.
	n := media.SamplesFor(rate, 20*time.Millisecond)
	frames := 200
	far := make([]int16, frames*n)
	near := make([]int16, frames*n)
	r := rand.New(rand.NewPCG(1, 2))
	delay := media.SamplesFor(rate, 120*time.Millisecond)
	for i := range far {
		if (i*1000/rate)%250 < 180 {
			t := float64(i) / float64(rate)
			far[i] = int16(6000*math.Sin(2*math.Pi*180*t) + 3000*math.Sin(2*math.Pi*720*t) + 500*r.NormFloat64())
		}
	}
	for i := range near {
		v := 30 * r.NormFloat64()
		if i >= delay {
			v += 0.5 * float64(far[i-delay])
		}
		near[i] = int16(v)
	}
	ctx := context.Background()
	play := func(k int) error {
		k %= frames
		if err := tap.WriteFrame(media.Frame{Samples: far[k*n : (k+1)*n], SampleRate: rate, Epoch: 1}); err != nil {
			return err
		}
		return in.push(ctx, media.Frame{Samples: near[k*n : (k+1)*n], SampleRate: rate})
	}
	// Warm up: the delay locks and the filter converges.
	for k := range 2 * frames {
		if err := play(k); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	k := 0
	for b.Loop() {
		if err := play(k); err != nil {
			b.Fatal(err)
		}
		k++
	}
	perFrame := float64(b.Elapsed()) / float64(b.N)
	b.ReportMetric(100*perFrame/float64(20*time.Millisecond), "core%")
}
