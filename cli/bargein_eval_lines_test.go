package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/holdline/holdline/internal/need"
	"github.com/holdline/holdline/media/aec"
	"github.com/holdline/holdline/vad"
	"github.com/holdline/holdline/vad/corpus"
	"github.com/holdline/holdline/vad/eval"
)

// TestBargeInEvalQuietCallerOnLineWithoutEcho: the corpus has barge-ins on
// lines without echo and from callers 6 dB quieter than the agent, and
// backchannels in three voices; and on a line whose echo never comes back
// the echo canceller takes nothing for echo, so full mode hears every
// quieter caller.
func TestBargeInEvalQuietCallerOnLineWithoutEcho(t *testing.T) {
	for _, rate := range []int{16000, 8000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			clips, err := corpus.Generate(context.Background(), corpus.Options{Rate: rate, Seed: 1, EchoSentences: 1, BargeIns: 36, Backchannels: 6})
			if errors.Is(err, corpus.ErrTools) {
				need.Missing(t, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			type cond struct {
				noEcho bool
				level  float64
			}
			bargeIns := map[cond]int{}
			voices := map[string]bool{}
			for _, c := range clips {
				switch c.Kind {
				case corpus.BargeIn:
					bargeIns[cond{c.NoEcho, c.UserLevelDB}]++
				case corpus.Backchannel:
					voices[c.Voice] = true
				}
			}
			for _, c := range []cond{{true, 0}, {true, -6}, {false, 0}, {false, -6}} {
				if bargeIns[c] == 0 {
					t.Errorf("no barge-in with no echo %v, caller at %g dB", c.noEcho, c.level)
				}
			}
			if len(voices) < 3 {
				t.Errorf("backchannels in voices %v, want at least 3", voices)
			}

			var quiet []eval.Scene
			for _, sc := range scenesOf(clips) {
				if sc.Kind == eval.BargeIn && sc.NoEcho && sc.UserLevelDB == -6 {
					quiet = append(quiet, sc)
				}
			}
			// With the recogniser, as a call has it: a quiet caller's
			// first words may end a short sound, and its words decide.
			cfg := eval.Config{
				Canceller:   func(rate int) (eval.Canceller, error) { return aec.New(rate) },
				Detector:    func(int) (vad.Detector, error) { return vad.NewEnergy(), nil },
				Transcriber: sphinx{vocab: corpus.Vocabulary(clips)},
			}
			res, err := eval.Run(context.Background(), cfg, quiet, []eval.Mode{eval.Full}, "energy")
			if errors.Is(err, aec.ErrUnavailable) {
				need.Missing(t, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			r := res[0]
			if r.BargeIns != len(quiet) || r.BargeIns < 6 {
				t.Fatalf("%d barge-ins evaluated of %d, want at least 6", r.BargeIns, len(quiet))
			}
			// At most one: since a sound shorter than a second is judged by
			// its words, the energy detector at 8 kHz can chop a quiet
			// caller into short sounds whose misheard words do not ask for
			// the floor (one of these six; none of the whole corpus's 24,
			// see the README).
			if missed := int(math.Round(r.MissRate * float64(r.BargeIns))); missed > 1 {
				t.Errorf("full: missed %d of %d callers 6 dB quieter than the agent on a line without echo, want at most one",
					missed, r.BargeIns)
			}
			t.Logf("%d Hz: %d quiet callers, miss %.0f%%, detect p50 %.0f ms p95 %.0f ms", rate, r.BargeIns, 100*r.MissRate, r.DetectP50, r.DetectP95)
		})
	}
}
