package pocketsphinx

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt"
)

// minWordAccuracy is the target: word accuracy on the booking agent's
// phrases, spoken by espeak-ng, at 16 kHz and on telephone audio.
const minWordAccuracy = 0.90

// padding is the silence around each utterance: the pre-roll a session's
// StartOfSpeech brings, and the hangover before its EndOfSpeech.
const padding = 300 * time.Millisecond

// TestBookingPhrasesWordAccuracy synthesises every booking phrase with
// espeak-ng (package tts/espeak), at 16 kHz and at 8 kHz (telephone audio,
// upsampled by the stream), recognises it with a recogniser built from
// booking.Phrases, and reports word accuracy, 1 - word edit distance /
// reference words, over all phrases.
func TestBookingPhrasesWordAccuracy(t *testing.T) {
	r := newRecognizer(t, WithPhrases(booking.Phrases...))
	for _, rate := range []int{media.Rate16k, media.Rate8k} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			acc, table := score(recogniseAll(t, r, rate, booking.Phrases))
			t.Logf("word accuracy at %d Hz: %.1f%%\n%s", rate, 100*acc, table)
			if acc < minWordAccuracy {
				t.Errorf("word accuracy %.1f%% at %d Hz, want at least %.0f%%", 100*acc, rate, 100*minWordAccuracy)
			}
		})
	}
}

// recogniseAll recognises each phrase at rate.
func recogniseAll(t *testing.T, r *Recognizer, rate int, phrases []string) []result {
	// Here, on the test's goroutine, where a missing espeak-ng may end
	// the test: the goroutines below may not.
	if _, err := speech(t, callerVoice, rate, phrases[0]); err != nil {
		t.Fatal(err)
	}
	results := make([]result, len(phrases))
	// Two streams at a time, one per core, each with a decoder of its
	// own. Each takes every other phrase, in order: a decoder's cepstral
	// mean adapts from one utterance to the next, so which utterances
	// came before matters, and must be the same every run.
	const streams = 2
	var wg sync.WaitGroup
	for k := range streams {
		wg.Go(func() {
			s, err := r.Stream(context.Background(), rate)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			for i := k; i < len(phrases); i += streams {
				res, err := recogniseText(t, s, rate, phrases[i])
				if err != nil {
					t.Errorf("%q: %v", phrases[i], err)
				}
				results[i] = res
			}
		})
	}
	wg.Wait()
	return results
}

// score returns the word accuracy of results and a table of the phrases
// recognised wrong.
func score(results []result) (float64, string) {
	var b strings.Builder
	refWords, errs := 0, 0
	fmt.Fprintf(&b, "%-4s %-50s %s\n", "errs", "said", "recognised")
	for _, res := range results {
		refWords += len(res.ref)
		errs += res.errs
		if res.errs > 0 {
			fmt.Fprintf(&b, "%-4d %-50s %s\n", res.errs, strings.Join(res.ref, " "), strings.Join(res.hyp, " "))
		}
	}
	fmt.Fprintf(&b, "%d word errors in %d words of %d phrases", errs, refWords, len(results))
	return 1 - float64(errs)/float64(refWords), b.String()
}

// result is how one phrase was recognised.
type result struct {
	ref, hyp []string
	errs     int
}

// recogniseText synthesises text in callerVoice at rate, with padding
// around it, and recognises it on s.
func recogniseText(t testing.TB, s stt.Stream, rate int, text string) (result, error) {
	sp, err := speech(t, callerVoice, rate, text)
	if err != nil {
		return result{}, err
	}
	audio := append(append(silence(rate, padding), sp...), silence(rate, padding)...)
	got, err := recognise(s, rate, audio)
	if err != nil {
		return result{}, err
	}
	hyp := words(got)
	ref := words(strings.Join(Normalise(text), " "))
	return result{ref, hyp, wordErrors(ref, hyp)}, nil
}
