package booking

import (
	"testing"

	"github.com/holdline/holdline/llm"
)

func TestDemoModelUnderstandsPartyAndTime(t *testing.T) {
	cases := []struct {
		text  string
		party int
		time  string
	}{
		{"book a table for two at seven", 2, "19:00"},
		{"Book a table for 4 people at 8pm", 4, "20:00"},
		{"table for six at 19:30", 6, "19:30"},
		{"for three at half past seven", 3, "19:30"},
		{"can we come at seven thirty, party of five", 5, "19:30"},
		{"is there something for 7pm", 0, "19:00"},
		{"a table for seven o'clock", 0, "19:00"},
		{"two people around 9", 2, "21:00"},
		{"hello", 0, ""},
	}
	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			if got := parseParty(c.text); got != c.party {
				t.Errorf("party = %d; want %d", got, c.party)
			}
			if got := parseTime(c.text); got != c.time {
				t.Errorf("time = %q; want %q", got, c.time)
			}
		})
	}
}

func requestWithUser(text string) llm.Request {
	return llm.Request{Context: llm.ChatContext{Items: []llm.Item{{Kind: llm.KindMessage, Role: llm.RoleUser, Text: text}}}}
}
