package pocketsphinx

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zaf/g711"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/vad"
	"github.com/holdline/holdline/vad/corpus"
)

// The barge-in corpus's backchannels ("uh-huh", "yeah", "okay", "mm-hmm",
// "right" in three voices, 0.4-0.8 s), recognised with the booking agent's
// grammar as a call would hear them, at 16 kHz and on telephone audio
// (8 kHz through G.711):
// none comes out as words that ask for the floor (the barge-in arbiter's
// rule, with its default floor words), which would cut the agent for a
// caller who only meant "go on".
func TestBackchannelsAreNotHeardAsFloorWords(t *testing.T) {
	r := newRecognizer(t, WithPhrases(booking.Phrases...))
	arbiter := vad.NewArbiter(vad.ArbiterConfig{})
	for _, rate := range []int{media.Rate16k, media.Rate8k} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			clips, err := corpus.Generate(context.Background(), corpus.Options{Rate: rate, EchoSentences: 1, BargeIns: 1, Backchannels: 15})
			if err != nil {
				absent(t, err)
			}
			s, err := r.Stream(context.Background(), rate)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var heard []string
			asBackchannel := 0
			for _, c := range clips {
				if c.Kind != corpus.Backchannel {
					continue
				}
				at := func(d time.Duration) int { return int(d.Seconds() * float64(rate)) }
				said := slices.Clone(c.User[at(c.UserOnset):at(c.UserEnd)])
				if rate == media.Rate8k {
					// Over a phone line: through G.711.
					for i, v := range said {
						said[i] = g711.DecodeUlawFrame(g711.EncodeUlawFrame(v))
					}
				}
				audio := append(append(silence(rate, 200*time.Millisecond), said...), silence(rate, 200*time.Millisecond)...)
				text, err := recognise(s, rate, audio)
				if err != nil {
					t.Fatal(err)
				}
				heard = append(heard, fmt.Sprintf("%s (%s) -> %q", c.UserText, c.Voice, text))
				words := vad.Words(text)
				if len(words) > 0 && strings.Join(words, " ") == strings.Join(vad.Words(c.UserText), " ") {
					asBackchannel++
				}
				if arbiter.AsksFloor(text) {
					t.Errorf("%s in voice %s heard as %q: words that ask for the floor", c.UserText, c.Voice, text)
				}
			}
			t.Logf("%d of %d heard as said:\n%s", asBackchannel, len(heard), strings.Join(heard, "\n"))
		})
	}
}
