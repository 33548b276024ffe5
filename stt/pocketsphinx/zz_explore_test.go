package pocketsphinx

import (
	"context"
	"fmt"
	"github.com/holdline/holdline/stt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/media"
)

var exploreSentences = []string{
	"Book a table for two at seven.",
	"I'd like to book a table for four at 8:30.",
	"Can I book a table for two at half past seven?",
	"I want to reserve a table for six at seven o'clock.",
	"Table for five at 6:30.",
	"Could we book for four people at eight?",
	"Reserve a table for two at 9pm, please.",
	"Book a table for three at nine.",
	"Book a table for eight at six.",
	"I'd like to book a table for five at 9:30.",
	"Book a table for six at eight.",
	"Can I book a table for three at seven thirty?",
	"I'd like to book a table for ten at seven.",
	"Book a table for two at 8pm.",
	"Book a table for four at 6:45.",
	"I want to reserve a table for two at nine o'clock.",
	"Could we book for three people at nine?",
	"Book a table for seven at eight thirty.",
	"Reserve a table for five at 7pm, please.",
	"Can I book a table for twelve at seven?",
}

func TestZZExplore(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	opts := []Option{WithPhrases(booking.Phrases...)}
	if a := os.Getenv("ARGS"); a != "" {
		opts = append(opts, WithDecoderArgs(strings.Fields(a)...))
	}
	r := newRecognizer(t, opts...)
	voices := []voice{{"en", 0, 175}, {"en-us", 0, 150}, {"en-us", 0, 190}, {"en+m3", 0, 150}, {"en+m3", 0, 190}}
	for _, rate := range []int{media.Rate16k, media.Rate8k} {
		var mu sync.Mutex
		var lines []string
		errs, nw := 0, 0
		var wg sync.WaitGroup
		for vi, v := range voices {
			wg.Go(func() {
				s, err := r.Stream(context.Background(), rate)
				if err != nil {
					t.Error(err)
					return
				}
				defer s.Close()
				for _, p := range exploreSentences {
					if os.Getenv("FRESH") != "" {
						s.Close()
						s, _ = r.Stream(context.Background(), rate)
					}
					sp, err := speech(t, v, rate, p)
					if err != nil {
						t.Error(err)
						return
					}
					audio := append(append(silence(rate, padding), sp...), silence(rate, padding)...)
					got, conf, err := recogniseConf(s, rate, audio)
					if err != nil {
						t.Error(err)
						return
					}
					ref := words(strings.Join(Normalise(p), " "))
					hyp := words(got)
					e := wordErrors(ref, hyp)
					mu.Lock()
					errs += e
					nw += len(ref)
					lines = append(lines, fmt.Sprintf("%d %.4f %d %-8s %d | %s | %s", e, conf, vi, v.name, v.wpm, strings.Join(ref, " "), got))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		t.Logf("%d Hz: %d errs / %d words (%.1f%%)\n%s", rate, errs, nw, 100-100*float64(errs)/float64(nw), strings.Join(lines, "\n"))
	}
}

func recogniseConf(s stt.Stream, rate int, audio []int16) (string, float64, error) {
	n := media.SamplesFor(rate, 20*time.Millisecond)
	s.(stt.SpeechStarter).StartOfSpeech()
	for i := 0; i < len(audio); i += n {
		if err := s.Write(media.Frame{Samples: audio[i:min(i+n, len(audio))], SampleRate: rate}); err != nil {
			return "", 0, err
		}
	}
	s.EndOfSpeech()
	for {
		tr, err := s.Recv()
		if err != nil {
			return "", 0, err
		}
		if tr.Final {
			return tr.Text, tr.Confidence, nil
		}
	}
}
