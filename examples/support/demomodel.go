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

var accountRe = regexp.MustCompile(`(?i)\baccount\s+([a-z]\d+)`)

// view is what a demo model reads off the context.
type view struct {
	lastUser string
	account  string
	results  map[string]string // tool name -> latest real output
	called   map[string]bool
}

func read(req llm.Request) view {
	v := view{results: map[string]string{}, called: map[string]bool{}}
	names := map[string]string{}
	for _, it := range req.Context.Items {
		switch it.Kind {
		case llm.KindMessage:
			if it.Role == llm.RoleUser {
				v.lastUser = strings.ToLower(it.Text)
				if m := accountRe.FindStringSubmatch(it.Text); m != nil {
					v.account = strings.ToUpper(m[1])
				}
			}
		case llm.KindToolCall:
			names[it.CallID] = it.Name
			v.called[it.Name] = true
		case llm.KindToolResult:
			if !strings.Contains(it.Output, `"status":`) {
				v.results[names[it.CallID]] = it.Output
			}
		}
	}
	return v
}

// NewFrontDeskDemoModel returns the front desk's demo model.
func NewFrontDeskDemoModel() *scripted.LLM {
	return scripted.NewLLMFunc(func(req llm.Request) scripted.Response {
		v := read(req)
		switch {
		case v.lastUser == "":
			return say("Holdline Telecom, front desk. How can I help?")
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
	})
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
func NewBillingDemoModel() *scripted.LLM {
	return scripted.NewLLMFunc(func(req llm.Request) scripted.Response {
		v := read(req)
		var ticket struct {
			Ticket string `json:"ticket"`
		}
		_ = json.Unmarshal([]byte(v.results["open_ticket"]), &ticket)
		switch {
		case v.results["refund"] != "":
			return say("Done: the duplicate charge of 19.99 is refunded.")
		case strings.Contains(v.lastUser, "refund") && v.account != "":
			return say("Refunding the duplicate charge now.", scripted.Call{Name: "refund", Args: RefundArgs{Account: v.account, Amount: "19.99"}})
		case ticket.Ticket != "":
			return say("Your ticket is " + ticket.Ticket + ". I see two charges of 19.99; shall I refund one?")
		case v.results["lookup_account"] != "":
			return say("Billing here. I see two charges of 19.99 on your account.")
		default:
			return say("Billing here. Which account is it about?")
		}
	})
}
