package pocketsphinx

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/media"
)

// cpuTime is the CPU time the process has used, all threads.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecode recognises booking phrases with the booking grammar, as
// a session feeds them (20 ms frames between StartOfSpeech and
// EndOfSpeech), and reports the real-time factor, CPU seconds per second
// of audio (rtf), and the latency of the final: from EndOfSpeech, once the
// decoder has caught up with the audio, to the final transcript
// (final-ms). A session feeds audio in real time, which the decoder keeps
// up with; here it comes all at once, so the wait for it to catch up is
// left out.
func BenchmarkDecode(b *testing.B) {
	r := newRecognizer(b, WithPhrases(booking.Phrases...))
	for _, rate := range []int{media.Rate16k, media.Rate8k} {
		b.Run(fmt.Sprint(rate), func(b *testing.B) {
			var utts [][]int16
			var audio time.Duration
			for _, p := range booking.Phrases[:8] {
				sp, err := speech(b, callerVoice, rate, p)
				if err != nil {
					b.Fatal(err)
				}
				u := append(append(silence(rate, padding), sp...), silence(rate, padding)...)
				utts = append(utts, u)
				audio += media.Frame{Samples: u, SampleRate: rate}.Duration()
			}
			st, err := r.Stream(context.Background(), rate)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			s := st.(*Stream)
			n := media.SamplesFor(rate, 20*time.Millisecond)
			var final time.Duration
			b.ResetTimer()
			cpu0 := cpuTime()
			for b.Loop() {
				for _, u := range utts {
					if err := s.StartOfSpeech(); err != nil {
						b.Fatal(err)
					}
					for i := 0; i < len(u); i += n {
						if err := s.Write(media.Frame{Samples: u[i:min(i+n, len(u))], SampleRate: rate}); err != nil {
							b.Fatal(err)
						}
					}
					for len(s.in) > 0 {
						time.Sleep(100 * time.Microsecond)
					}
					start := time.Now()
					if err := s.EndOfSpeech(); err != nil {
						b.Fatal(err)
					}
					if _, err := s.Recv(); err != nil {
						b.Fatal(err)
					}
					final += time.Since(start)
				}
			}
			cpu := cpuTime() - cpu0
			b.ReportMetric(cpu.Seconds()/(audio.Seconds()*float64(b.N)), "rtf")
			b.ReportMetric(float64(final.Microseconds())/1000/float64(b.N*len(utts)), "final-ms")
		})
	}
}

// BenchmarkNewDecoder measures what making a decoder costs: loading the
// acoustic model and the grammar, which the first utterance after the
// pool's decoders were freed waits for.
func BenchmarkNewDecoder(b *testing.B) {
	r := newRecognizer(b, WithPhrases(booking.Phrases...))
	for b.Loop() {
		d, err := newDecoder(r.pool.lib, r.pool.args)
		if err != nil {
			b.Fatal(err)
		}
		d.free()
	}
}
