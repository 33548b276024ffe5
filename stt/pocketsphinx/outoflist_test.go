package pocketsphinx

import (
	"fmt"
	"slices"
	"testing"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/media"
)

// unlisted are things a caller may say that are not among booking.Phrases,
// made of its words: new combinations of its numbers (which the grammar's
// number slots take), and new sentences (which only the free word loop
// takes).
var unlisted = []string{
	"Book a table for five at 9:30.",
	"Do you have a table for eight at six?",
	"Yes please, book it.",
	"Thank you, goodbye.",
	"No thanks, never mind.",
	"My name is Maria Smith.",
	"Can I book a table for four people?",
	"Do you have a table at eight?",
	"What times are free tonight?",
	"Okay, book it please.",
}

// TestUnlistedPhrases recognises sentences that are not in the phrase
// list but use only its words, and reports how well they come out; it
// fails only if one is not recognised at all, or if one of the words is
// not in the grammar (which would make the test meaningless).
func TestUnlistedPhrases(t *testing.T) {
	r := newRecognizer(t, WithPhrases(booking.Phrases...))
	vocab := r.Words()
	for _, p := range unlisted {
		for _, w := range Normalise(p) {
			if !slices.Contains(vocab, w) {
				t.Fatalf("%q: %q is not in the grammar", p, w)
			}
		}
	}
	for _, rate := range []int{media.Rate16k, media.Rate8k} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			results := recogniseAll(t, r, rate, unlisted)
			acc, table := score(results)
			t.Logf("word accuracy at %d Hz on unlisted sentences: %.1f%%\n%s", rate, 100*acc, table)
			for i, res := range results {
				if len(res.hyp) == 0 {
					t.Errorf("%q not recognised at all", unlisted[i])
				}
			}
		})
	}
}
