package engine

import "testing"

func TestJudgeWordsHearsCompleteAndOpenTurns(t *testing.T) {
	phrases := []string{"What's on the menu", "two pepperoni please"}
	for _, tc := range []struct {
		text string
		want wordsVerdict
	}{
		{"What's on the menu?", wordsComplete},
		{"two Pepperoni, please", wordsComplete}, // a phrase, as recognised
		{"Book a table for two at seven.", wordsComplete},
		{"Is it open?", wordsComplete},
		{"I'd like a table and", wordsOpen},
		{"Book it for, um", wordsOpen},
		{"so", wordsOpen},
		{"Can I have the", wordsOpen},
		{"Let me think...", wordsOpen},
		{"book a table for two", wordsUndecided},
		{"two pepperoni", wordsUndecided},
		{"", wordsUndecided},
		{" ... ", wordsUndecided},
	} {
		if got := judgeWords(tc.text, phrases); got != tc.want {
			t.Errorf("judgeWords(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}
