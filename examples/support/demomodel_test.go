package support

import (
	"strings"
	"testing"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/scripted"
)

// Account numbers as callers give them: letter and digits, plain digits,
// digits spoken as words (as a recogniser writes them).
func TestAccountNumbersAsCallersSayThem(t *testing.T) {
	for _, c := range []struct{ say, want string }{
		{"I was charged twice on account A7.", "A7"},
		{"i was charged twice on account a seven", "A7"},
		{"My account is 12345", "12345"},
		{"my account is one two three four five", "12345"},
		{"My account number is 4 0 1 7 2.", "40172"},
		{"It's 12345.", "12345"},
		{"account b twelve", "B12"},
		{"I was charged twice", ""},
		{"yes please", ""},
	} {
		if got := account(c.say); got != c.want {
			t.Errorf("account(%q) = %q; want %q", c.say, got, c.want)
		}
	}
}

func user(text string) llm.Item {
	return llm.Item{Kind: llm.KindMessage, Role: llm.RoleUser, Text: text}
}

func ask(f func(llm.Request) scripted.Response, items ...llm.Item) scripted.Response {
	return f(llm.Request{Context: llm.ChatContext{Items: items}})
}

// The front desk greets, takes a plain account number (looking it up),
// and says goodbye to a caller who is done.
func TestFrontDeskGreetsTakesPlainAccountsAndSaysGoodbye(t *testing.T) {
	if r := ask(frontDeskAnswer); !strings.Contains(r.Text, "How can I help?") {
		t.Errorf("greeting %q", r.Text)
	}
	r := ask(frontDeskAnswer, user("My account is 12345"))
	if len(r.ToolCalls) == 0 || r.ToolCalls[0].Name != "lookup_account" || r.ToolCalls[0].Args.(AccountArgs).Account != "12345" {
		t.Errorf("plain account: %q %+v; want a lookup of 12345", r.Text, r.ToolCalls)
	}
	if r := ask(frontDeskAnswer, user("Bye.")); !strings.Contains(r.Text, "Goodbye") {
		t.Errorf("bye: %q", r.Text)
	}
}

// After a refund, billing says it once; a later "bye" ends politely, and
// other requests are answered, not with the refund again.
func TestBillingLeavesTheRefundState(t *testing.T) {
	done := []llm.Item{
		user("Yes, refund one please."),
		{Kind: llm.KindToolCall, CallID: "r1", Name: "refund"},
		{Kind: llm.KindToolResult, CallID: "r1", Name: "refund", Output: `{"refunded":"19.99"}`},
	}
	// The account came earlier in the call.
	items := append([]llm.Item{user("I was charged twice on account A7.")}, done...)
	if r := ask(billingAnswer, items...); !strings.Contains(r.Text, "is refunded") {
		t.Fatalf("the refund: %q", r.Text)
	}
	items = append(items, llm.Item{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "Done."})
	for _, c := range []struct{ say, want string }{
		{"bye", "Goodbye"},
		{"that is all, thank you", "Goodbye"},
		{"can I have a refund?", "already refunded"},
		{"what plans do you have?", "Anything else?"},
	} {
		r := ask(billingAnswer, append(items, user(c.say))...)
		if !strings.Contains(r.Text, c.want) || strings.Contains(r.Text, "is refunded") || len(r.ToolCalls) > 0 {
			t.Errorf("%q after the refund: %q %+v; want %q and no call", c.say, r.Text, r.ToolCalls, c.want)
		}
	}
}
