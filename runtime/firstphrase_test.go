package runtime

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/scripted"
)

// The first phrase goes to the voice at the first comma after the words
// WithFirstPhrase asks for; later phrases end at sentence ends, and every
// word is spoken once.
func TestFirstPhraseEndsAtAClauseAfterTheWordsAskedFor(t *testing.T) {
	const answer = "Of course, let me check that for you, one moment. It is free, yes."
	for _, tc := range []struct {
		words int
		want  []string
	}{
		{2, []string{"Of course,", "let me check that for you, one moment.", "It is free, yes."}},
		{4, []string{"Of course, let me check that for you,", "one moment.", "It is free, yes."}},
		{-1, []string{"Of course, let me check that for you, one moment.", "It is free, yes."}},
	} {
		synctest.Test(t, func(t *testing.T) {
			h := start(t, setup{
				opts:      []Option{WithFirstPhrase(tc.words)},
				responses: []scripted.Response{{TTFB: 100 * time.Millisecond, Text: answer}},
			})
			if err := h.s.Inject(context.Background(), "Is there a table?"); err != nil {
				t.Fatal(err)
			}
			h.waitFor(events.PlayoutDone, nil, 30*time.Second)
			if got := h.voice.Texts(); !slices.Equal(got, tc.want) {
				t.Errorf("WithFirstPhrase(%d): the voice was asked for %q, want %q", tc.words, got, tc.want)
			}
		})
	}
	if _, err := New(&Agent{Name: "a", Model: scripted.NewLLM()}, WithFirstPhrase(0)); err == nil {
		t.Error("WithFirstPhrase(0) accepted")
	}
}
