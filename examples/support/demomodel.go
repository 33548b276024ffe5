package support

import (
	"encoding/json"
	"regexp"
	"strings"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/scripted"
)

// The demo models are deterministic intent models over the chat context,
// streamed at a model's pace: not language models, just enough to run the
// example with no network and no key.

const (
	demoTTFB = 250 * time.Millisecond
	demoRate = 30 // tokens per second
)

func say(text string, calls ...scripted.Call) scripted.Response {
	return scripted.Response{TTFB: demoTTFB, TokensPerSecond: demoRate, Text: text, ToolCalls: calls}
}

// accountRe finds an account number after "account" ("account A7",
// "my account is 12345", "account number B 12"), once digits said as words
// are digits (see digits).
var (
	accountRe = regexp.MustCompile(`(?i)\baccount(?:\s+(?:number|no\.?|is|was|it's))*\s*:?\s+(?:([a-z])\s*)?(\d(?:[\s-]*\d)*)\b`)
	// bareRe is an account number on its own, as an answer to "Which
	// account is it about?".
	bareRe     = regexp.MustCompile(`(?i)^(?:it's|it is|that's|my account is|account)?\s*(?:([a-z])\s*)?(\d(?:[\s-]*\d)*)\s*[.!]?$`)
	digitWords = map[string]string{"zero": "0", "oh": "0", "one": "1", "two": "2", "three": "3", "four": "4",
		"five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12"}
)

// digits writes number words as digits: "one two three" is "1 2 3".
func digits(text string) string {
	f := strings.Fields(strings.ToLower(text))
	for i, w := range f {
		trimmed := strings.TrimRight(w, ".,!?")
		if d, ok := digitWords[trimmed]; ok {
			f[i] = d + w[len(trimmed):]
		}
	}
	return strings.Join(f, " ")
}

// account returns the account number in a caller's words, "" if none.
func account(text string) string {
	t := digits(text)
	m := accountRe.FindStringSubmatch(t)
	if m == nil {
		m = bareRe.FindStringSubmatch(strings.TrimSpace(t))
	}
	if m == nil {
		return ""
	}
	return strings.ToUpper(m[1]) + strings.NewReplacer(" ", "", "-", "").Replace(m[2])
}

// view is what a demo model reads off the context.
type view struct {
	lastUser string
	account  string
	results  map[string]string // tool name -> latest real output
	fresh    map[string]bool   // tool name -> its result came in this user turn
	called   map[string]bool
}

func read(req llm.Request) view {
	v := view{results: map[string]string{}, fresh: map[string]bool{}, called: map[string]bool{}}
	names := map[string]string{}
	for _, it := range req.Context.Items {
		switch it.Kind {
		case llm.KindMessage:
			if it.Role == llm.RoleUser {
				v.lastUser = strings.ToLower(it.Text)
				clear(v.fresh)
				if a := account(it.Text); a != "" {
					v.account = a
				}
			}
		case llm.KindToolCall:
			names[it.CallID] = it.Name
			v.called[it.Name] = true
		case llm.KindToolResult:
			if !strings.Contains(it.Output, `"status":`) {
				v.results[names[it.CallID]] = it.Output
				v.fresh[names[it.CallID]] = true
			}
		}
	}
	return v
}

// goodbye reports whether the caller is done.
func goodbye(s string) bool {
	for _, w := range []string{"bye", "that is all", "that's all", "no thanks", "no thank you", "nothing else"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// NewFrontDeskDemoModel returns the front desk's demo model.
func NewFrontDeskDemoModel() *scripted.LLM { return scripted.NewLLMFunc(frontDeskAnswer) }

func frontDeskAnswer(req llm.Request) scripted.Response {
	{
		v := read(req)
		switch {
		case v.lastUser == "":
			return say("Holdline Telecom, front desk. How can I help?")
		case goodbye(v.lastUser):
			return say("Thanks for calling Holdline Telecom. Goodbye!")
		case v.account == "":
			return say("Which account is it about?")
		case !v.called["lookup_account"]:
			args := AccountArgs{Account: v.account}
			return say("Let me look at your account and open a ticket.",
				scripted.Call{Name: "lookup_account", Args: args}, scripted.Call{Name: "open_ticket", Args: args})
		case !v.called["transfer_to_billing"] && wantsBilling(v.lastUser):
			return say("That is one for billing. I am putting you through now.", scripted.Call{Name: "transfer_to_billing", Args: struct{}{}})
		default:
			return say("Anything else I can help with?")
		}
	}
}

func wantsBilling(s string) bool {
	for _, w := range []string{"charge", "charged", "refund", "bill", "invoice"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// NewBillingDemoModel returns billing's demo model.
func NewBillingDemoModel() *scripted.LLM { return scripted.NewLLMFunc(billingAnswer) }

func billingAnswer(req llm.Request) scripted.Response {
	{
		v := read(req)
		var ticket struct {
			Ticket string `json:"ticket"`
		}
		_ = json.Unmarshal([]byte(v.results["open_ticket"]), &ticket)
		switch {
		case v.fresh["refund"]:
			return say("Done: the duplicate charge of 19.99 is refunded. Anything else?")
		case goodbye(v.lastUser):
			return say("Thanks for calling Holdline Telecom. Goodbye!")
		case v.results["refund"] != "" && wantsBilling(v.lastUser):
			return say("The duplicate charge of 19.99 is already refunded; it shows on your account in a few days. Anything else?")
		case v.results["refund"] != "":
			return say("I can help with charges, refunds and invoices. Anything else?")
		case strings.Contains(v.lastUser, "refund") && v.account != "":
			return say("Refunding the duplicate charge now.", scripted.Call{Name: "refund", Args: RefundArgs{Account: v.account, Amount: "19.99"}})
		case ticket.Ticket != "":
			return say("Your ticket is " + ticket.Ticket + ". I see two charges of 19.99; shall I refund one?")
		case v.results["lookup_account"] != "":
			return say("Billing here. I see two charges of 19.99 on your account.")
		default:
			return say("Billing here. Which account is it about?")
		}
	}
}
